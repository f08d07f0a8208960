//! A simulated task and its script interpreter: what a running task does at its CPU until it
//! computes, blocks, sleeps, yields or ends.
//!
//! A task runs its script from its program counter at the CPU's virtual time. Steps that take
//! no time (spawn, loop bookkeeping, a wake that finds its target awake) run back to back; a
//! wakeup costs the waker `wake` ns after the wakee became runnable; `run D` computes for D ns
//! of its own run time, with a scheduling point (`cond_resched`) every `resched` ns strictly
//! inside it; `block`, `sleep` and `yield` call `schedule()`. A task preempted inside a run
//! keeps what is left of it and goes on when it runs again.

use alloc::string::String;
use alloc::vec::Vec;

use super::engine::{NONE, Sim, Stop};
use super::queue::Event;
use super::rng::Dist;
use super::stats::TaskStats;
use lagom_policy::{Handle, SchedEntity, WakeFlags, WakeeState};

/// Steps a task may run back to back without the clock moving before the simulation calls
/// it endless (a loop of wakes and yields with nothing else to run, say).
const MAX_STEPS_AT_ONE_TIME: u32 = 1_000_000;

/// Where a task is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum State {
    /// Declared with `start=no` and not spawned yet.
    New,
    /// Queued, waiting for its CPU.
    Runnable,
    /// Its CPU runs it (or is switching to it).
    Running,
    /// Blocked (parked or sleeping): asleep, off its CPU (possibly still queued, delayed).
    Blocked,
    /// A waker claimed it; it is on a wakelist or waiting for a switch-out to complete.
    Waking,
    /// Its script ended.
    Dead,
}

/// Where a step's wakeup comes from, resolved to a virtual CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RWaker {
    Here,
    Cpu(u32),
    Outside,
}

/// A script step with its targets resolved to task ids and its loops to step indices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ROp {
    Run(Dist),
    Sleep(Dist),
    Block,
    Yield,
    Wake {
        target: u32,
        after: Option<Dist>,
        from: RWaker,
        sync: bool,
    },
    Post(u32),
    WakePosted,
    Spawn(u32),
    Loop {
        count: Option<u64>,
        end: usize,
    },
    End {
        start: usize,
    },
    Exit,
}

/// One simulated task.
pub(super) struct Task {
    pub(super) name: String,
    pub(super) nice: i32,
    pub(super) script: Vec<ROp>,
    pub(super) pc: usize,
    /// Open loops: (index of the `Loop` step, repetitions left; `None`: forever).
    pub(super) loops: Vec<(usize, Option<u64>)>,
    pub(super) state: State,
    /// Its entity while it is on no runqueue.
    pub(super) se: SchedEntity,
    /// Its entity's handle while it is queued (running, runnable or delayed).
    pub(super) handle: Option<Handle>,
    /// The CPU it belongs to (`task_cpu`).
    pub(super) cpu: usize,
    /// Allowed virtual CPUs as a bitset (`None`: all).
    pub(super) allowed: Option<Vec<u64>>,
    pub(super) start: bool,
    pub(super) measure: bool,
    /// An unpark is pending (the park token).
    pub(super) token: bool,
    /// It blocked in `block` or `sleep` and consumes the token when it runs again.
    pub(super) parked: bool,
    /// It sleeps in `sleep`: only its timer wakes it (an unpark meanwhile is absorbed, as the
    /// runtime's sleep loop absorbs one by parking again).
    pub(super) sleeping: bool,
    /// Run time left of the step `run` it is in (0: none).
    pub(super) remaining: u64,
    /// Until when its CPU is still switching away from it (`on_cpu`).
    pub(super) on_cpu_until: u64,
    /// When the wakeup that made it runnable was called (for the handoff).
    pub(super) wake_time: Option<u64>,
    /// Since when it waits runnable.
    pub(super) ready_since: u64,
    /// When its current stint on a CPU began.
    pub(super) run_start: u64,
    /// The CPU it last ran on (`NONE`: never ran).
    pub(super) last_ran: u32,
    /// Tasks that posted to it (`post`), in order.
    pub(super) inbox: Vec<u32>,
    /// A delayed wakeup was handed to its CPU's wakelist (TTWU_QUEUE_DELAYED).
    pub(super) wake_delayed: bool,
    /// The waker's CPU of that delayed wakeup.
    pub(super) wake_cpu: Option<usize>,
    /// The waker's flags of the wakeup in progress (`WF_SYNC`: its waker is about to block).
    pub(super) wake_flags: WakeFlags,
    /// The task that wakes it now, if a task does (`NONE`: none), whose wakee record CPU
    /// selection updates.
    pub(super) waker_task: u32,
    /// Its record of the tasks it wakes (`record_wakee`, `wake_wide`).
    pub(super) wakee: WakeeState,
    /// Its `recent_used_cpu`: the previous CPU of its previous wakeup.
    pub(super) recent_cpu: Option<usize>,
    /// Whether it was spawned (and so enqueued as a new task) yet.
    pub(super) fresh: bool,
    pub(super) stats: TaskStats,
}

