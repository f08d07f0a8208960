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
//! Idle spin: a wake that finds the worker spinning costs a cache-line transfer (the
//! waker's kick sees the word `ACTIVE` and makes no system call: the kernel's polling idle
//! task, `TIF_POLLING_NRFLAG`), one that finds it asleep a `futex_wake` in the waker and an
//! OS wakeup. The spin is wall-clock time (a clock read every `CLOCK_EVERY` spin hints: a
//! count of hints means very different times on different CPUs), cut short at the next
//! timer. By default it adapts (`Builder::idle_spin_adaptive`, `adapt_spin`): KVM's halt
//! polling rule, with a window that starts at 0, doubles after a wake that a longer spin
//! within the ceiling (`DEFAULT_IDLE_SPIN`, 30 µs: about what a futex sleep and wakeup cost,
//! the ski-rental bound) would have caught, and halves after a wake past the ceiling or a
//! sleep that ended at the worker's own timer. So a worker woken at short gaps by other
//! workers keeps spinning through them, and one that sleeps to its timers or waits long
//! costs no spin; an empty runtime's workers do not spin at all. `Builder::idle_spin` fixes
//! the spin instead (the opt-in for latency). The kick records when it came
//! (`Kick::kicked_at`), which is how the worker knows how long its idle period was. The
//! curve of the fixed spin and the adaptive spin's figures are in the book's lab,
//! `docs/src/lab/idle.md`.
//!
//! Timer precision: a task in `sleep` is woken by its worker's timer, which an idle worker
//! waits for in its futex sleep (the timeout is the next deadline). The kernel's timer slack
//! (up to 50 µs, to merge wakeups) would make that wakeup late, so worker threads set theirs
//! to 1 ns (`PR_SET_TIMERSLACK`); what is left is the OS wakeup itself, tens of µs on a
//! virtual machine, as for a thread in `clock_nanosleep`. `Builder::timer_spin` (default 0)
//! opts into spinning for a timer due within it instead of sleeping, and ends a longer futex
//! sleep that much early, so that the task wakes within a few µs at the cost of that CPU
//! per timed wakeup (the lateness and CPU of each setting: `docs/src/lab/idle.md`). A worker
//! with work never sleeps: it fires timers at every scheduling call, and its tick timer
//! (`worker/tick.rs`) is armed for the next one, which an idle worker disarms before it
//! sleeps.
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
use super::{balance, monitor, shutdown, timer};
use crate::arch::{SignalStack, StackPool, TRIM_AFTER, switch};
use crate::locking::atomic::Ordering;
use crate::locking::kick::Idle;
use crate::trace::SwitchReason;
use crate::wake::drain;
use crate::worker::host::HostHints;
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
    // Pinning can fail in a restricted container; the worker then still runs, unpinned.
    if shared.float_cpus.is_empty() {
        let _ = crate::sys::thread::pin_to(shared.workers[index].os_cpu);
    } else {
        let _ = crate::sys::thread::set_affinity(&shared.float_cpus);
    }
    // Timed idle sleeps end at the next timer, not up to 50 µs later (the default slack); a
    // kernel that refuses (none does for the calling thread) leaves the default.
    let _ = crate::sys::thread::set_timer_slack(TIMER_SLACK_NS);
    // For the stall monitor's look at this thread under `/proc/self/task/`.
    shared.workers[index]
        .tid
        .store(crate::sys::thread::gettid(), Ordering::Relaxed);
    let pool = StackPool::new(shared.stack_size, POOL_CAPACITY).expect("checked by build()");
    // What the worker may tell the kernel for its tasks, probed once on its own thread.
    let host = match shared.host_hints {
        true => {
            let base_slice = shared.workers[index].rq.lock().config().base_slice;
            HostHints::probe(base_slice, &shared.host_notes)
        }
        false => None,
    };
    let wt = Box::new(WorkerThread::new(
        shared,
        index,
        pool,
        SignalStack::install().ok(),
        host,
    ));
    set_local(&*wt);
    wt.tick_start();
    idle_loop(&wt);
    wt.tick_stop();
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
        // The stall monitor's evidence of progress (`monitor.rs`): the idle loop runs no task.
        w.last_point.store(now, Ordering::Relaxed);
        let mut rq = w.rq.lock();
        drain(shared, wt.index, &mut rq, now);
        let next = pick(w, &mut rq, now);
        if !next.is_null() {
            // SAFETY: picked from the runqueue: its registry keeps it alive (`tcb/queued.rs`).
            let n = unsafe { &*next };
            prepare_switch_on(wt, n);
            wt.tick_rearm(&rq);
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
        let idle_start = crate::sys::time::sched_clock();
        if spin(wt, &has_work, idle_start) {
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
        // An idle worker's tick is stopped (`worker/tick.rs`).
        wt.tick_disarm();
        let woke = w.kick.idle_wait(has_work, timeout);
        if woke != Idle::Work {
            w.stats.inc(&w.stats.idle_sleeps);
        }
        adapt_spin(wt, woke, idle_start);
        // Active again (whether it slept or its re-check found work): a monitor that saw
        // every worker idle and sleeps without a timeout must watch again (`monitor.rs`).
        monitor::worker_active(shared);
    }
    IdleStep::Again
}

