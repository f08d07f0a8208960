//! Per-worker counters in the spirit of `/proc/schedstat` (wakeups, placements,
//! balancing, switches; the names are `lagom_trace::sched_counters!`), and the
//! snapshot [`Stats`] that `Runtime::stats()` returns, printable as a table.
//!
//! Each counter is written by one or a few threads with Relaxed increments and read at any time;
//! a snapshot taken while the runtime runs is not atomic across counters. The counters of the
//! switch and local-wake hot paths (`blocks`, `switches_*`, `delayed_dequeues`,
//! `wakeups_local`, `runnable_in_place`, `exits`) each have one writer at a time (the worker's
//! thread, or whoever holds its runqueue lock) and use [`Counters::inc_owned`], a plain load
//! and store; the others use a locked `fetch_add`.
//!
//! The counters the simulator keeps too are named once, in `lagom_trace::sched_counters!`;
//! the runtime's own (cancellation, stacks, host stalls) follow them. The first eight are
//! the ones that wakers and spawners on *other* workers bump (a wakeup queued here, a kick
//! sent here): they fill the first cache line of the block (`Worker::stats` starts on a line
//! of its own), so that those remote increments and the owner's own counting, at every
//! switch, never write the same line (the test below checks the split). The table lists the
//! counters in this order.

use alloc::vec::Vec;
use core::fmt;

use crate::locking::atomic::{AtomicU64, Ordering};

