//! Model 6, **the on_cpu hand-off**: a task woken while its worker is still
//! switching away from it never runs on two workers at once, over the real path
//! (`lagom::model` seams into `sched/schedule.rs`, `wake/queue.rs`, `wake/ttwu.rs`).
//!
//! A context switch is a hand-off between loom threads, both halves modelled:
//! * **switch-out**, on worker A (the main thread): task T has announced `BLOCKED`; A's
//!   `schedule()` drains its wakelist, dequeues T (`put_prev`), picks and marks the next task
//!   `on_cpu` (`prepare_switch`), releases the lock; the switch saves T's registers (the
//!   loom-only `loom_ctx` write) and `finish_task_switch` clears T's `on_cpu` (Release);
//! * **switch-in**, on whichever worker picks the woken T: the real drain and `pick` under its
//!   runqueue lock, `prepare_switch` (`on_cpu = true`), then the restore (the `loom_ctx` read).
//!
//! A waker (a second loom thread) runs `try_to_wake_up(T)` meanwhile. If it comes before the
//! dequeue it requeues T in place and A's pick finds T again (no switch). After the dequeue,
//! with TTWU_QUEUE_ON_CPU, a waker that sees `on_cpu` hands T to A's wakelist, which A drains
//! after its switch-out, by program order; otherwise (or with the feature off) it waits for
//! `on_cpu` to clear, selects a CPU (A, or worker B) and enqueues T there, where A's or B's
//! next pick may switch it in. Worker B (a third loom thread) looks for work once, as its
//! idle loop does: drain, pick, switch in.
//!
//! Checked, in every execution: each switch-in of T reads the context its switch-out saved
//! only if that save happened-before (loom's cell tracking fails the model otherwise); an
//! explicit owner word (Relaxed swaps, which add no ordering) shows that no worker switches
//! T in before the worker switching it out has finished; and T runs exactly once after the
//! wakeup (its workers, once left idle, look again after the threads are joined), ends
//! queued exactly once, `on_cpu` and `RUNNING` (a switch-out that clears `on_cpu` after
//! another worker's `prepare_switch` shows there). Each test also asserts that the paths it
//! is about were explored, counted over all executions: the runnable wakeup (T runs on), the
//! TTWU_QUEUE_ON_CPU hand-off (exactly when the feature is on), A switching T in again, and
//! (in the busy case) B switching it in.
//!
//! `on_cpu_handoff`: T is A's only task; A goes idle and its idle loop looks for work (the
//! waker always finds A idle then and chooses it: B never gets T here).
//! `on_cpu_handoff_busy`: A has task U queued too; A switches from T to U, then U blocks, so
//! A's next `schedule()` drains the wakelist; the waker, finding A busy, sends T to B (the
//! runtime's migration opt-in, `Model::with_migration`: T has run; the same race under the
//! migration contract, where T stays on A, is `contract.rs`).
//!
//! Mutants (`mutants.sh` runs the whole file for each):
//! * `ttwu_on_cpu_wrong_cpu` makes TTWU_QUEUE_ON_CPU hand the wakeup to a worker other than
//!   the one still switching away from T: B drains it and switches T in while A may still
//!   be saving it (caught by the restore in `on_cpu_handoff_busy`, which opts in to
//!   migration; in `on_cpu_handoff`, under the migration contract, the switch-in's contract
//!   check reports B switching in a task that last ran on A first. The waker never reads the
//!   context on this path, and the models of `ttwu.rs` and `delayed.rs` pass with this
//!   mutation);
//! * `ttwu_no_on_cpu_wait` drops the waker's wait for `on_cpu` to clear (with the feature
//!   off): the waker takes T's context while its switch-out is still saving it (caught by
//!   the waker's own read in `wake/ttwu.rs` before any switch-in can be);
//! * `finish_relaxed_on_cpu` clears `on_cpu` without Release: the waker sees it clear but the
//!   save is not ordered before the next restore.
//!
//! Run time (`--release`, on the shared 2-core machine): both tests together, every feature
//! set, about 3 s at `LOOM_MAX_PREEMPTIONS=2` (about 11 000 executions), 18 s at 3.
#![cfg(loom)]

use std::sync::atomic::{AtomicUsize as StdCount, Ordering as StdOrdering};

use lagom::model::{Model, ModelTask, Next, Step, Woken};
use loom::sync::Arc;
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::thread;

/// The worker T runs on when it blocks.
const A: usize = 0;
/// The other worker.
const B: usize = 1;
/// No worker runs T.
const NOBODY: usize = usize::MAX;

/// The feature sets: TTWU_QUEUE_ON_CPU on and off, remote enqueues through the wakelist or
/// under the target's lock.
const FEATURES: [&str; 4] = [
    "TTWU_QUEUE,TTWU_QUEUE_ON_CPU",
    "NO_TTWU_QUEUE,TTWU_QUEUE_ON_CPU",
    "TTWU_QUEUE,NO_TTWU_QUEUE_ON_CPU",
    "NO_TTWU_QUEUE,NO_TTWU_QUEUE_ON_CPU",
];

