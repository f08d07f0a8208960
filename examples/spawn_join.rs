//! `spawn_join`: spawn + join of a trivial task from inside a task, repeated — the loop of the
//! `spawn` bench's `lagom/in_task` case as a plain program, to profile (`perf record -g`) and
//! to compare builds on a noisy machine (it prints the fastest and the median of R rounds).
//!
//! ```text
//! cargo run --release -p lagom-examples --example spawn_join -- [--json] [-n N] [-r R] [--workers W]
//! ```

use std::hint::black_box;
use std::time::{Duration, Instant};

use lagom::Runtime;
use lagom_examples::{thread_cpu_time, usage_error};

const USAGE: &str = "usage: spawn_join [--json] [-n N] [-r R] [--workers W] [--features SPEC]

From a task, spawns a task returning a number and joins it, N times per round (default
100000), R rounds (default 9); prints ns per spawn+join: the fastest round and the median,
in wall-clock time and in the spawning task's worker thread's CPU time (with --workers 1
that thread runs everything, and other processes taking the CPU away do not inflate it).
  --workers W  run on the first W allowed CPUs (default: all)
  --json       print {\"spawn_join_ns_min\", \"spawn_join_ns_median\",
               \"spawn_join_cpu_ns_min\", \"n\", \"rounds\", \"workers\"} on one line
  --features SPEC  scheduler features on top of the defaults, e.g. NO_DELAY_DEQUEUE
               (default: $LAGOM_FEATURES)";

/// The most rounds `-r` asks for (each keeps its times).
const MAX_ROUNDS: usize = 100_000;

fn main() {
    lagom_examples::default_sigpipe();
    let (mut json, mut n, mut rounds, mut workers) = (false, 100_000u64, 9usize, None);
    let mut features = None;
    let mut parser = lexopt::Parser::from_env();
    let parsed: Result<(), lexopt::Error> = (|| {
        use lexopt::prelude::*;
        while let Some(arg) = parser.next()? {
            match arg {
                Long("json") => json = true,
                Short('n') => n = parser.value()?.parse()?,
                Short('r') => rounds = parser.value()?.parse()?,
                Long("workers") => workers = Some(parser.value()?.parse::<usize>()?),
                Long("features") => features = Some(lagom_examples::features_arg(parser.value()?)?),
                Short('h') | Long("help") => {
                    println!("{USAGE}");
                    std::process::exit(0);
                }
                _ => return Err(arg.unexpected()),
            }
        }
        if rounds > MAX_ROUNDS {
            return Err(format!("-r {rounds}: at most {MAX_ROUNDS} rounds").into());
        }
        if n == 0 || rounds == 0 || workers == Some(0) {
            return Err("-n, -r and --workers must be at least 1".into());
        }
        Ok(())
    })();
    if let Err(e) = parsed {
        usage_error(e, USAGE);
    }
    let fail = |e: lagom::Error| -> ! {
        eprintln!("error: {e}");
        std::process::exit(1)
    };
    let mut b = Runtime::builder();
    if let Some(f) = &features {
        b = b.features(f.as_str());
    }
    if let Some(w) = workers {
        let allowed = Runtime::builder()
            .build()
            .unwrap_or_else(|e| fail(e))
            .worker_cpus();
        b = b.worker_cpus(allowed.into_iter().take(w));
    }
    // The lab measures the kernel's spawn and exit paths, migrations included.
    // SAFETY: the tasks spawn, join and return numbers: they hold nothing thread-local across
    // a blocking call and never ask which thread they run on.
    let rt = unsafe { b.allow_migration() }
        .build()
        .unwrap_or_else(|e| fail(e));
    let nworkers = rt.worker_cpus().len();
    let (mut wall, mut cpu): (Vec<Duration>, Vec<Duration>) = (0..rounds.max(1))
        .map(|_| {
            rt.block_on(move || {
                let (t, c) = (Instant::now(), thread_cpu_time());
                for i in 0..n {
                    let h = lagom::task::spawn(move || black_box(i));
                    black_box(h.join().expect("trivial task"));
                }
                (t.elapsed(), thread_cpu_time() - c)
            })
        })
        .unzip();
    wall.sort();
    cpu.sort();
    let ns = |d: Duration| d.as_nanos() as f64 / n as f64;
    let (min, median, cpu_min) = (ns(wall[0]), ns(wall[wall.len() / 2]), ns(cpu[0]));
    let stats = rt.shutdown();
    if json {
        println!(
            "{}",
            serde_json::json!({"spawn_join_ns_min": min, "spawn_join_ns_median": median,
                               "spawn_join_cpu_ns_min": cpu_min, "n": n,
                               "rounds": wall.len(), "workers": nworkers})
        );
    } else {
        println!(
            "spawn+join in a task on {nworkers} workers: min {min:.1} ns, median {median:.1} ns \
             per spawn+join ({} rounds of {n}); worker thread CPU time min {cpu_min:.1} ns",
            wall.len()
        );
        println!("{stats}");
    }
}
