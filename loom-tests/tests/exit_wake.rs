//! Model 9, **the exit's held-lock wakeup**: a task's exit wakes its joiner while the exiting
//! worker holds its own runqueue lock (`sched/exit.rs` → `Unparker::unpark_held` →
//! `wake::try_to_wake_up_held`), over the real path: the `Model::exit` seam plays the
//! exiting worker with a `WorkerThread` of its own (`model/exit.rs`), the joiner's side is the
//! real join round (`JoinHandle::try_take`), `prepare_park` and `schedule()`'s seams.
//!
//! X, the ending task, runs on worker 0; J joins it. The exit dequeues X, delivers the value
//! and, still under worker 0's lock, wakes J: a J queued on worker 0 is requeued in place
//! under that lock, a J enqueued on worker 0 is activated under it, and every other path
//! (J queued on worker 1, or still `on_cpu` there, or enqueued there) releases it first. The
//! exit then drains, picks and switches (into J, if it picked it: the restore checks that J's
//! switch-out happened-before).
//!
//! * `exit_wake_remote`: J blocks **on worker 1** while X exits on worker 0. J runs beside a
//!   queued task U, registers as X's joiner and parks: it announces `BLOCKED`, and worker 1's
//!   `schedule()` dequeues it (delayed, under DELAY_DEQUEUE: it was charged 10 ms and is
//!   not eligible) and switches to U. The exit's wakeup can find J still queued on worker 1
//!   (before its dequeue, or delayed there), dequeued but still `on_cpu` there, or switched
//!   out; in the last case CPU selection sends it to worker 1 if that looks idle, else to
//!   worker 0, the waker's, where it is activated under the held lock and picked by the
//!   exit's own pick.
//! * `exit_wake_remote_idle`: the same without U. When J blocks, worker 1 looks idle, so a
//!   wakeup that finds J switched out selects worker 1 (J's previous CPU): the exit
//!   releases its lock and enqueues J there, though J was queued nowhere.
//! * `exit_wake_local`: J blocked **on worker 0** (as a worker is one thread, its block
//!   completed before X ran there: J's `schedule()` picked X): it sleeps delayed on worker
//!   0 (DELAY_DEQUEUE), or dequeued. The race is with worker 1, which runs its periodic
//!   balance (it may pull the delayed J, under both locks: only that balancer moves delayed
//!   tasks) and then looks for work as its idle loop does (drain, pick — which finishes the
//!   dequeue of a delayed J it pulled — and switch in). The exit's wakeup then finds J
//!   delayed on worker 0 (requeued in place under the held lock, or with TTWU_DEQUEUE
//!   dequeued and enqueued there under it), dequeued (enqueued on worker 0 under the held
//!   lock: worker 0 looks idle once X is gone), or pulled to worker 1 (the lock released,
//!   worker 1's taken; or, once worker 1's pick finished its dequeue, enqueued there).
//!
//! Checked, in every execution: J gets the value; a J that slept is woken exactly once —
//! queued on exactly one runqueue, the one its `cpu` names, `RUNNING`, no longer delayed —
//! never lost and never queued twice; X is on no runqueue and off its CPU; no two workers
//! switch J in. Each test also asserts, counted over all executions of a feature set, that
//! the paths it is about were taken: a wakeup that released the lock (all but the local
//! NO_DELAY_DEQUEUE set, where J always lands on worker 0); a wakeup done on worker 0 under
//! the held lock, followed by the exit switching into J (local, and remote with
//! DELAY_DEQUEUE off: with it on, J sleeps queued on worker 1 and the wakeup never lands on
//! worker 0); and (`exit_wake_remote_idle`) J enqueued back on worker 1.
//!
//! Feature sets: DELAY_DEQUEUE on and off; remote enqueues through the wakelist or under the
//! target's lock (TTWU_QUEUE); TTWU_QUEUE_ON_CPU on and off; and, for the local case, the
//! delayed wakeup variants TTWU_QUEUE_DELAYED and TTWU_DEQUEUE.
//!
//! Mutants (`mutants.sh` runs the whole file for each; the other models never hold a lock
//! when they wake, so they pass with both):
//! * `ttwu_held_wrong_rq` (in `ttwu_runnable`, `wake/runnable.rs`) uses the held guard whichever
//!   worker the task is queued on, instead of only when that is the held lock's worker: the
//!   exit then requeues J, queued on worker 1, through worker 0's runqueue with worker 1's
//!   handle, touching J's scheduling state while worker 1 may be dequeuing or moving it
//!   (loom reports the race). Caught by all three tests.
//! * `ttwu_held_any_target` (in `ttwu`, `wake/ttwu.rs`) activates the woken task under the held
//!   lock whichever worker CPU selection chose: J is queued on worker 0 while its `cpu` says
//!   worker 1. Caught by `exit_wake_remote_idle` and `exit_wake_local`.
//!
//! Run time (`--release`, on the shared 2-core machine): the three tests, every feature set,
//! about 0.2 s at `LOOM_MAX_PREEMPTIONS=2` and 0.5 s at 3 (the counts each prints are the
//! executions that took each path).
#![cfg(loom)]

