//! A scenario: the tasks (each a behaviour script with nice, slice and affinity) and the
//! parameters of the simulated runtime — what a scenario file says (`parse.rs`), or what code
//! builds directly.
//!
//! A script is a list of [`Step`]s run top to bottom by its task; `loop` / `end` nest. A task
//! declared with `count=N` is N tasks (instances `0..N`), and a target such as `msg[i/8]`
//! names an instance relative to the task's own index `i`, so one declaration describes a
//! whole pattern (schbench's message and worker threads, 15 ping-pong pairs).

use alloc::string::String;
use alloc::vec::Vec;

use super::costs::Costs;
use super::rng::Dist;
use lagom_topology::{CpuId, CpuSet};

/// Which instance of a task declaration a target names, relative to the naming task's own
/// instance index `i`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Instance {
    /// Instance `k`.
    Index(u32),
    /// The same index: `i`.
    Same,
    /// `i / k`.
    Div(u32),
    /// `i % k`.
    Mod(u32),
}

impl Instance {
    /// The instance index for a task whose own index is `i`.
    pub fn of(self, i: u32) -> u32 {
        match self {
            Instance::Index(k) => k,
            Instance::Same => i,
            Instance::Div(k) => i / k,
            Instance::Mod(k) => i % k,
        }
    }
}

/// The task a step acts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// The task running the step (`self`).
    Own,
    /// Instance `instance` of the declaration named `name`.
    Task {
        /// The declaration's name.
        name: String,
        /// Which of its instances.
        instance: Instance,
    },
}

/// Where a wakeup comes from (the waker's CPU, which CPU selection and the wakelist rules
/// read).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waker {
    /// The CPU the waking task runs on when the wakeup happens (for a delayed wakeup: when it
    /// was issued).
    Here,
    /// A fixed CPU (OS id), as a busy-polling waker thread pinned there.
    Cpu(CpuId),
    /// No CPU of the machine: a thread outside the runtime.
    Outside,
}

/// One step of a behaviour script.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Compute for a drawn duration (scheduling points every `resched` inside it).
    Run(Dist),
    /// Sleep for a drawn duration (a timer on the task's CPU, then a wakeup).
    Sleep(Dist),
    /// Park: block until woken, unless a wakeup is already pending (a token, as
    /// `lagom::task::park` consumes one).
    Block,
    /// Give up the rest of the request (`yield_now`).
    Yield,
    /// Wake `target` (an unpark: a token if it is not blocked), now or `after` a drawn delay,
    /// from `from`.
    Wake {
        /// Whom.
        target: Target,
        /// `None`: now; else when.
        after: Option<Dist>,
        /// From which CPU.
        from: Waker,
        /// `WF_SYNC`: the waker is about to block (`Unparker::unpark_sync`), so the wakee
        /// may take its CPU (sync `wake_affine`, `preempt_sync`).
        sync: bool,
    },
    /// Put this task on `target`'s list of posters and wake `target` (schbench's worker
    /// telling its message thread it is ready).
    Post(Target),
    /// Wake every task on this task's list of posters, in posting order, and empty it
    /// (schbench's message thread).
    WakePosted,
    /// Start `target`, a task declared with `start=no`, on this task's CPU as a child.
    Spawn(Target),
    /// Repeat the steps up to the matching [`Op::End`] `count` times (`None`: forever).
    Loop {
        /// Repetitions.
        count: Option<u64>,
    },
    /// The end of the innermost open [`Op::Loop`].
    End,
    /// End the task.
    Exit,
}

/// A step and the line it came from (0: built in code).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// What to do.
    pub op: Op,
    /// Its line in the scenario file.
    pub line: usize,
}

/// Where a task may run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Affinity {
    /// Every CPU of the machine.
    Any,
    /// These CPUs (OS ids).
    Cpus(CpuSet),
    /// One CPU per instance: the CPU with OS id `instance.of(i)`.
    PerInstance(Instance),
}

/// One task declaration (`count` tasks alike).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskSpec {
    /// Its name; instances are `name[0]`, `name[1]`, … (`name` alone when `count` is 1).
    pub name: String,
    /// How many tasks it declares (per virtual CPU if `per_cpu`).
    pub count: u32,
    /// `count` is per virtual CPU of the machine (`count=cpus`: one task per CPU).
    pub per_cpu: bool,
    /// Nice level, −20 … 19.
    pub nice: i32,
    /// Custom slice (ns), or the base slice.
    pub slice: Option<u64>,
    /// Where it may run.
    pub affinity: Affinity,
    /// Whether it starts when the simulation starts (else a `spawn` starts it).
    pub start: bool,
    /// Whether its handoffs count in the summary (wakeups, stalls, handoff percentiles).
    pub measure: bool,
    /// Its script.
    pub script: Vec<Step>,
    /// The line of its declaration (0: built in code).
    pub line: usize,
}

impl TaskSpec {
    /// A task named `name` (one instance, nice 0, base slice, any CPU, started at once,
    /// measured) running `script`.
    pub fn new(name: &str, script: Vec<Op>) -> TaskSpec {
        TaskSpec {
            name: String::from(name),
            count: 1,
            per_cpu: false,
            nice: 0,
            slice: None,
            affinity: Affinity::Any,
            start: true,
            measure: true,
            script: script.into_iter().map(|op| Step { op, line: 0 }).collect(),
            line: 0,
        }
    }
}

