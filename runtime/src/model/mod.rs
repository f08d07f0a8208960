//! Seams for the loom models of `loom-tests/` (compiled only with `--cfg loom`).
//!
//! A model cannot start worker threads or switch stacks, so it plays the workers itself: it
//! builds the runtime's shared state without threads, and each method here runs one real
//! piece of the runtime on the calling loom thread — the sleeper's side of `park`
//! (`prepare_park`), the worker's side of `schedule()` (`put_prev`, `pick`, `prepare_switch`,
//! and the `finish_task_switch` store that a completed switch makes), an idle worker's
//! switch into a task it picks (`drain`, `pick`, `prepare_switch`), the waker's side
//! (`unpark_task`, `try_to_wake_up`), the wakelist drain, the periodic load balance, and a
//! task's end against its joiner
//! (`JoinHandle::try_take`, one round of `join`; `Packet::set_value` and
//! `Complete::complete`, what the task's fiber and its exit hook `sched::exit_current` run),
//! and the exit hook on the worker that runs it ([`Model::exit`]): the dead task's dequeue and
//! the joiner's wakeup with that worker's runqueue lock held (`Unparker::unpark_held` →
//! `wake::try_to_wake_up_held`), which needs a worker thread: the seam builds a
//! `WorkerThread` for the worker it plays (`WorkerThread::for_model`, cfg(loom): no signal
//! stack, an empty stack pool, no timers), never installed as the thread's `LOCAL`.
//! Each method is a call into the functions the threaded runtime runs (the exit's dequeue of
//! the dead task included: `sched::dequeue_dead`, which [`Model::exit`] calls as
//! `exit_current` does), but four of them still sequence those calls themselves, in the order
//! the real caller does: [`Model::schedule_prev`] (the order of `schedule_on`), its
//! [`Model::finish_task_switch`] (the `clear_on_cpu` of `finish_task_switch`, without
//! `put_dead`), [`Model::switch_in`] (one round of the idle loop) and [`Model::exit`] (the
//! order of `exit_current`). A reordering inside the real function is invisible to the models
//! that use them. [`ModelWorker`] has none of that: it runs the real `schedule()` up to the
//! switch (`sched::schedule_prepare`), the real `finish_task_switch` (`on_cpu` cleared, then
//! `put_dead`) and the real idle loop's rounds (`sched::idle_step`), with only the switch
//! itself played by the model; the models of issue #21 (`idle_worker`, `two_wakers`) use it.
//! The older models keep the sequencing seams because they pass the time a switch-out charges
//! (`now`), which the real `schedule()` reads from the clock, constant under loom.
//!
//! The asm switch cannot run under loom: a switch away from a task writes the task's
//! loom-only `loom_ctx` cell (the registers it saves) before `clear_on_cpu`, and a switch
//! into the task reads it (the restore), as does a waker after its `on_cpu` wait (`wake/ttwu.rs`),
//! so loom checks the hand-off of the context.
//!
//! Time: the seams take `now` as an argument where the runtime reads the clock; the paths
//! that read it themselves (a waker's requeue or enqueue) see the constant loom clock of
//! `sys/time.rs`, later than any time a model passes, so that every execution replays the
//! same decisions.

mod exit;
mod worker;

pub use exit::{ExitWake, Exited, ModelExit};
pub use worker::ModelWorker;

/// The runtime's internal synchronization (`locking/`), for the models of its pieces.
pub use crate::locking;

use alloc::string::String;
use alloc::sync::Arc;

use crate::WorkerStats;
use crate::locking::atomic::{AtomicU32, AtomicUsize, Ordering};
use crate::policy::{Features, Pick, RqConfig, SchedEntity};
use crate::sched::{self, Reason};
use crate::tcb::{self, Complete, ParkStep, RUNNING};
use crate::wake;
use crate::worker::{Packet, Shared, Task, TaskRef, Waiter, Worker};

/// The runtime's shared state with `workers` workers and no threads.
pub struct Model {
    shared: Arc<Shared>,
}

/// A task of a [`Model`] (it has no fiber: models never switch).
#[derive(Clone)]
pub struct ModelTask(TaskRef);

/// What `prepare_park` decided (see `tcb/token.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// A pending unpark was consumed.
    Return,
    /// The sleep was cancelled (the token came after `BLOCKED`).
    Retry,
    /// The task must switch away.
    Sleep,
}

/// How a waker's `try_to_wake_up` ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Woken {
    /// Not blocked: nothing done.
    NotBlocked,
    /// Requeued in place.
    Runnable,
    /// Enqueued.
    Enqueued,
}

