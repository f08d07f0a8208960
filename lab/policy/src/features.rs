//! The scheduler feature set: every disputed kernel behaviour as a named switch.
//!
//! Names are the kernel's `SCHED_FEAT` names (`kernel/sched/features.h`), so that an
//! experiment written for the kernel (`echo NO_DELAY_DEQUEUE > /sys/kernel/debug/sched/features`)
//! reads the same here: `"NO_DELAY_DEQUEUE"`. The defaults are those of **Linux v7.1** (the
//! mainline tag `v7.1`, the kernel lagom models), with these exceptions that the kernel does
//! not have in this form:
//!
//! * `TTWU_QUEUE_ON_CPU`, `TTWU_QUEUE_DELAYED`, `TTWU_QUEUE_DEFAULT` and `TTWU_DEQUEUE` come
//!   from Peter Zijlstra's RFC "sched: Try and address some recent-ish regressions" (v1 of
//!   2025-05-20, and the `TTWU_DEQUEUE` prototype posted in the same thread on 2025-06-16;
//!   never merged) and carry that RFC's code defaults: ON_CPU on, DELAYED off (the cover
//!   letter proposed on, v2 made it on), DEFAULT off, TTWU_DEQUEUE off (an experiment).
//! * `ITMT` stands for the kernel's `sched_itmt_enabled` sysctl (preferred-core scheduling),
//!   which is on wherever the platform publishes core rankings; off, no domain packs by
//!   priority (the kernel rebuilds its domains without `SD_ASYM_PACKING`).
//! * `REQUEUE_UPDATE_CURR` and `PREEMPT_SYNC_RUNTIME` (lagom's names, off by default: v7.1
//!   has neither) switch on two later changes of the kernel's own code, so that an experiment
//!   can compare the versions: mainline commit 333238da9a19 ("sched: Update time before
//!   requeueing delayed entities", v7.2), and the fix posted in November 2026 for
//!   `preempt_sync`'s dead threshold (against v7.4-rc1).
//! * `WAKE_PREFER_RANK`, `DELAYED_WAKE_IDLE` and `ACTIVE_BALANCE_RECHECK` are lagom's own (off
//!   by default): the first lets CPU priorities break ties between idle CPUs at wakeup, the
//!   second is lagom's fix for the part of the preferred-core stall (with ITMT and
//!   DELAY_DEQUEUE, a woken task waits a whole burst behind another on the preferred CPU while
//!   other allowed CPUs idle) that DELAY_DEQUEUE makes, the third for the part that ITMT's
//!   active balance makes (a task moved to a preferred CPU that a wakeup made busy meanwhile).
//!
//! The set parses from and prints to `"NAME,NO_NAME,…"`; parsing applies the names on top of
//! the defaults, in order.

use core::fmt;
use core::str::FromStr;

use alloc::string::{String, ToString};

