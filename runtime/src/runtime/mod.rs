//! The runtime: [`Runtime`] (its workers, `block_on`, `spawn` and `scope` from any thread,
//! statistics, trace, shutdown), its [`Builder`] and defaults, and the statistics it reports
//! ([`Stats`], [`WorkerStats`], [`ShutdownStats`], [`WorkerPlace`]), as `tokio::runtime`
//! holds tokio's. [`Runtime`] is also at the crate's root.
//!
//! ## Stalls
//!
//! A task gives its worker up only at a scheduling call: a blocking call of lagom, a yield, a
//! spawn, its end, or [`cond_resched`](crate::task::cond_resched). Code that blocks in the
//! OS instead (a `std::sync` lock or channel, `std::thread::sleep`, file I/O) or computes
//! without `cond_resched` holds its worker, and every task queued there waits. The runtime's
//! stall monitor ([`Builder::stall_monitor`], [`Builder::stall_threshold`],
//! [`Builder::on_stall`]) reports each such episode once, with what to use instead
//! ([`StallReport`]), counts it ([`WorkerStats`]'s `stalls`) and traces it; meanwhile it gets
//! an idle worker to take the queued tasks that may move.
//!
//! ```
//! use lagom::runtime::{Builder, TaskClock};
//! let rt = Builder::default().task_clock(TaskClock::OnCpu).build()?;
//! assert_eq!(rt.block_on(|| lagom::task::spawn(|| 6 * 7).join().unwrap()), 42);
//! let stats = rt.shutdown();
//! assert_eq!(stats.live_tasks, 0);
//! # Ok::<(), lagom::Error>(())
//! ```
//!
//! ## Shutdown
//!
//! Invariant: *a shutdown returns within its timeout, and every task it finds either ends —
//! its value delivered, or unwound by a cancellation so that its destructors ran — or is
//! reported as abandoned.*
//!
//! [`Runtime::shutdown_timeout`]`(d)` (and [`Runtime::shutdown`], [`Runtime::shutdown_with_trace`]
//! and `Drop`, with [`DEFAULT_SHUTDOWN_TIMEOUT`]) walks the runtime through four phases
//! (`Shared::phase`, stored with Release and followed by a kick of every worker; at FORCE and
//! EXIT also need-resched on every worker, so that a running task's next `cond_resched`
//! switches and meets its cancellation point):
//!
//! 1. **DRAIN**, from the start: tasks that are runnable run on (lagom never preempts); a task
//!    that is blocked once the runtime has nothing runnable is **cancelled**: an idle worker's
//!    sweep marks it and wakes it, and it resumes inside its blocking
//!    call (`park`, and so `sleep` and `join`), which does not return but unwinds:
//!    destructors run, guards are released, and its `join` returns a
//!    [`JoinError`](crate::JoinError) whose `is_cancelled()` is true. Tasks that block later
//!    are swept later (idle workers come round every millisecond during a shutdown).
//! 2. **FORCE**, at `d / 2`: every task still alive is cancelled at its next call into lagom
//!    (`cond_resched`, `yield_now`, a blocking call), whatever runs elsewhere.
//! 3. **EXIT**, at `3d / 4`: a task still alive — one that caught the cancellation and went
//!    on, or one whose destructor blocks for good while it unwinds — is **abandoned** at its
//!    next call into lagom: it blocks for good. Workers leave their loops once they have
//!    nothing runnable (a worker whose abandoned task was unwinding leaves at once: its
//!    thread runs no task again, `sched/unwind.rs`).
//! 4. At `d` the shutting-down thread stops waiting: it joins every worker thread that has
//!    stopped, then frees every task that has not ended (abandoned, or stranded on a queue):
//!    never resumed, its stack unmapped without running the destructors of what is on it
//!    (they leak, as a `mem::forget` would), its join completed as cancelled. A worker
//!    thread that has not stopped by then is running a task that never calls into lagom:
//!    nothing can stop it, so its thread is detached and left running, and the runtime's
//!    memory (which it uses) is not freed. A closure of `task::blocking` still running on the
//!    pool may borrow from its task's stack: then no stack is unmapped (they leak). All are
//!    reported: [`Stats::shutdown`] and a line on stderr.
//!
//! Three waits are no cancellation points and end only when what they wait for has ended: a
//! scope's owner's, `join`'s caller's, `task::blocking`'s caller's (`task/cancel.rs`). A
//! task that unwinds already is never cancelled again, and keeps its worker's thread while
//! it unwinds (`sched/unwind.rs`).
//!
//! The stall monitor ([`Builder::stall_monitor`]) keeps watching through the shutdown (a
//! worker stuck there is what it is for) and ends after the workers, within the same timeout.
//!
//! The shutdown returns as soon as no task is left, so with nothing running it is quick.
//! Without the `std` feature nothing can unwind a task: there is no sweep and no FORCE
//! cancellation, and the shutdown goes to EXIT as soon as the runtime has nothing runnable,
//! so blocked tasks are abandoned at once (as above: destructors not run, join cancelled).

