//! Project automation. `cargo xtask ci` is the one test command: the same locally and in CI.
//!
//! It runs, stopping at the first failure: formatting check, clippy with warnings denied, every
//! Rust test, [`CI_SIMULATION_SEEDS`] seeds of the cluster simulation in an optimized build, a
//! smoke run of the fuzz targets, a build of the `osprey`, `osprey-bench` and `osprey-admin` binaries (and a release `osprey`, for
//! the hostile-client tests' latency bounds), then the black-box suite (official Python clients
//! against the real binaries; the files that mostly wait on killed and restarted processes run
//! in a second pytest beside the others, see [`BLACKBOX_WAITING_FILES`]), installing what it
//! needs first: the Python packages into `.venv`, and Debian's `redis-server` and
//! `redis-tools` when missing.
//!
//! `cargo xtask fuzz [--seconds N] [TARGET...] [-- LIBFUZZER_ARGS]` builds the libFuzzer
//! binaries of `fuzz/` with coverage instrumentation on the stable toolchain (the
//! sanitizer-coverage codegen flags, see [`FUZZ_RUSTFLAGS`]) into `<target>/fuzz`, then runs
//! each target (all of them by default) for N seconds (default 60), one after the other, seeded
//! read-only with `fuzz/corpus/<target>/` and `fuzz/regressions/<target>/`; new inputs go to
//! `<target>/fuzz/corpus/<target>/`, never into the repository. A crash, hang or out-of-memory
//! fails the task and prints the input's path and how to make it a regression test.
//! `cargo xtask ci` runs it for [`CI_FUZZ_SECONDS`] seconds per target after the Rust tests:
//! measured on 2 cores, 2 min 22 s to build from cold and 78 s to run the targets (seven then,
//! ten now), so under 4 minutes; only the runs when `target/fuzz` is warm. See
//! `docs/internals/fuzzing.md`.
//!
//! `cargo xtask simulate [--seeds N] [--seed S]` runs N seeds (default [`SIMULATE_SEEDS_DEFAULT`])
//! of the cluster simulation from seed S (default: a random one) in an optimized build; a seed
//! that fails prints how to replay it. See `docs/reliability.md`.
//!
//! `cargo xtask compare-redis [ARGS]` builds release binaries and runs the Osprey versus
//! redis-server comparison (`scripts/compare-redis`), passing `ARGS` through.
//!
//! `cargo xtask compare-resp [ARGS]` builds release binaries and runs the comparison of Osprey's
//! Redis front end with redis-server under `redis-benchmark` (`scripts/compare-resp`), passing
//! `ARGS` through (`--quick` for a smoke run).
//!
//! `cargo xtask compare-resp-features [ARGS]` builds release binaries and runs the comparison
//! of scripts, pub/sub, streams, HyperLogLog, bitmaps and geo with redis-server under
//! `redis-benchmark` (`scripts/compare-resp-features`), passing `ARGS` through.
//!
//! `cargo xtask compare-durability [ARGS]` builds release binaries and runs the comparison of
//! Osprey's device storage (durable and relaxed writes, cold start, write amplification) with
//! redis-server's append-only file under `redis-benchmark` (`scripts/compare-durability`),
//! passing `ARGS` through (`--quick` for a smoke run).
//!
//! `cargo xtask set-index [ARGS]` builds release binaries and runs the set-index experiment
//! (`scripts/set-index-experiment`), passing `ARGS` through (`--quick` for a smoke run).
//!
//! `cargo xtask local-cluster [--nodes N]` starts N nodes (3 by default) on 127.0.0.1 that form
//! one cluster (Aerospike ports 3000.., Redis ports 6379..), prints `cluster ready`, and stops
//! them on Ctrl-C or SIGTERM (`local_cluster.rs`).
//!
//! Builds go to cargo's target directory: `target/`, or `CARGO_TARGET_DIR` when set (so a long
//! benchmark build need not share `target/` with other builds); `scripts/set-index-experiment`,
//! `scripts/compare-resp` and `scripts/compare-durability` look for the binaries by the same rule.

mod local_cluster;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

