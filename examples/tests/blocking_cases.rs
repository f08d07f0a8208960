//! The `blocking_cases` example, run as a program: a case that hangs ends after
//! its bound with `HANG` and exit status 3, the stall monitor's report on stderr naming what
//! holds the worker; a case that blocks only in lagom completes with no report; `--help`
//! and bad input.

#[allow(dead_code)]
mod common;

use std::process::{Command, Output};
use std::sync::OnceLock;

fn run(args: &[&str]) -> Output {
    static BIN: OnceLock<std::path::PathBuf> = OnceLock::new();
    let bin = BIN.get_or_init(|| common::example("blocking_cases"));
    Command::new(bin)
        .args(args)
        .output()
        .expect("run blocking_cases")
}

/// A ping-pong over std's channels on one worker hangs: after the bound, `HANG`, exit 3, and
/// the monitor's report of the task blocked in futex behind which the other waits.
#[test]
fn a_hang_is_bounded_and_reported() {
    let o = run(&["pingpong", "-w", "1", "--bound", "1", "--threshold", "5"]);
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert_eq!(o.status.code(), Some(3), "{out}{err}");
    assert!(
        out.contains("HANG: pingpong -w 1 did not finish within 1s"),
        "{out}"
    );
    assert!(
        err.contains("lagom: task ") && err.contains("without a scheduling call"),
        "{err}"
    );
    assert!(err.contains("lagom::sync"), "{err}");
}

#[test]
fn a_case_that_blocks_in_lagom_completes_unreported() {
    let o = run(&["os-sleep", "-w", "1", "--how", "lagom"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{out}");
    assert!(
        out.contains("RESULT os-sleep -w 1 --how lagom: 20 × 20 ms sleeps took")
            && out.contains("stalls reported: 0"),
        "{out}"
    );
}

#[test]
fn help_and_bad_input() {
    let o = run(&["--help"]);
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stdout).contains("usage: blocking_cases"));
    for bad in [
        &["no-such-case"][..],
        &["os-sleep", "--how", "nap"],
        &[],
        &["pingpong", "--bound", "0"],
    ] {
        let o = run(bad);
        assert_eq!(o.status.code(), Some(2), "{bad:?}");
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("usage:"),
            "{bad:?}"
        );
    }
}
