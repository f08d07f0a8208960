//! Helpers of the `lagom::sync` tests: a two-worker runtime, pinned spawns, a watchdog.
#![allow(dead_code)]

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use lagom::Runtime;
use lagom::task::{Builder, JoinHandle};

#[path = "../runtime_util/mod.rs"]
mod runtime_util;

pub use runtime_util::Watchdog;

/// A runtime on two workers, and their CPUs.
pub fn rt2() -> (Runtime, Vec<usize>) {
    let cpus = runtime_util::two_cpus();
    let rt = Runtime::builder()
        .worker_cpus(cpus.clone())
        .build()
        .expect("a runtime on two workers");
    (rt, cpus)
}

/// Spawns `f` on the worker of OS CPU `cpu`.
pub fn on<T: Send + 'static>(
    rt: &Runtime,
    cpu: usize,
    f: impl FnOnce() -> T + Send + 'static,
) -> JoinHandle<T> {
    rt.spawn_with(Builder::new().cpus([cpu]), f)
        .expect("a pinned spawn")
}

/// A progress counter and the watchdog that fails the process (exit 99) if it stalls for
/// 10 s: a lost wakeup fails the test instead of hanging it.
pub fn watchdog(what: &'static str) -> (Arc<AtomicU64>, Watchdog) {
    let p = Arc::new(AtomicU64::new(0));
    let w = Watchdog::new(what, Arc::clone(&p), Duration::from_secs(10));
    (p, w)
}
