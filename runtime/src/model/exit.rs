//! The seams for a task's end against its joiner: a joinable model task, one round of
//! `JoinHandle::join` ([`Model::try_join`]), the outcome's delivery from a plain thread
//! ([`ModelExit::finish`]), and the exit hook on the worker that runs it ([`Model::exit`]),
//! whose wakeup of the joiner runs with that worker's runqueue lock held.

use alloc::sync::Arc;

use super::{Model, ModelTask};
use crate::JoinError;
use crate::sched;
use crate::task::JoinHandle;
use crate::wake;
use crate::worker::{Packet, TaskRef, Waiter};

/// The finishing side of a joinable model task (see [`Model::joinable_task`]).
pub struct ModelExit<T> {
    task: TaskRef,
    slot: Arc<Packet<T>>,
}

/// How a task's exit woke its joiner (see [`Model::exit`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitWake {
    /// No joiner was registered: nobody to wake.
    NoJoiner,
    /// The exit's runqueue lock was still held after the wakeup: the joiner was not blocked
    /// (nothing done), or it was woken on the exiting worker under that lock (requeued in
    /// place there, or enqueued there).
    Held,
    /// The wakeup released the lock on its way (the joiner was queued on another worker, or
    /// still `on_cpu`, or enqueued elsewhere); the exit took the lock again.
    Released,
}

/// What a model task's exit did (see [`Model::exit`]).
pub struct Exited {
    /// How the joiner was woken.
    pub wake: ExitWake,
    /// The task the worker switched to (`None`: its idle task).
    pub next: Option<ModelTask>,
}

impl Model {
    /// A task running on worker `cpu`, its [`JoinHandle`], and the side that ends it.
    pub fn joinable_task<T: Send + 'static>(
        &self,
        cpu: usize,
    ) -> (ModelTask, JoinHandle<T>, ModelExit<T>) {
        self.joinable(cpu, true)
    }

    /// A task queued on worker `cpu` (as [`queued_task`](Self::queued_task)), its
    /// [`JoinHandle`], and the side that ends it once a worker has picked it.
    pub fn queued_joinable_task<T: Send + 'static>(
        &self,
        cpu: usize,
    ) -> (ModelTask, JoinHandle<T>, ModelExit<T>) {
        self.joinable(cpu, false)
    }

    fn joinable<T: Send + 'static>(
        &self,
        cpu: usize,
        running: bool,
    ) -> (ModelTask, JoinHandle<T>, ModelExit<T>) {
        let packet = Packet::<T>::new();
        let t = if running {
            self.start_running(cpu, packet.clone())
        } else {
            self.queue(cpu, packet.clone())
        };
        let handle = JoinHandle::new(&packet, t.0.id, Arc::clone(&t.0));
        let exit = ModelExit {
            task: Arc::clone(&t.0),
            slot: packet,
        };
        (t, handle, exit)
    }

    /// One round of `JoinHandle::join` by the model task `joiner`: the outcome if it is there,
    /// else `None` with `joiner` registered to be unparked (it then parks:
    /// [`prepare_park`](Self::prepare_park)).
    pub fn try_join<T>(
        &self,
        handle: &JoinHandle<T>,
        joiner: &ModelTask,
    ) -> Option<Result<T, JoinError>> {
        handle.try_take(|| Waiter::Task(Arc::clone(&joiner.0)))
    }

    /// Worker `cpu` ends its running task, whose closure returned `v`, at time `now`: the
    /// task's fiber stores the value (`Packet::set_value`), then the real exit hook after its
    /// timers (`sched::exit_at`, what `exit_current` runs once it has read the clock) on a
    /// worker thread built for the call whose running task it is: under the runqueue lock
    /// the dead task's dequeue, the outcome's delivery and the joiner's wakeup with that lock
    /// held (`Unparker::unpark_held` → `try_to_wake_up_held`, the lock taken again if the
    /// wakeup released it), the drain, the pick and the next task's `prepare_switch`; then
    /// the model's switch (the dead task's save, the next one's restore) and the real
    /// `finish_task_switch` (`on_cpu` cleared, then `put_dead`, which removes the task from
    /// its registry: model tasks are registered as spawns from outside are).
    pub fn exit<T: Send>(&self, exit: ModelExit<T>, cpu: usize, v: T, now: u64) -> Exited {
        // SAFETY: the task's one store; `complete` follows below on this thread, as on the
        // worker thread that runs the exit hook.
        unsafe { exit.slot.set_value(v) };
        let t = &exit.task;
        let wt = self.worker_thread(cpu, t);
        let (_, how) = sched::exit_at(&wt, None, now);
        let wake = match how {
            sched::JoinerWake::None => ExitWake::NoJoiner,
            sched::JoinerWake::Held => ExitWake::Held,
            sched::JoinerWake::Released => ExitWake::Released,
        };
        let next = Self::adopt(wt.curr.get());
        let dead = ModelTask(Arc::clone(t));
        self.switch(&dead, next.as_ref());
        sched::finish_task_switch_on(&wt);
        Exited { wake, next }
    }
}

impl<T: Send> ModelExit<T> {
    /// The task's closure returned `v`: its fiber stores the value (`Packet::set_value`), then
    /// the task's worker delivers the outcome through its completion
    /// (`Complete::complete`, which unparks a registered joiner), as the exit hook
    /// `sched::exit_current` does, on the ending task's stack.
    pub fn finish(self, v: T) {
        // SAFETY: the task's one store; `complete` follows below on this thread, as on the
        // worker thread that frees a real task.
        unsafe { self.slot.set_value(v) };
        if let Some(joiner) = self.task.completion.complete(None) {
            wake::unpark(&joiner, lagom_policy::WakeFlags::NONE);
        }
    }
}
