//! "Never panics on arbitrary bytes": random bytes, random mutations of valid messages and every
//! truncation of valid frames go through `decode_frame` and `Message::parse`, which must answer
//! with a value (never a panic), and whose answers must be self-consistent.
//!
//! Each test prints its seed; `SEED=<n> cargo test -p wire-aerospike --test decode_fuzz` replays
//! it. Iteration counts are small so the suite stays well under two seconds in debug builds.

use model::{Op, OpCode};
use wire_aerospike::{
    Frame, Malformed, Message, MessageHeader, PROTO_BODY_SIZE_BYTES_MAX, PROTO_HEADER_SIZE_BYTES,
    decode_frame, encode_message, field_type,
};

/// SplitMix64: tiny, seedable, good enough to drive a fuzzer.
struct Prng(u64);

impl Prng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A value in `0..bound` (`bound` > 0).
    fn below(&mut self, bound: usize) -> usize {
        let bound = u64::try_from(bound).expect("usize fits in u64");
        usize::try_from(self.next_u64() % bound).expect("below a usize bound")
    }

    fn byte(&mut self) -> u8 {
        self.next_u64().to_le_bytes()[0]
    }

    fn chance(&mut self, one_in: usize) -> bool {
        self.below(one_in) == 0
    }

    fn bytes(&mut self, size_bytes_max: usize) -> Vec<u8> {
        let size_bytes = self.below(size_bytes_max + 1);
        (0..size_bytes).map(|_| self.byte()).collect()
    }
}

/// The seed from `SEED`, or a fresh one; printed so a failure can be replayed.
fn seeded(test_name: &str) -> Prng {
    let seed = match std::env::var("SEED") {
        Ok(text) => text.parse().expect("SEED must be a u64"),
        Err(_) => {
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
            let nanos = now.expect("the clock is after 1970").as_nanos();
            u64::try_from(nanos % u128::from(u64::MAX)).expect("reduced below u64::MAX")
        }
    };
    println!("{test_name}: seed {seed} (replay with SEED={seed})");
    Prng(seed)
}

const OP_CODES: [OpCode; 15] = [
    OpCode::Read,
    OpCode::Write,
    OpCode::CdtRead,
    OpCode::CdtModify,
    OpCode::Incr,
    OpCode::ExpRead,
    OpCode::ExpModify,
    OpCode::Append,
    OpCode::Prepend,
    OpCode::Touch,
    OpCode::BitRead,
    OpCode::BitModify,
    OpCode::Delete,
    OpCode::HllRead,
    OpCode::HllModify,
];

const FIELD_TYPES: [u8; 10] = [
    field_type::NAMESPACE,
    field_type::SET,
    field_type::KEY,
    field_type::DIGEST,
    field_type::FILTER_EXP,
    field_type::UDF_FILENAME,
    field_type::BATCH,
    field_type::PID_ARRAY,
    field_type::TRID,
    0xfe,
];

/// Encodes a random valid request frame into a fresh buffer.
fn random_valid_frame(rng: &mut Prng) -> Vec<u8> {
    let header = MessageHeader {
        info1: rng.byte(),
        info2: rng.byte(),
        info3: rng.byte(),
        info4: rng.byte(),
        result_code: rng.byte(),
        generation: u32::from(rng.byte()),
        record_ttl: u32::from(rng.byte()),
        transaction_ttl: u32::from(rng.byte()),
        field_count: 0,
        op_count: 0,
    };
    let field_data: Vec<(u8, Vec<u8>)> = (0..rng.below(6))
        .map(|_| (FIELD_TYPES[rng.below(FIELD_TYPES.len())], rng.bytes(24)))
        .collect();
    let op_parts: Vec<(OpCode, u8, Vec<u8>, Vec<u8>)> = (0..rng.below(6))
        .map(|_| {
            (
                OP_CODES[rng.below(OP_CODES.len())],
                rng.byte(),
                rng.bytes(16),
                rng.bytes(24),
            )
        })
        .collect();
    let fields: Vec<(u8, &[u8])> = field_data.iter().map(|(t, data)| (*t, &data[..])).collect();
    let ops: Vec<Op<'_>> = op_parts
        .iter()
        .map(|(code, particle_type, name, value)| Op {
            code: *code,
            particle_type: *particle_type,
            bin_name: name,
            value,
        })
        .collect();
    let mut out = Vec::new();
    encode_message(&mut out, &header, &fields, &ops);
    out
}

