use super::*;

fn hex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("hex"))
        .collect()
}

fn strings(words: &[&str]) -> Vec<Vec<u8>> {
    words.iter().map(|w| w.as_bytes().to_vec()).collect()
}

#[test]
fn crc64_matches_redis_test_vector() {
    assert_eq!(crc64(0, b"123456789"), 0xe9c6_d914_c4b8_d9ca);
}

/// Payloads redis-server 7.0.15 answered to DUMP, each in its compact encoding: integer and
/// LZF strings, a quicklist of an LZF listpack, an intset, a listpack sorted set and hash.
#[test]
fn dumps_of_redis_server_decode_to_their_values() {
    let cases: &[(&str, RdbValue)] = &[
        (
            "000568656c6c6f0a006372df766534200a",
            RdbValue::String(b"hello".to_vec()),
        ),
        (
            "00c139300a009d94ea2793fc08b9",
            RdbValue::String(b"12345".to_vec()),
        ),
        (
            "00c3094064016161e057000161610a00e8a3b507b06df271",
            RdbValue::String(vec![b'a'; 100]),
        ),
        (
            "00c290eefeff0a002875de7b13eb2800",
            RdbValue::String(b"-70000".to_vec()),
        ),
        (
            "120102c3204143144301000005008161028162020c01f178ec03e12c78e0ff00e01a000202aeff0a00\
             1c116cf928120fe0",
            RdbValue::List({
                let mut list = strings(&["a", "b", "12", "-5000"]);
                list.push(vec![b'x'; 300]);
                list
            }),
        ),
        (
            "0b1804000000040000006079feff0100000002000000030000000a008b0f7802aa2a77a0",
            RdbValue::Set(strings(&["-100000", "1", "2", "3"])),
        ),
        (
            "0202016201610a0075d99d835ef85f65",
            RdbValue::Set(strings(&["b", "a"])),
        ),
        (
            "111a1a0000000600816202dffe0281610283312e35048163026401ff0a00718be73e2c2aab28",
            RdbValue::ZSet(vec![
                (b"b".to_vec(), -2.0),
                (b"a".to_vec(), 1.5),
                (b"c".to_vec(), 100.0),
            ]),
        ),
        (
            "1012120000000400816602817602816e022a01ff0a00ff30e87f7262d991",
            RdbValue::Hash(vec![
                (b"f".to_vec(), b"v".to_vec()),
                (b"n".to_vec(), b"42".to_vec()),
            ]),
        ),
    ];
    for (payload, expected) in cases {
        assert_eq!(decode(&hex(payload)).as_ref(), Ok(expected), "{payload}");
    }
}

#[test]
fn every_type_round_trips_through_its_plain_encoding() {
    let long = vec![b'z'; 20_000];
    let values = [
        RdbValue::String(long.clone()),
        RdbValue::String(Vec::new()),
        RdbValue::List(vec![long.clone(), b"1".to_vec()]),
        RdbValue::Set(strings(&["a", "b", "c"])),
        RdbValue::ZSet(vec![
            (b"m".to_vec(), f64::NEG_INFINITY),
            (b"n".to_vec(), 0.25),
        ]),
        RdbValue::Hash(vec![(b"f".to_vec(), long)]),
    ];
    for value in values {
        assert_eq!(decode(&encode(&value)), Ok(value));
    }
}

#[test]
fn a_changed_byte_or_a_newer_version_is_refused_by_the_footer() {
    let payload = encode(&RdbValue::String(b"value".to_vec()));
    for position in 0..payload.len() {
        let mut corrupted = payload.clone();
        corrupted[position] ^= 0x01;
        assert_eq!(
            decode(&corrupted),
            Err(DumpError::VersionOrChecksum),
            "byte {position}"
        );
    }
    let mut newer = payload[..payload.len() - FOOTER_BYTES].to_vec();
    newer.extend_from_slice(&(RDB_VERSION + 1).to_le_bytes());
    let checksum = crc64(0, &newer);
    newer.extend_from_slice(&checksum.to_le_bytes());
    assert_eq!(decode(&newer), Err(DumpError::VersionOrChecksum));
    assert_eq!(decode(b"short"), Err(DumpError::VersionOrChecksum));
}

/// Wraps `body` in a valid footer, so that the value parser itself is exercised.
fn with_footer(body: &[u8]) -> Vec<u8> {
    let mut payload = body.to_vec();
    payload.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let checksum = crc64(0, &payload);
    payload.extend_from_slice(&checksum.to_le_bytes());
    payload
}

