//! Every example program's command line against hostile input: each program is
//! run with arguments made of its own flags (read from its `--help`) and hostile values
//! (empty, negative, huge, fractional, `nan`, not UTF-8, unknown flags), and must never
//! panic, die of a signal or hang: it exits 0 (arguments it accepts; a run that is still
//! going after a few seconds is stopped and counts as accepted), or 1 or 2 with a first line
//! on stderr that says what was wrong. Each runs in a scratch directory of its own (a hostile
//! argument may name a file to write).
//!
//! Two properties per program: `garbage` (at least one argument that cannot be valid: the
//! program must refuse it before doing any work) and `extremes` (flags with boundary values
//! only, which a program may accept and start running). Command lines that once broke a
//! program are kept in `tests/corpus/cli.txt` (`PROGRAM ARG…`, one per line), each of which
//! the program must now refuse cleanly (`corpus_command_lines_fail_cleanly`).

#[allow(dead_code)]
mod common;

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence, TestRunner};

/// Every example program with a command line.
const PROGRAMS: &[&str] = &[
    "topo",
    "contexts",
    "pipe",
    "sync_pingpong",
    "busy_wake",
    "asym_stall",
    "idle_spin",
    "idle_cost",
    "spawn_join",
    "schbench",
    "schbench_ab",
    "latency",
    "sim",
    "sim_check",
    "taskgraph",
    "soak",
    "pipeline",
    "scope_borrow",
    "latency_slice",
    "build_graph",
    "blocking_cases",
];

/// How long a run may go on before it is stopped (and counted as accepted).
const RUN_LIMIT: Duration = Duration::from_secs(3);

fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn runner(cases: u32) -> TestRunner {
    TestRunner::new(Config {
        cases,
        failure_persistence: Some(Box::new(FileFailurePersistence::Off)),
        ..Config::default()
    })
}

/// The flags a program's `--help` names.
fn flags(bin: &PathBuf) -> Vec<String> {
    let o = Command::new(bin)
        .arg("--help")
        .output()
        .expect("run --help");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let mut out: Vec<String> = text
        .split(|c: char| c.is_whitespace() || matches!(c, '[' | ']' | '(' | ')' | ',' | '|' | ':'))
        .filter(|w| {
            let name = w.trim_start_matches('-');
            w.starts_with('-')
                && !name.is_empty()
                && name.len() < 30
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                && name.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        })
        .map(|w| w.split('=').next().unwrap_or(w).to_string())
        .collect();
    out.sort();
    out.dedup();
    assert!(
        !out.is_empty(),
        "{}: --help names no flag:\n{text}",
        bin.display()
    );
    out
}

/// Runs `bin` with `args`; checks the outcome (module doc).
fn check(name: &str, bin: &PathBuf, args: &[OsString], must_refuse: bool) -> Result<(), String> {
    let shown = format!("{name} {args:?}");
    // In a directory of its own: a hostile argument may name a file to write (`--trace 0`).
    let cwd = tempfile::tempdir().expect("a scratch directory");
    let mut child = Command::new(bin)
        .current_dir(cwd.path())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .env_remove("LAGOM_FEATURES")
        .spawn()
        .map_err(|e| format!("{shown}: cannot start: {e}"))?;
    let t0 = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait") {
            break Some(st);
        }
        if t0.elapsed() > RUN_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        use std::io::Read;
        let _ = e.read_to_string(&mut err);
    }
    let Some(status) = status else {
        return if must_refuse {
            Err(format!(
                "{shown}: still running after {RUN_LIMIT:?} (it should have refused)"
            ))
        } else {
            Ok(())
        };
    };
    if err.contains("panicked") {
        return Err(format!("{shown}: panicked:\n{err}"));
    }
    match status.code() {
        Some(0) if !must_refuse => Ok(()),
        Some(1 | 2) => {
            let first = err.lines().next().unwrap_or("");
            if first.trim().is_empty() {
                return Err(format!("{shown}: exit {status} with no message"));
            }
            if first.starts_with("thread ") {
                return Err(format!("{shown}: the first line is no message: {first:?}"));
            }
            Ok(())
        }
        _ => Err(format!(
            "{shown}: exit {status} (must_refuse: {must_refuse}):\n{err}"
        )),
    }
}

