use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::*;
use crate::cdt::value::pack;

type Bin = Option<(u8, Vec<u8>)>;

fn int(value: i64) -> Value {
    Value::Int(value)
}

fn list(items: Vec<Value>) -> Value {
    Value::List(List {
        ordered: false,
        items,
    })
}

fn payload(code: i64, args: Vec<Value>) -> Vec<u8> {
    let mut items = vec![int(code)];
    items.extend(args);
    pack(&list(items))
}

fn strings(prefix: &str, range: std::ops::Range<usize>) -> Vec<Value> {
    range
        .map(|i| Value::string(format!("{prefix}{i}").as_bytes()))
        .collect()
}

fn modify_op(bin: &mut Bin, code: i64, args: Vec<Value>) -> Result<Value, ResultCode> {
    modify(&payload(code, args), bin)
}

fn read_op(bin: &Bin, code: i64, args: Vec<Value>) -> Result<Value, ResultCode> {
    let bin = bin.as_ref().map(|(kind, bytes)| (*kind, bytes.as_slice()));
    read(&payload(code, args), bin)
}

fn init(
    bin: &mut Bin,
    index_bits: i64,
    minhash_bits: i64,
    flags: u64,
) -> Result<Value, ResultCode> {
    modify_op(
        bin,
        code::INIT,
        vec![int(index_bits), int(minhash_bits), int(flags as i64)],
    )
}

fn add(bin: &mut Bin, values: &[Value], index_bits: i64, minhash_bits: i64) -> i64 {
    let args = vec![
        list(values.to_vec()),
        int(index_bits),
        int(minhash_bits),
        int(0),
    ];
    as_int(modify_op(bin, code::ADD, args))
}

fn as_int(result: Result<Value, ResultCode>) -> i64 {
    match result {
        Ok(Value::Int(value)) => value,
        other => panic!("expected an integer, got {other:?}"),
    }
}

fn as_float(result: Result<Value, ResultCode>) -> f64 {
    match result {
        Ok(Value::Float(value)) => value,
        other => panic!("expected a float, got {other:?}"),
    }
}

fn count(bin: &Bin) -> i64 {
    as_int(read_op(bin, code::COUNT, vec![]))
}

fn describe(bin: &Bin) -> (i64, i64) {
    match read_op(bin, code::DESCRIBE, vec![]) {
        Ok(Value::List(described)) => match described.items.as_slice() {
            [Value::Int(index), Value::Int(minhash)] => (*index, *minhash),
            other => panic!("bad description {other:?}"),
        },
        other => panic!("expected a list, got {other:?}"),
    }
}

/// The bin's bytes as an HLL value in op arguments.
fn hll_of(bin: &Bin) -> Value {
    let (kind, data) = bin.clone().expect("a bin");
    assert_eq!(kind, PARTICLE_HLL);
    Value::Bytes { kind, data }
}

fn hll_with(index_bits: i64, minhash_bits: i64, values: &[Value]) -> Bin {
    let mut bin = None;
    add(&mut bin, values, index_bits, minhash_bits);
    bin
}

/// Relative error `sigmas` standard errors wide for 2^index_bits registers.
fn within(expected: usize, estimate: i64, index_bits: i64, sigmas: f64) -> bool {
    let error = sigmas * 1.04 / 2f64.powf(index_bits as f64).sqrt();
    let expected = expected as f64;
    let estimate = estimate as f64;
    expected * (1.0 - error) <= estimate && estimate <= expected * (1.0 + error)
}

/// The legal (index, minhash) pairs the Go client's tests use.
fn legal_descriptions() -> Vec<(i64, i64)> {
    let mut out = Vec::new();
    for index in (4..=16).step_by(4) {
        let max_minhash = 51.min(64 - index);
        out.extend([
            (index, 0),
            (index, 4),
            (index, (max_minhash + index) / 2),
            (index, max_minhash),
        ]);
    }
    out
}

/// The illegal pairs the Go client's tests use.
fn illegal_descriptions() -> Vec<(i64, i64)> {
    let mut out = Vec::new();
    for index in (3..=21).step_by(4) {
        if !(4..=16).contains(&index) {
            out.extend([(index, 0), (index, 3), (index, 51)]);
        } else {
            out.extend([(index, 3), (index, 52)]);
            if index + 51 > 64 {
                out.push((index, 1 + 51 - (64 - (index + 51))));
            }
        }
    }
    out
}