#[test]
fn declared_lengths_beyond_the_payload_are_refused_without_allocating_them() {
    // A string of 2^64-1 bytes, a list of 2^32-1 elements, an LZF string expanding 1 GiB.
    let bodies: [&[u8]; 4] = [
        &[0, 0x81, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
        &[1, 0x80, 0xff, 0xff, 0xff, 0xff, 1, b'a'],
        &[0, 0xc3, 2, 0x80, 0x40, 0, 0, 0, 0, b'a'],
        &[2, 0],
    ];
    for body in bodies {
        assert_eq!(
            decode(&with_footer(body)),
            Err(DumpError::BadFormat),
            "{body:?}"
        );
    }
}

/// Random bodies behind a valid footer, and random mutations of valid dumps: the parser
/// answers or refuses, never panics. SEED= replays a run.
#[test]
fn random_payloads_never_panic() {
    let mut next = crate::test_seed::xorshift(crate::test_seed::seed("rdb payloads"));
    let valid =
        hex("120102c3204143144301000005008161028162020c01f178ec03e12c78e0ff00e01a000202aeff0a00");
    for _ in 0..20_000 {
        let length = (next() % 64) as usize;
        let mut body: Vec<u8> = (0..length).map(|_| next() as u8).collect();
        if next().is_multiple_of(2) {
            body = valid[..valid.len() - 2].to_vec();
            let flips = 1 + next() % 4;
            for _ in 0..flips {
                let position = (next() as usize) % body.len();
                body[position] = next() as u8;
            }
        } else if let Some(first) = body.first_mut() {
            *first %= 21;
        }
        let _ = decode(&with_footer(&body));
    }
}

/// FUNCTION DUMP of redis-server 7.0.15 holding one library: its code is an LZF string.
#[test]
fn function_dumps_of_redis_server_decode_to_their_libraries() {
    let payload = hex(
        "f5c34056405b1f23216c7561206e616d653d6d796c69620a72656469732e72656769737465725f0b66756e\
         6374696f6e28276d79400b02272c2040066012116b6579732c2061726773292072657475726e600c075b315d\
         20656e64290a008d5936adc6e707da",
    );
    let code = b"#!lua name=mylib\nredis.register_function('myfunc', function(keys, args) \
                 return args[1] end)";
    assert_eq!(decode_functions(&payload), Ok(vec![code.to_vec()]));
}

#[test]
fn function_dumps_round_trip_and_refuse_what_is_not_a_library() {
    let codes = strings(&["#!lua name=a\nx", "#!lua name=b\ny"]);
    let payload = encode_functions(codes.iter().map(Vec::as_slice));
    assert_eq!(decode_functions(&payload), Ok(codes));
    assert_eq!(decode_functions(&encode_functions([])), Ok(Vec::new()));
    let mut corrupt = payload.clone();
    corrupt[3] ^= 1;
    assert_eq!(
        decode_functions(&corrupt),
        Err(FunctionsError::VersionOrChecksum)
    );
    // A value's dump has the right footer but is not a library.
    let value = encode(&RdbValue::String(b"v".to_vec()));
    assert_eq!(decode_functions(&value), Err(FunctionsError::NotAFunction));
}

/// Random bodies under a valid footer: decoding answers, never panics or allocates what a
/// length merely declares.
#[test]
fn function_dumps_of_random_bytes_never_panic() {
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    for _ in 0..2000 {
        let mut body = vec![rdb_opcode::FUNCTION_2];
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let length = (seed % 24) as usize;
        body.extend((0..length).map(|i| (seed >> (i % 8 * 8)) as u8));
        body.extend_from_slice(&RDB_VERSION.to_le_bytes());
        let checksum = crc64(0, &body);
        body.extend_from_slice(&checksum.to_le_bytes());
        let _ = decode_functions(&body);
    }
}

/// A listpack entry of exactly 16,383 bytes has a 3-byte back length in Redis
/// (`lpEncodeBacklen`: two bytes only below 16,383). The decoder once took two, so a list,
/// hash or set holding a value of 16,378 bytes (5 bytes of header) was refused as malformed.
#[test]
fn a_listpack_entry_at_a_back_length_bound_decodes() {
    for length in [16_377, 16_378, 16_379, 2_097_146] {
        let value = vec![b'v'; length];
        let items = [ListpackItem::Bytes(&value), ListpackItem::Integer(-5000)];
        let packed = write_listpack(&items);
        assert_eq!(
            listpack_items(&packed),
            Some(items.to_vec()),
            "length {length}"
        );
    }
}

#[test]
fn listpack_integers_round_trip_at_every_width() {
    let values = [
        0,
        127,
        128,
        -1,
        -4096,
        4095,
        4096,
        -32_768,
        32_767,
        -8_388_608,
        8_388_607,
        i64::from(i32::MIN),
        i64::from(i32::MAX),
        i64::MIN,
        i64::MAX,
    ];
    let items: Vec<ListpackItem<'_>> = values.iter().map(|v| ListpackItem::Integer(*v)).collect();
    assert_eq!(listpack_items(&write_listpack(&items)), Some(items));
}

/// A stream with a deleted entry, a group with a pending entry and two consumers round-trips
/// through the dump encoding (type 19, as Redis 7.0 writes it).
#[test]
fn a_stream_round_trips_through_its_encoding() {
    use super::super::streams::StreamId;
    let id = |ms, seq| StreamId { ms, seq };
    let stream = RdbStream {
        entries: vec![
            (id(5, 3), strings(&["f", "v"])),
            (id(6, 0), strings(&["f", "w", "g", "12"])),
        ],
        last_id: id(7, 0),
        entries_added: 3,
        max_deleted_id: id(7, 0),
        groups: vec![RdbGroup {
            name: b"grp".to_vec(),
            last_id: id(6, 0),
            entries_read: Some(2),
            pending: vec![RdbPending {
                id: id(6, 0),
                consumer: b"bob".to_vec(),
                delivery_time_ms: 1_700_000_000_000,
                delivery_count: 2,
            }],
            consumers: vec![
                RdbConsumer {
                    name: b"alice".to_vec(),
                    seen_time_ms: 1_700_000_000_001,
                    active_time_ms: 1_700_000_000_001,
                },
                RdbConsumer {
                    name: b"bob".to_vec(),
                    seen_time_ms: 1_700_000_000_002,
                    active_time_ms: 1_700_000_000_002,
                },
            ],
        }],
    };
    let value = RdbValue::Stream(Box::new(stream));
    assert_eq!(decode(&encode(&value)), Ok(value));
}
