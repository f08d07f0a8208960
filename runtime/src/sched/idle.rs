//! The worker thread's main loop, which is also its idle task: pick and switch, pull work when newly idle, and sleep on the kick word.
//!
//! Invariant (the kick protocol, `locking/kick.rs`): *a worker never sleeps while work published
//! for it before it slept is pending.* The idle worker spins for `idle_spin` watching its
//! wakelist and runqueue counter, then publishes idle (`Kick::idle_wait`: store IDLE,
//! `fence(SeqCst)`, re-check both, `futex_wait`); every waker publishes work first (a
//! wakelist push, Release, or an enqueue under the lock followed by the `nr_running` store)
//! and then calls `Kick::kick` (`fence(SeqCst)`, load the word, `IDLE → KICKED`,
//! `futex_wake`). One of the two fences comes first: either the re-check sees the work or the
//! waker sees IDLE and wakes the sleeper (loom model 4, `idle_kick`). The sleep times out at
//! the next timer of this worker.
//!
//! Idle spin: a wake that finds the worker spinning costs a cache-line transfer, one that
//! finds it asleep a `futex_wake` in the waker and an OS wakeup. The spin is wall-clock time
//! (a clock read every `CLOCK_EVERY` spin hints: a count of hints means very different times
//! on different CPUs), cut short at the next timer. Spinning about as long as a sleep and
//! wakeup cost catches every wake that comes sooner for no more CPU than sleeping, and at
//! most doubles the cost of one that comes later (the ski-rental bound): hence
//! `DEFAULT_IDLE_SPIN`, 30 µs, which catches the 10–30 µs gaps of request/response and
//! ping-pong wakeups. The curve it was chosen from is in the book's lab,
//! `docs/src/lab/idle.md`.
//!
//! Timer precision: a task in `sleep` is woken by its worker's timer, which an idle worker
//! waits for in its futex sleep (the timeout is the next deadline). Two things make that
//! wakeup late: the kernel's timer slack (up to 50 µs, to merge wakeups), which worker threads
//! set to 1 ns (`PR_SET_TIMERSLACK`); and the OS wakeup itself, tens of µs on a virtual
//! machine, so an idle worker whose next timer is within `timer_spin` (`Builder::timer_spin`,
//! default 100 µs, longer than that wakeup) spins to it instead of sleeping, and a longer
//! futex sleep ends `timer_spin` early. `Duration::ZERO` restores plain futex timeouts (the
//! lateness and CPU of each setting: `docs/src/lab/idle.md`). A worker with work never
//! sleeps: it fires timers at every scheduling call, and `cond_resched` bounds its tick by
//! the next timer (`task/current.rs`).
//!
//! Newly idle balance (`balance.rs`): before sleeping, the worker pulls one runnable task
//! that is neither running nor being switched away nor delayed, and may run here, from the
//! worker with the most runnable tasks (at least two).
//!
//! Out of work, before balancing, the worker reaps its registry's dead list (the tasks it
//! spawned that died on other workers, `tcb/registry.rs`). Idle for `arch::TRIM_AFTER`
//! without a break, it trims its stack pool (`arch/pool.rs`: idle stacks beyond the pool's
//! floor unmapped, the others' memory given back with `madvise`); its idle sleep ends in time
//! for that.
//!
//! Shutdown (`lagom::runtime`'s module doc): during DRAIN and FORCE an idle worker sweeps its
//! registry for blocked tasks to cancel (`shutdown.rs`) and sleeps at most
//! `shutdown::SWEEP_EVERY` at a time; in EXIT, a worker whose runqueue and wakelist are empty
//! leaves the loop, and so does, whatever it still holds, a worker whose thread an abandoned
//! task left unwinding (`WorkerThread::stranded`, `unwind.rs`). After the loop, the worker
//! frees its own state and says so (`Worker::exited`).

use alloc::boxed::Box;
use alloc::sync::Arc;
use core::ptr;

use super::schedule::{finish_task_switch, pick, prepare_switch_on};
use super::{balance, shutdown, timer};
use crate::arch::{SignalStack, StackPool, TRIM_AFTER, switch};
use crate::locking::atomic::Ordering;
use crate::locking::kick::Idle;
use crate::trace::SwitchReason;
use crate::wake::drain;
use crate::worker::{
    PHASE_DRAIN, PHASE_EXIT, PHASE_FORCE, PHASE_RUN, Shared, WorkerThread, set_local, trace,
};

/// How many idle stacks each worker's pool keeps however long it idles (between trims it
/// keeps every stack that comes back, `arch/pool.rs`).
const POOL_CAPACITY: usize = 64;