/// One scheduler feature, by its kernel name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Feature {
    /// Re-joining entities keep the lag they left with.
    PlaceLag,
    /// New tasks start with half a request.
    PlaceDeadlineInitial,
    /// Non-sleep dequeues (migration, save/restore) keep the relative deadline.
    PlaceRelDeadline,
    /// The current entity is protected until its deadline, or one minimum slice.
    RunToParity,
    /// A waking entity with a shorter slice may preempt a protected current.
    PreemptShort,
    /// Wakeup preemption sets the woken entity as next buddy.
    NextBuddy,
    /// Pick honours an eligible next buddy.
    PickBuddy,
    /// Buddies that are cache hot are not migrated by load balancing.
    CacheHotBuddy,
    /// A sleeping entity that is not eligible stays queued as delayed.
    DelayDequeue,
    /// A delayed entity's lag is clipped to at most zero when it leaves.
    DelayZero,
    /// Woken entities may preempt the current one at all.
    WakeupPreemption,
    /// Remote wakeups go through the target's wakelist.
    TtwuQueue,
    /// A wakee still on a CPU is handed to that CPU's wakelist (the RFC).
    TtwuQueueOnCpu,
    /// Delayed wakees on another CPU are handed to that CPU's wakelist, whose owner finishes
    /// the delayed dequeue and selects a CPU for the task with `WF_TTWU` alone (the waker's
    /// CPU standing in for `this` CPU), activating it there or forwarding it with
    /// `WF_MIGRATED`: the RFC's `ttwu_delayed` as its v2 (12/12, 2025-07-02) has it. v1's
    /// 5/5 had the owner requeue the task in place instead; lagom models v2's behaviour, with
    /// v1's default (off; v2 turned it on).
    TtwuQueueDelayed,
    /// The wakelist is used even towards a busy cache-sharing CPU (the RFC).
    TtwuQueueDefault,
    /// A delayed wakee woken in place is dequeued instead and goes through CPU selection like
    /// a sleeper (the prototype posted in the RFC's thread on 2025-06-16, in
    /// `ttwu_runnable`; with TTWU_QUEUE_DELAYED, lagom's owner reselects as v2 does rather
    /// than activating the task where it is, as v1 with the prototype would).
    TtwuDequeue,
    /// The idle-CPU scan is bounded by the LLC's utilisation.
    SisUtil,
    /// Preferred-core (ITMT / AMD prefcore) rankings are used.
    Itmt,
    /// lagom's own: wakeup selection prefers the higher-ranked of equally good idle CPUs
    /// (mainline ignores priorities when it wakes a task).
    WakePreferRank,
    /// lagom's own answer to the preferred-core stall: a delayed wakee is requeued in place
    /// only if it is cache hot or its CPU would run it next; otherwise, when an allowed CPU is
    /// idle, its delayed dequeue is finished and it is woken through CPU selection, like a
    /// sleeper (the book: `docs/src/design/features.md`).
    DelayedWakeIdle,
    /// lagom's own, the other half of the fix for the preferred-core stall: an ITMT active
    /// balance is carried out only if the CPU that asked for the task is still idle (runs
    /// nothing, has nothing queued or on its wakelist) when the task reaches its schedule point
    /// and again at the move; the kernel's stopper moves it regardless, so that a task woken
    /// onto that CPU meanwhile shares it with the moved one (the book:
    /// `docs/src/design/features.md`).
    ActiveBalanceRecheck,
    /// Mainline's 333238da9a19 (v7.2, lagom's name): the in-place requeue of a woken delayed
    /// entity accounts the running entity first (`update_curr`), so the lag it saves again is
    /// measured against an up-to-date average. v7.1 does not (off).
    RequeueUpdateCurr,
    /// The fix posted for `preempt_sync` (November 2026, lagom's name): a WF_SYNC wakee with
    /// NEXT_BUDDY may preempt the waker once the waker has run the migration cost (a quarter
    /// of it after CPU selection) since it was picked (`sum_exec_runtime −
    /// prev_sum_exec_runtime`). v7.1 measures `now − exec_start` right after `update_curr`
    /// set `exec_start = now`: always 0, so the rule never preempts unless the migration
    /// cost is 0 (off).
    PreemptSyncRuntime,
}

const COUNT: usize = 23;

impl Feature {
    /// Every feature, in the order of [`Features::NAMES`].
    pub const ALL: [Feature; COUNT] = [
        Feature::PlaceLag,
        Feature::PlaceDeadlineInitial,
        Feature::PlaceRelDeadline,
        Feature::RunToParity,
        Feature::PreemptShort,
        Feature::NextBuddy,
        Feature::PickBuddy,
        Feature::CacheHotBuddy,
        Feature::DelayDequeue,
        Feature::DelayZero,
        Feature::WakeupPreemption,
        Feature::TtwuQueue,
        Feature::TtwuQueueOnCpu,
        Feature::TtwuQueueDelayed,
        Feature::TtwuQueueDefault,
        Feature::TtwuDequeue,
        Feature::SisUtil,
        Feature::Itmt,
        Feature::WakePreferRank,
        Feature::DelayedWakeIdle,
        Feature::ActiveBalanceRecheck,
        Feature::RequeueUpdateCurr,
        Feature::PreemptSyncRuntime,
    ];

