//! Who wakes whom (`record_wakee`, `wake_wide`): a task that wakes many different tasks, or a
//! wakee woken by many, should not pull its wakees onto its own CPU.
//!
//! Every task counts its *wakee flips*: how often the task it wakes differs from the one it
//! woke last (not how often it wakes), halved once a second so that old history fades. A
//! wakeup is *wide* when both the waker and the wakee flip at least as often as the waker's
//! LLC has CPUs, and the busier of the two at least that many times more than the other: a
//! 1:N server thread waking its N workers (schbench's message threads), whose wakees would
//! otherwise all be stacked on the server's CPU by `wake_affine`. A wide wakeup skips
//! `wake_affine` and looks for an idle CPU around the wakee's previous CPU instead.
//!
//! The state is plain data that each driver keeps per task ([`WakeeState`]); the waker's
//! is updated by [`select_task_rq`](crate::select_task_rq) when the fair class's selection
//! runs for a wakeup (`WF_TTWU`), and the wakee's flips are read from it.

/// The kernel's `1 s` decay period of the flips (`HZ` jiffies), in ns.
pub const WAKEE_FLIP_DECAY: u64 = 1_000_000_000;

/// One task's record of the tasks it wakes (`wakee_flips`, `wakee_flip_decay_ts`,
/// `last_wakee` of the kernel's `task_struct`).
///
/// ```
/// use lagom_policy::{WakeeState, record_wakee};
/// let mut w = WakeeState::default();
/// // A wakes B, B again, then C: two flips (a new wakee each time it changes).
/// for (wakee, now) in [(2, 10), (2, 20), (3, 30)] {
///     record_wakee(&mut w, wakee, now);
/// }
/// assert_eq!(w.flips, 2);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WakeeState {
    /// How often the task woke another task than the one before (`wakee_flips`), halved
    /// once per [`WAKEE_FLIP_DECAY`].
    pub flips: u32,
    /// When the flips were last halved (`wakee_flip_decay_ts`), ns on the driver's clock.
    pub decay_ts: u64,
    /// The task it woke last (`last_wakee`), by the driver's task id; 0 for none.
    pub last: u64,
}

/// `record_wakee`: the waker `w` wakes task `wakee` (a nonzero id) at `now`. If more than
/// [`WAKEE_FLIP_DECAY`] passed since the last decay, its flips are halved once (a waker
/// that wakes less than once per decay period never builds up many) and the decay restarts
/// now; if the wakee differs from the last one, it becomes the last one and the flips grow
/// by one.
///
/// ```
/// use lagom_policy::{WAKEE_FLIP_DECAY, WakeeState, record_wakee};
/// let mut w = WakeeState { flips: 9, decay_ts: 0, last: 5 };
/// record_wakee(&mut w, 5, WAKEE_FLIP_DECAY); // not more than the period: no decay
/// assert_eq!(w.flips, 9);
/// record_wakee(&mut w, 5, WAKEE_FLIP_DECAY + 1); // past it: halved once, same wakee
/// assert_eq!((w.flips, w.decay_ts), (4, WAKEE_FLIP_DECAY + 1));
/// ```
pub fn record_wakee(w: &mut WakeeState, wakee: u64, now: u64) {
    if now.saturating_sub(w.decay_ts) > WAKEE_FLIP_DECAY {
        w.flips >>= 1;
        w.decay_ts = now;
    }
    if w.last != wakee {
        w.last = wakee;
        w.flips = w.flips.saturating_add(1);
    }
}

/// `wake_wide`: whether a wakeup between a waker that flips `waker_flips` times and a wakee
/// that flips `wakee_flips` times is wide, on a waker whose LLC has `llc_size` CPUs
/// (`sd_llc_size`, the factor): the smaller count is at least the factor, and the larger at
/// least the factor times the smaller.
///
/// ```
/// use lagom_policy::wake_wide;
/// assert!(wake_wide(64, 8, 8));
/// assert!(!wake_wide(63, 8, 8), "63 < 8 · 8");
/// assert!(!wake_wide(16, 8, 8), "16 < 8 · 8");
/// assert!(!wake_wide(100, 7, 8), "the wakee flips fewer than 8 times");
/// assert!(wake_wide(8, 64, 8), "either side may be the busier");
/// ```
pub fn wake_wide(waker_flips: u32, wakee_flips: u32, llc_size: usize) -> bool {
    let (master, slave) = if waker_flips >= wakee_flips {
        (waker_flips, wakee_flips)
    } else {
        (wakee_flips, waker_flips)
    };
    let factor = u64::try_from(llc_size).unwrap_or(u64::MAX);
    let (master, slave) = (u64::from(master), u64::from(slave));
    slave >= factor && master >= slave.saturating_mul(factor)
}