#[test]
fn murmur3_matches_reference_vectors() {
    assert_eq!(murmur3_x64_128(b""), (0, 0));
    assert_eq!(
        murmur3_x64_128(b"hello"),
        (0xcbd8_a7b3_41bd_9b02, 0x5b1e_906a_48ae_1d19)
    );
    assert_eq!(
        murmur3_x64_128(b"\xa6\x03key 0"),
        (0x937a_8305_5d57_3f66, 0xd3ae_b858_e70d_68f2)
    );
    assert_eq!(
        murmur3_x64_128(b"The quick brown fox jumps over the lazy dog"),
        (0xe34b_bc7b_bc07_1b6c, 0x7a43_3ca9_c49a_9347)
    );
    let counting: Vec<u8> = (0..40).collect();
    assert_eq!(
        murmur3_x64_128(&counting),
        (0xc3a0_54d8_418c_8064, 0xa001_ca30_974c_12ad)
    );
}

#[test]
fn elements_are_compacted_as_aerospike_compacts_them() {
    let compact = |bytes: &[u8]| compact_element(bytes).expect("compacts");
    assert_eq!(compact(&[0xcd, 0x00, 0x05]), [0x05]);
    assert_eq!(
        compact(&[0xd3, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x80]),
        [0xd0, 0x80]
    );
    assert_eq!(compact(&[0xd1, 0xff, 0xff]), [0xff]);
    assert_eq!(compact(&[0xd2, 0x00, 0x00, 0x01, 0x00]), [0xcd, 0x01, 0x00]);
    assert_eq!(compact(&[0xcc, 0xc8]), [0xcc, 0xc8], "already compact");
    assert_eq!(compact(&[0xd9, 0x02, 0x03, b'a']), [0xa2, 0x03, b'a']);
    assert_eq!(
        compact(&[0xc4, 0x02, 0x04, 0x01]),
        [0xa2, 0x04, 0x01],
        "short bin8 to fixstr"
    );
    let long_bin8 = [[0xc4, 40].as_slice(), &[7; 40]].concat();
    assert_eq!(compact(&long_bin8), long_bin8, "bin8 over 31 bytes stays");
    let bin16 = [[0xc5, 0, 40].as_slice(), &[7; 40]].concat();
    assert_eq!(compact(&bin16), [[0xd9, 40].as_slice(), &[7; 40]].concat());
    assert_eq!(compact(&[0xc7, 0x01, 0x05, 0xaa]), [0xd4, 0x05, 0xaa]);
    assert_eq!(
        compact(&[0xc8, 0x00, 0x03, 0x05, 1, 2, 3]),
        [0xc7, 0x03, 0x05, 1, 2, 3]
    );
    assert_eq!(
        compact(&[0xcb, 0, 0, 0, 0, 0, 0, 0, 0]),
        [0xcb, 0, 0, 0, 0, 0, 0, 0, 0]
    );
    assert_eq!(compact_element(&[0xc1]), None);
    assert_eq!(compact_element(&[0xd9, 0x05, 0x03]), None, "truncated");
}

#[test]
fn registers_pack_big_endian_bit_order_and_round_trip() {
    let mut rng = SmallRng::seed_from_u64(7);
    for (index_bits, minhash_bits) in [(4, 0), (4, 4), (5, 13), (8, 51), (10, 7)] {
        let mut hll = Hll::new(index_bits, minhash_bits);
        let width = hll.register_bits();
        let values: Vec<u64> = (0..hll.n_registers())
            .map(|_| rng.random::<u64>() & low_mask(width))
            .collect();
        for (r, &value) in values.iter().enumerate() {
            hll.set(r as u32, value);
        }
        for (r, &value) in values.iter().enumerate() {
            assert_eq!(
                hll.get(r as u32),
                value,
                "register {r} of ({index_bits}, {minhash_bits})"
            );
            // Bit by bit, most significant first from the register's first bit.
            let first = r * width as usize;
            let from_bits = (0..width as usize).fold(0u64, |acc, i| {
                let bit = first + i;
                (acc << 1) | u64::from(hll.registers[bit / 8] >> (7 - bit % 8) & 1)
            });
            assert_eq!(from_bits, value);
        }
    }
    // The first register of (4, 0) is the top 6 bits of the first byte.
    let mut hll = Hll::new(4, 0);
    hll.set(0, 0b10_0001);
    hll.set(1, 0b11_1111);
    assert_eq!(&hll.registers[..2], &[0b1000_0111, 0b1111_0000]);
}

