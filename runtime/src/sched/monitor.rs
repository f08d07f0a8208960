//! The stall monitor (Go's `sysmon` for lagom): a thread of the runtime's own that notices a
//! worker whose running task has made no scheduling call for longer than a threshold while
//! other tasks wait there, says what the task is doing and what to use instead, and gets the
//! tasks that may move taken by other workers.
//!
//! A task gives its worker up only at a scheduling call (it blocks in lagom, yields, ends, or
//! reaches `cond_resched`'s tick): a task that blocks in the OS — a `std::sync` lock or
//! channel, `std::thread::sleep`, file I/O — or computes without `cond_resched` holds its
//! worker, and every task queued there waits, silently; with one worker the whole runtime
//! stops. The monitor makes each such episode visible, once.
//!
//! ## What the workers do
//!
//! Each worker stores the scheduler-clock time of its scheduling calls in
//! `Worker::last_point` — in `schedule()`, at an exit, at each full tick of `cond_resched`
//! (at least every 50 µs of a task that calls it, whether or not it switches) and at each
//! round of the idle loop: one Relaxed store of the time the call read anyway, nothing else on
//! the hot path. So "no scheduling call for longer than the threshold" is exactly "the running
//! task neither blocked in lagom nor reached a `cond_resched` for that long". A worker also
//! publishes its earliest live timer (`Worker::next_timer`, `worker/timer.rs`) and, once, its
//! thread's kernel id.
//!
//! ## What the monitor does
//!
//! Every period ([`period`]: the threshold) it looks at each worker that is not idle. A
//! worker whose `last_point` is older than the threshold is *suspect*; only then does the
//! monitor take that worker's runqueue lock (a worker stuck in a task holds none) and look at
//! what waits there: the runnable tasks queued behind the running one, and of those the ones
//! that may move to another worker — never started, or opted in to migration, and allowed
//! elsewhere by their affinity: the balancers' own test, `balance::may_pull` — the ones that
//! started here and may not (the migration contract), and the ones whose affinity allows no
//! other worker; a wakeup queued on its wakelist; a sleeping task whose timer is overdue. If
//! nothing waits there is no stall: a task that holds a worker nobody else needs harms no one.
//! Otherwise it asks the kernel what the worker's thread is doing (`sys/proc.rs`): blocked in
//! the OS — in which system call, and for a futex which operation — or running.
//!
//! A runnable thread counts as *running user code* only once it has used half a threshold of
//! CPU since the monitor began to watch the episode (a baseline of the thread's CPU clock,
//! taken when the worker was half-way to the threshold): on a loaded host the OS can keep a
//! worker's thread off its CPU for tens of milliseconds, and that is not the task's doing.
//! Blocked threads are reported at once.
//!
//! Each episode — one value of `last_point` — is reported once (`stalls` counted, the report
//! delivered, a `Stall` event traced); its length is added to `stall_ns` when it ends. While it
//! lasts and tasks that may move wait, the monitor kicks the idle worker the nohz kick would
//! (`policy::nohz_kick_target`, the same decision): a worker that went to sleep before the
//! work piled up would otherwise never look, since the kick normally comes from the busy
//! worker's own tick, which a stuck worker does not run; woken, its newly idle balance pulls
//! them. What started here and may not migrate, the stuck worker's timers and its wakelist
//! wait for it, and the report says so.
//!
//! A worker whose thread holds a task that unwinds and blocked (`unwind.rs`: no other task
//! may run there while it unwinds, so the block waits on the thread, in lagom's own wait on
//! its kick word) is watched as if it were busy: the same threshold, the same test of what
//! waits there, one report per episode through the same [`OnStall`], with the cause
//! [`StallCause::Unwinding`] instead of what procfs says (a futex wait of lagom's, which
//! would blame lagom) and its own advice. The hold reports nothing itself: one path, one
//! sink, one silence switch.
//!
//! ## Idle cost
//!
//! When every worker has been idle for `DEEP_AFTER`, the monitor sleeps without a timeout
//! ([`deep_sleep`]). A store-buffering handshake keeps that from missing a worker that wakes:
//! the monitor stores `DEEP` in its word, fences (SeqCst), and sleeps only if every kick word
//! still reads idle; a worker that leaves its idle wait swaps its kick word to active, fences,
//! and wakes the monitor if its word reads `DEEP` ([`worker_active`]). One of the fences comes
//! first, so either the monitor sees the worker active or the worker sees `DEEP`. Loom model
//! `monitor_deep_sleep` (mutants `monitor_wake_no_fence`, `monitor_deep_no_recheck`).
//!
//! ## The report
//!
//! [`StallReport`] goes where [`OnStall`] says: stderr by default, rate-limited there (below),
//! or a callback, called on the monitor's thread for every report (a panic in it is caught and
//! the monitoring goes on), or nowhere. The counters and the trace see every report either
//! way. On stderr a report is one line. So that a program with many stalling tasks does not
//! flood it: a report is printed in full only if no report with the same task name (unnamed
//! tasks count as one name) and the same call was printed in the last `REPEAT_QUIET` (a
//! minute), and at most `BURST` (five) full lines are printed at once, then one per second;
//! what is held back is counted and said in one line, at most once a second after the last
//! line, and when the runtime shuts down (`RateLimit`).
//!
//! Differences from the kernel: none of this is a kernel mechanism (the kernel preempts, so
//! no task can hold a CPU from the others). Its closest relatives are the kernel's soft-lockup
//! and hung-task watchdogs, which also watch from another context and report each episode
//! once; the model is Go's `sysmon`, which also retakes a processor stuck in a system call
//! (lagom cannot move a started task that has not opted in) and preempts a long runner (lagom
//! has no preemption; it says to call `cond_resched`).

