//! The body of a BATCH field (batch-index protocol, reference section 8.1): a row count, parent
//! flags, then one row per key, each a single-record command in compact form.
//!
//! Layout (big-endian):
//!
//! ```text
//! u32 row_count, u8 parent_flags, then row_count rows:
//!   u32 index, 20-byte digest, u8 row_flags
//!   REPEAT:      nothing more; the previous full row's header, fields and ops apply
//!   otherwise:   u8 info1, [u8 info2, u8 info3] if HAS_EXTRA_INFO, [u8 info4] if HAS_INFO4,
//!                [u16 generation] if HAS_GENERATION, [u32 record_ttl] if HAS_RECORD_TTL,
//!                u16 field_count (0 means 1), u16 op_count, fields (NAMESPACE first), ops
//! ```
//!
//! Invariants:
//! - Nothing is allocated, and nothing is reserved by a declared count: `row_count` is only
//!   compared with the rows actually present, which are parsed one at a time from the slice.
//! - A yielded [`BatchRow`] is as valid as a parsed [`crate::Message`]: its fields lie inside
//!   the body, its first field is its namespace, and its ops passed [`OpIter::parse`], so
//!   iterating them cannot fail.
//! - A REPEAT row yields the header, fields and ops of the last full row with its own index and
//!   digest; it is malformed as the first row or after a row that carried a KEY field (the key
//!   belongs to one digest only).
//! - [`BatchRows`] yields exactly `row_count` rows, or stops at its first error: a malformed
//!   row, missing rows, or bytes after the last row. Nothing follows an error.

use model::Digest;

use crate::{Fields, Malformed, MessageHeader, OpIter, field_type};

/// Bits of the parent flags byte that follows the row count.
pub mod batch_parent_flags {
    /// The server may run rows inline on the receiving thread (in-memory namespaces).
    pub const ALLOW_INLINE: u8 = 0x01;
    /// The server may run rows inline for SSD namespaces too.
    pub const ALLOW_INLINE_SSD: u8 = 0x02;
    /// Answer every row, whatever its result; without it a row error ends the batch.
    pub const REPORT_ALL_ERRORS: u8 = 0x04;
    /// Set by the newer clients on every batch-any request.
    pub const REPORT_ERROR_RECORD: u8 = 0x08;
}

/// Bits of a row's flags byte.
pub mod batch_row_flags {
    /// The row reuses the previous full row's namespace, set, fields, ops and attributes.
    pub const REPEAT: u8 = 0x01;
    /// info2 and info3 follow info1.
    pub const HAS_EXTRA_INFO: u8 = 0x02;
    /// A 16-bit generation follows.
    pub const HAS_GENERATION: u8 = 0x04;
    /// A 32-bit record TTL (reads: read-touch percent) follows.
    pub const HAS_RECORD_TTL: u8 = 0x08;
    /// info4 (transaction flags) follows.
    pub const HAS_INFO4: u8 = 0x10;
    /// Every bit a client sends; any other bit could announce bytes this parser cannot skip.
    pub(crate) const KNOWN: u8 =
        REPEAT | HAS_EXTRA_INFO | HAS_GENERATION | HAS_RECORD_TTL | HAS_INFO4;
}

/// Row count and parent flags: the fixed start of a BATCH field body.
const BATCH_HEADER_SIZE_BYTES: usize = 4 + 1;

/// Index, digest and flags: the part every row has, REPEAT or not.
const ROW_PREFIX_SIZE_BYTES: usize = 4 + Digest::SIZE_BYTES + 1;

/// Where a field's type byte sits: after its u32 size.
const FIELD_TYPE_OFFSET: usize = 4;

const _: () = assert!(ROW_PREFIX_SIZE_BYTES == 25);
const _: () = assert!(batch_row_flags::KNOWN == 0x1f);

/// A parsed BATCH field body: the header, with the rows left to iterate.
#[derive(Clone, Copy, Debug)]
pub struct BatchRequest<'a> {
    /// How many rows the client declared (only ever compared, never trusted).
    pub row_count: u32,
    /// The parent flags ([`batch_parent_flags`]).
    pub parent_flags: u8,
    /// The bytes after the header, not yet validated.
    rows: &'a [u8],
}

