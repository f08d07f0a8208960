//! The worker's tick timer: a one-shot POSIX timer per worker thread (`sys/timer.rs`) whose
//! signal sets `TICK_FIRED` in the worker's resched word (`locking/resched.rs`) at the next
//! time something is due for the running task — the end of its protected slice
//! (`RunQueue::curr_resched_at`), the worker's next `sleep` timer, its next periodic balance;
//! and, while others wait and the stall monitor is on, half its threshold after the last
//! point of progress (`Shared::progress_tick`), so that a task with a slice longer than the
//! threshold, which calls `cond_resched`, is never taken for one that holds its worker. So `cond_resched` with nothing due is one load, and the clock is read where time is
//! charged (the tick the signal asks for, `schedule()`), not to ask whether to charge it.
//!
//! The kernel's counterparts: the periodic tick, stopped on an idle CPU (NO_HZ) and
//! reprogrammed when it leaves idle, and `hrtick_start_fair`, the high-resolution timer at
//! the end of the running task's slice (the HRTICK feature, off by default in the kernel,
//! where the tick's 4 ms grain decides instead; lagom has no tick interrupt to fall back on,
//! so its timer always serves the slice, which keeps the precision of the clock read it
//! replaces).
//!
//! ## Arming
//!
//! Lazily: after every pick of a task, after a tick that did not switch, and when an
//! enqueue flagged `TICK_CHECK`, the worker computes the earliest of the three times
//! ([`WorkerThread::tick_rearm`]) and calls `timer_settime` only if that is earlier than the
//! time armed (`Worker::tick_at`). A time that moved later leaves the timer as it is: it
//! fires early, the tick finds nothing due and arms again for the right time (one signal
//! instead of one system call per switch). The timer is disarmed when the worker goes to
//! sleep idle ([`WorkerThread::tick_disarm`]): an idle worker sleeps until its next `sleep`
//! timer or a kick, as an idle CPU stops its tick.
//!
//! Times are on the scheduler clock; the timer runs on `CLOCK_MONOTONIC`, the two apart by
//! an offset measured at each arming (they drift by parts per million, `sys/time.rs`).
//!
//! ## The signal
//!
//! `SIGURG` (`sys::timer::TICK_SIGNAL`), delivered to the worker's own thread on its
//! alternate signal stack, with `SA_RESTART`; its handler only sets the bit. What it does to
//! code that runs in a task: a system call that the kernel restarts (`read`, `write`,
//! `futex`, `wait`, …) restarts transparently; one that is never restarted after a handler
//! (`poll`, `epoll_wait`, `select`, `nanosleep`, `clock_nanosleep`, `sigtimedwait`, a socket
//! call with a timeout set) fails with `EINTR`, as it would in any program that handles
//! signals. A task blocked in such a call blocks its worker anyway (the guide says to use
//! `task::blocking`); the timer is armed only while a task runs, for at most one signal per
//! due time. The worker's own futex waits restart or re-check. A worker without an alternate
//! stack, whose timer could not be made, or of a runtime built with
//! `Builder::tick_timer(false)`, has no timer: its word carries `TICK_BY_CLOCK`, and every
//! scheduling point reads the clock as before (`task/current.rs`).

use super::{QueuedTask, Worker, WorkerThread};
use crate::locking::atomic::Ordering;
use crate::locking::resched::{TICK_BY_CLOCK, TICK_CHECK};
use lagom_policy::RunQueue;

/// A worker thread's tick timer (module doc).
#[derive(Debug, Default)]
pub(crate) struct TickTimer {
    /// The timer, once made (never under loom, where no worker thread runs).
    #[cfg(not(loom))]
    timer: core::cell::OnceCell<crate::sys::timer::ThreadTimer>,
    /// `CLOCK_MONOTONIC` less the scheduler clock at the last arming, ns.
    #[cfg(not(loom))]
    offset: core::cell::Cell<i64>,
}

impl WorkerThread {
    /// Makes this worker thread's tick timer, if the runtime asks for one and the thread
    /// has an alternate signal stack for its signal; otherwise, or if the OS refuses, marks
    /// the worker's word `TICK_BY_CLOCK` (module doc). Called on the worker's own thread,
    /// after `set_local` (the handler finds the worker through it).
    pub(crate) fn tick_start(&self) {
        #[cfg(not(loom))]
        if self.shared.tick_timer && self.signals().is_some() {
            use crate::sys::timer;
            let made = timer::install_tick_handler(on_tick_signal).and_then(|()| {
                timer::unblock_tick_signal();
                timer::ThreadTimer::for_calling_thread(timer::TICK_SIGNAL, timer::tick_token())
            });
            if let Ok(t) = made {
                let _ = self.tick.timer.set(t);
                self.tick.offset.set(Self::clock_offset());
                return;
            }
        }
        self.resched().set(TICK_BY_CLOCK);
    }

    /// Deletes the tick timer (at the worker's exit, before `set_local(null)`): a signal
    /// still pending finds no worker and is dropped.
    pub(crate) fn tick_stop(&self) {
        #[cfg(not(loom))]
        if let Some(t) = self.tick.timer.get() {
            let _ = t.disarm();
        }
        self.worker().tick_at.store(u64::MAX, Ordering::Relaxed);
    }