use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::fmt;
use core::time::Duration;

use crate::locking::atomic::{Ordering, fence};
use crate::trace::{FutexOp, StallCause, Syscall};
use crate::worker::Shared;
#[cfg(not(loom))]
use crate::worker::Task;

/// What the stall monitor does with a report ([`Builder::on_stall`](crate::runtime::Builder::on_stall)).
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use lagom::runtime::{OnStall, StallReport};
/// let seen: Arc<Mutex<Vec<StallReport>>> = Arc::default();
/// let keep = Arc::clone(&seen);
/// let rt = lagom::Runtime::builder()
///     .on_stall(OnStall::call(move |r: &StallReport| keep.lock().unwrap().push(r.clone())))
///     .build()?;
/// # drop(rt);
/// # Ok::<(), lagom::Error>(())
/// ```
#[derive(Clone, Default)]
pub enum OnStall {
    /// Print it on stderr, one line, rate-limited (the module doc of
    /// [`Builder::on_stall`](crate::runtime::Builder::on_stall) says how). The default.
    #[default]
    Stderr,
    /// Count and trace it only ([`WorkerStats::stalls`](crate::runtime::WorkerStats), the
    /// trace's `Stall` events).
    Silent,
    /// Hand every report to this function, on the monitor's thread. A panic in it is caught
    /// (with the `std` feature; without it, a panic is the program's panic handler's) and
    /// the monitor goes on; a function that blocks delays the monitoring of every worker.
    Call(Arc<dyn Fn(&StallReport) + Send + Sync>),
}

impl OnStall {
    /// [`OnStall::Call`] with `f`.
    pub fn call(f: impl Fn(&StallReport) + Send + Sync + 'static) -> OnStall {
        OnStall::Call(Arc::new(f))
    }
}

impl fmt::Debug for OnStall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            OnStall::Stderr => "Stderr",
            OnStall::Silent => "Silent",
            OnStall::Call(_) => "Call(..)",
        })
    }
}

/// One stall: a worker's running task made no scheduling call for longer than the threshold
/// while other tasks waited there ([`Builder::stall_threshold`](crate::runtime::Builder::stall_threshold)).
/// Its `Display` is the line printed on stderr.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StallReport {
    /// The stalled task's id.
    pub task_id: u64,
    /// Its name (`task-<id>` if it has none).
    pub task_name: String,
    /// The index of the worker it holds.
    pub worker: usize,
    /// That worker's OS CPU.
    pub cpu: usize,
    /// How long the worker had gone without a scheduling call when the monitor reported it.
    pub stalled_for: Duration,
    /// What the worker's thread was doing.
    pub cause: StallCause,
    /// Runnable tasks queued behind it: `movable + started_here + affinity_bound`.
    pub runnable: usize,
    /// Of those, the ones that may move to another worker (never started, or opted in to
    /// migration, and allowed there): an idle worker's balance takes them.
    pub movable: usize,
    /// Of those, the ones that started on this worker and may not migrate (the migration
    /// contract: a started task resumes only where it last ran): they wait for the stall to
    /// end.
    pub started_here: usize,
    /// Of those, the ones that may run on no other worker — their affinity allows none, or
    /// the runtime has no other ([`workers`](Self::workers) is 1): they wait too.
    pub affinity_bound: usize,
    /// How many workers the runtime has.
    pub workers: usize,
    /// Whether wakeups from other workers were queued on its wakelist (they are activated
    /// only by the worker itself).
    pub wakeups_queued: bool,
    /// How late the earliest timer of a task sleeping on this worker was, if one was due
    /// (only the worker fires its timers).
    pub timer_overdue: Option<Duration>,
}