    /// The kernel's name of the feature, e.g. `"DELAY_DEQUEUE"`.
    pub const fn name(self) -> &'static str {
        Features::NAMES[self as usize]
    }

    /// Looks a feature up by its exact (upper-case) name.
    pub fn from_name(name: &str) -> Option<Feature> {
        Features::NAMES
            .iter()
            .position(|n| *n == name)
            .map(|i| Feature::ALL[i])
    }

    const fn bit(self) -> u32 {
        1 << self as u32
    }
}

/// A set of enabled scheduler features (a copyable bitset).
///
/// ```
/// use lagom_policy::{Feature, Features};
/// let f: Features = "NO_DELAY_DEQUEUE,NEXT_BUDDY".parse().unwrap();
/// assert!(!f.is_enabled(Feature::DelayDequeue));
/// assert!(f.is_enabled(Feature::NextBuddy));
/// assert_eq!(f.to_string().parse::<Features>().unwrap(), f);
/// assert!("NO_SUCH_THING".parse::<Features>().is_err());
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Features(u32);

impl Features {
    /// Every valid feature name, in the kernel's order (lagom's `ITMT`, `WAKE_PREFER_RANK`,
    /// `DELAYED_WAKE_IDLE`, `ACTIVE_BALANCE_RECHECK`, `REQUEUE_UPDATE_CURR` and
    /// `PREEMPT_SYNC_RUNTIME` last).
    pub const NAMES: &'static [&'static str] = &[
        "PLACE_LAG",
        "PLACE_DEADLINE_INITIAL",
        "PLACE_REL_DEADLINE",
        "RUN_TO_PARITY",
        "PREEMPT_SHORT",
        "NEXT_BUDDY",
        "PICK_BUDDY",
        "CACHE_HOT_BUDDY",
        "DELAY_DEQUEUE",
        "DELAY_ZERO",
        "WAKEUP_PREEMPTION",
        "TTWU_QUEUE",
        "TTWU_QUEUE_ON_CPU",
        "TTWU_QUEUE_DELAYED",
        "TTWU_QUEUE_DEFAULT",
        "TTWU_DEQUEUE",
        "SIS_UTIL",
        "ITMT",
        "WAKE_PREFER_RANK",
        "DELAYED_WAKE_IDLE",
        "ACTIVE_BALANCE_RECHECK",
        "REQUEUE_UPDATE_CURR",
        "PREEMPT_SYNC_RUNTIME",
    ];

    /// The defaults (see the module documentation for which kernel and which RFC).
    pub const DEFAULT: Features = Features(
        Feature::PlaceLag.bit()
            | Feature::PlaceDeadlineInitial.bit()
            | Feature::PlaceRelDeadline.bit()
            | Feature::RunToParity.bit()
            | Feature::PreemptShort.bit()
            | Feature::PickBuddy.bit()
            | Feature::CacheHotBuddy.bit()
            | Feature::DelayDequeue.bit()
            | Feature::DelayZero.bit()
            | Feature::WakeupPreemption.bit()
            | Feature::TtwuQueue.bit()
            | Feature::TtwuQueueOnCpu.bit()
            | Feature::SisUtil.bit()
            | Feature::Itmt.bit(),
    );

    /// The empty set: every feature off.
    pub const NONE: Features = Features(0);

    /// Whether `f` is on.
    #[inline]
    pub const fn is_enabled(self, f: Feature) -> bool {
        self.0 & f.bit() != 0
    }

    /// Turns `f` on or off.
    #[inline]
    pub fn set(&mut self, f: Feature, on: bool) {
        if on {
            self.0 |= f.bit();
        } else {
            self.0 &= !f.bit();
        }
    }

    /// A copy with `f` turned on or off.
    #[must_use]
    pub const fn with(self, f: Feature, on: bool) -> Features {
        if on {
            Features(self.0 | f.bit())
        } else {
            Features(self.0 & !f.bit())
        }
    }

    /// Applies `"NAME,NO_NAME,…"` on top of `self`, left to right. Blanks around names and
    /// empty items are ignored; names are case-sensitive, as in the kernel. The item
    /// `default` (lower case, as the examples' JSON prints an unchanged set) stands for
    /// [`Features::DEFAULT`]: the names after it apply on top of the defaults.
    ///
    /// ```
    /// use lagom_policy::{Feature, Features};
    /// assert_eq!(Features::parse("default").unwrap(), Features::DEFAULT);
    /// let f = Features::NONE.apply("default,NO_ITMT").unwrap();
    /// assert_eq!(f, Features::DEFAULT.with(Feature::Itmt, false));
    /// assert!(Features::parse("DEFAULT").is_err(), "names are case-sensitive");
    /// ```
    pub fn apply(mut self, spec: &str) -> Result<Features, UnknownFeature> {
        for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            if item == "default" {
                self = Features::DEFAULT;
                continue;
            }
            let (name, on) = match item.strip_prefix("NO_") {
                Some(rest) => (rest, false),
                None => (item, true),
            };
            let f = Feature::from_name(name).ok_or_else(|| UnknownFeature {
                name: name.to_string(),
                valid: Features::NAMES,
            })?;
            self.set(f, on);
        }
        Ok(self)
    }

    /// Parses `"NAME,NO_NAME,…"` on top of [`Features::DEFAULT`].
    pub fn parse(spec: &str) -> Result<Features, UnknownFeature> {
        Features::DEFAULT.apply(spec)
    }
}

