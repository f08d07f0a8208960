//! `idle_cost`: what an idle worker costs and how late its timers are — one task sleeping a
//! short time in a loop against a plain thread doing the same with `nanosleep`, and an empty
//! runtime, side by side in one process.
//!
//! Rows, alternated run by run (each run `-s` seconds):
//!
//! - `lagom`: a runtime with the given settings (defaults unless `--idle-spin-us`,
//!   `--idle-spin-adaptive-us` or `--timer-spin-us` say otherwise), one task that calls
//!   `task::sleep(D)` in a loop;
//! - `thread`: a plain OS thread that calls `std::thread::sleep(D)` (`nanosleep`) in a loop,
//!   with the default timer slack of a thread (50 µs), and `thread-slack1`: the same with its
//!   slack set to 1 ns, as lagom's workers set theirs;
//! - `empty` (with `--empty`): a runtime with no task, while the main thread sleeps.
//!
//! Per row: the process's CPU time (`getrusage(RUSAGE_SELF)`, user + system, every thread)
//! over the run, scaled to ms per 500 ms of wall time; the sleeps completed; the lateness of
//! each sleep (its end less its start less D, `CLOCK_MONOTONIC`) p50 / p99 in µs. The
//! runtime is built before and shut down after the measured window.
//!
//! ```text
//! cargo run --release -p lagom-examples --example idle_cost -- [--sleep-us D] [-s SECONDS]
//!     [--runs N] [--empty] [--idle-spin-us US | --idle-spin-adaptive-us US]
//!     [--timer-spin-us US] [--json]
//! ```

use std::time::{Duration, Instant};

use lagom::Runtime;
use lagom_examples::{micros_arg, seconds_arg, usage_error};

const USAGE: &str = "usage: idle_cost [--sleep-us D] [-s SECONDS] [--runs N] [--empty]
                 [--idle-spin-us US | --idle-spin-adaptive-us US] [--timer-spin-us US]
                 [--json]

One lagom task sleeping D µs in a loop against a plain thread doing the same (nanosleep,
default slack and 1 ns slack), alternated N times, each run SECONDS long; with --empty also a
runtime with no task. Prints the process's CPU ms per 500 ms and the sleeps' lateness.
  --sleep-us D             the sleep (default 100)
  -s SECONDS               one run's length (default 2; fractions allowed)
  --runs N                 runs of each row (default 3)
  --empty                  also the empty runtime
  --idle-spin-us US        lagom: a fixed idle spin (Builder::idle_spin)
  --idle-spin-adaptive-us US
                           lagom: the adaptive spin's ceiling (Builder::idle_spin_adaptive)
  --timer-spin-us US       lagom: Builder::timer_spin
  --json                   one JSON object per row and run, one per line";

struct Args {
    sleep: Duration,
    secs: f64,
    runs: usize,
    empty: bool,
    idle_spin: Option<Duration>,
    idle_spin_adaptive: Option<Duration>,
    timer_spin: Option<Duration>,
    json: bool,
}

fn parse_args() -> Result<Args, lexopt::Error> {
    use lexopt::prelude::*;
    let mut a = Args {
        sleep: Duration::from_micros(100),
        secs: 2.0,
        runs: 3,
        empty: false,
        idle_spin: None,
        idle_spin_adaptive: None,
        timer_spin: None,
        json: false,
    };
    let us = |p: &mut lexopt::Parser, flag: &str| -> Result<Duration, lexopt::Error> {
        Ok(Duration::from_nanos(micros_arg(flag, p.value()?)?))
    };
    let mut p = lexopt::Parser::from_env();
    while let Some(arg) = p.next()? {
        match arg {
            Long("sleep-us") => a.sleep = us(&mut p, "--sleep-us")?,
            Short('s') => a.secs = seconds_arg("-s", p.value()?)?,
            Long("runs") => a.runs = p.value()?.parse()?,
            Long("empty") => a.empty = true,
            Long("idle-spin-us") => a.idle_spin = Some(us(&mut p, "--idle-spin-us")?),
            Long("idle-spin-adaptive-us") => {
                a.idle_spin_adaptive = Some(us(&mut p, "--idle-spin-adaptive-us")?)
            }
            Long("timer-spin-us") => a.timer_spin = Some(us(&mut p, "--timer-spin-us")?),
            Long("json") => a.json = true,
            Short('h') | Long("help") => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            _ => return Err(arg.unexpected()),
        }
    }
    if a.runs == 0 {
        return Err("--runs must be at least 1".into());
    }
    if a.idle_spin.is_some() && a.idle_spin_adaptive.is_some() {
        return Err("--idle-spin-us and --idle-spin-adaptive-us exclude each other".into());
    }
    Ok(a)
}

