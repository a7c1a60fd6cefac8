//! A declared length is a claim, not an allocation: over the limit it is refused before any
//! read, and under it memory grows only with the bytes that arrive.
//!
//! The allocation check reads the process's peak virtual size (`VmPeak` in /proc on Linux):
//! reserving a buffer for a declared 4 GB value would raise it by 4 GB even if no page were
//! touched. It is the only test in this file so that no other test's allocations share the
//! process.

mod common;

use backup::{BinValue, DecodeErrorKind, DecodeLimits, Item};
use common::{decode, decode_with, line_at};

const HEADER_AND_RECORD: &[u8] = b"Version 3.1\n# namespace test\n\
    + n test\n+ d AAAAAAAAAAAAAAAAAAAAAAAAAAA=\n+ g 1\n+ t 0\n+ b 1\n";

/// Growth a decoder may cause here: its chunk and buffers, far below the declared lengths.
const PEAK_GROWTH_BYTES_MAX: u64 = 256 * 1024 * 1024;

fn file_with_bin(bin_line: &[u8]) -> Vec<u8> {
    [HEADER_AND_RECORD, bin_line].concat()
}

#[cfg(target_os = "linux")]
fn peak_virtual_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("Linux has /proc");
    let line = status
        .lines()
        .find(|line| line.starts_with("VmPeak:"))
        .expect("VmPeak is reported");
    let kilobytes: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|number| number.parse().ok())
        .expect("VmPeak is a number of kB");
    kilobytes * 1024
}

#[cfg(not(target_os = "linux"))]
fn peak_virtual_bytes() -> u64 {
    0
}

#[test]
fn declared_lengths_are_checked_before_and_read_as_they_arrive() {
    let peak_before = peak_virtual_bytes();

    // Over the default limit of 128 MiB: refused at its line with both numbers.
    let file = file_with_bin(b"- B! big 209715200 abc\n");
    let error = decode(&file).expect_err("200 MiB is over the default limit");
    assert_eq!(error.line, line_at(&file, file.len() - 1));
    assert_eq!(
        error.to_string(),
        format!(
            "line {}: value of 209715200 bytes is over the limit of 134217728 bytes",
            error.line
        )
    );
    let base64 = file_with_bin(b"- B big 4000000000 AAAA\n");
    let error = decode(&base64).expect_err("3 GB of base64 is over the default limit");
    assert!(matches!(
        error.kind,
        DecodeErrorKind::ValueTooLarge {
            length_bytes: 3_000_000_000,
            max_bytes: 134_217_728
        }
    ));

    // No limit but the format's: a 4 GB claim over three bytes fails at the end of the file
    // without having reserved the 4 GB.
    let unlimited = DecodeLimits {
        value_bytes_max: u64::MAX,
    };
    for bin_line in [
        &b"- B! big 4000000000 abc\n"[..],
        b"- B big 4000000000 AAAA\n",
        b"- S big 4294967295 abc",
    ] {
        let file = file_with_bin(bin_line);
        let error = decode_with(&file, unlimited).expect_err("the file ends early");
        assert!(error.to_string().contains("end of file"), "{error}");
    }
    let growth = peak_virtual_bytes() - peak_before;
    assert!(
        growth < PEAK_GROWTH_BYTES_MAX,
        "peak grew by {growth} bytes"
    );

    // The limit is inclusive: a value of exactly the limit is read, one byte more is not.
    let limits = DecodeLimits { value_bytes_max: 3 };
    let (_, items) = decode_with(&file_with_bin(b"- S s 3 abc\n"), limits).expect("at the limit");
    let Item::Record(record) = &items[0] else {
        panic!("a record");
    };
    assert_eq!(record.bins[0].value, BinValue::String(b"abc".to_vec()));
    let over = decode_with(&file_with_bin(b"- S s 4 abcd\n"), limits);
    assert!(matches!(
        over.map_err(|error| error.kind),
        Err(DecodeErrorKind::ValueTooLarge {
            length_bytes: 4,
            max_bytes: 3
        })
    ));
}
