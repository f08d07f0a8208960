//! # lagom
//!
//! Green threads ("tasks") on pinned worker OS threads, scheduled by the Linux kernel's EEVDF
//! fair scheduler and wakeup path rebuilt in userspace.
//!
//! The crate is built in layers (see `DESIGN.md` in the repository); arrows point down only:
//!
//! * [`lagom_policy`] (its own crate) — the pure EEVDF runqueue and placement decisions: no atomics, no OS calls,
//!   no clock reads (time is an argument). The threaded runtime and the simulator both call it.
//! * [`lagom_topology`] (its own crate) — sysfs → [`lagom_topology::Topology`]: CPUs, caches, NUMA, sched-domain levels,
//!   preferred-core priorities and the allowed CPUs.
//! * [`arch`] — the green-thread mechanism: context switch (x86_64, aarch64) with unwind info,
//!   task stacks (batched mmap + guard page, per-worker pool), stack-overflow reports, the
//!   `Fiber`.
//! * `locking` — the runtime's own synchronization (internal, as the kernel's
//!   `kernel/locking/`): the loom shim (atomics, cells and a futex word that become loom's
//!   under `cfg(loom)`), the lock-free wakelist, the idle/kick protocol and the runqueue lock.
//!   The loom models reach it through the hidden `lagom::model` seam.
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
//! `cond_resched`, `spawn_blocking`, timed parks and joins, `task_local!`), [`sync`] (the
//! blocking primitives — `Mutex`, `RwLock`, `Condvar`, `Barrier`, `Semaphore`, `mpsc` and
//! `oneshot` channels — with std's names, which block the task, not its worker; std's would
//! block the worker thread and every task on it), [`scope`] and [`join`] (tasks that borrow
//! from their caller's stack, as `std::thread::scope` and rayon's `join`), [`Runtime`]
//! (builder, `block_on`, `scope` from any thread, a shutdown that unwinds what it cancels,
//! statistics) and [`TaskGraph`] ([`graph`]: a DAG of blocking closures, each node a task that
//! receives its predecessors' outputs). [`time::Instant`] is the monotonic clock's deadline
//! type (`no_std` has no `std::time::Instant`). [`trace`]
//! records switch / wakeup / migrate events per worker, when asked to, and exports them as
//! Chrome/Perfetto trace JSON.
//!
//! Beside the threaded driver, on the same policy, [`sim`] is the deterministic simulator: the
//! policy on virtual CPUs built from any topology, under a virtual clock, with tasks described
//! by behaviour scripts; it imports nothing of the threaded driver.
//!
//! The crate is `#![no_std]` + `alloc`; the `std` feature (on by default) adds conveniences
//! only. All OS access goes through `libc` in `sys/`.
//!
//! # Soundness
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
//! * **Opt-in: kernel-faithful.** [`Builder::allow_migration`] (every task of a runtime)
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
//! Every path that picks a CPU for a started task honours the task's mode (`wake/select.rs`
//! lists them), loom model 10 (`loom-tests/tests/contract.rs`) races them under the default,
//! and the switch into a task, where every resume begins, aborts the process rather than
//! resume a task that may not migrate anywhere else, should a path ever break the contract.
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
mod runtime;
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
pub use graph::{GraphError, TaskGraph};
pub use join_error::JoinError;
pub use runtime::{
    Builder, DEFAULT_IDLE_SPIN, DEFAULT_SHUTDOWN_TIMEOUT, DEFAULT_TIMER_SPIN, MAX_IDLE_SPIN,
    Runtime,
};
pub use task::{Scope, ScopedJoinHandle, join, scope};
pub use worker::{RESYNC, STALL_GAP, ShutdownStats, Stats, TaskClock, WorkerPlace, WorkerStats};
