//! Seeded randomized tests of the request decoder, through the public API only.
//!
//! - Valid pipelines (multibulk, inline with quotes and escapes, empty requests) decode to the
//!   requests they were built from, however the bytes are split into reads.
//! - Arbitrary bytes (random, and mutated valid pipelines) never panic, never make the decoder
//!   hold more memory than the bytes warrant, and decode the same fed whole or byte by byte.
//! - Arguments round-trip through the client-side `encode_command`.
//!
//! Each test prints its seed; `SEED=<n> cargo test -p wire-resp --test request_fuzz` replays
//! it, and `ITERATIONS=<n>` runs longer than the CI default.

use rand::rngs::SmallRng;
use rand::{Rng as _, SeedableRng as _};
use wire_resp::{Args, RequestError, decode_request, encode_command};

/// Iterations per test in CI; `ITERATIONS` overrides for long manual runs.
const ITERATIONS_DEFAULT: u64 = 200;

/// Memory the decoder may hold beyond twice the buffered bytes: the arena and argument list a
/// warm `Args` keeps between requests.
const ALLOCATION_SLACK_BYTES: usize = 128 * 1024;

/// One decoded request: its arguments (none for an empty request).
type Request = Vec<Vec<u8>>;

/// What a connection saw: the requests decoded in order, the bytes they spanned, then the
/// error if one closed the connection.
#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    requests: Vec<Request>,
    consumed_bytes: usize,
    error: Option<RequestError>,
}

/// Test-input choices over rand's seeded generator (replayable from the printed seed).
struct Rng(SmallRng);

impl Rng {
    fn seeded(seed: u64) -> Rng {
        Rng(SmallRng::seed_from_u64(seed))
    }

    fn below(&mut self, bound: usize) -> usize {
        self.0.random_range(0..bound)
    }

    fn chance(&mut self, one_in: usize) -> bool {
        self.below(one_in) == 0
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }
}

/// The seed from `SEED`, or a fresh one; printed so a failure can be replayed.
fn seed(test: &str) -> u64 {
    let seed = std::env::var("SEED")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or_else(|| {
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
            now.map_or(0, |elapsed| elapsed.as_nanos() as u64)
        });
    println!("{test}: SEED={seed}");
    seed
}

fn iterations() -> u64 {
    std::env::var("ITERATIONS")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(ITERATIONS_DEFAULT)
}

/// Plays a connection: appends each chunk to the query buffer, decodes every complete request,
/// and drops consumed bytes from the front, as the server front end does.
fn decode_chunks<'a>(chunks: impl IntoIterator<Item = &'a [u8]>) -> Outcome {
    let mut buffer = Vec::new();
    let mut args = Args::new();
    let mut requests = Vec::new();
    let mut consumed_bytes = 0;
    for chunk in chunks {
        buffer.extend_from_slice(chunk);
        let mut start = 0;
        loop {
            let rest = &buffer[start..];
            let result = decode_request(rest, &mut args);
            let allowed = 2 * buffer.len() + ALLOCATION_SLACK_BYTES;
            assert!(
                args.allocated_bytes() <= allowed,
                "{} bytes held for a {}-byte buffer",
                args.allocated_bytes(),
                buffer.len()
            );
            match result {
                Ok(Some(consumed)) => {
                    assert!(
                        consumed > 0 && consumed <= rest.len(),
                        "{consumed} of {}",
                        rest.len()
                    );
                    assert!(args.total_bytes() <= consumed);
                    requests.push(args.iter().map(<[u8]>::to_vec).collect());
                    start += consumed;
                    consumed_bytes += consumed;
                }
                Ok(None) => break,
                Err(error) => {
                    assert!(args.is_empty());
                    return Outcome {
                        requests,
                        consumed_bytes,
                        error: Some(error),
                    };
                }
            }
        }
        buffer.drain(..start);
    }
    Outcome {
        requests,
        consumed_bytes,
        error: None,
    }
}

fn decode_whole(bytes: &[u8]) -> Outcome {
    decode_chunks([bytes])
}

fn decode_byte_by_byte(bytes: &[u8]) -> Outcome {
    decode_chunks(bytes.chunks(1))
}

/// Splits `bytes` into random chunks of 1 to 40 bytes.
fn decode_random_chunks(rng: &mut Rng, bytes: &[u8]) -> Outcome {
    let mut chunks = Vec::new();
    let mut rest = bytes;
    while !rest.is_empty() {
        let (chunk, tail) = rest.split_at((1 + rng.below(40)).min(rest.len()));
        chunks.push(chunk);
        rest = tail;
    }
    decode_chunks(chunks)
}

