//! Workers that speak for their tasks ([`Builder::host_hints`](crate::runtime::Builder::host_hints)):
//! the worker thread's own kernel scheduling attributes follow what the tasks it carries
//! need, so that on a shared machine the kernel treats the worker as it would treat those
//! tasks as threads.
//!
//! - **The slice.** The worker's `sched_runtime` (a fair thread's custom slice, Linux 6.12
//!   and later) is the smallest slice among its runnable tasks, the running one included
//!   (the policy's `RunQueue::min_slice`): what the kernel itself gives a group entity
//!   (`cfs_rq_min_slice`). Where every runnable task has the runtime's base slice it is 0,
//!   the kernel's default. A task with a 100 µs slice thus makes its worker a 100 µs thread
//!   while it is runnable, and only then.
//! - **The nice.** The worker's nice follows the weight it carries — the load of its
//!   runqueue, the sum of its runnable tasks' weights, as N kernel threads would weigh N
//!   times one — averaged over the last switches (each switch's sample counts 1/256, so a
//!   task that wakes and sleeps at every other switch moves it little) and rounded to the
//!   nearest nice level; it moves only when the average leaves the band between the weights
//!   two levels either side (about ×0.64 … ×1.56), so that it does not flap: a park/unpark
//!   ping-pong whose parked task sometimes stays queued (a delayed dequeue) swings the
//!   average by more than one level's 25 %.
//!
//! A worker passes them on with one `sched_setattr` **only when they change**, at the end of
//! a switch into a task (`finish_task_switch`): a switch that changes neither costs two
//! relaxed loads and a few comparisons. An idle worker asks for nothing (it sleeps).
//!
//! **Where the kernel refuses.** At its start each worker probes what the kernel lets it
//! say, and records each refusal once as a note ([`Stats::host_hints`](crate::runtime::Stats)):
//! a thread whose policy is not `SCHED_OTHER`/`SCHED_BATCH` (the user's choice, left alone);
//! a kernel that keeps no custom slice of a fair thread (before 6.12: `sched_runtime` is
//! taken and ignored, so it is read back); a nice that may not come back down (lowering it
//! needs `CAP_SYS_NICE` or an `RLIMIT_NICE` of at least `20 - nice`: the worker never raises
//! its nice above the start where it could not return, nor lowers it below what the limit
//! allows). A call that fails later turns the worker's hints off and records why.
//!
//! Differences from the kernel (also in the kernel map): the kernel gives a task group a
//! fixed weight (`cpu.weight`, or an autogroup's nice) and divides it among CPUs by load
//! (`calc_group_shares`); a worker thread is no group to the kernel, so it asks for the
//! weight its tasks would have as threads, within the nice range the kernel allows it.

use core::cell::Cell;

use crate::locking::atomic::{AtomicU32, Ordering};
use crate::sys::sched as os;
use lagom_policy::{MAX_CUSTOM_SLICE, MAX_NICE, MIN_CUSTOM_SLICE, MIN_NICE, weight_of_nice};

/// What a worker thread asks of the kernel: its nice and its custom slice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Attr {
    /// The thread's nice, −20 … 19.
    pub(crate) nice: i32,
    /// `sched_runtime` in ns: 0 for the kernel's default slice.
    pub(crate) slice: u64,
}

/// What the kernel lets a worker say ([`probe`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Limits {
    /// The lowest nice the worker may set, and come back to from any higher one.
    pub(crate) lo: i32,
    /// The highest nice the worker may set (its start, where it could not come back).
    pub(crate) hi: i32,
    /// Whether the kernel keeps a fair thread's custom slice.
    pub(crate) slices: bool,
    /// The runtime's base slice (ns): a runqueue whose smallest slice is this asks for the
    /// kernel's default.
    pub(crate) base_slice: u64,
}

/// The shift of the weight average: each switch's sample counts 1/256.
const AVG_SHIFT: u32 = 8;

/// The hysteresis of the nice, in levels: the nice stays while the average weight lies
/// strictly between the weights this many levels either side of it.
const NICE_HYSTERESIS: i32 = 2;

/// The average weight after one more sample `load` (both in the policy's weight units).
pub(crate) fn average(avg: u64, load: u64) -> u64 {
    avg - (avg >> AVG_SHIFT) + (load >> AVG_SHIFT)
}