/// Values a flag may be given.
fn value() -> impl Strategy<Value = OsString> {
    let fixed = prop::sample::select(vec![
        "",
        " ",
        "0",
        "-0",
        "1",
        "-1",
        "2",
        "3",
        "-9",
        "0.5",
        "-0.5",
        "1e400",
        "nan",
        "inf",
        "-inf",
        "4294967295",
        "4294967296",
        "18446744073709551615",
        "18446744073709551616",
        "99999999999999999999999999",
        "0x10",
        "1k",
        "1ms",
        "10us",
        "1s",
        "0-3",
        "0-99999",
        "x",
        "--",
        "-",
        "é",
        "NO_SUCH_FEATURE",
        "NO_DELAY_DEQUEUE",
        "default",
        "/nonexistent/x",
        "/dev/null",
        "/",
        ",",
        "1,2,,3",
    ])
    .prop_map(OsString::from);
    prop_oneof![
        8 => fixed,
        1 => any::<u64>().prop_map(|n| OsString::from(n.to_string())),
        // Not UTF-8, but no NUL: an argument cannot hold one.
        1 => prop::collection::vec(1..=255u8, 0..6).prop_map(OsString::from_vec),
    ]
}

/// Arguments that cannot all be valid: flags with hostile values, then an unknown flag.
fn garbage(flags: Vec<String>) -> impl Strategy<Value = Vec<OsString>> {
    let pair = (prop::sample::select(flags), value());
    (
        prop::collection::vec(pair, 0..4),
        // Last, so that no flag takes it as its value.
        prop::sample::select(vec!["--no-such-flag", "-Z", "--lagom-bogus=1"]),
    )
        .prop_map(|(pairs, bad)| {
            let mut args: Vec<OsString> = pairs
                .into_iter()
                .flat_map(|(f, v)| [OsString::from(f), v])
                .collect();
            args.push(OsString::from(bad));
            args
        })
}

/// Flags with boundary values only.
fn extremes(flags: Vec<String>) -> impl Strategy<Value = Vec<OsString>> {
    let v = prop::sample::select(vec![
        "0",
        "-1",
        "18446744073709551615",
        "99999999999999999999",
        "nan",
        "",
        "1e400",
    ])
    .prop_map(OsString::from);
    prop::collection::vec((prop::sample::select(flags), v), 1..3).prop_map(|pairs| {
        pairs
            .into_iter()
            .flat_map(|(f, v)| [OsString::from(f), v])
            .collect()
    })
}

/// Runs `strategy`'s cases on every program (all of them, so that one report lists every
/// failure).
fn over_every_program<S: Strategy<Value = Vec<OsString>>>(
    cases: u32,
    must_refuse: bool,
    strategy: impl Fn(Vec<String>) -> S,
) {
    let mut failed = Vec::new();
    for name in PROGRAMS {
        let bin = common::example(name);
        // Flags that act at once and end the parse (help, a list of what exists) are left
        // out: the arguments after them are never read.
        let fl: Vec<String> = flags(&bin)
            .into_iter()
            .filter(|f| !["--help", "-h", "--list"].contains(&f.as_str()))
            .collect();
        if let Err(e) = runner(cases).run(&strategy(fl), |args| {
            check(name, &bin, &args, must_refuse).map_err(TestCaseError::fail)
        }) {
            failed.push(format!("{name}: {e}"));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));
}

#[test]
fn every_program_refuses_garbage_cleanly() {
    over_every_program(cases(24), true, garbage);
}

#[test]
fn every_program_meets_extreme_values_cleanly() {
    over_every_program(cases(4), false, extremes);
}

/// The corpus (module doc).
#[test]
fn corpus_command_lines_fail_cleanly() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/cli.txt");
    let text = std::fs::read_to_string(&path).expect("tests/corpus/cli.txt");
    let mut n = 0;
    for line in text
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
    {
        let mut words = line.split(' ');
        let name = words.next().expect("a program");
        assert!(PROGRAMS.contains(&name), "{line}: no program {name}");
        let args: Vec<OsString> = words.map(OsString::from).collect();
        let bin = common::example(name);
        if let Err(e) = check(name, &bin, &args, true) {
            panic!("{line}: {e}");
        }
        n += 1;
    }
    assert!(n > 0, "the corpus is empty");
}
