//! [`Builder`]: a runtime's configuration, its checks, and the start of the workers; and
//! the defaults and limits of its settings.

use alloc::boxed::Box;
use alloc::string::{String, ToString};
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::time::Duration;

use super::{Runtime, ShutdownStats, TaskClock};
use crate::Error;
use crate::arch::{DEFAULT_STACK_SIZE, FpControl, MIN_STACK_SIZE};
use crate::locking::atomic::{AtomicU32, AtomicUsize};
use crate::sched::worker_main;
use crate::trace::{DEFAULT_TRACE_CAPACITY, Recorder};
use crate::worker::{PHASE_RUN, Shared, Worker};
use lagom_policy::{Features, MAX_CUSTOM_SLICE, MIN_CUSTOM_SLICE, RqConfig};
use lagom_topology::{Layout, Topology, layout};

/// How long an idle worker spins by default before it sleeps in `futex_wait`: about what a
/// futex sleep and wakeup cost, so a wakeup that comes sooner finds the worker awake
/// (`examples/idle_spin` measures wake latency against idle CPU per spin length; the curve
/// the default was chosen from is in the book, `docs/src/lab/idle.md`).
pub const DEFAULT_IDLE_SPIN: Duration = Duration::from_micros(30);

/// The timeout of [`Runtime::shutdown`], [`Runtime::shutdown_with_trace`] and of dropping a
/// runtime ([`Runtime::shutdown_timeout`] says what happens within it).
pub const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(1);

/// How long before its next timer an idle worker stops sleeping and spins by default
/// ([`Builder::timer_spin`]): a futex sleep can overshoot its timeout by tens of µs, a spin
/// does not (`docs/src/lab/idle.md` has the lateness and CPU of each setting).
pub const DEFAULT_TIMER_SPIN: Duration = Duration::from_micros(100);

/// The longest idle spin [`Builder::idle_spin`] accepts. A cross-CPU futex wake costs tens of
/// µs, so a spin far beyond that only burns CPU; a longer request is most likely a unit slip.
pub const MAX_IDLE_SPIN: Duration = Duration::from_millis(10);

/// Configures a [`Runtime`].
#[derive(Debug, Clone, Default)]
pub struct Builder {
    cpus: Option<Vec<usize>>,
    features: Option<String>,
    slice: Option<Duration>,
    stack_size: Option<usize>,
    idle_spin: Option<Duration>,
    timer_spin: Option<Duration>,
    tracing: bool,
    trace_capacity: Option<usize>,
    fp_control: FpControl,
    allow_migration: bool,
    topology: Option<Topology>,
    ranks: Vec<(usize, u32)>,
    migration_cost: Option<u64>,
    task_clock: TaskClock,
}

impl Builder {
    /// **Lab option.** The machine to lay the workers out on, a
    /// [`lagom_topology::Topology`] (default: the live system, `Topology::detect`). Workers
    /// run on its allowed CPUs (or those of [`worker_cpus`](Builder::worker_cpus), which must
    /// be allowed there), ordered so that SMT siblings and LLC members are adjacent, and
    /// placement and balancing use its domains and priorities. Meant for tests and
    /// experiments: a worker whose CPU this machine lacks or forbids runs unpinned.
    pub fn topology(mut self, topo: Topology) -> Builder {
        self.topology = Some(topo);
        self
    }

    /// **Lab option.** Overrides the priority (preferred-core ranking) of the CPUs named,
    /// `(cpu, rank)`; higher is preferred. Used by ITMT asym packing and WAKE_PREFER_RANK. A
    /// CPU named twice takes its last rank; an allowed CPU without a worker is ignored, and a
    /// CPU outside the allowed set is an error at [`build`](Builder::build)
    /// ([`Error::CpuNotAllowed`]).
    pub fn cpu_priorities(mut self, ranks: impl IntoIterator<Item = (usize, u32)>) -> Builder {
        self.ranks.extend(ranks);
        self
    }

    /// The CPUs to run workers on, one pinned worker each (default: every allowed CPU). A CPU
    /// outside the process's allowed set, a CPU listed twice, or an empty list is an error at
    /// [`build`](Builder::build) ([`Error::CpuNotAllowed`], [`Error::NoCpus`]).
    pub fn worker_cpus(mut self, cpus: impl IntoIterator<Item = usize>) -> Builder {
        self.cpus = Some(cpus.into_iter().collect());
        self
    }

