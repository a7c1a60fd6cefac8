//! What a run does: the object spec (bins and their types), the workload and the key
//! distribution, parsed from the aerospike-benchmark option syntax.

use std::fmt;
use std::str::FromStr;

/// Largest string or bytes bin the object spec accepts (1 MiB, Aerospike's default record size).
pub const BIN_SIZE_BYTES_MAX: usize = 1024 * 1024;

/// One bin of the object spec.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum BinSpec {
    /// `I`: a 64-bit integer (the key's number).
    Integer,
    /// `S:<size>`: a string of `size` ASCII letters and digits.
    String(usize),
    /// `B:<size>`: `size` random bytes.
    Bytes(usize),
}

/// The bins every write carries (`-o`), e.g. `I` or `S:100,I`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ObjectSpec {
    /// In order; the first bin is `testbin`, the next `testbin_2`, and so on.
    pub bins: Vec<BinSpec>,
}

impl ObjectSpec {
    /// The bin name of the bin at `index`: `testbin`, `testbin_2`, `testbin_3`, ...
    pub fn bin_name(index: usize) -> String {
        if index == 0 {
            "testbin".to_owned()
        } else {
            format!("testbin_{}", index + 1)
        }
    }
}

impl FromStr for ObjectSpec {
    type Err = String;

    fn from_str(text: &str) -> Result<ObjectSpec, String> {
        let bins = text
            .split(',')
            .map(parse_bin)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ObjectSpec { bins })
    }
}

fn parse_bin(text: &str) -> Result<BinSpec, String> {
    let text = text.trim();
    let (kind, size) = match text.split_once(':') {
        Some((kind, size)) => (kind, Some(size)),
        None => (text, None),
    };
    let parse_size = |size: Option<&str>| -> Result<usize, String> {
        let size = size.ok_or(format!(
            "object spec `{text}` needs a size, as in {kind}:100"
        ))?;
        let size: usize = size
            .parse()
            .map_err(|_| format!("object spec `{text}`: size `{size}` is not a number"))?;
        if size > BIN_SIZE_BYTES_MAX {
            return Err(format!(
                "object spec `{text}`: size is above {BIN_SIZE_BYTES_MAX} bytes"
            ));
        }
        Ok(size)
    };
    match kind.to_ascii_uppercase().as_str() {
        "I" if size.is_none() => Ok(BinSpec::Integer),
        "S" => Ok(BinSpec::String(parse_size(size)?)),
        "B" => Ok(BinSpec::Bytes(parse_size(size)?)),
        _ => Err(format!(
            "object spec `{text}` is not I, S:<size> or B:<size>"
        )),
    }
}

impl fmt::Display for ObjectSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, bin) in self.bins.iter().enumerate() {
            if index > 0 {
                f.write_str(",")?;
            }
            match bin {
                BinSpec::Integer => f.write_str("I")?,
                BinSpec::String(size) => write!(f, "S:{size}")?,
                BinSpec::Bytes(size) => write!(f, "B:{size}")?,
            }
        }
        Ok(())
    }
}

/// What the run does to the keys (`-w`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum Workload {
    /// `I`: write every key once, in key order, then stop.
    Insert,
    /// `RU,<read%>`: random reads; the rest are updates of all bins.
    ReadUpdate {
        /// Share of reads, 0..=100.
        read_percent: u8,
    },
    /// `RR,<read%>`: random reads; the rest replace the whole record.
    ReadReplace {
        /// Share of reads, 0..=100.
        read_percent: u8,
    },
    /// `DB`: delete every key once, in key order, then stop.
    Delete,
    /// Read every key once, in key order, then stop (the read-back phase of `--scaling`).
    ReadAll,
}

impl Workload {
    /// Whether the run ends when every key was visited once (otherwise it runs for a duration).
    pub fn is_count_based(self) -> bool {
        matches!(
            self,
            Workload::Insert | Workload::Delete | Workload::ReadAll
        )
    }
}

impl FromStr for Workload {
    type Err = String;

    fn from_str(text: &str) -> Result<Workload, String> {
        let upper = text.trim().to_ascii_uppercase();
        let (kind, percent) = match upper.split_once(',') {
            Some((kind, percent)) => (kind, Some(percent)),
            None => (upper.as_str(), None),
        };
        let read_percent = || -> Result<u8, String> {
            let Some(percent) = percent else {
                return Ok(50);
            };
            match percent.trim().parse::<u8>() {
                Ok(percent) if percent <= 100 => Ok(percent),
                _ => Err(format!("workload `{text}`: read percent must be 0 to 100")),
            }
        };
        match kind {
            "I" if percent.is_none() => Ok(Workload::Insert),
            "DB" if percent.is_none() => Ok(Workload::Delete),
            "RU" => Ok(Workload::ReadUpdate {
                read_percent: read_percent()?,
            }),
            "RR" => Ok(Workload::ReadReplace {
                read_percent: read_percent()?,
            }),
            _ => Err(format!(
                "workload `{text}` is not I, RU,<read%>, RR,<read%> or DB"
            )),
        }
    }
}

impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Workload::Insert => f.write_str("I"),
            Workload::ReadUpdate { read_percent } => write!(f, "RU,{read_percent}"),
            Workload::ReadReplace { read_percent } => write!(f, "RR,{read_percent}"),
            Workload::Delete => f.write_str("DB"),
            Workload::ReadAll => f.write_str("read-all"),
        }
    }
}

/// How random workloads pick keys (`--key-distribution`).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub enum KeyDistribution {
    /// Every key equally likely.
    Uniform,
    /// Zipf: key rank r (the start key is rank 1) has weight 1 / r^exponent: a few hot keys.
    Zipf {
        /// 0.99 is YCSB's default; larger is more skewed.
        exponent: f64,
    },
}

impl FromStr for KeyDistribution {
    type Err = String;

    fn from_str(text: &str) -> Result<KeyDistribution, String> {
        let lower = text.trim().to_ascii_lowercase();
        match lower.split_once(':') {
            None if lower == "uniform" => Ok(KeyDistribution::Uniform),
            None if lower == "zipf" => Ok(KeyDistribution::Zipf { exponent: 0.99 }),
            Some(("zipf", exponent)) => match exponent.parse::<f64>() {
                Ok(exponent) if exponent > 0.0 && exponent.is_finite() => {
                    Ok(KeyDistribution::Zipf { exponent })
                }
                _ => Err(format!(
                    "key distribution `{text}`: the Zipf exponent must be a number above 0"
                )),
            },
            _ => Err(format!(
                "key distribution `{text}` is not uniform, zipf or zipf:<exponent>"
            )),
        }
    }
}

impl fmt::Display for KeyDistribution {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyDistribution::Uniform => f.write_str("uniform"),
            KeyDistribution::Zipf { exponent } => write!(f, "zipf:{exponent}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_specs_parse_and_print_back() {
        let spec: ObjectSpec = "I".parse().unwrap();
        assert_eq!(spec.bins, vec![BinSpec::Integer]);
        let spec: ObjectSpec = "S:100, b:16,I".parse().unwrap();
        assert_eq!(
            spec.bins,
            vec![BinSpec::String(100), BinSpec::Bytes(16), BinSpec::Integer]
        );
        assert_eq!(spec.to_string(), "S:100,B:16,I");
        assert_eq!(ObjectSpec::bin_name(0), "testbin");
        assert_eq!(ObjectSpec::bin_name(2), "testbin_3");
    }

    #[test]
    fn bad_object_specs_say_what_is_wrong() {
        for (text, needle) in [
            ("S", "needs a size"),
            ("S:x", "not a number"),
            ("B:2000000", "above"),
            ("I:4", "is not I"),
            ("X", "is not I"),
            ("", "is not I"),
        ] {
            let error = text.parse::<ObjectSpec>().unwrap_err();
            assert!(error.contains(needle), "{text}: {error}");
        }
    }

    #[test]
    fn workloads_parse_with_default_and_explicit_read_share() {
        assert_eq!("I".parse(), Ok(Workload::Insert));
        assert_eq!("db".parse(), Ok(Workload::Delete));
        assert_eq!("RU".parse(), Ok(Workload::ReadUpdate { read_percent: 50 }));
        assert_eq!(
            "RU,80".parse(),
            Ok(Workload::ReadUpdate { read_percent: 80 })
        );
        assert_eq!(
            "rr,0".parse(),
            Ok(Workload::ReadReplace { read_percent: 0 })
        );
        assert!("RU,101".parse::<Workload>().is_err());
        assert!("I,5".parse::<Workload>().is_err());
        assert!("XX".parse::<Workload>().is_err());
        assert_eq!(
            Workload::ReadUpdate { read_percent: 80 }.to_string(),
            "RU,80"
        );
        assert!(Workload::Insert.is_count_based());
        assert!(!Workload::ReadReplace { read_percent: 5 }.is_count_based());
    }

    #[test]
    fn key_distributions_parse() {
        assert_eq!("uniform".parse(), Ok(KeyDistribution::Uniform));
        assert_eq!("zipf".parse(), Ok(KeyDistribution::Zipf { exponent: 0.99 }));
        assert_eq!(
            "Zipf:1.2".parse(),
            Ok(KeyDistribution::Zipf { exponent: 1.2 })
        );
        assert!("zipf:0".parse::<KeyDistribution>().is_err());
        assert!("zipf:abc".parse::<KeyDistribution>().is_err());
        assert!("gauss".parse::<KeyDistribution>().is_err());
    }
}