#[test]
fn init_sets_the_bit_counts_and_refuses_illegal_ones() {
    for (index, minhash) in legal_descriptions() {
        let mut bin = None;
        assert!(matches!(init(&mut bin, index, minhash, 0), Ok(Value::Nil)));
        let (kind, bytes) = bin.clone().expect("created");
        assert_eq!(kind, PARTICLE_HLL);
        let size = HEADER_SIZE + registers_size(index as u8, minhash as u8);
        assert_eq!(bytes.len(), size);
        assert_eq!(&bytes[..3], &[0, index as u8, minhash as u8]);
        assert!(bytes[3..].iter().all(|&b| b == 0));
        assert_eq!(count(&bin), 0);
        assert_eq!(as_int(modify_op(&mut bin, code::UPDATE_COUNT, vec![])), 0);
        assert_eq!(describe(&bin), (index, minhash));
    }
    for (index, minhash) in illegal_descriptions() {
        let mut bin = None;
        assert_eq!(
            init(&mut bin, index, minhash, 0).err(),
            Some(ResultCode::Parameter),
            "({index}, {minhash})"
        );
    }
}

#[test]
fn init_flags_follow_aerospike() {
    let mut bin = None;
    init(&mut bin, 4, -1, FLAG_CREATE_ONLY).expect("creates");
    assert_eq!(
        init(&mut bin, 4, -1, FLAG_CREATE_ONLY).err(),
        Some(ResultCode::BinExists)
    );
    init(&mut bin, 4, -1, FLAG_UPDATE_ONLY).expect("updates");
    let mut missing = None;
    assert_eq!(
        init(&mut missing, 4, -1, FLAG_UPDATE_ONLY).err(),
        Some(ResultCode::BinNotFound)
    );
    // NO_FAIL skips, leaving the bin as it was.
    let before = bin.clone();
    assert!(matches!(
        init(&mut bin, 8, -1, FLAG_CREATE_ONLY | FLAG_NO_FAIL),
        Ok(Value::Nil)
    ));
    assert_eq!(bin, before);
    assert!(matches!(
        init(&mut missing, 4, -1, FLAG_UPDATE_ONLY | FLAG_NO_FAIL),
        Ok(Value::Nil)
    ));
    assert_eq!(missing, None);
    assert_eq!(
        init(&mut bin, 4, -1, FLAG_ALLOW_FOLD).err(),
        Some(ResultCode::Parameter)
    );
    assert_eq!(
        init(&mut bin, 4, -1, FLAG_CREATE_ONLY | FLAG_UPDATE_ONLY).err(),
        Some(ResultCode::Parameter)
    );
    // Unset index bits: a new bin cannot be made; an existing one keeps its own.
    assert_eq!(
        init(&mut missing, -1, -1, 0).err(),
        Some(ResultCode::OpNotApplicable)
    );
    let mut big = None;
    init(&mut big, 16, 0, 0).expect("creates");
    assert_eq!(
        init(&mut big, -1, 51, 0).err(),
        Some(ResultCode::OpNotApplicable)
    );
    init(&mut big, -1, 48, 0).expect("16 + 48 fits");
    assert_eq!(describe(&big), (16, 48));
    // INIT with no arguments clears an existing bin.
    add(&mut big, &strings("v", 0..10), -1, -1);
    assert!(count(&big) > 0);
    modify_op(&mut big, code::INIT, vec![]).expect("clears");
    assert_eq!((count(&big), describe(&big)), (0, (16, 48)));
}

#[test]
fn add_counts_within_the_error_bound_and_adds_nothing_twice() {
    let entries = strings("key ", 0..256);
    for (index, minhash) in legal_descriptions() {
        let mut bin = None;
        assert!(add(&mut bin, &entries, index, minhash) > 0);
        let estimate = count(&bin);
        assert!(
            within(entries.len(), estimate, index, 6.0),
            "({index}, {minhash}): {estimate}"
        );
        assert_eq!(
            as_int(modify_op(&mut bin, code::UPDATE_COUNT, vec![])),
            estimate
        );
        assert_eq!(describe(&bin), (index, minhash));
        assert_eq!(add(&mut bin, &entries, -1, -1), 0);
        // The refreshed count is cached in the bin's header.
        let bytes = &bin.as_ref().expect("a bin").1;
        assert_eq!(
            u64::from_le_bytes(bytes[3..11].try_into().expect("8 bytes")),
            estimate as u64
        );
    }
    for (index, minhash) in illegal_descriptions() {
        let mut bin = None;
        let args = vec![list(entries.clone()), int(index), int(minhash)];
        assert_eq!(
            modify_op(&mut bin, code::ADD, args).err(),
            Some(ResultCode::Parameter)
        );
    }
}

