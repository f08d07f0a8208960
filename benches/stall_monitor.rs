//! What the stall monitor costs a runtime that never stalls, monitor on against
//! `Builder::stall_monitor(false)` in one run, each on one worker:
//!
//! * `*/cond_resched_idle` — `cond_resched` with nothing due: the workers' side of the monitor
//!   is one store at each full tick, every 50 µs, so nothing per call;
//! * `*/park_unpark_rt` — the same-worker park/unpark round trip (two `schedule()` calls): the
//!   store of `last_point` in each;
//! * `*/yield_pair` — a yield to one other runnable task, and back.
//!
//! The build without the store at all is main; its instruction counts beside this branch's
//! are taken with callgrind on `benches/examples/monitor_cost.rs` (the docs' lab page
//! "Blocking code in tasks" has both, with the commands).
#![allow(missing_docs)]

use std::hint::black_box;

use criterion::Criterion;
use lagom::Runtime;
use lagom_benches::workloads;

/// A one-worker runtime on the first allowed CPU, with or without the stall monitor.
fn rt(monitor: bool) -> Runtime {
    let cpu = Runtime::builder()
        .stall_monitor(false)
        .build()
        .expect("runtime")
        .worker_cpus()[0];
    Runtime::builder()
        .worker_cpus([cpu])
        .stall_monitor(monitor)
        .build()
        .expect("one-worker runtime")
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    // Both runtimes live for the whole run; while one is measured the other's worker is idle
    // and its monitor, if any, asleep.
    let on = rt(true);
    let off = rt(false);
    for (name, r) in [("monitor_on", &on), ("monitor_off", &off)] {
        let mut g = c.benchmark_group(name);
        g.bench_function("cond_resched_idle", |b| {
            b.iter_custom(|n| black_box(workloads::cond_resched(r, n)))
        });
        g.bench_function("park_unpark_rt", |b| {
            b.iter_custom(|n| black_box(workloads::park_unpark(r, n)))
        });
        g.bench_function("yield_pair", |b| {
            b.iter_custom(|n| black_box(workloads::yield_pair(r, n)))
        });
        g.finish();
    }
    c.final_summary();
}
