//! # lagom
//!
//! Green threads ("tasks") on pinned worker OS threads, scheduled by the Linux kernel's EEVDF
//! fair scheduler and wakeup path rebuilt in userspace.
//!
//! The crate is built in layers (see `DESIGN.md` in the repository); arrows point down only:
//!
//! * [`policy`] — the pure EEVDF runqueue and placement decisions: no atomics, no OS calls,
//!   no clock reads (time is an argument). The threaded runtime and the simulator both call it.
//! * [`topology`] — sysfs → [`topology::Topology`]: CPUs, caches, NUMA, sched-domain levels,
//!   preferred-core priorities and the allowed CPUs.
//! * [`arch`] — the green-thread mechanism: context switch (x86_64, aarch64) with unwind info,
//!   task stacks (mmap + guard page, per-worker pool), stack-overflow reports, the `Fiber`.
//! * [`sync`] — the loom shim (atomics, cells and a futex word that become loom's under
//!   `cfg(loom)`), the lock-free wakelist, the idle/kick protocol and the runqueue lock.
//! * `sys` — the only caller of `libc`.
//!
//! The threaded driver sits on top, in four layers of its own, each a folder that imports only
//! those below it (`ARCHITECTURE.md` in the repository, checked by `tests/layers.rs`):
//!
//! * `tcb` — the task control block (`task_struct`) and the data hanging off it: the
//!   registry of live tasks, the runqueue payload, the join packet, the park token;
//! * `worker` — the per-CPU state (`struct rq`): runqueue lock, wakelist, kick word,
//!   counters, the worker thread's own part and the slot that finds it, timers' data;
//! * `wake` — the wakeup protocol: `try_to_wake_up`, `ttwu_runnable`, `select_task_rq`,
//!   the wakelist queue and drain, `activate` and the preemption check;
//! * `sched` — the scheduling loop: `schedule()`, `finish_task_switch()`, exit, the idle
//!   loop, load balancing, timer expiry;
//!
//! and the user-facing API above them: [`task`] (spawn, join, park/unpark, sleep, yield,
//! `cond_resched`) and [`Runtime`] (builder, `block_on`, shutdown, statistics). [`trace`]
//! records switch / wakeup / migrate events per worker, when asked to, and exports them as
//! Chrome/Perfetto trace JSON.
//!
//! Beside the threaded driver, on the same policy, [`sim`] is the deterministic simulator: the
//! policy on virtual CPUs built from any topology, under a virtual clock, with tasks described
//! by behaviour scripts; it imports nothing of the threaded driver.
//!
//! The crate is `#![no_std]` + `alloc`; the `std` feature (on by default) adds conveniences
//! only. All OS access goes through `libc` in `sys/`.
#![no_std]
#![deny(missing_docs)]

extern crate alloc;
#[cfg(any(feature = "std", test))]
extern crate std;

pub mod arch;
mod error;
mod join_error;
#[cfg(loom)]
#[doc(hidden)]
pub mod model;
pub mod policy;
mod runtime;
mod sched;
pub mod sim;
pub mod sync;
mod sys;
pub mod task;
mod tcb;
pub mod topology;
pub mod trace;
mod wake;
mod worker;

pub use arch::FpControl;
pub use error::Error;
pub use join_error::JoinError;
pub use runtime::{Builder, DEFAULT_IDLE_SPIN, MAX_IDLE_SPIN, Runtime};
pub use worker::{Stats, WorkerStats};
