//! The `latency` example, run as a program: its JSON carries the lateness
//! percentiles and every task's share; the hogs' shares follow their weights; bad input exits
//! 2 with usage; a closed stdout ends it quietly; the kernel side either runs or names why it
//! cannot (a custom slice needs Linux 6.12+). And the bound that catches latency regressions:
//! a 0.1 ms-slice sleeper among four hogs on one worker wakes with p99 under 2 ms. Runs are
//! 0.5–1 s each.

#[allow(dead_code)]
mod common;

use std::process::{Command, Output, Stdio};
use std::sync::{Mutex, OnceLock};

/// The runs pin to one CPU: one at a time, so that the tests' hogs do not take each other's
/// CPU (the test harness runs tests in parallel).
static SERIAL: Mutex<()> = Mutex::new(());

fn bin() -> &'static std::path::PathBuf {
    static BIN: OnceLock<std::path::PathBuf> = OnceLock::new();
    BIN.get_or_init(|| common::example("latency"))
}

fn run(args: &str) -> Output {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    Command::new(bin())
        .args(args.split_whitespace())
        .output()
        .expect("run latency")
}

fn json(o: &Output) -> serde_json::Value {
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(text.lines().count(), 1, "one JSON line: {text:?}");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

fn p99_us(v: &serde_json::Value) -> f64 {
    v["lateness_us"]["p99"].as_f64().expect("p99")
}

#[test]
fn json_has_lateness_and_shares_that_follow_weights() {
    let v = json(&run("--runtime lagom -n 2 --nice 0,5 -s 1 --json"));
    assert_eq!(v["runtime"], "lagom");
    let wakes = v["wakes"].as_u64().unwrap();
    // 1000 periods in 1 s; a host that keeps the worker thread off its CPU for 80 % of the
    // run (measured at load 15 on 2 vCPUs) still leaves over a hundred.
    assert!(wakes > 20, "{v}");
    let l = &v["lateness_us"];
    let (p50, p90, p99, max) = (
        l["p50"].as_f64().unwrap(),
        l["p90"].as_f64().unwrap(),
        l["p99"].as_f64().unwrap(),
        l["max"].as_f64().unwrap(),
    );
    assert!(p50 <= p90 && p90 <= p99 && p99 <= max, "{v}");
    let tasks = v["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 2);
    // nice 0 against nice 5: weights 1024 and 335, 75.3 % / 24.7 %. The shares are the
    // scheduler's charged run time, which follows the weights closely even under load.
    for t in tasks {
        let (s, w) = (
            t["share_of_hogs"].as_f64().unwrap(),
            t["weight_share"].as_f64().unwrap(),
        );
        assert!((s - w).abs() < 0.05, "{t}");
        assert!(t["iterations"].as_u64().unwrap() > 0, "{t}");
    }
    assert_eq!(tasks[1]["weight"], 335);
}

#[test]
fn text_output_names_every_task() {
    let o = run("--runtime lagom -n 3 -s 0.5");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{out}");
    for name in [
        "lateness µs: p50",
        "hog-0",
        "hog-2",
        "sleeper",
        "largest gap",
    ] {
        assert!(out.contains(name), "{name}: {out}");
    }
}

/// The kernel side: plain pinned threads; with a custom slice it either runs with the slice
/// read back from the kernel or fails naming why (no silent run without it).
#[test]
fn os_side_runs_or_names_what_is_missing() {
    let v = json(&run("--runtime os -n 1 -s 0.5 --json"));
    assert_eq!(v["runtime"], "os");
    assert!(v["wakes"].as_u64().unwrap() > 0, "{v}");
    let o = run("--runtime os -n 1 -s 0.5 --slice-us 100 --json");
    if o.status.success() {
        assert_eq!(json(&o)["slice_us"], 100);
    } else {
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(
            err.contains("sched_setattr") || err.contains("sched_getattr"),
            "{err}"
        );
        assert!(o.stdout.is_empty());
    }
}

#[test]
fn bad_values_exit_2_with_usage() {
    for args in [
        "--runtime bsd",
        "-p 1",
        "-s 0",
        "-s nan",
        "--nice 20",
        "-n 3 --nice 0,1",
        "--features NO_SUCH_FEATURE",
        "--runtime os --features NO_DELAY_DEQUEUE",
        "--runtime os --timer-spin-us 10",
        "--bogus",
    ] {
        let o = run(args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args}: {err}");
        assert!(err.contains("usage: latency"), "{args}: {err}");
    }
    let o = run("--help");
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stdout).contains("--slice-us"));
}

#[test]
fn survives_a_closed_stdout() {
    let mut child = Command::new(bin())
        .args(["-n", "1", "-s", "0.2"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("panicked"), "{err}");
}

/// The regression bound: a sleeper with a 0.1 ms slice among four nice-0 hogs
/// that call `cond_resched` on one worker wakes with p99 under 2 ms (the kernel's own p99
/// here is about 4 ms; lagom's is well under 0.1 ms when its worker thread has a CPU). On a
/// loaded machine the host keeps the worker thread off its CPU for whole ticks, which no
/// runtime can hide, so the bound applies to the lateness less the worker thread's host run
/// delay over each sleep (`lateness_excl_host_us`, from its schedstat; the raw lateness where
/// the kernel has no schedstat), and must hold in one of five 1 s runs — a regression fails
/// all five.
///
/// A saturated host (the worker thread waiting for a CPU over a fifth of every run) also
/// inflates what is left: the running hog is charged the stalls as run time (`update_curr`
/// charges wall time under the default task clock, which this test keeps), which puts the sleeper's
/// deadline behind the other hogs'. Then, outside CI only, the test says so on stderr and
/// ends without the bound; under `CI=true` the bound always applies.
#[test]
fn short_slice_sleeper_among_hogs_wakes_within_2ms_p99() {
    let mut seen = Vec::new();
    let mut saturated = 0;
    for _ in 0..5 {
        let v = json(&run("--runtime lagom -n 4 --slice-us 100 -s 1 --json"));
        assert_eq!(v["slice_us"], 100);
        let p99 = match v["lateness_excl_host_us"]["p99"].as_f64() {
            Some(p) => p,
            None => p99_us(&v),
        };
        assert!(p99 <= p99_us(&v), "{v}");
        if p99 < 2000.0 {
            return;
        }
        let host = v["host_delay_fraction"].as_f64().unwrap_or(0.0);
        if host > 0.2 {
            saturated += 1;
        }
        seen.push((p99, host));
    }
    let ci = std::env::var("CI").is_ok_and(|v| v == "true");
    if saturated == seen.len() && !ci {
        eprintln!(
            "NOTE: the 2 ms p99 bound was not checked: the host kept the worker thread off its \
             CPU for over 20 % of every run (p99 µs, host fraction: {seen:?}); run it on a \
             quieter machine (under CI=true it is always checked)"
        );
        return;
    }
    panic!(
        "p99 lateness in µs (less host delay), and the host's share, of five runs: {seen:?} \
         (bound 2000)"
    );
}
