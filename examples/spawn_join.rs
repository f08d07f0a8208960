//! `spawn_join`: spawn + join of a trivial task from inside a task, repeated — the loop of the
//! `spawn` bench's `lagom/in_task` case as a plain program, to profile (`perf record -g`) and
//! to compare builds on a noisy machine (it prints the fastest and the median of R rounds).
//!
//! ```text
//! cargo run --release -p lagom-examples --example spawn_join -- [--json] [-n N] [-r R]
//! ```

use std::hint::black_box;
use std::time::{Duration, Instant};

use lagom::Runtime;
use lagom_examples::usage_error;

const USAGE: &str = "usage: spawn_join [--json] [-n N] [-r R]

From a task, spawns a task returning a number and joins it, N times per round (default
100000), R rounds (default 9); prints ns per spawn+join: the fastest round and the median.
  --json   print {\"spawn_join_ns_min\", \"spawn_join_ns_median\", \"n\", \"rounds\"} on one line";

fn main() {
    let (mut json, mut n, mut rounds) = (false, 100_000u64, 9usize);
    let mut parser = lexopt::Parser::from_env();
    let parsed: Result<(), lexopt::Error> = (|| {
        use lexopt::prelude::*;
        while let Some(arg) = parser.next()? {
            match arg {
                Long("json") => json = true,
                Short('n') => n = parser.value()?.parse()?,
                Short('r') => rounds = parser.value()?.parse()?,
                Short('h') | Long("help") => {
                    println!("{USAGE}");
                    std::process::exit(0);
                }
                _ => return Err(arg.unexpected()),
            }
        }
        Ok(())
    })();
    if let Err(e) = parsed {
        usage_error(e, USAGE);
    }
    let rt = Runtime::builder().build().unwrap_or_else(|e| {
        eprintln!("error: {e}");
        std::process::exit(1)
    });
    let mut per_round: Vec<Duration> = (0..rounds.max(1))
        .map(|_| {
            rt.block_on(move || {
                let t = Instant::now();
                for i in 0..n {
                    let h = lagom::task::spawn(move || black_box(i));
                    black_box(h.join().expect("trivial task"));
                }
                t.elapsed()
            })
        })
        .collect();
    per_round.sort();
    let ns = |d: Duration| d.as_nanos() as f64 / n as f64;
    let (min, median) = (ns(per_round[0]), ns(per_round[per_round.len() / 2]));
    let stats = rt.shutdown();
    if json {
        println!(
            "{}",
            serde_json::json!({"spawn_join_ns_min": min, "spawn_join_ns_median": median,
                               "n": n, "rounds": per_round.len()})
        );
    } else {
        println!(
            "spawn+join in a task: min {min:.1} ns, median {median:.1} ns per spawn+join \
             ({} rounds of {n})",
            per_round.len()
        );
        println!("{stats}");
    }
}