use std::sync::atomic::{AtomicUsize as StdCount, Ordering as StdOrdering};

use lagom::model::{ExitWake, Model, ModelTask, Step};
use loom::sync::Arc;
use loom::thread;

/// The exiting task's worker.
const A: usize = 0;
/// The other worker.
const B: usize = 1;
const MS: u64 = 1_000_000;
/// The value the ending task returns.
const VALUE: u64 = 0x5eed;

/// How often each path was taken, over all executions of one feature set.
#[derive(Default)]
struct Seen {
    /// The joiner was woken on the exiting worker under the exit's held lock (requeued in
    /// place or enqueued there).
    held: StdCount,
    /// The wakeup released the held lock.
    released: StdCount,
    /// The exit switched into the joiner.
    exit_ran_joiner: StdCount,
    /// The wakeup released the lock and the joiner, which slept, ended up on worker B.
    sent_back: StdCount,
}

impl Seen {
    /// Counts one execution: how the exit woke the joiner, whether worker A's counters show
    /// a wakeup made by A itself (only the exit wakes anything on A), and whether the exit
    /// switched into the joiner.
    fn count(&self, m: &Model, wake: ExitWake, ran_joiner: bool) {
        let a = m.stats(A);
        let on_a = a.wakeups_local + a.runnable_in_place > 0;
        match wake {
            ExitWake::Held if on_a => self.held.fetch_add(1, StdOrdering::Relaxed),
            ExitWake::Released => self.released.fetch_add(1, StdOrdering::Relaxed),
            // Not blocked yet (the joiner's park finds the token), or no joiner.
            ExitWake::Held | ExitWake::NoJoiner => 0,
        };
        if ran_joiner {
            self.exit_ran_joiner.fetch_add(1, StdOrdering::Relaxed);
        }
    }

    /// Asserts that the paths `spec` must reach were reached.
    fn expect(&self, spec: &str, held: bool, released: bool, ran_joiner: bool) {
        let get = |c: &StdCount| c.load(StdOrdering::Relaxed);
        let (h, r, j) = (
            get(&self.held),
            get(&self.released),
            get(&self.exit_ran_joiner),
        );
        eprintln!("[{spec}] woken under the held lock {h}, lock released {r}, exit ran J {j}");
        assert!(!held || h > 0, "[{spec}] no wakeup under the held lock");
        assert!(!released || r > 0, "[{spec}] no wakeup released the lock");
        assert!(
            !ran_joiner || j > 0,
            "[{spec}] the exit never switched into the joiner"
        );
    }
}

