//! # lagom-sim
//!
//! The deterministic simulator of lagom's scheduler: the EEVDF policy (`lagom-policy`) on
//! virtual CPUs built from any topology (`lagom-topology`), under a virtual nanosecond clock,
//! with tasks described by behaviour scripts (run, sleep, wake, yield, spawn, loop), so that a
//! scenario replays identically, at any CPU count, on any machine.
//!
//! **Who it is for.** Scheduler engineers: to see what a feature switch, a placement rule or a
//! balancing change does on a 32-CPU two-LLC machine from a laptop, to reproduce a report
//! event for event, to sweep seeds for the rare case, and to check a change against the
//! threaded runtime on the same scenario (`examples/sim` runs a scenario, `examples/sim_check`
//! runs it on both drivers side by side). A scenario is a text file (its format is on [`parse`])
//! or a [`Scenario`] built in code; a run yields a [`Report`] (latency histograms, per-CPU counters named as
//! the runtime's) and, if asked, a [`Trace`](lagom_trace::Trace) that opens in
//! ui.perfetto.dev like a trace of the runtime.
//!
//! **What it is not.** It is no model of the kernel's costs: decisions take no virtual time,
//! and what the simulator leaves out is listed below. It names nothing of the threaded runtime
//! (crate `lagom`), which Cargo enforces: it depends on the policy, the topology and the trace
//! types only. `#![no_std]` + `alloc`, no OS access; the `std` feature (on by default)
//! only lets a run's trace be written to a file (`lagom-trace`'s `std`).
//!
//! ## How it drives the policy
//!
//! It is a second driver beside the threaded runtime, on the same policy: each virtual CPU has
//! its own [`RunQueue`](lagom_policy::RunQueue), and every decision — pick, placement and lag,
//! delayed dequeue, wakeup preemption, `select_task_rq` (wake_affine with `WF_SYNC`,
//! select_idle_sibling with SIS_UTIL, `WF_FORK`'s idlest CPU), `ttwu_queue_cond`,
//! `delayed_wake`, the domain newly idle balance with ITMT asym packing and active balance, the
//! nohz kick's target — is the policy's function, called with the arguments the threaded
//! runtime passes, over the [`CpuMap`](lagom_policy::CpuMap) the threaded runtime would build
//! on that machine (the same `layout` function builds both). What the simulator adds is the
//! mechanism in virtual time (the steps of the threaded driver's `wake/` and `sched/`, with no
//! threads, atomics or clock), in these files of its source: `cpu.rs` (schedule, cond_resched,
//! the switch, the idle loop), `wake.rs` (unpark, try_to_wake_up, the wakelist, spawn),
//! `balance.rs` (periodic and newly idle balance, the nohz kick), `task.rs` (the script
//! interpreter), `engine.rs` (the event loop), `build.rs` (a scenario's names, instances and
//! CPUs resolved against the machine).
//!
//! Invariant: *the same scenario, machine, features and seed give the same run, event for
//! event*: one event queue ordered by (time, push order), one seeded generator drawn in event
//! order, integer time, and ordered containers only.
//!
//! Shared with the threaded driver as pure functions of the policy (`lagom-policy`) (each was once replayed
//! here by hand): what selection reads of a CPU (`CpuView::of`), the delayed wakee's
//! dequeue-or-requeue (`delayed_wake` over `DelayedWakeView::of` and `idle_in_llc`), the
//! sleeper's wakelist-or-lock (`ttwu_queue_cond`), the nohz kick's target
//! (`nohz_kick_target`), whether a pending active-balance request may be carried out
//! (`may_active_push`), the flags each activation path passes on (`activation_flags`: the
//! waker's `WF_SYNC` never reaches a wakelist activation, `WF_MIGRATED` makes the enqueue
//! `ENQUEUE_MIGRATED` on every migration, balance moves included), and the request for a
//! switch that any charge of the running task leaves (`RunQueue::need_resched`), CPU
//! selection's whole decision (`select_task_rq`: `WF_RQ_SELECTED`, the wakee records of
//! `record_wakee`, the recently used CPU), and whether a scheduling point runs its full tick
//! (`resched_point_due`, `COND_RESCHED_TICK`; a spawn is such a point in both; this is the
//! threaded runtime's tick without its tick timer, `Builder::tick_timer(false)`: the default
//! runtime's timer-driven tick, a full tick at the running task's `curr_resched_at`, the next
//! timer or the next balance, is not simulated, nor its adaptive idle spin). Still replayed
//! step for step, and so kept in step by hand: the TTWU_QUEUE_DELAYED hand-off test (the
//! feature and "not on the waker's CPU"), the steps of an active-balance move (at the task's
//! next schedule point, or its next wakeup if it left the runqueue first; the simulator moves
//! it at the switch, the threaded driver once the switch completes), the pull loop's walk of
//! the busiest runqueue (its `NR_MIGRATE` bound and `Candidate` building; the simulator walks
//! from the first slot each time where the threaded driver resumes from a cursor), and who
//! the waker task is (a simulated waker thread "from CPU" is no task, and a waker that waits
//! for its wakee's switch-out records nothing). Simulated tasks may all migrate (the
//! threaded runtime's `allow_migration` lab setting): the migration contract has no
//! counterpart here.
//!
//! What it leaves out (so what its figures cannot show): the cost of the policy's own work
//! (a pick, a CPU scan: decisions take no virtual time), caches beyond a fixed migration
//! cost, SMT siblings slowing each other, the host taking CPUs away, and the kernel's timer
//! interrupts (a sleep timer and the balance tick run at a running task's scheduling points).
//!
//! ## When a busy CPU acts: the preemption mode
//!
//! [`Preempt`] (the scenario's `preempt` line, [`Options::preempt`], `sim --preempt`):
//! `cooperative`, the default, is lagom's threaded runtime — a CPU running a task acts on a
//! wakeup preemption, a remote wakeup on its wakelist or an active balance's request for its
//! task only at the task's next scheduling point (`cond_resched`, every `resched` ns of
//! computing); `kernel` is the kernel's resched IPI and stopper thread — the same scheduling
//! point, brought forward to at most a latency (default [`KERNEL_PREEMPT_LATENCY`], 2 µs)
//! after the request. The mode changes when the CPU acts, never what the policy decides.
//!
//! ```
//! use lagom_sim::{Machine, Options, Report, Sim, parse};
//! let scenario = parse(
//!     "scenario two-hogs\nduration 100ms\n\
//!      task a cpus=0\n  run 1s\nend\n\
//!      task b cpus=0\n  run 1s\nend\n",
//! )?;
//! let mut sim = Sim::new(&scenario, Machine::named("cpus-2").unwrap(), Options::of(&scenario)?)?;
//! sim.run();
//! let report = Report::of(&sim);
//! let (a, b) = (report.tasks[0].stats.cpu_time, report.tasks[1].stats.cpu_time);
//! assert!(a.abs_diff(b) < 2_000_000, "two equal hogs on one CPU share it: {a} vs {b}");
//! # Ok::<(), Box<dyn core::error::Error>>(())
//! ```

#![no_std]
#![deny(missing_docs)]

extern crate alloc;
#[cfg(test)]
extern crate std;

mod balance;
mod build;
mod builtin;
mod costs;
mod cpu;
mod engine;
mod error;
mod machine;
mod parse;
mod queue;
mod report;
mod rng;
mod scenario;
mod stats;
mod task;
mod trace;
mod wake;

pub use builtin::{BUILTIN, builtin};
pub use costs::Costs;
pub use engine::{Options, Sim, Stop};
pub use error::{MachineError, ScenarioError};
pub use machine::Machine;
pub use parse::parse;
pub use report::{CpuReport, Report, TaskReport};
pub use rng::{Dist, Rng};
pub use scenario::{
    Affinity, Instance, KERNEL_PREEMPT_LATENCY, Op, Params, Preempt, Scenario, Step, Target,
    TaskSpec, Waker,
};
pub use stats::{Counters, Histogram, TaskStats};
