//! Running a scenario of a test binary in a child process (for behaviour that ends the
//! process: an abort, a fatal signal).
#![allow(dead_code)]

use std::os::unix::process::ExitStatusExt;
use std::process::Command;

/// What a child run left behind.
pub struct ChildRun {
    /// Its standard error.
    pub stderr: String,
    /// Its exit code, if it exited.
    pub code: Option<i32>,
    /// The signal that ended it, if one did. qemu-user reports the guest's fatal signal by
    /// dying of it itself, so this holds under emulation too.
    pub signal: Option<i32>,
}

/// Runs this test binary's test named `child` alone, with `env=value` set (the child test
/// reads it to pick its scenario and does nothing when it is unset).
///
/// Under an emulator (cross-testing with `qemu-aarch64`, say), set `LAGOM_TEST_RUNNER` to the
/// runner command line: the child is then started through it, as cargo started this process.
pub fn run_child(env: &str, value: &str) -> ChildRun {
    run_child_with(env, value, &[])
}

/// [`run_child`] with more of the child's environment: each `(name, Some(value))` is set,
/// each `(name, None)` removed.
pub fn run_child_with(env: &str, value: &str, vars: &[(&str, Option<&str>)]) -> ChildRun {
    let exe = std::env::current_exe().unwrap();
    let runner = std::env::var("LAGOM_TEST_RUNNER").unwrap_or_default();
    let mut words = runner.split_whitespace();
    let mut cmd = match words.next() {
        Some(prog) => {
            let mut c = Command::new(prog);
            c.args(words).arg(&exe);
            c
        }
        None => Command::new(&exe),
    };
    for (name, v) in vars {
        match v {
            Some(v) => cmd.env(name, v),
            None => cmd.env_remove(name),
        };
    }
    let out = cmd
        .args(["--exact", "child", "--nocapture", "--test-threads=1"])
        .env(env, value)
        .output()
        .expect("spawn the test binary");
    ChildRun {
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        code: out.status.code(),
        signal: out.status.signal(),
    }
}
