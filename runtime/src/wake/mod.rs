//! The wakeup protocol: `try_to_wake_up` (the book's `docs/src/design/wakeup.md` tells it in
//! prose) and what it hands tasks to — the target's wakelist and its drain, and `activate` with
//! the wakeup-preemption check.
//!
//! Invariant: *a blocked task that is woken becomes runnable exactly once, on exactly one
//! runqueue, and never before the worker it blocked on has finished switching away from it.*
//!
//! Steps, with the ordering each relies on:
//!
//! 1. The caller has published its wakeup condition and issued `fence(SeqCst)` (for park:
//!    the token swap, then the fence in `unpark_task`); the state load that follows pairs
//!    with the sleeper's `set_blocked` fence (lost-wakeup handshake, loom model 1).
//! 2. **Claim** `BLOCKED → WAKING` (compare-exchange, Acquire). Losing means the task is
//!    running, already being woken, or dead: return. Only one waker wins (loom model 2,
//!    mutant `ttwu_no_claim`). This replaces the kernel's `pi_lock`.
//! 3. **Runnable wakeup** (`ttwu_runnable`): if `on_rq` (Acquire, O1) the task has not
//!    been dequeued (it is still running towards `schedule()`, or delayed). Lock the runqueue
//!    of `cpu`, re-check that `cpu` did not change (a balancer may have moved it: retry, O4)
//!    and that `on_rq` still holds; requeue a delayed entity in place (`requeue_delayed`, then
//!    the preemption check), and store `RUNNING`. If `on_rq` turned false under the lock, the
//!    sleeper dequeued it meanwhile: continue with the full wakeup.
//! 4. **on_cpu**: the task is off every runqueue (its `on_rq = false` Release was observed,
//!    O2). If its worker is still switching away from it (`on_cpu`, Acquire): with
//!    TTWU_QUEUE_ON_CPU hand the wakeup to that worker's wakelist (`cpu` is that worker,
//!    O3) — it activates the task after the switch completed, by program order; otherwise
//!    spin until `on_cpu` clears (Acquire: the saved context is visible). Either way no
//!    worker switches the task in before its switch-out completed (loom model 6,
//!    `on_cpu_handoff`; mutants `ttwu_on_cpu_wrong_cpu`, `ttwu_no_on_cpu_wait`).
//! 5. **select_task_rq** (`lagom_policy::select_task_rq`) over the workers' published load
//!    and the runtime's `CpuMap`, with the wakeup's `WF_SYNC` (`Unparker::unpark_sync`): a
//!    task that may run on one CPU stays there; otherwise the fair class's selection runs
//!    (the waker task's `record_wakee`, `wake_wide`, `wake_affine`, `select_idle_sibling`)
//!    and the wakeup gains `WF_RQ_SELECTED`; store the chosen `cpu` (this waker owns the task
//!    exclusively now), and `WF_MIGRATED` if it differs from the last.
//! 6. **Enqueue**: on the waker's own worker directly under its lock; on another worker
//!    through its wakelist and a kick, or under its lock followed by a kick, as
//!    `ttwu_queue_cond` says (policy: the wakelist across LLCs or to an idle worker, the lock
//!    to a busy worker in the waker's LLC; TTWU_QUEUE_DEFAULT: always the wakelist;
//!    NO_TTWU_QUEUE: always the lock). `activate` stores `RUNNING` and runs the
//!    wakeup-preemption check (`WF_SYNC` included, `preempt_sync`; the wakelist path drops
//!    the flag, as the kernel's does), which may set the target's need-resched flag.
//!
//! The TTWU_QUEUE_ON_CPU hand-off (step 4) is gated by the same `ttwu_queue_cond`; a worker
//! that does not take it spins on `on_cpu`.
//!
//! Delayed wakees: with TTWU_QUEUE_DELAYED (the RFC's v2 `ttwu_delayed`) a waker that sees
//! `on_rq` and `sched_delayed` (Acquire; set with Release when the task was delayed) for a
//! task on another worker does not take that worker's lock: it records its own CPU in
//! `wake_cpu`, marks the entry `wake_delayed` and pushes the task on the owner's wakelist; the
//! owner finishes the dequeue under its own lock (unless a pick already did), selects a CPU
//! with `WF_TTWU` alone (the waker's CPU as `this`) and activates the task there or forwards
//! it (`queue.rs`, `drain`). With TTWU_DEQUEUE, `ttwu_runnable` finishes
//! the delayed dequeue and returns "not done", so the task takes the full path (CPU
//! selection included); lagom's DELAYED_WAKE_IDLE does the same only when the wakee would
//! otherwise wait behind the running task while an idle CPU of its LLC could take it
//! (`policy::delayed_wake`). The periodic load balance may move a delayed task (the kernel's
//! `migrate_load` does): a delayed wakeup queued to its old worker is then forwarded by that
//! worker's drain to the new one (the chase, loom model 7, `loom-tests/tests/migrate.rs`).
//! Loom model 5
//! (`loom-tests/tests/delayed.rs`) races such a waker against the owner's pick finishing the
//! delayed dequeue under each of the three (mutants `ttwu_runnable_no_recheck`,
//! `drain_delayed_no_recheck`, `finish_delayed_relaxed_on_rq`). The Acquire on
//! `sched_delayed` is kept as the RFC has it, but in lagom the claim's Acquire already orders
//! everything the waker reads next: weakening it to Relaxed is not caught by that model.
//!
//! **From a task's exit** (`try_to_wake_up_held`, `sched/exit.rs`): the exit wakes its joiner
//! while it holds its own runqueue lock (the kernel's wakeups from `__schedule` under
//! `rq->lock`). The steps are the same code (`ttwu`), with that lock standing in for the one
//! they would take on the waker's own worker: a joiner queued there is requeued in place
//! under it (the `cpu` re-check holds trivially: a balancer moves a task only under both
//! locks), and a joiner that is enqueued there is activated under it. Every other step
//! releases the held lock before it goes on: another runqueue lock (never two at once, so no
//! lock-order question), a wakelist push and its kick, or the `on_cpu` wait. The held lock
//! adds no interleaving, as it excludes exactly what a fresh one would; what it adds is a
//! choice — which worker's lock stands in, and when it must be released — and loom model 9
//! (`loom-tests/tests/exit_wake.rs`) checks that choice: the `Model::exit` seam runs the
//! exit's dequeue and this wakeup from a loom thread playing the exiting worker (a
//! `WorkerThread` of its own, the lock held), against the joiner blocking on another worker
//! (`exit_wake_remote`, `exit_wake_remote_idle`), and against another worker's balancer
//! pulling a joiner that sleeps delayed on the exiting worker (`exit_wake_local`). Mutants
//! `ttwu_held_wrong_rq` (the held guard used for a task queued on another worker) and
//! `ttwu_held_any_target` (a task enqueued under the held lock whatever worker CPU selection
//! chose) are caught there, and only there.
//!
//! ## Files
//!
//! * `ttwu.rs` — `try_to_wake_up`, `try_to_wake_up_held` and their common body (steps 2–6);
//! * `runnable.rs` — `ttwu_runnable` (step 3);
//! * `select.rs` — CPU selection over the workers' published state (step 5);
//! * `queue.rs` — enqueueing on a worker (step 6): directly, under its lock, or through its
//!   wakelist; the wakelist drain (`sched_ttwu_pending`);
//! * `activate.rs` — `ttwu_do_activate` and the wakeup-preemption check, under the target's
//!   runqueue lock; a delayed dequeue's completion;
//! * `unpark.rs` — the unparker's half of `park`/`unpark` (token, then `try_to_wake_up`).

mod activate;
mod queue;
mod runnable;
mod select;
mod ttwu;
mod unpark;

#[cfg(loom)]
pub(crate) use activate::activate;
pub(crate) use activate::{check_preempt, finished_delayed};
pub(crate) use queue::{drain, enqueue_on};
pub(crate) use select::{cpu_view, select_cpu};
#[cfg(loom)]
pub(crate) use ttwu::{Woken, try_to_wake_up};
pub(crate) use unpark::{unpark, unpark_held, unpark_task};
