//! The runtime: configuration (`Runtime::builder()`), start-up of one pinned worker per CPU,
//! `block_on`, `spawn` from outside, statistics, and shutdown.
//!
//! ## Shutdown
//!
//! Invariant: *a shutdown returns within its timeout, and every task it finds either ends —
//! its value delivered, or unwound by a cancellation so that its destructors ran — or is
//! reported as abandoned.*
//!
//! [`Runtime::shutdown_timeout`]`(d)` (and [`Runtime::shutdown`], [`Runtime::shutdown_with_trace`]
//! and `Drop`, with [`DEFAULT_SHUTDOWN_TIMEOUT`]) walks the runtime through four phases
//! (`Shared::phase`, stored with Release and followed by a kick of every worker; at FORCE and
//! EXIT also need-resched on every worker, so that a running task's next `cond_resched`
//! switches and meets its cancellation point):
//!
//! 1. **DRAIN**, from the start: tasks that are runnable run on (lagom never preempts); a task
//!    that is blocked once the runtime has nothing runnable is **cancelled**: an idle worker's
//!    sweep (`sched/shutdown.rs`) marks it and wakes it, and it resumes inside its blocking
//!    call (`park`, and so `sleep` and `join`), which does not return but unwinds
//!    (`task/cancel.rs`): destructors run, guards are released, and its `join` returns a
//!    [`JoinError`](crate::JoinError) whose `is_cancelled()` is true. Tasks that block later
//!    are swept later (idle workers come round every millisecond during a shutdown).
//! 2. **FORCE**, at `d / 2`: every task still alive is cancelled at its next call into lagom
//!    (`cond_resched`, `yield_now`, a blocking call), whatever runs elsewhere.
//! 3. **EXIT**, at `3d / 4`: a task still alive — one that caught the cancellation and went
//!    on — is **abandoned** at its next call into lagom: it blocks for good. Workers leave
//!    their loops once they have nothing runnable.
//! 4. At `d` the shutting-down thread stops waiting: it joins every worker thread that has
//!    stopped, then frees every task that has not ended (abandoned, or stranded on a queue):
//!    never resumed, its stack unmapped without running the destructors of what is on it
//!    (they leak, as a `mem::forget` would), its join completed as cancelled. A worker
//!    thread that has not stopped by then is running a task that never calls into lagom:
//!    nothing can stop it, so its thread is detached and left running, and the runtime's
//!    memory (which it uses) is not freed. Both are reported: [`Stats::shutdown`] and a line
//!    on stderr.
//!
//! The shutdown returns as soon as no task is left, so with nothing running it is quick.
//! Without the `std` feature nothing can unwind a task: there is no sweep and no FORCE
//! cancellation, and the shutdown goes to EXIT as soon as the runtime has nothing runnable,
//! so blocked tasks are abandoned at once (as above: destructors not run, join cancelled).

use alloc::boxed::Box;
use alloc::string::{String, ToString};
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::time::Duration;

use crate::Error;
use crate::arch::DEFAULT_STACK_SIZE;
use crate::arch::FpControl;
use crate::arch::MIN_STACK_SIZE;
use crate::locking::atomic::{AtomicU32, AtomicUsize, Ordering};
use crate::sched::worker_main;
use crate::sys::thread::Thread;
use crate::task::{Builder as TaskBuilder, JoinHandle, scope_in, spawn_inner};
use crate::trace::{DEFAULT_TRACE_CAPACITY, Recorder, Trace};
use crate::worker::{
    PHASE_DRAIN, PHASE_EXIT, PHASE_FORCE, PHASE_RUN, Shared, ShutdownStats, Stats, Task, TaskClock,
    Worker, WorkerPlace,
};
use lagom_policy::{Features, MAX_CUSTOM_SLICE, MIN_CUSTOM_SLICE, RqConfig};
use lagom_topology::{Layout, Topology, layout};

/// How long an idle worker spins by default before it sleeps in `futex_wait` (chosen from the
/// curve in the `sched/idle.rs` module doc: wake latency against idle CPU, issue #5).
pub const DEFAULT_IDLE_SPIN: Duration = Duration::from_micros(30);

/// The timeout of [`Runtime::shutdown`], [`Runtime::shutdown_with_trace`] and of dropping a
/// runtime (the module doc of `Runtime::shutdown_timeout` says what happens within it).
pub const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(1);