/// The first window of the adaptive idle spin once an idle period shows that one would have
/// helped (the kernel's `halt_poll_ns_grow_start` for KVM's halt polling), or the ceiling if
/// that is lower.
const SPIN_GROW_START: u64 = 10_000;

/// The adaptive idle spin's step after an idle period that began at scheduler-clock time
/// `start` and ended as `woke` says (module doc, "Idle spin"): KVM's halt-polling rule. A
/// wake that came after the window but within the ceiling (`Builder::idle_spin_adaptive`)
/// doubles the window (from `SPIN_GROW_START`); one that came after the ceiling halves it
/// (to 0 below `SPIN_GROW_START`); so does a sleep that ended by its own timeout (a timer of
/// this worker, which the spin does not serve: the worker knows when it is due). A wake
/// within the window leaves it: the spin caught it.
fn adapt_spin(wt: &WorkerThread, woke: Idle, start: u64) {
    let shared = &*wt.shared;
    if !shared.idle_spin_adaptive {
        return;
    }
    let (max, win) = (shared.idle_spin, wt.spin_window.get());
    let block = match woke {
        // Work turned up between the end of the spin and the sleep: just too short.
        Idle::Work => win.saturating_add(1),
        Idle::Kicked => wt.worker().kick.kicked_at().saturating_sub(start),
        Idle::Timeout => u64::MAX,
    };
    let next = if block <= win {
        win
    } else if block > max {
        let half = win / 2;
        if half < SPIN_GROW_START.min(max) {
            0
        } else {
            half
        }
    } else {
        win.saturating_mul(2).max(SPIN_GROW_START).min(max)
    };
    wt.spin_window.set(next);
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

/// The idle spin (module doc): polls `has_work` from scheduler-clock time `start` for the
/// fixed `idle_spin` ns, or the adaptive spin's current window, cut short at the next
/// timer. Returns whether work turned up. (Under loom the clock stands still, so a spin
/// would never end: the models build their workers with `idle_spin` 0 and no adaptation.)
fn spin(wt: &WorkerThread, has_work: &impl Fn() -> bool, start: u64) -> bool {
    let len = if wt.shared.idle_spin_adaptive {
        wt.spin_window.get()
    } else {
        wt.shared.idle_spin
    };
    if len == 0 {
        return false;
    }
    let w = wt.worker();
    let mut deadline = start.saturating_add(len);
    if let Some(t) = wt.timers.borrow().next_deadline() {
        // The timer's distance, moved onto the scheduler clock.
        let left = t.saturating_sub(crate::sys::time::monotonic_ns());
        deadline = deadline.min(start.saturating_add(left));
    }
    loop {
        for _ in 0..CLOCK_EVERY {
            if has_work() {
                w.stats.inc_owned(&w.stats.idle_spin_hits);
                let now = crate::sys::time::sched_clock();
                w.stats
                    .add_owned(&w.stats.idle_spin_ns, now.saturating_sub(start));
                return true;
            }
            crate::locking::spin_loop();
        }
        let now = crate::sys::time::sched_clock();
        if now >= deadline {
            w.stats
                .add_owned(&w.stats.idle_spin_ns, now.saturating_sub(start));
            return false;
        }
    }
}