/// Where a [`BatchRows`] iterator stands, so that a caller that cannot keep the iterator (it
/// borrows the body) can resume it later over the same bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchPosition {
    /// Offset of the next row inside the rows region.
    offset: usize,
    /// Rows already yielded.
    rows_yielded: u32,
    /// Offset of the last full (non-REPEAT) row, which later REPEAT rows copy.
    template_offset: Option<usize>,
}

impl BatchPosition {
    /// Before the first row.
    pub const START: BatchPosition = BatchPosition {
        offset: 0,
        rows_yielded: 0,
        template_offset: None,
    };
}

/// One row: the single-record command it stands for, with its index and digest.
#[derive(Clone, Debug)]
pub struct BatchRow<'a> {
    /// The row's position in the client's key list, echoed in its reply.
    pub index: u32,
    /// The record.
    pub digest: Digest,
    /// The command header this row describes: info1..info4, generation (widened from 16
    /// bits), record TTL, field and op counts; absent parts are 0, as is `transaction_ttl`.
    pub header: MessageHeader,
    /// The row's fields; the namespace is always present.
    pub fields: Fields<'a>,
    /// Whether the row was a REPEAT of the previous full row.
    pub repeated: bool,
    /// The validated ops, not yet iterated.
    ops: OpIter<'a>,
}

/// The parts of a full row that REPEAT rows reuse.
#[derive(Clone, Debug)]
struct RowTemplate<'a> {
    header: MessageHeader,
    fields: Fields<'a>,
    ops: OpIter<'a>,
}

/// The rows of a batch, parsed lazily; see the module invariants.
#[derive(Clone, Debug)]
pub struct BatchRows<'a> {
    rows: &'a [u8],
    row_count: u32,
    position: BatchPosition,
    template: Option<RowTemplate<'a>>,
    /// Set after an error has been yielded: nothing follows it.
    failed: bool,
}

impl<'a> BatchRequest<'a> {
    /// Reads the row count and parent flags at the start of a BATCH field's data.
    ///
    /// # Errors
    ///
    /// [`Malformed`] when the data is shorter than those 5 bytes. A row count of 0 or one too
    /// large is the caller's to judge (Aerospike answers PARAMETER and BATCH_MAX_REQUESTS).
    pub fn parse(data: &'a [u8]) -> Result<BatchRequest<'a>, Malformed> {
        let (header, rows) =
            data.split_first_chunk::<BATCH_HEADER_SIZE_BYTES>()
                .ok_or(Malformed::new(
                    "batch body is shorter than its 5-byte header",
                ))?;
        let [c0, c1, c2, c3, parent_flags] = *header;
        Ok(BatchRequest {
            row_count: u32::from_be_bytes([c0, c1, c2, c3]),
            parent_flags,
            rows,
        })
    }

    /// Whether every row is answered whatever its result (parent flag REPORT_ALL_ERRORS).
    pub fn reports_all_errors(&self) -> bool {
        self.parent_flags & batch_parent_flags::REPORT_ALL_ERRORS != 0
    }

    /// The rows from the first.
    pub fn rows(&self) -> BatchRows<'a> {
        self.rows_from(BatchPosition::START)
    }

    /// The rows from `position`, which an iterator over this same body reported.
    pub fn rows_from(&self, position: BatchPosition) -> BatchRows<'a> {
        let mut iter = BatchRows {
            rows: self.rows,
            row_count: self.row_count,
            position,
            template: None,
            failed: false,
        };
        if let Some(offset) = position.template_offset {
            // The template parsed once already; it can only fail if the body changed.
            match self.rows.get(offset..).map(parse_full_row) {
                Some(Ok((template, _))) => iter.template = Some(template),
                _ => iter.failed = true,
            }
        }
        iter
    }
}

impl<'a> BatchRow<'a> {
    /// The row's ops in order (infallible: they were validated).
    pub fn ops(&self) -> OpIter<'a> {
        self.ops.clone()
    }
}

impl<'a> BatchRows<'a> {
    /// Where this iterator stands, to resume it with [`BatchRequest::rows_from`].
    pub fn position(&self) -> BatchPosition {
        self.position
    }

