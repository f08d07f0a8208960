//! The per-CPU worker: its runqueue, wakelist, kick word and counters (shared with wakers), and
//! the thread-local part that only its OS thread touches (idle context, running task, stack
//! pool, timers).
//!
//! * `activate.rs` — the wakelist drain and enqueueing a woken task (`sched_ttwu_pending`,
//!   `ttwu_do_activate`);
//! * `schedule.rs` — `schedule()`, `finish_task_switch()` and the lock-before-switch argument;
//! * `exit.rs` — a task's exit: straight to the next task, the dead task freed on the next
//!   context;
//! * `idle.rs` — the worker thread's loop (its idle task), the idle/kick sleep;
//! * `balance.rs` — newly idle and periodic load balancing (moving tasks between workers);
//! * `timer.rs` — the timer heap of `sleep`; `stats.rs` — the counters.
//!
//! Invariant: *a task's registers are saved before any other worker can observe its `on_cpu`
//! cleared, and a worker only switches to a task it picked under its own runqueue lock.*

mod activate;
mod balance;
mod exit;
mod idle;
mod schedule;
mod stats;
mod timer;

pub(crate) use activate::{activate, check_preempt, drain, finished_delayed};
#[cfg(loom)]
pub(crate) use balance::periodic_balance;
pub(crate) use balance::tick as balance_tick;
#[cfg(loom)]
pub(crate) use exit::dequeue_dead;
pub(crate) use exit::exit_current;
pub(crate) use idle::worker_main;
pub(crate) use schedule::{
    Reason, block_current, finish_task_switch, pick, prepare_switch, schedule,
};
#[cfg(loom)]
pub(crate) use schedule::{clear_on_cpu, put_prev};
pub(crate) use stats::Counters;
pub use stats::{Stats, WorkerStats};

use alloc::sync::Arc;
use alloc::vec::Vec;
use core::cell::{Cell, RefCell};

use crossbeam_utils::CachePadded;

use crate::arch::{Context, FpControl, SignalStack, StackPool};
use crate::policy::{Features, RqConfig, RunQueue};
use crate::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use crate::sync::kick::Kick;
use crate::sync::llist::LList;
use crate::sync::lock::Lock;
#[cfg(not(all(feature = "std", not(loom))))]
use crate::sys::thread::Key;
use crate::task::{QueuedTask, Registry, Task, TaskRef};

/// A held runqueue lock.
pub(crate) type RqGuard<'a> = crate::sync::lock::LockGuard<'a, RunQueue<QueuedTask>>;

/// The part of a worker that other threads reach: runqueue, wakelist, kick word, counters.
///
/// The layout follows who writes what, so that a cross-worker wakeup moves as few cache
/// lines as it can (issue #5, remote wake to a busy worker). The first line holds what a
/// waker on another worker touches and the owner polls at every runtime call (`wakelist`,
/// `kick`, `need_resched`) and the published load that CPU selection reads: a remote
/// wakeup pulls that one line from the owner and hands it back, which is the signal itself.
/// The runqueue (whose lock the owner takes at every `cond_resched`), the counters and the
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
    /// The idle/kick word.
    pub(crate) kick: Kick,
    /// A wakeup asked the running task to yield (acted on at its next runtime call).
    pub(crate) need_resched: AtomicBool,
    /// The OS CPU it is pinned to.
    pub(crate) os_cpu: usize,
    /// The runqueue (the cfs_rq), behind the runqueue lock.
    pub(crate) rq: CachePadded<Lock<RunQueue<QueuedTask>>>,
    /// Counters.
    pub(crate) stats: CachePadded<Counters>,
    /// The live tasks whose home this worker is (`task/registry.rs`).
    pub(crate) tasks: CachePadded<Registry>,
}

impl Worker {
    pub(crate) fn new(os_cpu: usize, cfg: RqConfig) -> Worker {
        Worker {
            wakelist: LList::new(),
            nr_running: AtomicUsize::new(0),
            load: AtomicU64::new(0),
            kick: Kick::new(),
            need_resched: AtomicBool::new(false),
            os_cpu,
            rq: CachePadded::new(Lock::new(RunQueue::new(cfg))),
            stats: CachePadded::new(Counters::default()),
            tasks: CachePadded::new(Registry::new()),
        }
    }
}

impl Worker {
    /// Publishes `rq`'s runnable count and load (the caller holds its lock and has just
    /// changed it).
    pub(crate) fn publish(&self, rq: &RunQueue<QueuedTask>) {
        self.nr_running.store(rq.nr_runnable(), Ordering::Relaxed);
        self.load.store(rq.load_weight(), Ordering::Relaxed);
    }
}