/// What a worker's `schedule()` picked to run after the task that called it (see
/// [`Model::schedule_prev`]).
#[derive(Clone)]
pub enum Next {
    /// The calling task itself (a waker requeued it before it was dequeued): no switch, it
    /// runs on.
    Same,
    /// Nothing runnable: the switch goes to the worker's idle task.
    Idle,
    /// Another task, marked running on the worker (`prepare_switch`).
    Task(ModelTask),
}

impl Model {
    /// `workers` workers with the features `spec` (applied on the defaults), under the
    /// migration contract: a task that has run resumes only on the worker it last ran on
    /// (`wake/select.rs`).
    pub fn new(workers: usize, spec: &str) -> Model {
        Model::build(workers, spec, false)
    }

    /// [`Model::new`] with the runtime's migration opt-in (`Builder::allow_migration`): wakeup
    /// placement and the balancers may move tasks that have run, as the models of the
    /// kernel's races across workers need.
    ///
    /// # Safety
    ///
    /// As for `lagom::Builder::allow_migration`: the tasks must hold nothing thread-local
    /// across a switch. A model's tasks run no code of their own (they have no fiber), so
    /// a model meets it by construction.
    pub unsafe fn with_migration(workers: usize, spec: &str) -> Model {
        Model::build(workers, spec, true)
    }

    fn build(workers: usize, spec: &str, allow_migration: bool) -> Model {
        let features = Features::parse(spec).expect("valid features");
        let mut cfg = RqConfig::for_cpus(workers);
        cfg.features = features;
        Model {
            shared: Arc::new(Shared {
                workers: (0..workers).map(|i| Worker::new(i, cfg)).collect(),
                features,
                // One LLC, as on a small machine: CPU selection finds an idle worker from
                // any other (`select_idle_sibling`), and a worker waking a task on a busy
                // one takes its lock (`ttwu_queue_cond`).
                cpus: crate::policy::CpuMap::flat(workers),
                layout_fallback: None,
                phase: AtomicU32::new(crate::worker::PHASE_RUN),
                stack_size: crate::arch::MIN_STACK_SIZE,
                idle_spin: 0,
                timer_spin: 0,
                fp_control: crate::arch::FpControl::Preserve,
                allow_migration,
                next_outside: AtomicUsize::new(0),
                trace: None,
            }),
        }
    }

    /// A task running on worker `cpu`: enqueued and picked there, `on_cpu`; it has started
    /// there (the migration contract binds it to `cpu` unless the model opted in).
    pub fn running_task(&self, cpu: usize) -> ModelTask {
        self.start_running(cpu, Packet::<()>::new())
    }

    /// A task queued on worker `cpu` (enqueued at time 0, not picked).
    pub fn queued_task(&self, cpu: usize) -> ModelTask {
        self.queue(cpu, Packet::<()>::new())
    }

    fn queue(&self, cpu: usize, completion: Arc<dyn Complete<Waiter>>) -> ModelTask {
        let t = self.new_task(cpu, completion);
        let w = &self.shared.workers[cpu];
        // SAFETY: the returned `ModelTask` holds the task for the whole model, longer than
        // its time in the runqueue (`tcb/queued.rs`).
        unsafe { wake::activate(w, &mut w.rq.lock(), &t, 0) };
        ModelTask(t)
    }

    fn new_task(&self, cpu: usize, completion: Arc<dyn Complete<Waiter>>) -> TaskRef {
        let t: TaskRef = Arc::new(Task::new(
            None,
            SchedEntity::new(0),
            tcb::next_id(),
            String::from("model"),
            (None, self.shared.allow_migration),
            completion,
            Arc::clone(&self.shared),
        ));
        t.cpu.store(cpu, Ordering::Relaxed);
        t
    }

    fn start_running(&self, cpu: usize, completion: Arc<dyn Complete<Waiter>>) -> ModelTask {
        let t = self.new_task(cpu, completion);
        let w = &self.shared.workers[cpu];
        let mut rq = w.rq.lock();
        // SAFETY: as in `queued_task`.
        unsafe { wake::activate(w, &mut rq, &t, 0) };
        let Pick::Run(h) = rq.pick_next(0) else {
            panic!("the only task is picked")
        };
        assert!(core::ptr::eq(&**rq.payload(h), &*t));
        // Marked running there as a worker does (`on_cpu`, and the worker it last ran on).
        sched::prepare_switch(&t, cpu, core::ptr::null_mut(), None);
        ModelTask(t)
    }

