//! The `taskgraph` example: a generated graph runs to the end and reports; `--dump` prints the
//! documented file format, which `--file` reads back into the same graph (same checksum of
//! every node's output); bad input names its line and exits 1; bad flags exit 2; a closed
//! stdout ends it quietly.
#[allow(dead_code)]
mod common;

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

fn bin() -> &'static PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| common::example("taskgraph"))
}

fn run(args: &[&str]) -> Output {
    Command::new(bin())
        .args(args)
        .output()
        .expect("run taskgraph")
}

fn json(o: &Output) -> serde_json::Value {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).expect("one JSON line")
}

const SMALL: &[&str] = &[
    "--width",
    "20",
    "--depth",
    "10",
    "--cost-us",
    "20",
    "--blocking",
    "30",
];

#[test]
fn a_generated_graph_runs_and_its_dump_reads_back_the_same() {
    let mut args = SMALL.to_vec();
    args.push("--json");
    let a = json(&run(&args));
    assert_eq!(
        (a["nodes"].as_u64(), a["done"].as_u64()),
        (Some(200), Some(200))
    );
    assert!(a["critical_path_ms"].as_f64().unwrap() > 0.0);
    assert!(a["makespan_ms"].as_f64().unwrap() > 0.0);
    let mut dump_args = SMALL.to_vec();
    dump_args.push("--dump");
    let dump = run(&dump_args);
    assert!(dump.status.success());
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("g.txt");
    std::fs::write(&file, &dump.stdout).unwrap();
    let b = json(&run(&["--file", file.to_str().unwrap(), "--json"]));
    assert_eq!(a["checksum"], b["checksum"]);
    assert_eq!(a["edges"], b["edges"]);
    assert_eq!(a["critical_path_ms"], b["critical_path_ms"]);
    // Plain progress lines and the summary when stdout is not a terminal.
    let o = run(SMALL);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success());
    assert!(
        text.contains("critical path") && text.contains("achieved parallelism"),
        "{text}"
    );
}

/// Runs `--file` on `text`; returns the exit code and stderr.
fn bad_file(text: &str) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.txt");
    std::fs::write(&file, text).unwrap();
    let o = run(&["--file", file.to_str().unwrap()]);
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn bad_input_names_its_line_and_exits_1() {
    let (code, err) = bad_file("# a graph\na cpu:10us\nb cpu:10us a nope\n");
    assert_eq!(code, Some(1));
    assert!(
        err.contains("bad.txt:3:") && err.contains("`nope`"),
        "{err}"
    );
    let (code, err) = bad_file("a cpu:10us c\nb cpu:10us a\nc cpu:10us b\n");
    assert_eq!(code, Some(1));
    assert!(err.contains(":3:") && err.contains("cycle"), "{err}");
    let (code, err) = bad_file("a cpu:10us\n\nb disk:10us a\n");
    assert_eq!(code, Some(1));
    assert!(err.contains(":3:") && err.contains("disk:10us"), "{err}");
    let (code, err) = bad_file("a cpu:10xs\n");
    assert!(
        code == Some(1) && err.contains(":1:") && err.contains("10xs"),
        "{err}"
    );
    let (code, err) = bad_file("a\n");
    assert!(
        code == Some(1) && err.contains(":1:") && err.contains("no cost"),
        "{err}"
    );
    let (code, err) = bad_file("a cpu:1us\na cpu:1us\n");
    assert!(
        code == Some(1) && err.contains(":2:") && err.contains("twice"),
        "{err}"
    );
}

#[test]
fn bad_flags_exit_2_and_help_exits_0() {
    for args in [
        &["--width", "0"][..],
        &["--blocking", "101"],
        &["--bogus"],
        &["--features", "NO_SUCH_FEATURE"],
    ] {
        let o = run(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(String::from_utf8_lossy(&o.stderr).contains("usage: taskgraph"));
    }
    let o = run(&["--help"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stdout).contains("NAME COST"));
}

#[test]
fn a_closed_stdout_ends_it_quietly() {
    let mut child = Command::new(bin())
        .args(["--width", "100", "--depth", "100", "--dump"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("panicked"), "{err}");
    let _ = std::io::stderr().flush();
}