/// Everything the workers share: the runtime's state.
pub(crate) struct Shared {
    pub(crate) workers: Vec<Worker>,
    pub(crate) features: Features,
    /// Shutdown was requested.
    pub(crate) closing: AtomicBool,
    /// Stack size of tasks without their own.
    pub(crate) stack_size: usize,
    /// Nanoseconds an idle worker spins before it sleeps (0: sleep at once).
    pub(crate) idle_spin: u64,
    /// How switches treat the FP control state, for every context of this runtime.
    pub(crate) fp_control: FpControl,
    /// Round-robin hint for spawns from outside.
    pub(crate) next_outside: AtomicUsize,
    /// The trace recorder, if tracing is on (`trace/`).
    pub(crate) trace: Option<alloc::boxed::Box<crate::trace::Recorder>>,
}

/// The thread-local part of a worker, reachable from its OS thread only (through `LOCAL`).
pub(crate) struct WorkerThread {
    pub(crate) shared: Arc<Shared>,
    pub(crate) index: usize,
    /// The worker thread's own context: its idle task.
    idle_ctx: core::cell::UnsafeCell<Context>,
    /// The task running on this thread (null: the idle task). The registry keeps it alive.
    curr: Cell<*const Task>,
    /// The task being switched away from, for `finish_task_switch`.
    prev: Cell<*const Task>,
    /// The task that ended in the switch in progress, freed by `finish_task_switch` on the
    /// next context (`exit.rs`).
    dead: Cell<*const Task>,
    /// The scheduler-clock time of the runtime call in progress on this thread, when it
    /// spans several runqueue operations (a task's exit and the wakeup of its joiner), so
    /// that they read the clock once, as the kernel's `rq_clock` within one `__schedule`;
    /// 0 otherwise. See [`WorkerThread::sched_now`].
    clock: Cell<u64>,
    pub(crate) pool: RefCell<StackPool>,
    pub(crate) timers: RefCell<timer::Timers>,
    signals: Option<SignalStack>,
    /// When the tick next runs the periodic balance (`balance.rs`).
    pub(crate) next_balance: Cell<u64>,
}

/// The calling thread's worker pointer. A task can suspend on one worker and resume on
/// another, and the compiler treats a native TLS address as fixed within a function, so it
/// may reuse one computed before a switch after it (the old worker's slot). With an inlined
/// `thread_local!` read, `finish_task_switch` read another worker's `prev` after a migration
/// and a storm test hung in `try_to_wake_up`'s `on_cpu` wait (issue #5, second pass).
///
/// So the read is never inlined ([`LocalSlot::get`]): each call computes the slot's address
/// afresh on the thread that runs it, and no caller can reuse one across a switch (the
/// switch is an `asm!` block that may write any memory, so two calls around it, which read
/// memory, are never merged either). With `std` the slot is a `thread_local!` with a constant initialiser, one
/// load from the thread pointer; without `std`, and under loom, a `pthread_key_t` (an opaque
/// `pthread_getspecific` call, about 3 ns, six times per same-worker round trip).
static LOCAL: LocalSlot = LocalSlot::new();

/// The slot behind [`LOCAL`].
struct LocalSlot {
    #[cfg(not(all(feature = "std", not(loom))))]
    key: Key,
}

#[cfg(all(feature = "std", not(loom)))]
std::thread_local! {
    static SLOT: Cell<*const ()> = const { Cell::new(core::ptr::null()) };
}

impl LocalSlot {
    const fn new() -> LocalSlot {
        LocalSlot {
            #[cfg(not(all(feature = "std", not(loom))))]
            key: Key::new(None),
        }
    }

    /// Sets the calling thread's pointer.
    fn set(&self, p: *const ()) {
        #[cfg(all(feature = "std", not(loom)))]
        SLOT.with(|s| s.set(p));
        #[cfg(not(all(feature = "std", not(loom))))]
        self.key.set(p);
    }

    /// The calling thread's pointer (null if never set). Never inlined (see [`LOCAL`]).
    #[inline(never)]
    fn get(&self) -> *const () {
        #[cfg(all(feature = "std", not(loom)))]
        return SLOT.with(Cell::get);
        #[cfg(not(all(feature = "std", not(loom))))]
        return self.key.get();
    }
}

