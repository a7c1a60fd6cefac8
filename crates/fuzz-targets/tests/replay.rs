//! Replays every stored fuzz input through its target: the seed corpus (`fuzz/corpus/<target>/`)
//! and every past finding (`fuzz/regressions/<target>/`). A finding the fuzzer made once is
//! thereby a regression test of plain `cargo test`, on the stable toolchain, without libFuzzer.
//!
//! Each input runs in its own `catch_unwind`, so one failure names its file and the others
//! still run; the test fails at the end listing every failing file. Replay one by hand with the
//! fuzz binary (`target/fuzz/.../<target> <file>`) or by keeping only that file.

use std::path::{Path, PathBuf};

use fuzz_targets::TARGETS;

/// The repository root: two levels above this crate.
fn repository_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("the crate lives at crates/fuzz-targets")
        .to_path_buf()
}

/// The files directly inside `folder`, sorted; none when it does not exist.
fn files_in(folder: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(folder) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .map(|entry| entry.expect("a readable folder entry").path())
        .filter(|path| path.is_file())
        .collect();
    files.sort();
    files
}

/// Runs every file of `kind` (`corpus` or `regressions`) through its target; returns how many
/// ran, and the failures.
fn replay(kind: &str) -> (usize, Vec<String>) {
    let root = repository_root().join("fuzz").join(kind);
    let mut ran = 0;
    let mut failures = Vec::new();
    for (name, target) in TARGETS {
        for file in files_in(&root.join(name)) {
            let data = std::fs::read(&file).expect("a readable input file");
            ran += 1;
            if std::panic::catch_unwind(|| target(&data)).is_err() {
                failures.push(file.display().to_string());
            }
        }
    }
    (ran, failures)
}

#[test]
fn every_seed_corpus_input_passes_its_target() {
    let (ran, failures) = replay("corpus");
    assert!(failures.is_empty(), "failing corpus inputs: {failures:#?}");
    println!("{ran} corpus inputs replayed");
    for (name, _) in TARGETS {
        let folder = repository_root().join("fuzz/corpus").join(name);
        assert!(
            !files_in(&folder).is_empty(),
            "target {name} has no seed corpus"
        );
    }
}

#[test]
fn every_past_finding_passes_its_target() {
    let (ran, failures) = replay("regressions");
    assert!(
        failures.is_empty(),
        "failing regression inputs: {failures:#?}"
    );
    println!("{ran} regression inputs replayed");
}

#[test]
fn every_input_folder_names_a_target() {
    // A misspelled folder would hold inputs that nothing replays.
    for kind in ["corpus", "regressions"] {
        let Ok(entries) = std::fs::read_dir(repository_root().join("fuzz").join(kind)) else {
            continue;
        };
        for entry in entries {
            let name = entry.expect("a readable folder entry").file_name();
            let name = name.to_string_lossy();
            assert!(
                fuzz_targets::target(&name).is_some(),
                "fuzz/{kind}/{name} is not a target"
            );
        }
    }
}
