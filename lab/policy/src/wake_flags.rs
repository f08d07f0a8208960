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
    /// The wakee was migrated by this wakeup (`WF_MIGRATED`). Not set by lagom yet.
    pub const MIGRATED: WakeFlags = WakeFlags(0x20);
    /// Prefer the waker's CPU for the wakee (`WF_CURRENT_CPU`). Not set by lagom yet.
    pub const CURRENT_CPU: WakeFlags = WakeFlags(0x40);
    /// CPU selection ran for this wakeup (`WF_RQ_SELECTED`; `preempt_sync` reads it). Not
    /// set by lagom's wakeup paths yet.
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
