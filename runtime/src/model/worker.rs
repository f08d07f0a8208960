//! A worker thread played by a loom thread ([`ModelWorker`]): the runtime's own
//! `WorkerThread` state (built for the model: no signal stack, an empty stack pool, no
//! timers, never installed as the thread's `LOCAL`), driven through the real idle loop and
//! the real `schedule()`; the model replaces only the switch itself.

use alloc::sync::Arc;

use super::{Model, ModelTask, Next};
use crate::sched::{self, Reason};
use crate::worker::WorkerThread;

/// Worker `cpu`'s thread, played by the loom thread that owns this value (it is not `Send`
/// once it runs a task: build it on the thread that plays the worker).
pub struct ModelWorker {
    wt: WorkerThread,
}

impl Model {
    /// Worker `cpu`'s thread state, for the loom thread that plays that worker.
    pub fn worker(&self, cpu: usize) -> ModelWorker {
        ModelWorker {
            wt: WorkerThread::for_model(Arc::clone(&self.shared), cpu),
        }
    }

    /// Worker `cpu` runs its idle loop until it switches into a task
    /// ([`ModelWorker::idle_run`] on a fresh worker thread state). Returns that task.
    pub fn idle_run(&self, cpu: usize) -> ModelTask {
        self.worker(cpu).idle_run()
    }
}

impl ModelWorker {
    /// The worker's real idle loop (`sched/idle.rs`'s `idle_step`, round after round) until
    /// a round picks a task: the drain and the pick under the runqueue lock, and with nothing
    /// to run the registry's reap, the newly idle balance, the `has_work` re-check and the
    /// sleep on the worker's real kick word (`Kick::idle_wait`; under loom the futex
    /// stand-in has no timeout, so a kick that never comes is a deadlock loom reports). The
    /// switch into the task picked is the model's: its context's restore; then, on the
    /// task's side, the idle loop's `finish_task_switch` would follow the next switch back.
    /// Returns the task, now this worker's running task.
    pub fn idle_run(&self) -> ModelTask {
        let mut idle_since = None;
        loop {
            match sched::idle_step(&self.wt, &mut idle_since) {
                sched::IdleStep::Switch(next) => {
                    // SAFETY: picked and marked running by the round under the runqueue lock,
                    // whose queue holds a reference to it: live, one more may be taken.
                    let n = unsafe {
                        Arc::increment_strong_count(next);
                        ModelTask(Arc::from_raw(next))
                    };
                    n.restore();
                    return n;
                }
                sched::IdleStep::Again => {}
                sched::IdleStep::Exit => panic!("the model's runtime does not shut down"),
            }
        }
    }

    /// The running task blocks: the real `schedule()` for it (`schedule_prepare`: timers,
    /// the balance tick, the drain, `put_prev`, the pick and `prepare_switch`, under the
    /// runqueue lock), then the model's switch (the running task's save and the next one's
    /// restore) and the real `finish_task_switch` on the next context (`on_cpu` cleared,
    /// `put_dead`). The caller announced the sleep (`Model::prepare_park` said `Sleep`).
    pub fn block(&self) -> Next {
        let Some((prev, _)) = sched::schedule_prepare(&self.wt, Reason::Block) else {
            return Next::Same;
        };
        // SAFETY: `prev` is still on_cpu: its context is this worker's until the clear below.
        prev.loom_ctx.with_mut(|c| unsafe { *c += 1 });
        let next = self.wt.curr.get();
        let next = (!next.is_null()).then(|| {
            // SAFETY: picked and marked running under the runqueue lock, whose queue holds a
            // reference to it: live, one more may be taken.
            unsafe {
                Arc::increment_strong_count(next);
                ModelTask(Arc::from_raw(next))
            }
        });
        if let Some(n) = &next {
            n.restore();
        }
        sched::finish_task_switch_on(&self.wt);
        next.map_or(Next::Idle, Next::Task)
    }
}
