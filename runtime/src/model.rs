//! Seams for the loom models of `loom-tests/` (compiled only with `--cfg loom`).
//!
//! A model cannot start worker threads or switch stacks, so it plays the workers itself: it
//! builds the runtime's shared state without threads, and each method here runs one real
//! piece of the runtime on the calling loom thread — the sleeper's side of `park`
//! (`prepare_park`), the worker's side of `schedule()` (`put_prev`, `pick`, and the
//! `finish_task_switch` store that a completed switch makes), the waker's side
//! (`unpark_task`, `try_to_wake_up`), the wakelist drain, and a task's end against its joiner
//! (`JoinHandle::try_take`, one round of `join`; `Packet::set_value` and
//! `Complete::complete`, what the task's fiber and its worker's `exit_task` run). Nothing is
//! copied: each method is a call into the functions the threaded runtime runs.
//!
//! The asm switch cannot run under loom: a switch away from a task writes the task's
//! loom-only `loom_ctx` cell (the registers it saves) before `clear_on_cpu`, and a waker reads
//! it after its `on_cpu` wait (`wake.rs`), so loom checks the hand-off of the context.
//!
//! Time: the seams take `now` as an argument where the runtime reads the clock; the paths
//! that read it themselves (a waker's requeue or enqueue) see the constant loom clock of
//! `sys/time.rs`, later than any time a model passes, so that every execution replays the
//! same decisions.

use alloc::string::String;
use alloc::sync::Arc;

use crate::JoinError;
use crate::policy::{Features, Pick, RqConfig, SchedEntity};
use crate::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use crate::task::{self, Complete, JoinHandle, Packet, ParkStep, RUNNING, Task, TaskRef, Unparker};
use crate::worker::{self, Reason, Shared, Worker};

/// The runtime's shared state with `workers` workers and no threads.
pub struct Model {
    shared: Arc<Shared>,
}

/// A task of a [`Model`] (it has no fiber: models never switch).
#[derive(Clone)]
pub struct ModelTask(TaskRef);

/// The finishing side of a joinable model task (see [`Model::joinable_task`]).
pub struct ModelExit<T> {
    task: TaskRef,
    slot: Arc<Packet<T>>,
}

/// What `prepare_park` decided (see `task/park.rs`).
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

impl Model {
    /// `workers` workers with the features `spec` (applied on the defaults).
    pub fn new(workers: usize, spec: &str) -> Model {
        let features = Features::parse(spec).expect("valid features");
        let mut cfg = RqConfig::for_cpus(workers);
        cfg.features = features;
        Model {
            shared: Arc::new(Shared {
                workers: (0..workers).map(|i| Worker::new(i, cfg)).collect(),
                features,
                closing: AtomicBool::new(false),
                stack_size: crate::arch::MIN_STACK_SIZE,
                idle_spin: 0,
                next_outside: AtomicUsize::new(0),
            }),
        }
    }

    /// A task running on worker `cpu`: enqueued and picked there, `on_cpu`.
    pub fn running_task(&self, cpu: usize) -> ModelTask {
        self.start_running(cpu, task::Packet::<()>::new())
    }

