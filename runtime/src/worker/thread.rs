//! The thread-local part of a worker ([`WorkerThread`]), reachable from its OS thread only,
//! and the slot through which that thread finds it ([`local`]).

use alloc::sync::Arc;
use core::cell::{Cell, RefCell};

use super::tick::TickTimer;
use super::timer::Timers;
use super::{QueuedTask, Shared, StallMeter, Task, TaskClock, TaskRef, Worker};
use crate::arch::{Context, SignalStack, StackPool};
use crate::locking::resched::Resched;
#[cfg(not(all(feature = "std", not(loom))))]
use crate::sys::thread::Key;
use lagom_policy::RunQueue;

/// The thread-local part of a worker, reachable from its OS thread only (through `LOCAL`).
pub(crate) struct WorkerThread {
    /// The worker's resched word (`Worker::resched`, in `shared`), reached without the
    /// look-up through `shared.workers`: `cond_resched` loads it and nothing else when
    /// nothing is due.
    resched: *const Resched,
    /// The runtime.
    pub(crate) shared: Arc<Shared>,
    /// The worker's index in `shared.workers`.
    pub(crate) index: usize,
    /// The worker thread's own context: its idle task.
    idle_ctx: core::cell::UnsafeCell<Context>,
    /// The task running on this thread (null: the idle task). The registry keeps it alive.
    pub(crate) curr: Cell<*const Task>,
    /// The task being switched away from, for `finish_task_switch`.
    pub(crate) prev: Cell<*const Task>,
    /// The task that ended in the switch in progress, freed by `finish_task_switch` on the
    /// next context (`sched/exit.rs`).
    pub(crate) dead: Cell<*const Task>,
    /// The scheduler-clock time of the runtime call in progress on this thread, when it
    /// spans several runqueue operations (a task's exit and the wakeup of its joiner), so
    /// that they read the clock once, as the kernel's `rq_clock` within one `__schedule`;
    /// 0 otherwise. See [`WorkerThread::sched_now`].
    pub(crate) clock: Cell<u64>,
    /// The pool of task stacks of this worker.
    pub(crate) pool: RefCell<StackPool>,
    /// The timers of the tasks sleeping here.
    pub(crate) timers: RefCell<Timers>,
    /// The stack-overflow handler's alternate stack (`None` if it could not be installed).
    signals: Option<SignalStack>,
    /// When the tick next runs the periodic balance and the nohz kick (`sched/balance.rs`):
    /// every `BALANCE_INTERVAL`; each domain level then balances only when it is due.
    pub(crate) next_balance: Cell<u64>,
    /// The periodic-balance state of each of this worker's domain levels
    /// (`policy::LevelBalance`: `sd->balance_interval`, `sd->last_balance`), made at the
    /// first tick that balances; only this worker's thread touches it.
    pub(crate) balance_levels: RefCell<alloc::vec::Vec<lagom_policy::LevelBalance>>,
    /// Without a tick timer (`TICK_BY_CLOCK`): the scheduler-clock time before which
    /// `cond_resched` skips its full tick unless its resched word asks for one
    /// (`task/current.rs`): at most `TICK` after the last full tick, never past the next
    /// timer; 0 (a full tick at the next call) after every switch.
    pub(crate) next_tick: Cell<u64>,
    /// The adaptive idle spin's current window, ns (`sched/idle.rs`).
    pub(crate) spin_window: Cell<u64>,
    /// The worker's tick timer (`tick.rs`; under loom, where no worker thread runs, never
    /// made).
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) tick: TickTimer,
    /// The host-stall meter of [`TaskClock::OnCpu`](super::TaskClock::OnCpu) (`None` with
    /// the wall clock; `worker/clock.rs`).
    stall: Option<StallMeter>,
    /// What this worker's thread tells the kernel for its tasks (`host.rs`; `None` with
    /// the hints off or where the kernel lets it say nothing).
    pub(crate) host: Option<super::host::HostHints>,
    /// A task abandoned while it unwound left this thread's panic count raised: the thread
    /// runs no task again and its idle loop ends (`sched/unwind.rs`).
    pub(crate) stranded: Cell<bool>,
}