/// Which worker runs T, and how often T was run after the wakeup.
///
/// Moved with Relaxed read-modify-writes: each reads the latest value, so a switch-in that
/// overlaps a switch-out shows here, and none adds a happens-before edge that the runtime
/// itself must provide.
struct Owner {
    on: AtomicUsize,
    runs: AtomicUsize,
}

impl Owner {
    fn new(cpu: usize) -> Owner {
        Owner {
            on: AtomicUsize::new(cpu),
            runs: AtomicUsize::new(0),
        }
    }

    /// Worker `cpu` completed its switch away from T (called just before `on_cpu` clears).
    fn leave(&self, cpu: usize) {
        let was = self.on.swap(NOBODY, Ordering::Relaxed);
        assert_eq!(was, cpu, "T switched out of worker {cpu}, but {was} ran it");
    }

    /// Worker `cpu` switched into T.
    fn enter(&self, cpu: usize) {
        let was = self.on.swap(cpu, Ordering::Relaxed);
        assert_eq!(
            was, NOBODY,
            "T switched in on worker {cpu} while worker {was} still ran it"
        );
        self.runs.fetch_add(1, Ordering::Relaxed);
    }

    /// T was requeued before its dequeue and runs on, on worker `cpu`, without a switch.
    fn stay(&self, cpu: usize) {
        assert_eq!(self.on.load(Ordering::Relaxed), cpu, "T runs on, elsewhere");
        self.runs.fetch_add(1, Ordering::Relaxed);
    }
}

/// How often each path was taken, over all executions of one feature set.
#[derive(Default)]
struct Seen {
    /// T ran on without a switch (requeued before its dequeue).
    stayed: StdCount,
    /// A switched T in again after its own switch-out.
    a_again: StdCount,
    /// B switched T in during the race.
    b_took: StdCount,
    /// The waker found T still `on_cpu` and handed it to A's wakelist (TTWU_QUEUE_ON_CPU).
    handed: StdCount,
    /// Executions.
    total: StdCount,
}

impl Seen {
    fn report(&self, test: &str, spec: &str) -> [usize; 4] {
        let n = [&self.stayed, &self.a_again, &self.b_took, &self.handed]
            .map(|c| c.load(StdOrdering::Relaxed));
        println!(
            "{test} [{spec}]: of {} executions, T ran on in {}, A switched it in again in {}, \
             B switched it in in {}, the wakeup was handed to A on_cpu in {}",
            self.total.load(StdOrdering::Relaxed),
            n[0],
            n[1],
            n[2],
            n[3]
        );
        let on_cpu = !spec.contains("NO_TTWU_QUEUE_ON_CPU");
        assert!(
            n[0] > 0,
            "[{spec}] never explored: T requeued before its dequeue"
        );
        assert_eq!(
            n[3] > 0,
            on_cpu,
            "[{spec}] the TTWU_QUEUE_ON_CPU hand-off must happen exactly when it is on"
        );
        n
    }
}

/// Worker `cpu` switches T in if its pick finds it; the pick must not find anything else.
fn switch_in(m: &Model, t: &ModelTask, owner: &Owner, cpu: usize) -> bool {
    match m.switch_in(cpu, 0) {
        Some(n) => {
            assert_eq!(n.id(), t.id(), "worker {cpu} picked a task other than T");
            owner.enter(cpu);
            true
        }
        None => false,
    }
}

/// Starts the waker (`try_to_wake_up(T)`) and worker B (one look for work, switching T in
/// if it finds it).
fn start(
    m: &Arc<Model>,
    t: &ModelTask,
    owner: &Arc<Owner>,
) -> (thread::JoinHandle<Woken>, thread::JoinHandle<bool>) {
    let waker = {
        let (m, t) = (Arc::clone(m), t.clone());
        thread::spawn(move || m.try_to_wake_up(&t))
    };
    let b = {
        let (m, t, owner) = (Arc::clone(m), t.clone(), Arc::clone(owner));
        thread::spawn(move || switch_in(&m, &t, &owner, B))
    };
    (waker, b)
}

/// After the threads are joined: if T has not run, both workers are idle and look again (T
/// may have been queued after their look); then T ran exactly once and is queued exactly
/// once, `on_cpu` and `RUNNING`.
fn settle(m: &Model, t: &ModelTask, owner: &Owner, woken: Woken, spec: &str, seen: &Seen) {
    if m.stats(A).wakeups_on_cpu > 0 {
        seen.handed.fetch_add(1, StdOrdering::Relaxed);
    }
    assert_ne!(
        woken,
        Woken::NotBlocked,
        "[{spec}] T was blocked: the waker claims it"
    );
    if owner.runs.load(Ordering::Relaxed) == 0 {
        m.drain_all();
        for cpu in [A, B] {
            switch_in(m, t, owner, cpu);
        }
    }
    assert_eq!(
        owner.runs.load(Ordering::Relaxed),
        1,
        "[{spec}] T must run exactly once after the wakeup ({woken:?})"
    );
    assert_eq!(
        m.queued_count(t),
        1,
        "[{spec}] T must be queued exactly once"
    );
    assert!(m.is_on_cpu(t), "[{spec}] T runs but is not on_cpu");
    assert!(m.is_running_state(t), "[{spec}] T runs but is not RUNNING");
}

