//! Runs `cond_resched` with nothing due, or the `sched_call` bench's hog loop, a fixed number
//! of times in a task on a one-worker runtime, for instruction counts under
//! `valgrind --tool=callgrind`, which a loaded machine does not distort as it does timings.
//!
//! ```text
//! cargo build --profile bench -p lagom-benches --example resched_ops
//! valgrind --tool=callgrind --callgrind-out-file=/dev/null target/release/examples/resched_ops 0
//! valgrind --tool=callgrind --callgrind-out-file=/dev/null target/release/examples/resched_ops 1000000
//! ```
//!
//! The difference of the two totals (`Collected`), divided by the calls, is the instructions
//! of one call. `--hog OPS` runs the hog loop of `OPS` dependent multiply-adds instead, with
//! `cond_resched` each iteration (`--bare`: without it); `--no-tick-timer` builds the runtime
//! with `Builder::tick_timer(false)`, where each call reads the clock. Without valgrind it
//! prints the time per call or iteration and the worker's tick counters.

use std::hint::black_box;
use std::process::ExitCode;
use std::time::Instant;

use lagom::Runtime;

const USAGE: &str = "usage: resched_ops [N] [--hog OPS] [--bare] [--no-tick-timer]

Calls lagom::task::cond_resched N times (default 1000000) in a task on a one-worker runtime,
or, with --hog OPS, runs N iterations of a loop of OPS dependent multiply-adds that calls it
each iteration (--bare: without the call). Meant for callgrind: run it with N and with 0 and
divide the difference by N.
  --hog OPS         the hog loop with OPS multiply-adds per iteration
  --bare            the hog loop without cond_resched
  --no-tick-timer   Builder::tick_timer(false): every call reads the clock";

struct Args {
    n: u64,
    hog: Option<u32>,
    bare: bool,
    tick_timer: bool,
}

fn parse_args() -> Result<Args, lexopt::Error> {
    use lexopt::prelude::*;
    let mut a = Args {
        n: 1_000_000,
        hog: None,
        bare: false,
        tick_timer: true,
    };
    let mut p = lexopt::Parser::from_env();
    while let Some(arg) = p.next()? {
        match arg {
            Long("hog") => a.hog = Some(p.value()?.parse()?),
            Long("bare") => a.bare = true,
            Long("no-tick-timer") => a.tick_timer = false,
            Short('h') | Long("help") => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            Value(v) => a.n = v.parse()?,
            _ => return Err(arg.unexpected()),
        }
    }
    if a.bare && a.hog.is_none() {
        return Err("--bare needs --hog OPS".into());
    }
    Ok(a)
}

/// One unit of a hog's work: `ops` dependent multiply-adds (as `benches/sched_call.rs`).
#[inline(always)]
fn work(h: u64, ops: u32) -> u64 {
    let mut h = h;
    for _ in 0..ops {
        h = black_box(
            h.wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407),
        );
    }
    h
}

fn main() -> ExitCode {
    lagom_benches::default_sigpipe();
    let a = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("resched_ops: {e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let cpu = match Runtime::builder().build() {
        Ok(rt) => rt.worker_cpus()[0],
        Err(e) => {
            eprintln!("resched_ops: {e}");
            return ExitCode::FAILURE;
        }
    };
    let rt = match Runtime::builder()
        .worker_cpus([cpu])
        .tick_timer(a.tick_timer)
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("resched_ops: {e}");
            return ExitCode::FAILURE;
        }
    };
    let (n, hog, bare) = (a.n, a.hog, a.bare);
    // Timed in rounds of ROUND iterations: the mean over all, and the fastest round, which
    // a round that the OS interrupted does not move.
    const ROUND: u64 = 10_000;
    let (ns, best) = rt.block_on(move || {
        let t = Instant::now();
        let mut best = f64::MAX;
        let mut h = 1u64;
        let mut left = n;
        while left > 0 {
            let k = left.min(ROUND);
            left -= k;
            let r = Instant::now();
            match hog {
                None => {
                    for _ in 0..k {
                        lagom::task::cond_resched();
                    }
                }
                Some(ops) => {
                    for _ in 0..k {
                        h = work(h, ops);
                        if !bare {
                            lagom::task::cond_resched();
                        }
                    }
                }
            }
            if k == ROUND {
                best = best.min(r.elapsed().as_nanos() as f64 / k as f64);
            }
        }
        black_box(h);
        (t.elapsed().as_nanos() as f64 / n.max(1) as f64, best)
    });
    let w = rt.stats().workers[0];
    println!(
        "n={n} {}{} tick_timer={}: {ns:.2} ns per {} (wall clock, noisy; fastest round of \
         {ROUND}: {best:.2}); tick timer fires {}, arms {}",
        hog.map_or("cond_resched".to_string(), |o| format!(
            "hog of {o} multiply-adds"
        )),
        if bare { " without cond_resched" } else { "" },
        a.tick_timer,
        if hog.is_some() { "iteration" } else { "call" },
        w.tick_timer_fires,
        w.tick_timer_arms,
    );
    ExitCode::SUCCESS
}