/// The default latency of [`Preempt::Kernel`] (ns): how long after a request a CPU acts.
///
/// 2 µs: of the order of the kernel's resched IPI — the interrupt's delivery, the return
/// from it into `schedule()` — and of `stop_one_cpu_nowait` waking the stopper thread on an
/// x86 server (one to a few µs), and about four of the simulator's `kick` costs. The exact
/// figure matters little beside lagom's cooperative window (`resched`, 10–20 µs in the
/// built-in scenarios): what the mode models is that the kernel does not wait for the
/// running task's next scheduling point.
pub const KERNEL_PREEMPT_LATENCY: u64 = 2_000;

/// When a simulated CPU acts on a request made to it while it runs a task: a wakeup
/// preemption (need-resched), a remote wakeup put on its wakelist, an active balance's
/// request for its running task. The mode changes only *when* the CPU acts (at which
/// instant it reaches its scheduling point), never what the policy decides there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Preempt {
    /// lagom's threaded runtime: a CPU acts at its running task's next scheduling point
    /// (`cond_resched` every `resched` ns of computing, a spawn, a block, a yield). The
    /// default, to replay the threaded runtime.
    #[default]
    Cooperative,
    /// The kernel's: the request interrupts the running task within `latency` ns,
    /// wherever it is in its computation — a resched IPI (`resched_curr` →
    /// `smp_send_reschedule`; the wakelist's `send_call_function_single_ipi`) or the
    /// stopper thread of an active balance (`stop_one_cpu_nowait` →
    /// `active_load_balance_cpu_stop`). The CPU then runs the same scheduling point the
    /// cooperative mode would run later.
    Kernel {
        /// How long after the request the CPU acts (ns).
        latency: u64,
    },
}

impl Preempt {
    /// The kernel's mode with [`KERNEL_PREEMPT_LATENCY`].
    pub const KERNEL: Preempt = Preempt::Kernel {
        latency: KERNEL_PREEMPT_LATENCY,
    };

    /// Parses `cooperative`, `kernel` or `kernel:DUR` (DUR as in a scenario file: `2us`,
    /// `500ns`, `0`), the form of the simulator's `--preempt` flag and of the scenario's
    /// `preempt` line.
    ///
    /// # Errors
    /// A message saying what was expected.
    ///
    /// ```
    /// use lagom_sim::Preempt;
    /// assert_eq!(Preempt::parse("kernel:5us"), Ok(Preempt::Kernel { latency: 5_000 }));
    /// assert_eq!(Preempt::parse("kernel"), Ok(Preempt::KERNEL));
    /// assert!(Preempt::parse("eager").is_err());
    /// ```
    pub fn parse(spec: &str) -> Result<Preempt, String> {
        super::parse::preempt(spec)
    }
}

impl core::fmt::Display for Preempt {
    /// `cooperative` or `kernel:DUR`, which [`Preempt::parse`] reads back.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            Preempt::Cooperative => f.write_str("cooperative"),
            Preempt::Kernel { latency } if latency != 0 && latency % 1000 == 0 => {
                write!(f, "kernel:{}us", latency / 1000)
            }
            Preempt::Kernel { latency } => write!(f, "kernel:{latency}ns"),
        }
    }
}

/// The simulated runtime's parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Params {
    /// Interval (ns of run time) between a computing task's scheduling points: how often it
    /// calls `cond_resched` (lagom's preemption is cooperative).
    pub resched: u64,
    /// How long an idle CPU spins before it sleeps (`Builder::idle_spin`; the threaded
    /// runtime's default is 30 µs).
    pub idle_spin: u64,
    /// Costs of the mechanism.
    pub costs: Costs,
    /// When a CPU acts on a request made while it runs a task (the scenario's `preempt`
    /// line; [`Options::preempt`](super::Options::preempt) overrides it per run).
    pub preempt: Preempt,
}

impl Default for Params {
    fn default() -> Params {
        Params {
            resched: 10_000,
            idle_spin: 30_000,
            costs: Costs::default(),
            preempt: Preempt::Cooperative,
        }
    }
}

/// A whole scenario.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scenario {
    /// Its name (reports and the JSON line).
    pub name: String,
    /// The machine it was written for (a [`Machine::named`](super::Machine::named) name or a
    /// sysfs root); the caller decides how to use it.
    pub topology: Option<String>,
    /// Its default feature string (the caller's choice wins).
    pub features: Option<String>,
    /// Its default seed.
    pub seed: u64,
    /// Virtual time to simulate (ns), measuring included.
    pub duration: u64,
    /// Virtual time (ns) before measuring starts: histograms, stalls and CPU shares count
    /// only after it (counters count from the start).
    pub warmup: u64,
    /// Stop after this many wakeups of measured tasks (counted from the warm-up's end).
    pub wakeups: Option<u64>,
    /// A handoff at least this long (ns) is a stall.
    pub stall: u64,
    /// The runtime's parameters.
    pub params: Params,
    /// The task declarations, in order.
    pub tasks: Vec<TaskSpec>,
}

impl Scenario {
    /// An empty scenario called `name`: 1 s of virtual time, no warm-up, seed 1, stalls from
    /// 0.5 ms, default parameters.
    pub fn new(name: &str) -> Scenario {
        Scenario {
            name: String::from(name),
            topology: None,
            features: None,
            seed: 1,
            duration: 1_000_000_000,
            warmup: 0,
            wakeups: None,
            stall: 500_000,
            params: Params::default(),
            tasks: Vec::new(),
        }
    }
}