    /// **Lab option.** The kernel's `sched_migration_cost_ns` (debugfs
    /// `sched/migration_cost_ns`; default 500 000, 0.5 ms,
    /// [`MIGRATION_COST`](lagom_policy::MIGRATION_COST)): a task that ran
    /// within this long is cache hot, and load balancing leaves it where it is until a
    /// domain's balance has failed more than `cache_nice_tries` times
    /// ([`policy::can_migrate`](lagom_policy::can_migrate)); it is also the time a
    /// `WF_SYNC` waker must have run before its wakee may preempt it (with NEXT_BUDDY).
    /// 0 makes nothing hot by time; 4 294 967 295 (the kernel's −1,
    /// [`MIGRATION_COST_ALWAYS_HOT`](lagom_policy::MIGRATION_COST_ALWAYS_HOT)) makes every
    /// task hot. The kernel's value is an unsigned 32-bit number, so a larger value is an
    /// [`Error::OutOfRange`] at [`build`](Builder::build).
    ///
    /// ```
    /// let rt = lagom::Runtime::builder().sched_migration_cost_ns(0).build()?;
    /// # drop(rt);
    /// let err = lagom::Runtime::builder().sched_migration_cost_ns(1 << 32).build().unwrap_err();
    /// assert!(err.to_string().contains("4294967296"));
    /// # Ok::<(), lagom::Error>(())
    /// ```
    pub fn sched_migration_cost_ns(mut self, ns: u64) -> Builder {
        self.migration_cost = Some(ns);
        self
    }

    /// Which clock charges a running task for its run time (default [`TaskClock::Wall`]).
    /// [`TaskClock::OnCpu`] leaves out the time a worker's thread was off its CPU while a
    /// task was current, as the kernel's `rq_clock_task` leaves out steal time, so that a busy
    /// host's stalls end no task's slice early and do not skew the shares; it costs a system
    /// call (`CLOCK_THREAD_CPUTIME_ID`) per stall, per gap of at least
    /// [`STALL_GAP`](TaskClock::STALL_GAP) between two scheduling calls and per
    /// [`RESYNC`](TaskClock::RESYNC) of running, and one each time a worker leaves its idle
    /// context. The counters `host_stalls` and `host_stall_ns` say what it left out.
    ///
    /// ```
    /// use lagom::runtime::TaskClock;
    /// let rt = lagom::Runtime::builder().task_clock(TaskClock::OnCpu).build()?;
    /// let charged = rt.block_on(|| {
    ///     let mut x = 0u64;
    ///     for i in 0..1_000_000u64 {
    ///         x = std::hint::black_box(x ^ i);
    ///     }
    ///     lagom::task::cpu_time()
    /// });
    /// assert!(charged.is_some());
    /// # Ok::<(), lagom::Error>(())
    /// ```
    pub fn task_clock(mut self, clock: TaskClock) -> Builder {
        self.task_clock = clock;
        self
    }

    /// **Lab option.** Scheduler features ([`lagom_policy::Feature`]), e.g.
    /// `"NO_DELAY_DEQUEUE,TTWU_QUEUE"`, applied on the defaults; an unknown name is an
    /// [`Error::UnknownFeature`] at [`build`](Builder::build). Without this call (and with
    /// `std`) the `LAGOM_FEATURES` environment variable is used.
    pub fn features(mut self, spec: impl Into<String>) -> Builder {
        self.features = Some(spec.into());
        self
    }

    /// The base slice of tasks without a custom one (default: the kernel's, scaled with the
    /// number of workers). A slice is the kernel's concept, so it follows the kernel's rule
    /// for out-of-range values: it is clamped to 0.1 ms – 100 ms
    /// ([`MIN_CUSTOM_SLICE`](lagom_policy::MIN_CUSTOM_SLICE) –
    /// [`MAX_CUSTOM_SLICE`](lagom_policy::MAX_CUSTOM_SLICE)), as the kernel clamps
    /// `sched_attr.sched_runtime`, not refused (every other setting is: [`Error`]).
    pub fn default_slice(mut self, slice: Duration) -> Builder {
        self.slice = Some(slice);
        self
    }