/// The process's CPU time so far (user + system, all threads), ns.
fn process_cpu_ns() -> u64 {
    // SAFETY: an all-zero rusage is valid storage for the kernel to fill.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is writable.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    assert_eq!(rc, 0, "getrusage");
    let tv = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1_000;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// One row's run: CPU ns over `wall` ns, and the lateness of each sleep in ns.
struct Run {
    cpu_ns: u64,
    wall_ns: u64,
    late: Vec<u64>,
}

/// Sleeps `d` in a loop for `secs` with `sleep`, recording each sleep's lateness.
fn sleep_loop(d: Duration, secs: f64, sleep: impl Fn(Duration)) -> Vec<u64> {
    let end = Instant::now() + Duration::from_secs_f64(secs);
    // Room for the sleeps expected, within reason (a long run grows the vector).
    let expected = secs * 1e6 / d.as_micros().max(1) as f64;
    let mut late = Vec::with_capacity(expected.min(1e7) as usize);
    loop {
        let t = Instant::now();
        if t >= end {
            return late;
        }
        sleep(d);
        late.push(t.elapsed().saturating_sub(d).as_nanos() as u64);
    }
}

fn builder(a: &Args) -> lagom::runtime::Builder {
    let mut b = Runtime::builder();
    if let Some(s) = a.idle_spin {
        b = b.idle_spin(s);
    }
    if let Some(s) = a.idle_spin_adaptive {
        b = b.idle_spin_adaptive(s);
    }
    if let Some(s) = a.timer_spin {
        b = b.timer_spin(s);
    }
    b
}

/// Runs `f` between two readings of the process's CPU time and the clock.
fn measured(f: impl FnOnce() -> Vec<u64>) -> Run {
    let (c0, t0) = (process_cpu_ns(), Instant::now());
    let late = f();
    let (cpu_ns, wall_ns) = (process_cpu_ns() - c0, t0.elapsed().as_nanos() as u64);
    Run {
        cpu_ns,
        wall_ns,
        late,
    }
}

fn run_row(row: &str, a: &Args) -> Run {
    let (d, secs) = (a.sleep, a.secs);
    match row {
        "lagom" => {
            let rt = builder(a).build().unwrap_or_else(|e| usage_error(e, USAGE));
            // The task starts before the window, so that the spawn and the workers' start
            // are not counted.
            let (tx, rx) = std::sync::mpsc::channel::<()>();
            let go = std::sync::Arc::new(std::sync::Barrier::new(2));
            let g = std::sync::Arc::clone(&go);
            let h = rt.spawn(move || {
                g.wait();
                let late = sleep_loop(d, secs, lagom::task::sleep);
                drop(tx);
                late
            });
            let r = measured(|| {
                go.wait();
                let _ = rx.recv();
                Vec::new()
            });
            let late = h.join().unwrap_or_default();
            drop(rt);
            Run { late, ..r }
        }
        "thread" | "thread-slack1" => {
            let slack1 = row == "thread-slack1";
            let go = std::sync::Arc::new(std::sync::Barrier::new(2));
            let g = std::sync::Arc::clone(&go);
            let (tx, rx) = std::sync::mpsc::channel::<Vec<u64>>();
            let t = std::thread::spawn(move || {
                if slack1 {
                    // SAFETY: PR_SET_TIMERSLACK with a value takes no pointer; the calling
                    // thread's.
                    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1u64, 0u64, 0u64, 0u64) };
                }
                g.wait();
                let late = sleep_loop(d, secs, std::thread::sleep);
                let _ = tx.send(late);
            });
            let mut late = Vec::new();
            let r = measured(|| {
                go.wait();
                late = rx.recv().unwrap_or_default();
                Vec::new()
            });
            let _ = t.join();
            Run { late, ..r }
        }
        "empty" => {
            let rt = builder(a).build().unwrap_or_else(|e| usage_error(e, USAGE));
            // Let the workers reach their idle sleep first.
            std::thread::sleep(Duration::from_millis(50));
            let r = measured(|| {
                std::thread::sleep(Duration::from_secs_f64(secs));
                Vec::new()
            });
            drop(rt);
            r
        }
        _ => unreachable!("a known row"),
    }
}

fn pct(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i] as f64 / 1e3
}

fn main() {
    lagom_examples::default_sigpipe();
    let a = parse_args().unwrap_or_else(|e| usage_error(e, USAGE));
    let mut rows = vec!["lagom", "thread", "thread-slack1"];
    if a.empty {
        rows.push("empty");
    }
    if !a.json {
        println!(
            "{:<14} {:>4} {:>14} {:>8} {:>10} {:>10}",
            "row", "run", "cpu ms/500ms", "sleeps", "late p50", "late p99"
        );
    }
    for run in 0..a.runs {
        for row in &rows {
            let mut r = run_row(row, &a);
            r.late.sort_unstable();
            let per500 = r.cpu_ns as f64 / 1e6 * 5e8 / r.wall_ns.max(1) as f64;
            let (p50, p99) = (pct(&r.late, 0.5), pct(&r.late, 0.99));
            if a.json {
                println!(
                    "{}",
                    serde_json::json!({
                        "row": row, "run": run, "sleep_us": a.sleep.as_micros() as u64,
                        "cpu_ms_per_500ms": per500, "sleeps": r.late.len(),
                        "late_p50_us": p50, "late_p99_us": p99,
                        "idle_spin_us": a.idle_spin.map(|d| d.as_micros() as u64),
                        "idle_spin_adaptive_us": a.idle_spin_adaptive.map(|d| d.as_micros() as u64),
                        "timer_spin_us": a.timer_spin.map(|d| d.as_micros() as u64),
                    })
                );
            } else {
                println!(
                    "{row:<14} {run:>4} {per500:>14.1} {:>8} {p50:>10.1} {p99:>10.1}",
                    r.late.len()
                );
            }
        }
    }
}