mod builder;
mod claim;
mod shutdown;

use alloc::sync::Arc;
use alloc::vec::Vec;

pub use crate::arch::{DEFAULT_STACK_SIZE, MIN_STACK_SIZE};
pub use crate::sched::monitor::{OnStall, StallReport};
pub use crate::trace::{FutexOp, StallCause, Syscall};
pub use crate::worker::{ShutdownStats, Stats, TaskClock, WorkerPlace, WorkerStats};
pub use builder::{
    Builder, DEFAULT_IDLE_SPIN, DEFAULT_SHUTDOWN_TIMEOUT, DEFAULT_STALL_THRESHOLD,
    DEFAULT_TIMER_SPIN, MAX_IDLE_SPIN, MIN_STALL_THRESHOLD,
};

use crate::Error;
use crate::sys::thread::Thread;
use crate::task::{Builder as TaskBuilder, JoinHandle, scope_in, spawn_inner};
use crate::trace::Trace;
use crate::worker::Shared;

/// A running lagom runtime: one pinned worker thread per CPU.
///
/// ```
/// let rt = lagom::Runtime::builder().build()?;
/// let v = rt.block_on(|| {
///     let h = lagom::task::spawn(|| 6 * 7);
///     h.join().unwrap()
/// });
/// assert_eq!(v, 42);
/// # Ok::<(), lagom::Error>(())
/// ```
pub struct Runtime {
    shared: Arc<Shared>,
    threads: Vec<Thread>,
    /// The stall monitor's thread, if it runs (`Builder::stall_monitor`).
    monitor: Option<MonitorThread>,
    /// What the shutdown could not finish (zero until it ran).
    shutdown: ShutdownStats,
    /// The CPU quota the default worker count honoured (`Builder::worker_threads`).
    cpu_quota: Option<lagom_topology::CpuQuota>,
    /// The workers' CPUs in the process's register (`claim.rs`), given back when dropped,
    /// after the shutdown joined the workers.
    claim: claim::CpuClaim,
}

/// The stall monitor's thread (`sched/monitor.rs`) and the flag it sets when it ends.
struct MonitorThread {
    thread: Thread,
    exited: Arc<crate::locking::atomic::AtomicBool>,
}

impl core::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Runtime")
            .field("workers", &self.shared.workers.len())
            .finish()
    }
}

impl Runtime {
    /// A builder with the defaults.
    pub fn builder() -> Builder {
        Builder::default()
    }

    /// The OS CPUs of the workers, in worker order.
    pub fn worker_cpus(&self) -> Vec<usize> {
        self.shared.workers.iter().map(|w| w.os_cpu).collect()
    }

    /// The CPU quota of the process's cgroup as the build read it
    /// ([`Builder::worker_threads`] says how it bounds the default worker count), `None`
    /// where there is none.
    pub fn cpu_quota(&self) -> Option<&lagom_topology::CpuQuota> {
        self.cpu_quota.as_ref()
    }

    /// The workers' CPUs that another runtime of this process already had workers on when
    /// this one was built (empty when none: the module doc of [`Builder::share_cpus`]).
    pub fn shared_cpus(&self) -> &[usize] {
        self.claim.shared()
    }

