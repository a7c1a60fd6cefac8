//! Seeds of randomized tests: `SEED` from the environment replays a run; otherwise the clock
//! picks one, printed so that a failing run can be replayed.

/// The seed of `test`'s run, printed.
pub fn seed(test: &str) -> u64 {
    let seed = std::env::var("SEED")
        .ok()
        .and_then(|seed| seed.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |since| since.as_nanos() as u64)
                | 1
        });
    println!("{test} seed: {seed} (replay with SEED={seed})");
    seed
}

/// A small xorshift generator started from `seed` (never zero, so never stuck).
pub fn xorshift(seed: u64) -> impl FnMut() -> u64 {
    let mut state = seed | 1;
    move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    }
}