/// T is worker A's only task: A switches to its idle task, whose loop then looks for work.
#[test]
fn on_cpu_handoff() {
    for spec in FEATURES {
        let seen = std::sync::Arc::new(Seen::default());
        let counts = std::sync::Arc::clone(&seen);
        loom_tests::claim_model(move || {
            let seen = &*counts;
            seen.total.fetch_add(1, StdOrdering::Relaxed);
            let m = Arc::new(Model::new(2, spec));
            let t = m.running_task(A);
            let owner = Arc::new(Owner::new(A));
            assert_eq!(m.prepare_park(&t), Step::Sleep);
            let (waker, b) = start(&m, &t, &owner);
            // Worker A: T's schedule(), the switch to idle, the idle loop's look.
            match m.schedule_prev(&t, A, 0) {
                Next::Same => {
                    owner.stay(A);
                    seen.stayed.fetch_add(1, StdOrdering::Relaxed);
                }
                Next::Idle => {
                    m.switch(&t, None);
                    owner.leave(A);
                    m.finish_task_switch(&t);
                    if switch_in(&m, &t, &owner, A) {
                        seen.a_again.fetch_add(1, StdOrdering::Relaxed);
                    }
                }
                Next::Task(n) => panic!("[{spec}] A has no task but T, picked {}", n.id()),
            }
            let woken = waker.join().unwrap();
            if b.join().unwrap() {
                seen.b_took.fetch_add(1, StdOrdering::Relaxed);
            }
            settle(&m, &t, &owner, woken, spec, seen);
        });
        let [_, a_again, _, _] = seen.report("on_cpu_handoff", spec);
        assert!(
            a_again > 0,
            "[{spec}] never explored: A switches T in again"
        );
    }
}

/// Worker A has task U queued beside T: A switches from T to U, then U blocks and A's next
/// `schedule()` drains the wakelist and picks; a waker that finds A busy sends T to B.
#[test]
fn on_cpu_handoff_busy() {
    for spec in FEATURES {
        let seen = std::sync::Arc::new(Seen::default());
        let counts = std::sync::Arc::clone(&seen);
        loom_tests::claim_model(move || {
            let seen = &*counts;
            seen.total.fetch_add(1, StdOrdering::Relaxed);
            // A waker that finds A busy sends T, which has run, to B.
            // SAFETY: model tasks run no code of their own: nothing thread-local to break.
            let m = Arc::new(unsafe { Model::with_migration(2, spec) });
            let t = m.running_task(A);
            let u = m.queued_task(A);
            let owner = Arc::new(Owner::new(A));
            assert_eq!(m.prepare_park(&t), Step::Sleep);
            let (waker, b) = start(&m, &t, &owner);
            // Worker A: T's schedule(), the switch to U; U blocks, U's schedule().
            match m.schedule_prev(&t, A, 0) {
                Next::Same => {
                    owner.stay(A);
                    seen.stayed.fetch_add(1, StdOrdering::Relaxed);
                }
                Next::Idle => panic!("[{spec}] A has U queued, yet picked nothing"),
                Next::Task(n) => {
                    assert_eq!(n.id(), u.id(), "[{spec}] A must pick U");
                    m.switch(&t, Some(&n));
                    owner.leave(A);
                    m.finish_task_switch(&t);
                    assert_eq!(m.prepare_park(&u), Step::Sleep);
                    match m.schedule_prev(&u, A, 0) {
                        Next::Same => panic!("[{spec}] nobody wakes U"),
                        Next::Idle => {
                            m.switch(&u, None);
                            m.finish_task_switch(&u);
                        }
                        Next::Task(n) => {
                            assert_eq!(n.id(), t.id(), "[{spec}] A must pick T");
                            m.switch(&u, Some(&n));
                            owner.enter(A);
                            m.finish_task_switch(&u);
                            seen.a_again.fetch_add(1, StdOrdering::Relaxed);
                        }
                    }
                }
            }
            let woken = waker.join().unwrap();
            if b.join().unwrap() {
                seen.b_took.fetch_add(1, StdOrdering::Relaxed);
            }
            settle(&m, &t, &owner, woken, spec, seen);
        });
        let [_, a_again, b_took, _] = seen.report("on_cpu_handoff_busy", spec);
        // Without TTWU_QUEUE_ON_CPU the waker waits for the switch to U, then finds A busy.
        if !spec.contains("NO_TTWU_QUEUE_ON_CPU") {
            assert!(
                a_again > 0,
                "[{spec}] never explored: A drains T and runs it"
            );
        }
        assert!(b_took > 0, "[{spec}] never explored: B switches T in");
    }
}