#[test]
fn add_flags_and_arguments_follow_aerospike() {
    let entries = strings("key ", 0..256);
    let with_flags = |flags: u64| vec![list(entries.clone()), int(4), int(-1), int(flags as i64)];
    let mut bin = None;
    modify_op(&mut bin, code::ADD, with_flags(FLAG_CREATE_ONLY)).expect("creates");
    assert_eq!(
        modify_op(&mut bin, code::ADD, with_flags(FLAG_CREATE_ONLY)).err(),
        Some(ResultCode::BinExists)
    );
    assert_eq!(
        modify_op(&mut bin, code::ADD, with_flags(FLAG_UPDATE_ONLY)).err(),
        Some(ResultCode::Parameter)
    );
    assert_eq!(
        modify_op(&mut bin, code::ADD, with_flags(FLAG_ALLOW_FOLD)).err(),
        Some(ResultCode::Parameter)
    );
    assert!(matches!(
        modify_op(
            &mut bin,
            code::ADD,
            with_flags(FLAG_CREATE_ONLY | FLAG_NO_FAIL)
        ),
        Ok(Value::Nil)
    ));
    let mut missing = None;
    let no_bits = vec![list(entries.clone())];
    assert_eq!(
        modify_op(&mut missing, code::ADD, no_bits).err(),
        Some(ResultCode::OpNotApplicable)
    );
    // An existing bin keeps its own bit counts whatever the op says.
    let changed = add(&mut bin, &strings("other ", 0..10), 12, 20);
    assert!((0..=10).contains(&changed));
    assert_eq!(describe(&bin), (4, 0));
    // Lists and maps may not be elements; the list may not be empty.
    let nested = vec![list(vec![list(vec![int(1)])]), int(4)];
    assert_eq!(
        modify_op(&mut None, code::ADD, nested).err(),
        Some(ResultCode::Parameter)
    );
    assert_eq!(
        modify_op(&mut None, code::ADD, vec![list(vec![]), int(4)]).err(),
        Some(ResultCode::Parameter)
    );
    // Integers hash by value, whatever width they were sent in.
    let mut wide = None;
    let mut narrow = None;
    let wide_payload = [
        0x94, 0x01, 0x91, 0xd3, 0, 0, 0, 0, 0, 0, 0, 0x2a, 0x08, 0x00,
    ];
    modify(&wide_payload, &mut wide).expect("adds");
    add(&mut narrow, &[int(42)], 8, 0);
    assert_eq!(wide, narrow);
}

#[test]
fn fold_shrinks_index_bits_and_keeps_counts() {
    let vals0 = strings("key ", 0..128);
    let vals1 = strings("key ", 128..256);
    for index in 4..16i64 {
        for target in 4..=index {
            let mut bin = hll_with(index, 0, &vals0);
            let before = count(&bin);
            assert!(within(vals0.len(), before, index, 6.0));
            assert_eq!(
                as_int(modify_op(&mut bin, code::UPDATE_COUNT, vec![])),
                before
            );
            assert!(matches!(
                modify_op(&mut bin, code::FOLD, vec![int(target)]),
                Ok(Value::Nil)
            ));
            assert_eq!(describe(&bin), (target, 0));
            let folded = count(&bin);
            assert!(
                within(vals0.len(), folded, target, 6.0),
                "{index} -> {target}: {folded}"
            );
            assert_eq!(add(&mut bin, &vals0, -1, -1), 0, "{index} -> {target}");
            add(&mut bin, &vals1, -1, -1);
            assert!(within(256, count(&bin), target, 6.0));
            // Folding matches adding at the smaller size from the start.
            if target < index {
                let direct = hll_with(target, 0, &vals0);
                let mut folded_again = hll_with(index, 0, &vals0);
                modify_op(&mut folded_again, code::FOLD, vec![int(target)]).expect("folds");
                assert_eq!(folded_again, direct);
            }
        }
    }
}

