//! Seams for the loom models of `loom-tests/` (compiled only with `--cfg loom`).
//!
//! A model cannot start worker threads or switch stacks, so it plays the workers itself: it
//! builds the runtime's shared state without threads, and each method here runs real pieces
//! of the runtime on the calling loom thread. Where a worker thread's state is needed, a
//! seam builds the runtime's own `WorkerThread` for the worker it plays
//! (`WorkerThread::for_model`, cfg(loom): no signal stack, an empty stack pool, never
//! installed as the thread's `LOCAL`, since loom threads share one OS thread).
//!
//! ## What runs, and what the model still does itself
//!
//! Every protocol step is the runtime's own function, called as its threaded caller calls
//! it; where a real function could not run under loom as it was, it was split so that the
//! part loom runs is the part the threads run (the outer part only looks the worker thread
//! up through `LOCAL`, reads the clock, or fires the timers):
//!
//! * [`ModelWorker`] (the models of issues #15 and #21) runs a worker through the real
//!   idle loop's rounds (`sched::idle_step`, with the stall monitor's wake-up when it leaves
//!   its idle wait), the real `schedule()` up to the switch
//!   (`sched::schedule_prepare`: timers, balance tick, drain, `put_prev`, pick,
//!   `prepare_switch`), the real `finish_task_switch` (`finish_task_switch_on`: `on_cpu`
//!   cleared, then `put_dead`), the real exit hook (`sched::exit_on`, split from
//!   `exit_current`, which only adds the look-up of the thread and the fiber's outcome), the
//!   real `park` loop (`task::park_loop`, split from `park_task`), the real join loops
//!   (`JoinHandle::join_with`, `BlockingHandle::join_with`, with the recycle of
//!   `recycle_on`), the real spawn (`task::spawn_inner`), timers armed by `task::arm_timer`
//!   and the blocking pool's job (`task::run_job`).
//! * The older seams on [`Model`] pass the times a switch-out or an exit charges (`now`),
//!   which the runtime reads from a clock that stands still under loom: [`Model::schedule_prev`]
//!   runs `sched::schedule_prepare_at` (split from `schedule_prepare` after its timers and
//!   clock read), [`Model::exit`] runs `sched::exit_at` (split from `exit_on` likewise) and
//!   the real `finish_task_switch_on` with `put_dead`, and [`Model::finish_task_switch`]
//!   runs `finish_task_switch_on`. Their worker threads' balance tick is never due: these
//!   models place their tasks themselves.
//!
//! * [`Model::monitor_deep_sleep`] runs the stall monitor's deep sleep
//!   (`sched::monitor::deep_sleep`) on the calling loom thread, as the monitor's thread runs
//!   it once every worker has been idle for a second (the model `monitor_deep_sleep`).
//!
//! What the models still do themselves, and why:
//!
//! * **the context switch**, which the asm does (below);
//! * [`Model::switch_in`], an idle worker's switch into a task at a time the model passes: it
//!   calls the real drain, pick and `prepare_switch` in the idle loop's order, but not
//!   `idle_step` itself, whose round goes on to sleep on the kick word when nothing is
//!   runnable, where these models want to see "nothing" (the kick protocol has its own
//!   models: `idle_kick`, `idle_worker`);
//! * in the older models (`ttwu`, `join`, `delayed`, `on_cpu`, `migrate`, `contract`,
//!   `exit_wake`), a parking task's rounds (`prepare_park`, then `schedule_prev` or
//!   `schedule_at` on `Sleep`) and `join`'s rounds (`try_join`, then the park): the order of
//!   `park_loop` and `JoinHandle::join_with`, which the newer models call through
//!   [`ModelWorker`] instead. Those models move one task between workers by index from any
//!   loom thread, at times they pass, where a `ModelWorker` belongs to the loom thread that
//!   plays its worker and reads the loom clock; rewriting them onto it is not done yet;
//! * setting up (`running_task`, `queued_task`: an activation and a pick at time 0 on the
//!   main thread before any other thread starts) and reading state for assertions;
//! * a task's own code: its closure's value store ([`ModelWorker::exit`]), a timer armed
//!   already due (`park_until`'s early return for a past deadline is not run, as no
//!   deadline can pass while the clock stands still), and the `catch_unwind` that the fiber
//!   wraps around the closure (the `shutdown_sweep` model).
//!
//! A model task spawned by [`Model::spawn`] or [`ModelWorker::spawn`] has a real fiber and
//! stack, but its closure never runs; tasks made by `running_task`/`queued_task` have no
//! fiber. Both are registered (the foreign part of a registry, as a spawn from outside the
//! workers is), so that the real `put_dead` frees them.
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
pub use worker::{ModelJob, ModelValue, ModelWorker};