/// The worker threads' timer slack (`PR_SET_TIMERSLACK`, ns): 1, the least the kernel takes,
/// so that an idle sleep until a `sleep` deadline is not stretched by the default 50 µs
/// (module doc, "Timer precision").
const TIMER_SLACK_NS: u64 = 1;

/// The body of worker thread `index`.
pub(crate) fn worker_main(shared: Arc<Shared>, index: usize) {
    let os_cpu = shared.workers[index].os_cpu;
    // Pinning can fail in a restricted container; the worker then still runs, unpinned.
    let _ = crate::sys::thread::pin_to(os_cpu);
    // Timed idle sleeps end at the next timer, not up to 50 µs later (the default slack); a
    // kernel that refuses (none does for the calling thread) leaves the default.
    let _ = crate::sys::thread::set_timer_slack(TIMER_SLACK_NS);
    let pool = StackPool::new(shared.stack_size, POOL_CAPACITY).expect("checked by build()");
    let wt = Box::new(WorkerThread::new(
        shared,
        index,
        pool,
        SignalStack::install().ok(),
    ));
    set_local(&*wt);
    idle_loop(&wt);
    set_local(ptr::null());
    let shared = Arc::clone(&wt.shared);
    drop(wt);
    shared.workers[index].exited.store(true, Ordering::Release);
}

fn idle_loop(wt: &WorkerThread) {
    // Since when the worker has had nothing to run (monotonic ns), for the pool's trim.
    let mut idle_since: Option<u64> = None;
    loop {
        match idle_step(wt, &mut idle_since) {
            IdleStep::Switch(n) => {
                // SAFETY: the idle context is this thread's; `n` is suspended (see
                // `prepare_switch`) and kept alive by its registry (`tcb/queued.rs`).
                unsafe { switch(wt.idle_ctx(), (*n).ctx) };
                // Back on the idle task: a task scheduled to idle or ended (`exit.rs`) with
                // nothing runnable (curr is null, prev is set; a dead task is freed here).
                finish_task_switch();
                // An abandoned task that unwinds left the thread's panic count raised: it
                // runs no task again (`unwind.rs`).
                if wt.stranded.get() {
                    return;
                }
            }
            IdleStep::Again => {}
            IdleStep::Exit => return,
        }
    }
}

/// How one round of the idle loop ended ([`idle_step`]).
pub(crate) enum IdleStep {
    /// A task was picked and marked running here: switch into it.
    Switch(*const crate::worker::Task),
    /// Nothing to switch to this round (work turned up, or the sleep ended): go round again.
    Again,
    /// The shutdown's EXIT phase with nothing left here: leave the loop.
    Exit,
}

/// One round of the idle loop: fire timers, drain and pick (returning the task to switch
/// into), else reap, balance, spin and sleep on the kick word. Everything of the loop but
/// the switch itself, which the caller makes (under loom a model plays it: `lagom::model`).
pub(crate) fn idle_step(wt: &WorkerThread, idle_since: &mut Option<u64>) -> IdleStep {
    let shared = &*wt.shared;
    let w = wt.worker();
    // The body of the loop, as it was before this round was split out for the models.
    {
        timer::fire(wt);
        let now = crate::sys::time::sched_clock();
        let mut rq = w.rq.lock();
        drain(shared, wt.index, &mut rq, now);
        let next = pick(w, &mut rq, now);
        if !next.is_null() {
            // SAFETY: picked from the runqueue: its registry keeps it alive (`tcb/queued.rs`).
            let n = unsafe { &*next };
            prepare_switch_on(wt, n);
            wt.leave_idle(now);
            trace::switch(wt, None, Some(n), SwitchReason::Idle);
            wt.curr.set(next);
            drop(rq);
            *idle_since = None;
            crate::locking::probe::probe!("sched/idle: the idle loop picks a task");
            return IdleStep::Switch(next);
        }
        let empty = rq.nr_queued() == 0;
        drop(rq);
        // Out of work: remove this worker's tasks that died on others (`tcb/registry.rs`).
        // Look first: the take is a locked swap, and the list is usually empty.
        if w.tasks.has_dead() {
            crate::locking::probe::probe!(
                "sched/idle: the idle loop reaps tasks that died elsewhere"
            );
            // SAFETY: this is the registry's home worker thread.
            unsafe { w.tasks.reap(|s| wt.pool.borrow_mut().put(s)) };
        }
        let phase = shared.phase();
        if phase == PHASE_EXIT && empty && w.wakelist.is_empty() {
            return IdleStep::Exit;
        }
        if (phase == PHASE_DRAIN && shared.looks_idle()) || phase == PHASE_FORCE {
            shutdown::sweep(wt);
        }
        if balance::newidle_balance(shared, wt.index, crate::sys::time::sched_clock()) {
            crate::locking::probe::probe!("sched/idle: the newly idle balance pulls a task");
            return IdleStep::Again;
        }
        let has_work = || {
            (!w.wakelist.is_empty() && !cfg!(lagom_mutant = "idle_recheck_no_wakelist"))
                || (w.nr_running.load(Ordering::Relaxed) > 0
                    && !cfg!(lagom_mutant = "idle_recheck_no_nr_running"))
                || w.tasks.has_dead()
                || shared.phase.load(Ordering::Relaxed) != phase
        };
        if spin(wt, &has_work) {
            return IdleStep::Again;
        }
        let mut timeout = wt
            .timers
            .borrow()
            .next_deadline()
            .map(|d| d.saturating_sub(crate::sys::time::monotonic_ns()));
        // Timer precision: a timer due within TIMER_SPIN is waited for spinning, one further
        // off by a futex sleep that ends TIMER_SPIN early (module doc).
        if let Some(t) = timeout {
            if t <= shared.timer_spin {
                // Work or the deadline, either way round again.
                spin_until_timer(wt, &has_work);
                return IdleStep::Again;
            }
            timeout = Some(t - shared.timer_spin);
        }
        if phase != PHASE_RUN {
            // A shutdown runs: come round again soon to sweep (tasks block elsewhere
            // without telling this worker).
            let every = shutdown::SWEEP_EVERY.as_nanos() as u64;
            timeout = Some(timeout.map_or(every, |t| t.min(every)));
        }
        if let Some(left) = trim_pool(wt, idle_since) {
            timeout = Some(timeout.map_or(left, |t| t.min(left)));
        }
        if timeout == Some(0) {
            return IdleStep::Again;
        }
        crate::locking::probe::probe!("sched/idle: the idle loop waits on its kick word");
        if w.kick.idle_wait(has_work, timeout) != Idle::Work {
            w.stats.inc(&w.stats.idle_sleeps);
        }
    }
    IdleStep::Again
}

