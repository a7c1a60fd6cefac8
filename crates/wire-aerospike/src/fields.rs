//! The fields of a message: `u32 size` (type byte plus data), `u8 type`, data.
//!
//! Invariants:
//! - [`Fields::parse`] reads exactly the number of fields asked for, each with a size of at least
//!   1 that lies inside the input; anything else is [`Malformed`].
//! - The first field of a recognized type wins; later duplicates are ignored, as the server looks
//!   fields up by type and takes the first match.
//! - Every field lands in exactly one place: a named slot, `udf`, or `other_field_count`.

use crate::{Malformed, field_type};

/// The fields of a message, gathered in one pass. Absent = `None`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Fields<'a> {
    /// NAMESPACE field data.
    pub namespace: Option<&'a [u8]>,
    /// SET field data (may be empty: no set).
    pub set: Option<&'a [u8]>,
    /// Raw KEY field data: particle type byte plus key bytes (may be empty; the caller decides).
    pub key: Option<&'a [u8]>,
    /// Raw DIGEST field data; its length is not checked here (the caller replies PARAMETER if it
    /// is not 20).
    pub digest: Option<&'a [u8]>,
    /// FILTER_EXP field data (a packed expression).
    pub filter_expression: Option<&'a [u8]>,
    /// Whether any of UDF_FILENAME, UDF_FUNCTION, UDF_ARGLIST or UDF_OP is present.
    pub udf: bool,
    /// The UDF fields themselves.
    pub udf_call: UdfFields<'a>,
    /// BATCH or BATCH_WITH_SET field data.
    pub batch: Option<&'a [u8]>,
    /// The fields of scans and queries.
    pub scan: ScanFields<'a>,
    /// How many fields of any other type (scan, query, transaction fields) were present, kept
    /// for the caller to decide.
    pub other_field_count: u16,
}

/// The fields of a UDF call, raw.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UdfFields<'a> {
    /// UDF_FILENAME: the module's name (without `.lua`).
    pub module: Option<&'a [u8]>,
    /// UDF_FUNCTION: the function's name.
    pub function: Option<&'a [u8]>,
    /// UDF_ARGLIST: a msgpack array of the arguments.
    pub arguments: Option<&'a [u8]>,
    /// UDF_OP: 0 record UDF, 1 aggregation, 2 background (one byte).
    pub op: Option<&'a [u8]>,
}

/// Fields only scans and queries carry, raw (lengths are the caller's to check).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScanFields<'a> {
    /// TRID: the client's task id, u64 big-endian.
    pub task_id: Option<&'a [u8]>,
    /// SOCKET_TIMEOUT: u32 big-endian milliseconds.
    pub socket_timeout: Option<&'a [u8]>,
    /// RECORDS_PER_SECOND: u32 big-endian.
    pub records_per_second: Option<&'a [u8]>,
    /// PID_ARRAY: partition ids to scan from the start, u16 little-endian each.
    pub partition_ids: Option<&'a [u8]>,
    /// DIGEST_ARRAY: partitions to resume, one 20-byte digest each.
    pub resume_digests: Option<&'a [u8]>,
    /// MAX_RECORDS: u64 big-endian.
    pub max_records: Option<&'a [u8]>,
    /// INDEX_RANGE: a secondary-index filter (makes the request a query).
    pub index_range: Option<&'a [u8]>,
    /// INDEX_NAME: the secondary index to query, by name.
    pub index_name: Option<&'a [u8]>,
    /// INDEX_TYPE: the collection type of the index to query (0 = a plain bin).
    pub index_type: Option<&'a [u8]>,
    /// INDEX_CONTEXT: the CDT context (a packed msgpack array) of the index to query.
    pub index_context: Option<&'a [u8]>,
    /// INDEX_EXPRESSION: the packed expression of the index to query.
    pub index_expression: Option<&'a [u8]>,
    /// BVAL_ARRAY: for each DIGEST_ARRAY digest, the index value it was returned with
    /// (i64 little-endian).
    pub resume_values: Option<&'a [u8]>,
    /// QUERY_BINLIST: the pre-6.0 bin projection.
    pub bin_list: Option<&'a [u8]>,
}

impl<'a> Fields<'a> {
    /// Parses `field_count` fields from the start of `bytes`, and returns them with the bytes
    /// after the last one (batch rows carry fields too, so this is public).
    ///
    /// # Errors
    ///
    /// [`Malformed`] when a field's size word is truncated, its size is 0, or it runs past the
    /// end of `bytes`.
    pub fn parse(bytes: &'a [u8], field_count: u16) -> Result<(Fields<'a>, &'a [u8]), Malformed> {
        Self::parse_fields(bytes, field_count, false)
    }