#[test]
fn fold_refusals_follow_aerospike() {
    let mut bin = None;
    init(&mut bin, 10, -1, 0).expect("creates");
    modify_op(&mut bin, code::FOLD, vec![int(4)]).expect("folds down");
    assert_eq!(
        modify_op(&mut bin, code::FOLD, vec![int(16)]).err(),
        Some(ResultCode::OpNotApplicable)
    );
    assert_eq!(
        modify_op(&mut None, code::FOLD, vec![int(4)]).err(),
        Some(ResultCode::BinNotFound)
    );
    let mut minhash = None;
    init(&mut minhash, 10, 8, 0).expect("creates");
    assert_eq!(
        modify_op(&mut minhash, code::FOLD, vec![int(4)]).err(),
        Some(ResultCode::OpNotApplicable)
    );
    assert_eq!(
        modify_op(&mut bin, code::FOLD, vec![]).err(),
        Some(ResultCode::Parameter)
    );
    assert_eq!(
        modify_op(&mut bin, code::FOLD, vec![int(3)]).err(),
        Some(ResultCode::Parameter)
    );
}

fn expect_set_union(index_bits: i64, folding: bool, allow_fold: bool) {
    let vals: Vec<Vec<Value>> = (0..3)
        .map(|i| strings(&format!("key{i} "), 0..85))
        .collect();
    let mut folded = false;
    let mut hlls = Vec::new();
    let mut expected = 0;
    for (i, sub) in vals.iter().enumerate() {
        let mut ix = index_bits;
        if folding {
            ix = (ix - i as i64).max(4);
            folded |= ix < index_bits;
        }
        let bin = hll_with(ix, -1, sub);
        assert!(within(sub.len(), count(&bin), ix, 6.0));
        hlls.push(hll_of(&bin));
        expected += sub.len();
    }
    let flags = if allow_fold { FLAG_ALLOW_FOLD } else { 0 };
    let mut bin = None;
    init(&mut bin, index_bits, -1, 0).expect("creates");
    let result = modify_op(
        &mut bin,
        code::UNION,
        vec![list(hlls.clone()), int(flags as i64)],
    );
    if folded && !allow_fold {
        assert_eq!(result.err(), Some(ResultCode::OpNotApplicable));
        return;
    }
    assert!(matches!(result, Ok(Value::Nil)));
    let union_count = count(&bin);
    let mut fresh = None;
    modify_op(&mut fresh, code::UNION, vec![list(hlls), int(0)]).expect("creates");
    assert_eq!(count(&fresh), union_count);
    assert!(
        within(expected, union_count, index_bits, 6.0),
        "{union_count} of {expected}"
    );
    for sub in &vals {
        assert_eq!(add(&mut bin, sub, index_bits, -1), 0);
        assert_eq!(count(&bin), union_count);
    }
}

#[test]
fn set_union_merges_and_folds_only_when_allowed() {
    for index_bits in [4, 8, 12, 16] {
        for (folding, allow_fold) in [(false, false), (false, true), (true, false), (true, true)] {
            expect_set_union(index_bits, folding, allow_fold);
        }
    }
}

#[test]
fn set_union_flags_follow_aerospike() {
    let other = hll_with(6, -1, &strings("key ", 0..256));
    let hlls = || list(vec![hll_of(&other)]);
    let union =
        |bin: &mut Bin, flags: u64| modify_op(bin, code::UNION, vec![hlls(), int(flags as i64)]);
    let mut bin = None;
    union(&mut bin, FLAG_CREATE_ONLY).expect("creates");
    assert_eq!(bin, other, "a union of one HLL into nothing is that HLL");
    assert_eq!(
        union(&mut bin, FLAG_CREATE_ONLY).err(),
        Some(ResultCode::BinExists)
    );
    union(&mut bin, FLAG_UPDATE_ONLY).expect("updates");
    assert_eq!(
        union(&mut None, FLAG_UPDATE_ONLY).err(),
        Some(ResultCode::BinNotFound)
    );
    union(&mut bin, FLAG_CREATE_ONLY | FLAG_NO_FAIL).expect("skips");
    let mut missing = None;
    union(&mut missing, FLAG_UPDATE_ONLY | FLAG_NO_FAIL).expect("skips");
    assert_eq!(missing, None);
    // Fold down (8 -> 6) and up (4 stays 4).
    let mut high = None;
    init(&mut high, 8, -1, 0).expect("creates");
    assert_eq!(union(&mut high, 0).err(), Some(ResultCode::OpNotApplicable));
    union(&mut high, FLAG_ALLOW_FOLD).expect("folds");
    assert_eq!(describe(&high), (6, 0));
    let mut low = None;
    init(&mut low, 4, -1, 0).expect("creates");
    union(&mut low, FLAG_ALLOW_FOLD).expect("folds");
    assert_eq!(describe(&low), (4, 0));
    // A bin with minhash bits may not lose them without ALLOW_FOLD.
    let mut minhash = None;
    init(&mut minhash, 6, 8, 0).expect("creates");
    assert_eq!(
        union(&mut minhash, 0).err(),
        Some(ResultCode::OpNotApplicable)
    );
    union(&mut minhash, FLAG_ALLOW_FOLD).expect("folds");
    assert_eq!(describe(&minhash), (6, 0));
    // One HLL may be sent bare, not in a list.
    let mut bare = None;
    modify_op(&mut bare, code::UNION, vec![hll_of(&other)]).expect("creates");
    assert_eq!(bare, other);
}

