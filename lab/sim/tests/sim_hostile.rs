//! Scenario files against hostile input: whatever the text, `parse` returns within
//! a bound, without a panic, and an error is one line that names the line and the field; a
//! scenario that parses meets a machine (`Sim::new`) the same way, and runs for a bounded
//! virtual time without a panic or a hang.
//!
//! Three generators: any text; lines made of the format's own words with hostile values
//! (huge, negative, fractional, empty, unknown units); and the bundled scenarios with lines
//! cut, doubled, swapped or spliced. Shapes that once crashed or hung are kept in
//! `tests/corpus/scenario/`, each file run by `corpus_scenarios_fail_cleanly` with what it
//! must give (its first line: `# expect: ok` or `# expect: error <text the message has>`).
//!
//! `PROPTEST_CASES` sets the cases per property (default below); a failure prints the
//! shrunk input, which then belongs in the corpus.

use std::sync::mpsc;
use std::time::Duration;

use lagom_sim::{BUILTIN, Machine, Options, Sim, builtin, parse};
use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence};

/// Cases per property unless `PROPTEST_CASES` says otherwise.
const CASES: u32 = 384;

fn config() -> Config {
    Config {
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(CASES),
        // Failures are kept by hand, in the corpus, not in a file beside the test.
        failure_persistence: Some(Box::new(FileFailurePersistence::Off)),
        ..Config::default()
    }
}

/// Runs `f` on `text`; if it takes longer than `limit`, prints the text and aborts the test
/// process (a hang must fail, not stall CI).
fn within<T>(limit: Duration, text: &str, f: impl FnOnce() -> T) -> T {
    let (done, wait) = mpsc::channel::<()>();
    let shown = text.chars().take(4000).collect::<String>();
    let watchdog = std::thread::spawn(move || {
        if let Err(mpsc::RecvTimeoutError::Timeout) = wait.recv_timeout(limit) {
            eprintln!("hang: still running after {limit:?} on this input:\n{shown:?}");
            std::process::abort();
        }
    });
    let v = f();
    drop(done);
    watchdog.join().expect("the watchdog thread");
    v
}

/// What every input must satisfy; returns the error's text, if any.
fn check(text: &str) -> Result<(), String> {
    within(Duration::from_secs(20), text, || {
        let s = match parse(text) {
            Ok(s) => s,
            Err(e) => return Err(one_line(&e.to_string(), text)),
        };
        let machine = Machine::named("cpus-2").expect("a built-in machine");
        let mut opts = match Options::of(&s) {
            Ok(o) => o,
            Err(e) => return Err(one_line(&e.to_string(), text)),
        };
        if let Err(e) = Sim::new(&s, machine, opts.clone()) {
            return Err(one_line(&e.to_string(), text));
        }
        // Bounded runs: a short virtual time, and a small instance count (a scenario may
        // legitimately ask for a million tasks; what is tested is that it runs at all).
        let instances: u64 = s
            .tasks
            .iter()
            .map(|t| u64::from(t.count.max(1)) * if t.per_cpu { 2 } else { 1 })
            .sum();
        if instances <= 64 {
            opts.duration = opts.duration.min(2_000_000);
            opts.wakeups = Some(opts.wakeups.unwrap_or(2000).min(2000));
            let mut sim =
                Sim::new(&s, Machine::named("cpus-2").unwrap(), opts).expect("built once");
            sim.run();
        }
        Ok(())
    })
}

/// An error message must be one non-empty line that says where (`line N` or `scenario`).
fn one_line(msg: &str, text: &str) -> String {
    assert!(
        !msg.is_empty() && !msg.contains('\n'),
        "not one line: {msg:?}\ninput: {text:?}"
    );
    msg.to_string()
}