/// How long before its next timer an idle worker stops sleeping and spins by default
/// ([`Builder::timer_spin`]; the measurements behind the choice are in the `sched/idle.rs`
/// module doc, "Timer precision", issue #20).
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
    /// The machine to lay the workers out on (default: the live system,
    /// `Topology::detect`). Workers run on its allowed CPUs (or those of
    /// [`worker_cpus`](Builder::worker_cpus), which must be allowed there), ordered so that
    /// SMT siblings and LLC members are adjacent, and placement and balancing use its
    /// domains and priorities. Meant for tests and experiments: a worker whose CPU this
    /// machine lacks or forbids runs unpinned.
    pub fn topology(mut self, topo: Topology) -> Builder {
        self.topology = Some(topo);
        self
    }

    /// Overrides the priority (preferred-core ranking) of the CPUs named, `(cpu, rank)`;
    /// higher is preferred. Used by ITMT asym packing and WAKE_PREFER_RANK. A CPU named twice
    /// takes its last rank; an allowed CPU without a worker is ignored, and a CPU outside the
    /// allowed set is an error at [`build`](Builder::build) ([`Error::CpuNotAllowed`]).
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

    /// The kernel's `sched_migration_cost_ns` (debugfs `sched/migration_cost_ns`; default
    /// 500 000, 0.5 ms, [`MIGRATION_COST`](lagom_policy::MIGRATION_COST)): a task that ran
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
    /// [`STALL_GAP`](crate::STALL_GAP) between two scheduling calls and per
    /// [`RESYNC`](crate::RESYNC) of running, and one each time a worker leaves its idle
    /// context. The counters `host_stalls` and `host_stall_ns` say what it left out. How it
    /// measures, and what it cannot see, is in `worker/clock.rs`.
    ///
    /// ```
    /// use lagom::TaskClock;
    /// let rt = lagom::Runtime::builder().task_clock(TaskClock::OnCpu).build()?;
    /// let charged = rt.block_on(|| {
    ///     let mut x = 0u64;
    ///     for i in 0..1_000_000u64 {
    ///         x = std::hint::black_box(x ^ i);
    ///     }
    ///     lagom::task::runtime()
    /// });
    /// assert!(charged.is_some());
    /// # Ok::<(), lagom::Error>(())
    /// ```
    pub fn task_clock(mut self, clock: TaskClock) -> Builder {
        self.task_clock = clock;
        self
    }

    /// Scheduler features, e.g. `"NO_DELAY_DEQUEUE,TTWU_QUEUE"`, applied on the defaults.
    /// Without this call (and with `std`) the `LAGOM_FEATURES` environment variable is used.
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

/// A running lagom runtime: one pinned worker thread per CPU.
///
/// ```
/// let rt = lagom::Runtime::builder().build()?;
/// let v = rt.block_on(|| {
///     let h = lagom::task::spawn(|| 6 * 7);
///     h.join().unwrap()
/// });
/// assert_eq!(v, 42);
/// # Ok::<(), lagom::Error>(())
/// ```
pub struct Runtime {
    shared: Arc<Shared>,
    threads: Vec<Thread>,
    /// What the shutdown could not finish (zero until it ran).
    shutdown: ShutdownStats,
}

impl core::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Runtime")
            .field("workers", &self.shared.workers.len())
            .finish()
    }
}

impl Runtime {
    /// A builder with the defaults.
    pub fn builder() -> Builder {
        Builder::default()
    }

    /// The OS CPUs of the workers, in worker order.
    pub fn worker_cpus(&self) -> Vec<usize> {
        self.shared.workers.iter().map(|w| w.os_cpu).collect()
    }