/// The nice level whose weight is nearest to `weight` by ratio (the table is geometric, so
/// the boundary between two levels is their weights' geometric mean); 19 below the smallest.
pub(crate) fn nice_for_weight(weight: u64) -> i32 {
    let w = u128::from(weight);
    for n in MIN_NICE..MAX_NICE {
        let (a, b) = (
            u128::from(weight_of_nice(n)),
            u128::from(weight_of_nice(n + 1)),
        );
        if w * w >= a * b {
            return n;
        }
    }
    MAX_NICE
}

/// The decision, pure: given what the thread has now (`applied`), the worker's average load
/// `avg_load` and its runqueue's smallest slice `min_slice` (`u64::MAX`: nothing runnable),
/// the attributes to ask for, or `None` when they are the ones it has (no call).
///
/// The nice stays while the average lies strictly between the weights of the levels
/// [`NICE_HYSTERESIS`] either side of it; outside that band it moves to
/// [`nice_for_weight`]. Both are kept within `lim`'s range. The slice is `min_slice`
/// clamped into the kernel's 0.1 … 100 ms, or 0 (the default) where it is the base slice,
/// nothing is runnable, or the kernel keeps no custom slice.
pub(crate) fn decide(applied: Attr, avg_load: u64, min_slice: u64, lim: &Limits) -> Option<Attr> {
    let n = applied.nice;
    let above = if n - NICE_HYSTERESIS >= MIN_NICE {
        weight_of_nice(n - NICE_HYSTERESIS)
    } else {
        u64::MAX
    };
    let below = if n + NICE_HYSTERESIS <= MAX_NICE {
        weight_of_nice(n + NICE_HYSTERESIS)
    } else {
        0
    };
    let nice = if avg_load > below && avg_load < above {
        n
    } else {
        nice_for_weight(avg_load)
    };
    let nice = nice.clamp(lim.lo, lim.hi);
    let slice = if !lim.slices || min_slice == u64::MAX || min_slice == lim.base_slice {
        0
    } else {
        min_slice.clamp(MIN_CUSTOM_SLICE, MAX_CUSTOM_SLICE)
    };
    let want = Attr { nice, slice };
    // Mutants: a call at every switch, and never a call.
    #[cfg(lagom_mutant = "host_attr_every_switch")]
    return Some(want);
    #[cfg(lagom_mutant = "host_attr_never")]
    return None;
    #[allow(unreachable_code)]
    (want != applied).then_some(want)
}

/// A note: the thread's attributes could not be read (`sched_getattr` failed).
const NOTE_NO_GETATTR: u32 = 1 << 0;
/// A note: the thread is not a fair thread.
const NOTE_POLICY: u32 = 1 << 1;
/// A note: the kernel keeps no custom slice.
const NOTE_NO_SLICE: u32 = 1 << 2;
/// A note: the nice may not come back down.
const NOTE_NO_NICE: u32 = 1 << 3;
/// A note: a call failed after the probe.
const NOTE_FAILED: u32 = 1 << 4;

/// The notes, by bit, in the words a reader of [`Stats`](crate::runtime::Stats) sees.
const NOTES: [(u32, &str); 5] = [
    (
        NOTE_NO_GETATTR,
        "sched_getattr failed (a kernel before 3.14, or a seccomp filter): workers pass \
         nothing on",
    ),
    (
        NOTE_POLICY,
        "the worker threads' policy is not SCHED_OTHER or SCHED_BATCH: left as it is",
    ),
    (
        NOTE_NO_SLICE,
        "this kernel keeps no custom slice for a SCHED_OTHER thread (needs Linux 6.12): \
         slices are not passed on",
    ),
    (
        NOTE_NO_NICE,
        "a raised nice could not be lowered again (needs CAP_SYS_NICE or RLIMIT_NICE): the \
         workers' nice stays as started",
    ),
    (
        NOTE_FAILED,
        "a sched_setattr failed after the start probe: that worker stopped passing hints on",
    ),
];

/// The notes recorded in `notes` (a bit set of `NOTE_*`), as text.
pub(crate) fn notes(bits: u32) -> impl Iterator<Item = &'static str> {
    NOTES
        .iter()
        .filter(move |(b, _)| bits & b != 0)
        .map(|(_, s)| *s)
}

/// One worker thread's hints: what it has told the kernel, and what it may.
pub(crate) struct HostHints {
    policy: u32,
    lim: Limits,
    applied: Cell<Attr>,
    avg: Cell<u64>,
    on: Cell<bool>,
}

