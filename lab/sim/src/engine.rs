//! [`Sim`]: building a simulation from a scenario and a machine, and the event loop.
//!
//! The loop pops the earliest event, sets the virtual clock to its time and dispatches it:
//! a CPU's next step (`cpu.rs`: a running task's scheduling point, the end of a switch, the
//! idle loop), a delayed wakeup, or a waker that waited for a switch-out (`wake.rs`). It
//! stops at the scenario's duration, at the wakeup limit, or when nothing is pending.

use alloc::string::String;
use alloc::vec::Vec;

use super::cpu::{Cpu, CpuState, Idle};
use super::error::ScenarioError;
use super::machine::Machine;
use super::queue::{Event, EventQueue};
use super::rng::Rng;
use super::scenario::{Params, Preempt, Scenario};
use super::task::Task;
use super::trace::TraceBuf;
use lagom_policy::{Features, RqConfig, RunQueue, UnknownFeature, WakeFlags};

/// "No task" / "no CPU" in the `u32` fields.
pub(super) const NONE: u32 = u32::MAX;

/// Events at one instant after which the run is called endless ([`Stop::Endless`]).
const MAX_EVENTS_AT_ONE_TIME: u64 = 10_000_000;

/// How one run differs from the scenario's defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// The scheduler features.
    pub features: Features,
    /// The label the report shows for them (the string they were parsed from).
    pub features_label: String,
    /// The seed (the scenario's, unless given).
    pub seed: u64,
    /// Stop after this many measured wakeups (the scenario's, unless given).
    pub wakeups: Option<u64>,
    /// Virtual time to simulate (the scenario's, unless given).
    pub duration: u64,
    /// Record a trace of switches, wakeups and migrations, at most this many events per CPU
    /// (`None`: no trace).
    pub trace_capacity: Option<usize>,
    /// When a CPU acts on a request made while it runs a task (the scenario's `preempt`
    /// line, unless given): lagom's cooperative scheduling points or the kernel's IPI and
    /// stopper.
    pub preempt: Preempt,
}

impl Options {
    /// The scenario's own settings, with `features` parsed from its `features` line (or the
    /// defaults).
    ///
    /// # Errors
    /// [`UnknownFeature`] if the scenario's feature string names an unknown feature.
    pub fn of(s: &Scenario) -> Result<Options, UnknownFeature> {
        let spec = s.features.clone().unwrap_or_default();
        Ok(Options {
            features: Features::parse(&spec)?,
            features_label: if spec.is_empty() {
                String::from("default")
            } else {
                spec
            },
            seed: s.seed,
            wakeups: s.wakeups,
            duration: s.duration,
            trace_capacity: None,
            preempt: s.params.preempt,
        })
    }
}

/// Why a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// The duration was reached.
    Duration,
    /// The wakeup limit was reached.
    Wakeups,
    /// Nothing was left to happen (every task ended or blocked for good).
    Quiet,
    /// Task number `.0` (in declaration order, instances counted) ran a million steps
    /// without the clock moving (a loop of wakes and yields with nothing else to do), or
    /// ten million events came at one instant, the last of them this task's (tasks handing
    /// the CPU back and forth with every cost zero): the scenario never lets time pass.
    Endless(u32),
}

/// A simulation: a machine of virtual CPUs, each with lagom's own `policy::RunQueue`, the
/// tasks of a scenario, and a virtual clock (the crate's doc).
pub struct Sim {
    pub(super) machine: Machine,
    pub(super) scenario: String,
    pub(super) options: Options,
    pub(super) params: Params,
    pub(super) cpus: Vec<Cpu>,
    pub(super) tasks: Vec<Task>,
    pub(super) queue: EventQueue,
    pub(super) rng: Rng,
    pub(super) now: u64,
    pub(super) warmup: u64,
    pub(super) stall: u64,
    /// Wakeups of measured tasks after the warm-up.
    pub(super) measured_wakeups: u64,
    /// Events handled (moot ones not counted).
    pub(super) events: u64,
    /// Round-robin start CPU for tasks started from outside (`Shared::next_outside`).
    pub(super) next_outside: usize,
    /// Sequence numbers of timers (ties between equal deadlines go by arming order).
    pub(super) timer_seq: u64,
    pub(super) trace: Option<TraceBuf>,
    /// Why the run ended, once it has.
    pub(super) stop: Option<Stop>,
    /// A step asked the loop to stop early ([`Stop::Endless`]).
    pub(super) halt: Option<Stop>,
    pub(super) ended_at: u64,
}

