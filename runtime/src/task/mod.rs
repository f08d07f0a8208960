//! Tasks: spawning them, joining them, and the calls a task makes.
//!
//! * [`spawn`] and [`Builder`] (name, nice level, slice, CPUs, the migration opt-in), and
//!   [`JoinHandle`] to join the task;
//! * [`park`], [`park_timeout`], [`Unparker`], [`current_unparker`]: blocking until woken;
//! * [`current`], [`cpu_time`], [`sched_info`], [`yield_now`], [`cond_resched`], [`sleep`],
//!   [`sleep_until`]: the calling task's identity, time and scheduling calls;
//! * [`task_local!`](crate::task_local), [`LocalKey`]: storage that follows the task;
//! * [`scope`], [`join`]: tasks that borrow from their caller's stack;
//! * [`spawn_blocking`], and [`blocking`], its form whose closure may borrow from the waiting
//!   task, and the process's pool of plain threads they run closures on
//!   ([`configure_blocking_pool`], [`blocking_pool_stats`]);
//! * with the `interpose` feature, `std::thread::sleep` (and the C library's sleeps) in a
//!   task of a runtime that opted in sleeps the task, not its worker
//!   (`runtime::Builder::interpose_sleep`).
//!
//! A joined task's allocation is kept for its worker's next spawn; a shutdown cancels a
//! blocked task by unwinding it from its blocking call ([`crate::runtime`] says when).
//!
//! ## Panics
//!
//! A task that panics is reported as std reports a thread, with the task in the thread's
//! place: `task 'parse' (id 7) panicked at src/main.rs:12:9:` and the message on the next line
//! (`task-<id>` for an unnamed task), at the location of the user's code; `RUST_BACKTRACE`
//! asks for a backtrace as it does under std. The panic then unwinds the task and reaches its
//! joiner ([`JoinHandle::join`] returns it as a [`JoinError`](crate::JoinError)). This is the
//! work of a panic hook that the process's first runtime installs (with `std`) over std's
//! default one. A hook installed before the first runtime keeps receiving every panic, a
//! task's included, unchanged (call [`current`] in it to name the task); one installed after
//! replaces lagom's, as it would std's, and if it chains to the hook it replaced (the usual
//! pattern) the task's report comes through it. Setting a hook on another thread at the very
//! moment the first runtime is built can lose it: std has no atomic way to wrap a hook.

mod blocking;
mod builder;
mod cancel;
mod current;
#[cfg(feature = "interpose")]
pub(crate) mod interpose;
mod join;
mod local;
#[cfg(feature = "std")]
mod panic;
mod park;
mod pool;
mod recycle;
mod scope;

#[cfg(loom)]
pub(crate) use blocking::run_job;
pub use blocking::{
    BlockingHandle, blocking, blocking_pool_stats, configure_blocking_pool, spawn_blocking,
};
pub(crate) use builder::spawn_inner;
pub use builder::{Builder, spawn};
#[cfg(loom)]
pub(crate) use current::tick;
pub(crate) use current::try_point;
pub use current::{
    CurrentTask, SchedInfo, cond_resched, cpu_time, current, sched_info, sleep, sleep_until,
    yield_now,
};
pub use join::JoinHandle;
pub use local::{AccessError, LocalKey};
#[cfg(feature = "std")]
pub(crate) use panic::install_hook as install_panic_hook;
pub(crate) use park::park_until;
pub use park::{Unparker, current_unparker, park, park_timeout};
#[cfg(loom)]
pub(crate) use park::{arm_timer, park_loop};
pub use pool::{
    BlockingPoolStats, DEFAULT_BLOCKING_KEEP_ALIVE, DEFAULT_MAX_BLOCKING_THREADS,
    MAX_BLOCKING_THREADS,
};
pub(crate) use scope::scope_in;
pub use scope::{Scope, ScopedJoinHandle, join, scope};