/// `JoinHandle::join` by `j` running on worker `cpu`, round by round with its park spelled
/// out; a sleep charges `j` the time up to `now`. Returns the value if a round took it, or
/// `None` if `j` switched away asleep.
fn join_rounds(
    m: &Model,
    j: &ModelTask,
    handle: &lagom::task::JoinHandle<u64>,
    cpu: usize,
    now: u64,
) -> Option<u64> {
    loop {
        if let Some(r) = m.try_join(handle, j) {
            return Some(r.expect("the task did not panic"));
        }
        match m.prepare_park(j) {
            Step::Return | Step::Retry => continue,
            Step::Sleep => {
                // Requeued before its dequeue, `j` runs on and joins again.
                if m.schedule_at(j, cpu, now) != Some(j.id()) {
                    return None;
                }
            }
        }
    }
}

/// After the race: the joiner `j`, if it slept, was woken exactly once, where its `cpu`
/// says; its next round takes the value. `x` is gone.
fn check_woken(
    m: &Model,
    spec: &str,
    j: &ModelTask,
    x: &ModelTask,
    handle: &lagom::task::JoinHandle<u64>,
    got: Option<u64>,
) {
    m.drain_all();
    let v = match got {
        Some(v) => v,
        None => {
            let (on, cpu) = m.whereabouts(j);
            assert_eq!(
                on,
                [cpu],
                "[{spec}] the joiner must be queued exactly once, where its cpu says: \
                 lost or queued twice"
            );
            assert_eq!(m.queued_count(j), 1, "[{spec}] queued once");
            assert!(
                m.is_running_state(j),
                "[{spec}] joiner queued but not RUNNING"
            );
            assert!(!m.is_delayed(j), "[{spec}] joiner woken but still delayed");
            m.try_join(handle, j)
                .expect("woken after the task ended, the joiner finds its outcome")
                .expect("the task did not panic")
        }
    };
    assert_eq!(v, VALUE, "[{spec}] the value arrives intact");
    assert_eq!(m.queued_count(x), 0, "[{spec}] the dead task is queued");
    assert!(!m.is_on_cpu(x), "[{spec}] the dead task is still on a CPU");
}

/// The feature sets of `exit_wake_remote`, and whether the exit can wake J under its held
/// lock there: with DELAY_DEQUEUE, J blocks delayed on worker 1 (U runs there, and J stays
/// queued until a pick of worker 1 meets it), so every wakeup that finds it blocked goes to
/// worker 1's lock or wakelist.
const REMOTE: [(&str, bool); 4] = [
    ("TTWU_QUEUE,TTWU_QUEUE_ON_CPU", false),
    ("NO_TTWU_QUEUE,NO_TTWU_QUEUE_ON_CPU", false),
    ("NO_DELAY_DEQUEUE,TTWU_QUEUE,TTWU_QUEUE_ON_CPU", true),
    ("NO_DELAY_DEQUEUE,NO_TTWU_QUEUE,NO_TTWU_QUEUE_ON_CPU", true),
];

#[test]
fn exit_wake_remote() {
    for (spec, held) in REMOTE {
        remote(spec, true).expect(spec, held, true, held);
    }
}

/// `exit_wake_remote` without U: when J blocks, worker 1 looks idle, so the exit's
/// wakeup of a switched-out J selects worker 1 (J's previous CPU) and enqueues it there,
/// releasing the held lock first although J was not queued anywhere.
#[test]
fn exit_wake_remote_idle() {
    for spec in [
        "TTWU_QUEUE,TTWU_QUEUE_ON_CPU",
        "NO_TTWU_QUEUE,NO_TTWU_QUEUE_ON_CPU",
    ] {
        let seen = remote(spec, false);
        seen.expect(spec, false, true, false);
        assert!(
            seen.sent_back.load(StdOrdering::Relaxed) > 0,
            "[{spec}] the exit never enqueued J back on worker 1"
        );
    }
}

