//! The calls a task makes about itself: `current`, `runtime`, `sched_info`, `yield_now`,
//! `cond_resched`, `sleep`, `sleep_until`.

use alloc::format;
use alloc::string::String;
use core::time::Duration;

use crate::locking::resched::{NEED_RESCHED, TICK_BY_CLOCK, TICK_CHECK, TICK_FIRED, WAKE_PENDING};
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

/// The CPU time the scheduler has charged to the calling task so far (its entity's
/// `sum_exec_runtime`, as in `/proc/<pid>/sched`: the time it was current, less its
/// worker's host stalls with [`TaskClock::OnCpu`](crate::runtime::TaskClock::OnCpu)); `None`
/// outside tasks.
pub fn cpu_time() -> Option<Duration> {
    sched_info().map(|i| Duration::from_nanos(i.entity.sum_exec_runtime))
}

/// The calling task's scheduling state, read by [`sched_info`]: what `/proc/<pid>/sched`
/// shows of a thread (`se.vruntime`, `se.deadline`, `se.slice`, `se.sum_exec_runtime`), with
/// its runqueue's average vruntime to read the lag and the request against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchedInfo {
    /// Its entity, charged up to the call (weight, vruntime, deadline, slice, run time).
    pub entity: lagom_policy::SchedEntity,
    /// Its runqueue's `avg_vruntime` (V) at the call.
    pub avg_vruntime: u64,
}

impl SchedInfo {
    /// Its lag, `V − vruntime` in virtual ns: positive while it is owed service.
    pub fn lag(&self) -> i64 {
        self.avg_vruntime.wrapping_sub(self.entity.vruntime) as i64
    }

    /// What is left of its request, `deadline − vruntime` in virtual ns: the request is a
    /// slice long when issued, half of one for a new task's first with
    /// PLACE_DEADLINE_INITIAL, and kept across a move between workers with
    /// PLACE_REL_DEADLINE.
    pub fn deadline_left(&self) -> i64 {
        self.entity.deadline.wrapping_sub(self.entity.vruntime) as i64
    }
}

