//! What a selecting list or map op returns: the return type its first argument names, and
//! the shaping of the selected elements into the result value.

use model::ResultCode;

use super::value::Value;

/// The return type of a selecting op (Aerospike's `result_type`), without the inverted bit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ReturnKind {
    None,
    Index,
    ReverseIndex,
    Rank,
    ReverseRank,
    Count,
    Key,
    Value,
    KeyValue,
    Exists,
    /// KEY_VALUE as an unordered map (8.0 clients).
    UnorderedMap,
    /// KEY_VALUE as an ordered map (8.0 clients).
    OrderedMap,
}

/// A return type and whether the selection is inverted (every element but those selected).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ReturnType {
    pub(crate) kind: ReturnKind,
    pub(crate) inverted: bool,
}

const INVERTED: i64 = 0x10000;

impl ReturnType {
    /// The return type an op argument names.
    ///
    /// # Errors
    /// PARAMETER for anything but a known return type, with or without the inverted bit.
    pub(crate) fn parse(argument: &Value) -> Result<ReturnType, ResultCode> {
        let code = argument.as_int().ok_or(ResultCode::Parameter)?;
        let inverted = code & INVERTED != 0;
        let kind = match code & !INVERTED {
            0 => ReturnKind::None,
            1 => ReturnKind::Index,
            2 => ReturnKind::ReverseIndex,
            3 => ReturnKind::Rank,
            4 => ReturnKind::ReverseRank,
            5 => ReturnKind::Count,
            6 => ReturnKind::Key,
            7 => ReturnKind::Value,
            8 => ReturnKind::KeyValue,
            13 => ReturnKind::Exists,
            16 => ReturnKind::UnorderedMap,
            17 => ReturnKind::OrderedMap,
            _ => return Err(ResultCode::Parameter),
        };
        Ok(ReturnType { kind, inverted })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn return_types_parse_with_the_inverted_bit() {
        let parsed = ReturnType::parse(&Value::Int(0x10007)).unwrap();
        assert_eq!(parsed.kind, ReturnKind::Value);
        assert!(parsed.inverted);
        assert_eq!(
            ReturnType::parse(&Value::Int(99)).unwrap_err(),
            ResultCode::Parameter
        );
    }
}
