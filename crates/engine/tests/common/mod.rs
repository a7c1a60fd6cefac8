//! Helpers shared by the engine's randomized tests.

/// The seed of a randomized test: `SEED` from the environment to replay a run, else one drawn
/// from the clock. Printed (shown when the test fails) with the way to replay it.
pub fn seed(test: &str) -> u64 {
    let seed = std::env::var("SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
                | 1
        });
    println!("{test} seed: {seed} (replay with SEED={seed})");
    seed
}
