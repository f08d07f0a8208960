//! A virtual CPU: its runqueue (lagom's `policy::RunQueue`), wakelist, timers and idle state,
//! and the scheduling loop the threaded runtime runs on each worker, step for step in virtual
//! time: `schedule()`, `cond_resched()`, the pick, the switch, the idle loop.
//!
//! The steps follow `sched/schedule.rs`, `task/current.rs` (`cond_resched`) and
//! `sched/idle.rs` of the threaded driver, each decision made by the same policy call (`lagom-policy`):
//!
//! * **schedule** (a task blocks, sleeps or yields, or a scheduling point finds a reason):
//!   fire due timers, the balance tick, drain the wakelist, `update_curr`, put the previous
//!   task back (`dequeue(Sleep)` for a sleeper — delayed or removed —, `yield_curr` for a
//!   yield), `pick_next` (finishing delayed dequeues on the way), switch.
//! * **cond_resched** (every `resched` ns of a computing task, and after each spawn): when
//!   the policy's `resched_point_due` says the full tick is due (every
//!   `COND_RESCHED_TICK`, or at once for a request to switch or a wakelist entry), the
//!   balance tick, then schedule if need-resched is set, the wakelist is not empty, a timer
//!   is due, or `task_tick` says the task's request or protection ran out.
//! * **switch**: the next task runs `switch` ns later (charged to it, as the runtime's clock
//!   does); the previous one stays `on_cpu` until then.
//! * **idle loop**: fire timers, drain, pick; else newly idle balance; else spin
//!   `idle_spin` ns (work published meanwhile is seen `wakelist` ns after it was published),
//!   then sleep until kicked (`kick` ns after the kick) or until the next timer.

use alloc::collections::BinaryHeap;
use alloc::vec::Vec;
use core::cmp::Reverse;

use super::engine::{NONE, Sim};
use super::scenario::Preempt;
use super::stats::Counters;
use super::task::State;
use lagom_policy::{
    COND_RESCHED_TICK, DequeueKind, Dequeued, Handle, Pick, RunQueue, SchedEntity, WakeFlags,
    Wakeup, resched_point_due,
};
use lagom_trace::SwitchReason;

/// Why a running task calls `schedule`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Reason {
    Block,
    Yield,
    Preempt,
}

/// Where an idle CPU is in its idle loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Idle {
    /// Its next step runs the idle loop from the top.
    Entering,
    /// Spinning until `until` (or the next timer) for work to appear.
    Spinning,
    /// Asleep on its kick word; a kick or its next timer wakes it.
    Sleeping,
    /// Work was published while it spun or slept; its next step sees it (`kicked`: it was
    /// asleep).
    Waking { kicked: bool },
}

/// What a CPU is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum CpuState {
    /// Switching to its current task, which runs at the next step.
    Switching,
    /// Running its current task; the next step is a scheduling point or the end of a run.
    Running,
    /// In the idle loop.
    Idle(Idle),
}

/// One virtual CPU.
pub(super) struct Cpu {
    pub(super) rq: RunQueue<u32>,
    /// The running task (`NONE`: the idle loop).
    pub(super) curr: u32,
    pub(super) state: CpuState,
    /// Remote wakeups waiting to be activated here, in push order.
    pub(super) wakelist: Vec<u32>,
    pub(super) need_resched: bool,
    pub(super) next_balance: u64,
    /// The periodic-balance state of each of this CPU's domain levels
    /// (`policy::LevelBalance`), made at its first balancing tick.
    pub(super) balance_levels: Vec<lagom_policy::LevelBalance>,
    /// When the running task's scheduling points next run their full tick (0: at the next
    /// one; the threaded `WorkerThread::next_tick`).
    pub(super) next_tick: u64,
    /// Epoch of the planned step (older events are moot).
    pub(super) epoch: u32,
    /// Time of the planned step (`u64::MAX`: none).
    pub(super) planned: u64,
    /// When the running task's present stretch of computing began.
    pub(super) last_point: u64,
    /// Sleep timers of tasks that slept here: (deadline, sequence, task).
    pub(super) timers: BinaryHeap<Reverse<(u64, u64, u32)>>,
    /// Time spent running tasks (switches to them included).
    pub(super) busy: u64,
    /// Of which after the warm-up.
    pub(super) measured_busy: u64,
    /// Since when the current task runs (valid while `curr` is a task).
    pub(super) busy_since: u64,
    pub(super) counters: Counters,
    /// Balance attempts here that found an imbalance, an entity that may come, and moved
    /// nothing, since the last that moved something or found every source all pinned (the
    /// kernel's `sd->nr_balance_failed`, `policy::failed_after`; the threaded runtime's
    /// `Worker::nr_balance_failed`).
    pub(super) nr_balance_failed: u32,
    /// An ITMT active-balance request on this CPU: (the idle preferred CPU, the task that
    /// ran here when it asked), honoured at that task's next wakeup placement.
    pub(super) active_push: Option<(usize, u32)>,
    /// In [`Preempt::Kernel`](super::Preempt) mode, when the pending resched IPI (or
    /// stopper) interrupts the running task (`u64::MAX`: none pending); cleared when the
    /// CPU picks or switches.
    pub(super) ipi_at: u64,
}

