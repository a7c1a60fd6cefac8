//! Seeded randomized tests of the decoder, through the public API only: random bytes, and
//! mutations of valid frames (bytes flipped, inserted, removed, the body size patched to
//! match), never panic, never claim more bytes than given, and whatever decodes re-encodes to
//! exactly the bytes it came from, none of whose strict prefixes decodes.
//!
//! Each test prints its seed; `FABRIC_SEED=<n> cargo test -p wire-fabric --test random_bytes`
//! replays it, and `ITERATIONS=<n>` runs longer than the CI default.

mod samples;

use rand::rngs::SmallRng;
use rand::{Rng as _, SeedableRng as _};
use wire_fabric::{FRAME_HEADER_SIZE_BYTES, MessageType, decode_frame, encode};

/// Iterations per test in CI; `ITERATIONS` overrides for long manual runs.
const ITERATIONS_DEFAULT: u64 = 3000;

/// The body limit of these tests: small, so that random sizes often fall on both sides of it.
const LIMIT_BYTES: u32 = 4096;

/// The seed from `FABRIC_SEED`, or a fresh one; printed so a failure can be replayed.
fn seed(test: &str) -> u64 {
    let seed = std::env::var("FABRIC_SEED")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or_else(|| {
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
            now.map_or(0, |elapsed| elapsed.as_nanos() as u64)
        });
    println!("{test}: FABRIC_SEED={seed}");
    seed
}

fn iterations() -> u64 {
    std::env::var("ITERATIONS")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(ITERATIONS_DEFAULT)
}

/// Decodes `buf` and checks every promise about what came out; says whether a message did.
fn check_decode(buf: &[u8]) -> bool {
    let Ok(Some((message, size_bytes))) = decode_frame(buf, LIMIT_BYTES) else {
        return false;
    };
    assert!(size_bytes >= FRAME_HEADER_SIZE_BYTES && size_bytes <= buf.len());
    let frame = &buf[..size_bytes];
    let mut again = Vec::new();
    encode(&message, &mut again);
    assert_eq!(again, frame, "{message:?} re-encodes to its bytes");
    for prefix_size_bytes in 0..size_bytes {
        let prefix = &frame[..prefix_size_bytes];
        assert_eq!(
            decode_frame(prefix, LIMIT_BYTES),
            Ok(None),
            "{prefix_size_bytes}"
        );
    }
    true
}

/// A valid header (known type, small body size) followed by `body`, so that random bodies
/// get past the header checks.
fn with_valid_header(rng: &mut SmallRng, body: &[u8]) -> Vec<u8> {
    let message_type = MessageType::ALL[rng.random_range(0..MessageType::ALL.len())];
    let mut buf = vec![b'O', b'F', 1, message_type as u8];
    let size = u32::try_from(body.len()).expect("test bodies are small");
    buf.extend_from_slice(&size.to_be_bytes());
    buf.extend_from_slice(body);
    buf
}

#[test]
fn random_bytes_never_panic() {
    let mut rng = SmallRng::seed_from_u64(seed("random_bytes_never_panic"));
    for _ in 0..iterations() {
        let size_bytes = rng.random_range(0..200);
        let mut bytes = vec![0u8; size_bytes];
        rng.fill(&mut bytes[..]);
        check_decode(&bytes);
        check_decode(&with_valid_header(&mut rng, &bytes));
    }
}

/// Changes `bytes` in one random way: flip, set, insert or remove a byte.
fn mutate(rng: &mut SmallRng, bytes: &mut Vec<u8>) {
    let position = rng.random_range(0..bytes.len());
    match rng.random_range(0..4) {
        0 => bytes[position] ^= 1 << rng.random_range(0..8),
        1 => bytes[position] = rng.random(),
        2 => bytes.insert(position, rng.random()),
        _ => {
            bytes.remove(position);
        }
    }
}

/// Sets the body size in the header to what follows it, so a mutated body is judged as a body
/// rather than cut short.
fn patch_body_size(bytes: &mut [u8]) {
    if bytes.len() >= FRAME_HEADER_SIZE_BYTES {
        let size =
            u32::try_from(bytes.len() - FRAME_HEADER_SIZE_BYTES).expect("test frames are small");
        bytes[4..8].copy_from_slice(&size.to_be_bytes());
    }
}

#[test]
fn mutated_frames_never_panic_and_what_decodes_re_encodes_exactly() {
    let mut rng = SmallRng::seed_from_u64(seed(
        "mutated_frames_never_panic_and_what_decodes_re_encodes_exactly",
    ));
    let frames: Vec<Vec<u8>> = samples::messages()
        .iter()
        .map(samples::encoded)
        .filter(|frame| frame.len() <= LIMIT_BYTES as usize)
        .collect();
    let mut decoded_count = 0;
    for _ in 0..iterations() {
        let mut bytes = frames[rng.random_range(0..frames.len())].clone();
        for _ in 0..rng.random_range(1..4) {
            mutate(&mut rng, &mut bytes);
        }
        decoded_count += u64::from(check_decode(&bytes));
        patch_body_size(&mut bytes);
        decoded_count += u64::from(check_decode(&bytes));
    }
    // Mutations that keep a frame valid (a changed id, time or payload byte) must be common,
    // or the re-encoding check above would check nothing.
    println!("{decoded_count} mutated frames decoded");
    assert!(
        decoded_count * 20 >= iterations(),
        "only {decoded_count} decoded"
    );
}