fn main() -> ExitCode {
    let task = std::env::args().nth(1).unwrap_or_default();
    let rest: Vec<String> = std::env::args().skip(2).collect();
    let result = match task.as_str() {
        "ci" => ci(),
        "blackbox" => blackbox(&[]),
        "fuzz" => fuzz(&rest),
        "simulate" => simulate(&rest),
        "compare-redis" => compare_redis(&rest),
        "compare-resp" => compare_resp(&rest),
        "compare-resp-features" => compare_resp_features(&rest),
        "compare-durability" => compare_durability(&rest),
        "set-index" => set_index(&rest),
        "local-cluster" => {
            let root = workspace_root();
            local_cluster::run(&rest, &root, &cargo_target_dir(&root))
        }
        _ => {
            eprintln!(
                "usage: cargo xtask <ci|blackbox|fuzz [--seconds N] [TARGET...]|\
                 simulate [--seeds N] [--seed S]|\
                 compare-redis [ARGS]|compare-resp [ARGS]|compare-resp-features [ARGS]|\
                 compare-durability [ARGS]|\
                 set-index [ARGS]|local-cluster [--nodes N]>"
            );
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("xtask: {message}");
            ExitCode::FAILURE
        }
    }
}

fn ci() -> Result<(), String> {
    let clippy = [
        "clippy",
        "--workspace",
        "--all-targets",
        "--",
        "-D",
        "warnings",
    ];
    timed("formatting", || {
        run("cargo", &["fmt", "--all", "--", "--check"])
    })?;
    timed("clippy", || run("cargo", &clippy))?;
    timed("Rust tests", || run("cargo", &["test", "--workspace"]))?;
    timed("simulation", || {
        simulate(&["--seeds".to_owned(), CI_SIMULATION_SEEDS.to_string()])
    })?;
    timed("fuzzing", || {
        fuzz(&["--seconds".to_owned(), CI_FUZZ_SECONDS.to_string()])
    })?;
    timed("black-box tests", || blackbox(&[]))
}

/// Runs `step` and prints how long it took, so that a CI log shows where its time goes.
fn timed(name: &str, step: impl FnOnce() -> Result<(), String>) -> Result<(), String> {
    let started = std::time::Instant::now();
    let result = step();
    println!(
        "xtask: {name} took {:.0} s",
        started.elapsed().as_secs_f64()
    );
    result
}

/// Seeds of the cluster simulation in `cargo xtask ci`, in an optimized build: about 1.5 s of
/// CPU each on the 2-core CI machine, so under two minutes for all (a debug build takes ten
/// times that, so plain `cargo test` runs two). Hundreds of seeds on every run, as the cluster
/// issue asks, within CI's 30-minute budget; longer hunts run `cargo xtask simulate --seeds N`.
const CI_SIMULATION_SEEDS: u64 = 200;

/// Seeds `cargo xtask simulate` runs when `--seeds` is not given.
const SIMULATE_SEEDS_DEFAULT: u64 = 200;

/// `cargo xtask simulate [--seeds N] [--seed S]`: the cluster simulation
/// (`crates/server/src/cluster/sim.rs`) in an optimized build, N seeds (default
/// [`SIMULATE_SEEDS_DEFAULT`]) from S (default: a random first seed).
fn simulate(args: &[String]) -> Result<(), String> {
    let mut seeds = SIMULATE_SEEDS_DEFAULT.to_string();
    let mut first = None;
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let mut value = || args.next().cloned().ok_or(format!("{arg} needs a number"));
        match arg.as_str() {
            "--seeds" => seeds = value()?,
            "--seed" => first = Some(value()?),
            _ => return Err(format!("simulate: unknown argument {arg}")),
        }
    }
    let mut command = Command::new("cargo");
    command
        .args([
            "test",
            "--release",
            "--package",
            "server",
            "--bin",
            "osprey",
        ])
        .args(["simulated_faults", "--", "--nocapture"])
        .env("OSPREY_SIM_SEEDS", &seeds);
    if let Some(first) = first {
        command.env("OSPREY_SIM_SEED", first);
    }
    println!(
        "$ OSPREY_SIM_SEEDS={seeds} cargo test --release -p server --bin osprey simulated_faults"
    );
    let status = command
        .status()
        .map_err(|error| format!("cannot run cargo: {error}"))?;
    match status.success() {
        true => Ok(()),
        false => Err(format!("the cluster simulation failed ({status})")),
    }
}