    fn parse_next(&mut self) -> Result<BatchRow<'a>, Malformed> {
        let row_offset = self.position.offset;
        let bytes = self
            .rows
            .get(row_offset..)
            .ok_or(Malformed::new("batch position is past the body"))?;
        let (prefix, rest) = bytes
            .split_first_chunk::<ROW_PREFIX_SIZE_BYTES>()
            .ok_or(Malformed::new("batch ends before its declared row count"))?;
        let (index, digest, flags) = split_row_prefix(prefix);
        if flags & !batch_row_flags::KNOWN != 0 {
            return Err(Malformed::new("batch row has unknown flag bits"));
        }
        let (template, rest) = if flags & batch_row_flags::REPEAT != 0 {
            (self.repeated_template()?, rest)
        } else {
            let (template, rest) = parse_full_row_body(flags, rest)?;
            self.template = Some(template.clone());
            self.position.template_offset = Some(row_offset);
            (template, rest)
        };
        self.position.offset = self.rows.len() - rest.len();
        self.position.rows_yielded += 1;
        Ok(BatchRow {
            index,
            digest,
            header: template.header,
            fields: template.fields,
            repeated: flags & batch_row_flags::REPEAT != 0,
            ops: template.ops,
        })
    }

    fn repeated_template(&self) -> Result<RowTemplate<'a>, Malformed> {
        let template = self
            .template
            .clone()
            .ok_or(Malformed::new("the first batch row is a REPEAT"))?;
        if template.fields.key.is_some() {
            return Err(Malformed::new(
                "a REPEAT row follows a row with a KEY field",
            ));
        }
        Ok(template)
    }
}

impl<'a> Iterator for BatchRows<'a> {
    type Item = Result<BatchRow<'a>, Malformed>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let result = if self.position.rows_yielded < self.row_count {
            self.parse_next()
        } else if self.position.offset < self.rows.len() {
            Err(Malformed::new("bytes follow the last batch row"))
        } else {
            return None;
        };
        self.failed = result.is_err();
        Some(result)
    }
}

impl std::iter::FusedIterator for BatchRows<'_> {}

/// Appends the start of a BATCH field body: row count and parent flags (for tests, clients and
/// the bench tool; rows follow with [`encode_batch_row`] and [`encode_batch_repeat_row`]).
pub fn encode_batch_header(out: &mut Vec<u8>, row_count: u32, parent_flags: u8) {
    out.extend_from_slice(&row_count.to_be_bytes());
    out.push(parent_flags);
}