impl StallReport {
    /// What to use instead of what held the worker.
    pub fn advice(&self) -> &'static str {
        match self.cause {
            StallCause::Syscall {
                futex_op: Some(FutexOp::Lagom),
                ..
            } => {
                "nothing in the task: its worker waits for one of lagom's own locks, whose \
                 holder the OS keeps off its CPU (an overloaded host); should it last, it is a \
                 bug of lagom's: please report it"
            }
            StallCause::Syscall {
                call: Some(Syscall::Futex),
                ..
            } => {
                "a std::sync lock, Condvar or channel, thread::park or another library's lock \
                 blocks the whole worker: use lagom::sync (Mutex, RwLock, Condvar, mpsc, \
                 Barrier, Semaphore) or lagom::task::park, which block only the task; run a \
                 library call that must block with lagom::task::blocking (its closure may \
                 borrow from the task) or lagom::task::spawn_blocking"
            }
            StallCause::Syscall {
                call: Some(Syscall::ClockNanosleep | Syscall::Nanosleep),
                ..
            } => {
                "std::thread::sleep blocks the whole worker: use lagom::task::sleep (or build \
                 lagom with its `interpose` feature and opt in with Builder::interpose_sleep)"
            }
            StallCause::Syscall { .. }
            | StallCause::OutsideSyscall { .. }
            | StallCause::Blocked { .. } => {
                "a blocking system call (file or network I/O, a child process) holds the whole \
                 worker: run it with lagom::task::blocking (its closure may borrow from the \
                 task) or lagom::task::spawn_blocking"
            }
            StallCause::Running { .. } => {
                "a loop without a scheduling call keeps its worker: call \
                 lagom::task::cond_resched() in it; a loop that waits for another task should \
                 block instead (lagom::sync, lagom::task::park)"
            }
            StallCause::Unknown => {
                "run blocking calls with lagom::task::blocking or lagom::task::spawn_blocking \
                 and call lagom::task::cond_resched() in long loops"
            }
            StallCause::Unwinding => {
                "do not block, in a destructor that may run during a panic, for long — and \
                 never for a task that runs on the same worker: it cannot run until the \
                 unwinding task has unwound, so that wait never ends (a shutdown abandons \
                 both)"
            }
        }
    }

    /// The tasks that waited behind it, in words: "2 runnable tasks (1 may move to another
    /// worker; 1 started here and may not migrate: it waits), wakeups queued".
    fn write_waiting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        let mut sep = |f: &mut fmt::Formatter<'_>| {
            let s = if first { "" } else { ", " };
            first = false;
            f.write_str(s)
        };
        if self.runnable > 0 {
            sep(f)?;
            let s = if self.runnable == 1 { "" } else { "s" };
            write!(f, "{} runnable task{s} (", self.runnable)?;
            let mut parts: Vec<String> = Vec::new();
            if self.movable > 0 {
                parts.push(alloc::format!(
                    "{} may move to another worker",
                    self.movable
                ));
            }
            let they = |n: usize| if n == 1 { "it waits" } else { "they wait" };
            if self.started_here > 0 {
                parts.push(alloc::format!(
                    "{} started here and may not migrate (a started task resumes only on the \
                     worker it last ran on): {}",
                    self.started_here,
                    they(self.started_here)
                ));
            }
            if self.workers == 1 {
                // Nowhere to move: the split below says nothing more.
                parts.clear();
                f.write_str("the runtime has no other worker: ")?;
                f.write_str(they(self.runnable))?;
            } else if self.affinity_bound > 0 {
                parts.push(alloc::format!(
                    "{} may run on no other worker (affinity): {}",
                    self.affinity_bound,
                    they(self.affinity_bound)
                ));
            }
            write!(f, "{})", parts.join("; "))?;
        }
        if self.wakeups_queued {
            sep(f)?;
            f.write_str("wakeups queued for it (they wait)")?;
        }
        if let Some(d) = self.timer_overdue {
            sep(f)?;
            write!(
                f,
                "a sleeping task whose timer is {:.1} ms overdue (it waits)",
                d.as_secs_f64() * 1e3
            )?;
        }
        Ok(())
    }
}