impl Task {
    pub(super) fn new(
        name: String,
        nice: i32,
        script: Vec<ROp>,
        se: SchedEntity,
        allowed: Option<Vec<usize>>,
        start: bool,
        measure: bool,
    ) -> Task {
        let allowed = allowed.map(|cpus| {
            let mut bits = alloc::vec![0u64; cpus.iter().max().map_or(0, |m| m / 64 + 1)];
            for c in cpus {
                bits[c / 64] |= 1 << (c % 64);
            }
            bits
        });
        Task {
            name,
            nice,
            script,
            pc: 0,
            loops: Vec::new(),
            state: State::New,
            se,
            handle: None,
            cpu: 0,
            allowed,
            start,
            measure,
            token: false,
            parked: false,
            sleeping: false,
            remaining: 0,
            on_cpu_until: 0,
            wake_time: None,
            ready_since: 0,
            run_start: 0,
            last_ran: NONE,
            inbox: Vec::new(),
            wake_delayed: false,
            wake_cpu: None,
            wake_flags: WakeFlags::NONE,
            waker_task: NONE,
            wakee: WakeeState::default(),
            recent_cpu: None,
            fresh: true,
            stats: TaskStats::default(),
        }
    }

    /// Whether it may run on virtual CPU `c`.
    #[inline]
    pub(super) fn allowed(&self, c: usize) -> bool {
        match &self.allowed {
            None => true,
            Some(bits) => bits.get(c / 64).is_some_and(|w| w & (1 << (c % 64)) != 0),
        }
    }
}