/// One run of the remote race under `spec`; `busy`: U is queued beside J on worker 1.
fn remote(spec: &'static str, busy: bool) -> std::sync::Arc<Seen> {
    let seen = std::sync::Arc::new(Seen::default());
    let seen2 = std::sync::Arc::clone(&seen);
    loom_tests::claim_model(move || {
        // The wakeup may send J to the other worker, and B's balancer may pull it.
        // SAFETY: model tasks run no code of their own: nothing thread-local to break.
        let m = Arc::new(unsafe { Model::with_migration(2, spec) });
        let j = m.running_task(B);
        let _u = busy.then(|| m.queued_task(B));
        let (x, handle, exit) = m.joinable_task::<u64>(A);
        let exiter = {
            let (m, j) = (Arc::clone(&m), j.clone());
            thread::spawn(move || {
                let out = m.exit(exit, A, VALUE, 5 * MS);
                let ran_joiner = out.next.as_ref().is_some_and(|n| n.id() == j.id());
                (out.wake, ran_joiner)
            })
        };
        let got = join_rounds(&m, &j, &handle, B, 10 * MS);
        let (wake, ran_joiner) = exiter.join().unwrap();
        seen2.count(&m, wake, ran_joiner);
        if ran_joiner {
            assert!(
                m.is_on_cpu(&j),
                "[{spec}] the exit switched into the joiner"
            );
        }
        if wake == ExitWake::Released && got.is_none() && m.whereabouts(&j).1 == B {
            seen2.sent_back.fetch_add(1, StdOrdering::Relaxed);
        }
        check_woken(&m, spec, &j, &x, &handle, got);
    });
    seen
}

/// The feature sets of `exit_wake_local`, and whether J sleeps delayed on worker 0 (only
/// then can worker 1's balancer pull it, and only then can the wakeup release the lock:
/// a dequeued J is enqueued on worker 0, which looks idle once X is gone).
const LOCAL: [(&str, bool); 5] = [
    ("TTWU_QUEUE", true),
    ("NO_TTWU_QUEUE", true),
    ("TTWU_QUEUE_DELAYED", true),
    ("TTWU_DEQUEUE", true),
    ("NO_DELAY_DEQUEUE", false),
];

#[test]
fn exit_wake_local() {
    for (spec, delayed) in LOCAL {
        let seen = std::sync::Arc::new(Seen::default());
        let seen2 = std::sync::Arc::clone(&seen);
        loom_tests::claim_model(move || {
            // The wakeup may send J to the other worker, and B's balancer may pull it.
            // SAFETY: model tasks run no code of their own: nothing thread-local to break.
            let m = Arc::new(unsafe { Model::with_migration(2, spec) });
            let j = m.running_task(A);
            let (x, handle, exit) = m.queued_joinable_task::<u64>(A);
            assert_eq!(
                join_rounds(&m, &j, &handle, A, 10 * MS),
                None,
                "[{spec}] J sleeps"
            );
            assert_eq!(
                m.is_delayed(&j),
                delayed,
                "[{spec}] J, not eligible, sleeps delayed"
            );
            let worker_b = {
                let m = Arc::clone(&m);
                thread::spawn(move || {
                    let pulled = m.periodic_balance(B, 11 * MS);
                    let ran = m.switch_in(B, 12 * MS).map(|n| n.id());
                    (pulled, ran)
                })
            };
            let out = m.exit(exit, A, VALUE, 20 * MS);
            let ran_joiner = out.next.as_ref().is_some_and(|n| n.id() == j.id());
            let (_pulled, b_ran) = worker_b.join().unwrap();
            seen2.count(&m, out.wake, ran_joiner);
            if ran_joiner || b_ran == Some(j.id()) {
                assert!(
                    m.is_on_cpu(&j),
                    "[{spec}] a worker switched into the joiner"
                );
            }
            assert!(
                !(ran_joiner && b_ran == Some(j.id())),
                "[{spec}] both workers switched into the joiner"
            );
            check_woken(&m, spec, &j, &x, &handle, None);
        });
        seen.expect(spec, true, delayed, true);
    }
}
