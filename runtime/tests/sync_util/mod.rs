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

/// Where an adapted std test runs (`std_test!`): its body and the helpers it spawns (std's
/// `thread::spawn`, here [`spawn`]) as plain OS threads, or as tasks of a runtime with one
/// worker (where a task that blocked its worker would stop every other task) or two.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Threads,
    Tasks1,
    Tasks2,
}

/// Runs `body` in `mode` (above), under a watchdog that turns a hang into a failure. A panic
/// of the body reaches the caller with its own payload, in a task as on a thread, so
/// `#[should_panic(expected = ..)]` reads the body's message.
pub fn run_in(mode: Mode, what: &'static str, body: impl FnOnce() + Send + 'static) {
    let (progress, _wd) = watchdog(what);
    let cpus = runtime_util::two_cpus();
    let workers = match mode {
        Mode::Threads => {
            body();
            progress.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            return;
        }
        Mode::Tasks1 => vec![cpus[0]],
        Mode::Tasks2 => cpus,
    };
    let rt = Runtime::builder()
        .worker_cpus(workers)
        .build()
        .expect("a runtime for an adapted std test");
    let r = rt.spawn(body).join();
    progress.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    if let Err(e) = r {
        std::panic::resume_unwind(e.into_panic());
    }
}

/// An adapted std test, run three times: `threads`, `tasks_1_worker`, `tasks_2_workers`
/// (a module of three `#[test]`s named after the std test). The body is expanded once per
/// mode, so each run has its own `static`s, as each of std's tests has.
#[macro_export]
macro_rules! std_test {
    ($(#[$attr:meta])* fn $name:ident() $body:block) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            $(#[$attr])*
            #[test]
            fn threads() {
                $crate::sync_util::run_in($crate::sync_util::Mode::Threads, stringify!($name), || $body);
            }

            $(#[$attr])*
            #[test]
            fn tasks_1_worker() {
                $crate::sync_util::run_in($crate::sync_util::Mode::Tasks1, stringify!($name), || $body);
            }

            $(#[$attr])*
            #[test]
            fn tasks_2_workers() {
                $crate::sync_util::run_in($crate::sync_util::Mode::Tasks2, stringify!($name), || $body);
            }
        }
    };
}

/// A helper of an adapted std test: a task of the caller's runtime inside a task, an OS
/// thread outside (std's `thread::spawn`).
pub enum Spawned<T> {
    Task(JoinHandle<T>),
    Thread(std::thread::JoinHandle<T>),
}

/// std's `thread::spawn` for the adapted tests (see [`Spawned`]).
pub fn spawn<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Spawned<T> {
    if lagom::task::current().is_some() {
        Spawned::Task(lagom::task::spawn(f))
    } else {
        Spawned::Thread(std::thread::spawn(f))
    }
}

impl<T> Spawned<T> {
    /// std's `JoinHandle::join`: `Err` with the panic's payload if the helper panicked.
    pub fn join(self) -> std::thread::Result<T> {
        match self {
            Spawned::Task(h) => h.join().map_err(|e| e.into_panic()),
            Spawned::Thread(h) => h.join(),
        }
    }
}

/// std's `thread::yield_now` for the adapted tests: the task yields its worker (a task's
/// `std::thread::yield_now` would yield the worker thread, and the task keeps its turn).
pub fn yield_now() {
    if lagom::task::current().is_some() {
        lagom::task::yield_now();
    } else {
        std::thread::yield_now();
    }
}
