//! Round trips over `lagom::sync` between two tasks, printed as ns per round trip: a channel
//! ping-pong (one message each way over two `mpsc` channels) and a mutex hand-off (two tasks
//! that each yield while holding a `Mutex`), on one worker and across two.
//!
//! ```text
//! cargo run --release -p lagom-examples --example sync_pingpong -- [-n ROUNDS] [--features SPEC]
//! ```

use std::sync::Arc;
use std::time::Instant;

use lagom::Runtime;
use lagom::sync::{Mutex, mpsc};
use lagom::task::{self, Builder};
use lagom_examples::{default_sigpipe, features_arg, usage_error};

const USAGE: &str = "usage: sync_pingpong [-n ROUNDS] [--features SPEC]

Round trips over lagom::sync between two tasks, in ns: a channel ping-pong (one message each
way over two mpsc channels) and a mutex hand-off (two tasks that yield while holding a
Mutex), on one worker and across two (the first two allowed CPUs).
  -n ROUNDS        round trips (locks) per case (default 200000, at least 2)
  --features SPEC  scheduler features on top of the defaults, e.g. NO_DELAY_DEQUEUE
                   (default: $LAGOM_FEATURES)";

struct Args {
    n: u64,
    features: Option<String>,
}

fn parse_args() -> Result<Args, lexopt::Error> {
    use lexopt::prelude::*;
    let mut args = Args {
        n: 200_000,
        features: None,
    };
    let mut parser = lexopt::Parser::from_env();
    while let Some(arg) = parser.next()? {
        match arg {
            Short('n') => args.n = parser.value()?.parse()?,
            Long("features") => args.features = Some(features_arg(parser.value()?)?),
            Short('h') | Long("help") => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            _ => return Err(arg.unexpected()),
        }
    }
    if args.n < 2 {
        return Err(format!("-n: {} round trips; at least 2", args.n).into());
    }
    Ok(args)
}

/// ns per round trip of `n` channel round trips between a task on `a` and one on `b`.
fn channel(rt: &Runtime, a: usize, b: usize, n: u64) -> f64 {
    rt.block_on(move || {
        let (to_b, from_a) = mpsc::channel::<u64>();
        let (to_a, from_b) = mpsc::channel::<u64>();
        let echo = Builder::new()
            .cpus([b])
            .spawn(move || from_a.iter().for_each(|v| to_a.send(v).unwrap()))
            .unwrap();
        let ns = Builder::new()
            .cpus([a])
            .spawn(move || {
                let t0 = Instant::now();
                for i in 0..n {
                    to_b.send(i).unwrap();
                    assert_eq!(from_b.recv().unwrap(), i);
                }
                t0.elapsed().as_nanos() as f64 / n as f64
            })
            .unwrap()
            .join()
            .unwrap();
        echo.join().unwrap();
        ns
    })
}

/// ns per lock of `n` locks by two tasks on `a` and `b` that yield while holding the lock.
fn handoff(rt: &Runtime, a: usize, b: usize, n: u64) -> f64 {
    let m = Arc::new(Mutex::new(0u64));
    let t0 = Instant::now();
    let hs: Vec<_> = [a, b]
        .into_iter()
        .map(|cpu| {
            let m = m.clone();
            rt.spawn_with(Builder::new().cpus([cpu]), move || {
                for _ in 0..n / 2 {
                    let mut g = m.lock().unwrap();
                    *g += 1;
                    task::yield_now();
                }
            })
            .unwrap()
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    t0.elapsed().as_nanos() as f64 / n as f64
}

fn main() {
    default_sigpipe();
    let args = parse_args().unwrap_or_else(|e| usage_error(e, USAGE));
    let n = args.n;
    let builder = || match &args.features {
        Some(f) => Runtime::builder().features(f.clone()),
        None => Runtime::builder(),
    };
    let cpus: Vec<usize> = {
        let probe = builder().build().unwrap_or_else(|e| usage_error(e, USAGE));
        probe.worker_cpus().into_iter().take(2).collect()
    };
    let rt = builder()
        .worker_cpus(cpus.clone())
        .build()
        .unwrap_or_else(|e| usage_error(e, USAGE));
    let (a, b) = (cpus[0], cpus[cpus.len() - 1]);
    println!(
        "channel ping-pong, one worker: {:8.0} ns per round trip",
        channel(&rt, a, a, n)
    );
    println!(
        "channel ping-pong, two workers: {:7.0} ns per round trip",
        channel(&rt, a, b, n)
    );
    println!(
        "mutex hand-off, one worker:    {:8.0} ns per lock",
        handoff(&rt, a, a, n)
    );
    println!(
        "mutex hand-off, two workers:   {:8.0} ns per lock",
        handoff(&rt, a, b, n)
    );
}