/// Seconds each fuzz target runs in `cargo xtask ci`: a smoke run that catches a target broken
/// by a change and the shallow findings, not a campaign (those run by hand, for hours).
const CI_FUZZ_SECONDS: u64 = 5;

/// Seconds each fuzz target runs when `--seconds` is not given.
const FUZZ_SECONDS_DEFAULT: u64 = 60;

/// Codegen flags that give libFuzzer its coverage feedback on the stable toolchain: LLVM's
/// sanitizer-coverage pass with inline 8-bit counters, the PC table and comparison tracing (what
/// `-Zsanitizer=fuzzer` would set up on nightly), `cfg(fuzzing)` as cargo-fuzz sets it, and the
/// checks of a debug build in an optimized one.
const FUZZ_RUSTFLAGS: &str = "-Cpasses=sancov-module \
    -Cllvm-args=-sanitizer-coverage-level=4 \
    -Cllvm-args=-sanitizer-coverage-inline-8bit-counters \
    -Cllvm-args=-sanitizer-coverage-pc-table \
    -Cllvm-args=-sanitizer-coverage-trace-compares \
    --cfg fuzzing -Cdebug-assertions -Coverflow-checks -Copt-level=3";

/// libFuzzer options of every run: a hang is an input that takes over 10 s, an out-of-memory
/// one that makes the process exceed 1 GiB or asks for 64 MiB at once (no target input of a
/// few KiB has a reason to), and inputs stay at libFuzzer's default 4 KiB.
const LIBFUZZER_OPTIONS: [&str; 5] = [
    "-timeout=10",
    "-rss_limit_mb=1024",
    "-malloc_limit_mb=64",
    "-max_len=4096",
    "-print_final_stats=1",
];

/// `cargo xtask fuzz [--seconds N] [TARGET...] [-- LIBFUZZER_ARGS]`: see the crate docs.
fn fuzz(args: &[String]) -> Result<(), String> {
    let mut seconds = FUZZ_SECONDS_DEFAULT;
    let mut targets = Vec::new();
    let mut extra: Vec<String> = Vec::new();
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--seconds" => {
                let value = args.next().ok_or("--seconds needs a number")?;
                seconds = value
                    .parse()
                    .map_err(|_| format!("--seconds {value}: not a number"))?;
            }
            "--" => extra.extend(args.by_ref().cloned()),
            target => targets.push(target.to_owned()),
        }
    }
    let root = workspace_root();
    let known = fuzz_target_names(&root)?;
    if targets.is_empty() {
        targets.clone_from(&known);
    }
    if let Some(unknown) = targets.iter().find(|target| !known.contains(target)) {
        return Err(format!(
            "no fuzz target {unknown}; targets: {}",
            known.join(" ")
        ));
    }
    let binaries = build_fuzz_targets(&root)?;
    for target in &targets {
        run_fuzz_target(&root, &binaries, target, seconds, &extra)?;
    }
    Ok(())
}

/// The targets: one `fuzz/fuzz_targets/<name>.rs` each, sorted.
fn fuzz_target_names(root: &Path) -> Result<Vec<String>, String> {
    let folder = root.join("fuzz/fuzz_targets");
    let entries = std::fs::read_dir(&folder)
        .map_err(|error| format!("cannot read {}: {error}", folder.display()))?;
    let mut names: Vec<String> = entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            name.strip_suffix(".rs").map(str::to_owned)
        })
        .collect();
    names.sort();
    Ok(names)
}

