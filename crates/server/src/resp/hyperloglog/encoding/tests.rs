use super::*;

fn from_hex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|at| u8::from_str_radix(&text[at..at + 2], 16).expect("hex"))
        .collect()
}

/// FNV-1a over the bytes: a fingerprint of the values redis-server 7.0 produced, computed the
/// same way in Python when the fixtures were taken.
fn fingerprint(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The value redis-server builds by PFADD of `e0`..`e{n-1}`, with the cache left stale.
fn added(n: usize) -> Vec<u8> {
    let mut value = empty();
    invalidate_cached_count(&mut value);
    for element in 0..n {
        add(
            &mut value,
            format!("e{element}").as_bytes(),
            SPARSE_BYTES_MAX_DEFAULT,
        )
        .expect("a valid value");
    }
    value
}

/// The registers of any valid value, one per byte.
fn registers_of(value: &[u8]) -> Box<[u8; REGISTER_COUNT]> {
    let mut registers = Box::new([0u8; REGISTER_COUNT]);
    merge_into(&mut registers, value).expect("a valid value");
    registers
}

#[test]
fn empty_value_is_redis_bytes() {
    let mut value = empty();
    invalidate_cached_count(&mut value);
    assert_eq!(value, from_hex("48594c4c0100000000000000000000807fff"));
    assert_eq!(check(&value), Ok(Encoding::Sparse));
    assert_eq!(count(&value), Ok(0));
}

#[test]
fn small_values_are_byte_for_byte_redis_sparse_values() {
    // PFADD s a b c in redis-server 7.0, then after PFCOUNT (cache 3, valid).
    let mut value = empty();
    invalidate_cached_count(&mut value);
    for element in [&b"a"[..], b"b", b"c"] {
        assert_eq!(add(&mut value, element, SPARSE_BYTES_MAX_DEFAULT), Ok(true));
    }
    assert_eq!(add(&mut value, b"b", SPARSE_BYTES_MAX_DEFAULT), Ok(false));
    assert_eq!(
        value,
        from_hex("48594c4c01000000000000000000008060f38050b1844bfb80425a")
    );
    assert_eq!(cached_count(&value), None);
    assert_eq!(count(&value), Ok(3));
    set_cached_count(&mut value, 3);
    assert_eq!(
        value,
        from_hex("48594c4c01000000030000000000000060f38050b1844bfb80425a")
    );
    assert_eq!(cached_count(&value), Some(3));
}

#[test]
fn values_and_estimates_match_redis_server_from_sparse_to_dense() {
    // (elements, redis-server's PFCOUNT, its encoding, its length, fingerprint of its bytes)
    let fixtures = [
        (100, 100, Encoding::Sparse, 285, 0xb8de_76da_b4a4_065e_u64),
        (1000, 1008, Encoding::Sparse, 1906, 0x5935_de02_3280_6824),
        (
            5000,
            4968,
            Encoding::Dense,
            DENSE_BYTES,
            0x8052_4675_3a1c_dada,
        ),
        (
            100_000,
            100_853,
            Encoding::Dense,
            DENSE_BYTES,
            0xafbf_1713_dc5b_a3c8,
        ),
    ];
    for (elements, estimate, encoding, length, print) in fixtures {
        let value = added(elements);
        assert_eq!(check(&value), Ok(encoding), "{elements}");
        assert_eq!(value.len(), length, "{elements}");
        assert_eq!(fingerprint(&value), print, "{elements}");
        assert_eq!(count(&value), Ok(estimate), "{elements}");
        assert_eq!(count_registers(&registers_of(&value)), estimate);
    }
}

#[test]
fn sparse_and_dense_hold_the_same_registers_and_estimates() {
    for elements in [0, 1, 7, 300, 1500] {
        let sparse = added(elements);
        assert_eq!(check(&sparse), Ok(Encoding::Sparse));
        let mut dense = sparse.clone();
        to_dense(&mut dense).expect("a valid value");
        assert_eq!(check(&dense), Ok(Encoding::Dense));
        assert_eq!(
            dense[..HEADER_BYTES],
            sparse[..HEADER_BYTES]
                .iter()
                .enumerate()
                .map(|(at, &byte)| if at == ENCODING_AT { 0 } else { byte })
                .collect::<Vec<_>>()[..]
        );
        assert_eq!(registers_of(&sparse), registers_of(&dense), "{elements}");
        assert_eq!(count(&sparse), count(&dense), "{elements}");
    }
}

#[test]
fn a_register_above_32_promotes_a_sparse_value() {
    let mut value = empty();
    assert_eq!(
        set_register(&mut value, 5, 32, SPARSE_BYTES_MAX_DEFAULT),
        Ok(true)
    );
    assert_eq!(check(&value), Ok(Encoding::Sparse));
    assert_eq!(
        set_register(&mut value, 9, 33, SPARSE_BYTES_MAX_DEFAULT),
        Ok(true)
    );
    assert_eq!(check(&value), Ok(Encoding::Dense));
    let registers = registers_of(&value);
    assert_eq!((registers[5], registers[9], registers[10]), (32, 33, 0));
    assert_eq!(cached_count(&value), None);
    assert_eq!(
        set_register(&mut value, 9, 20, SPARSE_BYTES_MAX_DEFAULT),
        Ok(false)
    );
}

#[test]
fn sparse_values_never_pass_the_sparse_limit() {
    let mut value = empty();
    let mut state = 7u64;
    for _ in 0..3000 {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1);
        let index = (state >> 40) as usize % REGISTER_COUNT;
        let run = (state >> 20) as u8 % 32 + 1;
        let before = registers_of(&value)[index];
        assert_eq!(
            set_register(&mut value, index, run, SPARSE_BYTES_MAX_DEFAULT),
            Ok(run > before)
        );
        if check(&value) == Ok(Encoding::Sparse) {
            assert!(value.len() <= SPARSE_BYTES_MAX_DEFAULT, "{}", value.len());
        }
        assert_eq!(registers_of(&value)[index], run.max(before));
    }
    assert_eq!(check(&value), Ok(Encoding::Dense));
}