impl Cpu {
    pub(super) fn new(rq: RunQueue<u32>) -> Cpu {
        Cpu {
            rq,
            curr: NONE,
            state: CpuState::Idle(Idle::Entering),
            wakelist: Vec::new(),
            need_resched: false,
            next_balance: 0,
            balance_levels: Vec::new(),
            next_tick: 0,
            epoch: 0,
            planned: u64::MAX,
            last_point: 0,
            timers: BinaryHeap::new(),
            busy: 0,
            measured_busy: 0,
            busy_since: 0,
            counters: Counters::default(),
            nr_balance_failed: 0,
            active_push: None,
            ipi_at: u64::MAX,
        }
    }

    fn timer_due(&self, now: u64) -> bool {
        self.timers
            .peek()
            .is_some_and(|Reverse((d, _, _))| *d <= now)
    }

    fn next_timer(&self) -> Option<u64> {
        self.timers.peek().map(|Reverse((d, _, _))| *d)
    }
}

impl Sim {
    /// CPU `c`'s planned step has come.
    pub(super) fn cpu_step(&mut self, c: usize) {
        match self.cpus[c].state {
            CpuState::Switching => {
                self.cpus[c].state = CpuState::Running;
                self.run_task(c);
            }
            CpuState::Running => self.point(c),
            CpuState::Idle(Idle::Spinning) => {
                // The spin ran out (or a timer is due) with no work published.
                if self.cpus[c].timer_due(self.now) {
                    self.idle_loop(c);
                } else {
                    self.idle_sleep(c);
                }
            }
            CpuState::Idle(Idle::Sleeping) => {
                // The sleep timed out: a timer is due.
                self.cpus[c].counters.idle_sleeps += 1;
                self.idle_loop(c);
            }
            CpuState::Idle(Idle::Waking { kicked }) => {
                if kicked {
                    self.cpus[c].counters.idle_sleeps += 1;
                }
                self.idle_loop(c);
            }
            CpuState::Idle(Idle::Entering) => self.idle_loop(c),
        }
    }

    /// The idle loop from the top (`sched/idle.rs`): timers, drain, pick; newly idle
    /// balance; then spin, then sleep.
    fn idle_loop(&mut self, c: usize) {
        loop {
            self.fire_timers(c);
            self.drain(c);
            if let Some(n) = self.pick(c) {
                self.trace_switch(c, None, Some(n), SwitchReason::Idle);
                self.switch_to(c, Some(n));
                return;
            }
            if !self.newidle_balance(c) {
                break;
            }
        }
        let spin = self.params.idle_spin;
        if spin > 0 {
            self.cpus[c].state = CpuState::Idle(Idle::Spinning);
            let until = self.now + spin;
            let at = self.cpus[c].next_timer().map_or(until, |d| d.min(until));
            self.arm(c, at.max(self.now));
        } else {
            self.idle_sleep(c);
        }
    }

    /// The spin found nothing: sleep on the kick word until kicked or the next timer.
    fn idle_sleep(&mut self, c: usize) {
        if self.cpus[c].timer_due(self.now) {
            self.idle_loop(c);
            return;
        }
        self.cpus[c].state = CpuState::Idle(Idle::Sleeping);
        match self.cpus[c].next_timer() {
            Some(d) => {
                let at = d + self.params.costs.kick;
                self.arm(c, at);
            }
            None => self.disarm(c),
        }
    }

    /// Work was published for CPU `c` (a wakelist push, a remote enqueue): an idle CPU that
    /// spins sees it after `wakelist` ns; one that sleeps is kicked and acts after `kick` ns
    /// (counted in `kicks`). A busy CPU sees it at its next scheduling point, which the
    /// kernel's mode brings forward ([`Sim::resched_ipi`]).
    pub(super) fn notify(&mut self, c: usize) {
        match self.cpus[c].state {
            CpuState::Idle(Idle::Spinning) => {
                self.cpus[c].state = CpuState::Idle(Idle::Waking { kicked: false });
                let at = self.now + self.params.costs.wakelist;
                self.arm_by(c, at);
            }
            CpuState::Idle(Idle::Sleeping) => {
                self.cpus[c].counters.kicks += 1;
                self.kick(c);
            }
            _ => self.resched_ipi(c),
        }
    }