    /// The sleeper's side of `park` up to `schedule()`.
    pub fn prepare_park(&self, t: &ModelTask) -> Step {
        match tcb::prepare_park(&t.0) {
            ParkStep::Return => Step::Return,
            ParkStep::Retry => Step::Retry,
            ParkStep::Sleep => Step::Sleep,
        }
    }

    /// Worker `cpu` runs `schedule()` for its running task `t` and completes the switch away
    /// from it (to the idle task, or to whatever it picks), unless a waker requeued `t`
    /// before its dequeue: then the pick finds `t` again and it runs on.
    pub fn schedule_out(&self, t: &ModelTask, cpu: usize) {
        let _ = self.schedule_at(t, cpu, 1);
    }

    /// [`schedule_out`](Self::schedule_out) at time `now`, which also charges `t` the time
    /// it ran since it was picked (or last charged): [`schedule_prev`](Self::schedule_prev),
    /// then, unless `t` runs on, [`switch`](Self::switch) and
    /// [`finish_task_switch`](Self::finish_task_switch). Returns the id of the task picked next
    /// (`None`: the idle task).
    pub fn schedule_at(&self, t: &ModelTask, cpu: usize, now: u64) -> Option<u64> {
        match self.schedule_prev(t, cpu, now) {
            Next::Same => Some(t.id()),
            Next::Idle => {
                self.switch(t, None);
                self.finish_task_switch(t);
                None
            }
            Next::Task(n) => {
                self.switch(t, Some(&n));
                self.finish_task_switch(t);
                Some(n.id())
            }
        }
    }

    /// Worker `cpu`'s `schedule()` for its running task `t` at time `now`, up to the switch:
    /// under the runqueue lock, drain the wakelist, charge `t`, put it away (`put_prev`: a
    /// blocked `t` is dequeued), pick, and mark the task picked running (`prepare_switch`);
    /// then release the lock. `t` is still `on_cpu`.
    pub fn schedule_prev(&self, t: &ModelTask, cpu: usize, now: u64) -> Next {
        let w = &self.shared.workers[cpu];
        let mut rq = w.rq.lock();
        wake::drain(&self.shared, cpu, &mut rq, now);
        rq.update_curr(now);
        sched::put_prev(w, &mut rq, &t.0, Reason::Block, now);
        let next = sched::pick(w, &mut rq, now);
        if core::ptr::eq(next, &*t.0) {
            Next::Same
        } else {
            self.prepare_switch(cpu, next)
                .map_or(Next::Idle, Next::Task)
        }
    }

    /// The switch from `prev` to `next` (`None`: the idle task), which the asm does in the
    /// runtime: it saves `prev`'s registers into its context (the loom-only `loom_ctx`
    /// write) and restores `next`'s ([`ModelTask::restore`]).
    pub fn switch(&self, prev: &ModelTask, next: Option<&ModelTask>) {
        // The save, after the runqueue lock is released and before on_cpu is cleared: a
        // write that whoever runs `prev` next, on another worker, must see.
        // SAFETY: `prev` is still on_cpu: its context is this worker's until the clear.
        prev.0.loom_ctx.with_mut(|c| unsafe { *c += 1 });
        if let Some(n) = next {
            n.restore();
        }
    }

    /// `finish_task_switch` on the next context's stack: the switch away from `prev` is
    /// complete (`clear_on_cpu`, Release).
    pub fn finish_task_switch(&self, prev: &ModelTask) {
        sched::clear_on_cpu(&prev.0);
    }

    /// Idle worker `cpu`'s loop at time `now` (`idle.rs`): under the runqueue lock, drain the
    /// wakelist, pick, and mark the task picked running (`prepare_switch`); release the lock
    /// and switch into it, restoring its saved context. Returns that task (`None`: nothing
    /// runnable, the worker stays idle).
    pub fn switch_in(&self, cpu: usize, now: u64) -> Option<ModelTask> {
        let next = {
            let w = &self.shared.workers[cpu];
            let mut rq = w.rq.lock();
            wake::drain(&self.shared, cpu, &mut rq, now);
            let next = sched::pick(w, &mut rq, now);
            self.prepare_switch(cpu, next)?
        };
        next.restore();
        Some(next)
    }