impl HostHints {
    /// Probes what the kernel lets the calling thread say (module doc), recording each
    /// refusal in `notes`; `None` when there is nothing it may say. Leaves the thread's
    /// nice as it was and its slice at the kernel's default.
    pub(crate) fn probe(base_slice: u64, notes: &AtomicU32) -> Option<HostHints> {
        let note = |b| {
            notes.fetch_or(b, Ordering::Relaxed);
        };
        let Ok(start) = os::get() else {
            note(NOTE_NO_GETATTR);
            return None;
        };
        if !os::is_fair(start.policy) {
            note(NOTE_POLICY);
            return None;
        }
        let (p, n0) = (start.policy, start.nice);
        // The lowest nice this thread may set: all of them with the privilege; else what
        // RLIMIT_NICE allows, and if that is above the start, nothing but the start (a
        // raised nice could not come back).
        let (lo, hi) = match os::set(p, MIN_NICE, MIN_CUSTOM_SLICE) {
            Ok(()) => (MIN_NICE, MAX_NICE),
            Err(os::EPERM) => {
                let floor = 20 - os::nice_rlimit() as i32;
                if floor <= n0 {
                    (floor.max(MIN_NICE), MAX_NICE)
                } else {
                    note(NOTE_NO_NICE);
                    (n0, n0)
                }
            }
            Err(_) => {
                note(NOTE_FAILED);
                return None;
            }
        };
        if os::set(p, n0, MIN_CUSTOM_SLICE).is_err() {
            note(NOTE_FAILED);
            return None;
        }
        let slices = os::get().is_ok_and(|a| a.slice_ns == MIN_CUSTOM_SLICE);
        if !slices {
            note(NOTE_NO_SLICE);
        }
        if os::set(p, n0, 0).is_err() {
            note(NOTE_FAILED);
            return None;
        }
        if !slices && lo == hi {
            return None;
        }
        Some(HostHints {
            policy: p,
            lim: Limits {
                lo,
                hi,
                slices,
                base_slice,
            },
            applied: Cell::new(Attr { nice: n0, slice: 0 }),
            avg: Cell::new(weight_of_nice(n0)),
            on: Cell::new(true),
        })
    }

    /// A switch into a task has completed: passes on what changed (module doc). `load` and
    /// `min_slice` are the worker's runqueue as its last pick published them. Returns
    /// whether it called the kernel.
    pub(crate) fn switched(&self, load: u64, min_slice: u64, notes: &AtomicU32) -> bool {
        if !self.on.get() {
            return false;
        }
        let avg = average(self.avg.get(), load);
        self.avg.set(avg);
        let Some(want) = decide(self.applied.get(), avg, min_slice, &self.lim) else {
            return false;
        };
        match os::set(self.policy, want.nice, want.slice) {
            Ok(()) => self.applied.set(want),
            Err(_) => {
                notes.fetch_or(NOTE_FAILED, Ordering::Relaxed);
                self.on.set(false);
            }
        }
        true
    }
}