    /// The default task stack size in bytes (default 256 KiB; at least
    /// [`MIN_STACK_SIZE`]: a smaller size is an [`Error::StackTooSmall`] at
    /// [`build`](Builder::build)). A task's closure and the fiber's bookkeeping are kept at the top
    /// of its stack when they take at most 1/16 of it
    /// ([`IN_STACK_SHARE`](crate::arch::IN_STACK_SHARE)), which saves an allocation per
    /// task; the task's frames get the rest.
    pub fn stack_size(mut self, bytes: usize) -> Builder {
        self.stack_size = Some(bytes);
        self
    }

    /// How long a worker that ran out of work polls its wakelist and runqueue before it
    /// publishes idle and sleeps on its futex (default [`DEFAULT_IDLE_SPIN`], at most
    /// [`MAX_IDLE_SPIN`]). [`Duration::ZERO`] sleeps at once.
    ///
    /// A wake that arrives during the spin is seen within about a cache-line transfer; one
    /// that arrives after it costs the waker a `futex_wake` and the wakee the OS wakeup
    /// (tens of µs across vCPUs). The spin is wall-clock time, not a count of spin-loop
    /// hints, so it means the same on every CPU; it also ends at the worker's next timer.
    ///
    /// ```
    /// use std::time::Duration;
    /// let rt = lagom::Runtime::builder()
    ///     .idle_spin(Duration::from_micros(20))
    ///     .build()?;
    /// # drop(rt);
    /// # Ok::<(), lagom::Error>(())
    /// ```
    pub fn idle_spin(mut self, spin: Duration) -> Builder {
        self.idle_spin = Some(spin);
        self
    }

    /// How long before its next timer (a `sleep` deadline) an idle worker ends its futex
    /// sleep and spins instead (default [`DEFAULT_TIMER_SPIN`], at most [`MAX_IDLE_SPIN`]).
    /// A futex sleep ends some tens of µs after its timeout on a virtual machine (the OS
    /// wakeup), so a sleeping task wakes that late; spinning the last stretch makes it wake
    /// within a few µs, at the cost of up to this much CPU per timed wakeup of an idle
    /// worker. [`Duration::ZERO`] sleeps to the deadline (plain futex timeouts).
    ///
    /// ```
    /// use std::time::Duration;
    /// let rt = lagom::Runtime::builder()
    ///     .timer_spin(Duration::from_micros(100))
    ///     .build()?;
    /// # drop(rt);
    /// # Ok::<(), lagom::Error>(())
    /// ```
    pub fn timer_spin(mut self, spin: Duration) -> Builder {
        self.timer_spin = Some(spin);
        self
    }

    /// Records switch / wakeup / migrate events per worker (default off; see [`crate::trace`]).
    /// Off, the scheduler's hooks cost one branch on a plain field each.
    pub fn tracing(mut self, on: bool) -> Builder {
        self.tracing = on;
        self
    }

    /// The capacity of each worker's trace log, in events (default
    /// [`DEFAULT_TRACE_CAPACITY`](crate::trace::DEFAULT_TRACE_CAPACITY)); allocated at
    /// [`build`](Builder::build) when tracing is on. A full log stops recording and counts
    /// what it drops. 0, or more than can be allocated, is an [`Error::TraceCapacity`] at
    /// `build`.
    pub fn trace_capacity(mut self, events: usize) -> Builder {
        self.trace_capacity = Some(events);
        self
    }

    /// How context switches treat the FP control state (MXCSR and the x87 control word on
    /// x86_64, FPCR on aarch64) of every task and worker of this runtime.
    ///
    /// [`FpControl::Preserve`] (the default) gives each task its own state exactly.
    /// [`FpControl::AssumeDefault`] promises that no task ever switches away (blocks, yields,
    /// ends) with a non-default rounding mode, FTZ/DAZ or x87 precision, so the switch skips
    /// reading and writing those registers; a task that breaks the promise leaks its state to
    /// whatever runs next on its worker. Debug builds of lagom check the promise at every
    /// switch and abort naming the task. See [`FpControl`].
    pub fn fp_control(mut self, mode: FpControl) -> Builder {
        self.fp_control = mode;
        self
    }

