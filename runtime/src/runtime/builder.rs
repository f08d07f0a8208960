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
use crate::locking::futex::Futex;
use crate::sched::monitor::OnStall;
use crate::sched::worker_main;
use crate::trace::{DEFAULT_TRACE_CAPACITY, Recorder};
use crate::worker::{PHASE_RUN, Shared, Worker};
use lagom_policy::{Features, MAX_CUSTOM_SLICE, MIN_CUSTOM_SLICE, RqConfig};
use lagom_topology::{Layout, Topology, layout};

/// The most an idle worker's adaptive spin grows to by default ([`Builder::idle_spin_adaptive`]):
/// about what a futex sleep and wakeup cost, so a wakeup that comes sooner finds the worker
/// awake when the wakes seen so far say it will (`examples/idle_spin` measures wake latency
/// against idle CPU per spin length; the curve and the adaptive spin's figures are in the
/// book, `docs/src/lab/idle.md`).
pub const DEFAULT_IDLE_SPIN: Duration = Duration::from_micros(30);

/// The timeout of [`Runtime::shutdown`], [`Runtime::shutdown_with_trace`] and of dropping a
/// runtime ([`Runtime::shutdown_timeout`] says what happens within it).
pub const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(1);

/// How long before its next timer an idle worker stops sleeping and spins by default
/// ([`Builder::timer_spin`]): none. The idle worker sleeps to the deadline, as a thread's
/// `clock_nanosleep` does (and wakes no later: `docs/src/lab/idle.md`); a spin before it is an
/// opt-in that trades CPU for a timer that fires within a few µs.
pub const DEFAULT_TIMER_SPIN: Duration = Duration::ZERO;

/// The longest idle spin [`Builder::idle_spin`] and [`Builder::idle_spin_adaptive`] accept. A cross-CPU futex wake costs tens of
/// The stall monitor's default threshold ([`Builder::stall_threshold`]): a worker whose
/// running task makes no scheduling call for longer than this, while other tasks wait there,
/// is reported. Ten times the kernel's default base slice (3 ms at most, scaled with the
/// CPUs), and short enough that a report comes while the user still watches.
pub const DEFAULT_STALL_THRESHOLD: Duration = Duration::from_millis(10);