/// A random argument: mostly short, sometimes empty or long, any bytes.
fn random_argument(rng: &mut Rng) -> Vec<u8> {
    let length = match rng.below(10) {
        0 => 0,
        1 => 40 + rng.below(300),
        _ => 1 + rng.below(12),
    };
    let alphabet: &[u8] = if rng.chance(2) {
        b"abcxyzSETGET:0123456789"
    } else {
        b"a \t\r\n\"'\\x*$:\0\x0b\x0c\xff-9"
    };
    (0..length).map(|_| rng.pick(alphabet)).collect()
}

/// Writes `argument` as one inline word: bare when nothing in it needs quoting, otherwise
/// double-quoted with escapes, or single-quoted when that can hold it.
fn push_inline_word(rng: &mut Rng, line: &mut Vec<u8>, argument: &[u8], first: bool) {
    let special = |byte: &u8| b" \t\r\n\"'\0\x0b\x0c".contains(byte);
    let needs_quotes =
        argument.is_empty() || argument.iter().any(special) || (first && argument[0] == b'*');
    let bare = !needs_quotes;
    let single = !argument.iter().any(|byte| b"\\\n\0".contains(byte));
    if bare && rng.chance(2) {
        line.extend_from_slice(argument);
    } else if single && rng.chance(3) {
        line.push(b'\'');
        for &byte in argument {
            if byte == b'\'' {
                line.push(b'\\');
            }
            line.push(byte);
        }
        line.push(b'\'');
    } else {
        line.push(b'"');
        for &byte in argument {
            match byte {
                b'"' | b'\\' => line.extend_from_slice(&[b'\\', byte]),
                b'\n' => line.extend_from_slice(b"\\n"),
                b'\r' => line.extend_from_slice(b"\\r"),
                b'\t' => line.extend_from_slice(b"\\t"),
                b' '..=b'~' => line.push(byte),
                _ => line.extend_from_slice(format!("\\x{byte:02x}").as_bytes()),
            }
        }
        line.push(b'"');
    }
}

/// A random pipeline and the requests it holds.
fn random_pipeline(rng: &mut Rng) -> (Vec<u8>, Vec<Request>) {
    let mut bytes = Vec::new();
    let mut requests = Vec::new();
    for _ in 0..1 + rng.below(8) {
        let argument_count = 1 + rng.below(5);
        let arguments: Request = (0..argument_count).map(|_| random_argument(rng)).collect();
        match rng.below(10) {
            0 => {
                let empty = [&b"\r\n"[..], b"\n", b" \t\r\n", b"*0\r\n", b"*-1\r\n"];
                bytes.extend_from_slice(rng.pick(&empty));
                requests.push(Vec::new());
                continue;
            }
            1..=3 => {
                let mut line = Vec::new();
                if rng.chance(4) {
                    line.push(b' ');
                }
                for (index, argument) in arguments.iter().enumerate() {
                    if index > 0 {
                        line.extend_from_slice(rng.pick(&[&b" "[..], b"\t", b"  "]));
                    }
                    let starts_line = line.is_empty();
                    push_inline_word(rng, &mut line, argument, starts_line);
                }
                bytes.extend_from_slice(&line);
                bytes.extend_from_slice(rng.pick(&[&b"\r\n"[..], b"\n"]));
            }
            _ => {
                let borrowed: Vec<&[u8]> = arguments.iter().map(Vec::as_slice).collect();
                encode_command(&mut bytes, &borrowed);
            }
        }
        requests.push(arguments);
    }
    (bytes, requests)
}

/// Random bytes, mostly from the protocol's own characters, or a valid pipeline with a few
/// bytes changed, inserted or removed.
fn random_garbage(rng: &mut Rng) -> Vec<u8> {
    if rng.chance(2) {
        let alphabet = b"*$\r\n\r\n0123456789-+ \t\"'\\x\0abAB\xff";
        return (0..rng.below(300)).map(|_| rng.pick(alphabet)).collect();
    }
    let (mut bytes, _) = random_pipeline(rng);
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(bytes.len() + 1);
        let byte = rng.pick(b"*$\r\n0-9\"'\\\0x");
        match rng.below(3) {
            0 if at < bytes.len() => bytes[at] = byte,
            1 if at < bytes.len() => {
                bytes.remove(at);
            }
            _ => bytes.insert(at, byte),
        }
    }
    bytes
}

