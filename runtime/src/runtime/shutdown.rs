//! The shutdown of a [`Runtime`]: its phases are in the module doc of `lagom::runtime`.

use alloc::sync::Arc;
use core::time::Duration;

use super::{DEFAULT_SHUTDOWN_TIMEOUT, Runtime, Stats};
use crate::locking::atomic::Ordering;
use crate::trace::Trace;
use crate::worker::{PHASE_DRAIN, PHASE_EXIT, PHASE_FORCE, Task};

impl Runtime {
    /// [`shutdown_timeout`](Runtime::shutdown_timeout) with [`DEFAULT_SHUTDOWN_TIMEOUT`];
    /// returns the final counters.
    ///
    /// # Panics
    /// If called (or the runtime dropped) from one of the runtime's own tasks.
    #[track_caller]
    pub fn shutdown(self) -> Stats {
        self.shutdown_timeout(DEFAULT_SHUTDOWN_TIMEOUT)
    }

    /// Shuts the runtime down within `timeout` (the module doc has the phases): runnable
    /// tasks run on; blocked tasks are cancelled — their blocking call unwinds, so their
    /// destructors run, and their `join` returns a cancelled [`JoinError`](crate::JoinError);
    /// from `timeout / 2` every task still alive is cancelled at its next call into lagom (a
    /// loop calling `cond_resched` or `yield_now` unwinds there); from `3 * timeout / 4` a
    /// task still alive (it caught the cancellation and went on) is abandoned at its next
    /// call; at `timeout` the worker threads that stopped are joined and every task left is
    /// freed without unwinding. Returns as soon as no task is left. What could not be
    /// finished is reported in [`Stats::shutdown`] (and on stderr): abandoned tasks, and
    /// worker threads stuck in a task that never calls into lagom (detached, the runtime's
    /// memory leaked). Dropping a runtime does the same with [`DEFAULT_SHUTDOWN_TIMEOUT`].
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// let rt = lagom::Runtime::builder().build()?;
    /// let h = rt.spawn(|| loop {
    ///     lagom::task::cond_resched(); // never ends on its own
    /// });
    /// let t0 = Instant::now();
    /// let stats = rt.shutdown_timeout(Duration::from_millis(200));
    /// assert!(t0.elapsed() < Duration::from_millis(200));
    /// assert!(h.join().unwrap_err().is_cancelled());
    /// assert_eq!((stats.live_tasks, stats.shutdown.abandoned), (0, 0));
    /// # Ok::<(), lagom::Error>(())
    /// ```
    ///
    /// # Panics
    /// If called from one of the runtime's own tasks.
    #[track_caller]
    pub fn shutdown_timeout(mut self, timeout: Duration) -> Stats {
        self.stop(timeout);
        self.stats()
    }

    /// [`shutdown`](Runtime::shutdown), and the complete trace: every event the workers
    /// recorded, consistent with the final counters.
    ///
    /// # Panics
    /// As [`shutdown`](Runtime::shutdown).
    #[track_caller]
    pub fn shutdown_with_trace(mut self) -> (Stats, Trace) {
        self.stop(DEFAULT_SHUTDOWN_TIMEOUT);
        (self.stats(), self.trace())
    }

