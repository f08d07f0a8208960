//! A task that unwinds keeps its worker's thread: while it unwinds, no other task runs on
//! that OS thread.
//!
//! Invariant: *no task runs on a worker thread while another task's panic is in flight there,
//! so `std::thread::panicking()` is true in a task exactly while that task itself unwinds.*
//!
//! ## Why
//!
//! std counts panics in flight per OS thread (a thread-local count, raised when a panic
//! starts — before its hook runs — and lowered by the `catch_unwind` that catches it) and
//! offers no way to save, lower or restore it. `std::thread::panicking()` reads that count:
//! every lock guard of std and of `lagom::sync` reads it at its drop to decide whether to
//! poison, and user code reads it directly. A task whose destructor blocks while it unwinds
//! (a `Drop` that joins, sends, locks, sleeps) used to switch its worker to the next task with
//! the count still raised: that task then saw `panicking() == true`, and its ordinary unlocks
//! poisoned its mutexes; a panic of its own inside the first task's panic hook would abort
//! the process ("panicked while processing panic").
//!
//! ## What happens instead
//!
//! [`schedule`](super::schedule)'s first step looks at the count (one relaxed load of std's
//! global panic count while no thread panics). If the calling thread is unwinding, the
//! running task is the one unwinding (no other task ran here since the panic began), and:
//!
//! * a **yield or preemption** (`yield_now`, `cond_resched`, a spawn's or a failing
//!   `try_*`'s preemption point) does not switch: the task goes on;
//! * a **block** (`park`, and so every blocking call of `lagom::sync`, `sleep`, `join`)
//!   waits on the worker's OS thread instead of switching ([`hold`]): the task stays the
//!   worker's current task, still queued, and sleeps on the worker's kick word until a waker
//!   claims it. The wakeup path needs nothing new: a waker that finds a blocked task still
//!   queued makes it runnable in place (`wake/runnable.rs`, as the kernel's `ttwu_runnable`
//!   for a task woken before it switched away) and kicks its worker. Meanwhile the wait fires
//!   the worker's timers (the task's own `sleep` among them) and drains its wakelist into its
//!   runqueue, so that the other workers' balancing may take the tasks there that may move
//!   (never started, or opted in to migration).
//!
//! ## The cost
//!
//! A task that never panics pays the one load per `schedule()`. A task whose destructor
//! blocks while it unwinds holds its worker's thread for as long as it waits: the other tasks
//! of that worker that may not move wait with it (as they would behind a task that blocks in
//! the OS). If the destructor waits for one of *them* — a task that can only run on this
//! worker — it waits forever. Such a hold is a stall, and the stall monitor (`monitor.rs`)
//! reports it as one: once the hold has lasted its threshold while other tasks wait there,
//! once per episode, through the runtime's one reporting path (`Builder::on_stall`: stderr,
//! a callback or silence; counted in `stalls`, traced), with the cause `Unwinding` — the
//! hold says nothing itself (`Worker::unwind_hold` tells the monitor; the worker's kick word
//! reads idle meanwhile). A shutdown ends it at its give-up point (EXIT): the task is
//! abandoned, its thread runs no task again and leaves its loop ([`strand`]), and the
//! shutdown frees the tasks left there without unwinding them.
//!
//! The shutdown's own waits that would otherwise wait for a task of the same worker while
//! unwinding — a scope's owner for its children, `join` for its `b` — are no cancellation
//! points (`task/park.rs`, `park_uncancelled`): a cancelled owner goes on waiting without
//! unwinding, and unwinds once its children have ended.

use super::timer;
use crate::locking::atomic::Ordering;
use crate::tcb::RUNNING;
use crate::wake::drain;
use crate::worker::{PHASE_EXIT, Task, WorkerThread};

/// Whether the calling OS thread is unwinding from a panic (std's per-thread count; never
/// without `std`, where nothing unwinds, nor under loom, whose models never panic on
/// purpose).
#[inline]
pub(crate) fn thread_unwinding() -> bool {
    #[cfg(all(feature = "std", not(loom)))]
    return std::thread::panicking();
    #[cfg(not(all(feature = "std", not(loom))))]
    false
}

/// `schedule(reason)` for the running task of `wt`, which unwinds (module doc): a yield or
/// a preemption does nothing, a block waits on this thread until the task is woken.
#[cold]
#[inline(never)]
pub(super) fn hold(wt: &WorkerThread, reason: super::Reason) {
    // Mutant `unwinding_task_switches` (runtime/tests/mutants.sh): the worker switches to
    // another task while this one unwinds, which then sees `panicking()`.
    if cfg!(lagom_mutant = "unwinding_task_switches") {
        return super::schedule::schedule_switching(wt, reason);
    }
    if reason != super::Reason::Block {
        return;
    }
    let t = wt.curr.get();
    assert!(!t.is_null(), "lagom: schedule from the idle task");
    // SAFETY: the running task, alive in its registry while it runs.
    wait_on_thread(wt, unsafe { &*t });
}

/// The block of the running task `t` of `wt`, which unwinds: waits on this OS thread until a
/// waker made it `RUNNING` again (module doc).
fn wait_on_thread(wt: &WorkerThread, t: &Task) {
    let w = wt.worker();
    // The stall monitor watches this worker while its kick word reads idle, and reports a
    // hold that lasts (module doc, "The cost").
    w.unwind_hold.store(true, Ordering::Relaxed);
    let _unhold = Unhold(w);
    loop {
        // The task's own `sleep` is among these (woken here, it is made runnable in place).
        timer::fire(wt);
        // Acquire: pairs with the waker's unlock of this runqueue after its RUNNING store.
        if t.state.load(Ordering::Acquire) == RUNNING {
            return;
        }
        let phase = wt.shared.phase();
        if phase == PHASE_EXIT {
            // The shutdown gave up on the tasks that have not ended: this one is abandoned,
            // and its thread, whose panic count it keeps raised, runs no task again (`strand`
            // does not return: the hold ends here for the monitor).
            w.unwind_hold.store(false, Ordering::Relaxed);
            super::schedule::strand(wt);
        }
        {
            let mut rq = w.rq.lock();
            drain(
                &wt.shared,
                wt.index,
                &mut rq,
                crate::sys::time::sched_clock(),
            );
        }
        let now = crate::sys::time::monotonic_ns();
        let timeout = wt
            .timers
            .borrow()
            .next_deadline()
            .map(|d| d.saturating_sub(now));
        // The kick protocol (`locking/kick.rs`): a waker that made the task RUNNING kicks
        // this worker after its store, a wakelist push kicks it too, and a shutdown's phase
        // change kicks every worker; the re-check sees the first and the last.
        let _ = w.kick.idle_wait(
            || {
                t.state.load(Ordering::Relaxed) == RUNNING
                    || wt.shared.phase.load(Ordering::Relaxed) != phase
            },
            timeout,
        );
        // Its kick word reads active again: a stall monitor that saw every worker idle and
        // sleeps without a timeout must watch again (`monitor.rs`).
        super::monitor::worker_active(&wt.shared);
    }
}

/// Clears `Worker::unwind_hold` when the hold returns (a stranded hold clears it itself).
struct Unhold<'a>(&'a crate::worker::Worker);

impl Drop for Unhold<'_> {
    fn drop(&mut self) {
        self.0.unwind_hold.store(false, Ordering::Relaxed);
    }
}
