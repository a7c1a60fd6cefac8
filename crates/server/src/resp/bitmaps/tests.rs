use super::*;

/// The range a BITCOUNT or BITPOS of `start end unit` covers in `length_bytes`.
fn range(length_bytes: usize, start: i64, end: i64, unit: RangeUnit) -> Option<(u64, u64)> {
    resolve_range(length_bytes, start, end, unit).map(|range| (range.first_bit, range.last_bit))
}

/// Bit by bit, the slow way: the model the fast functions are checked against.
fn bits_of(bytes: &[u8]) -> Vec<bool> {
    (0..bytes.len() as u64 * 8)
        .map(|bit| bit_at(bytes, bit))
        .collect()
}

#[test]
fn bit_offsets_follow_redis_limits() {
    assert_eq!(parse_bit_offset(b"0", None), Ok(0));
    assert_eq!(parse_bit_offset(b"4294967295", None), Ok(4_294_967_295));
    assert!(parse_bit_offset(b"4294967296", None).is_err());
    assert!(parse_bit_offset(b"-1", None).is_err());
    assert!(parse_bit_offset(b"abc", None).is_err());
    assert!(parse_bit_offset(b"#3", None).is_err());
    assert_eq!(parse_bit_offset(b"#3", Some(8)), Ok(24));
    assert!(parse_bit_offset(b"#9223372036854775807", Some(64)).is_err());
    assert!(parse_bit_offset(b"#536870912", Some(8)).is_err());
}

#[test]
fn growth_is_refused_past_the_record_limit_before_allocating() {
    let mut bytes = vec![1u8];
    assert_eq!(grow_to_bit(&mut bytes, 7, 10), Ok(false));
    assert_eq!(grow_to_bit(&mut bytes, 8, 10), Ok(true));
    assert_eq!(bytes, [1, 0]);
    assert_eq!(grow_to_bit(&mut bytes, 79, 10), Ok(true));
    assert_eq!(bytes.len(), 10);
    assert_eq!(
        grow_to_bit(&mut bytes, 80, 10),
        Err(ResultCode::RecordTooBig)
    );
    assert_eq!(
        grow_to_bit(&mut bytes, 4_294_967_295, 1 << 20),
        Err(ResultCode::RecordTooBig)
    );
    assert_eq!(bytes.len(), 10);
}

#[test]
fn ranges_clamp_as_redis_does() {
    assert_eq!(range(3, 0, -1, RangeUnit::Byte), Some((0, 23)));
    assert_eq!(range(3, 1, 1, RangeUnit::Byte), Some((8, 15)));
    assert_eq!(range(3, -100, 100, RangeUnit::Byte), Some((0, 23)));
    assert_eq!(range(3, 2, 1, RangeUnit::Byte), None);
    assert_eq!(range(3, 5, 10, RangeUnit::Byte), None);
    assert_eq!(range(0, 0, -1, RangeUnit::Byte), None);
    assert_eq!(range(3, 5, 10, RangeUnit::Bit), Some((5, 10)));
    assert_eq!(range(3, -3, -1, RangeUnit::Bit), Some((21, 23)));
    assert_eq!(range(3, i64::MIN, i64::MAX, RangeUnit::Bit), Some((0, 23)));
}

#[test]
fn counting_and_searching_agree_with_a_bit_by_bit_model() {
    // A seeded sweep over strings and ranges: the fast paths (whole words, skipped bytes,
    // masked edges) against the bit-by-bit model.
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for _ in 0..400 {
        let length = (next() % 40) as usize + 1;
        let bytes: Vec<u8> = (0..length)
            .map(|_| match next() % 4 {
                0 => 0,
                1 => 0xff,
                _ => next() as u8,
            })
            .collect();
        let bits = bits_of(&bytes);
        let first = next() % bits.len() as u64;
        let last = first + next() % (bits.len() as u64 - first);
        let range = BitRange {
            first_bit: first,
            last_bit: last,
        };
        let window = &bits[first as usize..=last as usize];
        let ones = window.iter().filter(|&&on| on).count() as u64;
        assert_eq!(count_ones(&bytes, range), ones, "{bytes:?} {range:?}");
        for on in [false, true] {
            let expected = window
                .iter()
                .position(|&bit| bit == on)
                .map(|p| first + p as u64);
            assert_eq!(
                find_bit(&bytes, range, on),
                expected,
                "{bytes:?} {range:?} {on}"
            );
        }
    }
}

#[test]
fn bitop_pads_shorter_sources_with_zeros() {
    let fold = |operation, sources: &[&[u8]]| {
        let mut result = Vec::new();
        for (position, source) in sources.iter().enumerate() {
            fold_source(&mut result, operation, position, source);
        }
        result
    };
    assert_eq!(fold(BitOperation::And, &[b"\xff\xff", b"\x0f"]), [0x0f, 0]);
    assert_eq!(fold(BitOperation::And, &[b"", b"\xff\xff"]), [0, 0]);
    assert_eq!(
        fold(BitOperation::Or, &[b"\x01", b"\x10\x20", b""]),
        [0x11, 0x20]
    );
    assert_eq!(
        fold(BitOperation::Xor, &[b"\xff", b"\x0f\x01"]),
        [0xf0, 0x01]
    );
    assert_eq!(fold(BitOperation::Not, &[b"\x0f\x00"]), [0xf0, 0xff]);
    assert!(fold(BitOperation::Not, &[b""]).is_empty());
    assert_eq!(BitOperation::parse(b"xOr"), Some(BitOperation::Xor));
    assert_eq!(BitOperation::parse(b"nand"), None);
}