/// `hll-sparse-max-bytes` moves the promotion: a lower limit turns a value dense sooner, the
/// value never passes it while sparse, and both encodings hold the same registers.
#[test]
fn a_lower_sparse_limit_promotes_sooner_and_is_never_passed() {
    for limit in [0, 30, 300] {
        let mut value = empty();
        let mut promoted_at = None;
        for element in 0..2000 {
            add(&mut value, format!("e{element}").as_bytes(), limit).expect("a valid value");
            match check(&value) {
                Ok(Encoding::Sparse) => assert!(value.len() <= limit.max(empty().len())),
                _ => {
                    promoted_at.get_or_insert(element);
                }
            }
        }
        let promoted_at = promoted_at.expect("2000 elements pass every limit tried");
        if limit == 0 {
            assert_eq!(promoted_at, 0);
        }
        assert_eq!(registers_of(&value), registers_of(&added(2000)));
    }
}

#[test]
fn headers_that_are_not_hll_are_refused() {
    let dense = {
        let mut value = empty();
        to_dense(&mut value).expect("valid");
        value
    };
    assert_eq!(check(&dense), Ok(Encoding::Dense));
    assert_eq!(check(&dense[..DENSE_BYTES - 1]), Err(NotHll));
    assert_eq!(check(b""), Err(NotHll));
    assert_eq!(check(b"HYLL"), Err(NotHll));
    assert_eq!(
        check(b"hyll\x01\0\0\0\0\0\0\0\0\0\0\0\x7f\xff"),
        Err(NotHll)
    );
    assert_eq!(
        check(b"HYLL\x02\0\0\0\0\0\0\0\0\0\0\0\x7f\xff"),
        Err(NotHll)
    );
    // A sparse header with no opcodes passes the header check, and is corrupted.
    let bare = b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\0";
    assert_eq!(check(bare), Ok(Encoding::Sparse));
    assert_eq!(count(bare), Err(Corrupted));
    assert_eq!(
        add(&mut bare.to_vec(), b"x", SPARSE_BYTES_MAX_DEFAULT),
        Err(Corrupted)
    );
}

#[test]
fn corrupted_sparse_values_are_reported_never_read_past_their_end() {
    // Runs covering too few or too many registers, a VAL past the last register, an XZERO cut
    // in half: every operation answers Corrupted.
    let header = &empty()[..HEADER_BYTES];
    let bodies: [&[u8]; 5] = [
        &[0x7f, 0xfe],       // 16383 registers
        &[0x7f, 0xff, 0x00], // 16385
        &[0x7f, 0xfd, 0x83], // 16382, then a VAL run of 4 past the end
        &[0x7f],             // XZERO missing its second byte: 16129 registers
        &[0x80, 0x7f, 0xff], // a VAL, then 16384 more
    ];
    for body in bodies {
        let value = [header, body].concat();
        assert_eq!(count(&value), Err(Corrupted), "{body:?}");
        let mut registers = Box::new([0u8; REGISTER_COUNT]);
        assert_eq!(
            merge_into(&mut registers, &value),
            Err(Corrupted),
            "{body:?}"
        );
        assert_eq!(to_dense(&mut value.clone()), Err(Corrupted), "{body:?}");
    }
}

#[test]
fn random_bytes_after_a_sparse_header_never_panic() {
    // Seeded garbage: whatever the opcodes say, every operation returns, Ok or Corrupted.
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    for round in 0..2000 {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1442695040888963407);
        let length = (state >> 50) as usize % 40;
        let mut value = empty()[..HEADER_BYTES].to_vec();
        for _ in 0..length {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1);
            value.push((state >> 33) as u8);
        }
        let _ = count(&value);
        let mut registers = Box::new([0u8; REGISTER_COUNT]);
        let _ = merge_into(&mut registers, &value);
        let mut changed = value.clone();
        let element = format!("{round}");
        if add(&mut changed, element.as_bytes(), SPARSE_BYTES_MAX_DEFAULT).is_ok() {
            assert!(check(&changed).is_ok());
        }
        let _ = to_dense(&mut value);
    }
}

#[test]
fn murmur_hash_and_register_choice_follow_redis() {
    // The register and run of "a", "b", "c" are those the sparse fixture above encodes.
    assert_eq!(murmur_hash64a(b"", 0), 0);
    let registers = registers_of(&from_hex(
        "48594c4c01000000000000000000008060f38050b1844bfb80425a",
    ));
    for element in [&b"a"[..], b"b", b"c"] {
        let (index, run) = register_of(element);
        assert_eq!(registers[index], run);
    }
    assert_eq!(registers.iter().filter(|&&run| run > 0).count(), 3);
}

#[test]
fn estimator_handles_extreme_histograms_as_redis_does() {
    // Registers no hash can reach (a value written by hand) overflow the estimate: Redis's
    // llroundl then gives i64::MIN, which redis-server 7.0 answers and caches (stale bit set).
    let mut registers = Box::new([0u8; REGISTER_COUNT]);
    assert_eq!(count_registers(&registers), 0);
    for register_value in [50, 51, 63] {
        registers.fill(register_value);
        assert_eq!(count_registers(&registers), ESTIMATE_OUT_OF_RANGE);
    }
    registers.fill(1);
    assert_eq!(count_registers(&registers), 23637);
    let mut value = empty();
    set_cached_count(&mut value, ESTIMATE_OUT_OF_RANGE);
    assert_eq!(cached_count(&value), None);
}
