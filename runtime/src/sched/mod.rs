//! The scheduling loop: what a worker does between tasks — `schedule()` and
//! `finish_task_switch()`, a task's exit, the worker thread's main (idle) loop, load balancing
//! and the expiry of `sleep`'s timers. It sits beside the wakeup protocol (`wake/`), which it
//! calls (the wakelist drain, the preemption check of a pulled task, the wakeup of a joiner or
//! a sleeper); the wakeup protocol never calls it.
//!
//! Invariant: *a task's registers are saved before any other worker can observe its `on_cpu`
//! cleared, and a worker only switches to a task it picked under its own runqueue lock.*
//!
//! * `schedule.rs` — `schedule()`, `finish_task_switch()` and the lock-before-switch argument;
//! * `exit.rs` — a task's exit: straight to the next task, the dead task freed on the next
//!   context;
//! * `idle.rs` — the worker thread's loop (its idle task), the idle/kick sleep;
//! * `balance.rs` — newly idle and periodic load balancing (moving tasks between workers);
//! * `shutdown.rs` — a worker's part of a shutdown: cancelling the blocked tasks it finds;
//! * `unwind.rs` — a task that unwinds keeps its worker's thread (no other task may see its
//!   panic count): its blocks wait on the thread;
//! * `monitor.rs` — the stall monitor (Go's `sysmon`): a thread that reports a worker held by
//!   a task that makes no scheduling call while others wait, and kicks an idle worker for the
//!   tasks that may move;
//! * `timer.rs` — firing the timers of `sleep`.

mod balance;
mod exit;
mod idle;
pub(crate) mod monitor;
mod schedule;
mod shutdown;
mod timer;
mod unwind;

#[cfg(loom)]
pub(crate) use balance::periodic_balance;
pub(crate) use balance::tick as balance_tick;
pub(crate) use exit::exit_current;
#[cfg(loom)]
pub(crate) use exit::{JoinerWake, exit_at, exit_on};
pub(crate) use idle::worker_main;
#[cfg(loom)]
pub(crate) use idle::{IdleStep, idle_step};
pub(crate) use schedule::{Reason, block_current, finish_task_switch, schedule};
#[cfg(loom)]
pub(crate) use schedule::{
    finish_task_switch_on, pick, prepare_switch, schedule_prepare, schedule_prepare_at,
};
pub(crate) use timer::publish_next_timer;
pub(crate) use unwind::thread_unwinding;
