//! [`WakeFlags`]: the kernel's `wake_flags` (`WF_*`), one type for every wakeup path of both
//! drivers: what kind of wakeup it is (a fork, a wakeup), what the waker says (it is about
//! to sleep), and what happened on the way (CPU selection ran, the task moved).

use core::ops::{BitOr, BitOrAssign};

/// The kernel's `wake_flags` (`WF_*`, with the kernel's values), a small bitset, carried
/// from the waker through CPU selection ([`WakeCtx::flags`](crate::WakeCtx)) to the
/// wakeup-preemption check ([`RunQueue::wakeup_preempt`](crate::RunQueue::wakeup_preempt)).
///
/// ```
/// use lagom_policy::WakeFlags;
/// let wf = WakeFlags::TTWU | WakeFlags::SYNC;
/// assert!(wf.contains(WakeFlags::SYNC));
/// assert!(!wf.contains(WakeFlags::FORK));
/// assert_eq!(wf.without(WakeFlags::SYNC), WakeFlags::TTWU);
/// assert_eq!(WakeFlags::from_bits(wf.bits()), wf);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WakeFlags(u32);

impl WakeFlags {
    /// No flag: a task made runnable by the scheduler itself (a balancer's move).
    pub const NONE: WakeFlags = WakeFlags(0);
    /// The wakee has just exec'd (`WF_EXEC`). lagom has no exec: never set.
    pub const EXEC: WakeFlags = WakeFlags(0x02);
    /// The wakee is a new child (`WF_FORK`, `wake_up_new_task`): its placement is free and it
    /// preempts only with a shorter slice.
    pub const FORK: WakeFlags = WakeFlags(0x04);
    /// A wakeup of a task that slept (`WF_TTWU`, `try_to_wake_up`).
    pub const TTWU: WakeFlags = WakeFlags(0x08);
    /// The waker is about to sleep (`WF_SYNC`), so the wakee may take its CPU: sync
    /// `wake_affine`, and with NEXT_BUDDY the preemption of the waker (`preempt_sync`).
    pub const SYNC: WakeFlags = WakeFlags(0x10);
    /// The wakee was migrated by this wakeup (`WF_MIGRATED`): the CPU chosen differs from
    /// the task's last. Its activation is an `ENQUEUE_MIGRATED` enqueue
    /// ([`EnqueueFlags::of_wake`](crate::EnqueueFlags::of_wake)).
    pub const MIGRATED: WakeFlags = WakeFlags(0x20);
    /// Prefer the waker's CPU for the wakee (`WF_CURRENT_CPU`). Not set by lagom yet.
    pub const CURRENT_CPU: WakeFlags = WakeFlags(0x40);
    /// CPU selection ran for this wakeup (`WF_RQ_SELECTED`, added by `select_task_rq` when
    /// the task may run on more than one CPU; `preempt_sync` reads it).
    pub const RQ_SELECTED: WakeFlags = WakeFlags(0x80);

    /// The flags of the kernel's bits `bits` (any bits are kept as given).
    pub const fn from_bits(bits: u32) -> WakeFlags {
        WakeFlags(bits)
    }

    /// The raw bits (kernel values).
    pub const fn bits(self) -> u32 {
        self.0
    }

    /// Whether every flag of `other` is set.
    pub const fn contains(self, other: WakeFlags) -> bool {
        self.0 & other.0 == other.0
    }

    /// These flags without those of `other`.
    pub const fn without(self, other: WakeFlags) -> WakeFlags {
        WakeFlags(self.0 & !other.0)
    }
}

impl BitOr for WakeFlags {
    type Output = WakeFlags;
    fn bitor(self, rhs: WakeFlags) -> WakeFlags {
        WakeFlags(self.0 | rhs.0)
    }
}

impl BitOrAssign for WakeFlags {
    fn bitor_assign(&mut self, rhs: WakeFlags) {
        self.0 |= rhs.0;
    }
}

/// Which path activates a task on a runqueue ([`activation_flags`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActivatePath {
    /// The waker activates the task itself, on its own runqueue or under the target's lock
    /// (`ttwu_queue` → `ttwu_do_activate` with the wakeup's flags).
    Direct,
    /// The target activates it from its wakelist (`sched_ttwu_pending`): only whether the
    /// wakeup migrated the task travels with the entry (`sched_remote_wakeup`).
    Wakelist,
    /// The task was still queued (delayed, or not yet switched out) and is woken where it
    /// is (`ttwu_runnable`'s `wakeup_preempt`): no CPU selection ran, nothing migrated.
    RunnableInPlace,
    /// A new task (`wake_up_new_task`).
    Fork,
    /// A balancer moved it (`attach_task`): no wakeup at all.
    Attach,
}

/// The flags an activation by `path` passes to the wakeup-preemption check (and, through
/// [`EnqueueFlags::of_wake`](crate::EnqueueFlags::of_wake), to the enqueue), from the flags
/// `wf` the wakeup gathered on its way (`WF_TTWU`, the waker's `WF_SYNC`, `WF_RQ_SELECTED`
/// when CPU selection ran, `WF_MIGRATED` when it chose another CPU; `WF_FORK` and
/// `WF_RQ_SELECTED` for a new task). The kernel's rule (Linux v7.1, `kernel/sched/core.c`):
///
/// | path | flags |
/// |---|---|
/// | `Direct` | all of `wf` |
/// | `Wakelist` | `WF_MIGRATED` if set, nothing else (`sched_ttwu_pending`) |
/// | `RunnableInPlace` | `WF_TTWU` and `WF_SYNC` (`ttwu_runnable` runs before selection) |
/// | `Fork` | `WF_FORK` and `WF_RQ_SELECTED` |
/// | `Attach` | none (`attach_task`'s `wakeup_preempt(rq, p, 0)`) |
///
/// Both drivers call it at every activation, so a flag never reaches a path the kernel
/// drops it on (the waker's `WF_SYNC` on a wakelist activation).
///
/// ```
/// use lagom_policy::{ActivatePath, WakeFlags, activation_flags};
/// let wf = WakeFlags::TTWU | WakeFlags::SYNC | WakeFlags::RQ_SELECTED | WakeFlags::MIGRATED;
/// assert_eq!(activation_flags(ActivatePath::Direct, wf), wf);
/// assert_eq!(activation_flags(ActivatePath::Wakelist, wf), WakeFlags::MIGRATED);
/// assert_eq!(
///     activation_flags(ActivatePath::RunnableInPlace, WakeFlags::TTWU | WakeFlags::SYNC),
///     WakeFlags::TTWU | WakeFlags::SYNC,
/// );
/// assert_eq!(activation_flags(ActivatePath::Attach, wf), WakeFlags::NONE);
/// ```
pub const fn activation_flags(path: ActivatePath, wf: WakeFlags) -> WakeFlags {
    let keep = match path {
        ActivatePath::Direct => !0,
        ActivatePath::Wakelist => WakeFlags::MIGRATED.0,
        ActivatePath::RunnableInPlace => WakeFlags::TTWU.0 | WakeFlags::SYNC.0,
        ActivatePath::Fork => WakeFlags::FORK.0 | WakeFlags::RQ_SELECTED.0,
        ActivatePath::Attach => 0,
    };
    WakeFlags(wf.0 & keep)
}
