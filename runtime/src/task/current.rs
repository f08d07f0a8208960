//! The calls a task makes about itself: `current`, `runtime`, `yield_now`, `cond_resched`,
//! `sleep`.

use alloc::format;
use alloc::string::String;
use core::time::Duration;

use crate::locking::atomic::Ordering;
use crate::sched::{Reason, balance_tick, schedule};
use crate::worker::{self, local};

/// What a task knows about itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CurrentTask {
    /// Its id (unique in the process).
    pub id: u64,
    /// Its name.
    pub name: String,
    /// The OS CPU of the worker running it now.
    pub cpu: usize,
}

/// The calling task (`None` outside tasks).
pub fn current() -> Option<CurrentTask> {
    let wt = local()?;
    let t = worker::current_task()?;
    Some(CurrentTask {
        id: t.id,
        name: if t.name.is_empty() {
            format!("task-{}", t.id)
        } else {
            t.name.clone()
        },
        cpu: wt.worker().os_cpu,
    })
}

/// The run time the scheduler has charged to the calling task so far (its entity's
/// `sum_exec_runtime`, as in `/proc/<pid>/sched`); `None` outside tasks.
pub fn runtime() -> Option<Duration> {
    let wt = local()?;
    let t = worker::current_task()?;
    let w = wt.worker();
    let mut rq = w.rq.lock();
    // The charge may end the task's request: its resched is not dropped (the next
    // `cond_resched` switches), as the kernel's `update_curr` sets need-resched itself.
    if rq.update_curr(crate::sys::time::sched_clock()) {
        w.need_resched.store(true, Ordering::Relaxed);
    }
    // SAFETY: the running task's scheduling part belongs to this worker (it runs here).
    let h = unsafe { t.sched(|s| s.handle) }?;
    Some(Duration::from_nanos(rq.entity(h).sum_exec_runtime))
}

/// Gives up the rest of the calling task's request and lets the worker pick again
/// (`sched_yield`). Outside tasks it does nothing.
///
/// Past half of a shutdown's timeout, a task in `yield_now` is cancelled: the call unwinds
/// ([`crate::Runtime::shutdown_timeout`]).
pub fn yield_now() {
    if worker::with_current_task(|_| ()).is_some() {
        schedule(Reason::Yield);
        worker::with_current_task(super::cancel::point);
    }
}

/// The cheap tick: charges the running task and switches away if it used up its request,
/// a wakeup asked for preemption, or wakeups wait on this worker's wakelist; every few
/// milliseconds it also runs the periodic load balance, which may pull tasks to this worker.
/// Long compute loops call it. Outside tasks it does nothing.
///
/// Past half of a shutdown's timeout, a task in `cond_resched` is cancelled: the call
/// unwinds ([`crate::Runtime::shutdown_timeout`]).
pub fn cond_resched() {
    let Some(wt) = local() else { return };
    if worker::with_current_task(|_| ()).is_none() {
        return;
    }
    let w = wt.worker();
    let now = crate::sys::time::sched_clock();
    balance_tick(wt, now);
    let resched = w.need_resched.load(Ordering::Relaxed)
        || !w.wakelist.is_empty()
        || wt
            .timers
            .borrow()
            .next_deadline()
            .is_some_and(|d| d <= crate::sys::time::monotonic_ns())
        || w.rq.lock().task_tick(now);
    if resched {
        schedule(Reason::Preempt);
        worker::with_current_task(super::cancel::point);
    }
}

/// Sleeps for at least `d`: the task blocks and its worker's timer wakes it. Outside tasks the
/// calling OS thread sleeps.
pub fn sleep(d: Duration) {
    let start = crate::sys::time::monotonic_ns();
    let deadline = start.saturating_add(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    loop {
        let now = crate::sys::time::monotonic_ns();
        if now >= deadline {
            return;
        }
        match (local(), worker::current_task()) {
            (Some(wt), Some(t)) => {
                wt.timers.borrow_mut().add(deadline, t);
                super::park::park();
            }
            _ => {
                let f = crate::locking::futex::Futex::new(0);
                f.wait(0, Some(deadline - now));
            }
        }
    }
}
