//! The ops of a message: `u32 op_sz`, `u8 op`, `u8 particle_type`, `u8 flags`, `u8 name_len`,
//! name, value (`op_sz` counts the 4 bytes after it plus name and value).
//!
//! Invariants:
//! - An [`OpIter`] exists only over bytes that [`OpIter::parse`] validated: exactly its count of
//!   ops, each with `op_sz >= 4`, a known op code and a name that fits inside the op. Iterating
//!   therefore cannot fail.
//! - The op count is at most [`model::OPS_PER_COMMAND_MAX`].
//! - Bin name length is not limited to [`model::BIN_NAME_BYTES_MAX`] here: the engine answers
//!   BIN_NAME for long names, so the codec only checks that the name fits.

use model::{OPS_PER_COMMAND_MAX, Op, OpCode};

use crate::Malformed;

/// The 4 bytes after `op_sz`: op code, particle type, flags, name length.
pub(crate) const OP_HEADER_SIZE_BYTES: usize = 4;

/// The ops of a message in order, as [`model::Op`]. Cheap to clone: it is a slice cursor.
#[derive(Clone, Debug)]
pub struct OpIter<'a> {
    /// The not yet returned ops, all validated.
    bytes: &'a [u8],
    /// How many ops `bytes` holds.
    op_count_remaining: usize,
}

impl<'a> OpIter<'a> {
    /// Validates `op_count` ops at the start of `bytes`, and returns an iterator over them with
    /// the bytes after the last one (batch rows carry ops too, so this is public).
    ///
    /// # Errors
    ///
    /// [`Malformed`] when `op_count` exceeds [`model::OPS_PER_COMMAND_MAX`], or an op is
    /// truncated, has `op_sz < 4`, an unknown op code, or a name longer than the op.
    pub fn parse(bytes: &'a [u8], op_count: u16) -> Result<(OpIter<'a>, &'a [u8]), Malformed> {
        let op_count = usize::from(op_count);
        if op_count > OPS_PER_COMMAND_MAX {
            return Err(Malformed::new("more ops than a command may carry"));
        }
        let mut rest = bytes;
        for _ in 0..op_count {
            let (_, after) = split_op(rest)?;
            rest = after;
        }
        let ops_size_bytes = bytes.len() - rest.len();
        let iter = OpIter {
            bytes: &bytes[..ops_size_bytes],
            op_count_remaining: op_count,
        };
        Ok((iter, rest))
    }
}

impl<'a> Iterator for OpIter<'a> {
    type Item = Op<'a>;

    fn next(&mut self) -> Option<Op<'a>> {
        if self.op_count_remaining == 0 {
            return None;
        }
        let (op, after) =
            split_op(self.bytes).expect("OpIter holds only ops OpIter::parse validated");
        self.bytes = after;
        self.op_count_remaining -= 1;
        Some(op)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.op_count_remaining, Some(self.op_count_remaining))
    }
}

impl ExactSizeIterator for OpIter<'_> {}

impl std::iter::FusedIterator for OpIter<'_> {}

/// Splits one op off the front of `bytes`, and returns it with what follows it.
fn split_op(bytes: &[u8]) -> Result<(Op<'_>, &[u8]), Malformed> {
    let (size, rest) = bytes
        .split_first_chunk::<4>()
        .ok_or(Malformed::new("op size is truncated"))?;
    let op_size_bytes = usize::try_from(u32::from_be_bytes(*size))
        .map_err(|_| Malformed::new("op size does not fit in memory"))?;
    if op_size_bytes > rest.len() {
        return Err(Malformed::new("op runs past the end of the message"));
    }
    let (op_bytes, after) = rest.split_at(op_size_bytes);
    let (op_header, name_and_value) = op_bytes
        .split_first_chunk::<OP_HEADER_SIZE_BYTES>()
        .ok_or(Malformed::new("op size is below 4"))?;
    // The flags byte (op_header[2]) is XDR-only and carries nothing a client command needs.
    let [code, particle_type, _flags, name_size_bytes] = *op_header;
    let code = OpCode::from_u8(code).ok_or(Malformed::new("unknown op code"))?;
    let name_size_bytes = usize::from(name_size_bytes);
    if name_size_bytes > name_and_value.len() {
        return Err(Malformed::new("bin name runs past the end of the op"));
    }
    let (bin_name, value) = name_and_value.split_at(name_size_bytes);
    Ok((
        Op {
            code,
            particle_type,
            bin_name,
            value,
        },
        after,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_yields_each_op_and_the_bytes_after_them() {
        let bytes = [
            0, 0, 0, 6, 2, 1, 0, 1, b'a', 7, // write a = [7]
            0, 0, 0, 4, 11, 0, 0, 0, // touch
            b'x',
        ];
        let (ops, rest) = OpIter::parse(&bytes, 2).unwrap();
        assert_eq!(rest, b"x");
        assert_eq!(ops.len(), 2);
        let ops: Vec<Op<'_>> = ops.collect();
        let write = Op {
            code: OpCode::Write,
            particle_type: 1,
            bin_name: b"a",
            value: &[7],
        };
        let touch = Op {
            code: OpCode::Touch,
            particle_type: 0,
            bin_name: b"",
            value: b"",
        };
        assert_eq!(ops, [write, touch]);
    }

    #[test]
    fn parse_rejects_short_unknown_and_overrunning_ops() {
        assert!(
            OpIter::parse(&[0, 0, 0, 3, 1, 0, 0], 1).is_err(),
            "op_sz below 4"
        );
        assert!(
            OpIter::parse(&[0, 0, 0, 4, 6, 0, 0, 0], 1).is_err(),
            "op code 6"
        );
        assert!(
            OpIter::parse(&[0, 0, 0, 4, 1, 0, 0, 1], 1).is_err(),
            "name past the op"
        );
        assert!(
            OpIter::parse(&[0, 0, 0, 5, 1, 0, 0, 0], 1).is_err(),
            "op past the end"
        );
        assert!(OpIter::parse(&[0, 0, 0], 1).is_err(), "truncated size");
    }

    #[test]
    fn parse_rejects_more_ops_than_a_command_may_carry() {
        let touch = [0, 0, 0, 4, 11, 0, 0, 0];
        let op_count = u16::try_from(OPS_PER_COMMAND_MAX + 1).unwrap();
        let bytes = touch.repeat(usize::from(op_count));
        assert!(OpIter::parse(&bytes, op_count).is_err());
        assert!(OpIter::parse(&bytes, op_count - 1).is_ok());
    }
}
