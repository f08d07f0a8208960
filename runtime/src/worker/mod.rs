//! The per-CPU state (the kernel's `struct rq` and its per-CPU neighbours): what other
//! threads reach of a worker — its runqueue behind the runqueue lock, wakelist, kick word,
//! counters and registry ([`Worker`]) — the runtime's state that all workers share
//! ([`Shared`]), and the part only the worker's own OS thread touches, with the slot that
//! finds it (`thread.rs`: [`WorkerThread`], [`local`]).
//!
//! This layer is data: the protocols that move tasks through it sit above it, the wakeup path
//! in `wake/` and the scheduling loop in `sched/` (`ARCHITECTURE.md`). It also fixes the task
//! layer's runtime parameter (`tcb/`) to [`Shared`]: [`Task`], [`TaskRef`], [`QueuedTask`],
//! [`Registry`], [`Waiter`] and [`Packet`] are the task layer's types for this runtime.
//!
//! * `thread.rs` — [`WorkerThread`] and the thread's slot for it;
//! * `timer.rs` — the timer heap of `sleep` (its firing is `sched/timer.rs`);
//! * the workers' order and CPU view from the topology come from `lagom_topology::layout` (shared
//!   with the simulator);
//! * `host.rs` — the worker thread's nice and slice told to the kernel (host hints);
//! * `stats.rs` — the counters; `trace.rs` — the trace hooks, which record into `trace/`'s logs.

mod clock;
pub(crate) mod host;
mod stats;
mod thread;
mod tick;
mod timer;
pub(crate) mod trace;

pub(crate) use clock::StallMeter;
pub use clock::TaskClock;
pub(crate) use stats::Counters;
pub use stats::ShutdownStats;
pub use stats::{Stats, WorkerPlace, WorkerStats};
pub(crate) use thread::{
    WorkerThread, current_task, local, set_local, with_current, with_current_task,
};
pub(crate) use tick::tick_check;
pub(crate) use timer::token_worker;

use alloc::vec::Vec;

use crossbeam_utils::CachePadded;

use crate::arch::FpControl;
use crate::locking::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use crate::locking::kick::Kick;
use crate::locking::llist::LList;
use crate::locking::lock::Lock;
use crate::locking::resched::Resched;
use crate::tcb;
use lagom_policy::{CpuMap, Features, RqConfig, RunQueue};

/// A task control block of this runtime (`tcb/`).
pub(crate) type Task = tcb::Task<Shared>;
/// The reference-counted task pointer (`tcb/`).
pub(crate) type TaskRef = tcb::TaskRef<Shared>;
/// The runqueue's payload (`tcb/queued.rs`).
pub(crate) type QueuedTask = tcb::QueuedTask<Shared>;
/// A worker's registry of live tasks (`tcb/registry.rs`).
pub(crate) type Registry = tcb::Registry<Shared>;
/// A task or thread waiting to be unparked (`tcb/waiter.rs`).
pub(crate) type Waiter = tcb::Waiter<Shared>;
/// A task's join packet (`tcb/packet.rs`), joined by a [`Waiter`].
pub(crate) type Packet<T> = tcb::Packet<T, Waiter>;

/// A held runqueue lock.
pub(crate) type RqGuard<'a> = crate::locking::lock::LockGuard<'a, RunQueue<QueuedTask>>;

