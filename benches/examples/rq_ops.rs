//! Runs exactly the `rq` bench's loop (pick + requeue of the picked entity) a fixed number of
//! times, for instruction and cache-miss counts under `valgrind --tool=cachegrind`, which are
//! repeatable where timings are not.
//!
//! ```text
//! cargo build --profile bench -p lagom-benches --example rq_ops
//! valgrind --tool=cachegrind --cache-sim=yes target/release/examples/rq_ops 100000 200000
//! ```
//!
//! Arguments: queued entities (default 100 000), measured iterations (default 200 000). Before
//! measuring it runs `4·n` warm-up iterations so the runqueue is in its steady state; run it
//! once with 0 iterations and subtract to get the per-iteration figures of the loop alone.
//! Without valgrind it prints the time per iteration, by wall clock and (on Linux) by time on
//! a CPU, which a loaded machine disturbs less.

use std::hint::black_box;

use lagom::policy::Pick;
use lagom_benches::runqueue_with;

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args
        .next()
        .map_or(100_000, |a| a.parse().expect("entity count"));
    let iters: u64 = args
        .next()
        .map_or(200_000, |a| a.parse().expect("iteration count"));
    let mut rq = runqueue_with(n, 3_000_000, 0x5eed);
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
}

/// Time this process has spent running on a CPU, in ns (Linux `/proc/self/schedstat`): on a
/// loaded machine it leaves out the time spent waiting for a CPU, which wall clock counts.
fn on_cpu_ns() -> Option<u128> {
    let s = std::fs::read_to_string("/proc/self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}