    /// [`Fields::parse`] for a batch parent: a last BATCH field whose size word overstates
    /// it reaches to the end (see [`batch_to_the_end`]).
    ///
    /// # Errors
    ///
    /// As [`Fields::parse`].
    pub fn parse_batch_parent(
        bytes: &'a [u8],
        field_count: u16,
    ) -> Result<(Fields<'a>, &'a [u8]), Malformed> {
        Self::parse_fields(bytes, field_count, true)
    }

    fn parse_fields(
        bytes: &'a [u8],
        field_count: u16,
        batch_parent: bool,
    ) -> Result<(Fields<'a>, &'a [u8]), Malformed> {
        let mut fields = Fields::default();
        let mut rest = bytes;
        for index in 0..field_count {
            let last = index + 1 == field_count;
            let (field_type, data, after) = match split_field(rest) {
                Err(error) if last && batch_parent => batch_to_the_end(rest).ok_or(error)?,
                parsed => parsed?,
            };
            fields.gather(field_type, data);
            rest = after;
        }
        Ok((fields, rest))
    }

    fn gather(&mut self, field_type: u8, data: &'a [u8]) {
        let slot = match field_type {
            field_type::NAMESPACE => &mut self.namespace,
            field_type::SET => &mut self.set,
            field_type::KEY => &mut self.key,
            field_type::DIGEST => &mut self.digest,
            field_type::FILTER_EXP => &mut self.filter_expression,
            field_type::BATCH | field_type::BATCH_WITH_SET => &mut self.batch,
            field_type::TRID => &mut self.scan.task_id,
            field_type::SOCKET_TIMEOUT => &mut self.scan.socket_timeout,
            field_type::RECORDS_PER_SECOND => &mut self.scan.records_per_second,
            field_type::PID_ARRAY => &mut self.scan.partition_ids,
            field_type::DIGEST_ARRAY => &mut self.scan.resume_digests,
            field_type::MAX_RECORDS => &mut self.scan.max_records,
            field_type::INDEX_RANGE => &mut self.scan.index_range,
            field_type::INDEX_NAME => &mut self.scan.index_name,
            field_type::INDEX_TYPE => &mut self.scan.index_type,
            field_type::INDEX_CONTEXT => &mut self.scan.index_context,
            field_type::INDEX_EXPRESSION => &mut self.scan.index_expression,
            field_type::BVAL_ARRAY => &mut self.scan.resume_values,
            field_type::QUERY_BINLIST => &mut self.scan.bin_list,
            field_type::UDF_FILENAME => {
                self.udf = true;
                &mut self.udf_call.module
            }
            field_type::UDF_FUNCTION => {
                self.udf = true;
                &mut self.udf_call.function
            }
            field_type::UDF_ARGLIST => {
                self.udf = true;
                &mut self.udf_call.arguments
            }
            field_type::UDF_OP => {
                self.udf = true;
                &mut self.udf_call.op
            }
            _ => {
                // Cannot overflow: there are at most u16::MAX fields.
                self.other_field_count += 1;
                return;
            }
        };
        if slot.is_none() {
            *slot = Some(data);
        }
    }
}

/// A last field that is a BATCH field whose size word counts more than the bytes left:
/// everything left. The Go client (v8) writes the size of a batch parent's BATCH field as if
/// no field came before it, so with a batch filter expression (written first) it overstates
/// it by the filter field's size; Aerospike reads the rows by their count and takes it.
/// Nothing is sized from the declared length.
fn batch_to_the_end(bytes: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (_, rest) = bytes.split_first_chunk::<4>()?;
    let (&field_type, data) = rest.split_first()?;
    matches!(field_type, field_type::BATCH | field_type::BATCH_WITH_SET).then_some((
        field_type,
        data,
        &rest[rest.len()..],
    ))
}

