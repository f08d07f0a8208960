//! Tasks: spawning them, joining them, and the calls a task makes — the user-facing API of
//! the threaded runtime, on top of the driver's layers (`ARCHITECTURE.md`).
//!
//! * `builder.rs` — [`Builder`], [`spawn`]: the task control block built and enqueued;
//! * `join.rs` — [`JoinHandle`], the joiner's side of the join packet;
//! * `park.rs` — [`park`], [`park_timeout`], [`Unparker`], [`current_unparker`], and the one
//!   function that arms a worker's timer for them (`arm_timer`);
//! * `current.rs` — [`current`], [`cpu_time`], [`yield_now`], [`cond_resched`], [`sleep`],
//!   [`sleep_until`];
//! * `local.rs` — [`task_local!`](crate::task_local), [`LocalKey`]: storage that follows the task;
//! * `recycle.rs` — a joined task's allocation kept for its worker's next spawn;
//! * `cancel.rs` — the cancellation points where a shutdown unwinds a task;
//! * `scope.rs` — [`scope`], [`join`]: tasks that borrow from their caller's stack;
//! * `blocking.rs`, `pool.rs` — [`spawn_blocking`] and the process's pool of plain threads
//!   it runs closures on.

mod blocking;
mod builder;
mod cancel;
mod current;
mod join;
mod local;
mod park;
mod pool;
mod recycle;
mod scope;

#[cfg(loom)]
pub(crate) use blocking::run_job;
pub use blocking::{BlockingHandle, blocking_pool_stats, configure_blocking_pool, spawn_blocking};
pub(crate) use builder::spawn_inner;
pub use builder::{Builder, spawn};
pub use current::{
    CurrentTask, SchedInfo, cond_resched, cpu_time, current, sched_info, sleep, sleep_until,
    yield_now,
};
pub use join::JoinHandle;
pub use local::{AccessError, LocalKey};
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