    /// The shutdown (module doc).
    #[track_caller]
    fn stop(&mut self, timeout: Duration) {
        if self.threads.is_empty() {
            return;
        }
        if crate::worker::local().is_some_and(|wt| Arc::ptr_eq(&wt.shared, &self.shared)) {
            // Joining the workers from one of them would wait for itself forever.
            panic!("lagom: a runtime cannot be shut down or dropped from one of its own tasks");
        }
        let shared = &*self.shared;
        let d = u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX);
        let start = crate::sys::time::monotonic_ns();
        let at = |part: u64| start.saturating_add(d / 4 * part);
        shared.set_phase(PHASE_DRAIN);
        loop {
            let now = crate::sys::time::monotonic_ns();
            if self.live_tasks() == 0 || now >= at(3) {
                break;
            }
            // Without std nothing can unwind a task: once nothing is runnable, the blocked
            // tasks are abandoned at once (module doc).
            if !cfg!(feature = "std") && shared.looks_idle() {
                break;
            }
            if now >= at(2) && shared.phase() < PHASE_FORCE {
                shared.set_phase(PHASE_FORCE);
            }
            nap(at(3).min(now + POLL));
        }
        shared.set_phase(PHASE_EXIT);
        let end = start.saturating_add(d);
        while !shared
            .workers
            .iter()
            .all(|w| w.exited.load(Ordering::Acquire))
        {
            let now = crate::sys::time::monotonic_ns();
            if now >= end {
                break;
            }
            nap(end.min(now + POLL));
        }
        let mut stuck = 0;
        for (w, t) in shared.workers.iter().zip(self.threads.drain(..)) {
            if w.exited.load(Ordering::Acquire) {
                t.join();
            } else {
                // Its task never calls into lagom: the thread cannot be stopped, and it keeps
                // the runtime's state alive through its own `Arc` (module doc).
                t.detach();
                stuck += 1;
            }
        }
        self.shutdown.stuck_workers = stuck;
        // Closures of `task::blocking` still running may borrow from the tasks' stacks
        // (`task/blocking.rs`): then none is unmapped.
        let borrows = shared.blocking_borrows.load(Ordering::Acquire);
        self.shutdown.blocking_borrows = borrows;
        self.stop_monitor(end);
        if stuck == 0 {
            self.shutdown.abandoned = self.free_leftovers(borrows == 0);
        }
        if stuck > 0 || self.shutdown.abandoned > 0 {
            let kept = if borrows > 0 {
                alloc::format!(
                    "; {borrows} closure(s) of task::blocking still running may borrow from \
                     their tasks' stacks, so the abandoned tasks' stacks are leaked"
                )
            } else {
                alloc::string::String::new()
            };
            let msg = alloc::format!(
                "lagom: shutdown did not finish within {timeout:?}: {} task(s) abandoned \
                 without unwinding, {stuck} worker thread(s) left running a task that never \
                 calls into lagom (detached; the runtime's memory is leaked){kept}\n",
                self.shutdown.abandoned
            );
            crate::sys::signal::write_stderr(msg.as_bytes());
        }
    }

    /// Ends the stall monitor once the workers are done: joined if it ends by `end` (or
    /// within a millisecond, for a shutdown whose time is up), else — its report callback
    /// blocks — detached, as a stuck worker is; its reference keeps the runtime's state
    /// alive until it returns.
    fn stop_monitor(&mut self, end: u64) {
        let Some(m) = self.monitor.take() else { return };
        crate::sched::monitor::stop(&self.shared);
        let end = end.max(crate::sys::time::monotonic_ns() + 1_000_000);
        while !m.exited.load(Ordering::Acquire) {
            let now = crate::sys::time::monotonic_ns();
            if now >= end {
                m.thread.detach();
                return;
            }
            nap(end.min(now + POLL));
        }
        m.thread.join();
    }

    /// Tasks spawned and not yet freed, over every worker's registry.
    fn live_tasks(&self) -> usize {
        self.shared.workers.iter().map(|w| w.tasks.counts().0).sum()
    }

    /// With every worker stopped and joined, frees every task that has not ended (module
    /// doc), unmapping their stacks if `unmap` (else leaking them: a closure of
    /// `task::blocking` may still borrow from one); returns how many there were.
    fn free_leftovers(&mut self, unmap: bool) -> usize {
        // No wakeup may reach a task left from here on: the joins completed below, a
        // `task::blocking` closure that ends later or an outside unparker would otherwise
        // claim it and queue it on a runqueue about to be replaced.
        for w in &self.shared.workers {
            // SAFETY: every worker has stopped and been joined.
            unsafe { w.tasks.for_each_stopped(Task::retire) };
        }
        for w in &self.shared.workers {
            // Wakelist entries borrow their registry's reference (`wake::queue_wakelist`):
            // empty the lists before the registries free the tasks they point to.
            for _ in w.wakelist.take_all() {}
            let cfg = *w.rq.lock().config();
            let old = core::mem::replace(&mut *w.rq.lock(), lagom_policy::RunQueue::new(cfg));
            drop(old);
        }
        let mut abandoned = 0;
        for w in &self.shared.workers {
            let cancel = |t: &Task| {
                // SAFETY: every worker has stopped: nobody else touches the task's parts.
                let fiber = unsafe { t.sched(|s| s.fiber.take()) };
                // A task that still has its fiber never ended: its outcome was not delivered.
                let Some(f) = fiber else { return false };
                if unmap {
                    // SAFETY: the fiber is suspended and will never be resumed; nothing
                    // refers into its stack any more (every worker stopped, its wait nodes
                    // are unreachable, and no borrowing blocking closure runs).
                    drop(unsafe { f.into_stack_abandoned() });
                } else {
                    core::mem::forget(f);
                }
                if let Some(joiner) = t.completion.cancel() {
                    crate::wake::unpark(&joiner, lagom_policy::WakeFlags::NONE);
                }
                abandoned += 1;
                true
            };
            // SAFETY: every worker has stopped and been joined.
            unsafe { w.tasks.cancel_all(cancel) };
        }
        abandoned
    }
}

/// How often a shutdown looks whether it is done.
const POLL: u64 = 1_000_000;

/// Sleeps the calling OS thread until `deadline` (monotonic ns) or a little after.
fn nap(deadline: u64) {
    let now = crate::sys::time::monotonic_ns();
    if deadline > now {
        crate::locking::futex::Futex::new(0).wait(0, Some(deadline - now));
    }
}

/// Shuts the runtime down as [`Runtime::shutdown`] does: within [`DEFAULT_SHUTDOWN_TIMEOUT`],
/// cancelling (unwinding) the tasks still blocked, then those still running, and reporting
/// on stderr what it had to abandon (the module doc of [`Runtime::shutdown_timeout`]).
impl Drop for Runtime {
    fn drop(&mut self) {
        self.stop(DEFAULT_SHUTDOWN_TIMEOUT);
    }
}