    /// A task running on worker `cpu`, its [`JoinHandle`], and the side that ends it.
    pub fn joinable_task<T: Send + 'static>(
        &self,
        cpu: usize,
    ) -> (ModelTask, JoinHandle<T>, ModelExit<T>) {
        let packet = Packet::<T>::new();
        let t = self.start_running(cpu, packet.clone());
        let handle = JoinHandle {
            packet: Arc::clone(&packet),
            id: t.0.id,
            task: Arc::clone(&t.0),
        };
        let exit = ModelExit {
            task: Arc::clone(&t.0),
            slot: packet,
        };
        (t, handle, exit)
    }

    /// A task queued on worker `cpu` (enqueued at time 0, not picked).
    pub fn queued_task(&self, cpu: usize) -> ModelTask {
        let t = self.new_task(cpu, task::Packet::<()>::new());
        let w = &self.shared.workers[cpu];
        worker::activate(w, &mut w.rq.lock(), Arc::clone(&t), 0);
        ModelTask(t)
    }

    fn new_task(&self, cpu: usize, completion: Arc<dyn Complete>) -> TaskRef {
        let t: TaskRef = Arc::new(Task::new(
            None,
            SchedEntity::new(0),
            task::next_id(),
            String::from("model"),
            None,
            completion,
            Arc::clone(&self.shared),
        ));
        t.cpu.store(cpu, Ordering::Relaxed);
        t
    }

    fn start_running(&self, cpu: usize, completion: Arc<dyn Complete>) -> ModelTask {
        let t = self.new_task(cpu, completion);
        let w = &self.shared.workers[cpu];
        let mut rq = w.rq.lock();
        worker::activate(w, &mut rq, Arc::clone(&t), 0);
        let Pick::Run(h) = rq.pick_next(0) else {
            panic!("the only task is picked")
        };
        assert!(core::ptr::eq(&**rq.payload(h), &*t));
        t.on_cpu.store(true, Ordering::Relaxed);
        ModelTask(t)
    }

    /// The sleeper's side of `park` up to `schedule()`.
    pub fn prepare_park(&self, t: &ModelTask) -> Step {
        match task::prepare_park(&t.0) {
            ParkStep::Return => Step::Return,
            ParkStep::Retry => Step::Retry,
            ParkStep::Sleep => Step::Sleep,
        }
    }

    /// Worker `cpu` runs `schedule()` for its running task `t` and completes the switch away
    /// from it (to the idle task, or to whatever it picks).
    pub fn schedule_out(&self, t: &ModelTask, cpu: usize) {
        let _ = self.schedule_at(t, cpu, 1);
    }

    /// [`schedule_out`](Self::schedule_out) at time `now`, which also charges `t` the time
    /// it ran since it was picked (or last charged). Returns the id of the task picked next
    /// (`None`: the idle task).
    pub fn schedule_at(&self, t: &ModelTask, cpu: usize, now: u64) -> Option<u64> {
        let w = &self.shared.workers[cpu];
        let next = {
            let mut rq = w.rq.lock();
            worker::drain(&self.shared, cpu, &mut rq, now);
            rq.update_curr(now);
            worker::put_prev(w, &mut rq, &t.0, Reason::Block, now);
            let next = worker::pick(w, &mut rq, now);
            // SAFETY: a picked task is queued on this runqueue, whose lock is held.
            (!next.is_null()).then(|| unsafe { (*next).id })
        };
        // The switch saves the task's registers into its context (after the lock is
        // released, before on_cpu is cleared): a write that whoever runs the task next, on
        // another worker, must see.
        // SAFETY: the task is still on_cpu: its context is this worker's until the clear.
        t.0.loom_ctx.with_mut(|c| unsafe { *c += 1 });
        worker::clear_on_cpu(&t.0);
        next
    }

    /// `Unparker::unpark` of `t`, from a thread outside the workers.
    pub fn unpark(&self, t: &ModelTask) {
        task::unpark_task(&t.0);
    }

    /// `try_to_wake_up(t)` from a thread outside the workers.
    pub fn try_to_wake_up(&self, t: &ModelTask) -> Woken {
        match crate::wake::try_to_wake_up(&t.0) {
            crate::wake::Woken::NotBlocked => Woken::NotBlocked,
            crate::wake::Woken::Runnable => Woken::Runnable,
            crate::wake::Woken::Enqueued => Woken::Enqueued,
        }
    }

    /// One round of `JoinHandle::join` by the model task `joiner`: the outcome if it is there,
    /// else `None` with `joiner` registered to be unparked (it then parks:
    /// [`prepare_park`](Self::prepare_park)).
    pub fn try_join<T>(
        &self,
        handle: &JoinHandle<T>,
        joiner: &ModelTask,
    ) -> Option<Result<T, JoinError>> {
        handle.try_take(|| Unparker::for_task(Arc::clone(&joiner.0)))
    }

    /// Every worker drains its wakelist (`sched_ttwu_pending`).
    pub fn drain_all(&self) {
        for (i, w) in self.shared.workers.iter().enumerate() {
            let mut rq = w.rq.lock();
            worker::drain(&self.shared, i, &mut rq, 2);
        }
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
}

impl<T: Send> ModelExit<T> {
    /// The task's closure returned `v`: its fiber stores the value (`Packet::set_value`), then
    /// the worker that frees the task takes its completion and delivers the outcome
    /// (`Complete::complete`, which unparks a registered joiner), as `exit_task` does.
    pub fn finish(self, v: T) {
        self.slot.set_value(v);
        // SAFETY: the task runs on this thread's worker, which owns its scheduling part.
        let completion = unsafe { self.task.sched(|s| s.completion.take()) };
        completion.expect("a task ends once").complete(None);
    }
}