/// Feeds `bytes` to both decoders and checks that whatever they accept is consistent.
fn decode_everything(bytes: &[u8], body_size_bytes_max: u64) {
    let decoded: Result<Option<Frame<'_>>, Malformed> = decode_frame(bytes, body_size_bytes_max);
    if let Ok(Some(frame)) = decoded {
        assert!(frame.size_bytes() <= bytes.len());
        assert_eq!(
            frame.body,
            &bytes[PROTO_HEADER_SIZE_BYTES..frame.size_bytes()]
        );
        let body_size_bytes = u64::try_from(frame.body.len()).expect("usize fits in u64");
        assert!(body_size_bytes <= body_size_bytes_max);
        parse_everything(frame.body);
    }
    parse_everything(bytes);
}

/// Parses `body` and, when it is accepted, walks every op the header promised.
fn parse_everything(body: &[u8]) {
    if let Ok(message) = Message::parse(body) {
        let ops = message.ops();
        assert_eq!(ops.len(), usize::from(message.header.op_count));
        let walked = ops.inspect(|op| assert!(op.bin_name.len() <= 255)).count();
        assert_eq!(walked, usize::from(message.header.op_count));
        let field_count = usize::from(message.header.field_count);
        assert!(usize::from(message.fields.other_field_count) <= field_count);
    }
}

/// Applies one random damage to a valid frame: flip, overwrite a size word, cut, insert, delete.
fn mutate(rng: &mut Prng, bytes: &mut Vec<u8>) {
    if bytes.is_empty() {
        bytes.push(rng.byte());
        return;
    }
    let at = rng.below(bytes.len());
    match rng.below(5) {
        0 => bytes[at] ^= 1 << rng.below(8),
        1 => {
            let interesting = [0, 1, 3, 4, 5, 22, 0xffff, 0x7fff_ffff, u32::MAX];
            let word = interesting[rng.below(interesting.len())].to_be_bytes();
            let end = (at + 4).min(bytes.len());
            bytes[at..end].copy_from_slice(&word[..end - at]);
        }
        2 => bytes.truncate(at),
        3 => bytes.insert(at, rng.byte()),
        _ => {
            bytes.remove(at);
        }
    }
}

#[test]
fn random_bytes_never_panic_the_decoders() {
    let mut rng = seeded("random_bytes_never_panic_the_decoders");
    for _ in 0..20_000 {
        let mut bytes = rng.bytes(96);
        // Half the time, start with a plausible proto header and as_msg header_sz so the
        // random bytes reach the field and op parsers.
        if rng.chance(2) && bytes.len() > 9 {
            bytes[..3].copy_from_slice(&[2, 3, 0]);
            bytes[8] = 22;
        }
        let body_size_bytes_max = [0, 64, PROTO_BODY_SIZE_BYTES_MAX, u64::MAX][rng.below(4)];
        decode_everything(&bytes, body_size_bytes_max);
    }
}

#[test]
fn mutated_valid_messages_never_panic_the_decoders() {
    let mut rng = seeded("mutated_valid_messages_never_panic_the_decoders");
    for _ in 0..5_000 {
        let frame = random_valid_frame(&mut rng);
        decode_everything(&frame, PROTO_BODY_SIZE_BYTES_MAX);
        let mut mutated = frame.clone();
        for _ in 0..1 + rng.below(4) {
            mutate(&mut rng, &mut mutated);
            decode_everything(&mutated, PROTO_BODY_SIZE_BYTES_MAX);
            // The body alone, with the proto header stripped, exercises Message::parse directly.
            decode_everything(
                mutated.get(PROTO_HEADER_SIZE_BYTES..).unwrap_or(&[]),
                u64::MAX,
            );
        }
    }
}

#[test]
fn every_truncation_of_a_valid_frame_is_incomplete_and_of_its_body_is_malformed() {
    // A frame prefix lacks declared bytes, so decode_frame must wait for more. A body prefix
    // lacks the rest of a field or op the header counted, so parse must reject it.
    let mut rng =
        seeded("every_truncation_of_a_valid_frame_is_incomplete_and_of_its_body_is_malformed");
    for _ in 0..500 {
        let frame = random_valid_frame(&mut rng);
        let decoded = decode_frame(&frame, PROTO_BODY_SIZE_BYTES_MAX)
            .unwrap()
            .unwrap();
        assert_eq!(decoded.size_bytes(), frame.len());
        assert!(Message::parse(decoded.body).is_ok());
        for prefix_size_bytes in 0..frame.len() {
            let prefix = &frame[..prefix_size_bytes];
            assert_eq!(decode_frame(prefix, PROTO_BODY_SIZE_BYTES_MAX), Ok(None));
        }
        let body = decoded.body;
        for prefix_size_bytes in 0..body.len() {
            assert!(Message::parse(&body[..prefix_size_bytes]).is_err());
        }
    }
}