    /// `prepare_switch` of the task `next` that worker `cpu` just picked (null: none), under
    /// its runqueue lock; the model's reference to it.
    fn prepare_switch(&self, cpu: usize, next: *const Task) -> Option<ModelTask> {
        if next.is_null() {
            return None;
        }
        // SAFETY: picked from the runqueue, whose lock the caller holds: the queue holds a
        // reference to it, so it is live and one more reference may be taken.
        let n = unsafe {
            Arc::increment_strong_count(next);
            Arc::from_raw(next)
        };
        // A model worker has no idle context and no overflow handler; its tasks no fiber.
        sched::prepare_switch(&n, cpu, core::ptr::null_mut(), None);
        Some(ModelTask(n))
    }

    /// `Unparker::unpark` of `t`, from a thread outside the workers.
    pub fn unpark(&self, t: &ModelTask) {
        wake::unpark_task(&t.0);
    }

    /// `try_to_wake_up(t)` from a thread outside the workers.
    pub fn try_to_wake_up(&self, t: &ModelTask) -> Woken {
        match wake::try_to_wake_up(&t.0) {
            wake::Woken::NotBlocked => Woken::NotBlocked,
            wake::Woken::Runnable => Woken::Runnable,
            wake::Woken::Enqueued => Woken::Enqueued,
        }
    }

    /// Every worker drains its wakelist (`sched_ttwu_pending`).
    pub fn drain_all(&self) {
        for (i, w) in self.shared.workers.iter().enumerate() {
            let mut rq = w.rq.lock();
            wake::drain(&self.shared, i, &mut rq, 2);
        }
    }

    /// Worker `cpu` drains its wakelist (`sched_ttwu_pending`) at time `now`.
    pub fn drain(&self, cpu: usize, now: u64) {
        let w = &self.shared.workers[cpu];
        let mut rq = w.rq.lock();
        wake::drain(&self.shared, cpu, &mut rq, now);
    }

    /// Worker `cpu`'s tick runs the periodic load balance at time `now` (`balance.rs`).
    /// Returns how many tasks it pulled.
    pub fn periodic_balance(&self, cpu: usize, now: u64) -> usize {
        sched::periodic_balance(&self.shared, cpu, now)
    }

    /// The workers whose runqueue holds `t`, and the worker its `cpu` names.
    pub fn whereabouts(&self, t: &ModelTask) -> (alloc::vec::Vec<usize>, usize) {
        let on = (0..self.shared.workers.len())
            .filter(|&i| {
                self.shared.workers[i]
                    .rq
                    .lock()
                    .iter()
                    .any(|(_, _, p)| core::ptr::eq(&**p, &*t.0))
            })
            .collect();
        (on, t.0.cpu.load(Ordering::Relaxed))
    }

    /// On how many runqueues `t` is queued (and its `on_rq` flag agrees).
    pub fn queued_count(&self, t: &ModelTask) -> usize {
        let n = self
            .shared
            .workers
            .iter()
            .map(|w| {
                w.rq.lock()
                    .iter()
                    .filter(|(_, _, p)| core::ptr::eq(&***p, &*t.0))
                    .count()
            })
            .sum();
        assert_eq!(n > 0, t.0.on_rq.load(Ordering::Relaxed), "on_rq disagrees");
        n
    }

    /// Worker `cpu`'s counters (which wakeup paths were taken).
    pub fn stats(&self, cpu: usize) -> WorkerStats {
        self.shared.workers[cpu].stats.snapshot(cpu)
    }

    /// Whether a worker runs `t` or is still switching away from it (its `on_cpu` flag).
    pub fn is_on_cpu(&self, t: &ModelTask) -> bool {
        t.0.on_cpu.load(Ordering::Relaxed)
    }

    /// Whether `t` sleeps queued as delayed (its `sched_delayed` flag).
    pub fn is_delayed(&self, t: &ModelTask) -> bool {
        t.0.sched_delayed.load(Ordering::Relaxed)
    }

    /// Whether `t`'s state word says runnable.
    pub fn is_running_state(&self, t: &ModelTask) -> bool {
        t.0.state.load(Ordering::Relaxed) == RUNNING
    }
}

impl ModelTask {
    /// The task's id.
    pub fn id(&self) -> u64 {
        self.0.id
    }

    /// The switch into the task restores its saved registers: the loom-only `loom_ctx` read,
    /// which loom reports unless the save of its last switch-out happened-before.
    fn restore(&self) {
        // SAFETY: a worker picked the task under its lock and marked it on_cpu: its previous
        // switch-out, which wrote the cell, completed before it could be queued there (the
        // hand-off under test; loom reports an access that it fails to order).
        let _ = self.0.loom_ctx.with(|c| unsafe { *c });
    }
}
