//! The `soak` example: a short run keeps every invariant and reports its figures; a lost
//! wakeup (injected) is reported with the seed that replays the run; bad flags exit 2.
#[allow(dead_code)]
mod common;

use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::OnceLock;

fn bin() -> &'static PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| common::example("soak"))
}

fn run(args: &[&str]) -> Output {
    Command::new(bin()).args(args).output().expect("run soak")
}

#[test]
fn a_short_run_keeps_every_invariant() {
    let o = run(&[
        "--seconds",
        "2",
        "--round-seconds",
        "0.5",
        "--seed",
        "7",
        "--json",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "exit {:?}: {err}", o.status);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("one JSON object");
    assert_eq!(v["seed"], 7);
    assert_eq!(v["invariant_failures"], 0);
    assert!(v["rounds"].as_u64().unwrap() >= 2, "{v}");
    let per = v["per_kind"].as_object().unwrap();
    assert!(per.len() >= 22, "{v}");
    assert!(v["operations"].as_u64().unwrap() > 0, "{v}");
    assert!(v["cancelled_at_shutdown"].as_u64().unwrap() > 0, "{v}");
}

#[test]
fn an_injected_lost_wakeup_fails_the_run_with_its_seed() {
    let o = run(&[
        "--seconds",
        "1",
        "--round-seconds",
        "0.3",
        "--seed",
        "42",
        "--watchdog-seconds",
        "1",
        "--inject",
        "lost-wakeup",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("FAILED") && err.contains("injected lost wakeup"),
        "{err}"
    );
    assert!(
        err.contains("--seed 42"),
        "the report gives the seed: {err}"
    );
}

#[test]
fn bad_flags_exit_2_with_a_one_line_error() {
    for args in [
        &["--workers", "0"][..],
        &["--seconds", "-1"],
        &["--seconds", "nan"],
        &["--inject", "meteor"],
        &["--bogus"],
        &["--workers", "100000"],
    ] {
        let o = run(args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.lines().next().unwrap_or("").starts_with("error: "),
            "{args:?}: {err}"
        );
    }
}