/// The pool's trim (`arch/pool.rs`): once the worker has been idle for `TRIM_AFTER` without a
/// break, its stack pool unmaps the idle stacks beyond its capacity and gives the memory of
/// the others back to the OS. Returns the ns left until the trim is due, if one is pending,
/// so that the idle sleep ends in time for it.
fn trim_pool(wt: &WorkerThread, idle_since: &mut Option<u64>) -> Option<u64> {
    if !wt.pool.borrow().needs_trim() {
        return None;
    }
    let now = crate::sys::time::monotonic_ns();
    let since = *idle_since.get_or_insert(now);
    let after = TRIM_AFTER.as_nanos() as u64;
    let idle = now.saturating_sub(since);
    if idle < after {
        publish_pool(wt);
        return Some(after - idle);
    }
    wt.pool.borrow_mut().trim();
    publish_pool(wt);
    None
}

/// Copies the pool's totals into the worker's counters (one writer: this thread).
fn publish_pool(wt: &WorkerThread) {
    let (pool, c) = (wt.pool.borrow(), &wt.worker().stats);
    c.stacks_mapped.store(pool.mmaps(), Ordering::Relaxed);
    c.stacks_trimmed.store(pool.trimmed(), Ordering::Relaxed);
}

/// Spins until the worker's next timer is due or work turns up (returns whether it did).
fn spin_until_timer(wt: &WorkerThread, has_work: &impl Fn() -> bool) -> bool {
    let Some(deadline) = wt.timers.borrow().next_deadline() else {
        return false;
    };
    loop {
        for _ in 0..CLOCK_EVERY {
            if has_work() {
                return true;
            }
            crate::locking::spin_loop();
        }
        if crate::sys::time::monotonic_ns() >= deadline {
            return false;
        }
    }
}

/// Spin iterations between two clock reads of the idle spin.
const CLOCK_EVERY: u32 = 16;

/// The idle spin (module doc): polls `has_work` for `idle_spin` ns, cut short at the next
/// timer. Returns whether work turned up. (Under loom the clock stands still, so a spin would
/// never end: the models build their workers with `idle_spin` 0.)
fn spin(wt: &WorkerThread, has_work: &impl Fn() -> bool) -> bool {
    let len = wt.shared.idle_spin;
    if len == 0 {
        return false;
    }
    let start = crate::sys::time::monotonic_ns();
    let mut deadline = start.saturating_add(len);
    if let Some(t) = wt.timers.borrow().next_deadline() {
        deadline = deadline.min(t);
    }
    loop {
        for _ in 0..CLOCK_EVERY {
            if has_work() {
                return true;
            }
            crate::locking::spin_loop();
        }
        if crate::sys::time::monotonic_ns() >= deadline {
            return false;
        }
    }
}