/// Builds every fuzz binary with coverage instrumentation; returns the folder holding them.
fn build_fuzz_targets(root: &Path) -> Result<PathBuf, String> {
    let host = rustc_host()?;
    let target_dir = cargo_target_dir(root).join("fuzz");
    let target_dir_text = target_dir.to_string_lossy().into_owned();
    // `--target` keeps the flags off build scripts and proc macros, which must not be
    // instrumented (they are not linked with libFuzzer).
    let args = [
        "build",
        "--manifest-path",
        "fuzz/Cargo.toml",
        "--release",
        "--locked",
        "--bins",
        "--target",
        &host,
        "--target-dir",
        &target_dir_text,
    ];
    eprintln!("$ RUSTFLAGS=<sanitizer coverage> cargo {}", args.join(" "));
    let status = Command::new("cargo")
        .args(args)
        .current_dir(root)
        .env(
            "RUSTFLAGS",
            FUZZ_RUSTFLAGS
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" "),
        )
        .status()
        .map_err(|error| format!("cannot run cargo: {error}"))?;
    if !status.success() {
        return Err(format!("building the fuzz targets failed ({status})"));
    }
    Ok(target_dir.join(host).join("release"))
}

/// Runs one target for `seconds`; on a finding, says where its input is and what to do.
fn run_fuzz_target(
    root: &Path,
    binaries: &Path,
    target: &str,
    seconds: u64,
    extra: &[String],
) -> Result<(), String> {
    let scratch = cargo_target_dir(root).join("fuzz/corpus").join(target);
    let artifacts = cargo_target_dir(root).join("fuzz/artifacts").join(target);
    for folder in [&scratch, &artifacts] {
        std::fs::create_dir_all(folder)
            .map_err(|error| format!("cannot create {}: {error}", folder.display()))?;
    }
    let mut command = Command::new(binaries.join(target));
    // The scratch folder comes first: libFuzzer writes new inputs to the first folder only, so
    // the repository's corpus and regressions are read, never written.
    command.arg(&scratch);
    for kind in ["corpus", "regressions"] {
        let seeds = root.join("fuzz").join(kind).join(target);
        if seeds.is_dir() {
            command.arg(seeds);
        }
    }
    command
        .args(LIBFUZZER_OPTIONS)
        .arg(format!("-max_total_time={seconds}"))
        .arg(format!("-artifact_prefix={}/", artifacts.display()))
        .args(extra)
        .current_dir(root);
    eprintln!("$ fuzz {target} for {seconds} s");
    let status = command
        .status()
        .map_err(|error| format!("cannot run the {target} fuzzer: {error}"))?;
    if status.success() {
        return Ok(());
    }
    let findings = files_newest_first(&artifacts);
    let Some(finding) = findings.first() else {
        return Err(format!(
            "the {target} fuzzer failed ({status}) without an input"
        ));
    };
    let name = finding
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    Err(format!(
        "the {target} fuzzer found a failing input: {}\n\
         Replay it:  {} {}\n\
         Then fix the bug at its root, keep the input as a regression test:\n    \
         mkdir -p fuzz/regressions/{target} && cp {} fuzz/regressions/{target}/{name}\n\
         and add a unit test in the crate that had the bug telling its story; \
         `cargo test -p fuzz-targets --test replay` replays every regression input.",
        finding.display(),
        binaries.join(target).display(),
        finding.display(),
        finding.display(),
    ))
}

/// The files in `folder`, most recently modified first.
fn files_newest_first(folder: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(folder) else {
        return Vec::new();
    };
    let mut files: Vec<(std::time::SystemTime, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let modified = entry.metadata().ok()?.modified().ok()?;
            Some((modified, entry.path()))
        })
        .collect();
    files.sort_by_key(|(modified, _)| std::cmp::Reverse(*modified));
    files.into_iter().map(|(_, path)| path).collect()
}

/// The host's target triple, from `rustc -vV`.
fn rustc_host() -> Result<String, String> {
    let output = Command::new("rustc")
        .arg("-vV")
        .output()
        .map_err(|error| format!("cannot run rustc: {error}"))?;
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .find_map(|line| line.strip_prefix("host: "))
        .map(str::to_owned)
        .ok_or_else(|| "rustc -vV names no host".to_owned())
}

/// Cargo's target directory: `CARGO_TARGET_DIR` when set, else `target/` at the root.
fn cargo_target_dir(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from)
}