impl super::WorkerThread {
    /// The hook of `finish_task_switch`: with a task now running on this worker, passes on
    /// what changed of its runqueue's slice and weight (module doc). One branch with the
    /// hints off.
    #[inline]
    pub(crate) fn speak_for_tasks(&self) {
        let Some(h) = &self.host else { return };
        if self.curr.get().is_null() {
            return;
        }
        let w = self.worker();
        let (load, min_slice) = (
            w.load.load(Ordering::Relaxed),
            w.min_slice.load(Ordering::Relaxed),
        );
        if h.switched(load, min_slice, &self.shared.host_notes) {
            w.stats.inc_owned(&w.stats.host_attr_calls);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Attr, Limits, average, decide, nice_for_weight};
    use lagom_policy::{MIN_CUSTOM_SLICE, weight_of_nice};

    const BASE: u64 = 700_000;

    fn lim() -> Limits {
        Limits {
            lo: -20,
            hi: 19,
            slices: true,
            base_slice: BASE,
        }
    }

    fn at(nice: i32, slice: u64) -> Attr {
        Attr { nice, slice }
    }

    /// Every level's own weight maps to it; a weight between two levels goes to the nearer
    /// by ratio; beyond the table's ends, to its ends.
    #[test]
    fn nice_for_weight_is_the_nearest_level() {
        for n in -20..=19 {
            assert_eq!(nice_for_weight(weight_of_nice(n)), n);
        }
        assert_eq!(nice_for_weight(4 * weight_of_nice(0)), -6);
        assert_eq!(nice_for_weight(2 * weight_of_nice(0)), -3);
        assert_eq!(nice_for_weight(8 * weight_of_nice(10)), 1);
        assert_eq!(nice_for_weight(u64::MAX / 2), -20);
        assert_eq!(nice_for_weight(0), 19);
    }

    /// Nothing changed: no call, however often it is asked.
    #[test]
    fn an_unchanged_worker_makes_no_call() {
        let a = at(0, 0);
        for _ in 0..100 {
            assert_eq!(decide(a, weight_of_nice(0), BASE, &lim()), None);
        }
        let short = at(-6, MIN_CUSTOM_SLICE);
        assert_eq!(
            decide(short, 4 * weight_of_nice(0), MIN_CUSTOM_SLICE, &lim()),
            None
        );
    }

    /// A runnable task with a short slice makes the worker's slice short; when none is
    /// runnable the worker goes back to the kernel's default.
    #[test]
    fn the_slice_follows_the_smallest_runnable_one() {
        let w = weight_of_nice(0);
        assert_eq!(decide(at(0, 0), w, 100_000, &lim()), Some(at(0, 100_000)));
        assert_eq!(decide(at(0, 100_000), w, BASE, &lim()), Some(at(0, 0)));
        assert_eq!(decide(at(0, 100_000), w, u64::MAX, &lim()), Some(at(0, 0)));
        // Clamped as the kernel clamps sched_runtime.
        assert_eq!(decide(at(0, 0), w, 1_000, &lim()), Some(at(0, 100_000)));
        // A kernel without custom slices is never asked for one.
        let old = Limits {
            slices: false,
            ..lim()
        };
        assert_eq!(decide(at(0, 0), w, 100_000, &old), None);
    }

    /// The nice follows the weight carried, with two levels of hysteresis, within the range
    /// the kernel allows.
    #[test]
    fn the_nice_follows_the_weight_with_hysteresis() {
        let w0 = weight_of_nice(0);
        // Four nice-0 tasks weigh as nice -6.
        assert_eq!(decide(at(0, 0), 4 * w0, BASE, &lim()), Some(at(-6, 0)));
        // Within the band two levels either side: stays.
        assert_eq!(
            decide(at(-6, 0), weight_of_nice(-8) - 1, BASE, &lim()),
            None
        );
        assert_eq!(
            decide(at(-6, 0), weight_of_nice(-4) + 1, BASE, &lim()),
            None
        );
        // Outside: moves to the nearest level.
        assert_eq!(
            decide(at(-6, 0), weight_of_nice(-8), BASE, &lim()),
            Some(at(-8, 0))
        );
        assert_eq!(
            decide(at(-6, 0), weight_of_nice(-4), BASE, &lim()),
            Some(at(-4, 0))
        );
        // At the table's ends the band is open on that side.
        assert_eq!(decide(at(-20, 0), u64::MAX, BASE, &lim()), None);
        assert_eq!(decide(at(19, 0), 1, BASE, &lim()), None);
        // Clamped to what the kernel allows: an unprivileged worker at its start stays.
        let fixed = Limits {
            lo: 0,
            hi: 0,
            ..lim()
        };
        assert_eq!(decide(at(0, 0), 4 * w0, BASE, &fixed), None);
        assert_eq!(decide(at(0, 0), w0 / 8, BASE, &fixed), None);
        let floor = Limits { lo: -2, ..lim() };
        assert_eq!(decide(at(0, 0), 4 * w0, BASE, &floor), Some(at(-2, 0)));
    }

    /// A load that swings between one and two nice-0 tasks — at every other switch, or in
    /// runs of 50 switches of each — settles between them and stays there.
    #[test]
    fn a_flapping_load_settles_and_makes_few_calls() {
        let w0 = weight_of_nice(0);
        let (mut a, mut avg, mut calls) = (at(0, 0), w0, 0);
        for i in 0..20_000 {
            let two = if i < 10_000 {
                i % 2 == 0
            } else {
                (i / 50) % 2 == 0
            };
            avg = average(avg, if two { 2 * w0 } else { w0 });
            if let Some(n) = decide(a, avg, BASE, &lim()) {
                a = n;
                calls += 1;
            }
        }
        assert!(calls <= 2, "{calls} calls");
        assert!((-2..=-1).contains(&a.nice), "{a:?}");
        // The average of a steady load converges to it.
        let mut avg = 0;
        for _ in 0..5000 {
            avg = average(avg, 4 * w0);
        }
        assert!(avg.abs_diff(4 * w0) < 4 * w0 / 100, "{avg}");
    }
}
