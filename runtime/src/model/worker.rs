//! A worker thread played by a loom thread ([`ModelWorker`]): the runtime's own
//! `WorkerThread` state (built for the model: no signal stack, an empty stack pool, never
//! installed as the thread's `LOCAL`), driven through the real idle loop, the real
//! `schedule()` and `finish_task_switch`, and, for the task it runs, the real `park` loop,
//! join loops, exit hook and spawn; the model replaces only the switch itself. Also the
//! spawn from outside the workers ([`Model::spawn`]), the shutdown's phases
//! ([`Model::begin_shutdown`], [`Model::exit_phase`]) and a blocking pool job
//! ([`Model::blocking_job`]).

use alloc::sync::Arc;
use core::ptr::NonNull;

use super::{Model, ModelTask, Next};
use crate::JoinError;
use crate::sched::{self, Reason};
use crate::task::{BlockingHandle, Builder, JoinHandle};
use crate::worker::{Packet, Waiter, WorkerThread};

/// The value slot of a task spawned by a model ([`ModelWorker::spawn`], [`Model::spawn`]):
/// what the task's closure would store when it returns (`Packet::set_value`), which the
/// model stores itself before it ends the task ([`ModelWorker::exit`]), since a model task's
/// closure never runs.
pub struct ModelValue<T>(NonNull<Packet<T>>);

// SAFETY: a pointer to the task's packet, which its task (kept alive by its registry until
// the exit the value precedes) owns; the packet is Send + Sync for `T: Send`.
unsafe impl<T: Send> Send for ModelValue<T> {}

/// A `spawn_blocking` job that a model runs on a thread of its own
/// ([`Model::blocking_job`]).
pub struct ModelJob<T> {
    packet: Arc<Packet<T>>,
    id: u64,
}

impl<T: Send> ModelJob<T> {
    /// The pool thread runs the job `f` (`task::run_job`: the value's store, the packet's
    /// completion, the wakeup of a registered joiner).
    pub fn run(self, f: impl FnOnce() -> T) {
        crate::task::run_job(f, &self.packet, self.id);
    }
}

/// The closure of a model task, which never runs (a model does not switch stacks).
fn never_runs<T>() -> T {
    unreachable!("lagom: a model task's closure never runs")
}

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

    /// A thread outside the workers spawns a task through the real spawn path
    /// (`task::spawn_inner` with no worker thread: the registry's foreign part, CPU selection
    /// for a new task, the enqueue); its handle and value slot. The task has a real fiber
    /// and stack, but its closure never runs.
    pub fn spawn<T: Send + 'static>(&self) -> (JoinHandle<T>, ModelValue<T>) {
        spawn_on(&self.shared, None)
    }

    /// The task behind a join handle.
    pub fn task_of<T>(&self, h: &JoinHandle<T>) -> ModelTask {
        ModelTask(Arc::clone(&h.task))
    }

    /// A `spawn_blocking` job that the model runs itself ([`ModelJob::run`], on the thread
    /// that plays the pool's), and its handle.
    pub fn blocking_job<T: Send>(&self) -> (ModelJob<T>, BlockingHandle<T>) {
        let (packet, handle) = BlockingHandle::for_model();
        (
            ModelJob {
                packet,
                id: handle.id(),
            },
            handle,
        )
    }

    /// The runtime's shutdown enters its DRAIN phase (`Shared::set_phase`: the phase
    /// published, every worker kicked): idle workers sweep their registries for blocked tasks
    /// to cancel (`sched/shutdown.rs`).
    pub fn begin_shutdown(&self) {
        self.shared.set_phase(crate::worker::PHASE_DRAIN);
    }

    /// The shutdown's EXIT phase (`Shared::set_phase`): a worker with nothing left leaves its
    /// idle loop ([`ModelWorker::idle_until_exit`]).
    pub fn exit_phase(&self) {
        self.shared.set_phase(crate::worker::PHASE_EXIT);
    }
}

