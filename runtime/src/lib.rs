//! # lagom
//!
//! Green threads ("tasks") on pinned worker OS threads, scheduled by the Linux kernel's EEVDF
//! fair scheduler and wakeup path rebuilt in userspace. A task is a closure that simply
//! blocks — on a lock, a channel, a sleep, a join — and blocking suspends the task, not its
//! worker: no `async`, no colouring. Tasks get fair CPU shares by nice level, latency slices
//! and the kernel's wakeup placement, on as many workers as the machine has CPUs.
//!
//! ```
//! let rt = lagom::Runtime::builder().build()?;
//! let sum = rt.block_on(|| {
//!     let (tx, rx) = lagom::sync::mpsc::channel();
//!     for i in 0..4u64 {
//!         let tx = tx.clone();
//!         lagom::task::spawn(move || tx.send(i * i).unwrap());
//!     }
//!     drop(tx);
//!     rx.iter().sum::<u64>()
//! });
//! assert_eq!(sum, 14);
//! # Ok::<(), lagom::Error>(())
//! ```
//!
//! ## What is here
//!
//! * [`Runtime`] and the [`runtime`] module: the builder ([`runtime::Builder`]: workers,
//!   features, slices, stacks, tracing, the [`TaskClock`](runtime::TaskClock) that charges run
//!   time), `block_on`, `spawn` and `scope` from any thread, a shutdown that unwinds what it
//!   cancels, and statistics ([`Stats`](runtime::Stats), [`WorkerStats`](runtime::WorkerStats),
//!   [`ShutdownStats`](runtime::ShutdownStats)).
//! * [`task`]: spawn and join, park and unpark, sleep, yield, `cond_resched`,
//!   `spawn_blocking`, timed parks and joins, `task_local!`.
//! * [`sync`]: the blocking primitives with std's names — `Mutex`, `RwLock`, `Condvar`,
//!   `Barrier`, `Once`, `OnceLock`, `LazyLock`, `Semaphore`, `mpsc` and `oneshot` channels —
//!   which block the task, not its worker (std's would block the worker thread and every
//!   task on it).
//! * [`scope`] and [`join`]: tasks that borrow from their caller's stack, as
//!   `std::thread::scope` and rayon's `join`.
//! * [`TaskGraph`] ([`graph`]): a DAG of blocking closures, each node a task that receives
//!   its predecessors' outputs.
//! * [`time::Instant`], the monotonic clock's deadline type (`no_std` has no
//!   `std::time::Instant`).
//! * [`trace`]: switch / wakeup / migrate events per worker, when asked for, exported as
//!   Chrome/Perfetto trace JSON.
//! * Errors: [`Error`] (configuring and starting; every message says what to do),
//!   [`JoinError`] (a task panicked or was cancelled), [`GraphError`], [`RunError`] (a
//!   graph's failed run, with the outputs of the nodes that finished); and [`FpControl`], how
//!   context switches treat the floating-point control state.
//!
//! ## The lab
//!
//! The scheduler itself is in crates of its own, for scheduler engineers: `lagom-policy` (the
//! pure EEVDF policy, every decision a function), `lagom-topology` (the machine from sysfs,
//! and the CPU layout), `lagom-trace` (the trace types and their export) and `lagom-sim` (a
//! deterministic simulator driving the same policy on virtual CPUs). A few options of
//! [`runtime::Builder`] take their types (`topology`, `features`, `cpu_priorities`,
//! `sched_migration_cost_ns`): lab options, documented as such.
//!
//! ## `no_std`
//!
//! The crate is `#![no_std]` + `alloc`; the `std` feature (on by default) adds conveniences
//! only: panics caught at the task boundary and resumed at `join`, `std::io` for traces.
//! All OS access goes through `libc`.
//!
//! ## Soundness
//!
//! A stackful task that resumes on another OS thread breaks what safe Rust may assume: a
//! reference into a `thread_local!` held across a blocking call would point into the other
//! thread's storage, an `Rc` to thread-local state (as `rand::thread_rng()` hands out) would
//! be shared by two threads, and the compiler, which assumes a function runs on one thread,
//! may keep a thread-local's address from before a call that switched threads and use it
//! after. `Send` on the spawned closure cannot rule any of this out: such values are created
//! inside the task. So lagom has two modes.
//!
//! * **Default: sound for any safe code.** A task that has started running always resumes
//!   on the worker thread it last ran on, across every blocking call (`park`, `sleep`,
//!   `join`, `yield_now`, `cond_resched`, and a spawn, which is a preemption point).
//!   Thread-locals, thread-affine values and thread identity behave as on a plain thread.
//!   Placement stays free where it is sound: a new task is placed by CPU selection
//!   (`select_task_rq`), and the balancers move tasks that are queued but have never run.
//!   That is where a task graph gets its parallelism: spawn the work and it spreads before
//!   it starts. What it costs: once running, a task stays put, so a worker whose started
//!   tasks outnumber another's keeps them (the balancers cannot fix an imbalance among
//!   started tasks; affinity, or spawning more, finer tasks can), and wakeups of a started
//!   task never go to an idler worker.
//! * **Opt-in: kernel-faithful.** [`runtime::Builder::allow_migration`] (every task of a runtime)
//!   and [`task::Builder::allow_migration`] (one task) are `unsafe`: they let wakeup
//!   placement (`select_task_rq` for a woken task, TTWU_DEQUEUE's, DELAYED_WAKE_IDLE's and
//!   TTWU_QUEUE_DELAYED's reselection, ITMT active balance) and the newly idle and periodic
//!   balancers move started tasks as the kernel
//!   moves threads, which is what the scheduler lab measures and what weighted fairness
//!   across workers needs. Their `# Safety` sections state the promise: no thread-local
//!   reference or thread-affine value held across a blocking call, no thread-local access in
//!   a function that also blocks where the two could be inlined together, no reliance on the
//!   thread's identity, no blocking in a destructor that a panic runs.
//!
//! Every path that picks a CPU for a started task honours the task's mode (wakeup
//! placement, the delayed wakee's reselection, active balance, the newly idle and periodic
//! balancers), a loom model over the real code races them under the default, and the switch
//! into a task, where every resume begins, aborts the process rather than resume a task that
//! may not migrate anywhere else, should a path ever break the contract.
//!
//! Other stackful runtimes leave this to the user. `may` marks `coroutine::spawn` `unsafe`
//! ("access TLS in coroutine may trigger undefined behavior"), offers a `go!` macro that
//! hides the `unsafe`, and moves every coroutine between its worker threads; `generator`
//! (generator-rs) makes a generator `Send` when its closure is, so it may be resumed on any
//! thread, with what it holds across a yield the caller's concern. lagom's default removes
//! the hazard instead, and its opt-in names it.
#![no_std]
#![deny(missing_docs)]