/// The calling task's scheduling state ([`SchedInfo`]), charged up to now; `None` outside
/// tasks.
///
/// ```
/// let rt = lagom::Runtime::builder().build()?;
/// let info = rt.block_on(|| lagom::task::sched_info().unwrap());
/// assert!(info.deadline_left() <= info.entity.slice as i64);
/// # Ok::<(), lagom::Error>(())
/// ```
pub fn sched_info() -> Option<SchedInfo> {
    let wt = local()?;
    let t = worker::current_task()?;
    let w = wt.worker();
    let now = crate::sys::time::sched_clock();
    let mut rq = w.rq.lock();
    wt.exclude_host_stall(&mut rq, now);
    // The charge may end the task's request: its resched is not dropped (the next
    // `cond_resched` switches), as the kernel's `update_curr` sets need-resched itself.
    if rq.update_curr(now) {
        w.resched.set_need_resched();
    }
    // SAFETY: the running task's scheduling part belongs to this worker (it runs here).
    let h = unsafe { t.sched(|s| s.handle) }?;
    let entity = *rq.entity(h);
    Some(SchedInfo {
        entity,
        avg_vruntime: rq.avg_vruntime(),
    })
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

/// Without a tick timer (`TICK_BY_CLOCK`, `worker/tick.rs`): how long `cond_resched` may go
/// between two full ticks when nothing asks for the CPU — the latest a used-up request is
/// noticed and the granularity of the periodic balance, well below any slice (0.1 ms at the
/// least). The policy's constant, which the simulator's scheduling points use too.
pub(crate) const TICK: u64 = lagom_policy::COND_RESCHED_TICK;

/// The cheap tick: charges the running task and switches away if it used up its request,
/// a wakeup asked for preemption, or wakeups wait on this worker's wakelist; every few
/// milliseconds it also runs the periodic load balance, which may pull tasks to this worker.
/// Long compute loops call it. Outside tasks it does nothing.
///
/// A call with nothing due is one load: the worker's resched word (`locking/resched.rs`),
/// whose bits a wakeup that asks for this CPU, a wakelist push and the worker's tick timer
/// set. The timer (`worker/tick.rs`, the kernel's tick and high-resolution tick) is armed for
/// the end of the running task's protected slice, the worker's next `sleep` timer and its
/// next periodic balance; its signal sets the bit that makes the next call a full tick
/// (charge, timers, balance, switch if due). So a used-up request is noticed within the
/// signal's delivery, some µs, and the clock is read only where time is charged.
///
/// A runtime built with `Builder::tick_timer(false)`, or a worker whose timer the OS refused,
/// reads the clock at each call instead: a call within 50 µs (`TICK`) of the last full tick,
/// before the worker's next timer, with nothing flagged, returns at once, so a used-up
/// request is noticed at most 50 µs late there (the time is charged all the same, so shares
/// are unchanged). What a call costs either way, and what a tight loop loses by calling it
/// every iteration, is measured by `benches/sched_call.rs` (the book's
/// `docs/src/lab/sched-call.md`).
///
/// Past half of a shutdown's timeout, a task in `cond_resched` is cancelled: the call
/// unwinds ([`crate::Runtime::shutdown_timeout`]).
#[inline]
pub fn cond_resched() {
    resched_point(true);
}

/// The preemption point after a task's spawn ([`super::Builder::spawn`], [`super::spawn`],
/// `Scope::spawn`): [`cond_resched`] without its cancellation point, so that a spawn never
/// unwinds with a shutdown's cancellation. The kernel's `fork` returns to user space through
/// the same check (need-resched, set by the tick once the slice is used up or by a wakeup),
/// so a task that spawns in a loop gives its worker up when its request is used up, and the
/// children queued behind it run (and, if they block, end) meanwhile instead of all waiting
/// for the spawner's next blocking call, all alive at once with every stack cold.
#[inline]
pub(crate) fn spawn_point() {
    // Mutant `spawn_no_preempt_point` (runtime/tests/mutants.sh): a spawn never switches.
    #[cfg(not(lagom_mutant = "spawn_no_preempt_point"))]
    resched_point(false);
}

/// The preemption point of a call into lagom that returns without blocking, where a loop of
/// such calls would otherwise never give its worker up: a failing attempt (`try_lock`,
/// `try_read`, `try_write`, `try_recv`, `try_send`, `try_acquire`, a `try_iter` that ends),
/// a timed wait whose deadline had passed before it slept (`recv_timeout`, `send_timeout`,
/// `wait_timeout`, `park_timeout`, `sleep` with a zero or past time), an unbounded channel's
/// `send` (which never blocks), and an `is_finished` that says no. It is [`cond_resched`]'s
/// check without its cancellation point, as [`spawn_point`]: a spin on any of them gives the
/// worker up once the spinner's request is used up, a wakeup asks for the CPU or a timer is
/// due, so the task it waits for runs even on one worker; and the call never unwinds with a
/// shutdown's cancellation (a `try_lock` that could unwind would surprise every caller).
///
/// The kernel's analogue is the return to user space: every system call, one that fails with
/// `EAGAIN` included, leaves through the need-resched check, and the tick preempts a thread
/// that spins in user space on a lock word. lagom has no tick interrupt, so the attempt itself
/// is the check.
#[inline]
pub(crate) fn try_point() {
    // Mutant `try_no_preempt_point` (runtime/tests/mutants.sh): a failing attempt never
    // switches, and std's spinning channel tests hang on one worker.
    #[cfg(not(lagom_mutant = "try_no_preempt_point"))]
    resched_point(false);
}

/// [`cond_resched`], with or without its cancellation point (`cancel`): one load of the
/// resched word, and the full tick only if a bit is set.
#[inline(always)]
fn resched_point(cancel: bool) {
    let Some(wt) = local() else { return };
    let due = wt.resched().load();
    if due == 0 {
        return;
    }
    full_tick(wt, due, cancel);
}

/// The full tick of [`cond_resched`], with `due` the resched word as the caller read it:
/// [`tick`], then `schedule()` if it says so, followed by the cancellation point if
/// `cancel`. Without a tick timer (`TICK_BY_CLOCK`) it first reads the clock and returns if
/// nothing is flagged and the next full tick is not due.
#[inline(never)]
fn full_tick(wt: &worker::WorkerThread, due: u32, cancel: bool) {
    if worker::with_current_task(|_| ()).is_none() {
        return;
    }
    let now = crate::sys::time::sched_clock();
    // Without the timer, the policy's clock test, shared with the simulator's scheduling
    // points (which tick by the clock too).
    if due & TICK_BY_CLOCK != 0
        && !lagom_policy::resched_point_due(
            now,
            wt.next_tick.get(),
            due & NEED_RESCHED != 0,
            due & WAKE_PENDING != 0,
        )
    {
        return;
    }
    if tick(wt, now) {
        schedule(Reason::Preempt);
        if cancel {
            worker::with_current_task(super::cancel::point);
        }
    }
}

/// The tick of worker thread `wt`'s running task at scheduler-clock time `now` (the
/// kernel's `scheduler_tick` with the pending work of the interrupts that set the resched
/// word): takes the tick bits, runs the periodic balance when due, looks at the timers,
/// need-resched and the wakelist, and charges the running task; re-arms the tick timer when
/// nothing asks for a switch. Returns whether to call `schedule()`. Split out of `full_tick`
/// so that a loom model runs it (`lagom::model`).
#[inline]
pub(crate) fn tick(wt: &worker::WorkerThread, now: u64) -> bool {
    let w = wt.worker();
    let due = w.resched.take(TICK_FIRED | TICK_CHECK);
    if due & TICK_FIRED != 0 {
        wt.tick_fired();
    }
    // The stall monitor's evidence of progress (`sched/monitor.rs`): a task that calls
    // `cond_resched` reaches here at each of its ticks, whether or not it switches.
    w.last_point
        .store(now, crate::locking::atomic::Ordering::Relaxed);
    balance_tick(wt, now);
    let mut next = now.saturating_add(TICK);
    let timer_due = match wt.timers.borrow().next_deadline() {
        Some(d) => {
            let mono = crate::sys::time::monotonic_ns();
            // The timer's distance, moved onto the scheduler clock.
            next = next.min(now.saturating_add(d.saturating_sub(mono)));
            d <= mono
        }
        None => false,
    };
    if due & TICK_BY_CLOCK != 0 {
        wt.next_tick.set(next);
    }
    w.resched.load() & (NEED_RESCHED | WAKE_PENDING) != 0 || timer_due || {
        let mut rq = w.rq.lock();
        wt.exclude_host_stall(&mut rq, now);
        let resched = rq.task_tick(now);
        if !resched {
            wt.tick_rearm(&rq);
        }
        resched
    }
}

/// Sleeps for at least `d`: [`sleep_until`]`(now + d)`.
pub fn sleep(d: Duration) {
    sleep_until(crate::time::Instant::now().add_saturating(d));
}

/// Sleeps until `deadline` — a `std::time::Instant`, as std's `thread::sleep_until` takes
/// (with the `std` feature), or a [`crate::time::Instant`] (always; the only kind without
/// `std`), both points on the monotonic clock: the task blocks and its worker's timer wakes
/// it. Outside tasks the calling OS thread sleeps. A deadline in the past returns at once,
/// after a preemption point (a loop of zero sleeps gives its worker up as a loop of
/// `cond_resched` does, without the cancellation). An `unpark` of the task during the sleep
/// does not end it (the task parks again until the deadline), but it is consumed.
pub fn sleep_until(deadline: impl Into<crate::time::Instant>) {
    let deadline = deadline.into().as_nanos();
    let mut slept = false;
    loop {
        let now = crate::sys::time::monotonic_ns();
        if now >= deadline {
            if !slept {
                // A sleep that is over before it began is a spin's step (`try_point`).
                try_point();
            }
            return;
        }
        slept = true;
        match (local(), worker::current_task()) {
            (Some(wt), Some(t)) => {
                let _timer = super::park::TimerGuard(super::park::arm_timer(wt, deadline, t));
                super::park::park();
            }
            _ => {
                let f = crate::locking::futex::Futex::new(0);
                f.wait(0, Some(deadline - now));
            }
        }
    }
}
