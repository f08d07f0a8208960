//! Runs exactly the `rq` bench's loop (pick + requeue of the picked entity) a fixed number of
//! times, for instruction and cache-miss counts under `valgrind --tool=cachegrind`, which are
//! repeatable where timings are not.
//!
//! ```text
//! cargo build --profile bench -p lagom-benches --example rq_ops
//! valgrind --tool=cachegrind --cache-sim=yes target/release/examples/rq_ops 100000 200000
//! ```
//!
//! Arguments: queued entities (default 100 000), measured iterations (default 200 000),
//! and `--features SPEC` for the runqueue's scheduler features (on top of the defaults).
//! Before measuring it runs `4·n` warm-up iterations so the runqueue is in its steady state;
//! run it once with 0 iterations and subtract to get the per-iteration figures of the loop
//! alone. Without valgrind it prints the time per iteration, by wall clock and (on Linux) by
//! time on a CPU, which a loaded machine disturbs less.

use std::hint::black_box;
use std::process::ExitCode;

use lagom_benches::runqueue_with_features;
use lagom_policy::{Features, Pick};

const USAGE: &str = "usage: rq_ops [N] [ITERS] [--features SPEC]

Runs the rq bench's loop (pick the next entity of a runqueue of N, default 100000, and
requeue it) ITERS times (default 200000) after 4·N warm-up iterations; prints ns per
iteration. Meant for cachegrind, whose counts are repeatable where timings are not.
  --features SPEC  the runqueue's scheduler features on top of the defaults, e.g.
                   NO_RUN_TO_PARITY (default: the defaults)";

struct Args {
    n: usize,
    iters: u64,
    features: Features,
}

fn parse_args() -> Result<Args, lexopt::Error> {
    use lexopt::prelude::*;
    let mut a = Args {
        n: 100_000,
        iters: 200_000,
        features: Features::default(),
    };
    let mut values = 0;
    let mut p = lexopt::Parser::from_env();
    while let Some(arg) = p.next()? {
        match arg {
            Long("features") => {
                let spec = lagom_benches::features_arg(p.value()?.parse()?)?;
                a.features = Features::parse(&spec).expect("checked spec");
            }
            Short('h') | Long("help") => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            Value(v) if values == 0 => {
                a.n = v.parse()?;
                values += 1;
            }
            Value(v) if values == 1 => {
                a.iters = v.parse()?;
                values += 1;
            }
            _ => return Err(arg.unexpected()),
        }
    }
    if a.n == 0 {
        return Err("N must be at least 1 (the loop picks from the runqueue)".into());
    }
    Ok(a)
}

fn main() -> ExitCode {
    lagom_benches::default_sigpipe();
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("rq_ops: {e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let (n, iters) = (args.n, args.iters);
    let mut rq = runqueue_with_features(n, 3_000_000, 0x5eed, args.features);
    let step = rq.config().base_slice;
    let mut now = 0u64;
    let mut run = |count: u64| {
        for _ in 0..count {
            now += step;
            match rq.pick_next(black_box(now)) {
                Pick::Run(h) => {
                    black_box(h);
                }
                _ => unreachable!("CPU-bound entities are never delayed"),
            }
        }
    };
    run(4 * n as u64);
    let t = std::time::Instant::now();
    let cpu = on_cpu_ns();
    run(iters);
    let cpu = on_cpu_ns().zip(cpu).map(|(b, a)| b - a);
    let el = t.elapsed();
    let per = |ns: u128| ns as f64 / iters.max(1) as f64;
    print!(
        "n={n} iterations={iters} {:.1} ns/iteration (wall clock, noisy)",
        per(el.as_nanos())
    );
    match cpu {
        Some(c) => println!(", {:.1} ns/iteration on CPU", per(c)),
        None => println!(),
    }
    ExitCode::SUCCESS
}

/// Time this process has spent running on a CPU, in ns (Linux `/proc/self/schedstat`): on a
/// loaded machine it leaves out the time spent waiting for a CPU, which wall clock counts.
fn on_cpu_ns() -> Option<u128> {
    let s = std::fs::read_to_string("/proc/self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}