#[test]
fn pipelines_decode_the_same_at_every_split_point() {
    let mut rng = Rng::seeded(seed("pipelines_decode_the_same_at_every_split_point"));
    for iteration in 0..iterations() {
        let (bytes, requests) = random_pipeline(&mut rng);
        let want = Outcome {
            requests,
            consumed_bytes: bytes.len(),
            error: None,
        };
        let context = format!("iteration {iteration}: {}", bytes.escape_ascii());
        assert_eq!(decode_whole(&bytes), want, "{context}");
        for split in 0..=bytes.len() {
            let (head, tail) = bytes.split_at(split);
            assert_eq!(
                decode_chunks([head, tail]),
                want,
                "split at {split}, {context}"
            );
        }
        assert_eq!(decode_byte_by_byte(&bytes), want, "{context}");
        assert_eq!(decode_random_chunks(&mut rng, &bytes), want, "{context}");
    }
}

#[test]
fn arbitrary_bytes_decode_the_same_whole_or_piecewise_and_never_panic() {
    let mut rng = Rng::seeded(seed("arbitrary_bytes_decode_the_same_whole_or_piecewise"));
    for iteration in 0..iterations() * 10 {
        let bytes = random_garbage(&mut rng);
        let context = format!("iteration {iteration}: {}", bytes.escape_ascii());
        let whole = decode_whole(&bytes);
        // Below 64 KiB no limit depends on how the bytes were read, so the decoder must reach
        // the same requests and the same error whatever the split.
        assert_eq!(decode_byte_by_byte(&bytes), whole, "{context}");
        assert_eq!(decode_random_chunks(&mut rng, &bytes), whole, "{context}");
    }
}

#[test]
fn huge_declared_sizes_wait_for_bytes_without_reserving_them() {
    // Counts and lengths up to the limits, followed by a few bytes: the decoder must ask for
    // more bytes and hold memory for the few present only (decode_chunks checks the bound).
    let mut rng = Rng::seeded(seed(
        "huge_declared_sizes_wait_for_bytes_without_reserving_them",
    ));
    for _ in 0..iterations() {
        let count = rng.pick(&[1_u64, 1024, 1 << 20, 1 << 30, i32::MAX as u64]);
        let length = rng.pick(&[0_u64, 1 << 20, 512 << 20]);
        let mut bytes = format!("*{count}\r\n").into_bytes();
        for _ in 0..rng.below(20) {
            bytes.extend_from_slice(b"$1\r\nx\r\n");
        }
        bytes.extend_from_slice(format!("${length}\r\n").as_bytes());
        bytes.extend(std::iter::repeat_n(b'v', rng.below(100)));
        let outcome = decode_random_chunks(&mut rng, &bytes);
        if count > 20 && length > 100 {
            assert!(
                outcome.requests.is_empty() && outcome.error.is_none(),
                "{outcome:?}"
            );
            assert_eq!(outcome.consumed_bytes, 0);
        }
    }
}

#[test]
fn encode_command_round_trips_through_decode_request() {
    let mut rng = Rng::seeded(seed("encode_command_round_trips_through_decode_request"));
    let mut args = Args::new();
    let mut bytes = Vec::new();
    for _ in 0..iterations() * 10 {
        let arguments: Request = (0..1 + rng.below(8))
            .map(|_| random_argument(&mut rng))
            .collect();
        let borrowed: Vec<&[u8]> = arguments.iter().map(Vec::as_slice).collect();
        bytes.clear();
        encode_command(&mut bytes, &borrowed);
        assert_eq!(decode_request(&bytes, &mut args), Ok(Some(bytes.len())));
        assert_eq!(args.iter().collect::<Vec<_>>(), borrowed);
        assert!(args.is_command(&arguments[0].to_ascii_uppercase()));
    }
}

/// Decoding speed for the common case: a pipeline of 16 `SET key:NNN value` commands.
/// Run with `cargo test --release -p wire-resp --test request_fuzz -- --ignored --nocapture`.
#[test]
#[ignore = "a benchmark; run by hand in release mode"]
fn decode_speed_of_a_16_command_set_pipeline() {
    const COMMANDS: usize = 16;
    const ROUNDS: usize = 200_000;
    let mut pipeline = Vec::new();
    for index in 0..COMMANDS {
        let key = format!("key:{index:03}");
        encode_command(&mut pipeline, &[b"SET", key.as_bytes(), b"value"]);
    }
    let mut args = Args::new();
    let mut arguments_seen = 0;
    let started = std::time::Instant::now();
    for _ in 0..ROUNDS {
        let mut start = 0;
        while let Some(consumed) = decode_request(&pipeline[start..], &mut args).unwrap() {
            arguments_seen += args.len();
            start += consumed;
        }
        assert_eq!(start, pipeline.len());
    }
    let elapsed = started.elapsed();
    assert_eq!(arguments_seen, ROUNDS * COMMANDS * 3);
    let per_command = elapsed.as_nanos() as f64 / (ROUNDS * COMMANDS) as f64;
    println!(
        "{per_command:.1} ns/command ({} bytes per pipeline)",
        pipeline.len()
    );
}
