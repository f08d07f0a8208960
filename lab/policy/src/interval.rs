//! When each domain level of a CPU runs its periodic balance (the kernel's
//! `sd->balance_interval` and `sd->last_balance`, `get_sd_balance_interval`, the due test of
//! `sched_balance_domains`, and `should_we_balance`), so that a busy CPU balances a domain of
//! `w` CPUs every `w` ms × `busy_factor` (16), not at every tick, and only one CPU of each
//! group does.
//!
//! A driver keeps one [`LevelBalance`] per level of each CPU and, from the CPU's tick, walks
//! the levels bottom-up: a level that is [`LevelBalance::due`] balances if
//! [`should_we_balance`] says this CPU is the one of its group to do it (else the walk stops
//! there, the kernel's `continue_balancing = 0`), and records the attempt's outcome with
//! [`LevelBalance::after`], which sets the next interval.

use super::balance::LbOutcome;
use super::cpumap::{CpuMap, DomainParams};

/// The kernel's `MAX_PINNED_INTERVAL` (512 ms): how far an all-pinned domain's
/// `balance_interval` may double, past its `max_interval`.
pub const MAX_PINNED_INTERVAL: u64 = 512_000_000;

/// The kernel's `max_load_balance_interval` for `nr_cpus` CPUs: `HZ * num_online_cpus / 10`
/// jiffies, 100 ms per CPU, the most any interval is stretched to.
pub fn max_load_balance_interval(nr_cpus: usize) -> u64 {
    (nr_cpus.max(1) as u64).saturating_mul(100_000_000)
}

/// The periodic-balance state of one CPU's domain at one level (ns on the driver's clock).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LevelBalance {
    /// `sd->balance_interval`: from `min_interval`, doubled by each attempt that finds the
    /// domain balanced (up to `max_interval`) or all pinned (up to [`MAX_PINNED_INTERVAL`]),
    /// back to `min_interval` after one that finds an imbalance.
    pub interval: u64,
    /// `sd->last_balance`: when the level last balanced (or the state was made).
    pub last: u64,
}

impl LevelBalance {
    /// The state `sd_init` gives a domain with parameters `p`, made at `now`: the first
    /// balance is an interval away.
    pub fn new(p: &DomainParams, now: u64) -> LevelBalance {
        LevelBalance {
            interval: p.balance_interval_ns,
            last: now,
        }
    }

    /// `get_sd_balance_interval`: the interval, times `busy_factor` on a `busy` CPU, at
    /// most [`max_load_balance_interval`] of the machine's `nr_cpus` and at least 1 ms (a
    /// jiffy).
    ///
    /// ```
    /// use lagom_policy::{LevelBalance, LevelFlags, MapLevel};
    /// // A 2-CPU domain: 2 ms idle, 32 ms busy.
    /// let p = MapLevel { name: "MC", flags: LevelFlags::MC, spans: vec![0..2] }.params(2);
    /// let lb = LevelBalance::new(&p, 0);
    /// assert_eq!(lb.effective(&p, false, 2), 2_000_000);
    /// assert_eq!(lb.effective(&p, true, 2), 32_000_000);
    /// ```
    pub fn effective(&self, p: &DomainParams, busy: bool, nr_cpus: usize) -> u64 {
        let factor = if busy { u64::from(p.busy_factor) } else { 1 };
        self.interval
            .saturating_mul(factor)
            .clamp(1_000_000, max_load_balance_interval(nr_cpus))
    }

    /// When the level is next due (`last_balance + interval`).
    pub fn next(&self, p: &DomainParams, busy: bool, nr_cpus: usize) -> u64 {
        self.last.saturating_add(self.effective(p, busy, nr_cpus))
    }

    /// Whether the level is due at `now` (`time_after_eq(jiffies, last_balance + interval)`).
    pub fn due(&self, p: &DomainParams, busy: bool, nr_cpus: usize, now: u64) -> bool {
        now >= self.next(p, busy, nr_cpus)
    }