/// Builds `osprey`, `osprey-bench` and `osprey-admin` and runs the Python black-box suite
/// against them.
fn blackbox(extra_pytest_args: &[&str]) -> Result<(), String> {
    run(
        "cargo",
        &[
            "build",
            "--package",
            "server",
            "--package",
            "bench",
            "--package",
            "admin",
        ],
    )?;
    // The hostile-client tests assert latency bounds, which only the optimized build can mean.
    run("cargo", &["build", "--release", "--package", "server"])?;
    ensure_redis()?;
    let root = workspace_root();
    let python = ensure_venv(&root, &["tests/requirements.txt"])?;
    let go_client = build_go_program(&root, "cluster_client")?;
    let linearizability_checker = build_go_program(&root, "linearizability")?;
    let java_client = build_java_cluster_client(&root)?;
    let target = cargo_target_dir(&root);
    let pytest = |selection: &[&str]| {
        let mut command = Command::new(&python);
        command
            .args(["-m", "pytest", "-q", "-ra"])
            // The slowest tests are listed, so that a run shows where its time goes.
            .arg("--durations=15")
            .args(selection)
            .current_dir(&root)
            .env("OSPREY_BIN", target.join("debug/osprey"))
            .env("OSPREY_RELEASE_BIN", target.join("release/osprey"))
            .env("OSPREY_BENCH_BIN", target.join("debug/osprey-bench"))
            .env("OSPREY_GO_CLUSTER_CLIENT", &go_client)
            .env("OSPREY_LINEARIZABILITY_CHECKER", &linearizability_checker)
            .env("OSPREY_JAVA_CLUSTER_CLIENT", &java_client);
        command
    };
    if !extra_pytest_args.is_empty() {
        let mut selection = vec!["tests/blackbox"];
        selection.extend_from_slice(extra_pytest_args);
        return finished("black-box tests", pytest(&selection).status());
    }
    // The waiting files run in a pytest of their own beside the rest (see
    // `BLACKBOX_WAITING_FILES`); their output follows the rest's.
    let log_path = target.join("blackbox-waiting.log");
    let log = std::fs::File::create(&log_path)
        .map_err(|error| format!("cannot create {}: {error}", log_path.display()))?;
    let err_log = log
        .try_clone()
        .map_err(|error| format!("cannot share {}: {error}", log_path.display()))?;
    let mut waiting = pytest(&BLACKBOX_WAITING_FILES)
        .stdout(log)
        .stderr(err_log)
        .spawn()
        .map_err(|error| format!("cannot run pytest: {error}"))?;
    let mut rest = vec!["tests/blackbox".to_owned()];
    rest.extend(
        BLACKBOX_WAITING_FILES
            .iter()
            .map(|file| format!("--ignore={file}")),
    );
    let rest: Vec<&str> = rest.iter().map(String::as_str).collect();
    let rest_result = finished("black-box tests", pytest(&rest).status());
    let waiting_result = finished(
        "black-box tests (kill, restart and fault files)",
        waiting.wait(),
    );
    println!(
        "\n$ pytest {} (beside the others)",
        BLACKBOX_WAITING_FILES.join(" ")
    );
    print!("{}", std::fs::read_to_string(&log_path).unwrap_or_default());
    rest_result.and(waiting_result)
}

/// Black-box files that spend most of their time waiting on the processes they kill, restart,
/// pause and cut off (minutes of kill and restart cycles, heartbeat timeouts): `cargo xtask ci`
/// runs them in a pytest process of their own, beside the other files, so that a 2-core
/// machine fills their waits with the others' work (the whole suite took 13 minutes in one
/// process). They assert what survives, not how fast, so sharing the machine only slows them.
const BLACKBOX_WAITING_FILES: [&str; 3] = [
    "tests/blackbox/test_cluster_changes.py",
    "tests/blackbox/test_kill_restart.py",
    "tests/blackbox/test_cluster_faults.py",
];

/// `Ok` when a finished test process succeeded.
fn finished(what: &str, status: std::io::Result<std::process::ExitStatus>) -> Result<(), String> {
    let status = status.map_err(|error| format!("cannot run pytest: {error}"))?;
    match status.success() {
        true => Ok(()),
        false => Err(format!("{what} failed ({status})")),
    }
}