    /// Lets every task of this runtime resume on another worker thread once it has started,
    /// as the kernel moves threads: wakeup placement (`select_task_rq`, TTWU_DEQUEUE, the
    /// TTWU_QUEUE_DELAYED reselection) and the newly idle and periodic balancers may then
    /// move tasks that have run, not only tasks that have not (the default, which is sound
    /// for any safe code: see the crate's "Soundness" section). This is what the scheduler
    /// lab needs — kernel-faithful placement and weighted fairness across workers — and what
    /// a task graph whose tasks block and wake often gains balance from. One task can opt in
    /// alone with [`task::Builder::allow_migration`](crate::task::Builder::allow_migration).
    ///
    /// ```
    /// let rt = lagom::Runtime::builder();
    /// // SAFETY: the tasks below hold no thread-local or thread-affine value across a
    /// // blocking call and never ask which thread they run on.
    /// let rt = unsafe { rt.allow_migration() }.build()?;
    /// assert_eq!(rt.block_on(|| lagom::task::spawn(|| 6 * 7).join().unwrap()), 42);
    /// # Ok::<(), lagom::Error>(())
    /// ```
    ///
    /// # Safety
    ///
    /// A task of this runtime (every closure given to [`Runtime::block_on`],
    /// [`Runtime::spawn`] or [`Runtime::spawn_with`], and every task they spawn) may then be
    /// suspended by any blocking call — `park`, `sleep`, `join`, `yield_now`,
    /// `cond_resched`, a spawn (a preemption point, [`crate::task::Builder::spawn`]), and
    /// whatever is built on them — on one OS thread and resumed on another. The caller
    /// promises that the code of every such task, including the libraries it calls:
    ///
    /// 1. holds across a blocking call no reference into thread-local storage
    ///    (`thread_local!`, `#[thread_local]`, `pthread_getspecific`) and no value that
    ///    refers to it or belongs to its thread: an `Rc` to thread-local state (as
    ///    `rand::thread_rng()` returns), a `std::sync::MutexGuard` or other guard that the
    ///    locking thread must release, any `!Send` value obtained from the thread;
    /// 2. does not touch thread-local storage in a function that also blocks, where both
    ///    could be inlined into one body: the compiler assumes a function runs on one thread,
    ///    so it may compute a thread-local's address before the call and reuse it after
    ///    (keep such an access behind an `#[inline(never)]` call, as lagom's own worker
    ///    look-up is);
    /// 3. does not rely on the thread's identity staying the same across a blocking call:
    ///    `std::thread::current()`, `gettid`, thread-keyed caches or locks, `errno` read
    ///    after a blocking call for an operation made before it;
    /// 4. does not block in a destructor that runs while a panic unwinds: std counts
    ///    panics per thread, and a count raised on one thread and lowered on another leaves
    ///    both wrong.
    ///
    /// Why this is `unsafe` rather than checked: the task's stack moves with it, but its
    /// thread's storage does not, so breaking the promise reads and writes another thread's
    /// storage while that thread runs another task — a data race, undefined behaviour — and
    /// `Send` on the closure cannot rule it out, because such values are created inside the
    /// task.
    pub unsafe fn allow_migration(mut self) -> Builder {
        self.allow_migration = true;
        self
    }