macro_rules! counters {
    ($( $(#[$doc:meta])* $name:ident ),* $(,)?) => {
        /// The live counters of one worker.
        #[derive(Debug, Default)]
        #[repr(C)]
        pub(crate) struct Counters {
            $( $(#[$doc])* pub(crate) $name: AtomicU64, )*
        }

        /// One worker's counters at the time of the snapshot.
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
        pub struct WorkerStats {
            /// The OS CPU the worker is pinned to.
            pub cpu: usize,
            $( $(#[$doc])* pub $name: u64, )*
        }

        impl Counters {
            pub(crate) fn snapshot(&self, cpu: usize) -> WorkerStats {
                WorkerStats { cpu, $( $name: self.$name.load(Ordering::Relaxed), )* }
            }
        }

        /// Column names, in order.
        const COLUMNS: &[&str] = &[$( stringify!($name) ),*];

        impl WorkerStats {
            /// Every counter as `(name, value)`, in the order of the fields (and of the
            /// [`Stats`] table): for exporting them without naming each.
            pub fn counters(&self) -> impl Iterator<Item = (&'static str, u64)> + use<> {
                COLUMNS.iter().copied().zip(self.values())
            }

            fn values(&self) -> Vec<u64> {
                alloc::vec![$( self.$name ),*]
            }

            /// Adds every counter of `other` to this one's.
            fn accumulate(&mut self, other: &WorkerStats) {
                $( self.$name += other.$name; )*
            }
        }
    };
}

// The counters both drivers keep are named once (`lagom_trace::sched_counters!`); the
// runtime adds its own after them.
lagom_trace::sched_counters!(counters! {
    /// Tasks that began to unwind here from a shutdown's cancellation.
    cancelled,
    /// Stacks this worker's pool has mapped (in batches), as of its last idle moment.
    stacks_mapped,
    /// Idle stacks this worker's pool has unmapped when trimmed, as of its last idle moment.
    stacks_trimmed,
    /// Stalls of this worker's thread (off its CPU while a task was current) left out of the
    /// running task's charge ([`TaskClock::OnCpu`](crate::runtime::TaskClock::OnCpu); 0 with
    /// the default clock).
    host_stalls,
    /// The nanoseconds those stalls left out.
    host_stall_ns,
    /// Expiries of this worker's tick timer that a running task's tick answered
    /// (`Builder::tick_timer`; 0 without the timer).
    tick_timer_fires,
    /// Times this worker armed its tick timer (one `timer_settime` each).
    tick_timer_arms,
    /// Idle spins of this worker that found work (`Builder::idle_spin`).
    idle_spin_hits,
    /// Nanoseconds this worker spent in idle spins (the timer spin not included).
    idle_spin_ns,
    /// Stalls the stall monitor reported here: the running task made no scheduling call for
    /// longer than the threshold while other tasks waited
    /// ([`Builder::stall_threshold`](crate::runtime::Builder::stall_threshold)); one per
    /// episode.
    stalls,
    /// How long those stalls lasted, in nanoseconds (each added when it ends: at the
    /// worker's next scheduling call).
    stall_ns,
    /// Kicks the stall monitor sent to an idle worker for tasks that waited here, during a
    /// stall, and may move (their newly idle balance takes them).
    stall_kicks,
    /// `sched_setattr` calls this worker's thread made to tell the kernel its tasks' slice
    /// and weight ([`Builder::host_hints`](crate::runtime::Builder::host_hints)).
    host_attr_calls,
});

impl Counters {
    /// Adds one to `c` (a field of `self`).
    pub(crate) fn inc(&self, c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }

    /// Adds one to `c` (a field of `self`) that has one writer at a time: every write of `c`
    /// is made by this worker's own thread, or every write is made under this worker's
    /// runqueue lock. A load and a store then lose no increment and need no locked
    /// read-modify-write (a hot-path cost: several counters move on every switch).
    pub(crate) fn inc_owned(&self, c: &AtomicU64) {
        self.add_owned(c, 1);
    }

    /// Adds `n` to `c`, a counter with one writer at a time ([`Self::inc_owned`]).
    pub(crate) fn add_owned(&self, c: &AtomicU64, n: u64) {
        c.store(c.load(Ordering::Relaxed) + n, Ordering::Relaxed);
    }
}

impl WorkerStats {
    /// Every wakeup that made a blocked task runnable here.
    pub fn wakeups(&self) -> u64 {
        self.wakeups_local
            + self.wakeups_remote
            + self.wakeups_queued
            + self.wakeups_on_cpu
            + self.runnable_in_place
            + self.runnable_queued
    }
}

/// A snapshot of every worker's counters and the runtime's live objects.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// One entry per worker, in worker order.
    pub workers: Vec<WorkerStats>,
    /// Tasks spawned and not yet freed.
    pub live_tasks: usize,
    /// Task stacks in use by tasks.
    pub live_stacks: usize,
    /// What the shutdown did, once the runtime was shut down (all zero before).
    pub shutdown: ShutdownStats,
    /// Where each worker runs in the topology, in worker order (the CPU view that placement
    /// and balancing use).
    pub layout: Vec<WorkerPlace>,
    /// Why the runtime's CPU view is flat (one LLC, no preference), if it had to fall back.
    pub layout_fallback: Option<&'static str>,
    /// What the kernel refused of the workers' host hints
    /// ([`Builder::host_hints`](crate::runtime::Builder::host_hints)), each reason once:
    /// a kernel without custom slices for fair threads, a nice that could not come back
    /// down without privilege, a call that failed. Empty when everything was passed on (or
    /// the hints are off).
    pub host_hints: Vec<&'static str>,
}

/// Where one worker runs in the topology (`Stats::layout`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerPlace {
    /// The worker's index.
    pub worker: usize,
    /// The OS CPU it is pinned to.
    pub cpu: usize,
    /// Its CPU's priority (higher is preferred; ITMT / preferred-core rankings).
    pub priority: u32,
    /// Its domains bottom-up: the level's kernel name and the workers (indices) it spans.
    pub domains: Vec<(&'static str, core::ops::Range<usize>)>,
}

impl WorkerPlace {
    /// Every worker's place in `map`, the workers on `cpus`.
    pub(crate) fn all(map: &lagom_policy::CpuMap, cpus: &[usize]) -> Vec<WorkerPlace> {
        (0..map.len())
            .map(|i| WorkerPlace {
                worker: i,
                cpu: cpus[i],
                priority: map.priority(i),
                domains: map
                    .levels()
                    .iter()
                    .enumerate()
                    .map(|(l, lv)| (lv.name, map.span(l, i)))
                    .collect(),
            })
            .collect()
    }
}

impl fmt::Display for WorkerPlace {
    /// `worker 0: cpu 3, priority 231, SMT 0..2 MC 0..8 ALL 0..16`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "worker {}: cpu {}, priority {},",
            self.worker, self.cpu, self.priority
        )?;
        for (name, span) in &self.domains {
            write!(f, " {name} {}..{}", span.start, span.end)?;
        }
        Ok(())
    }
}

/// What a shutdown could not finish (`Runtime::shutdown_timeout`). The tasks it cancelled
/// and that unwound are counted per worker (`WorkerStats::cancelled`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ShutdownStats {
    /// Tasks that had not ended when the timeout ran out (they caught the cancellation and
    /// kept running, or, without the `std` feature, could not unwind): never resumed again,
    /// their stacks freed without running the destructors on them. Their `join` returns a
    /// cancelled `JoinError` too.
    pub abandoned: usize,
    /// Worker threads that had not stopped when the timeout ran out, because a task on them
    /// never called into lagom again: detached and left running, with the runtime's memory
    /// (and the tasks' stacks) leaked, so that nothing they use is freed under them.
    pub stuck_workers: usize,
    /// Closures of `task::blocking` still running on the blocking pool when the timeout ran
    /// out. Each may borrow from its task's stack (and from what that task borrows), so the
    /// abandoned tasks' stacks were leaked, not unmapped.
    pub blocking_borrows: usize,
}

impl Stats {
    /// The sum over workers.
    pub fn total(&self) -> WorkerStats {
        let mut t = WorkerStats::default();
        for w in &self.workers {
            t.accumulate(w);
        }
        t
    }
}

impl fmt::Display for Stats {
    /// One row per counter, one column per worker (headed by its CPU), and a total.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:<22}", "counter")?;
        for w in &self.workers {
            write!(f, " {:>10}", alloc::format!("cpu{}", w.cpu))?;
        }
        writeln!(f, " {:>10}", "total")?;
        let cols: Vec<Vec<u64>> = self.workers.iter().map(WorkerStats::values).collect();
        for (i, name) in COLUMNS.iter().enumerate() {
            write!(f, "{name:<22}")?;
            let mut sum = 0;
            for c in &cols {
                write!(f, " {:>10}", c[i])?;
                sum += c[i];
            }
            writeln!(f, " {sum:>10}")?;
        }
        writeln!(
            f,
            "live tasks {}, live stacks {}",
            self.live_tasks, self.live_stacks
        )?;
        for p in &self.layout {
            writeln!(f, "{p}")?;
        }
        if let Some(why) = self.layout_fallback {
            writeln!(f, "layout: flat ({why})")?;
        }
        for why in &self.host_hints {
            writeln!(f, "host hints: {why}")?;
        }
        let s = &self.shutdown;
        if s.abandoned > 0 || s.stuck_workers > 0 || s.blocking_borrows > 0 {
            writeln!(
                f,
                "shutdown: {} task(s) abandoned, {} worker(s) stuck, {} borrowing blocking \
                 closure(s) still running",
                s.abandoned, s.stuck_workers, s.blocking_borrows
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::{COLUMNS, Counters, WorkerStats};
    use core::mem::offset_of;

    /// `counters()` yields every counter once, by its field's name, with its value.
    #[test]
    fn counters_name_every_field_with_its_value() {
        let s = WorkerStats {
            wakeups_local: 3,
            exits: 7,
            ..WorkerStats::default()
        };
        let all: alloc::vec::Vec<_> = s.counters().collect();
        assert_eq!(all.len(), COLUMNS.len());
        assert!(all.contains(&("wakeups_local", 3)));
        assert!(all.contains(&("exits", 7)));
        assert_eq!(all.iter().map(|(_, v)| v).sum::<u64>(), 10);
    }

    /// The counters that other workers bump fill the block's first cache line, and only they
    /// (module doc).
    #[test]
    fn remote_counters_fill_the_first_line() {
        let remote = [
            offset_of!(Counters, wakeups_remote),
            offset_of!(Counters, wakeups_queued),
            offset_of!(Counters, wakeups_on_cpu),
            offset_of!(Counters, runnable_queued),
            offset_of!(Counters, kicks),
            offset_of!(Counters, nohz_kicks),
            offset_of!(Counters, wakeups_chased),
            offset_of!(Counters, spawns),
        ];
        assert!(remote.iter().all(|&o| o < 64), "{remote:?}");
        assert_eq!(offset_of!(Counters, wakeups_local), 64);
    }
}