fn spawn_on<T: Send + 'static>(
    shared: &Arc<crate::worker::Shared>,
    wt: Option<&WorkerThread>,
) -> (JoinHandle<T>, ModelValue<T>) {
    let h = crate::task::spawn_inner(shared, wt, Builder::new(), never_runs::<T>)
        .expect("a model's spawn maps its stack");
    let v = ModelValue(h.packet);
    (h, v)
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
        self.switch_in_picked().map_or(Next::Idle, Next::Task)
    }

    /// The running task `t` parks: the real loop of `park` (`task::park_loop`: the
    /// cancellation point, `prepare_park`, and on `Sleep` the block) with this worker's
    /// [`block`](Self::block) as the switch away, and, where that switched to the idle task,
    /// the worker's idle loop until it runs `t` again ([`idle_run`](Self::idle_run)). The
    /// worker must have no other task to run (the model plays one task per worker).
    pub fn park(&self, t: &ModelTask) {
        crate::task::park_loop(&t.0, || match self.block() {
            Next::Same => {}
            Next::Idle => {
                let ran = self.idle_run();
                assert_eq!(ran.id(), t.id(), "the model's worker ran another task");
            }
            Next::Task(_) => panic!("the model's worker switched to another task"),
        });
    }

    /// The running task `joiner` joins `h`: the real `JoinHandle::join` loop
    /// (`join_with`: `try_take` rounds registering `joiner`, [`park`](Self::park) between
    /// them, then the recycle of the joined task's allocation into this worker's spare).
    pub fn join<T>(&self, h: JoinHandle<T>, joiner: &ModelTask) -> Result<T, JoinError> {
        h.join_with(
            || Waiter::Task(Arc::clone(&joiner.0)),
            || self.park(joiner),
            || Some(&self.wt),
        )
    }

    /// The running task `joiner` joins the blocking job of `h` (`BlockingHandle::join`'s loop,
    /// `join_with`, parking with [`park`](Self::park)).
    pub fn join_blocking<T>(
        &self,
        h: BlockingHandle<T>,
        joiner: &ModelTask,
    ) -> Result<T, JoinError> {
        h.join_with(|| Waiter::Task(Arc::clone(&joiner.0)), || self.park(joiner))
    }

    /// The running task spawns a task through the real spawn path (`task::spawn_inner` from
    /// this worker thread: the registry's own part, this worker's spare allocation if it has
    /// one, CPU selection, the enqueue). As [`Model::spawn`], the closure never runs.
    pub fn spawn<T: Send + 'static>(&self) -> (JoinHandle<T>, ModelValue<T>) {
        spawn_on(&self.wt.shared, Some(&self.wt))
    }

    /// The running task arms a timer at `deadline` (monotonic ns) on this worker's heap
    /// (`task::arm_timer`, the one place the task API arms one; under loom the clock stands
    /// at `sys::time::LOOM_NOW`, so a deadline at or before it is already due: the real
    /// expiry, `sched/timer.rs`'s `fire`, pops it at the worker's next scheduling call or
    /// idle round).
    pub fn arm_timer(&self, t: &ModelTask, deadline: u64) {
        let _token = crate::task::arm_timer(&self.wt, deadline, Arc::clone(&t.0));
    }

    /// The worker's periodic balance is not due for the rest of the model (its tick ran
    /// recently: `WorkerThread::next_balance` in the far future), for a model whose race is
    /// not the balancer's, to keep its executions few.
    pub fn balance_not_due(&self) {
        self.wt.next_balance.set(u64::MAX);
    }

    /// The worker's periodic balance is due at its next tick at every domain level (its
    /// tick interval passed, and each level's `last_balance` at time 0, long before the
    /// loom clock's `LOOM_NOW`), for a model whose race is the tick's balance: a worker
    /// thread's levels otherwise start at its first tick and are not due under loom's
    /// clock, which stands still.
    pub fn balance_due(&self) {
        let wt = &self.wt;
        wt.next_balance.set(0);
        let map = &wt.shared.cpus;
        let mut levels = wt.balance_levels.borrow_mut();
        levels.clear();
        levels.extend(
            (0..map.levels().len())
                .map(|l| lagom_policy::LevelBalance::new(&map.params(l, wt.index), 0)),
        );
    }

    /// Whether this worker's timer heap is empty.
    pub fn timers_empty(&self) -> bool {
        self.wt.timers.borrow().is_empty()
    }

    /// The running task's closure returned `v`: the model stores it (`value`, as the closure
    /// would), then the task ends through [`exit_with`](Self::exit_with).
    pub fn exit<T: Send>(&self, value: ModelValue<T>, v: T) -> Option<ModelTask> {
        // SAFETY: the task's one store, made on the worker thread that ends it just before
        // its exit hook completes the packet (as the closure's store precedes the hook); the
        // registry keeps the task, and so the packet, alive until then.
        unsafe { value.0.as_ref().set_value(v) };
        self.exit_with(None)
    }

    /// The running task ends with the outcome `outcome` (its fiber's: `None` or `Ok(())` once
    /// its value is stored, `Err` for a panic or a cancellation): the real exit hook
    /// (`sched::exit_on`: the dequeue, the outcome's delivery and the joiner's wakeup under
    /// the runqueue lock, the drain and the pick), then the model's switch (the dead task's
    /// save, the next task's restore) and the real `finish_task_switch` on the next context
    /// (`on_cpu` cleared, then `put_dead`: the fiber's stack back to the pool and the
    /// registry's reference dropped, or the task handed to its home worker's dead list).
    /// Returns the task switched to (`None`: the idle task).
    pub fn exit_with(&self, outcome: Option<Result<(), JoinError>>) -> Option<ModelTask> {
        let dead = self.wt.curr.get();
        assert!(!dead.is_null(), "the model's worker runs no task");
        let _ = sched::exit_on(&self.wt, outcome);
        // SAFETY: the registry keeps the dead task alive until `put_dead` below.
        let dead = unsafe { &*dead };
        // SAFETY: the dead task's context is this worker's until `put_dead` (nobody resumes
        // it).
        dead.loom_ctx.with_mut(|c| unsafe { *c += 1 });
        self.switch_in_picked()
    }

    /// The second half of the model's switch, once the real code has switched the running
    /// task out (its save recorded) and picked: the restore of the task it picked (the
    /// worker's `curr`, if any) and the real `finish_task_switch` on the next context.
    fn switch_in_picked(&self) -> Option<ModelTask> {
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
        next
    }

    /// The idle loop's rounds (`sched::idle_step`) until the shutdown's EXIT phase ends it,
    /// for a worker that has no task left to run (one picked is a model error).
    pub fn idle_until_exit(&self) {
        let mut idle_since = None;
        loop {
            match sched::idle_step(&self.wt, &mut idle_since) {
                sched::IdleStep::Switch(_) => panic!("the worker picked a task during EXIT"),
                sched::IdleStep::Again => {}
                sched::IdleStep::Exit => return,
            }
        }
    }
}