impl Default for Features {
    fn default() -> Self {
        Features::DEFAULT
    }
}

impl FromStr for Features {
    type Err = UnknownFeature;
    fn from_str(s: &str) -> Result<Self, UnknownFeature> {
        Features::parse(s)
    }
}

/// Prints every feature, `NAME` or `NO_NAME`, comma-separated, in [`Features::NAMES`] order;
/// the output parses back to the same set.
impl fmt::Display for Features {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, feat) in Feature::ALL.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            if !self.is_enabled(*feat) {
                f.write_str("NO_")?;
            }
            f.write_str(feat.name())?;
        }
        Ok(())
    }
}

impl fmt::Debug for Features {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Features({self})")
    }
}

/// A feature string named a feature that does not exist ([`Features::apply`]).
///
/// ```
/// let err = lagom_policy::Features::parse("NO_SUCH_THING").unwrap_err();
/// assert_eq!(err.name, "SUCH_THING");
/// assert!(err.to_string().contains("valid names are PLACE_LAG, "));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownFeature {
    /// The name as given (without any `NO_` prefix).
    pub name: String,
    /// Every valid feature name, in the kernel's order ([`Features::NAMES`]).
    pub valid: &'static [&'static str],
}

impl fmt::Display for UnknownFeature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The name as given, on one line and of readable size: control characters escaped
        // (a spec read from a file may hold a line break), cut after 64 characters.
        f.write_str("unknown scheduler feature `")?;
        for (i, c) in self.name.chars().enumerate() {
            if i == 64 {
                write!(f, "… ({} bytes in all)", self.name.len())?;
                break;
            }
            if c.is_control() {
                write!(f, "{}", c.escape_debug())?;
            } else {
                write!(f, "{c}")?;
            }
        }
        f.write_str("`; valid names are ")?;
        for (i, v) in self.valid.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            f.write_str(v)?;
        }
        f.write_str(" (prefix a name with NO_ to turn it off; `default` stands for the defaults)")
    }
}

impl core::error::Error for UnknownFeature {}
