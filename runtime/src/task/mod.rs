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
//!   ([`configure_blocking_pool`], [`blocking_pool_stats`]).
//!
//! A joined task's allocation is kept for its worker's next spawn; a shutdown cancels a
//! blocked task by unwinding it from its blocking call ([`crate::runtime`] says when).

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
pub use blocking::{
    BlockingHandle, blocking, blocking_pool_stats, configure_blocking_pool, spawn_blocking,
};
pub(crate) use builder::spawn_inner;
pub use builder::{Builder, spawn};
pub(crate) use current::try_point;
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