impl Sim {
    /// CPU `c`'s running task goes on with its script at the present time.
    pub(super) fn run_task(&mut self, c: usize) {
        let t = self.cpus[c].curr as usize;
        debug_assert_ne!(t, NONE as usize);
        let mut steps = 0u32;
        loop {
            if self.tasks[t].remaining > 0 {
                self.continue_run(c);
                return;
            }
            steps += 1;
            if steps > MAX_STEPS_AT_ONE_TIME {
                self.halt = Some(Stop::Endless(t as u32));
                return;
            }
            let task = &mut self.tasks[t];
            let Some(&op) = task.script.get(task.pc) else {
                self.exit_task(c);
                return;
            };
            task.pc += 1;
            match op {
                ROp::Run(d) => {
                    let r = d.sample(&mut self.rng);
                    self.tasks[t].remaining = r;
                }
                ROp::Sleep(d) => {
                    let at = self.now + d.sample(&mut self.rng);
                    let task = &mut self.tasks[t];
                    task.state = State::Blocked;
                    task.sleeping = true;
                    // The sleep parks: its wakeup's token is consumed when it runs again.
                    task.parked = true;
                    self.add_timer(c, at, t as u32);
                    if self.schedule(c, super::cpu::Reason::Block) {
                        return;
                    }
                }
                ROp::Block => {
                    let task = &mut self.tasks[t];
                    if task.token {
                        task.token = false;
                        continue;
                    }
                    task.state = State::Blocked;
                    task.parked = true;
                    if self.schedule(c, super::cpu::Reason::Block) {
                        return;
                    }
                }
                ROp::Yield => {
                    if self.schedule(c, super::cpu::Reason::Yield) {
                        return;
                    }
                }
                ROp::Wake {
                    target,
                    after,
                    from,
                    sync,
                } => {
                    let waker = match from {
                        RWaker::Here => Some(c),
                        RWaker::Cpu(w) => Some(w as usize),
                        RWaker::Outside => None,
                    };
                    match after {
                        None => {
                            let wf = if sync {
                                WakeFlags::SYNC
                            } else {
                                WakeFlags::NONE
                            };
                            // Made by this task from its own CPU: the waker task.
                            let by = (from == RWaker::Here).then_some(t as u32);
                            let woke = self.unpark(target, waker, by, wf);
                            self.charge_wakes(t, u64::from(woke));
                        }
                        Some(d) => {
                            let at = self.now + d.sample(&mut self.rng);
                            let waker = waker.map_or(NONE, |w| w as u32);
                            self.queue.push(
                                at,
                                Event::Wake {
                                    task: target,
                                    waker,
                                },
                            );
                        }
                    }
                }
                ROp::Post(target) => {
                    self.tasks[target as usize].inbox.push(t as u32);
                    let woke = self.unpark(target, Some(c), Some(t as u32), WakeFlags::NONE);
                    self.charge_wakes(t, u64::from(woke));
                }
                ROp::WakePosted => {
                    let mut list = core::mem::take(&mut self.tasks[t].inbox);
                    let mut woke = 0;
                    for &p in &list {
                        woke += u64::from(self.unpark(p, Some(c), Some(t as u32), WakeFlags::NONE));
                    }
                    // Give the allocation back, so that posting does not allocate again.
                    list.clear();
                    if self.tasks[t].inbox.is_empty() {
                        self.tasks[t].inbox = list;
                    }
                    self.charge_wakes(t, woke);
                }
                ROp::Spawn(target) => {
                    if self.tasks[target as usize].state == State::New {
                        self.spawn(target, Some(c));
                    }
                    // A spawn is a scheduling point (`task::spawn_point`), as in the threaded
                    // runtime: the spawner yields the CPU here when its request ran out or a
                    // wakeup asked for it.
                    if self.cond_resched(c) {
                        return;
                    }
                }
                ROp::Loop { count, end } => {
                    let task = &mut self.tasks[t];
                    if count == Some(0) {
                        task.pc = end + 1;
                    } else {
                        task.loops.push((task.pc - 1, count));
                    }
                }
                ROp::End { start } => {
                    let measuring = self.measuring();
                    let task = &mut self.tasks[t];
                    if measuring {
                        task.stats.loops += 1;
                    }
                    let top = task.loops.last_mut().expect("an `end` closes an open loop");
                    debug_assert_eq!(top.0, start);
                    match &mut top.1 {
                        Some(1) => {
                            task.loops.pop();
                        }
                        Some(k) => {
                            *k -= 1;
                            task.pc = start + 1;
                        }
                        None => task.pc = start + 1,
                    }
                }
                ROp::Exit => {
                    self.exit_task(c);
                    return;
                }
            }
            if self.halt.is_some() {
                return;
            }
        }
    }

    /// Running task `t` woke `n` tasks: it spends `wake` ns on each before it goes on (as
    /// computing: the next step waits for it).
    fn charge_wakes(&mut self, t: usize, n: u64) {
        self.tasks[t].remaining += n * self.params.costs.wake;
    }

    /// The running task of CPU `c` computes: its next scheduling point is one `resched`
    /// interval on, or the end of its run if that comes first, or a pending interrupt of the
    /// kernel's mode (`Cpu::ipi_at`, `resched_ipi`) if that comes sooner.
    pub(super) fn continue_run(&mut self, c: usize) {
        let t = self.cpus[c].curr as usize;
        let step = self.tasks[t].remaining.min(self.params.resched.max(1));
        let cpu = &mut self.cpus[c];
        cpu.last_point = self.now;
        let at = self.now.saturating_add(step).min(cpu.ipi_at.max(self.now));
        self.arm(c, at);
    }

    /// CPU `c`'s running task reached the end of a stretch of computing: the end of its run,
    /// or a scheduling point inside it.
    pub(super) fn point(&mut self, c: usize) {
        let t = self.cpus[c].curr as usize;
        let elapsed = self.now - self.cpus[c].last_point;
        let task = &mut self.tasks[t];
        task.remaining = task.remaining.saturating_sub(elapsed);
        if task.remaining == 0 {
            self.run_task(c);
        } else {
            // A pending interrupt due now is delivered: this is its scheduling point.
            if self.now >= self.cpus[c].ipi_at {
                self.cpus[c].ipi_at = u64::MAX;
            }
            if !self.cond_resched(c) {
                self.continue_run(c);
            }
        }
    }
}