extern crate alloc;
#[cfg(any(feature = "std", test))]
extern crate std;

#[doc(hidden)]
pub mod arch;
mod error;
pub mod graph;
mod join_error;
#[cfg(not(loom))]
mod locking;
#[cfg(loom)]
#[doc(hidden)]
pub mod locking;
#[cfg(loom)]
#[doc(hidden)]
pub mod model;
pub mod runtime;
mod sched;
pub mod sync;
mod sys;
pub mod task;
mod tcb;
pub mod time;
pub mod trace;
mod wake;
mod worker;

pub use arch::FpControl;
pub use error::Error;
pub use graph::{GraphError, RunError, TaskGraph};
pub use join_error::JoinError;
pub use runtime::Runtime;
pub use task::{Scope, ScopedJoinHandle, join, scope};
/// Tests that need a runtime and a primitive's private state at once: the root is in no layer
/// (`ARCHITECTURE.md`), so it may name both. (Full paths, no `use`: `tests/layers.rs` reads
/// the root's `use`s as its re-exports.)
#[cfg(all(test, feature = "std", not(loom)))]
mod tests {
    /// A `Barrier` waiter that a shutdown cancels unwinds out of the barrier's condvar wait
    /// without the barrier's lock, and leaves that lock to whoever holds it now (here this OS
    /// thread). Before the fix its guard's drop released the lock under this thread.
    #[test]
    fn a_cancelled_barrier_waiter_never_unlocks_the_barriers_lock() {
        let rt = crate::Runtime::builder().build().unwrap();
        let b = alloc::sync::Arc::new(crate::sync::Barrier::new(2));
        let b2 = alloc::sync::Arc::clone(&b);
        let h = rt.spawn(move || {
            b2.wait();
        });
        // The task counted itself under the lock, which it gives up only once it is queued
        // on the condvar: holding it with the count at 1 means the task waits.
        let t0 = std::time::Instant::now();
        let held = loop {
            let g = b.lock_for_test().lock().unwrap();
            if g.0 == 1 {
                break g;
            }
            drop(g);
            assert!(
                t0.elapsed() < core::time::Duration::from_secs(10),
                "the task never waited"
            );
            std::thread::sleep(core::time::Duration::from_millis(1));
        };
        let stats = rt.shutdown_timeout(core::time::Duration::from_secs(2));
        assert!(h.join().unwrap_err().is_cancelled());
        assert_eq!(stats.shutdown.abandoned, 0);
        assert!(
            matches!(
                b.lock_for_test().try_lock(),
                Err(crate::sync::TryLockError::WouldBlock)
            ),
            "the cancelled waiter released the barrier's lock this thread holds"
        );
        drop(held);
        assert!(b.lock_for_test().try_lock().is_ok());
    }
}