#[test]
fn refresh_and_get_count_on_missing_bins() {
    assert_eq!(
        modify_op(&mut None, code::UPDATE_COUNT, vec![]).err(),
        Some(ResultCode::BinNotFound)
    );
    assert!(matches!(
        read_op(&None, code::COUNT, vec![]),
        Ok(Value::Nil)
    ));
    let mut bin = hll_with(6, -1, &strings("key ", 0..256));
    let first = as_int(modify_op(&mut bin, code::UPDATE_COUNT, vec![]));
    assert_eq!(
        as_int(modify_op(&mut bin, code::UPDATE_COUNT, vec![])),
        first
    );
    assert!(within(256, count(&bin), 6, 6.0));
}

#[test]
fn get_union_and_union_count_agree() {
    let vals: Vec<Vec<Value>> = (0..3)
        .map(|i| strings(&format!("key{i} "), 0..85))
        .collect();
    let hlls: Vec<Value> = vals
        .iter()
        .map(|sub| hll_of(&hll_with(14, -1, sub)))
        .collect();
    let bin = hll_with(14, -1, &vals[0]);
    let union = read_op(&bin, code::GET_UNION, vec![list(hlls.clone())]).expect("a union");
    let union_count = as_int(read_op(&bin, code::UNION_COUNT, vec![list(hlls)]));
    assert!(within(255, union_count, 14, 6.0), "{union_count}");
    let Value::Bytes { kind, data } = union else {
        panic!("expected an HLL, got {union:?}");
    };
    assert_eq!(kind, PARTICLE_HLL);
    assert_eq!(count(&Some((kind, data))), union_count);
}

#[test]
fn similarity_and_intersect_count_estimate_overlap() {
    let common = strings("common", 0..2000);
    let vals: Vec<Vec<Value>> = (0..3)
        .map(|i| strings(&format!("key{i} "), 0..2000))
        .collect();
    for (index, minhash) in [(12, 16), (14, 30), (16, 24)] {
        let hlls: Vec<Value> = vals
            .iter()
            .map(|sub| {
                let mut bin = hll_with(index, minhash, sub);
                add(&mut bin, &common, -1, -1);
                hll_of(&bin)
            })
            .collect();
        let mut bin = None;
        init(&mut bin, index, minhash, 0).expect("creates");
        modify_op(&mut bin, code::UNION, vec![list(hlls.clone())]).expect("unions");
        assert_eq!(describe(&bin), (index, minhash));
        // The bin (the union) with the three: the intersection is the common part.
        let similarity = as_float(read_op(&bin, code::SIMILARITY, vec![list(hlls.clone())]));
        let intersect = as_int(read_op(
            &bin,
            code::INTERSECT_COUNT,
            vec![list(hlls.clone())],
        ));
        let expected = 2000.0 / 8000.0;
        assert!(
            (similarity - expected).abs() < 0.05,
            "({index}, {minhash}): {similarity}"
        );
        assert!(
            within(2000, intersect, index, 12.0),
            "({index}, {minhash}): {intersect}"
        );
        // Two sketches (bin + one): similarity against its own union is |A| / |U|.
        let two = as_float(read_op(&bin, code::SIMILARITY, vec![hlls[0].clone()]));
        assert!((two - 0.5).abs() < 0.05, "{two}");
    }
}