/// The runtime's internal synchronization (`locking/`), for the models of its pieces.
pub use crate::locking;

use alloc::string::String;
use alloc::sync::Arc;

use crate::locking::atomic::{AtomicU32, AtomicUsize, Ordering};
use crate::runtime::WorkerStats;
use crate::sched::{self, Reason};
use crate::tcb::{self, Complete, ParkStep, RUNNING};
use crate::wake;
use crate::worker::{Packet, Shared, Task, TaskRef, Waiter, Worker, WorkerThread};
use lagom_policy::{Features, Pick, RqConfig, SchedEntity, WakeFlags};

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
    /// As for `lagom::runtime::Builder::allow_migration`: the tasks must hold nothing thread-local
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
                cpus: lagom_policy::CpuMap::flat(workers),
                layout_fallback: None,
                float_cpus: alloc::vec::Vec::new(),
                host_hints: false,
                host_notes: AtomicU32::new(0),
                phase: AtomicU32::new(crate::worker::PHASE_RUN),
                stack_size: crate::arch::MIN_STACK_SIZE,
                idle_spin: 0,
                idle_spin_adaptive: false,
                timer_spin: 0,
                tick_timer: true,
                fp_control: crate::arch::FpControl::Preserve,
                allow_migration,
                task_clock: crate::worker::TaskClock::Wall,
                progress_tick: u64::MAX,
                interpose_sleep: false,
                next_outside: AtomicUsize::new(0),
                blocking_borrows: AtomicUsize::new(0),
                trace: None,
                monitor: crate::locking::futex::Futex::new(0),
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
        unsafe { wake::activate(w, &mut w.rq.lock(), &t, 0, WakeFlags::TTWU) };
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
        // The registry's reference, as a spawn from outside the workers keeps one (the
        // foreign part of worker `cpu`'s registry): the real `put_dead` removes it at exit.
        let slot = self.shared.workers[cpu]
            .tasks
            .insert_foreign(Arc::clone(&t));
        t.reg_home.store(cpu, Ordering::Relaxed);
        t.reg_slot.store(slot, Ordering::Relaxed);
        t
    }

    fn start_running(&self, cpu: usize, completion: Arc<dyn Complete<Waiter>>) -> ModelTask {
        let t = self.new_task(cpu, completion);
        let w = &self.shared.workers[cpu];
        let mut rq = w.rq.lock();
        // SAFETY: as in `queued_task`.
        unsafe { wake::activate(w, &mut rq, &t, 0, WakeFlags::TTWU) };
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

    /// `cond_resched` of worker `cpu`'s running task `t` at time `now`: the real test of the
    /// resched word (one load; nothing set: `None`, nothing done), then the real tick
    /// (`task::tick`: the tick bits taken, need-resched, the wakelist and the charge looked
    /// at, the tick re-armed) and, if it says so, the real `schedule()` with
    /// `Reason::Preempt` up to the switch, which the model then plays as
    /// [`schedule_at`](Self::schedule_at) does. Returns the id of the task running on `cpu`
    /// afterwards (`t`'s own if nothing switched).
    pub fn cond_resched(&self, t: &ModelTask, cpu: usize, now: u64) -> Option<u64> {
        let wt = self.worker_thread(cpu, &t.0);
        if wt.resched().load() == 0 {
            return None;
        }
        if !crate::task::tick(&wt, now)
            || sched::schedule_prepare_at(&wt, Reason::Preempt, now).is_none()
        {
            return Some(t.id());
        }
        let next = Self::adopt(wt.curr.get());
        self.switch(t, next.as_ref());
        self.finish_task_switch(t);
        Some(next.map_or(0, |n| n.id()))
    }

    /// Sets `bits` in worker `cpu`'s resched word (`locking::resched`), as the tick
    /// timer's signal or a wakeup check would.
    pub fn set_resched(&self, cpu: usize, bits: u32) {
        self.shared.workers[cpu].resched.set(bits);
    }

    /// Worker `cpu`'s resched word.
    pub fn resched(&self, cpu: usize) -> u32 {
        self.shared.workers[cpu].resched.load()
    }

    /// Whether worker `cpu`'s wakelist is empty.
    pub fn wakelist_is_empty(&self, cpu: usize) -> bool {
        self.shared.workers[cpu].wakelist.is_empty()
    }

    /// Worker `cpu`'s `schedule()` for its running task `t` at time `now`, up to the switch:
    /// the real `sched::schedule_prepare_at` (what `schedule()` runs after firing its timers:
    /// under the runqueue lock, drain the wakelist, charge `t`, put it away — a blocked `t`
    /// is dequeued —, pick, and mark the task picked running; then release the lock) on a
    /// worker thread built for the call (`WorkerThread::for_model`) whose running task is
    /// `t` and whose balance tick is not due (these models place their tasks themselves;
    /// [`ModelWorker`]'s worker threads run the tick). `t` is still `on_cpu`.
    pub fn schedule_prev(&self, t: &ModelTask, cpu: usize, now: u64) -> Next {
        let wt = self.worker_thread(cpu, &t.0);
        if sched::schedule_prepare_at(&wt, Reason::Block, now).is_none() {
            return Next::Same;
        }
        Self::adopt(wt.curr.get()).map_or(Next::Idle, Next::Task)
    }

    /// A worker thread for one seam's call, playing worker `cpu` with `running` as its running
    /// task and its balance tick not due.
    fn worker_thread(&self, cpu: usize, running: &Task) -> WorkerThread {
        let wt = WorkerThread::for_model(Arc::clone(&self.shared), cpu);
        wt.next_balance.set(u64::MAX);
        wt.curr.set(running);
        wt
    }

    /// The model's reference to `t` (null: none), picked and marked running under a runqueue
    /// lock just released.
    fn adopt(t: *const Task) -> Option<ModelTask> {
        (!t.is_null()).then(|| {
            // SAFETY: picked from a runqueue, whose registry keeps it alive
            // (`tcb/queued.rs`): one more reference may be taken.
            unsafe {
                Arc::increment_strong_count(t);
                ModelTask(Arc::from_raw(t))
            }
        })
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

    /// The real `finish_task_switch` on the next context's stack (`finish_task_switch_on`,
    /// on a worker thread built for the call whose previous task is `prev`): the switch away
    /// from `prev` is complete (`clear_on_cpu`, Release); no task died in it, so `put_dead`
    /// has nothing to free.
    pub fn finish_task_switch(&self, prev: &ModelTask) {
        let wt = WorkerThread::for_model(Arc::clone(&self.shared), 0);
        wt.prev.set(&*prev.0);
        sched::finish_task_switch_on(&wt);
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
        wake::unpark_task(&t.0, WakeFlags::NONE);
    }

    /// The stall monitor's deep sleep (`sched::monitor::deep_sleep`): sleeps without a
    /// timeout unless a worker is active, until a worker that leaves its idle wait wakes it.
    /// Returns whether it slept.
    pub fn monitor_deep_sleep(&self) -> bool {
        sched::monitor::deep_sleep(&self.shared)
    }

    /// `try_to_wake_up(t)` from a thread outside the workers.
    pub fn try_to_wake_up(&self, t: &ModelTask) -> Woken {
        match wake::try_to_wake_up(&t.0, WakeFlags::NONE) {
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