/// Builds the Go program in `tests/go/<name>` into the target directory (after running its
/// own tests, if it has any), fetching its modules through Go's module proxy the first time.
/// `cluster_client` drives a cluster with the official Aerospike Go client; `linearizability`
/// checks the fault tests' register histories with Porcupine.
fn build_go_program(root: &Path, name: &str) -> Result<PathBuf, String> {
    let source = root.join("tests/go").join(name);
    let go = |args: &[&str], output: Option<&Path>| {
        let mut command = Command::new("go");
        command.args(args).current_dir(&source);
        if let Some(output) = output {
            command.arg(output).arg(".");
        }
        let status = command.status().map_err(|error| {
            format!("cannot run go (the Go toolchain builds tests/go): {error}")
        })?;
        match status.success() {
            true => Ok(()),
            false => Err(format!(
                "go {} in tests/go/{name} failed ({status})",
                args[0]
            )),
        }
    };
    let has_tests = std::fs::read_dir(&source)
        .map_err(|error| format!("tests/go/{name}: {error}"))?
        .flatten()
        .any(|entry| entry.file_name().to_string_lossy().ends_with("_test.go"));
    if has_tests {
        go(&["test", "-mod=mod", "./..."], None)?;
    }
    let output = cargo_target_dir(root).join("go").join(name);
    go(&["build", "-mod=mod", "-o"], Some(&output))?;
    Ok(output)
}

/// Builds `tests/java/cluster_client` (the official Aerospike Java client against a cluster)
/// with Maven, which fetches the client from Maven Central the first time, and returns the
/// classpath that runs it: `java -cp CLASSPATH ClusterClient PORT NODES`. Maven writes into the
/// project's own `target/`, which git ignores.
fn build_java_cluster_client(root: &Path) -> Result<std::ffi::OsString, String> {
    let project = root.join("tests/java/cluster_client");
    let status = Command::new("mvn")
        .args(["-q", "-B", "-f"])
        .arg(project.join("pom.xml"))
        .arg("package")
        .current_dir(root)
        .status()
        .map_err(|error| {
            format!("cannot run mvn (Maven builds tests/java/cluster_client): {error}")
        })?;
    if !status.success() {
        return Err(format!(
            "building tests/java/cluster_client failed ({status})"
        ));
    }
    // The test runs the program with `java`: say now, not as a test failure, that it is missing.
    Command::new("java")
        .arg("-version")
        .stderr(std::process::Stdio::null())
        .status()
        .map_err(|error| {
            format!("cannot run java (a JRE runs tests/java/cluster_client): {error}")
        })?;
    let target = project.join("target");
    std::env::join_paths([
        target.join("cluster-client.jar"),
        target.join("dependency/*"),
    ])
    .map_err(|error| format!("cannot make the Java classpath: {error}"))
}

/// Builds release binaries and runs `scripts/compare-redis` with `args`.
fn compare_redis(args: &[String]) -> Result<(), String> {
    ensure_redis()?;
    run_release_script(
        "scripts/compare-redis",
        &["tests/requirements.txt", "bench/requirements.txt"],
        args,
    )
}

/// Builds release binaries and runs `scripts/compare-resp` with `args`; it needs `redis-server`
/// and `redis-benchmark`, and no Python package.
fn compare_resp(args: &[String]) -> Result<(), String> {
    ensure_redis()?;
    run_release_script("scripts/compare-resp", &[], args)
}

/// Builds release binaries and runs `scripts/compare-resp-features` with `args`; like
/// `compare-resp`, it needs `redis-server` and `redis-benchmark`, and no Python package.
fn compare_resp_features(args: &[String]) -> Result<(), String> {
    ensure_redis()?;
    run_release_script("scripts/compare-resp-features", &[], args)
}

/// Builds release binaries and runs `scripts/compare-durability` with `args`; like
/// `compare-resp`, it needs `redis-server` and `redis-benchmark`, and no Python package.
fn compare_durability(args: &[String]) -> Result<(), String> {
    ensure_redis()?;
    run_release_script("scripts/compare-durability", &[], args)
}