/// The part of a worker that other threads reach: runqueue, wakelist, kick word, counters.
///
/// The layout follows who writes what, so that a cross-worker wakeup moves as few cache
/// lines as it can (remote wake to a busy worker). The first line holds what a
/// waker on another worker touches and the owner polls at every runtime call (`wakelist`,
/// `kick`, `resched`) and the published load that CPU selection reads: a remote
/// wakeup pulls that one line from the owner and hands it back, which is the signal itself.
/// The runqueue (whose lock the owner takes at every scheduling call), the counters and the
/// registry each start on their own line pair (`CachePadded`), so that the owner's writes
/// there do not take the first line away from wakers, nor the reverse.
#[repr(C)]
pub(crate) struct Worker {
    /// Remote wakeups waiting to be activated here (TTWU_QUEUE).
    pub(crate) wakelist: LList<Task>,
    /// `nr_runnable` of the runqueue, published after every change under the lock (a hint
    /// for CPU selection and balancing, and the idle re-check).
    pub(crate) nr_running: AtomicUsize,
    /// `load_weight` of the runqueue (queued weight, delayed entities included), published
    /// with `nr_running` (a hint for balancing).
    pub(crate) load: AtomicU64,
    /// The smallest slice among its runnable tasks (`RunQueue::min_slice`, `u64::MAX` for
    /// none), published with `load` for the worker's own host hints (`host.rs`).
    pub(crate) min_slice: AtomicU64,
    /// The idle/kick word.
    pub(crate) kick: Kick,
    /// What is due for the running task (`locking/resched.rs`): need-resched, the tick, a
    /// pending wakelist; its `cond_resched` tests it with one load.
    pub(crate) resched: Resched,
    /// The scheduler-clock time the worker's tick timer is armed for (`u64::MAX`: not
    /// armed; `tick.rs`). Written by the worker's thread; read by an enqueue under its lock,
    /// which sets `TICK_CHECK` when it brings the running task's resched time before it.
    pub(crate) tick_at: AtomicU64,
    /// The OS CPU it is pinned to.
    pub(crate) os_cpu: usize,
    /// The runqueue (the cfs_rq), behind the runqueue lock.
    pub(crate) rq: CachePadded<Lock<RunQueue<QueuedTask>>>,
    /// Counters.
    pub(crate) stats: CachePadded<Counters>,
    /// The live tasks whose home this worker is (`tcb/registry.rs`).
    pub(crate) tasks: CachePadded<Registry>,
    /// Where the next balance that pulls from this worker resumes its scan of the runqueue's
    /// slots (`sched/balance.rs`); touched only under this worker's runqueue lock.
    pub(crate) balance_cursor: AtomicUsize,
    /// Balance attempts by this worker that found an imbalance, a task that may come, and
    /// moved nothing, since the last that moved something or found every source all pinned
    /// (the kernel's `sd->nr_balance_failed`, one count for all of this worker's domains;
    /// `policy::failed_after`): past a domain's `cache_nice_tries`
    /// it lets cache-hot tasks move (`policy::can_migrate`). Written only by this worker's
    /// thread (the puller).
    pub(crate) nr_balance_failed: AtomicU32,
    /// An ITMT active-balance request (`sched/balance.rs`): the index of a preferred idle
    /// worker that asked for this worker's running task, `usize::MAX` for none. Set by that
    /// worker's newly idle balance, taken by the next CPU selection of that task (its next
    /// schedule point that leaves the CPU: its block, then its wakeup). A hint (Relaxed):
    /// a stale or lost request only loses a move.
    pub(crate) active_push: AtomicUsize,
    /// The id of the task `active_push` asks for (the one running here at the request).
    pub(crate) active_push_task: AtomicU64,
    /// The scheduler-clock time of this worker's last scheduling call — a `schedule()`, an
    /// exit, a full tick of `cond_resched`, a round of the idle loop — for the stall monitor
    /// (`sched/monitor.rs`): stored Relaxed by the worker's thread with the time the call
    /// read anyway, read by the monitor. Its only reader is the monitor, so one plain store
    /// per scheduling call is all it costs; it sits on the line of `active_push`, which
    /// `schedule()` reads at every switch.
    pub(crate) last_point: AtomicU64,
    /// The earliest deadline (monotonic ns) of a timer on this worker's heap whose task still
    /// waits for it (`u64::MAX`: none), published by the worker's thread when it arms or
    /// fires a timer (`worker/timer.rs`): the heap is the thread's own, and the monitor needs
    /// to see a sleeper whose timer a stuck worker cannot fire.
    pub(crate) next_timer: AtomicU64,
    /// The worker thread's kernel id (0 until it starts), for the monitor's look at
    /// `/proc/self/task/TID/`.
    pub(crate) tid: AtomicU32,
    /// The worker's thread holds a task that unwinds and blocked (`sched/unwind.rs`): its
    /// kick word reads idle, but the stall monitor watches it as a busy worker, and reports
    /// a hold that lasts with its own cause. Written by the worker's thread, read by the
    /// monitor.
    pub(crate) unwind_hold: AtomicBool,
    /// The worker's thread has left its loop and freed its own state (set last, with
    /// Release; a shutdown waits for it before it joins the thread).
    pub(crate) exited: AtomicBool,
}