#[test]
fn empty_similarity_is_nan_and_intersects_nothing() {
    for (index, minhash) in legal_descriptions() {
        let mut bin = None;
        init(&mut bin, index, minhash, 0).expect("creates");
        let hlls = vec![list(vec![hll_of(&bin)])];
        assert!(
            as_float(read_op(&bin, code::SIMILARITY, hlls.clone())).is_nan(),
            "({index}, {minhash})"
        );
        assert_eq!(as_int(read_op(&bin, code::INTERSECT_COUNT, hlls)), 0);
    }
}

#[test]
fn intersect_refusals_follow_aerospike() {
    let entries = strings("key ", 0..256);
    for index in [4, 8, 12, 16] {
        let bin = hll_with(index, 0, &entries);
        let hll = hll_of(&bin);
        let hmh = hll_of(&hll_with(index, 4, &entries));
        let two = list(vec![hll.clone(), hll.clone()]);
        let intersect = as_int(read_op(&bin, code::INTERSECT_COUNT, vec![two.clone()]));
        assert!((intersect as f64) < 1.8 * 256.0, "{intersect}");
        as_float(read_op(&bin, code::SIMILARITY, vec![two]));
        let three = list(vec![hll.clone(), hll.clone(), hll]);
        assert_eq!(
            read_op(&bin, code::INTERSECT_COUNT, vec![three.clone()]).err(),
            Some(ResultCode::Parameter)
        );
        assert_eq!(
            read_op(&bin, code::SIMILARITY, vec![three]).err(),
            Some(ResultCode::Parameter)
        );
        let hmhs = list(vec![hmh.clone(), hmh.clone()]);
        let intersect = as_int(read_op(&bin, code::INTERSECT_COUNT, vec![hmhs]));
        assert!((intersect as f64) < 1.8 * 256.0, "{intersect}");
        let hmhs = list(vec![hmh.clone(), hmh.clone(), hmh]);
        assert_eq!(
            read_op(&bin, code::INTERSECT_COUNT, vec![hmhs.clone()]).err(),
            Some(ResultCode::OpNotApplicable)
        );
        assert_eq!(
            read_op(&bin, code::SIMILARITY, vec![hmhs]).err(),
            Some(ResultCode::OpNotApplicable)
        );
    }
}

#[test]
fn may_contain_finds_every_added_element() {
    let entries = strings("key ", 0..256);
    let bin = hll_with(12, 20, &entries);
    assert_eq!(
        as_int(read_op(
            &bin,
            code::MAY_CONTAIN,
            vec![list(entries.clone())]
        )),
        1
    );
    assert_eq!(
        as_int(read_op(
            &bin,
            code::MAY_CONTAIN,
            vec![list(entries[..1].to_vec())]
        )),
        1
    );
    let absent = strings("absent ", 0..64);
    assert_eq!(
        as_int(read_op(&bin, code::MAY_CONTAIN, vec![list(absent)])),
        0
    );
}