/// The calling worker thread's state, `None` on other threads.
///
/// The reference must not be kept across a switch: the calling task may resume on another
/// worker. Every function re-fetches it after `schedule()`.
pub(crate) fn local() -> Option<&'static WorkerThread> {
    let p = LOCAL.get().cast::<WorkerThread>();
    // SAFETY: set by worker_main to its boxed WorkerThread, which outlives every task run on
    // the thread, and cleared before it is dropped.
    (!p.is_null()).then(|| unsafe { &*p })
}

/// The running task, as a new reference (`None` outside tasks).
pub(crate) fn current_task() -> Option<TaskRef> {
    let wt = local()?;
    let t = wt.curr.get();
    if t.is_null() {
        return None;
    }
    // SAFETY: `t` came from a live TaskRef (the registry holds one while it runs).
    unsafe {
        Arc::increment_strong_count(t);
        Some(Arc::from_raw(t))
    }
}

/// Runs `f` on the running task (`None` outside tasks), without taking a reference: the
/// hot paths (`park`, `yield_now`, `cond_resched`) would otherwise pay two locked
/// read-modify-writes on its count per call.
pub(crate) fn with_current_task<R>(f: impl FnOnce(&Task) -> R) -> Option<R> {
    let wt = local()?;
    let t = wt.curr.get();
    if t.is_null() {
        return None;
    }
    // SAFETY: `t` is the calling task itself; the registry keeps it alive until it ends, and
    // it cannot end while it is inside `f` (its fiber ends only when its closure returns).
    Some(f(unsafe { &*t }))
}

/// Runs `f` on the calling worker thread and its running task (`None` outside tasks), for a
/// caller that goes on to `schedule()`: one look-up serves both. `f` must not use the
/// worker thread after a switch (the task may resume on another worker).
pub(crate) fn with_current<R>(f: impl FnOnce(&WorkerThread, &Task) -> R) -> Option<R> {
    let wt = local()?;
    let t = wt.curr.get();
    if t.is_null() {
        return None;
    }
    // SAFETY: as in `with_current_task`: `t` is the calling task, alive while `f` runs.
    Some(f(wt, unsafe { &*t }))
}

#[cfg(loom)]
impl WorkerThread {
    /// A worker thread for a loom model (`model/exit.rs`), which plays worker `index` of `shared`
    /// on a loom thread: it holds no OS resource (no signal stack, an empty stack pool, no
    /// timers) and is never registered as the thread's `LOCAL` (loom threads share one OS
    /// thread); its idle context is never switched to.
    pub(crate) fn for_model(shared: Arc<Shared>, index: usize) -> WorkerThread {
        let pool = StackPool::new(shared.stack_size, 0).expect("the model's stack size is valid");
        let fp_control = shared.fp_control;
        WorkerThread {
            shared,
            index,
            idle_ctx: core::cell::UnsafeCell::new(Context::with_fp_control(fp_control)),
            curr: Cell::new(core::ptr::null()),
            prev: Cell::new(core::ptr::null()),
            dead: Cell::new(core::ptr::null()),
            clock: Cell::new(0),
            pool: RefCell::new(pool),
            timers: RefCell::new(timer::Timers::default()),
            signals: None,
            next_balance: Cell::new(0),
        }
    }

    /// Publishes (or, with 0, clears) the time of the runtime call in progress, as the exit
    /// hook does around its joiner's wakeup ([`WorkerThread::sched_now`]).
    pub(crate) fn set_clock(&self, now: u64) {
        self.clock.set(now);
    }
}

impl WorkerThread {
    pub(crate) fn worker(&self) -> &Worker {
        &self.shared.workers[self.index]
    }

    /// The scheduler clock for a runqueue operation on this thread: the time of the runtime
    /// call in progress if it published one (`clock`), else a fresh read.
    pub(crate) fn sched_now(&self) -> u64 {
        match self.clock.get() {
            0 => crate::sys::time::sched_clock(),
            now => now,
        }
    }

    fn idle_ctx(&self) -> *mut Context {
        self.idle_ctx.get()
    }

    /// No task runs here next: the overflow handler reports none.
    fn clear_signal_task(&self) {
        if let Some(sig) = &self.signals {
            // SAFETY: null is always allowed.
            unsafe { sig.set_current(core::ptr::null()) };
        }
    }

    /// Marks `next` running here and points its fiber's parent at this worker
    /// ([`prepare_switch`]).
    fn prepare_switch(&self, next: &Task) {
        prepare_switch(next, self.index, self.idle_ctx(), self.signals.as_ref());
    }
}