    /// In [`Preempt::Kernel`] mode, the interrupt that makes CPU `c` act on a request made
    /// to it while it runs a task: need-resched set (a wakeup preemption, a charge of the
    /// running task, an active balance's request for it) or a wakeup on its wakelist. The
    /// kernel sends a resched IPI (`resched_curr` → `smp_send_reschedule`), a function-call
    /// IPI for the wakelist (`__smp_call_single_queue` → `send_call_function_single_ipi`)
    /// or wakes the stopper (`stop_one_cpu_nowait` for `active_load_balance_cpu_stop`), and
    /// the running task is interrupted within microseconds whatever it is doing. Modelled:
    /// the CPU's next scheduling point comes at most `latency` ns after the first pending
    /// request ([`Cpu::ipi_at`]), and is the same point (`cond_resched`, the same policy
    /// calls) the cooperative mode runs at the next `resched` boundary: the mode changes
    /// when the CPU acts, not what it decides. Differences from the kernel: a local request
    /// waits the same latency as a remote one (the kernel's acts at the next
    /// `preempt_enable`, sooner); the stopper is no task of its own, so its move is the
    /// active-balance steps of `balance.rs` run at that point (the named task put back and
    /// moved, [`Sim::active_push_point`]), and a named task that blocked meanwhile keeps the
    /// request for its wakeup, as in the cooperative mode; sleep timers and the balance
    /// tick still run at the task's scheduling points (no timer interrupt is modelled).
    /// In [`Preempt::Cooperative`] mode (lagom's) this does nothing.
    pub(super) fn resched_ipi(&mut self, c: usize) {
        let Preempt::Kernel { latency } = self.options.preempt else {
            return;
        };
        let cpu = &self.cpus[c];
        let busy = matches!(cpu.state, CpuState::Running | CpuState::Switching);
        if !busy || cpu.ipi_at != u64::MAX {
            return;
        }
        if !self.need_resched(c) && self.cpus[c].wakelist.is_empty() {
            return;
        }
        let at = self.now.saturating_add(latency);
        self.cpus[c].ipi_at = at;
        // A switching CPU takes it when the task it switches to starts computing
        // (`continue_run`).
        if self.cpus[c].state == CpuState::Running {
            self.arm_by(c, at);
        }
    }

    /// Wakes CPU `c` from its idle sleep, if it sleeps (the kick word's `IDLE → KICKED`);
    /// returns whether it did.
    pub(super) fn kick(&mut self, c: usize) -> bool {
        if self.cpus[c].state != CpuState::Idle(Idle::Sleeping) {
            return false;
        }
        self.cpus[c].state = CpuState::Idle(Idle::Waking { kicked: true });
        let at = self.now + self.params.costs.kick;
        self.arm_by(c, at);
        true
    }

    /// A scheduling point of CPU `c`'s running task (`cond_resched`, and the point after a
    /// spawn: `task/current.rs`'s `resched_point`); returns whether it switched away. As in
    /// the threaded runtime, the point runs its full tick — the balance tick, the timers, the
    /// running task's charge — only when the policy's `resched_point_due` says so (the tick
    /// is [`COND_RESCHED_TICK`] apart, or something asks for the CPU), and schedules if the
    /// tick finds a reason.
    pub(super) fn cond_resched(&mut self, c: usize) -> bool {
        let now = self.now;
        let due = resched_point_due(
            now,
            self.cpus[c].next_tick,
            self.need_resched(c),
            !self.cpus[c].wakelist.is_empty(),
        );
        if !due {
            return false;
        }
        self.balance_tick(c);
        let resched = self.need_resched(c);
        let cpu = &mut self.cpus[c];
        let next = now.saturating_add(COND_RESCHED_TICK);
        cpu.next_tick = cpu.next_timer().map_or(next, |d| next.min(d));
        let resched =
            resched || !cpu.wakelist.is_empty() || cpu.timer_due(now) || cpu.rq.task_tick(now);
        resched && self.schedule(c, Reason::Preempt)
    }