    /// Checks the configuration and starts the workers.
    ///
    /// # Errors
    /// [`Error::NoCpus`], [`Error::CpuNotAllowed`], [`Error::UnknownFeature`],
    /// [`Error::StackTooSmall`], [`Error::IdleSpinTooLong`], [`Error::TimerSpinTooLong`], [`Error::TraceCapacity`],
    /// [`Error::ThreadSpawn`].
    pub fn build(self) -> Result<Runtime, Error> {
        // A topology that cannot be read (a sandbox hiding sysfs) is no reason to refuse to
        // start: the layout falls back to one LLC with no preference, and says so.
        let given = self.topology.is_some();
        let (topo, topo_error) = match self.topology {
            Some(t) => (Some(t), None),
            None => match Topology::detect() {
                Ok(t) => (Some(t), None),
                Err(_) => (None, Some("the live topology could not be read")),
            },
        };
        // A given topology's allowed CPUs stand in for the process's affinity.
        let allowed = match &topo {
            Some(t) if given => t.allowed_cpus().iter().collect::<Vec<usize>>(),
            _ => allowed_cpus(),
        };
        let cpus = self.cpus.unwrap_or_else(|| allowed.clone());
        if cpus.is_empty() {
            return Err(Error::NoCpus);
        }
        for (i, &cpu) in cpus.iter().enumerate() {
            if !allowed.contains(&cpu) || cpus[..i].contains(&cpu) {
                return Err(Error::CpuNotAllowed { cpu, allowed });
            }
        }
        if let Some(&(cpu, _)) = self.ranks.iter().find(|(c, _)| !allowed.contains(c)) {
            return Err(Error::CpuNotAllowed { cpu, allowed });
        }
        let spec = self.features.or_else(env_features).unwrap_or_default();
        let features = Features::parse(&spec)?;
        let stack_size = self.stack_size.unwrap_or(DEFAULT_STACK_SIZE);
        if stack_size < MIN_STACK_SIZE {
            return Err(Error::StackTooSmall {
                requested: stack_size,
                minimum: MIN_STACK_SIZE,
            });
        }
        let idle_spin = self.idle_spin.unwrap_or(DEFAULT_IDLE_SPIN);
        if idle_spin > MAX_IDLE_SPIN {
            return Err(Error::IdleSpinTooLong {
                requested: idle_spin,
                maximum: MAX_IDLE_SPIN,
            });
        }
        let timer_spin = self.timer_spin.unwrap_or(DEFAULT_TIMER_SPIN);
        if timer_spin > MAX_IDLE_SPIN {
            return Err(Error::TimerSpinTooLong {
                requested: timer_spin,
                maximum: MAX_IDLE_SPIN,
            });
        }
        let migration_cost = self.migration_cost.unwrap_or(lagom_policy::MIGRATION_COST);
        if migration_cost > lagom_policy::MIGRATION_COST_ALWAYS_HOT {
            return Err(Error::OutOfRange {
                setting: "Builder::sched_migration_cost_ns",
                value: migration_cost.to_string(),
                valid: "0 to 4294967295 (ns; 4294967295 means always cache hot)",
            });
        }
        let lay = match &topo {
            Some(t) => layout(t, &cpus, &self.ranks),
            None => Layout::flat(&cpus, topo_error.unwrap_or("no topology")),
        };
        let cpus = lay.cpus;
        crate::sys::time::calibrate();
        let mut cfg = RqConfig::for_cpus(cpus.len());
        cfg.features = features;
        cfg.migration_cost = migration_cost;
        if let Some(s) = self.slice {
            let ns = u64::try_from(s.as_nanos()).unwrap_or(u64::MAX);
            cfg.base_slice = ns.clamp(MIN_CUSTOM_SLICE, MAX_CUSTOM_SLICE);
        }
        let trace = match self.tracing {
            true => Some(Box::new(Recorder::new(
                cpus.len(),
                self.trace_capacity.unwrap_or(DEFAULT_TRACE_CAPACITY),
            )?)),
            false => None,
        };
        let shared = Arc::new(Shared {
            workers: cpus.iter().map(|&c| Worker::new(c, cfg)).collect(),
            features,
            cpus: lay.map,
            layout_fallback: lay.fallback,
            phase: AtomicU32::new(PHASE_RUN),
            stack_size,
            // At most MAX_IDLE_SPIN, so it fits in u64 nanoseconds.
            idle_spin: idle_spin.as_nanos() as u64,
            timer_spin: timer_spin.as_nanos() as u64,
            fp_control: self.fp_control,
            allow_migration: self.allow_migration,
            task_clock: self.task_clock,
            next_outside: AtomicUsize::new(0),
            blocking_borrows: AtomicUsize::new(0),
            trace,
        });
        let mut rt = Runtime {
            shared,
            threads: Vec::new(),
            shutdown: ShutdownStats::default(),
        };
        for i in 0..cpus.len() {
            let s = Arc::clone(&rt.shared);
            let name = alloc::format!("lagom-worker-{i}");
            match crate::sys::thread::spawn(name, move || worker_main(s, i)) {
                Ok(t) => rt.threads.push(t),
                Err(errno) => return Err(Error::ThreadSpawn { errno }),
            }
        }
        Ok(rt)
    }
}

#[cfg(feature = "std")]
fn env_features() -> Option<String> {
    std::env::var("LAGOM_FEATURES").ok()
}

#[cfg(not(feature = "std"))]
fn env_features() -> Option<String> {
    None
}

/// The CPUs this process may run on (its affinity mask), ascending; CPU 0 alone if the
/// kernel refuses to say.
fn allowed_cpus() -> Vec<usize> {
    match lagom_topology::process_affinity() {
        Ok(set) => set.iter().collect(),
        Err(_) => alloc::vec![0],
    }
}