impl fmt::Display for StallReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // A task that unwinds did call lagom (it blocked), but its worker may run no other
        // task meanwhile.
        let how = match self.cause {
            StallCause::Unwinding => "letting another task run",
            _ => "a scheduling call",
        };
        write!(
            f,
            "lagom: task {} \"{}\" has held worker {} (cpu {}) for {:.1} ms without {how}: \
             {}. Waiting behind it: ",
            self.task_id,
            self.task_name,
            self.worker,
            self.cpu,
            self.stalled_for.as_secs_f64() * 1e3,
            self.cause
        )?;
        self.write_waiting(f)?;
        write!(f, ". Instead: {}.", self.advice())
    }
}

/// The monitor's settings, fixed at build (no monitor thread runs under loom).
#[cfg(not(loom))]
#[derive(Debug, Clone)]
pub(crate) struct MonitorConfig {
    /// Nanoseconds without a scheduling call that make a stall.
    pub(crate) threshold: u64,
    /// What to do with a report.
    pub(crate) on_stall: OnStall,
}

/// `Shared::monitor`: the monitor samples (its timed sleep between looks).
const AWAKE: u32 = 0;
/// `Shared::monitor`: the monitor sleeps without a timeout (every worker was idle).
const DEEP: u32 = 1;
/// `Shared::monitor`: the runtime shuts down: the monitor ends.
const STOP: u32 = 2;

