//! The demo programs (`pipeline`, `scope_borrow`, `latency_slice`, `build_graph`), run as a
//! user would run them: each does what its doc says, takes `--help` (exit 0), and refuses a
//! bad flag or value with a one-line error and exit status 2.

#[allow(dead_code)]
mod common;

use std::process::{Command, Output};

fn run(name: &str, args: &[&str]) -> Output {
    Command::new(common::example(name))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("run {name}: {e}"))
}

fn stdout(o: &Output) -> String {
    assert!(
        o.status.success(),
        "exit {:?}; stderr: {}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn the_pipeline_delivers_every_item_once_on_one_worker_and_on_all() {
    // Items 0..1000, each +1 at each of 3 stages: 499 500 + 3 000.
    for workers in [&["--workers", "1"][..], &[][..]] {
        let args = [
            &["--items", "1000", "--stages", "3", "--bound", "1"],
            workers,
        ]
        .concat();
        let out = stdout(&run("pipeline", &args));
        assert!(out.contains("checksum 502500"), "{out}");
    }
}

#[test]
fn the_scope_counts_borrowed_words() {
    let out = stdout(&run("scope_borrow", &["--words", "4001", "--chunks", "3"]));
    // Lengths cycle 5, 10, 15, 20: 1 001 words of length 5, 1 000 of each other.
    assert!(out.contains("[1001, 1000, 1000, 1000]"), "{out}");
    assert!(
        out.contains(&format!("{} letters", 1001 * 5 + 1000 * (10 + 15 + 20))),
        "{out}"
    );
}

#[test]
fn the_slice_demo_reports_both_runs() {
    let out = stdout(&run("latency_slice", &["--seconds", "0.1", "--hogs", "2"]));
    assert!(out.contains("default slice: sleeper late p50"), "{out}");
    assert!(out.contains("100 us slice : sleeper late p50"), "{out}");
}

#[test]
fn the_build_runs_every_node_and_a_failure_cancels_its_dependants() {
    let out = stdout(&run("build_graph", &[]));
    for line in [
        "parse:b.rs: b.rs: 9 tokens",
        "check: checked 3 files",
        "link: linked 3 objects",
    ] {
        assert!(out.contains(line), "{out}");
    }
    let o = run("build_graph", &["--fail", "check", "--cycle"]);
    assert_eq!(o.status.code(), Some(1));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("would close the cycle"), "{out}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("node `check` failed"), "{err}");
    assert!(err.contains("4 dependant(s) cancelled"), "{err}");
}

#[test]
fn help_exits_0_and_bad_flags_exit_2() {
    let bad: [(&str, &[&str], &str); 8] = [
        ("pipeline", &["--bogus"], "--bogus"),
        ("pipeline", &["--bound", "0"], "--bound"),
        ("pipeline", &["--items", "many"], "many"),
        ("scope_borrow", &["--chunks", "0"], "--chunks"),
        ("latency_slice", &["--hogs", "1"], "--hogs"),
        ("latency_slice", &["--seconds", "100"], "--seconds"),
        ("build_graph", &["--fail", "nope"], "no node `nope`"),
        ("build_graph", &["extra"], "extra"),
    ];
    for (name, args, says) in bad {
        let o = run(name, args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{name} {args:?}: {err}");
        assert!(
            err.starts_with("error: ") && err.contains(says),
            "{name} {args:?}: {err}"
        );
        assert!(
            err.contains(&format!("usage: {name}")),
            "{name} {args:?}: {err}"
        );
    }
    for name in ["pipeline", "scope_borrow", "latency_slice", "build_graph"] {
        let o = run(name, &["--help"]);
        assert!(o.status.success(), "{name} --help");
        assert!(String::from_utf8_lossy(&o.stdout).starts_with(&format!("usage: {name}")));
    }
}