/// The format's words: directives, attributes, steps, and values of every kind.
fn word() -> impl Strategy<Value = String> {
    let fixed = prop::sample::select(vec![
        "scenario",
        "topology",
        "features",
        "seed",
        "duration",
        "warmup",
        "wakeups",
        "stall",
        "resched",
        "preempt",
        "cooperative",
        "kernel",
        "kernel:0",
        "kernel:2us",
        "kernel:18446744073709551615ns",
        "idle_spin",
        "cost",
        "switch",
        "wake",
        "wakelist",
        "kick",
        "migrate",
        "task",
        "run",
        "sleep",
        "block",
        "yield",
        "exit",
        "after",
        "from",
        "outside",
        "sync",
        "post",
        "wake_posted",
        "spawn",
        "loop",
        "end",
        "self",
        "count=",
        "count=cpus",
        "nice=",
        "slice=",
        "cpus=",
        "cpu=",
        "start=yes",
        "start=no",
        "measure=no",
        "cpu=i",
        "cpu=i%0",
        "cpu=i/0",
        "cpus=0-3",
        "cpus=",
        "cpus=9999999",
        "cpus=3-1",
        "uniform(",
        "exp(",
        ")",
        ",",
        "(",
        "[",
        "]",
        "a[",
        "a[i]",
        "a[99]",
        "1ms",
        "0",
        "0ns",
        "1.5ms",
        "10us",
        "5µs",
        "1s",
        "-1ms",
        "1e9s",
        "18446744073709551615ns",
        "184467440737095516150",
        "99999999999s",
        "nan",
        "inf",
        "0.0000000001ns",
        "1.ms",
        ".5ms",
        "ms",
        "1m",
        "uniform(1ms,",
        "uniform(2ms,1ms)",
        "exp(0)",
        "exp(-1ms)",
        "nice=-21",
        "nice=20",
        "nice=99999999999",
        "slice=0",
        "count=0",
        "count=-1",
        "count=4294967296",
        "NO_DELAY_DEQUEUE",
        "NO_",
        "TTWU_QUEUE,",
        "#",
        "a",
        "b",
        "cpus-2",
        "sim-4",
        "/nonexistent",
        "\t",
        "\u{0}",
        "é",
    ])
    .prop_map(String::from);
    prop_oneof![
        6 => fixed,
        1 => "[a-z_=0-9.()\\[\\],%/-]{0,12}",
        1 => any::<u64>().prop_map(|n| n.to_string()),
        1 => (any::<u32>(), prop::sample::select(vec!["ns", "us", "ms", "s", ""]))
            .prop_map(|(n, u)| format!("{n}{u}")),
    ]
}

/// A scenario made of lines of the format's words, with indentation and nesting of loops.
fn token_soup() -> impl Strategy<Value = String> {
    prop::collection::vec((0..3usize, prop::collection::vec(word(), 0..6)), 0..24).prop_map(
        |lines| {
            lines
                .into_iter()
                .map(|(indent, words)| format!("{}{}\n", "  ".repeat(indent), words.join(" ")))
                .collect()
        },
    )
}

/// A bundled scenario, mutated line by line.
fn mutated_builtin() -> impl Strategy<Value = String> {
    let names: Vec<&'static str> = BUILTIN.to_vec();
    (
        prop::sample::select(names),
        prop::collection::vec((any::<prop::sample::Index>(), 0..5u8, word()), 1..6),
    )
        .prop_map(|(name, edits)| {
            let mut lines: Vec<String> = builtin(name)
                .expect("a built-in scenario")
                .lines()
                .map(String::from)
                .collect();
            for (at, how, w) in edits {
                if lines.is_empty() {
                    lines.push(w);
                    continue;
                }
                let i = at.index(lines.len());
                match how {
                    0 => {
                        lines.remove(i);
                    }
                    1 => {
                        let l = lines[i].clone();
                        lines.insert(i, l);
                    }
                    2 => {
                        let j = (i + 1) % lines.len();
                        lines.swap(i, j);
                    }
                    3 => {
                        // Replace one word of the line.
                        let mut ws: Vec<String> =
                            lines[i].split_whitespace().map(String::from).collect();
                        if ws.is_empty() {
                            ws.push(w);
                        } else {
                            let k = at.index(ws.len());
                            ws[k] = w;
                        }
                        lines[i] = format!("  {}", ws.join(" "));
                    }
                    _ => {
                        let cut = at.index(lines[i].len() + 1);
                        let cut = (0..=cut).rev().find(|&c| lines[i].is_char_boundary(c));
                        lines[i].truncate(cut.unwrap_or(0));
                        lines[i].push_str(&w);
                    }
                }
            }
            lines.join("\n")
        })
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn any_text_fails_cleanly(text in any::<String>()) {
        let _ = check(&text);
    }

    #[test]
    fn lines_of_the_formats_words_fail_cleanly(text in token_soup()) {
        let _ = check(&text);
    }

    #[test]
    fn mutated_builtin_scenarios_fail_cleanly(text in mutated_builtin()) {
        let _ = check(&text);
    }
}

/// The corpus: shapes found by the properties above (or by hand), each with what it gives.
#[test]
fn corpus_scenarios_fail_cleanly() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/scenario");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "the corpus is empty");
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        let expect = text
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("# expect: "))
            .unwrap_or_else(|| panic!("{}: the first line says `# expect: ...`", f.display()));
        let got = check(&text);
        match (expect.strip_prefix("error "), &got) {
            (None, Ok(())) if expect == "ok" => {}
            (Some(want), Err(msg)) if msg.contains(want) => {}
            _ => panic!("{}: expected {expect}, got {got:?}", f.display()),
        }
    }
}