    /// `schedule()` on CPU `c` for its running task (module doc). Returns whether it switched
    /// to another task (or to the idle loop); `false`: the same task goes on.
    pub(super) fn schedule(&mut self, c: usize, reason: Reason) -> bool {
        let prev = self.cpus[c].curr;
        debug_assert_ne!(prev, NONE);
        self.fire_timers(c);
        self.balance_tick(c);
        if reason == Reason::Block {
            self.cpus[c].counters.blocks += 1;
        }
        self.drain(c);
        let now = self.now;
        self.cpus[c].rq.update_curr(now);
        let voluntary = self.put_prev(c, prev, reason);
        // ITMT active balance (`balance.rs`): a preempted or yielding task that an idle,
        // preferred CPU asked for goes back into the tree and this CPU switches to its idle
        // loop; the move follows the switch (`active_push_switched_out`).
        let push =
            self.tasks[prev as usize].state != State::Blocked && self.active_push_point(c, prev);
        let next = if push {
            self.cpus[c].need_resched = false;
            self.cpus[c].rq.clear_need_resched();
            None
        } else {
            self.pick(c)
        };
        if next == Some(prev) {
            return false;
        }
        let counters = &mut self.cpus[c].counters;
        if voluntary {
            counters.switches_voluntary += 1;
        } else {
            counters.switches_involuntary += 1;
        }
        self.end_stint(c, prev);
        let switch = self.params.costs.switch;
        let task = &mut self.tasks[prev as usize];
        match task.state {
            State::Blocked => task.on_cpu_until = now + switch,
            _ => {
                task.state = State::Runnable;
                task.ready_since = now;
                if !voluntary {
                    task.stats.preempted += 1;
                }
            }
        }
        let why = match reason {
            Reason::Block => SwitchReason::Block,
            Reason::Yield => SwitchReason::Yield,
            Reason::Preempt => SwitchReason::Preempt,
        };
        self.trace_switch(c, Some(prev), next, why);
        self.switch_to(c, next);
        self.active_push_switched_out(c, prev);
        true
    }

    /// Puts the running task back (`put_prev` of `sched/schedule.rs`); returns whether the
    /// switch away from it is voluntary.
    fn put_prev(&mut self, c: usize, prev: u32, reason: Reason) -> bool {
        let now = self.now;
        let t = &mut self.tasks[prev as usize];
        let h = t.handle.expect("the running task is queued");
        if t.state == State::Blocked {
            match self.cpus[c].rq.dequeue(h, DequeueKind::Sleep, now) {
                Dequeued::Delayed => self.cpus[c].counters.delayed_dequeues += 1,
                Dequeued::Removed { se, .. } => {
                    t.se = se;
                    t.handle = None;
                }
            }
            true
        } else if reason == Reason::Yield {
            self.cpus[c].rq.yield_curr(now);
            true
        } else {
            false
        }
    }

    /// `pick_next` until a task or nothing, finishing delayed dequeues on the way.
    fn pick(&mut self, c: usize) -> Option<u32> {
        let now = self.now;
        let next = loop {
            match self.cpus[c].rq.pick_next(now) {
                Pick::Run(h) => break Some(*self.cpus[c].rq.payload(h)),
                Pick::FinishedDelayed { se, payload } => self.finished_delayed(c, payload, se),
                Pick::Idle => break None,
            }
        };
        let cpu = &mut self.cpus[c];
        cpu.need_resched = false;
        cpu.ipi_at = u64::MAX;
        next
    }

    /// A delayed entity's dequeue completed on CPU `c`: its task is off the runqueue.
    pub(super) fn finished_delayed(&mut self, c: usize, t: u32, se: SchedEntity) {
        let task = &mut self.tasks[t as usize];
        task.se = se;
        task.handle = None;
        self.cpus[c].counters.delayed_finished += 1;
    }

    /// CPU `c` switches to `next` (`None`: its idle loop), which runs after the switch cost
    /// (and the migration cost on a task's first run on a CPU other than its last).
    pub(super) fn switch_to(&mut self, c: usize, next: Option<u32>) {
        let now = self.now;
        let costs = self.params.costs;
        let measuring = self.measuring();
        let stall = self.stall;
        // A pending interrupt is spent: the CPU schedules now.
        self.cpus[c].ipi_at = u64::MAX;
        match next {
            Some(n) => {
                let t = &mut self.tasks[n as usize];
                let mut cost = costs.switch;
                if t.last_ran != NONE && t.last_ran as usize != c {
                    cost += costs.migrate;
                }
                if t.parked {
                    // The park returns: it consumes the token of its wakeup.
                    t.parked = false;
                    t.token = false;
                }
                t.state = State::Running;
                t.run_start = now;
                if measuring {
                    t.stats.wait.record(now - t.ready_since);
                }
                if let Some(w) = t.wake_time.take()
                    && w >= self.warmup
                {
                    let h = now + cost - w;
                    t.stats.handoff.record(h);
                    if h >= stall {
                        t.stats.stalls += 1;
                    }
                }
                let cpu = &mut self.cpus[c];
                cpu.curr = n;
                cpu.busy_since = now;
                cpu.state = CpuState::Switching;
                // The task switched in runs its first scheduling point in full.
                cpu.next_tick = 0;
                self.arm(c, now + cost);
            }
            None => {
                let cpu = &mut self.cpus[c];
                cpu.curr = NONE;
                cpu.state = CpuState::Idle(Idle::Entering);
                self.arm(c, now + costs.switch);
            }
        }
    }