    /// Runs `f` as a task and returns its value to the calling OS thread, which sleeps
    /// meanwhile. A panic of `f` is resumed here (with `std`; without it, panics abort).
    ///
    /// # Panics
    /// With `f`'s panic; or, naming the caller's location, if the task cannot be spawned (no
    /// stack can be mapped).
    #[track_caller]
    pub fn block_on<T, F>(&self, f: F) -> T
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        match self.spawn_with(TaskBuilder::new().name("block_on"), f) {
            Ok(h) => match h.join() {
                Ok(v) => v,
                #[cfg(feature = "std")]
                Err(e) => std::panic::resume_unwind(e.into_panic()),
                #[cfg(not(feature = "std"))]
                Err(e) => panic!("{e}"),
            },
            Err(e) => panic!("lagom::Runtime::block_on: {e}"),
        }
    }

    /// Spawns `f` from outside the runtime.
    ///
    /// # Panics
    /// If no stack can be mapped (the panic names the caller's location).
    #[track_caller]
    pub fn spawn<T, F>(&self, f: F) -> JoinHandle<T>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        match self.spawn_with(TaskBuilder::new(), f) {
            Ok(h) => h,
            Err(e) => panic!("lagom::Runtime::spawn: {e}"),
        }
    }

    /// Spawns `f` with options from outside the runtime.
    ///
    /// # Errors
    /// As [`crate::task::Builder::spawn`].
    pub fn spawn_with<T, F>(&self, b: TaskBuilder, f: F) -> Result<JoinHandle<T>, Error>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        spawn_inner(&self.shared, None, b, f)
    }

    /// [`crate::scope`] on this runtime, from any thread: tasks spawned with
    /// [`Scope::spawn`](crate::Scope::spawn) run on this runtime and may borrow from the
    /// caller's stack; every one has ended when `scope` returns. A plain thread sleeps on a
    /// futex while it waits; a task of this runtime blocks as a task. The scope holds `&self`,
    /// so the runtime cannot shut down under it.
    ///
    /// ```
    /// let rt = lagom::Runtime::builder().build()?;
    /// let mut parts = [0u64; 4];
    /// rt.scope(|s| {
    ///     for (i, p) in parts.iter_mut().enumerate() {
    ///         s.spawn(move || *p = (i as u64 + 1) * 10);
    ///     }
    /// });
    /// assert_eq!(parts, [10, 20, 30, 40]);
    /// # Ok::<(), lagom::Error>(())
    /// ```
    ///
    /// # Panics
    /// From a task of another runtime (that runtime's shutdown could free the calling task's
    /// stack while this runtime's tasks still use it: call it from a plain thread, or
    /// [`crate::scope`] on the task's own runtime), with the caller's location; and as
    /// [`crate::scope`] panics.
    #[track_caller]
    pub fn scope<'env, F, T>(&self, f: F) -> T
    where
        F: for<'scope> FnOnce(&'scope crate::Scope<'scope, 'env>) -> T,
    {
        if crate::worker::local().is_some_and(|wt| !Arc::ptr_eq(&wt.shared, &self.shared)) {
            panic!(
                "lagom::Runtime::scope called from a task of another runtime: a scope's tasks \
                 must run on the caller's own runtime (use lagom::scope there) or be owned by a \
                 plain thread"
            );
        }
        scope_in(Arc::clone(&self.shared), f)
    }

    /// A snapshot of every worker's counters and the live task and stack counts.
    pub fn stats(&self) -> Stats {
        let (mut live_tasks, mut live_stacks) = (0, 0);
        for w in &self.shared.workers {
            let (tasks, stacks) = w.tasks.counts();
            live_tasks += tasks;
            live_stacks += stacks;
        }
        Stats {
            workers: self
                .shared
                .workers
                .iter()
                .map(|w| w.stats.snapshot(w.os_cpu))
                .collect(),
            live_tasks,
            live_stacks,
            shutdown: self.shutdown,
            layout: WorkerPlace::all(&self.shared.cpus, &self.worker_cpus()),
            layout_fallback: self.shared.layout_fallback,
        }
    }

    /// A snapshot of the trace recorded so far (empty, with `enabled() == false`, when
    /// tracing is off). Each worker's events are a prefix of what it records; the snapshot
    /// is not atomic across workers.
    pub fn trace(&self) -> Trace {
        match &self.shared.trace {
            Some(r) => r.snapshot(self.shared.workers.iter().map(|w| w.os_cpu)),
            None => Trace::default(),
        }
    }

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
        if stuck == 0 {
            self.shutdown.abandoned = self.free_leftovers();
        }
        if stuck > 0 || self.shutdown.abandoned > 0 {
            let msg = alloc::format!(
                "lagom: shutdown did not finish within {timeout:?}: {} task(s) abandoned \
                 without unwinding, {stuck} worker thread(s) left running a task that never \
                 calls into lagom (detached; the runtime's memory is leaked)\n",
                self.shutdown.abandoned
            );
            crate::sys::signal::write_stderr(msg.as_bytes());
        }
    }

    /// Tasks spawned and not yet freed, over every worker's registry.
    fn live_tasks(&self) -> usize {
        self.shared.workers.iter().map(|w| w.tasks.counts().0).sum()
    }

    /// With every worker stopped and joined, frees every task that has not ended (module
    /// doc); returns how many there were.
    fn free_leftovers(&mut self) -> usize {
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
                // SAFETY: the fiber is suspended and will never be resumed; nothing refers
                // into its stack any more (every worker stopped, its wait nodes are
                // unreachable).
                drop(unsafe { f.into_stack_abandoned() });
                if let Some(joiner) = t.completion.cancel() {
                    crate::wake::unpark(&joiner);
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
