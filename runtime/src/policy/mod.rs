//! The pure EEVDF policy: one CPU's fair runqueue and its placement and preemption decisions.
//!
//! No atomics, no OS calls, no clock reads: time is an argument (`now`, in ns), so the
//! threaded runtime and the deterministic simulator drive exactly the same code. Nothing on
//! the pick path allocates (the entity slab may grow on enqueue).
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
//! * **Leaving and joining** (`place.rs`): lag is saved when an entity leaves (clamped to
//!   about one request plus a tick) and restored when it re-joins (PLACE_LAG), so sleeping
//!   neither earns nor forgives service. A sleeper that is not eligible stays queued as
//!   **delayed** until it would be picked (DELAY_DEQUEUE, `delay.rs`), so it burns its debt in
//!   competition; DELAY_ZERO caps the lag it leaves with at zero.
//! * **Wakeup preemption** ([`RunQueue::wakeup_preempt`]): a woken entity preempts when it is
//!   what EEVDF would pick, ignoring protection if its slice is shorter (PREEMPT_SHORT).
//!
//! EEVDF guarantees (for zero-lag joins and leaves) −r_max < lagᵢ < max(r_max, q), with r_max
//! the largest request and q the accounting quantum (the tick here).
//!
//! Section numbers (§) refer to `docs/eevdf-spec.md`. Names follow the kernel.
//!
//! ```
//! use lagom::policy::{EnqueueKind, Pick, RqConfig, RunQueue, SchedEntity};
//! let mut rq: RunQueue<&str> = RunQueue::new(RqConfig::for_cpus(1));
//! let a = rq.enqueue(SchedEntity::new(0), "a", EnqueueKind::Initial, 0);
//! let b = rq.enqueue(SchedEntity::new(0), "b", EnqueueKind::Initial, 0);
//! let Pick::Run(first) = rq.pick_next(0) else { unreachable!() };
//! // Run it past its request: the tick asks for a switch and the other one runs next.
//! assert!(rq.task_tick(1_000_000));
//! let Pick::Run(second) = rq.pick_next(1_000_000) else { unreachable!() };
//! assert_ne!(first, second);
//! assert!([a, b].contains(&second));
//! ```

mod avg_vruntime;
mod balance;
mod check;
mod config;
mod cpumap;
mod delay;
mod entity;
mod features;
mod nohz;
mod pick;
mod place;
mod preempt;
mod runqueue;
mod select;
mod tree;
pub mod vtime;
mod weight;

pub use balance::{
    ActivePush, BALANCE_INTERVAL, Candidate, IMBALANCE_PCT, Imbalance, LoadView, MIGRATION_COST,
    MIGRATION_COST_ALWAYS_HOT, MigrateEnv, Migration, PullReason, asym_active_balance,
    cache_nice_tries, can_migrate, imbalance_pct, may_active_push, moved, newidle_imbalance,
    newidle_imbalance_domains, periodic_imbalance, periodic_imbalance_domains, task_hot,
};
pub use config::{NORMALIZED_BASE_SLICE, RqConfig, TunableScaling, scaled_base_slice};
pub use cpumap::{CpuMap, MapLevel};
pub use delay::{DequeueKind, Dequeued};
pub use entity::{MAX_CUSTOM_SLICE, MIN_CUSTOM_SLICE, SchedEntity};
pub use features::{Feature, Features};
pub use nohz::nohz_kick_target;
pub use pick::Pick;
pub use place::EnqueueKind;
pub use preempt::{WakeFlags, Wakeup};
pub use runqueue::{Handle, RunQueue};
pub use select::{
    CpuView, DelayedWake, DelayedWakeView, Placement, WakeCtx, curr_protection_left, delayed_wake,
    idle_in_llc, select_task_rq, select_task_rq_fair, sis_util_scan, ttwu_queue_cond,
};
pub use weight::{
    MAX_NICE, MIN_NICE, NICE_0_LOAD, SCHED_FIXEDPOINT_SHIFT, SCHED_PRIO_TO_WEIGHT,
    SCHED_PRIO_TO_WMULT, calc_delta_fair, clamp_nice, inv_weight_of_nice, weight_of_nice,
};
