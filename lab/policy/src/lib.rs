//! # lagom-policy
//!
//! The Linux kernel's EEVDF fair-scheduling policy as plain data structures and pure
//! functions: one CPU's fair runqueue (`struct cfs_rq`: vruntime, lag, virtual deadlines,
//! delayed dequeue), wakeup preemption, CPU selection at wakeup and fork
//! (`select_task_rq_fair`), and the load balancer's decisions, with every disputed kernel
//! behaviour a named [`Feature`] switch.
//!
//! **Who it is for.** Scheduler engineers and anyone who wants the kernel's decisions without
//! the kernel: a driver brings the mechanism (threads, atomics and a clock, or an event queue
//! and a virtual clock) and asks this crate what to do. lagom has two such drivers: the
//! threaded runtime (crate `lagom`) and the deterministic simulator (crate `lagom-sim`); both
//! call the same functions here for every decision, so a figure from the simulator is a
//! figure of the runtime's policy. A third party can drive it alone: a property test of
//! EEVDF's lag bounds, a teaching tool, another runtime.
//!
//! **What it guarantees.** The crate is `#![no_std]` (it needs `alloc`) and has no dependency
//! at all, so it cannot make an OS call; it uses no atomics and reads no clock: time is an
//! argument (`now`, in nanoseconds). The same calls with the same arguments give the same
//! decisions, on any machine. Names follow the kernel's (`pick_eevdf`, `place_entity`,
//! `wake_affine`, `can_migrate_task`); where lagom departs from the kernel, the item says so
//! and why.
//!
//! Nothing on the pick path allocates (the entity slab may grow on enqueue).
//!
//! # The model in a page
//!
//! Each queued entity *i* has a weight wᵢ (from its nice level), a **vruntime** vᵢ (real run
//! time scaled by `NICE_0_LOAD / wᵢ`) and a request of `slice` ns whose **virtual deadline** is
//! dᵢ = vᵢ + slice·NICE_0_LOAD/wᵢ at the time the request was issued.
//!
//! * **V**, the virtual time of the queue, is the weight-averaged vruntime of all queued
//!   entities (the running one included). It is the zero-lag point: **lag**ᵢ = wᵢ·(V − vᵢ) is the
//!   service entity *i* is owed, and the lags sum to zero. [`RunQueue::avg_vruntime`] keeps V
//!   incrementally as 128-bit weighted sums relative to a zero point.
//! * An entity is **eligible** when its lag is ≥ 0 (vᵢ ≤ V), tested without division.
//! * **Pick** ([`RunQueue::pick_eevdf`]): among eligible entities, the earliest deadline. The
//!   timeline is a tree ordered by deadline whose nodes know their subtree's minimum vruntime,
//!   so the pick is one O(log n) descent. The kernel adds a next-buddy hint (PICK_BUDDY) and
//!   slice protection: the running entity keeps the CPU until its deadline, or one minimum
//!   slice when shorter-slice entities wait (RUN_TO_PARITY).
//! * **Running** ([`RunQueue::update_curr`]): vruntime advances; at the deadline a new request
//!   is issued and the entity is switched out at the next scheduling point.
//! * **Leaving and joining**: lag is saved when an entity leaves (clamped to
//!   about one request plus a tick) and restored when it re-joins (PLACE_LAG), so sleeping
//!   neither earns nor forgives service. A sleeper that is not eligible stays queued as
//!   **delayed** until it would be picked (DELAY_DEQUEUE), so it burns its debt in
//!   competition; DELAY_ZERO caps the lag it leaves with at zero.
//! * **Wakeup preemption** ([`RunQueue::wakeup_preempt`]): a woken entity preempts when it is
//!   what EEVDF would pick, ignoring protection if its slice is shorter (PREEMPT_SHORT).
//!
//! EEVDF guarantees (for zero-lag joins and leaves) −r_max < lagᵢ < max(r_max, q), with r_max
//! the largest request and q the accounting quantum (the tick here).
//!
//! Names follow the kernel's.
//!
//! ```
//! use lagom_policy::{EnqueueFlags, EnqueueKind, Pick, RqConfig, RunQueue, SchedEntity};
//! let mut rq: RunQueue<&str> = RunQueue::new(RqConfig::for_cpus(1));
//! let a = rq.enqueue(SchedEntity::new(0), "a", EnqueueKind::Initial, EnqueueFlags::NONE, 0);
//! let b = rq.enqueue(SchedEntity::new(0), "b", EnqueueKind::Initial, EnqueueFlags::NONE, 0);
//! let Pick::Run(first) = rq.pick_next(0) else { unreachable!() };
//! // Run it past its request: the tick asks for a switch and the other one runs next.
//! assert!(rq.task_tick(1_000_000));
//! let Pick::Run(second) = rq.pick_next(1_000_000) else { unreachable!() };
//! assert_ne!(first, second);
//! assert!([a, b].contains(&second));
//! ```

#![no_std]
#![deny(missing_docs)]

extern crate alloc;
#[cfg(test)]
extern crate std;

mod avg_vruntime;
mod balance;
mod check;
mod config;
mod cpumap;
mod delay;
mod entity;
mod features;
pub mod hint;
mod interval;
mod nohz;
mod pick;
mod place;
mod preempt;
mod runqueue;
mod select;
mod tree;
pub mod vtime;
mod wake_flags;
mod wakee;
mod weight;

pub use balance::{
    ActivePush, BALANCE_INTERVAL, Candidate, IMBALANCE_PCT, Imbalance, LbOutcome, LoadView,
    MIGRATION_COST, MIGRATION_COST_ALWAYS_HOT, MigrateEnv, Migration, PinnedCpus, PullReason,
    active_request_made, asym_active_balance, cache_nice_tries, can_migrate, clears_all_pinned,
    failed_after, imbalance_pct, may_active_push, moved, newidle_imbalance,
    newidle_imbalance_domains, periodic_imbalance, periodic_imbalance_domains,
    periodic_imbalance_level, task_hot,
};
pub use config::{NORMALIZED_BASE_SLICE, RqConfig, TunableScaling, scaled_base_slice};
pub use cpumap::{CpuMap, DomainParams, LevelFlags, MapLevel};
pub use delay::{DequeueKind, Dequeued};
pub use entity::{MAX_CUSTOM_SLICE, MIN_CUSTOM_SLICE, SchedEntity};
pub use features::{Feature, Features, UnknownFeature};
pub use interval::{
    LevelBalance, MAX_PINNED_INTERVAL, max_load_balance_interval, should_we_balance,
};
pub use nohz::nohz_kick_target;
pub use pick::Pick;
pub use place::{EnqueueFlags, EnqueueKind};
pub use preempt::{COND_RESCHED_TICK, Wakeup, resched_point_due};
pub use runqueue::{Handle, RunQueue};
pub use select::{
    CpuView, DelayedWake, DelayedWakeView, Placement, Selection, WakeCtx, curr_protection_left,
    delayed_wake, idle_in_llc, select_task_rq, select_task_rq_fair, sis_util_scan, ttwu_queue_cond,
};
pub use wake_flags::{ActivatePath, WakeFlags, activation_flags};
pub use wakee::{WAKEE_FLIP_DECAY, WakeeState, record_wakee, wake_wide};
pub use weight::{
    MAX_NICE, MIN_NICE, NICE_0_LOAD, SCHED_FIXEDPOINT_SHIFT, SCHED_PRIO_TO_WEIGHT,
    SCHED_PRIO_TO_WMULT, calc_delta_fair, clamp_nice, inv_weight_of_nice, weight_of_nice,
};