/// Appends one full row carrying every part of `header` (info1..info3, generation, record TTL,
/// and info4 when it is not 0), then `fields` as `(type, data)` pairs and `ops`; the counts come
/// from the slices. The first field must be the namespace for the row to parse back.
///
/// # Panics
///
/// If `header.generation` does not fit the 16 bits a row carries, or there are more than
/// `u16::MAX` fields or ops: such a row cannot be expressed on the wire.
pub fn encode_batch_row(
    out: &mut Vec<u8>,
    index: u32,
    digest: &Digest,
    header: &MessageHeader,
    fields: &[(u8, &[u8])],
    ops: &[model::Op<'_>],
) {
    use batch_row_flags::{HAS_EXTRA_INFO, HAS_GENERATION, HAS_INFO4, HAS_RECORD_TTL};
    let generation = u16::try_from(header.generation).expect("batch rows carry 16 bits");
    let has_info4 = if header.info4 != 0 { HAS_INFO4 } else { 0 };
    out.extend_from_slice(&index.to_be_bytes());
    out.extend_from_slice(&digest.0);
    out.push(HAS_EXTRA_INFO | HAS_GENERATION | HAS_RECORD_TTL | has_info4);
    out.extend_from_slice(&[header.info1, header.info2, header.info3]);
    if has_info4 != 0 {
        out.push(header.info4);
    }
    out.extend_from_slice(&generation.to_be_bytes());
    out.extend_from_slice(&header.record_ttl.to_be_bytes());
    let field_count = u16::try_from(fields.len()).expect("at most u16::MAX fields");
    let op_count = u16::try_from(ops.len()).expect("at most u16::MAX ops");
    out.extend_from_slice(&field_count.to_be_bytes());
    out.extend_from_slice(&op_count.to_be_bytes());
    for (field_type, data) in fields {
        crate::write_field(out, *field_type, data);
    }
    for op in ops {
        crate::write_op(out, op.code as u8, op.particle_type, op.bin_name, op.value);
    }
}

/// Appends a REPEAT row: index, digest and the REPEAT flag.
pub fn encode_batch_repeat_row(out: &mut Vec<u8>, index: u32, digest: &Digest) {
    out.extend_from_slice(&index.to_be_bytes());
    out.extend_from_slice(&digest.0);
    out.push(batch_row_flags::REPEAT);
}

fn split_row_prefix(prefix: &[u8; ROW_PREFIX_SIZE_BYTES]) -> (u32, Digest, u8) {
    let (index, rest) = prefix.split_at(4);
    let (digest, flags) = rest.split_at(Digest::SIZE_BYTES);
    let index = u32::from_be_bytes([index[0], index[1], index[2], index[3]]);
    let digest = Digest::from_slice(digest).expect("the prefix holds exactly 20 digest bytes");
    (index, digest, flags[0])
}

/// Parses a full row from its prefix on, returning its template and the bytes after it.
fn parse_full_row(bytes: &[u8]) -> Result<(RowTemplate<'_>, &[u8]), Malformed> {
    let (prefix, rest) = bytes
        .split_first_chunk::<ROW_PREFIX_SIZE_BYTES>()
        .ok_or(Malformed::new("batch row prefix is truncated"))?;
    let (_, _, flags) = split_row_prefix(prefix);
    parse_full_row_body(flags, rest)
}

/// Parses what follows the flags byte of a full row.
fn parse_full_row_body(flags: u8, bytes: &[u8]) -> Result<(RowTemplate<'_>, &[u8]), Malformed> {
    let mut rest = bytes;
    let header = parse_row_header(flags, &mut rest)?;
    if rest.get(FIELD_TYPE_OFFSET) != Some(&field_type::NAMESPACE) {
        return Err(Malformed::new(
            "the first field of a batch row is not its namespace",
        ));
    }
    let (fields, rest) = Fields::parse(rest, header.field_count)?;
    let (ops, rest) = OpIter::parse(rest, header.op_count)?;
    let template = RowTemplate {
        header,
        fields,
        ops,
    };
    Ok((template, rest))
}

/// Reads the optional info, generation and TTL parts and the counts, as a message header.
fn parse_row_header(flags: u8, rest: &mut &[u8]) -> Result<MessageHeader, Malformed> {
    use batch_row_flags::{HAS_EXTRA_INFO, HAS_GENERATION, HAS_INFO4, HAS_RECORD_TTL};
    let has = |bit: u8| flags & bit != 0;
    let [info1] = take::<1>(rest)?;
    let [info2, info3] = if has(HAS_EXTRA_INFO) {
        take::<2>(rest)?
    } else {
        [0, 0]
    };
    let [info4] = if has(HAS_INFO4) {
        take::<1>(rest)?
    } else {
        [0]
    };
    let generation = if has(HAS_GENERATION) {
        u16::from_be_bytes(take(rest)?)
    } else {
        0
    };
    let record_ttl = if has(HAS_RECORD_TTL) {
        u32::from_be_bytes(take(rest)?)
    } else {
        0
    };
    let field_count = u16::from_be_bytes(take(rest)?);
    let op_count = u16::from_be_bytes(take(rest)?);
    Ok(MessageHeader {
        info1,
        info2,
        info3,
        info4,
        result_code: 0,
        generation: u32::from(generation),
        record_ttl,
        transaction_ttl: 0,
        // Older clients sent 0 but always sent the namespace (Aerospike's `batch.c`).
        field_count: field_count.max(1),
        op_count,
    })
}

/// Takes `N` bytes off the front of `rest`.
fn take<const N: usize>(rest: &mut &[u8]) -> Result<[u8; N], Malformed> {
    let (taken, after) = rest
        .split_first_chunk::<N>()
        .ok_or(Malformed::new("batch row header is truncated"))?;
    *rest = after;
    Ok(*taken)
}

#[cfg(test)]
mod tests {
    use model::{Op, OpCode};

    use super::*;

    fn digest(seed: u8) -> Digest {
        Digest([seed; 20])
    }

    fn read_header() -> MessageHeader {
        MessageHeader {
            info1: crate::info1::READ,
            record_ttl: 7,
            ..MessageHeader::default()
        }
    }

    fn body_with(row_count: u32, rows: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
        let mut body = Vec::new();
        encode_batch_header(&mut body, row_count, batch_parent_flags::REPORT_ALL_ERRORS);
        rows(&mut body);
        body
    }

    fn collect(body: &[u8]) -> Vec<Result<BatchRow<'_>, Malformed>> {
        BatchRequest::parse(body).unwrap().rows().collect()
    }

    #[test]
    fn parse_reads_a_full_row_with_every_optional_part() {
        let header = MessageHeader {
            info1: 1,
            info2: 0x81,
            info3: 0x08,
            info4: 0x10,
            generation: 0xfffe,
            record_ttl: 0x0102_0304,
            ..MessageHeader::default()
        };
        let write = Op {
            code: OpCode::Write,
            particle_type: 3,
            bin_name: b"b",
            value: b"v",
        };
        let fields: [(u8, &[u8]); 3] = [
            (field_type::NAMESPACE, b"test"),
            (field_type::SET, b"s"),
            (field_type::KEY, b"\x03k"),
        ];
        let body = body_with(1, |out| {
            encode_batch_row(out, 9, &digest(1), &header, &fields, &[write]);
        });
        let request = BatchRequest::parse(&body).unwrap();
        assert_eq!(request.row_count, 1);
        assert!(request.reports_all_errors());
        let rows = collect(&body);
        assert_eq!(rows.len(), 1);
        let row = rows[0].as_ref().unwrap();
        assert_eq!((row.index, row.digest, row.repeated), (9, digest(1), false));
        let expected = MessageHeader {
            field_count: 3,
            op_count: 1,
            ..header
        };
        assert_eq!(row.header, expected);
        assert_eq!(row.fields.namespace, Some(&b"test"[..]));
        assert_eq!(row.fields.key, Some(&b"\x03k"[..]));
        assert_eq!(row.ops().collect::<Vec<_>>(), [write]);
    }

    #[test]
    fn a_legacy_row_has_info1_only_and_a_field_count_of_0_means_1() {
        // Old clients' rows: flags 0, info1, n_fields 0 and the namespace field anyway.
        let body = body_with(1, |out| {
            out.extend_from_slice(&3u32.to_be_bytes());
            out.extend_from_slice(&digest(2).0);
            out.extend_from_slice(&[0, crate::info1::READ | crate::info1::GET_ALL, 0, 0, 0, 0]);
            crate::write_field(out, field_type::NAMESPACE, b"ns");
        });
        let rows = collect(&body);
        let row = rows[0].as_ref().unwrap();
        assert_eq!(row.header.info1, 3);
        assert_eq!((row.header.info2, row.header.field_count), (0, 1));
        assert_eq!(row.fields.namespace, Some(&b"ns"[..]));
        assert_eq!(rows.len(), 1);
    }

    #[test]
    fn repeat_rows_reuse_the_last_full_row_with_their_own_index_and_digest() {
        let ns: [(u8, &[u8]); 1] = [(field_type::NAMESPACE, b"a")];
        let other: [(u8, &[u8]); 1] = [(field_type::NAMESPACE, b"b")];
        let body = body_with(4, |out| {
            encode_batch_row(out, 0, &digest(0), &read_header(), &ns, &[]);
            encode_batch_repeat_row(out, 1, &digest(1));
            encode_batch_row(out, 2, &digest(2), &read_header(), &other, &[]);
            encode_batch_repeat_row(out, 3, &digest(3));
        });
        let rows: Vec<BatchRow<'_>> = collect(&body).into_iter().map(Result::unwrap).collect();
        let seen: Vec<_> = rows
            .iter()
            .map(|row| (row.index, row.digest, row.repeated, row.fields.namespace))
            .collect();
        assert_eq!(
            seen,
            [
                (0, digest(0), false, Some(&b"a"[..])),
                (1, digest(1), true, Some(&b"a"[..])),
                (2, digest(2), false, Some(&b"b"[..])),
                (3, digest(3), true, Some(&b"b"[..])),
            ]
        );
        assert_eq!(rows[1].header, rows[0].header);
    }

    #[test]
    fn a_repeat_first_or_after_a_keyed_row_is_malformed() {
        let first = body_with(1, |out| encode_batch_repeat_row(out, 0, &digest(0)));
        assert_single_error(&first);
        let keyed: [(u8, &[u8]); 2] = [(field_type::NAMESPACE, b"a"), (field_type::KEY, b"\x01")];
        let after_key = body_with(2, |out| {
            encode_batch_row(out, 0, &digest(0), &read_header(), &keyed, &[]);
            encode_batch_repeat_row(out, 1, &digest(1));
        });
        let rows = collect(&after_key);
        assert_eq!(rows.len(), 2);
        assert!(rows[0].is_ok() && rows[1].is_err());
    }

    #[test]
    fn a_row_whose_first_field_is_not_the_namespace_is_malformed() {
        let fields: [(u8, &[u8]); 2] = [(field_type::SET, b"s"), (field_type::NAMESPACE, b"a")];
        let body = body_with(1, |out| {
            encode_batch_row(out, 0, &digest(0), &read_header(), &fields, &[]);
        });
        assert_single_error(&body);
    }

    #[test]
    fn unknown_row_flags_are_malformed() {
        let mut body = body_with(1, |out| encode_batch_repeat_row(out, 0, &digest(0)));
        let flags_at = BATCH_HEADER_SIZE_BYTES + ROW_PREFIX_SIZE_BYTES - 1;
        body[flags_at] = 0x20;
        assert_single_error(&body);
    }

    #[test]
    fn a_huge_declared_row_count_with_few_bytes_fails_at_once() {
        // n_rows claims 4 billion rows; 10 bytes follow. Parsing must neither reserve for the
        // count nor loop over it.
        let mut body = Vec::new();
        encode_batch_header(&mut body, u32::MAX, 0);
        body.extend_from_slice(&[0; 10]);
        assert_single_error(&body);
        let empty = body_with(u32::MAX, |_| {});
        assert_single_error(&empty);
    }

    #[test]
    fn bytes_after_the_last_row_and_a_short_header_are_malformed() {
        let ns: [(u8, &[u8]); 1] = [(field_type::NAMESPACE, b"a")];
        let body = body_with(1, |out| {
            encode_batch_row(out, 0, &digest(0), &read_header(), &ns, &[]);
            out.push(0);
        });
        let rows = collect(&body);
        assert_eq!(rows.len(), 2);
        assert!(rows[0].is_ok() && rows[1].is_err());
        assert!(BatchRequest::parse(&[0, 0, 0, 1]).is_err());
        assert_eq!(collect(&body_with(0, |_| {})).len(), 0);
    }

    #[test]
    fn rows_from_a_position_resume_where_the_iterator_stood() {
        let ns: [(u8, &[u8]); 1] = [(field_type::NAMESPACE, b"a")];
        let body = body_with(5, |out| {
            encode_batch_row(out, 0, &digest(0), &read_header(), &ns, &[]);
            encode_batch_repeat_row(out, 1, &digest(1));
            encode_batch_repeat_row(out, 2, &digest(2));
            encode_batch_row(out, 3, &digest(3), &read_header(), &ns, &[]);
            encode_batch_repeat_row(out, 4, &digest(4));
        });
        let request = BatchRequest::parse(&body).unwrap();
        let all: Vec<_> = request.rows().map(Result::unwrap).collect();
        for split in 0..=all.len() {
            let mut rows = request.rows();
            rows.by_ref().take(split).for_each(drop);
            let resumed: Vec<_> = request
                .rows_from(rows.position())
                .map(Result::unwrap)
                .collect();
            let indexes: Vec<u32> = resumed.iter().map(|row| row.index).collect();
            let expected: Vec<u32> = all[split..].iter().map(|row| row.index).collect();
            assert_eq!(indexes, expected, "resumed after {split} rows");
            assert!(
                resumed
                    .iter()
                    .zip(&all[split..])
                    .all(|(a, b)| a.header == b.header)
            );
        }
    }

    fn assert_single_error(body: &[u8]) {
        let rows = collect(body);
        assert_eq!(rows.len(), 1, "{rows:?}");
        assert!(rows[0].is_err(), "{rows:?}");
    }

    /// Random draws: SipHash of (seed, draw number). Deterministic for a seed, so a failure
    /// replays, and with no generator state beyond a counter.
    struct Prng {
        seed: u64,
        draws: u64,
    }

    impl Prng {
        fn next(&mut self) -> u64 {
            let mut hasher = std::hash::DefaultHasher::new();
            std::hash::Hash::hash(&(self.seed, self.draws), &mut hasher);
            self.draws += 1;
            std::hash::Hasher::finish(&hasher)
        }

        fn below(&mut self, bound: u64) -> u64 {
            self.next() % bound
        }
    }

    fn fuzz_seed() -> u64 {
        let seed = std::env::var("SEED").ok().and_then(|s| s.parse().ok());
        let seed = seed.unwrap_or_else(|| {
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
            now.map_or(1, |elapsed| elapsed.as_nanos() as u64)
        });
        // Printed so that a failure can be replayed with SEED=<seed>.
        println!("batch fuzz seed: SEED={seed}");
        seed
    }

    /// A random valid body and the (index, repeated) of each row it holds.
    fn random_body(prng: &mut Prng) -> (Vec<u8>, Vec<(u32, bool)>) {
        let row_count = prng.below(12) as u32;
        let mut rows = Vec::new();
        let mut body = body_with(row_count, |out| {
            for index in 0..row_count {
                let repeat = index > 0 && prng.below(3) == 0;
                if repeat {
                    encode_batch_repeat_row(out, index, &digest(index as u8));
                } else {
                    encode_random_full_row(prng, out, index);
                }
                rows.push((index, repeat));
            }
        });
        if prng.below(2) == 0 {
            // Exercise the legacy parent flags byte too.
            body[4] = prng.next() as u8;
        }
        (body, rows)
    }

    fn encode_random_full_row(prng: &mut Prng, out: &mut Vec<u8>, index: u32) {
        let header = MessageHeader {
            info1: prng.next() as u8,
            info2: prng.next() as u8,
            info3: prng.next() as u8,
            info4: prng.below(2) as u8,
            generation: prng.below(1 << 16) as u32,
            record_ttl: prng.next() as u32,
            ..MessageHeader::default()
        };
        let names: [&[u8]; 3] = [b"", b"a", b"bin"];
        let ops: Vec<Op<'_>> = (0..prng.below(4))
            .map(|_| Op {
                code: OpCode::Read,
                particle_type: 0,
                bin_name: names[prng.below(3) as usize],
                value: b"",
            })
            .collect();
        let fields: [(u8, &[u8]); 2] = [(field_type::NAMESPACE, b"test"), (field_type::SET, b"")];
        encode_batch_row(out, index, &digest(index as u8), &header, &fields, &ops);
    }

    #[test]
    fn fuzz_random_truncated_and_mutated_bodies_never_panic_and_stop_at_an_error() {
        // Valid bodies parse back exactly; every truncation and random byte corruption of them
        // yields at most row_count + 1 items, the last of which is the only error, if any.
        let mut prng = Prng {
            seed: fuzz_seed(),
            draws: 0,
        };
        for _ in 0..300 {
            let (body, expected) = random_body(&mut prng);
            let parsed: Vec<(u32, bool)> = collect(&body)
                .into_iter()
                .map(|row| row.map(|row| (row.index, row.repeated)).unwrap())
                .collect();
            assert_eq!(parsed, expected);
            for length in 0..body.len() {
                check_stops_cleanly(&body[..length]);
            }
            let mut mutated = body.clone();
            for _ in 0..=prng.below(4) {
                let at = prng.below(mutated.len() as u64) as usize;
                mutated[at] = prng.next() as u8;
            }
            check_stops_cleanly(&mutated);
            let garbage: Vec<u8> = (0..prng.below(64)).map(|_| prng.next() as u8).collect();
            check_stops_cleanly(&garbage);
        }
    }

    fn check_stops_cleanly(body: &[u8]) {
        let Ok(request) = BatchRequest::parse(body) else {
            assert!(body.len() < BATCH_HEADER_SIZE_BYTES);
            return;
        };
        let items: Vec<_> = request.rows().collect();
        assert!(items.len() as u64 <= u64::from(request.row_count) + 1);
        if let Some(error_at) = items.iter().position(Result::is_err) {
            assert_eq!(error_at, items.len() - 1, "an error is the last item");
        }
        for row in items.iter().flatten() {
            assert!(row.fields.namespace.is_some());
            assert_eq!(row.ops().count(), usize::from(row.header.op_count));
        }
    }
}