/// A worker left its idle wait — it slept and woke, or its re-check found work — and its kick
/// word reads active again: if the monitor sleeps without a timeout, wake it (the worker's
/// half of the handshake in the module doc).
#[inline]
pub(crate) fn worker_active(shared: &Shared) {
    // Orders the kick word's store (the swap or store back to active) before the load of the
    // monitor's word. Mutant `monitor_wake_no_fence` (loom model `monitor_deep_sleep`): the
    // monitor can sleep for good while this worker runs tasks.
    #[cfg(not(lagom_mutant = "monitor_wake_no_fence"))]
    fence(Ordering::SeqCst);
    let word = shared.monitor.word();
    if word.load(Ordering::Relaxed) == DEEP
        && word
            .compare_exchange(DEEP, AWAKE, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    {
        crate::locking::probe::probe!("sched/monitor: a waking worker wakes the monitor");
        shared.monitor.wake_all();
    }
}

/// The monitor's half of the handshake (module doc): sleeps without a timeout unless a worker
/// is active (or the runtime is stopping), and returns once woken. Returns whether it slept.
pub(crate) fn deep_sleep(shared: &Shared) -> bool {
    let word = shared.monitor.word();
    if word
        .compare_exchange(AWAKE, DEEP, Ordering::Relaxed, Ordering::Relaxed)
        .is_err()
    {
        return false;
    }
    fence(Ordering::SeqCst);
    // Mutant `monitor_deep_no_recheck` (loom model `monitor_deep_sleep`): the monitor sleeps
    // on its earlier look, which a worker that woke since has not seen.
    let all_idle = cfg!(lagom_mutant = "monitor_deep_no_recheck")
        || shared.workers.iter().all(|w| w.kick.is_idle());
    let slept = all_idle;
    if all_idle {
        crate::locking::probe::probe!("sched/monitor: the monitor sleeps without a timeout");
        shared.monitor.wait(DEEP, None);
    }
    let _ = word.compare_exchange(DEEP, AWAKE, Ordering::Relaxed, Ordering::Relaxed);
    slept
}

/// Ends the monitor (the runtime's shutdown, once the workers are done).
pub(crate) fn stop(shared: &Shared) {
    shared.monitor.word().store(STOP, Ordering::Relaxed);
    shared.monitor.wake_all();
}

/// How often the monitor looks at the workers while any is busy: every threshold. A stall is
/// then reported between one and two thresholds after the task's last scheduling call if it
/// is blocked in the OS, and up to about two and a half if it runs (it must first be seen to
/// use half a threshold of CPU); looking every half threshold would cut that by a third and
/// double the monitor's CPU time (the figures are in the docs' lab page "Blocking code").
#[cfg(not(loom))]
pub(crate) fn period(threshold: u64) -> u64 {
    threshold
}

#[cfg(not(loom))]
pub(crate) use thread::monitor_main;

/// The monitor's thread (not under loom: the models play its handshake, [`deep_sleep`]).
#[cfg(not(loom))]
mod thread {
    use super::*;
    use crate::locking::atomic::AtomicBool;
    use crate::sys::proc::{self, SyscallText};
    use lagom_policy::{LoadView, nohz_kick_target};

    /// How long every worker must have been idle before the monitor sleeps without a timeout:
    /// long enough that a worker woken every few milliseconds (a periodic sleeper) does not
    /// cost a `futex_wake` of the monitor at each wakeup.
    const DEEP_AFTER: u64 = 1_000_000_000;

    /// One worker's current episode: the `last_point` it is stuck at.
    #[derive(Clone, Copy)]
    struct Episode {
        last: u64,
    }

    /// The CPU-clock baseline of a worker's thread for the episode at `last`: (`last`,
    /// monotonic ns, the thread's CPU ns).
    type Baseline = (u64, u64, u64);

    /// The monitor thread's body. `exited` is set when it returns.
    pub(crate) fn monitor_main(shared: Arc<Shared>, cfg: MonitorConfig, exited: Arc<AtomicBool>) {
        let n = shared.workers.len();
        let mut episodes: Vec<Option<Episode>> = alloc::vec![None; n];
        let mut baselines: Vec<Option<Baseline>> = alloc::vec![None; n];
        let mut out = Reporter::new(cfg.on_stall.clone());
        let period = period(cfg.threshold);
        let mut all_idle_since: Option<u64> = None;
        loop {
            let word = shared.monitor.word();
            if word.load(Ordering::Relaxed) == STOP {
                break;
            }
            let now = crate::sys::time::sched_clock();
            let mut busy = false;
            for i in 0..n {
                let w = &shared.workers[i];
                let last = w.last_point.load(Ordering::Relaxed);
                if let Some(ep) = episodes[i] {
                    if ep.last == last {
                        // Still stuck: kick again for what may move (a kick lost to a worker
                        // that was busy, or tasks made movable since).
                        busy = true;
                        let _ = look(&shared, &cfg, i, now, last, None, &mut out);
                        continue;
                    }
                    // The episode ended at the worker's next scheduling call.
                    w.stats
                        .stall_ns
                        .fetch_add(last.saturating_sub(ep.last), Ordering::Relaxed);
                    episodes[i] = None;
                }
                // Idle — unless its kick word reads idle because its thread holds a task that
                // unwinds and blocked (`unwind.rs`): that is watched as a busy worker is.
                let hold = unwind_hold(w);
                if w.kick.is_idle() && !hold {
                    continue;
                }
                busy = true;
                let age = now.saturating_sub(last);
                if !hold && age >= cfg.threshold / 2 && baselines[i].is_none_or(|b| b.0 != last) {
                    let tid = w.tid.load(Ordering::Relaxed);
                    baselines[i] = proc::thread_cpu_ns(tid)
                        .map(|cpu| (last, crate::sys::time::monotonic_ns(), cpu));
                }
                if age < cfg.threshold {
                    continue;
                }
                let base = baselines[i].filter(|b| b.0 == last);
                if look(&shared, &cfg, i, now, last, Some(base), &mut out) {
                    episodes[i] = Some(Episode { last });
                }
            }
            out.flush_held_back();
            if busy {
                all_idle_since = None;
            } else {
                let since = *all_idle_since.get_or_insert(now);
                if now.saturating_sub(since) >= DEEP_AFTER {
                    deep_sleep(&shared);
                    all_idle_since = None;
                    continue;
                }
            }
            shared.monitor.wait(AWAKE, Some(period));
        }
        out.finish();
        exited.store(true, Ordering::Release);
    }

    /// Looks at suspect worker `i`, stuck at `last` (`now` on the scheduler clock): under its
    /// runqueue lock, what waits there; if anything does, kicks an idle worker for what may
    /// move and, when `report` is `Some` (the episode is new; its CPU baseline inside),
    /// classifies the thread and reports the stall. Returns whether it reported one.
    fn look(
        shared: &Shared,
        cfg: &MonitorConfig,
        i: usize,
        now: u64,
        last: u64,
        report: Option<Option<Baseline>>,
        out: &mut Reporter,
    ) -> bool {
        let w = &shared.workers[i];
        let rq = w.rq.lock();
        if w.last_point.load(Ordering::Relaxed) != last {
            return false;
        }
        let Some(c) = rq.curr() else { return false };
        let t: &Task = rq.payload(c);
        let (task_id, task_name) = (t.id, t.name.clone());
        let (mut runnable, mut movable, mut started_here, mut affinity_bound) = (0, 0, 0, 0);
        let others = || (0..shared.workers.len()).filter(move |&j| j != i);
        for (h, se, q) in rq.iter() {
            if h == c || se.sched_delayed {
                continue;
            }
            runnable += 1;
            // A task still being switched away from (its worker kept off its CPU mid-switch)
            // has started: its scheduling part is the switching worker's, as for the
            // balancers.
            if q.on_cpu.load(Ordering::Acquire) {
                started_here += 1;
            } else if others().any(|j| super::super::balance::may_pull(q, j)) {
                movable += 1;
            } else if others().any(|j| q.allowed(j)) {
                started_here += 1;
            } else {
                affinity_bound += 1;
            }
        }
        drop(rq);
        let wakeups_queued = !w.wakelist.is_empty();
        let mono = crate::sys::time::monotonic_ns();
        let timer = w.next_timer.load(Ordering::Relaxed);
        let timer_overdue = (timer <= mono).then(|| Duration::from_nanos(mono - timer));
        if runnable == 0 && !wakeups_queued && timer_overdue.is_none() {
            return false;
        }
        // What the thread is doing is read before the kick: the kicked worker may run a task
        // that wakes this one. A hold of a task that unwinds is no business of procfs's: the
        // thread waits in lagom, on its kick word.
        let cause = report.and_then(|base| {
            if unwind_hold(w) {
                Some(StallCause::Unwinding)
            } else {
                classify(cfg, w.tid.load(Ordering::Relaxed), base)
            }
        });
        if movable > 0 {
            kick_for_movable(shared, i);
        }
        let Some(cause) = cause else { return false };
        // The stderr rate limit's key: the task's name (unnamed tasks share one) and call.
        let key = (
            task_name.clone(),
            cause.call().map_or(cause.kind(), Syscall::name),
        );
        let r = StallReport {
            task_id,
            task_name: if task_name.is_empty() {
                alloc::format!("task-{task_id}")
            } else {
                task_name
            },
            worker: i,
            cpu: w.os_cpu,
            stalled_for: Duration::from_nanos(now.saturating_sub(last)),
            cause,
            runnable,
            movable,
            started_here,
            affinity_bound,
            workers: shared.workers.len(),
            wakeups_queued,
            timer_overdue,
        };
        w.stats.inc(&w.stats.stalls);
        if let Some(rec) = &shared.trace {
            let kind = crate::trace::TraceEventKind::Stall {
                task: task_id,
                stalled_ns: now.saturating_sub(last),
                worker: u32::try_from(i).unwrap_or(u32::MAX),
                waiting: u32::try_from(runnable).unwrap_or(u32::MAX),
                cause,
            };
            // SAFETY: `None` records into the locked outside log, whose lock makes this
            // thread its writer (the monitor is no worker).
            unsafe { rec.record(None, kind) };
        }
        out.deliver(&r, key);
        true
    }

    /// Whether worker `w`'s thread holds a task that unwinds and blocked (`unwind.rs`).
    fn unwind_hold(w: &crate::worker::Worker) -> bool {
        // Mutant `monitor_ignores_unwinding` (runtime/tests/mutants.sh): a task that unwinds
        // and waits for good on a task of its own worker holds it in silence.
        !cfg!(lagom_mutant = "monitor_ignores_unwinding") && w.unwind_hold.load(Ordering::Relaxed)
    }

    /// What worker thread `tid` is doing, from procfs, or `None` if it is not to be reported
    /// now: runnable without having used half a threshold of CPU since the `base`line (the
    /// OS kept it off its CPU, or no baseline was taken yet), or it woke between the reads.
    fn classify(cfg: &MonitorConfig, tid: u32, base: Option<Baseline>) -> Option<StallCause> {
        let Some(s) = proc::thread_state(tid) else {
            return Some(StallCause::Unknown);
        };
        let state = s.state as char;
        Some(match s.syscall {
            SyscallText::Running => {
                if state != 'R' {
                    // It woke between the two reads: look again next period.
                    return None;
                }
                // Running means having used CPU: half a threshold of it since the baseline.
                let (_, t0, cpu0) = base?;
                let used = proc::thread_cpu_ns(tid)?.saturating_sub(cpu0);
                if used < cfg.threshold / 2 {
                    return None;
                }
                let wall = crate::sys::time::monotonic_ns().saturating_sub(t0).max(1);
                StallCause::Running {
                    on_cpu_percent: (used.saturating_mul(100) / wall).min(100) as u8,
                }
            }
            SyscallText::In { nr, arg1, arg5 } => {
                let call = proc::syscall_name(nr);
                StallCause::Syscall {
                    state,
                    call,
                    nr: i32::try_from(nr).unwrap_or(i32::MAX),
                    futex_op: (call == Some(Syscall::Futex)).then(|| proc::futex_op(arg1, arg5)),
                }
            }
            SyscallText::Outside => StallCause::OutsideSyscall { state },
            SyscallText::Unreadable => StallCause::Blocked { state },
        })
    }

    /// Kicks the idle worker the nohz kick would wake for worker `i`'s waiting tasks
    /// (`policy::nohz_kick_target`), so that its newly idle balance takes what may move.
    fn kick_for_movable(shared: &Shared, i: usize) {
        // Mutant `monitor_no_kick` (runtime/tests/mutants.sh): a worker asleep since before
        // the tasks piled up never looks.
        if cfg!(lagom_mutant = "monitor_no_kick") {
            return;
        }
        let view = |j: usize| {
            let w = &shared.workers[j];
            LoadView {
                load: w.load.load(Ordering::Relaxed),
                nr_running: w.nr_running.load(Ordering::Relaxed),
            }
        };
        if let Some(j) = nohz_kick_target(&shared.cpus, i, view, shared.features)
            && shared.workers[j].kick.kick()
        {
            let w = &shared.workers[i];
            w.stats.inc(&w.stats.stall_kicks);
        }
    }

    /// Where reports go, with the stderr rate limit (module doc).
    struct Reporter {
        on_stall: OnStall,
        limit: RateLimit,
        /// The callback panicked at least once (said once on stderr).
        callback_panicked: bool,
    }

    impl Reporter {
        fn new(on_stall: OnStall) -> Reporter {
            Reporter {
                on_stall,
                limit: RateLimit::new(crate::sys::time::monotonic_ns()),
                callback_panicked: false,
            }
        }

        fn deliver(&mut self, r: &StallReport, key: (String, &'static str)) {
            match &self.on_stall {
                OnStall::Silent => {}
                OnStall::Call(f) => {
                    let f = Arc::clone(f);
                    self.call(&*f, r);
                }
                OnStall::Stderr => {
                    let now = crate::sys::time::monotonic_ns();
                    let Some(held_back) = self.limit.admit(key, now) else {
                        return;
                    };
                    say_held_back(held_back);
                    let line = alloc::format!("{r}\n");
                    crate::sys::signal::write_stderr(line.as_bytes());
                }
            }
        }

        /// Calls the user's function; with `std`, a panic in it is caught (said once).
        fn call(&mut self, f: &(dyn Fn(&StallReport) + Send + Sync), r: &StallReport) {
            #[cfg(feature = "std")]
            {
                let ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(r))).is_ok();
                if !ok && !self.callback_panicked {
                    self.callback_panicked = true;
                    crate::sys::signal::write_stderr(
                        b"lagom: the stall callback (Builder::on_stall) panicked; the stall \
                          monitor goes on and calls it for the next stall\n",
                    );
                }
            }
            #[cfg(not(feature = "std"))]
            {
                let _ = &mut self.callback_panicked;
                f(r)
            }
        }

        /// Says how many reports were held back, once a line may be printed.
        fn flush_held_back(&mut self) {
            if let Some(n) = self.limit.summary_due(crate::sys::time::monotonic_ns()) {
                say_held_back(n);
            }
        }

        /// The monitor ends: say what is still held back.
        fn finish(&mut self) {
            say_held_back(self.limit.take_held_back());
        }
    }

    /// The line that counts `n` held-back reports (nothing for 0).
    fn say_held_back(n: u64) {
        if n == 0 {
            return;
        }
        let line = alloc::format!(
            "lagom: {n} more stall report(s) not printed (repeats of a task name and call \
             printed in the last minute, or more than {BURST} at once); Runtime::stats() \
             counts every stall (`stalls`), and Builder::on_stall can take each report\n"
        );
        crate::sys::signal::write_stderr(line.as_bytes());
    }
}