/// The shortest threshold [`Builder::stall_threshold`] accepts: the monitor looks at the
/// workers once per threshold, so its CPU time grows as the threshold shrinks, and below a
/// millisecond ordinary lagom code (a slice of 3 ms between `cond_resched` ticks is fine;
/// an OS wakeup on a busy host takes that long) would be reported.
pub const MIN_STALL_THRESHOLD: Duration = Duration::from_millis(1);

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
    idle_spin_fixed: bool,
    timer_spin: Option<Duration>,
    no_tick_timer: bool,
    tracing: bool,
    trace_capacity: Option<usize>,
    fp_control: FpControl,
    allow_migration: bool,
    topology: Option<Topology>,
    ranks: Vec<(usize, u32)>,
    migration_cost: Option<u64>,
    task_clock: TaskClock,
    // Sizing: `worker_threads`, `cgroup_files`, `share_cpus` (kept together).
    worker_threads: Option<usize>,
    cgroup_root: Option<String>,
    share_cpus: bool,
    stall_monitor: Option<bool>,
    stall_threshold: Option<Duration>,
    on_stall: OnStall,
    interpose_sleep: bool,
    float_workers: bool,
    no_host_hints: bool,
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

    // ---- Sizing: how many workers, on which CPUs, and the other runtimes on them. ----

    /// The number of workers (tokio's name), each pinned to a CPU of its own.
    ///
    /// **Default**: one worker per allowed CPU (or per CPU of
    /// [`worker_cpus`](Builder::worker_cpus)), but no more than the CPU quota of the process's
    /// cgroup (`cpu.max` in cgroup v2, `cpu.cfs_quota_us` / `cpu.cfs_period_us` in v1) allows:
    /// the number `std::thread::available_parallelism` reports, by std's rules (the quota in
    /// CPUs rounded down, at least 1: [`lagom_topology::CpuQuota`];
    /// [`Runtime::cpu_quota`] says what was read). A runtime with more busy workers than its
    /// quota would be throttled by the kernel for the rest of each period, every worker at
    /// once, whatever lagom's scheduler decided. An explicit `worker_cpus` list or
    /// `worker_threads` count is taken as given, quota or not.
    ///
    /// **Which CPUs** when `n` is less than the CPUs available: those where the kernel's load
    /// balancer would settle `n` busy threads ([`lagom_topology::spread`]): the biggest cores
    /// first, then spread evenly over the packages, the LLCs and the cores (one worker per
    /// core before any SMT sibling), the preferred (higher-priority) CPUs first within a
    /// group. So `worker_threads(4)` on two 8-core packages takes two cores of each package,
    /// not the first four CPUs.
    ///
    /// **Errors** at [`build`](Builder::build): 0, or more workers than CPUs
    /// ([`Error::WorkerThreads`], which says what to do). lagom runs one pinned worker per CPU
    /// (the scheduler's decisions are per CPU: two workers on one CPU would be time-sliced by
    /// the kernel, hiding lagom's own scheduling), so it does not oversubscribe; to try a
    /// runtime the size of a larger machine, give that machine's [`topology`](Builder::topology).
    ///
    /// **Two runtimes** of one process on the same CPUs oversubscribe them: each pins a worker
    /// there. The second one's build says so on stderr (once per process;
    /// [`share_cpus`](Builder::share_cpus) silences it), and [`Runtime::shared_cpus`] lists
    /// the CPUs. Split the CPUs between them with `worker_cpus`:
    ///
    /// ```
    /// let cpus = lagom_topology::process_affinity()?.iter().collect::<Vec<_>>();
    /// let half = cpus.len().div_ceil(2);
    /// let (front, back) = cpus.split_at(half);
    /// let a = lagom::Runtime::builder().worker_cpus(front.to_vec()).build()?;
    /// // With one CPU there is nothing to split: the second runtime shares it, on purpose.
    /// let b = lagom::Runtime::builder()
    ///     .worker_cpus(if back.is_empty() { front.to_vec() } else { back.to_vec() })
    ///     .share_cpus(back.is_empty())
    ///     .build()?;
    /// println!("{:?} and {:?}; shared: {:?}", a.worker_cpus(), b.worker_cpus(), b.shared_cpus());
    /// # drop((a, b));
    /// let one = lagom::Runtime::builder().worker_threads(1).build()?;
    /// assert_eq!(one.worker_cpus().len(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn worker_threads(mut self, n: usize) -> Builder {
        self.worker_threads = Some(n);
        self
    }

    /// **Lab option.** Reads the CPU quota that bounds the default worker count
    /// ([`worker_threads`](Builder::worker_threads)) from the files below `root` instead of
    /// the live system's: `root/proc/self/cgroup`, `root/proc/self/mountinfo` and the cgroup
    /// files they lead to (`root/sys/fs/cgroup/<group>/cpu.max`, …), as a test or a recorded
    /// machine lays them out. A `root` that cannot be listed is an [`Error::Topology`] at
    /// [`build`](Builder::build). (Without this call, a given [`topology`](Builder::topology)'s
    /// tree stands in for the live files, as it does for the cpuset.)
    pub fn cgroup_files(mut self, root: impl Into<String>) -> Builder {
        self.cgroup_root = Some(root.into());
        self
    }

    /// Says that this runtime is meant to share its CPUs with another runtime of the process
    /// (default `false`): its build then prints no warning when another runtime already has
    /// workers on its CPUs ([`worker_threads`](Builder::worker_threads), "Two runtimes").
    /// [`Runtime::shared_cpus`] lists them either way.
    pub fn share_cpus(mut self, shared: bool) -> Builder {
        self.share_cpus = shared;
        self
    }

    // ---- End of sizing. ----

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

    /// Which clock charges a running task for its run time (default [`TaskClock::OnCpu`]).
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

    /// Whether each worker's thread is pinned to its CPU (default `true`). With `false` the
    /// worker threads float: each may run on any CPU of the process's affinity (taken at
    /// [`build`](Builder::build)), whichever CPUs [`worker_cpus`](Builder::worker_cpus) or
    /// [`worker_threads`](Builder::worker_threads) chose for the layout, and the kernel
    /// places them. The runtime's own placement and balancing stay per worker — each worker
    /// keeps its place in the layout ([`Stats::layout`](super::Stats::layout)), its
    /// runqueue and its tasks — only the OS thread that runs it may move.
    ///
    /// Pinning wins on a machine the runtime has to itself: a worker's caches stay warm and
    /// the layout's domains are the CPUs' real ones. Floating can win only where the kernel
    /// has somewhere better to put a worker whose CPU another process holds: a free CPU in
    /// the allowed set, so more allowed CPUs than workers. On a 2-vCPU guest pinning won
    /// every case measured (1.3–2.0× schbench's requests per second), also beside a
    /// spinning process on one CPU only (the book's lab page "On a shared machine").
    ///
    /// ```
    /// let rt = lagom::Runtime::builder().pin_workers(false).build()?;
    /// assert_eq!(rt.block_on(|| 6 * 7), 42);
    /// # Ok::<(), lagom::Error>(())
    /// ```
    pub fn pin_workers(mut self, pin: bool) -> Builder {
        self.float_workers = !pin;
        self
    }

    /// Whether workers tell the kernel what their tasks need (default `true`): each worker
    /// thread's custom slice (`sched_setattr`'s `sched_runtime`, Linux 6.12 and later) is
    /// the smallest slice among its runnable tasks, and its nice follows the weight it
    /// carries (the sum of its runnable tasks' weights, averaged over its last switches), as
    /// the kernel would weigh the same tasks as threads. A worker calls the kernel only when
    /// one of them changes, at a switch.
    ///
    /// Where the kernel refuses, a worker passes on what it may and the refusal is recorded
    /// once in [`Stats::host_hints`](crate::runtime::Stats::host_hints): a kernel before 6.12 keeps
    /// no custom slice of a `SCHED_OTHER` thread; lowering a nice needs `CAP_SYS_NICE` or
    /// an `RLIMIT_NICE` that allows it, so without either the workers' nice stays as started
    /// (never raised where it could not come back); worker threads whose policy is not
    /// `SCHED_OTHER` or `SCHED_BATCH` are left alone. The counter `host_attr_calls` says how
    /// many calls each worker made.
    ///
    /// ```
    /// let rt = lagom::Runtime::builder().host_hints(false).build()?;
    /// let calls = rt.block_on(|| lagom::task::spawn(|| 1).join().unwrap());
    /// assert_eq!(calls, 1);
    /// assert_eq!(rt.stats().total().host_attr_calls, 0);
    /// # Ok::<(), lagom::Error>(())
    /// ```
    pub fn host_hints(mut self, on: bool) -> Builder {
        self.no_host_hints = !on;
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

    /// The default task stack size in bytes (default [`DEFAULT_STACK_SIZE`], 2 MiB, std's
    /// for a thread; at least [`MIN_STACK_SIZE`]: a smaller size is an
    /// [`Error::StackTooSmall`] at [`build`](Builder::build)). A stack costs memory only where
    /// its task touched it, plus a page-table page per 2 MiB of stacks; a program with a
    /// hundred thousand small tasks saves most of the page tables and some spawn time with
    /// `stack_size(256 * 1024)` (the book's lab page "std's habits" has the figures). A task
    /// that overflows its stack aborts the process, naming the task and these two settings. A
    /// task's closure and the fiber's bookkeeping are kept at the top
    /// of its stack when they take at most 1/16 of it
    /// ([`IN_STACK_SHARE`](crate::arch::IN_STACK_SHARE)), which saves an allocation per
    /// task; the task's frames get the rest.
    pub fn stack_size(mut self, bytes: usize) -> Builder {
        self.stack_size = Some(bytes);
        self
    }

    /// A fixed idle spin: how long a worker that ran out of work polls its wakelist and
    /// runqueue before it publishes idle and sleeps on its futex, every time (at most
    /// [`MAX_IDLE_SPIN`]; [`Duration::ZERO`] sleeps at once). The default is an adaptive spin
    /// ([`idle_spin_adaptive`](Builder::idle_spin_adaptive)); a fixed one is the opt-in for
    /// latency, at the cost of this much CPU each time a worker runs out of work.
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
        self.idle_spin_fixed = true;
        self
    }

    /// An adaptive idle spin of at most `max` (the default, with [`DEFAULT_IDLE_SPIN`]; at
    /// most [`MAX_IDLE_SPIN`]): each worker spins before it sleeps for a window it learns
    /// from its own idle periods, as KVM's halt polling does. It starts at 0; a wake that
    /// came after the window but within `max` doubles it (from 10 µs), a wake after `max`
    /// or a sleep that ended at the worker's own timer halves it (to 0 below 10 µs). So a
    /// worker woken by other workers at short gaps (request and response, a pipeline)
    /// spins through them, and one that only sleeps to its timers, or waits long, does not
    /// spin at all. [`Duration::ZERO`] never spins.
    ///
    /// ```
    /// use std::time::Duration;
    /// let rt = lagom::Runtime::builder()
    ///     .idle_spin_adaptive(Duration::from_micros(50))
    ///     .build()?;
    /// # drop(rt);
    /// # Ok::<(), lagom::Error>(())
    /// ```
    pub fn idle_spin_adaptive(mut self, max: Duration) -> Builder {
        self.idle_spin = Some(max);
        self.idle_spin_fixed = false;
        self
    }

    /// How long before its next timer (a `sleep` deadline) an idle worker ends its futex
    /// sleep and spins instead (default [`DEFAULT_TIMER_SPIN`], none; at most
    /// [`MAX_IDLE_SPIN`]). A futex sleep ends some tens of µs after its timeout on a virtual
    /// machine (the OS wakeup), as a thread's `clock_nanosleep` does, so a sleeping task
    /// wakes that late; spinning the last stretch makes it wake within a few µs, at the cost
    /// of up to this much CPU per timed wakeup of an idle worker: an opt-in for latency.
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

    /// Whether each worker keeps a tick timer (default `true`): a one-shot POSIX timer of
    /// its thread, armed for the next time something is due for its running task (the end
    /// of its protected slice, its worker's next `sleep` timer, the periodic balance), whose
    /// signal sets a flag that [`cond_resched`](crate::task::cond_resched) tests with one
    /// load. Without it every `cond_resched` reads the clock (about 10 ns where the timer's
    /// flag costs about 1, and a used-up slice is noticed up to 50 µs late).
    ///
    /// The signal is `SIGURG`, delivered to the worker's own thread on its alternate stack
    /// with `SA_RESTART`: a system call the kernel restarts (`read`, `write`, `futex`, …)
    /// restarts, but one that is never restarted after a signal handler (`poll`,
    /// `epoll_wait`, `select`, `nanosleep`, a socket call with a timeout) fails with `EINTR`
    /// if the timer expires while a task waits in it. Tasks should not block their worker
    /// in such calls (use [`task::blocking`](crate::task::blocking)); a program whose tasks
    /// must, or that handles `SIGURG` itself without passing on signals it does not know
    /// (lagom passes on every `SIGURG` that is not its own to the handler installed before
    /// it), turns the timer off here. A handler for `SIGURG` that the program installs after
    /// a runtime's workers started replaces lagom's: their ticks are then lost, and a task
    /// that never blocks keeps its worker past its slice; install it before, or turn the
    /// timer off. A worker whose timer the OS refuses reads the clock.
    ///
    /// ```
    /// let rt = lagom::Runtime::builder().tick_timer(false).build()?;
    /// # drop(rt);
    /// # Ok::<(), lagom::Error>(())
    /// ```
    pub fn tick_timer(mut self, on: bool) -> Builder {
        self.no_tick_timer = !on;
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

    /// Whether the runtime runs a stall monitor (default: it does): a thread that notices a
    /// worker whose running task has made no scheduling call for longer than the
    /// [threshold](Builder::stall_threshold) while other tasks wait there — a task blocked
    /// in the OS (a `std::sync` lock or channel, `std::thread::sleep`, file I/O) or computing
    /// without [`cond_resched`](crate::task::cond_resched) — and reports it once per episode
    /// ([`on_stall`](Builder::on_stall)): the task's name and id, its worker, how long, what
    /// its thread is doing (the system call, from `/proc`), what waits behind it and what to
    /// use instead. The reports are also counted ([`WorkerStats`](super::WorkerStats)'s
    /// `stalls`, `stall_ns`) and traced. While a worker is stuck, the monitor kicks an idle
    /// worker to take the tasks queued there that may move (never started, or opted in to
    /// migration).
    ///
    /// Its cost: one plain store per scheduling call on the workers; a look at the workers
    /// once per threshold while any is busy; nothing while every worker is idle (it then
    /// sleeps until one wakes). `false` starts no monitor thread.
    ///
    /// ```
    /// let rt = lagom::Runtime::builder().stall_monitor(false).build()?;
    /// # drop(rt);
    /// # Ok::<(), lagom::Error>(())
    /// ```
    pub fn stall_monitor(mut self, on: bool) -> Builder {
        self.stall_monitor = Some(on);
        self
    }

    /// How long a worker's running task may go without a scheduling call, while other tasks
    /// wait there, before the [stall monitor](Builder::stall_monitor) reports it (default
    /// [`DEFAULT_STALL_THRESHOLD`], 10 ms; at least [`MIN_STALL_THRESHOLD`], 1 ms: less is an
    /// [`Error::OutOfRange`] at [`build`](Builder::build)). A task blocked in the OS is
    /// reported between one and two thresholds after its last scheduling call; one that
    /// computes, once it has also used half a threshold of CPU since the monitor began to
    /// watch it (so that a host that keeps the worker's thread off its CPU is not blamed on
    /// the task), usually within two and a half. A scheduling call is any blocking call of
    /// lagom (`park`, `sleep`, `join`, a `lagom::sync` wait), a yield, a spawn, a task's end,
    /// and [`cond_resched`](crate::task::cond_resched) (whether or not it switches).
    ///
    /// ```
    /// use std::time::Duration;
    /// let rt = lagom::Runtime::builder()
    ///     .stall_threshold(Duration::from_millis(50))
    ///     .build()?;
    /// # drop(rt);
    /// let err = lagom::Runtime::builder()
    ///     .stall_threshold(Duration::from_micros(100))
    ///     .build()
    ///     .unwrap_err();
    /// assert!(err.to_string().contains("stall_threshold"));
    /// # Ok::<(), lagom::Error>(())
    /// ```
    pub fn stall_threshold(mut self, threshold: Duration) -> Builder {
        self.stall_threshold = Some(threshold);
        self
    }

    /// Where the [stall monitor](Builder::stall_monitor)'s reports go (default
    /// [`OnStall::Stderr`]): a line on stderr, a function of yours
    /// ([`OnStall::call`]; called on the monitor's thread for every report, a panic in it
    /// caught), or nowhere ([`OnStall::Silent`]: only the counters and the trace). Every
    /// report is counted and traced whatever this says.
    ///
    /// On stderr the reports are rate-limited, so that a program with many stalling tasks
    /// does not flood it: a report is printed in full only if none with the same task name
    /// (unnamed tasks count as one name) and the same system call was printed within the
    /// last minute, and at most five lines are printed at once, then one per second; the
    /// reports held back are counted in one line, at most once a second after the last line
    /// and when the runtime shuts down. The callback and the counters see every report.
    ///
    /// ```
    /// use lagom::runtime::{OnStall, StallReport};
    /// let rt = lagom::Runtime::builder()
    ///     .on_stall(OnStall::call(|r: &StallReport| {
    ///         eprintln!("{} stalled for {:?}: {}", r.task_name, r.stalled_for, r.cause)
    ///     }))
    ///     .build()?;
    /// # drop(rt);
    /// # Ok::<(), lagom::Error>(())
    /// ```
    pub fn on_stall(mut self, to: OnStall) -> Builder {
        self.on_stall = to;
        self
    }

    /// Makes the C library's sleep functions — `clock_nanosleep`, which `std::thread::sleep`
    /// calls, `nanosleep`, `usleep`, `sleep` — called in a task of this runtime sleep the
    /// task, as [`task::sleep`](crate::task::sleep) does, instead of its worker (with the
    /// `interpose` cargo feature, whose definitions of those functions take the program's
    /// calls of them; elsewhere — plain threads, the blocking pool, other runtimes' tasks —
    /// they go on to the C library). So code written for threads, or a C library, that
    /// sleeps lets the worker's other tasks run: 20 tasks in `std::thread::sleep(20 ms)` on two
    /// workers take 20 ms, not 200.
    ///
    /// What it does not do: `std::sync` locks, condition variables and channels still block
    /// the worker (they wait on futexes, and std's channels on one parker word per thread,
    /// which tasks cannot share), and so does file I/O; the stall monitor reports them, and
    /// `lagom::sync` and [`spawn_blocking`](crate::task::spawn_blocking) are the cures. A
    /// sleep in a hook has no cancellation point: a shutdown cancels the task at its next
    /// call into lagom (it never unwinds through C), and a task still asleep when the
    /// shutdown's time is up is abandoned as a blocked task is. The module doc of
    /// `task/interpose.rs` in the source says why each of these is so.
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use std::time::Duration;
    /// let first = lagom::Runtime::builder().build()?.worker_cpus()[0];
    /// let b = lagom::Runtime::builder().worker_cpus([first]);
    /// // SAFETY: the tasks below hold no std lock, thread-local borrow or thread-keyed lock
    /// // across a sleep, and no signal handler of this program sleeps.
    /// let rt = unsafe { b.interpose_sleep() }.build()?;
    /// let log = Arc::new(Mutex::new(Vec::new()));
    /// let l = Arc::clone(&log);
    /// rt.block_on(move || {
    ///     let l2 = Arc::clone(&l);
    ///     let sleeper = lagom::task::spawn(move || {
    ///         std::thread::sleep(Duration::from_millis(20));
    ///         l2.lock().unwrap().push("slept");
    ///     });
    ///     let other = lagom::task::spawn(move || l.lock().unwrap().push("ran meanwhile"));
    ///     sleeper.join().unwrap();
    ///     other.join().unwrap();
    /// });
    /// // One worker: the other task ran while the first slept in `std::thread::sleep`.
    /// assert_eq!(*log.lock().unwrap(), ["ran meanwhile", "slept"]);
    /// # Ok::<(), lagom::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`build`](Builder::build) returns [`Error::InterposeInactive`] if this program's calls
    /// of `clock_nanosleep` do not reach lagom's definition (another one is linked ahead of
    /// it): a program that asked for the hooks never runs without them unawares.
    ///
    /// # Safety
    ///
    /// A sleep in a task of this runtime then becomes a point where other tasks run on the
    /// same OS thread, in code that never opted in to that: the program's, its libraries',
    /// C code's. The caller promises that the code tasks of this runtime run:
    ///
    /// 1. holds no thread-local borrow or reference across a sleep that another task on the
    ///    thread could also take — e.g. a `RefCell` in a `thread_local!` borrowed across a
    ///    sleep, which panics, and in `unsafe` code, a `&mut` into thread-local storage kept
    ///    across one, which another task's access then aliases: undefined behaviour that was
    ///    sound on a thread;
    /// 2. holds no lock across a sleep that is keyed to the thread or blocks it: not a
    ///    `std::sync::Mutex`/`RwLock` guard (another task of the worker that waits for it
    ///    blocks the worker's thread in the kernel, so the sleeper's timer, which only that
    ///    worker fires, never fires: a deadlock, which the stall monitor reports), nor a
    ///    reentrant lock owned per thread (std's `stdout().lock()`: a second task of the
    ///    worker would enter it too, and their output would mix);
    /// 3. installs no signal handler that calls these functions on a worker thread (a handler
    ///    runs on the interrupted task's stack and cannot be told from it: the hook would
    ///    switch tasks inside the handler);
    /// 4. if tasks may migrate ([`allow_migration`](Builder::allow_migration),
    ///    [`task::Builder::allow_migration`](crate::task::Builder::allow_migration)), keeps
    ///    that promise across sleeps too: a sleep is then a blocking call like any other.
    ///
    /// Why `unsafe` rather than checked: the hazard of 1 is undefined behaviour created by
    /// code that was sound before it ran in a task, and no type can rule it out.
    #[cfg(feature = "interpose")]
    pub unsafe fn interpose_sleep(mut self) -> Builder {
        core::hint::black_box(&crate::sys::interpose::HOOKS);
        self.interpose_sleep = true;
        self
    }

    /// Checks the configuration and starts the workers.
    ///
    /// With `std`, the first runtime of the process also installs a panic hook that names
    /// the task in a task's panic message (`task 'parse' (id 7) panicked at src/main.rs:12:9:`)
    /// where std's names the worker thread; a panic hook you installed before keeps
    /// receiving every panic unchanged (the [`task`](crate::task) module doc, "Panics").
    ///
    /// # Errors
    /// [`Error::NoCpus`], [`Error::CpuNotAllowed`], [`Error::WorkerThreads`],
    /// [`Error::Topology`] (an unreadable [`cgroup_files`](Builder::cgroup_files) root),
    /// [`Error::UnknownFeature`],
    /// [`Error::StackTooSmall`], [`Error::IdleSpinTooLong`], [`Error::TimerSpinTooLong`], [`Error::TraceCapacity`],
    /// [`Error::OutOfRange`], [`Error::ThreadSpawn`], [`Error::InterposeInactive`].
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
        let listed = self.cpus.is_some();
        let candidates = self.cpus.unwrap_or_else(|| allowed.clone());
        if candidates.is_empty() {
            return Err(Error::NoCpus);
        }
        for (i, &cpu) in candidates.iter().enumerate() {
            if !allowed.contains(&cpu) || candidates[..i].contains(&cpu) {
                return Err(Error::CpuNotAllowed { cpu, allowed });
            }
        }
        if let Some(&(cpu, _)) = self.ranks.iter().find(|(c, _)| !allowed.contains(c)) {
            return Err(Error::CpuNotAllowed { cpu, allowed });
        }
        // How many workers, and on which of the candidates (`worker_threads`' doc).
        let cpu_quota = match (&self.cgroup_root, &topo) {
            (Some(root), _) => lagom_topology::cpu_quota_at(root)?,
            (None, Some(t)) => t.cpu_quota().cloned(),
            (None, None) => lagom_topology::cpu_quota(),
        };
        let count = match self.worker_threads {
            Some(n) if n == 0 || n > candidates.len() => {
                return Err(Error::WorkerThreads {
                    requested: n,
                    cpus: candidates,
                    listed,
                });
            }
            Some(n) => n,
            None if listed => candidates.len(),
            #[cfg(not(lagom_mutant = "quota_ignored"))]
            None => cpu_quota
                .as_ref()
                .map_or(candidates.len(), |q| q.cpus.min(candidates.len())),
            #[cfg(lagom_mutant = "quota_ignored")]
            None => candidates.len(),
        };
        let cpus = match &topo {
            Some(t) => lagom_topology::spread(t, &candidates, count),
            // No topology: nothing to spread by; the first ones, in the given order.
            None => candidates[..count].to_vec(),
        };
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
        #[cfg(feature = "interpose")]
        if self.interpose_sleep {
            if !crate::sys::interpose::check() {
                return Err(Error::InterposeInactive);
            }
            crate::sys::interpose::install(crate::task::interpose::sleep_task_until);
        }
        let stall_threshold = self.stall_threshold.unwrap_or(DEFAULT_STALL_THRESHOLD);
        if stall_threshold < MIN_STALL_THRESHOLD {
            return Err(Error::OutOfRange {
                setting: "Builder::stall_threshold",
                value: alloc::format!("{stall_threshold:?}"),
                valid: "1 ms or more (or Builder::stall_monitor(false) for no monitor)",
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
            idle_spin_adaptive: !self.idle_spin_fixed,
            timer_spin: timer_spin.as_nanos() as u64,
            tick_timer: !self.no_tick_timer,
            fp_control: self.fp_control,
            allow_migration: self.allow_migration,
            task_clock: self.task_clock,
            progress_tick: match self.stall_monitor.unwrap_or(true) && !cfg!(loom) {
                true => u64::try_from(stall_threshold.as_nanos() / 2).unwrap_or(u64::MAX),
                false => u64::MAX,
            },
            interpose_sleep: self.interpose_sleep,
            float_cpus: match self.float_workers {
                true => allowed_cpus(),
                false => Vec::new(),
            },
            host_hints: !self.no_host_hints,
            host_notes: AtomicU32::new(0),
            next_outside: AtomicUsize::new(0),
            blocking_borrows: AtomicUsize::new(0),
            trace,
            monitor: Futex::new(0),
        });
        // Names the task in a task's panic message (`task/panic.rs`: once per process, and a
        // hook of the user's set before keeps its place).
        #[cfg(feature = "std")]
        crate::task::install_panic_hook();
        // The CPUs the workers will be pinned to: those of the live process (a given
        // topology's other CPUs run unpinned, `topology`'s doc).
        let live = allowed_cpus();
        let pinned: Vec<usize> = cpus.iter().copied().filter(|c| live.contains(c)).collect();
        let mut rt = Runtime {
            shared,
            threads: Vec::new(),
            monitor: None,
            shutdown: ShutdownStats::default(),
            cpu_quota,
            claim: super::claim::CpuClaim::new(&pinned, self.share_cpus),
        };
        for i in 0..cpus.len() {
            let s = Arc::clone(&rt.shared);
            let name = alloc::format!("lagom-worker-{i}");
            match crate::sys::thread::spawn(name, move || worker_main(s, i)) {
                Ok(t) => rt.threads.push(t),
                Err(errno) => return Err(Error::ThreadSpawn { errno }),
            }
        }
        // Under loom no thread starts: the models play the monitor's handshake themselves.
        #[cfg(not(loom))]
        if self.stall_monitor.unwrap_or(true) {
            use super::MonitorThread;
            use crate::locking::atomic::AtomicBool;
            use crate::sched::monitor::MonitorConfig;
            let cfg = MonitorConfig {
                // At least 1 ms (checked above) and at most u64::MAX ns.
                threshold: u64::try_from(stall_threshold.as_nanos()).unwrap_or(u64::MAX),
                on_stall: self.on_stall,
            };
            let s = Arc::clone(&rt.shared);
            let exited = Arc::new(AtomicBool::new(false));
            let e = Arc::clone(&exited);
            let name = alloc::string::String::from("lagom-monitor");
            match crate::sys::thread::spawn(name, move || {
                crate::sched::monitor::monitor_main(s, cfg, e)
            }) {
                Ok(thread) => rt.monitor = Some(MonitorThread { thread, exited }),
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