/// The calling thread's worker pointer. A task can suspend on one worker and resume on
/// another, and the compiler treats a native TLS address as fixed within a function, so it
/// may reuse one computed before a switch after it (the old worker's slot). With an inlined
/// `thread_local!` read, `finish_task_switch` read another worker's `prev` after a migration
/// and a storm test hung in `try_to_wake_up`'s `on_cpu` wait.
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
        WorkerThread::new(shared, index, pool, None, None)
    }
}

impl WorkerThread {
    /// The state of worker `index` of `shared` that its own thread keeps, with that thread's
    /// stack pool and overflow handler's stack.
    pub(crate) fn new(
        shared: Arc<Shared>,
        index: usize,
        pool: StackPool,
        signals: Option<SignalStack>,
        host: Option<super::host::HostHints>,
    ) -> WorkerThread {
        let fp_control = shared.fp_control;
        let stall = (shared.task_clock == TaskClock::OnCpu).then(StallMeter::default);
        WorkerThread {
            resched: &shared.workers[index].resched,
            shared,
            index,
            idle_ctx: core::cell::UnsafeCell::new(Context::with_fp_control(fp_control)),
            curr: Cell::new(core::ptr::null()),
            prev: Cell::new(core::ptr::null()),
            dead: Cell::new(core::ptr::null()),
            clock: Cell::new(0),
            pool: RefCell::new(pool),
            timers: RefCell::new(Timers::default()),
            signals,
            next_balance: Cell::new(0),
            balance_levels: RefCell::new(alloc::vec::Vec::new()),
            next_tick: Cell::new(0),
            spin_window: Cell::new(0),
            tick: TickTimer::default(),
            stall,
            host,
            stranded: Cell::new(false),
        }
    }

    /// The worker's resched word (`locking/resched.rs`).
    #[inline(always)]
    pub(crate) fn resched(&self) -> &Resched {
        // SAFETY: it points into `self.shared`'s workers, which never move or shrink while
        // `self` holds the `Arc`.
        unsafe { &*self.resched }
    }

    /// The worker's shared part.
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

    /// An accounting point on this worker's own runqueue `rq` (locked by the caller) at
    /// scheduler-clock time `now`, before its `update_curr`: with the task clock on, the
    /// host stall seen since the previous point is left out of the running task's charge
    /// (`worker/clock.rs`). Nothing with the wall clock.
    #[inline]
    pub(crate) fn exclude_host_stall(&self, rq: &mut RunQueue<QueuedTask>, now: u64) {
        if let Some(m) = &self.stall {
            self.exclude_host_stall_with(m, rq, now);
        }
    }

    #[inline(never)]
    fn exclude_host_stall_with(&self, m: &StallMeter, rq: &mut RunQueue<QueuedTask>, now: u64) {
        let stall = m.stall(now);
        if stall == 0 {
            return;
        }
        // The stall measured but charged all the same (runtime/tests/mutants.sh).
        #[cfg(lagom_mutant = "host_stall_charged")]
        let left_out = stall;
        #[cfg(not(lagom_mutant = "host_stall_charged"))]
        let left_out = rq.exclude_from_curr(stall, now);
        if left_out > 0 {
            let s = &self.worker().stats;
            s.inc_owned(&s.host_stalls);
            s.add_owned(&s.host_stall_ns, left_out);
        }
    }

    /// The worker leaves its idle context for a task at scheduler-clock time `now`: the task
    /// clock's stall meter starts afresh (`worker/clock.rs`, step 4).
    #[inline]
    pub(crate) fn leave_idle(&self, now: u64) {
        if let Some(m) = &self.stall {
            m.rebase(now);
        }
    }

    /// The thread's own context, its idle task.
    pub(crate) fn idle_ctx(&self) -> *mut Context {
        self.idle_ctx.get()
    }

    /// The overflow handler's stack, if installed.
    pub(crate) fn signals(&self) -> Option<&SignalStack> {
        self.signals.as_ref()
    }

    /// No task runs here next: the overflow handler reports none.
    pub(crate) fn clear_signal_task(&self) {
        if let Some(sig) = &self.signals {
            // SAFETY: null is always allowed.
            unsafe { sig.set_current(core::ptr::null()) };
        }
    }
}

/// Makes `wt` (or, with null, nothing) the calling thread's worker thread (`sched/idle.rs`,
/// around the worker's loop).
pub(crate) fn set_local(wt: *const WorkerThread) {
    LOCAL.set(wt.cast());
}