/// The stderr rate limit (module doc), on times the caller passes (monotonic ns).
#[cfg(not(loom))]
#[derive(Debug)]
pub(crate) struct RateLimit {
    /// (task name, call) of reports printed in full, and when.
    printed: Vec<((String, &'static str), u64)>,
    /// Full lines that may be printed now (one more per `REFILL`, at most `BURST`).
    tokens: u32,
    /// When `tokens` was last topped up.
    refilled: u64,
    /// When the last line (of either kind) was printed.
    last_line: u64,
    /// Reports held back since the last line that counted them.
    held_back: u64,
}

/// On stderr, a report with the same task name and call as one printed within this long is
/// held back.
#[cfg(not(loom))]
const REPEAT_QUIET: u64 = 60_000_000_000;

/// On stderr, at most this many full lines at once; then one per `REFILL`.
#[cfg(not(loom))]
const BURST: u32 = 5;

/// See `BURST`; also the least time between two lines that count held-back reports.
#[cfg(not(loom))]
const REFILL: u64 = 1_000_000_000;

#[cfg(not(loom))]
impl RateLimit {
    pub(crate) fn new(now: u64) -> RateLimit {
        RateLimit {
            printed: Vec::new(),
            tokens: BURST,
            refilled: now,
            last_line: 0,
            held_back: 0,
        }
    }

    /// A report with `key` at `now`: `Some(held back so far)` if it is printed in full (the
    /// caller first says how many were held back), `None` if it is held back.
    pub(crate) fn admit(&mut self, key: (String, &'static str), now: u64) -> Option<u64> {
        let n = now.saturating_sub(self.refilled) / REFILL;
        if n > 0 {
            self.tokens = (u64::from(self.tokens) + n).min(u64::from(BURST)) as u32;
            self.refilled = self.refilled.saturating_add(n * REFILL);
        }
        self.printed
            .retain(|(_, at)| now.saturating_sub(*at) < REPEAT_QUIET);
        if self.tokens == 0 || self.printed.iter().any(|(k, _)| *k == key) {
            self.held_back += 1;
            return None;
        }
        self.tokens -= 1;
        self.printed.push((key, now));
        self.last_line = now;
        Some(self.take_held_back())
    }

    /// The count of held-back reports to print now, if any are held back and no line was
    /// printed for `REFILL`.
    pub(crate) fn summary_due(&mut self, now: u64) -> Option<u64> {
        if self.held_back == 0 || now.saturating_sub(self.last_line) < REFILL {
            return None;
        }
        self.last_line = now;
        Some(self.take_held_back())
    }

    /// The count of held-back reports, reset.
    pub(crate) fn take_held_back(&mut self) -> u64 {
        core::mem::take(&mut self.held_back)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    fn key(name: &str, call: &'static str) -> (String, &'static str) {
        (String::from(name), call)
    }

    #[test]
    fn a_repeat_is_held_back_for_a_minute_and_counted() {
        let mut l = RateLimit::new(0);
        assert_eq!(l.admit(key("", "futex"), 10), Some(0));
        for i in 0..10 {
            assert_eq!(l.admit(key("", "futex"), 20 + i), None);
        }
        // Another name or call is news.
        assert_eq!(l.admit(key("stage", "futex"), 40), Some(10));
        assert_eq!(l.admit(key("", "clock_nanosleep"), 50), Some(0));
        // The same key after a minute is printed again.
        assert_eq!(l.admit(key("", "futex"), 61 * S), Some(0));
    }

    #[test]
    fn at_most_a_burst_then_one_per_second() {
        let mut l = RateLimit::new(0);
        let name = |i: u64| key(&alloc::format!("t{i}"), "read");
        for i in 0..u64::from(BURST) {
            assert_eq!(l.admit(name(i), i), Some(0));
        }
        assert_eq!(l.admit(name(100), 10), None);
        assert_eq!(l.admit(name(101), S / 2), None);
        assert_eq!(l.admit(name(102), S + 1), Some(2));
        assert_eq!(l.admit(name(103), S + 2), None);
    }

    #[test]
    fn held_back_reports_are_summed_up_at_most_once_a_second() {
        let mut l = RateLimit::new(0);
        assert_eq!(l.admit(key("", "futex"), 0), Some(0));
        assert_eq!(l.summary_due(S / 2), None);
        assert_eq!(l.admit(key("", "futex"), S / 2), None);
        assert_eq!(l.summary_due(S / 2 + 1), None);
        assert_eq!(l.admit(key("", "futex"), S / 2 + 2), None);
        assert_eq!(l.summary_due(S), Some(2));
        assert_eq!(l.summary_due(3 * S), None);
        assert_eq!(l.admit(key("", "futex"), 3 * S), None);
        assert_eq!(l.summary_due(3 * S + 1), Some(1));
        assert_eq!(l.admit(key("", "futex"), 3 * S + 2), None);
        assert_eq!(l.summary_due(3 * S + 3), None);
        assert_eq!(l.summary_due(4 * S + 1), Some(1));
    }
}
