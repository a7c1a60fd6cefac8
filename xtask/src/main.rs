//! Project automation. `cargo xtask ci` is the one test command: the same locally and in CI.
//!
//! It runs, stopping at the first failure: formatting check, clippy with warnings denied, every
//! Rust test, a build of the `osprey` and `osprey-bench` binaries (and a release `osprey`, for
//! the hostile-client tests' latency bounds), then the black-box suite (official Python clients
//! against the real binaries), installing what it needs first: the Python packages into
//! `.venv`, and Debian's `redis-server` and `redis-tools` when missing.
//!
//! `cargo xtask compare-redis [ARGS]` builds release binaries and runs the Osprey versus
//! redis-server comparison (`scripts/compare-redis`), passing `ARGS` through.
//!
//! `cargo xtask compare-resp [ARGS]` builds release binaries and runs the comparison of Osprey's
//! Redis front end with redis-server under `redis-benchmark` (`scripts/compare-resp`), passing
//! `ARGS` through (`--quick` for a smoke run).
//!
//! `cargo xtask compare-durability [ARGS]` builds release binaries and runs the comparison of
//! Osprey's device storage (durable and relaxed writes, cold start, write amplification) with
//! redis-server's append-only file under `redis-benchmark` (`scripts/compare-durability`),
//! passing `ARGS` through (`--quick` for a smoke run).
//!
//! `cargo xtask set-index [ARGS]` builds release binaries and runs the set-index experiment
//! (`scripts/set-index-experiment`), passing `ARGS` through (`--quick` for a smoke run).
//!
//! Builds go to cargo's target directory: `target/`, or `CARGO_TARGET_DIR` when set (so a long
//! benchmark build need not share `target/` with other builds); `scripts/set-index-experiment`,
//! `scripts/compare-resp` and `scripts/compare-durability` look for the binaries by the same rule.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

fn main() -> ExitCode {
    let task = std::env::args().nth(1).unwrap_or_default();
    let rest: Vec<String> = std::env::args().skip(2).collect();
    let result = match task.as_str() {
        "ci" => ci(),
        "blackbox" => blackbox(&[]),
        "compare-redis" => compare_redis(&rest),
        "compare-resp" => compare_resp(&rest),
        "compare-durability" => compare_durability(&rest),
        "set-index" => set_index(&rest),
        _ => {
            eprintln!(
                "usage: cargo xtask <ci|blackbox|compare-redis [ARGS]|compare-resp [ARGS]|\
                 compare-durability [ARGS]|set-index [ARGS]>"
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
    run("cargo", &["fmt", "--all", "--", "--check"])?;
    run(
        "cargo",
        &[
            "clippy",
            "--workspace",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ],
    )?;
    run("cargo", &["test", "--workspace"])?;
    blackbox(&[])
}

/// Builds `osprey` and `osprey-bench` and runs the Python black-box suite against them.
fn blackbox(extra_pytest_args: &[&str]) -> Result<(), String> {
    run(
        "cargo",
        &["build", "--package", "server", "--package", "bench"],
    )?;
    // The hostile-client tests assert latency bounds, which only the optimized build can mean.
    run("cargo", &["build", "--release", "--package", "server"])?;
    ensure_redis()?;
    let root = workspace_root();
    let python = ensure_venv(&root, &["tests/requirements.txt"])?;
    let binary = root.join("target/debug/osprey");
    let mut args = vec!["-m", "pytest", "tests/blackbox", "-q", "-ra"];
    args.extend_from_slice(extra_pytest_args);
    let status = Command::new(&python)
        .args(&args)
        .current_dir(&root)
        .env("OSPREY_BIN", &binary)
        .env("OSPREY_RELEASE_BIN", root.join("target/release/osprey"))
        .env("OSPREY_BENCH_BIN", root.join("target/debug/osprey-bench"))
        .status()
        .map_err(|error| format!("cannot run pytest: {error}"))?;
    if !status.success() {
        return Err(format!("black-box tests failed ({status})"));
    }
    Ok(())
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

/// Installs Debian's `redis-server` and `redis-tools` when `redis-server` or
/// `redis-benchmark` is missing (tests and comparisons run them beside `osprey`).
fn ensure_redis() -> Result<(), String> {
    let installed = |program: &str| {
        Command::new(program)
            .arg("--version")
            .output()
            .is_ok_and(|output| output.status.success())
    };
    if installed("redis-server") && installed("redis-benchmark") {
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
    let packages = ["install", "-y", "-qq", "redis-server", "redis-tools"];
    if apt_get(&packages) || (apt_get(&["update", "-qq"]) && apt_get(&packages)) {
        Ok(())
    } else {
        Err("cannot install redis-server and redis-tools with apt-get".to_owned())
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

fn run(program: &str, args: &[&str]) -> Result<(), String> {
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