impl Worker {
    /// A worker pinned to `os_cpu`, its runqueue built with `cfg`.
    pub(crate) fn new(os_cpu: usize, cfg: RqConfig) -> Worker {
        Worker {
            wakelist: LList::new(),
            nr_running: AtomicUsize::new(0),
            load: AtomicU64::new(0),
            min_slice: AtomicU64::new(u64::MAX),
            kick: Kick::new(),
            resched: Resched::new(),
            tick_at: AtomicU64::new(u64::MAX),
            os_cpu,
            rq: CachePadded::new(Lock::new(RunQueue::new(cfg))),
            stats: CachePadded::new(Counters::default()),
            tasks: CachePadded::new(Registry::new()),
            balance_cursor: AtomicUsize::new(0),
            nr_balance_failed: AtomicU32::new(0),
            active_push: AtomicUsize::new(usize::MAX),
            active_push_task: AtomicU64::new(0),
            last_point: AtomicU64::new(0),
            next_timer: AtomicU64::new(u64::MAX),
            tid: AtomicU32::new(0),
            unwind_hold: AtomicBool::new(false),
            exited: AtomicBool::new(false),
        }
    }
}

impl Shared {
    /// The shutdown phase (Acquire).
    pub(crate) fn phase(&self) -> u32 {
        self.phase.load(Ordering::Acquire)
    }

    /// Moves the shutdown to `phase` (Release) and kicks every worker, so that idle ones look
    /// at once; from FORCE on, also sets every worker's need-resched, so that a running task's
    /// next `cond_resched` switches and meets its cancellation point (`task/cancel.rs`).
    pub(crate) fn set_phase(&self, phase: u32) {
        self.phase.store(phase, Ordering::Release);
        for w in &self.workers {
            if phase >= PHASE_FORCE {
                w.resched.set_need_resched();
            }
            w.kick.kick();
        }
    }

    /// Whether no worker has anything runnable or pending on its wakelist (a snapshot of
    /// the published counts: a wakeup in flight may be missed, which only makes a shutdown
    /// sweep a little early; the sweeps repeat).
    pub(crate) fn looks_idle(&self) -> bool {
        self.workers
            .iter()
            .all(|w| w.nr_running.load(Ordering::Relaxed) == 0 && w.wakelist.is_empty())
    }
}

impl Worker {
    /// Publishes `rq`'s runnable count and load, and passes on its request for a switch
    /// (`RunQueue::need_resched`: a charge of the running task inside the operation, or a
    /// wakeup preemption) to the running task, which tests its resched word at its next
    /// runtime call. The caller holds `rq`'s lock and has just changed it; every operation on a
    /// runqueue is followed by this, so that no charge's request for a switch is dropped
    /// (the kernel's `update_curr` sets `TIF_NEED_RESCHED` itself).
    pub(crate) fn publish(&self, rq: &RunQueue<QueuedTask>) {
        self.nr_running.store(rq.nr_runnable(), Ordering::Relaxed);
        self.load.store(rq.load_weight(), Ordering::Relaxed);
        self.min_slice.store(rq.min_slice(), Ordering::Relaxed);
        if rq.need_resched() {
            self.resched.set_need_resched();
        }
    }
}

/// [`Shared::phase`]: the runtime runs.
pub(crate) const PHASE_RUN: u32 = 0;
/// [`Shared::phase`]: a shutdown began. Runnable tasks run on; once the runtime has nothing
/// runnable, idle workers cancel the blocked tasks of their registries (`sched/shutdown.rs`).
pub(crate) const PHASE_DRAIN: u32 = 1;
/// [`Shared::phase`]: every task still alive is cancelled at its next call into lagom, and
/// idle workers cancel blocked tasks whatever runs elsewhere.
pub(crate) const PHASE_FORCE: u32 = 2;
/// [`Shared::phase`]: tasks still alive are abandoned at their next call into lagom, and
/// workers leave their loops once they have nothing runnable.
pub(crate) const PHASE_EXIT: u32 = 3;

