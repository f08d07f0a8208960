//! The task clock: what a running task is charged, with the time its worker
//! thread spent off its CPU left out, as the kernel's `rq_clock_task` leaves out the time a
//! CPU spent on interrupts or lost to a hypervisor (steal time).
//!
//! ## Why
//!
//! A worker charges the running task the scheduler-clock time between two accounting points
//! (`update_curr`). The host schedules the worker's thread like any other: when it gives the
//! CPU to another thread for a few milliseconds, the wall clock runs on and the task is
//! charged that time too, though it never ran. On a busy host, its slices then end early,
//! the host's stalls land on whichever task was current (at 4, 8, 12 ms: the host's tick),
//! and the shares drift from the weights by how the stalls happened to fall.
//!
//! ## What [`TaskClock::OnCpu`] does
//!
//! The kernel learns steal time continuously (the hypervisor keeps a counter); the only
//! record of a thread's time on a CPU that Linux gives a process is its CPU clock
//! (`CLOCK_THREAD_CPUTIME_ID`, `getrusage(RUSAGE_THREAD)`, `/proc/thread-self/schedstat`),
//! and every one of them is a system call: 0.1–0.7 µs (`benches/sched_call.rs`'s
//! `task_clock/*`), too much for every accounting point (a same-worker park/unpark round
//! trip costs about 0.25 µs in all). So the worker's thread reads its CPU clock only where a
//! stall can have happened, which its own timing shows ([`StallMeter`]):
//!
//! 1. At each accounting point on its own runqueue (a switch, the tick of `cond_resched`,
//!    an exit, a local wakeup or spawn, `task::cpu_time`), the thread notes the scheduler
//!    clock. A stall of the thread is a gap between two consecutive points.
//! 2. If the gap since the previous point is at least [`TaskClock::STALL_GAP`] (four ticks of
//!    `cond_resched`; a task that computes that long between two calls gets a read too), or
//!    [`TaskClock::RESYNC`] has passed since the last read, the thread reads its CPU clock. Wall time
//!    since that read less CPU time since it is the time the thread was off its CPU;
//!    at most the gap since the previous point of it is this gap's stall.
//! 3. The stall is left out of the running task's charge
//!    ([`RunQueue::exclude_from_curr`](lagom_policy::RunQueue::exclude_from_curr), which
//!    moves its accounting point forward) before the point's `update_curr`, and counted in
//!    `host_stalls` / `host_stall_ns`.
//! 4. When the worker leaves its idle context for a task, the thread reads its CPU clock to
//!    start afresh ([`StallMeter::rebase`]): a worker asleep is off its CPU by choice.
//!
//! ## Limits
//!
//! * Stalls shorter than [`TaskClock::STALL_GAP`] are caught only where a read happens anyway
//!   (a longer gap, or every [`TaskClock::RESYNC`]), and only up to that point's gap: a few tens of µs each
//!   stay charged.
//! * A remote waker that takes this worker's runqueue lock charges the running task up to
//!   its own clock: a stall it spans, before this worker's next point has seen it, stays
//!   charged (the kernel reads the target's steal time under the lock; lagom cannot read
//!   another thread's CPU clock that cheaply).
//! * Timers, slices' wall-clock deadlines and the ticks stay on the scheduler clock; only the
//!   charge changes.
//!
//! [`TaskClock::OnCpu`] is the default: on a machine shared with other processes the wall
//! clock ends slices early and wakes a sleeper milliseconds late (the book's lab page "On a
//! shared machine" has the figures), and on a machine the runtime has to itself it costs
//! one clock comparison per accounting point and a CPU-clock read per idle exit.
//! [`TaskClock::Wall`] reads nothing and charges wall time.

use core::cell::Cell;

/// Which clock charges a running task for its run time ([`crate::runtime::Builder::task_clock`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TaskClock {
    /// The scheduler clock (wall time): a task is charged the time its worker's thread was
    /// off its CPU while the task was current. Costs nothing.
    Wall,
    /// The scheduler clock less the time the worker's thread was off its CPU, measured with
    /// the thread's CPU clock where a stall can have happened (the module doc of
    /// `worker/clock.rs`): the kernel's `rq_clock_task`. Costs a system call per stall, per
    /// long gap between two scheduling calls and every [`RESYNC`](TaskClock::RESYNC) of
    /// running. The default.
    #[default]
    OnCpu,
}

impl TaskClock {
    /// [`OnCpu`](TaskClock::OnCpu)'s tuning: the gap between two accounting points on one
    /// worker thread (scheduler-clock ns) from which the thread reads its CPU clock: four
    /// ticks of `cond_resched`.
    pub const STALL_GAP: u64 = 200_000;

    /// [`OnCpu`](TaskClock::OnCpu)'s tuning: the longest a worker thread runs tasks without
    /// reading its CPU clock (ns), so that stalls shorter than
    /// [`STALL_GAP`](TaskClock::STALL_GAP) are counted too, up to each point's gap.
    pub const RESYNC: u64 = 4_000_000;
}

/// A worker thread's measure of its host stalls ([`TaskClock::OnCpu`]; module doc). Owned by
/// the thread: plain cells.
#[derive(Debug, Default)]
pub(crate) struct StallMeter {
    /// The scheduler clock at the previous accounting point.
    last_point: Cell<u64>,
    /// The scheduler clock at the last read of the thread's CPU clock.
    last_wall: Cell<u64>,
    /// The thread's CPU clock at that read.
    last_cpu: Cell<u64>,
}

impl StallMeter {
    /// Starts afresh at scheduler-clock time `now` (the worker leaves its idle context): the
    /// time since the previous point was not a stall.
    pub(crate) fn rebase(&self, now: u64) {
        self.last_point.set(now);
        self.last_wall.set(now);
        self.last_cpu.set(crate::sys::time::thread_cpu_ns());
    }

    /// The stall to leave out of the running task's charge at the accounting point at
    /// scheduler-clock time `now` (module doc, steps 1–2); 0 if none was seen.
    pub(crate) fn stall(&self, now: u64) -> u64 {
        let gap = now.saturating_sub(self.last_point.get());
        self.last_point.set(now.max(self.last_point.get()));
        let since_read = now.saturating_sub(self.last_wall.get());
        if gap < TaskClock::STALL_GAP && since_read < TaskClock::RESYNC {
            return 0;
        }
        let cpu = crate::sys::time::thread_cpu_ns();
        let ran = cpu.saturating_sub(self.last_cpu.get());
        self.last_wall.set(now);
        self.last_cpu.set(cpu);
        since_read.saturating_sub(ran).min(gap)
    }
}