    /// Runs `f` as a task and returns its value to the calling OS thread, which sleeps
    /// meanwhile. A panic of `f` is resumed here (with `std`; without it, panics abort).
    ///
    /// `f` is `'static`, as `std::thread::spawn`'s closure is: to run tasks that borrow from
    /// the caller's stack, use [`Runtime::scope`], which waits for every one of them.
    ///
    /// # Panics
    /// With `f`'s panic; or, naming the caller's location, if the task cannot be spawned (no
    /// stack can be mapped).
    #[track_caller]
    pub fn block_on<T, F>(&self, f: F) -> T
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        match self.spawn_with(TaskBuilder::new().name("block_on"), f) {
            Ok(h) => match h.join() {
                Ok(v) => v,
                #[cfg(feature = "std")]
                Err(e) => std::panic::resume_unwind(e.into_panic()),
                #[cfg(not(feature = "std"))]
                Err(e) => panic!("{e}"),
            },
            Err(e) => panic!("lagom::Runtime::block_on: {e}"),
        }
    }

    /// Spawns `f` from outside the runtime.
    ///
    /// # Panics
    /// If no stack can be mapped (the panic names the caller's location).
    #[track_caller]
    pub fn spawn<T, F>(&self, f: F) -> JoinHandle<T>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        match self.spawn_with(TaskBuilder::new(), f) {
            Ok(h) => h,
            Err(e) => panic!("lagom::Runtime::spawn: {e}"),
        }
    }

    /// Spawns `f` with options from outside the runtime.
    ///
    /// # Errors
    /// As [`crate::task::Builder::spawn`].
    pub fn spawn_with<T, F>(&self, b: TaskBuilder, f: F) -> Result<JoinHandle<T>, Error>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        spawn_inner(&self.shared, None, b, f)
    }

    /// [`crate::scope`] on this runtime, from any thread: tasks spawned with
    /// [`Scope::spawn`](crate::Scope::spawn) run on this runtime and may borrow from the
    /// caller's stack; every one has ended when `scope` returns. A plain thread sleeps on a
    /// futex while it waits; a task of this runtime blocks as a task. The scope holds `&self`,
    /// so the runtime cannot shut down under it.
    ///
    /// ```
    /// let rt = lagom::Runtime::builder().build()?;
    /// let mut parts = [0u64; 4];
    /// rt.scope(|s| {
    ///     for (i, p) in parts.iter_mut().enumerate() {
    ///         s.spawn(move || *p = (i as u64 + 1) * 10);
    ///     }
    /// });
    /// assert_eq!(parts, [10, 20, 30, 40]);
    /// # Ok::<(), lagom::Error>(())
    /// ```
    ///
    /// # Panics
    /// From a task of another runtime (that runtime's shutdown could free the calling task's
    /// stack while this runtime's tasks still use it: call it from a plain thread, or
    /// [`crate::scope`] on the task's own runtime), with the caller's location; and as
    /// [`crate::scope`] panics.
    #[track_caller]
    pub fn scope<'env, F, T>(&self, f: F) -> T
    where
        F: for<'scope> FnOnce(&'scope crate::Scope<'scope, 'env>) -> T,
    {
        if crate::worker::local().is_some_and(|wt| !Arc::ptr_eq(&wt.shared, &self.shared)) {
            panic!(
                "lagom::Runtime::scope called from a task of another runtime: a scope's tasks \
                 must run on the caller's own runtime (use lagom::scope there) or be owned by a \
                 plain thread"
            );
        }
        scope_in(Arc::clone(&self.shared), f)
    }

    /// A snapshot of every worker's counters and the live task and stack counts.
    pub fn stats(&self) -> Stats {
        let (mut live_tasks, mut live_stacks) = (0, 0);
        for w in &self.shared.workers {
            let (tasks, stacks) = w.tasks.counts();
            live_tasks += tasks;
            live_stacks += stacks;
        }
        Stats {
            workers: self
                .shared
                .workers
                .iter()
                .map(|w| w.stats.snapshot(w.os_cpu))
                .collect(),
            live_tasks,
            live_stacks,
            shutdown: self.shutdown,
            layout: WorkerPlace::all(&self.shared.cpus, &self.worker_cpus()),
            layout_fallback: self.shared.layout_fallback,
            host_hints: host_notes(&self.shared),
        }
    }

    /// A snapshot of the trace recorded so far (empty, with `enabled() == false`, when
    /// tracing is off). Each worker's events are a prefix of what it records; the snapshot
    /// is not atomic across workers.
    pub fn trace(&self) -> Trace {
        match &self.shared.trace {
            Some(r) => r.snapshot(self.shared.workers.iter().map(|w| w.os_cpu)),
            None => Trace::default(),
        }
    }
}

/// The host hints' notes recorded so far, as text (`worker/host.rs`).
fn host_notes(shared: &Shared) -> Vec<&'static str> {
    let bits = shared
        .host_notes
        .load(crate::locking::atomic::Ordering::Relaxed);
    crate::worker::host::notes(bits).collect()
}