/// Splits one field off the front of `bytes`: its type, its data and what follows it.
fn split_field(bytes: &[u8]) -> Result<(u8, &[u8], &[u8]), Malformed> {
    let (size, rest) = bytes
        .split_first_chunk::<4>()
        .ok_or(Malformed::new("field size is truncated"))?;
    let size_bytes = usize::try_from(u32::from_be_bytes(*size))
        .map_err(|_| Malformed::new("field size does not fit in memory"))?;
    if size_bytes > rest.len() {
        return Err(Malformed::new("field runs past the end of the message"));
    }
    let (field, after) = rest.split_at(size_bytes);
    let (field_type, data) = field.split_first().ok_or(Malformed::new(
        "field size is 0 (it must count the type byte)",
    ))?;
    Ok((*field_type, data, after))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(field_type: u8, data: &[u8]) -> Vec<u8> {
        let mut bytes = (u32::try_from(data.len()).unwrap() + 1)
            .to_be_bytes()
            .to_vec();
        bytes.push(field_type);
        bytes.extend_from_slice(data);
        bytes
    }

    #[test]
    fn parse_sorts_fields_into_slots_and_counts_the_rest() {
        let mut bytes = Vec::new();
        for (field_type, data) in [
            (field_type::NAMESPACE, &b"test"[..]),
            (field_type::SET, b""),
            (field_type::KEY, b"\x03k"),
            (field_type::DIGEST, b"d"),
            (field_type::FILTER_EXP, b"f"),
            (field_type::UDF_ARGLIST, b""),
            (field_type::BATCH_WITH_SET, b"b"),
            (field_type::PID_ARRAY, b"\x00\x00"),
            (field_type::MAX_RECORDS, b"\x00"),
            (field_type::INDEX_CONTEXT, b"c"),
            (field_type::INDEX_EXPRESSION, b"e"),
            // No field has this type.
            (200, b"?"),
        ] {
            bytes.extend(field(field_type, data));
        }
        bytes.extend_from_slice(b"rest");
        let (fields, rest) = Fields::parse(&bytes, 12).unwrap();
        let expected = Fields {
            namespace: Some(b"test"),
            set: Some(b""),
            key: Some(b"\x03k"),
            digest: Some(b"d"),
            filter_expression: Some(b"f"),
            udf: true,
            udf_call: UdfFields {
                arguments: Some(b""),
                ..UdfFields::default()
            },
            batch: Some(b"b"),
            scan: ScanFields {
                partition_ids: Some(b"\x00\x00"),
                max_records: Some(b"\x00"),
                index_context: Some(b"c"),
                index_expression: Some(b"e"),
                ..ScanFields::default()
            },
            other_field_count: 1,
        };
        assert_eq!(fields, expected);
        assert_eq!(rest, b"rest");
    }

    #[test]
    fn parse_keeps_the_first_of_duplicate_fields() {
        let mut bytes = field(field_type::NAMESPACE, b"first");
        bytes.extend(field(field_type::NAMESPACE, b"second"));
        let (fields, rest) = Fields::parse(&bytes, 2).unwrap();
        assert_eq!(fields.namespace, Some(&b"first"[..]));
        assert_eq!(fields.other_field_count, 0);
        assert!(rest.is_empty());
    }

    #[test]
    fn parse_rejects_zero_sized_truncated_and_overrunning_fields() {
        assert!(Fields::parse(&[0, 0, 0, 0], 1).is_err());
        assert!(Fields::parse(&[0, 0, 0], 1).is_err());
        assert!(Fields::parse(&[0, 0, 0, 3, 0, b'a'], 1).is_err());
        assert!(Fields::parse(&[0xff, 0xff, 0xff, 0xff, 0], 1).is_err());
        assert!(Fields::parse(&field(field_type::SET, b"x"), 2).is_err());
    }

    /// The Go client's batch parent with a filter: the BATCH field's size word counts the
    /// filter field too. As the last field of a batch parent it is read to the end of the
    /// message; in any other message, anywhere else, or as another type, an overstated size
    /// is still malformed.
    #[test]
    fn a_last_batch_field_that_overstates_its_size_reaches_to_the_end() {
        let mut bytes = field(field_type::FILTER_EXP, b"\x93");
        let mut batch = field(field_type::BATCH, b"rows");
        batch[3] += 5;
        bytes.extend(&batch);
        let (fields, rest) = Fields::parse_batch_parent(&bytes, 2).unwrap();
        assert_eq!(fields.batch, Some(&b"rows"[..]));
        assert!(rest.is_empty());
        assert!(
            Fields::parse(&bytes, 2).is_err(),
            "only a batch parent is read so"
        );
        assert!(Fields::parse_batch_parent(&bytes, 3).is_err());
        let mut set = field(field_type::SET, b"s");
        set[3] += 5;
        assert!(Fields::parse_batch_parent(&set, 1).is_err());
    }
}