#[test]
fn malformed_ops_and_bins_are_refused() {
    let bin = hll_with(8, 0, &strings("key ", 0..10));
    let (_, bytes) = bin.clone().expect("a bin");
    let stored = |bytes: Vec<u8>| Some((PARTICLE_HLL, bytes));
    // A stored HLL of the wrong size, flags or bits.
    let short = stored(bytes[..bytes.len() - 1].to_vec());
    assert_eq!(
        read_op(&short, code::COUNT, vec![]).err(),
        Some(ResultCode::Parameter)
    );
    let mut flagged = bytes.clone();
    flagged[0] = 1;
    assert_eq!(
        read_op(&stored(flagged), code::COUNT, vec![]).err(),
        Some(ResultCode::Parameter)
    );
    let mut bits = bytes.clone();
    bits[1] = 17;
    assert_eq!(
        read_op(&stored(bits), code::COUNT, vec![]).err(),
        Some(ResultCode::Parameter)
    );
    assert_eq!(
        read_op(&stored(vec![]), code::COUNT, vec![]).err(),
        Some(ResultCode::Parameter)
    );
    let mut short = short;
    assert_eq!(
        modify_op(&mut short, code::ADD, vec![list(vec![int(1)])]).err(),
        Some(ResultCode::Parameter)
    );
    // Another particle type.
    let other = Some((3u8, b"text".to_vec()));
    assert_eq!(
        read_op(&other, code::COUNT, vec![]).err(),
        Some(ResultCode::IncompatibleType)
    );
    let mut other = other;
    assert_eq!(
        init(&mut other, 8, 0, 0).err(),
        Some(ResultCode::IncompatibleType)
    );
    // Bad payloads.
    let mut target = bin.clone();
    for bad in [
        vec![],
        vec![0x90],
        vec![0x01],
        vec![0x91],
        vec![0x92, 0x00],
        vec![0x81, 0x00, 0x00],
    ] {
        assert_eq!(
            modify(&bad, &mut target).err(),
            Some(ResultCode::Parameter),
            "{bad:?}"
        );
        assert_eq!(
            read(&bad, Some((PARTICLE_HLL, &bytes))).err(),
            Some(ResultCode::Parameter)
        );
    }
    assert_eq!(read_op(&bin, 57, vec![]).err(), Some(ResultCode::Parameter));
    assert_eq!(
        read_op(&bin, code::INIT, vec![]).err(),
        Some(ResultCode::Parameter)
    );
    assert_eq!(
        modify_op(&mut target, code::COUNT, vec![]).err(),
        Some(ResultCode::Parameter)
    );
    assert_eq!(
        modify_op(&mut target, 5, vec![]).err(),
        Some(ResultCode::Parameter)
    );
    assert_eq!(
        read_op(&bin, code::COUNT, vec![int(1)]).err(),
        Some(ResultCode::Parameter)
    );
    assert_eq!(
        modify_op(&mut target, code::UPDATE_COUNT, vec![int(1)]).err(),
        Some(ResultCode::Parameter)
    );
    let five = vec![int(8), int(0), int(0), int(0)];
    assert_eq!(
        modify_op(&mut target, code::INIT, five).err(),
        Some(ResultCode::Parameter)
    );
    assert_eq!(
        init(&mut target, 8, 0, 16).err(),
        Some(ResultCode::Parameter),
        "unknown flag"
    );
    // Bad HLL arguments: truncated, wrong size, bad flags, not bytes.
    let mut bad_sketches = Vec::new();
    let good = bytes.clone();
    bad_sketches.push(good[..good.len() - 1].to_vec());
    bad_sketches.push(good[..5].to_vec());
    let mut flagged = good.clone();
    flagged[0] = 2;
    bad_sketches.push(flagged);
    let mut big = good.clone();
    big[1] = 16;
    bad_sketches.push(big);
    for sketch in bad_sketches {
        let arg = list(vec![Value::Bytes {
            kind: PARTICLE_HLL,
            data: sketch,
        }]);
        assert_eq!(
            read_op(&bin, code::UNION_COUNT, vec![arg.clone()]).err(),
            Some(ResultCode::Parameter)
        );
        assert_eq!(
            modify_op(&mut target, code::UNION, vec![arg]).err(),
            Some(ResultCode::Parameter)
        );
    }
    assert_eq!(
        read_op(&bin, code::GET_UNION, vec![list(vec![int(1)])]).err(),
        Some(ResultCode::Parameter)
    );
    assert_eq!(
        read_op(&bin, code::GET_UNION, vec![list(vec![])]).err(),
        Some(ResultCode::Parameter)
    );
}

#[test]
fn op_codes_split_into_reads_and_modifies() {
    for code in 0..=4 {
        assert_eq!(is_modify(code), Some(true));
    }
    for code in 50..=56 {
        assert_eq!(is_modify(code), Some(false));
    }
    for code in [5, 49, 57, 255] {
        assert_eq!(is_modify(code), None);
    }
}

#[test]
fn random_distinct_adds_estimate_within_three_standard_errors() {
    let seed = std::env::var("OSPREY_HLL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
            now.map_or(1, |elapsed| elapsed.as_nanos() as u64)
        });
    println!("hll estimate test seed: {seed} (replay with OSPREY_HLL_SEED={seed})");
    let mut rng = SmallRng::seed_from_u64(seed);
    for index_bits in [8, 10, 12, 14] {
        let n = rng.random_range(2_000..20_000usize);
        let mut values: Vec<i64> = (0..n).map(|_| rng.random::<i64>()).collect();
        values.sort_unstable();
        values.dedup();
        let mut bin = None;
        for chunk in values.chunks(1000) {
            let chunk: Vec<Value> = chunk.iter().map(|&v| int(v)).collect();
            add(&mut bin, &chunk, index_bits, 0);
        }
        let estimate = count(&bin);
        assert!(
            within(values.len(), estimate, index_bits, 3.0),
            "seed {seed}: {estimate} for {} distinct values at {index_bits} index bits",
            values.len()
        );
    }
}