    /// After a periodic attempt at this level at `now` that ended in `outcome`
    /// (`sched_balance_rq`'s interval tuning; the newly idle balance leaves the interval
    /// alone): an imbalance found resets the interval to `min_interval`; a balanced domain
    /// (or a CPU that was not the one to balance, [`should_we_balance`]) doubles it up to
    /// `max_interval`, an all-pinned one up to [`MAX_PINNED_INTERVAL`]. `last` becomes `now`.
    ///
    /// ```
    /// use lagom_policy::{LbOutcome, LevelBalance, LevelFlags, MapLevel};
    /// let p = MapLevel { name: "MC", flags: LevelFlags::MC, spans: vec![0..2] }.params(2);
    /// let mut lb = LevelBalance::new(&p, 0);
    /// lb.after(&p, LbOutcome::Balanced, 40_000_000);
    /// assert_eq!((lb.interval, lb.last), (4_000_000, 40_000_000));
    /// lb.after(&p, LbOutcome::Balanced, 80_000_000);
    /// assert_eq!(lb.interval, 4_000_000, "max_interval");
    /// lb.after(&p, LbOutcome::AllPinned, 90_000_000);
    /// assert_eq!(lb.interval, 8_000_000, "all pinned: up to 512 ms");
    /// lb.after(&p, LbOutcome::Failed, 99_000_000);
    /// assert_eq!(lb.interval, 2_000_000, "unbalanced: min_interval");
    /// ```
    pub fn after(&mut self, p: &DomainParams, outcome: LbOutcome, now: u64) {
        match outcome {
            LbOutcome::Moved | LbOutcome::Failed => self.interval = p.min_interval_ns,
            LbOutcome::Balanced => {
                if self.interval < p.max_interval_ns {
                    self.interval *= 2;
                }
            }
            LbOutcome::AllPinned => {
                if self.interval < MAX_PINNED_INTERVAL || self.interval < p.max_interval_ns {
                    self.interval *= 2;
                }
            }
        }
        self.last = now;
    }
}

/// `should_we_balance` for the periodic balance of the busy CPU `me` at `level` of `map`,
/// with `idle` saying which CPUs are idle: only one CPU of `me`'s group (the span of the
/// level below, `CpuMap::group_of`) balances the domain for it — its first idle CPU whose
/// core is idle (at levels above SMT), else its first idle CPU, else its first CPU. A busy
/// CPU therefore balances a level only when no CPU of its group is idle and it is the
/// group's first; at the bottom level every CPU is its own group.
///
/// ```
/// use lagom_policy::{CpuMap, LevelFlags, MapLevel, should_we_balance};
/// let map = CpuMap::new(
///     vec![0; 4],
///     vec![
///         MapLevel { name: "MC", flags: LevelFlags::MC, spans: vec![0..2, 2..4] },
///         MapLevel { name: "PKG", flags: LevelFlags::PKG, spans: vec![0..4] },
///     ],
/// )
/// .unwrap();
/// let busy = |_: usize| false;
/// assert!(should_we_balance(&map, 0, 1, busy), "its own group at the bottom");
/// assert!(should_we_balance(&map, 1, 0, busy), "the first CPU of its LLC");
/// assert!(!should_we_balance(&map, 1, 1, busy), "CPU 0 balances for the LLC");
/// assert!(!should_we_balance(&map, 1, 0, |i| i == 1), "CPU 1 is idle: it balances");
/// ```
pub fn should_we_balance(
    map: &CpuMap,
    level: usize,
    me: usize,
    idle: impl Fn(usize) -> bool,
) -> bool {
    let group = map.group_of(level, me);
    let smt_level = map.levels()[level].flags.share_cpucapacity;
    let mut idle_smt = None;
    for cpu in group.clone() {
        if !idle(cpu) {
            continue;
        }
        if !smt_level && !map.smt_siblings(cpu).all(&idle) {
            idle_smt.get_or_insert(cpu);
            continue;
        }
        return cpu == me;
    }
    match idle_smt {
        Some(cpu) => cpu == me,
        None => group.start == me,
    }
}
