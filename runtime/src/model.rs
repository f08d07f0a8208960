//! Seams for the loom models of `loom-tests/` (compiled only with `--cfg loom`).
//!
//! A model cannot start worker threads or switch stacks, so it plays the workers itself: it
//! builds the runtime's shared state without threads, and each method here runs one real
//! piece of the runtime on the calling loom thread — the sleeper's side of `park`
//! (`prepare_park`), the worker's side of `schedule()` (`put_prev`, `pick`, and the
//! `finish_task_switch` store that a completed switch makes), the waker's side
//! (`unpark_task`, `try_to_wake_up`) and the wakelist drain. Nothing is copied: each method is
//! a call into the functions the threaded runtime runs.

use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::sync::Arc;

use crate::policy::{Features, Pick, RqConfig, SchedEntity};
use crate::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use crate::sync::lock::Lock;
use crate::task::{self, ParkStep, RUNNING, Task, TaskRef};
use crate::worker::{self, Reason, Shared, Worker};

/// The runtime's shared state with `workers` workers and no threads.
pub struct Model {
    shared: Arc<Shared>,
}

/// A task of a [`Model`] (it has no fiber: models never switch).
#[derive(Clone)]
pub struct ModelTask(TaskRef);

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
                registry: Lock::new(BTreeMap::new()),
                live_tasks: AtomicUsize::new(0),
                live_stacks: AtomicUsize::new(0),
                stack_size: crate::arch::MIN_STACK_SIZE,
                idle_spin: 0,
                next_outside: AtomicUsize::new(0),
            }),
        }
    }

    /// A task running on worker `cpu`: enqueued and picked there, `on_cpu`.
    pub fn running_task(&self, cpu: usize) -> ModelTask {
        let t: TaskRef = Arc::new(Task::new(
            None,
            SchedEntity::new(0),
            task::next_id(),
            String::from("model"),
            None,
            task::Packet::<()>::new(),
            Arc::clone(&self.shared),
        ));
        t.cpu.store(cpu, Ordering::Relaxed);
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
        let w = &self.shared.workers[cpu];
        {
            let mut rq = w.rq.lock();
            worker::drain(&self.shared, cpu, &mut rq, 1);
            rq.update_curr(1);
            worker::put_prev(w, &mut rq, &t.0, Reason::Block, 1);
            let _next = worker::pick(w, &mut rq, 1);
        }
        // The switch saves the task's registers into its context, which lives in the
        // scheduling cell (the fiber): a write that whoever runs the task next must see.
        // SAFETY: the task is still on_cpu here: this worker owns its scheduling part.
        unsafe { t.0.sched(|s| s.parent_worker = cpu) };
        worker::clear_on_cpu(&t.0);
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

    /// Whether `t`'s state word says runnable.
    pub fn is_running_state(&self, t: &ModelTask) -> bool {
        t.0.state.load(Ordering::Relaxed) == RUNNING
    }
}
