//! `latency_slice`: what a task's latency slice and nice level do. On one worker, CPU-bound
//! hogs at nice 0 and nice 5 run beside a sleeper that wakes every millisecond; the sleeper is
//! run twice, with the default slice and with a 100 µs slice (`task::Builder::slice`). A
//! shorter slice means an earlier virtual deadline, so the woken sleeper preempts a hog sooner
//! (the kernel's `sched_attr.sched_runtime`); the hogs share the CPU by weight (nice 0 gets
//! about 3× what nice 5 gets). Preemption is cooperative: the hogs call `cond_resched`.
//!
//! ```text
//! cargo run --release --example latency_slice -- [--seconds S] [--hogs N]
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use lagom::{Runtime, task};
use lagom_examples::usage_error;

const USAGE: &str = "usage: latency_slice [--seconds S] [--hogs N]
A sleeper that wakes every 1 ms beside N CPU-bound hogs (half at nice 0, half at nice 5) on
one worker, with the default slice and with a 100 us slice; prints the sleeper's wake
lateness and the hogs' shares.
  --seconds S  seconds per run, 0.1 to 60 (default 1)
  --hogs N     hogs, 2 to 16 (default 4)";

fn parse_args() -> Result<(f64, usize), lexopt::Error> {
    use lexopt::prelude::*;
    let (mut secs, mut hogs) = (1.0, 4);
    let mut p = lexopt::Parser::from_env();
    while let Some(arg) = p.next()? {
        match arg {
            Long("seconds") => secs = p.value()?.parse()?,
            Long("hogs") => hogs = p.value()?.parse()?,
            Short('h') | Long("help") => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            _ => return Err(arg.unexpected()),
        }
    }
    if !(0.1..=60.0).contains(&secs) {
        return Err(format!("--seconds: {secs} is not between 0.1 and 60").into());
    }
    if !(2..=16).contains(&hogs) {
        return Err(format!("--hogs: {hogs} is not between 2 and 16").into());
    }
    Ok((secs, hogs))
}

/// One run: the sleeper's lateness percentiles (p50, p99, max, in ns) and each hog's loop
/// count.
fn run(rt: &Runtime, slice: Option<Duration>, secs: f64, hogs: usize) -> (Vec<u64>, Vec<u64>) {
    let stop = Arc::new(AtomicBool::new(false));
    let counts: Vec<_> = (0..hogs).map(|_| Arc::new(AtomicU64::new(0))).collect();
    let hog_handles: Vec<_> = counts
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let (stop, n) = (stop.clone(), n.clone());
            let nice = if i % 2 == 0 { 0 } else { 5 };
            let b = task::Builder::new().name(format!("hog-{i}")).nice(nice);
            rt.spawn_with(b, move || {
                while !stop.load(Ordering::Relaxed) {
                    n.fetch_add(1, Ordering::Relaxed);
                    task::cond_resched();
                }
            })
            .unwrap()
        })
        .collect();
    let mut b = task::Builder::new().name("sleeper");
    if let Some(s) = slice {
        b = b.slice(s);
    }
    let period = Duration::from_millis(1);
    let wakes = (secs * 1000.0) as u32;
    let sleeper = rt.spawn_with(b, move || {
        let start = Instant::now();
        let mut late: Vec<u64> = (1..=wakes)
            .map(|k| {
                let deadline = start + period * k;
                task::sleep(deadline.saturating_duration_since(Instant::now()));
                deadline.elapsed().as_nanos() as u64
            })
            .collect();
        late.sort_unstable();
        late
    });
    let late = sleeper.unwrap().join().unwrap();
    stop.store(true, Ordering::Relaxed);
    hog_handles.into_iter().for_each(|h| h.join().unwrap());
    let pct = |p: usize| late[(late.len() - 1) * p / 100];
    (
        vec![pct(50), pct(99), late[late.len() - 1]],
        counts.iter().map(|n| n.load(Ordering::Relaxed)).collect(),
    )
}

fn main() {
    let (secs, hogs) = parse_args().unwrap_or_else(|e| usage_error(e, USAGE));
    let probe = Runtime::builder()
        .build()
        .unwrap_or_else(|e| usage_error(e, USAGE));
    let cpu = probe.worker_cpus()[0];
    drop(probe);
    let rt = Runtime::builder()
        .worker_cpus([cpu])
        .build()
        .unwrap_or_else(|e| usage_error(e, USAGE));
    for (label, slice) in [
        ("default slice", None),
        ("100 us slice ", Some(Duration::from_micros(100))),
    ] {
        let (late, counts) = run(&rt, slice, secs, hogs);
        let (nice0, nice5): (Vec<_>, Vec<_>) =
            counts.iter().enumerate().partition(|(i, _)| i % 2 == 0);
        let mean =
            |v: Vec<(usize, &u64)>| v.iter().map(|(_, n)| **n as f64).sum::<f64>() / v.len() as f64;
        println!(
            "{label}: sleeper late p50 {:.1} us, p99 {:.1} us, max {:.1} us; \
             a nice-0 hog ran {:.1}x a nice-5 hog",
            late[0] as f64 / 1e3,
            late[1] as f64 / 1e3,
            late[2] as f64 / 1e3,
            mean(nice0) / mean(nice5).max(1.0)
        );
    }
}