impl Sim {
    /// A simulation of `scenario` on `machine` under `options`.
    ///
    /// # Errors
    /// A target naming no task or an instance past its count, an affinity or waker CPU the
    /// machine does not have, a spawn of a task that starts by itself: each names the line
    /// and the field.
    pub fn new(
        scenario: &Scenario,
        machine: Machine,
        options: Options,
    ) -> Result<Sim, ScenarioError> {
        let n = machine.cpus();
        let tasks = super::build::tasks(scenario, &machine)?;
        let mut cfg = RqConfig::for_cpus(n);
        cfg.features = options.features;
        let cpus = (0..n).map(|_| Cpu::new(RunQueue::new(cfg))).collect();
        let trace = options
            .trace_capacity
            .map(|cap| TraceBuf::new(n, cap, tasks.iter().map(|t| t.name.clone())));
        Ok(Sim {
            scenario: scenario.name.clone(),
            params: scenario.params,
            rng: Rng::new(options.seed),
            options,
            cpus,
            tasks,
            queue: EventQueue::default(),
            now: 0,
            warmup: scenario.warmup,
            stall: scenario.stall,
            measured_wakeups: 0,
            events: 0,
            next_outside: 0,
            timer_seq: 0,
            trace,
            stop: None,
            halt: None,
            ended_at: 0,
            machine,
        })
    }

    /// The machine.
    pub fn machine(&self) -> &Machine {
        &self.machine
    }

    /// The virtual time (ns).
    pub fn now(&self) -> u64 {
        self.now
    }

    /// Events handled so far.
    pub fn events(&self) -> u64 {
        self.events
    }

    /// Runs the simulation to its end (duration, wakeup limit, or nothing left to do) and
    /// says which.
    pub fn run(&mut self) -> Stop {
        if let Some(s) = self.stop {
            return s;
        }
        self.start();
        let end = self.options.duration;
        // Events handled at the present instant: a scenario whose costs are all zero can
        // make tasks hand the CPU back and forth forever without the clock moving.
        let mut at_once = 0u64;
        let stop = loop {
            let Some((at, ev)) = self.queue.pop() else {
                self.now = self.now.max(end);
                break Stop::Quiet;
            };
            if at > end {
                self.now = end;
                break Stop::Duration;
            }
            at_once = if at == self.now { at_once + 1 } else { 0 };
            if at_once > MAX_EVENTS_AT_ONE_TIME {
                let t = match ev {
                    Event::Cpu { cpu, .. } => self.cpus[cpu as usize].curr,
                    Event::Wake { task, .. } | Event::WakeAfterSwitch { task, .. } => task,
                };
                break Stop::Endless(if t == NONE { 0 } else { t });
            }
            self.now = at;
            self.dispatch(ev);
            if let Some(s) = self.halt {
                break s;
            }
            if self
                .options
                .wakeups
                .is_some_and(|w| self.measured_wakeups >= w)
            {
                break Stop::Wakeups;
            }
        };
        self.finish();
        self.stop = Some(stop);
        stop
    }

    /// Time zero: every CPU enters its idle loop, and the tasks that start by themselves are
    /// spawned from outside, in declaration order.
    fn start(&mut self) {
        for t in 0..self.tasks.len() {
            if self.tasks[t].start {
                self.spawn(t as u32, None);
            }
        }
        for c in 0..self.cpus.len() {
            self.cpus[c].state = CpuState::Idle(Idle::Entering);
            self.arm(c, 0);
        }
    }

    fn dispatch(&mut self, ev: Event) {
        match ev {
            Event::Cpu { cpu, epoch } => {
                if self.cpus[cpu as usize].epoch != epoch {
                    return;
                }
                self.events += 1;
                self.cpus[cpu as usize].planned = u64::MAX;
                self.cpu_step(cpu as usize);
            }
            Event::Wake { task, waker } => {
                self.events += 1;
                // A waker that is no task (a thread on that CPU, or outside).
                let _ = self.unpark(
                    task,
                    (waker != NONE).then_some(waker as usize),
                    None,
                    WakeFlags::NONE,
                );
            }
            Event::WakeAfterSwitch { task, waker } => {
                self.events += 1;
                self.select_enqueue(task, (waker != NONE).then_some(waker as usize));
            }
        }
    }

    /// Closes the books at the end: run time of the running tasks and busy time of the CPUs
    /// up to now.
    fn finish(&mut self) {
        self.ended_at = self.now;
        for c in 0..self.cpus.len() {
            let t = self.cpus[c].curr;
            if t != NONE {
                self.end_stint(c, t);
                self.cpus[c].busy_since = self.now;
                self.tasks[t as usize].run_start = self.now;
            }
        }
    }

    /// Plans CPU `c`'s next step at `at`, replacing any step planned before.
    pub(super) fn arm(&mut self, c: usize, at: u64) {
        let cpu = &mut self.cpus[c];
        cpu.epoch = cpu.epoch.wrapping_add(1);
        cpu.planned = at;
        self.queue.push(
            at,
            Event::Cpu {
                cpu: c as u32,
                epoch: cpu.epoch,
            },
        );
    }

    /// Plans CPU `c`'s next step at `at` unless one is planned earlier.
    pub(super) fn arm_by(&mut self, c: usize, at: u64) {
        if at < self.cpus[c].planned {
            self.arm(c, at);
        }
    }

    /// Drops CPU `c`'s planned step.
    pub(super) fn disarm(&mut self, c: usize) {
        let cpu = &mut self.cpus[c];
        cpu.epoch = cpu.epoch.wrapping_add(1);
        cpu.planned = u64::MAX;
    }

    /// Whether measuring has begun.
    pub(super) fn measuring(&self) -> bool {
        self.now >= self.warmup
    }
}
