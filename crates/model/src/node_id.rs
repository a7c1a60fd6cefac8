//! Node ids: how a cluster names its nodes, and how Aerospike prints them.

use std::fmt;
use std::str::FromStr;

/// A node's 64-bit id, as Aerospike prints it: upper-case hex without leading zeros.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct NodeId(pub u64);

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:X}", self.0)
    }
}

impl FromStr for NodeId {
    type Err = ParseNodeIdError;

    /// Parses 1 to 16 hex digits, either case, with no prefix or sign.
    fn from_str(text: &str) -> Result<NodeId, ParseNodeIdError> {
        let is_hex = !text.is_empty() && text.bytes().all(|byte| byte.is_ascii_hexdigit());
        if !is_hex || text.len() > 16 {
            return Err(ParseNodeIdError);
        }
        u64::from_str_radix(text, 16)
            .map(NodeId)
            .map_err(|_| ParseNodeIdError)
    }
}

/// A node id that is not 1 to 16 hex digits.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct ParseNodeIdError;

impl fmt::Display for ParseNodeIdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a node id is 1 to 16 hex digits")
    }
}

impl std::error::Error for ParseNodeIdError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_id_displays_as_upper_case_hex_without_leading_zeros() {
        assert_eq!(NodeId(0xBB9020011AC4202).to_string(), "BB9020011AC4202");
        assert_eq!(NodeId(0x0A).to_string(), "A");
        assert_eq!(NodeId(u64::MAX).to_string(), "FFFFFFFFFFFFFFFF");
    }

    #[test]
    fn node_id_parses_hex_of_either_case_and_rejects_anything_else() {
        assert_eq!("BB9020011AC4202".parse(), Ok(NodeId(0xBB9020011AC4202)));
        assert_eq!("bb9020011ac4202".parse(), Ok(NodeId(0xBB9020011AC4202)));
        assert_eq!("FFFFFFFFFFFFFFFF".parse(), Ok(NodeId(u64::MAX)));
        for garbage in [
            "",
            "0x1A",
            "+1A",
            "-1",
            "G1",
            "1 ",
            "10000000000000000",
            "é",
        ] {
            assert_eq!(
                garbage.parse::<NodeId>(),
                Err(ParseNodeIdError),
                "{garbage:?}"
            );
        }
    }
}