/// Builds release binaries and runs `scripts/set-index-experiment` with `args`.
fn set_index(args: &[String]) -> Result<(), String> {
    run_release_script(
        "scripts/set-index-experiment",
        &["bench/requirements.txt"],
        args,
    )
}

/// Builds the release `osprey` and `osprey-bench`, then runs the Python `script` with `args`
/// in the `.venv` holding `requirements`.
fn run_release_script(script: &str, requirements: &[&str], args: &[String]) -> Result<(), String> {
    run(
        "cargo",
        &[
            "build",
            "--release",
            "--package",
            "server",
            "--package",
            "bench",
        ],
    )?;
    let root = workspace_root();
    let python = ensure_venv(&root, requirements)?;
    let status = Command::new(&python)
        .arg(script)
        .args(args)
        .current_dir(&root)
        .status()
        .map_err(|error| format!("cannot run {script}: {error}"))?;
    if !status.success() {
        return Err(format!("{script} failed ({status})"));
    }
    Ok(())
}

/// Installs Debian's `redis-server`, `redis-tools` and `openssl` when `redis-server`,
/// `redis-benchmark` or `openssl` is missing (tests and comparisons run them beside `osprey`;
/// the TLS tests make their certificates with `openssl`).
fn ensure_redis() -> Result<(), String> {
    let installed = |program: &str, version: &str| {
        Command::new(program)
            .arg(version)
            .output()
            .is_ok_and(|output| output.status.success())
    };
    let wanted = [
        ("redis-server", "--version"),
        ("redis-benchmark", "--version"),
        ("openssl", "version"),
    ];
    if wanted
        .iter()
        .all(|(program, version)| installed(program, version))
    {
        return Ok(());
    }
    let is_root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|output| output.stdout.trim_ascii() == b"0");
    let apt_get = |args: &[&str]| {
        let mut command = if is_root {
            Command::new("apt-get")
        } else {
            let mut sudo = Command::new("sudo");
            sudo.arg("apt-get");
            sudo
        };
        eprintln!("$ apt-get {}", args.join(" "));
        command
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status()
            .is_ok_and(|status| status.success())
    };
    let packages = [
        "install",
        "-y",
        "-qq",
        "redis-server",
        "redis-tools",
        "openssl",
    ];
    if apt_get(&packages) || (apt_get(&["update", "-qq"]) && apt_get(&packages)) {
        Ok(())
    } else {
        Err("cannot install redis-server, redis-tools and openssl with apt-get".to_owned())
    }
}

/// Creates `.venv` and installs the `requirements` files (relative to the root) into it when
/// missing or changed.
fn ensure_venv(root: &Path, requirements: &[&str]) -> Result<PathBuf, String> {
    let venv = root.join(".venv");
    let python = venv.join("bin/python");
    if !python.exists() {
        run("python3", &["-m", "venv", &venv.to_string_lossy()])?;
    }
    for file in requirements {
        let path = root.join(file);
        let stamp = venv.join(format!("{}.installed", file.replace('/', "_")));
        let wanted = std::fs::read_to_string(&path)
            .map_err(|error| format!("cannot read {}: {error}", path.display()))?;
        if std::fs::read_to_string(&stamp).ok().as_deref() == Some(wanted.as_str()) {
            continue;
        }
        let python_path = python.to_string_lossy().into_owned();
        let path = path.to_string_lossy().into_owned();
        run(
            &python_path,
            &["-m", "pip", "install", "--quiet", "-r", &path],
        )?;
        std::fs::write(&stamp, wanted).map_err(|error| format!("cannot write stamp: {error}"))?;
    }
    Ok(python)
}

pub(crate) fn run(program: &str, args: &[&str]) -> Result<(), String> {
    eprintln!("$ {program} {}", args.join(" "));
    let status = Command::new(program)
        .args(args)
        .current_dir(workspace_root())
        .status()
        .map_err(|error| format!("cannot run {program}: {error}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("`{program} {}` failed ({status})", args.join(" ")))
    }
}

fn workspace_root() -> PathBuf {
    let manifest_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest_dir
        .parent()
        .map_or(manifest_dir.clone(), Path::to_path_buf)
}