    /// The tick found `TICK_FIRED`: the one-shot timer is no longer armed.
    #[inline]
    pub(crate) fn tick_fired(&self) {
        let w = self.worker();
        w.tick_at.store(u64::MAX, Ordering::Relaxed);
        w.stats.inc_owned(&w.stats.tick_timer_fires);
    }

    /// Arms the tick timer for the earliest time something is due for the running task of
    /// `rq` (this worker's runqueue, locked by the caller), if that is before the time armed
    /// (module doc, "Arming"); answers `TICK_CHECK`. At most one system call, made only when
    /// the time moved earlier.
    #[inline]
    pub(crate) fn tick_rearm(&self, rq: &RunQueue<QueuedTask>) {
        let r = self.resched();
        r.take(TICK_CHECK);
        #[cfg(not(loom))]
        if self.tick.timer.get().is_some() {
            let mut at = match rq.curr_resched_at() {
                // Others wait: tick at least every `progress_tick` (its doc) from the last
                // point of progress, which the caller has just stored. Mutant
                // `monitor_no_progress_tick` (runtime/tests/mutants.sh): a long slice that
                // calls `cond_resched` is reported as held.
                #[cfg(not(lagom_mutant = "monitor_no_progress_tick"))]
                Some(at) => at.min(
                    self.worker()
                        .last_point
                        .load(Ordering::Relaxed)
                        .saturating_add(self.shared.progress_tick),
                ),
                #[cfg(lagom_mutant = "monitor_no_progress_tick")]
                Some(at) => at,
                None => u64::MAX,
            };
            if self.shared.workers.len() > 1 {
                at = at.min(self.next_balance.get());
            }
            if let Some(d) = self.timers.borrow().next_deadline() {
                at = at.min((d as i64).wrapping_sub(self.tick.offset.get()).max(0) as u64);
            }
            if at < self.worker().tick_at.load(Ordering::Relaxed) {
                self.tick_arm(at);
            }
        }
        #[cfg(loom)]
        let _ = rq;
    }

    /// `CLOCK_MONOTONIC` less the scheduler clock now, ns (module doc: the timer runs on the
    /// one, the times are on the other).
    #[cfg(not(loom))]
    fn clock_offset() -> i64 {
        let sched = crate::sys::time::sched_clock();
        let mono = crate::sys::time::monotonic_ns();
        (mono as i64).wrapping_sub(sched as i64)
    }

    /// Arms the timer for scheduler-clock time `at`: out of line, a system call.
    #[cfg(not(loom))]
    #[inline(never)]
    fn tick_arm(&self, at: u64) {
        let Some(t) = self.tick.timer.get() else {
            return;
        };
        let offset = Self::clock_offset();
        self.tick.offset.set(offset);
        let mono_at = (at as i64).wrapping_add(offset).max(1) as u64;
        match t.arm_at(mono_at) {
            Ok(()) => {
                let w = self.worker();
                w.tick_at.store(at, Ordering::Relaxed);
                w.stats.inc_owned(&w.stats.tick_timer_arms);
            }
            // The OS refused (nothing in the documented failures applies to a live timer of
            // the calling thread): fall back to reading the clock, for good.
            Err(_) => self.resched().set(TICK_BY_CLOCK),
        }
    }

    /// The worker is about to sleep idle: disarms the tick timer if it is armed (the idle
    /// sleep ends at the next `sleep` timer by itself; the other times concern a running
    /// task). Its bit, if the timer fired meanwhile, makes the next task's first
    /// `cond_resched` a tick.
    #[inline]
    pub(crate) fn tick_disarm(&self) {
        let w = self.worker();
        if w.tick_at.load(Ordering::Relaxed) == u64::MAX {
            return;
        }
        w.tick_at.store(u64::MAX, Ordering::Relaxed);
        #[cfg(not(loom))]
        if let Some(t) = self.tick.timer.get() {
            let _ = t.disarm();
        }
    }
}

/// After an enqueue onto worker `w` (under its runqueue lock `rq`) that did not ask for a
/// switch: if the running task's charge will now ask before the time the tick timer is armed
/// for (a task is queued beside one that ran alone, or the wakeup check shortened its
/// protection), flags `TICK_CHECK`, so that its next `cond_resched` re-arms (the kernel's
/// `hrtick_update` at an enqueue). The worker's own thread re-arms after its picks anyway.
#[inline]
pub(crate) fn tick_check(w: &Worker, rq: &RunQueue<QueuedTask>) {
    if w.resched.load() & (TICK_CHECK | crate::locking::resched::NEED_RESCHED | TICK_BY_CLOCK) != 0
    {
        return;
    }
    if let Some(at) = rq.curr_resched_at()
        && at < w.tick_at.load(Ordering::Relaxed)
    {
        w.resched.set(TICK_CHECK);
    }
}

#[cfg(not(loom))]
/// The tick signal's hook (`sys::timer::install_tick_handler`), on the thread the signal
/// interrupted: sets `TICK_FIRED` on its worker. Async-signal-safe: a thread-local read
/// (std's const-initialised `thread_local!`, or without std `pthread_getspecific`, which
/// reads the thread's own block and takes no lock) and one atomic `or`.
fn on_tick_signal() {
    if let Some(wt) = super::local() {
        wt.resched().set(crate::locking::resched::TICK_FIRED);
    }
}