/// Everything the workers share: the runtime's state.
pub(crate) struct Shared {
    /// The workers, by index.
    pub(crate) workers: Vec<Worker>,
    /// The scheduler features.
    pub(crate) features: Features,
    /// The workers' domains and priorities (`lagom_topology::layout`), read by placement and balancing.
    pub(crate) cpus: CpuMap,
    /// Why `cpus` is flat, if the layout fell back (`lagom_topology::layout`).
    pub(crate) layout_fallback: Option<&'static str>,
    /// Where the runtime is in its life: [`PHASE_RUN`] until a shutdown walks it through
    /// [`PHASE_DRAIN`], [`PHASE_FORCE`] and [`PHASE_EXIT`] (`lagom::runtime`'s module doc).
    /// Stored with Release by the shutting-down thread, which kicks every worker after each
    /// step; read with Acquire by workers and tasks.
    pub(crate) phase: AtomicU32,
    /// Stack size of tasks without their own.
    pub(crate) stack_size: usize,
    /// Nanoseconds an idle worker spins before it sleeps (0: sleep at once); with
    /// `idle_spin_adaptive`, the most its adaptive window grows to.
    pub(crate) idle_spin: u64,
    /// The idle spin adapts its window to the wakes seen (`sched/idle.rs`,
    /// `Builder::idle_spin_adaptive`, the default).
    pub(crate) idle_spin_adaptive: bool,
    /// Nanoseconds before its next timer an idle worker spins instead of sleeping (0: it
    /// sleeps to the deadline; `sched/idle.rs`, "Timer precision").
    pub(crate) timer_spin: u64,
    /// Each worker keeps a tick timer (`Builder::tick_timer`, `tick.rs`); `false`: every
    /// scheduling point reads the clock.
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) tick_timer: bool,
    /// How switches treat the FP control state, for every context of this runtime.
    pub(crate) fp_control: FpControl,
    /// Every task of this runtime may migrate once started (`Builder::allow_migration`, the
    /// `unsafe` opt-in out of the migration contract, `wake/select.rs`).
    pub(crate) allow_migration: bool,
    /// Which clock charges running tasks (`Builder::task_clock`, `worker/clock.rs`).
    pub(crate) task_clock: TaskClock,
    /// With the stall monitor on, the longest the tick timer waits between two ticks of a
    /// running task that others wait behind: half the monitor's threshold, so that a task
    /// which calls `cond_resched` shows its progress (its tick stores `last_point`) before
    /// the monitor would call its worker held, even when its slice is longer than the
    /// threshold. `u64::MAX` with the monitor off. In the kernel the periodic tick (HZ)
    /// plays this part; lagom's tick timer otherwise fires only when something is due.
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) progress_tick: u64,
    /// The C library's sleep functions sleep the calling task of this runtime instead of its
    /// worker (`Builder::interpose_sleep`, the `interpose` feature's hooks in
    /// `task/interpose.rs`); always `false` without the feature.
    #[cfg_attr(not(feature = "interpose"), allow(dead_code))]
    pub(crate) interpose_sleep: bool,
    /// Empty: each worker pins its thread to its CPU (the default); else the CPUs of the
    /// process's affinity, over which the worker threads float (`Builder::pin_workers`).
    pub(crate) float_cpus: Vec<usize>,
    /// Workers tell the kernel their tasks' slice and weight (`Builder::host_hints`,
    /// `host.rs`).
    pub(crate) host_hints: bool,
    /// What the kernel refused of the host hints, a bit set of `host.rs`'s notes, each
    /// recorded once by the first worker that met it.
    pub(crate) host_notes: AtomicU32,
    /// Round-robin hint for spawns from outside.
    pub(crate) next_outside: AtomicUsize,
    /// Closures of `task::blocking` that tasks of this runtime handed to the blocking pool
    /// and that have not returned: they may borrow from their task's stack (and from what
    /// that task borrows), so while any runs a shutdown unmaps no task's stack
    /// (`task/blocking.rs`). Incremented by the task before it submits the closure,
    /// decremented (Release) by the pool thread once the closure is done with everything it
    /// borrowed; read (Acquire) by the shutdown once every worker has stopped.
    pub(crate) blocking_borrows: AtomicUsize,
    /// The trace recorder, if tracing is on (`trace/`).
    pub(crate) trace: Option<alloc::boxed::Box<crate::trace::Recorder>>,
    /// The stall monitor's sleep word (`sched/monitor.rs`): `AWAKE` while it samples, `DEEP`
    /// while it sleeps without a timeout because every worker slept (a worker that leaves its
    /// idle sleep and finds `DEEP` wakes it), `STOP` once the shutdown ends it.
    pub(crate) monitor: crate::locking::futex::Futex,
}
