//! Project automation. `cargo xtask ci` is the one test command: the same locally and in CI.
//!
//! It runs, stopping at the first failure: formatting check, clippy with warnings denied, every
//! Rust test, a build of the `osprey` binary, then the black-box suite (official Python clients
//! against the real binary), installing the Python packages it needs into `.venv` first.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

fn main() -> ExitCode {
    let task = std::env::args().nth(1).unwrap_or_default();
    let result = match task.as_str() {
        "ci" => ci(),
        "blackbox" => blackbox(&[]),
        _ => {
            eprintln!("usage: cargo xtask <ci|blackbox>");
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

/// Builds `osprey` and runs the Python black-box suite against it.
fn blackbox(extra_pytest_args: &[&str]) -> Result<(), String> {
    run(
        "cargo",
        &["build", "--package", "server", "--bin", "osprey"],
    )?;
    let root = workspace_root();
    let python = ensure_venv(&root)?;
    let binary = root.join("target/debug/osprey");
    let mut args = vec!["-m", "pytest", "tests/blackbox", "-q", "-ra"];
    args.extend_from_slice(extra_pytest_args);
    let status = Command::new(&python)
        .args(&args)
        .current_dir(&root)
        .env("OSPREY_BIN", &binary)
        .status()
        .map_err(|error| format!("cannot run pytest: {error}"))?;
    if !status.success() {
        return Err(format!("black-box tests failed ({status})"));
    }
    Ok(())
}

/// Creates `.venv` and installs `tests/requirements.txt` into it when missing or changed.
fn ensure_venv(root: &Path) -> Result<PathBuf, String> {
    let venv = root.join(".venv");
    let python = venv.join("bin/python");
    if !python.exists() {
        run("python3", &["-m", "venv", &venv.to_string_lossy()])?;
    }
    let requirements = root.join("tests/requirements.txt");
    let stamp = venv.join("requirements.installed");
    let wanted = std::fs::read_to_string(&requirements)
        .map_err(|error| format!("cannot read {}: {error}", requirements.display()))?;
    if std::fs::read_to_string(&stamp).ok().as_deref() != Some(wanted.as_str()) {
        let python_path = python.to_string_lossy().into_owned();
        let requirements_path = requirements.to_string_lossy().into_owned();
        run(
            &python_path,
            &["-m", "pip", "install", "--quiet", "-r", &requirements_path],
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