    /// The stint of task `t` on CPU `c` ends now: its run time and the CPU's busy time.
    pub(super) fn end_stint(&mut self, c: usize, t: u32) {
        let (now, warmup) = (self.now, self.warmup);
        let task = &mut self.tasks[t as usize];
        let ran = now - task.run_start;
        let measured = now.saturating_sub(task.run_start.max(warmup));
        task.stats.cpu_time += ran;
        task.stats.measured_cpu_time += measured;
        if now >= warmup {
            task.stats.run.record(ran);
        }
        task.last_ran = c as u32;
        let cpu = &mut self.cpus[c];
        cpu.busy += now - cpu.busy_since;
        cpu.measured_busy += now.saturating_sub(cpu.busy_since.max(warmup));
    }

    /// The running task of CPU `c` ended: it leaves for good and the CPU picks the next task.
    pub(super) fn exit_task(&mut self, c: usize) {
        let t = self.cpus[c].curr;
        let now = self.now;
        let task = &mut self.tasks[t as usize];
        task.state = State::Dead;
        let h = task.handle.take().expect("the running task is queued");
        let _ = self.cpus[c].rq.dequeue(h, DequeueKind::Dead, now);
        self.cpus[c].counters.exits += 1;
        self.end_stint(c, t);
        self.drain(c);
        let next = self.pick(c);
        self.trace_switch(c, Some(t), next, SwitchReason::Exit);
        self.switch_to(c, next);
    }

    /// Whether CPU `c`'s running task should be switched out at its next scheduling point:
    /// a driver's request (`need_resched`), or its runqueue's ([`RunQueue::need_resched`]: a
    /// charge of the running task inside any runqueue operation, a wakeup preemption). The
    /// threaded runtime copies the runqueue's request into its worker's flag after each
    /// operation (`Worker::publish`); reading both here is the same, with no call to forget.
    pub(super) fn need_resched(&self, c: usize) -> bool {
        self.cpus[c].need_resched || self.cpus[c].rq.need_resched()
    }

    /// Runs the wakeup-preemption check for `h` on CPU `c` (`check_preempt` of
    /// `wake/activate.rs`).
    /// A need-resched it leaves (or one the enqueue before it left) reaches a running CPU
    /// by [`Sim::resched_ipi`] in the kernel's mode.
    pub(super) fn check_preempt(&mut self, c: usize, h: Handle, wf: WakeFlags) {
        let now = self.now;
        while !self.need_resched(c) {
            match self.cpus[c].rq.wakeup_preempt(h, wf, now) {
                Wakeup::NoPreempt => break,
                Wakeup::Preempt => self.cpus[c].need_resched = true,
                Wakeup::FinishedDelayed { se, payload } => self.finished_delayed(c, payload, se),
            }
        }
        self.resched_ipi(c);
    }

    /// Arms a sleep timer of task `t` on CPU `c` for `at`.
    pub(super) fn add_timer(&mut self, c: usize, at: u64, t: u32) {
        self.timer_seq += 1;
        self.cpus[c].timers.push(Reverse((at, self.timer_seq, t)));
    }

    /// Fires CPU `c`'s due timers: each sleeper is woken from this CPU.
    fn fire_timers(&mut self, c: usize) {
        while let Some(&Reverse((d, _, t))) = self.cpus[c].timers.peek() {
            if d > self.now {
                break;
            }
            self.cpus[c].timers.pop();
            let task = &mut self.tasks[t as usize];
            task.sleeping = false;
            // Fired by this CPU: its running task (if any) is the waker task, as on the
            // threaded worker that fires its timers from a schedule point.
            let curr = self.cpus[c].curr;
            let _ = self.unpark(t, Some(c), (curr != NONE).then_some(curr), WakeFlags::NONE);
        }
    }
}
