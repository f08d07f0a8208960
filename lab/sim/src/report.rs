//! [`Report`]: what a run measured, as data and as text, and the one-line JSON summary.

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::{self, Write};

use super::engine::{Sim, Stop};
use super::scenario::Preempt;
use super::stats::{Counters, Histogram, TaskStats};
use lagom_policy::Features;

/// One task's line of the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskReport {
    /// Its name (`name[i]` for an instance).
    pub name: String,
    /// Its nice level.
    pub nice: i32,
    /// Whether it counts in the summary.
    pub measure: bool,
    /// What was measured.
    pub stats: TaskStats,
}

/// One virtual CPU's line of the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuReport {
    /// Its OS CPU id.
    pub os_id: usize,
    /// Time it ran tasks after the warm-up (ns).
    pub busy: u64,
    /// Its counters (from the start).
    pub counters: Counters,
}

/// What a run measured.
///
/// Everything in it is a function of the scenario, the machine, the features and the seed:
/// numbers are integers (nanoseconds, counts) printed with integer arithmetic, so the text is
/// byte-identical from run to run and machine to machine. Wall-clock figures (events per
/// second) are the caller's, passed in where they are printed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// The scenario's name.
    pub scenario: String,
    /// The machine's name.
    pub machine: String,
    /// The features.
    pub features: Features,
    /// Their label (as given).
    pub features_label: String,
    /// The seed.
    pub seed: u64,
    /// The preemption mode it ran under.
    pub preempt: Preempt,
    /// Virtual time simulated (ns).
    pub elapsed: u64,
    /// Of which measured (after the warm-up).
    pub measured: u64,
    /// The stall threshold (ns).
    pub stall_threshold: u64,
    /// Events handled.
    pub events: u64,
    /// Why the run ended.
    pub stop: Stop,
    /// The tasks, in declaration order.
    pub tasks: Vec<TaskReport>,
    /// The CPUs, in virtual CPU order.
    pub cpus: Vec<CpuReport>,
    /// Wakeups of measured tasks after the warm-up.
    pub wakeups: u64,
    /// Their stalls.
    pub stalls: u64,
    /// Their handoffs, merged.
    pub handoff: Histogram,
    /// Loop iterations measured tasks completed after the warm-up (schbench's requests, a
    /// pipe's round trips).
    pub loops: u64,
}

impl Report {
    /// The report of `sim` as it stands (call after [`Sim::run`]).
    pub fn of(sim: &Sim) -> Report {
        let tasks: Vec<TaskReport> = sim
            .tasks
            .iter()
            .map(|t| TaskReport {
                name: t.name.clone(),
                nice: t.nice,
                measure: t.measure,
                stats: t.stats.clone(),
            })
            .collect();
        let mut handoff = Histogram::new();
        let (mut stalls, mut loops) = (0, 0);
        for t in tasks.iter().filter(|t| t.measure) {
            handoff.merge(&t.stats.handoff);
            stalls += t.stats.stalls;
            loops += t.stats.loops;
        }
        Report {
            scenario: sim.scenario.clone(),
            machine: String::from(sim.machine.name()),
            features: sim.options.features,
            features_label: sim.options.features_label.clone(),
            seed: sim.options.seed,
            preempt: sim.options.preempt,
            elapsed: sim.ended_at,
            measured: sim.ended_at.saturating_sub(sim.warmup),
            stall_threshold: sim.stall,
            events: sim.events,
            stop: sim.stop.unwrap_or(Stop::Duration),
            cpus: sim
                .cpus
                .iter()
                .enumerate()
                .map(|(i, c)| CpuReport {
                    os_id: sim.machine.os_id(i),
                    busy: c.measured_busy,
                    counters: c.counters,
                })
                .collect(),
            tasks,
            wakeups: sim.measured_wakeups,
            stalls,
            handoff,
            loops,
        }
    }

    /// Measured tasks' loop iterations per second of measured virtual time.
    pub fn loops_per_sec(&self) -> u64 {
        if self.measured == 0 {
            0
        } else {
            (u128::from(self.loops) * 1_000_000_000 / u128::from(self.measured)) as u64
        }
    }

    /// The counters summed over CPUs.
    pub fn total(&self) -> Counters {
        let mut t = Counters::default();
        for c in &self.cpus {
            t.accumulate(&c.counters);
        }
        t
    }

    /// The summary as one JSON object on one line, with these keys:
    /// `scenario`, `features`, `preempt`, `seed`, `wakeups`, `stalls`, `handoff_p50_us`, `handoff_p99_us`,
    /// `events`, `events_per_sec` (the caller's wall-clock figure).
    pub fn json_line(&self, events_per_sec: f64) -> String {
        let mut s = String::new();
        let _ = write!(
            s,
            "{{\"scenario\": {}, \"features\": {}, \"preempt\": \"{}\", \"seed\": {}, \"wakeups\": {}, \"stalls\": {}, \
             \"handoff_p50_us\": {}, \"handoff_p99_us\": {}, \"events\": {}, \"events_per_sec\": {:.0}}}",
            JsonStr(&self.scenario),
            JsonStr(&self.features_label),
            self.preempt,
            self.seed,
            self.wakeups,
            self.stalls,
            Us(self.handoff.quantile(1, 2)),
            Us(self.handoff.quantile(99, 100)),
            self.events,
            events_per_sec
        );
        s
    }
}

/// Nanoseconds as microseconds with three decimals.
struct Us(u64);

impl fmt::Display for Us {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = alloc::format!("{}.{:03}", self.0 / 1000, self.0 % 1000);
        f.pad(&s)
    }
}

/// A share `num / den` as a percentage with two decimals.
struct Pct(u64, u64);

impl fmt::Display for Pct {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bp = if self.1 == 0 {
            0
        } else {
            (u128::from(self.0) * 10_000 / u128::from(self.1)) as u64
        };
        let s = alloc::format!("{}.{:02}", bp / 100, bp % 100);
        f.pad(&s)
    }
}

/// A JSON string literal.
struct JsonStr<'a>(&'a str);

impl fmt::Display for JsonStr<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_char('"')?;
        for c in self.0.chars() {
            match c {
                '"' => f.write_str("\\\"")?,
                '\\' => f.write_str("\\\\")?,
                c if c < ' ' => write!(f, "\\u{:04x}", c as u32)?,
                c => f.write_char(c)?,
            }
        }
        f.write_char('"')
    }
}

impl fmt::Display for Stop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Stop::Duration => f.write_str("duration reached"),
            Stop::Wakeups => f.write_str("wakeup limit reached"),
            Stop::Quiet => f.write_str("nothing left to happen"),
            Stop::Endless(t) => write!(f, "task #{t} ran a million steps without time passing"),
        }
    }
}

impl fmt::Display for Report {
    /// The summary, a line per task, a line per CPU, and the counters' totals.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "scenario {} on {} ({} CPUs), seed {}, features {}, preempt {}",
            self.scenario,
            self.machine,
            self.cpus.len(),
            self.seed,
            self.features_label,
            self.preempt
        )?;
        writeln!(
            f,
            "simulated {} ms ({} ms measured), {} events; stopped: {}",
            Us(self.elapsed / 1000),
            Us(self.measured / 1000),
            self.events,
            self.stop
        )?;
        if let Stop::Endless(t) = self.stop
            && let Some(task) = self.tasks.get(t as usize)
        {
            writeln!(f, "(task #{t} is {})", task.name)?;
        }
        writeln!(
            f,
            "wakeups {}, stalls {} (handoff >= {} us), handoff p50 {} us, p99 {} us, max {} us",
            self.wakeups,
            self.stalls,
            Us(self.stall_threshold),
            Us(self.handoff.quantile(1, 2)),
            Us(self.handoff.quantile(99, 100)),
            Us(self.handoff.max())
        )?;
        let total = self.total();
        let switches = total.switches_voluntary + total.switches_involuntary;
        writeln!(
            f,
            "loops {} ({} per second), switches {} ({} % involuntary), wakeups of all tasks {}",
            self.loops,
            self.loops_per_sec(),
            switches,
            Pct(total.switches_involuntary, switches),
            total.wakeups()
        )?;
        writeln!(f)?;
        writeln!(
            f,
            "{:<16} {:>4} {:>7} {:>8} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>8} {:>7} {:>7} {:>9}",
            "task",
            "nice",
            "cpu%",
            "runs",
            "run_p50",
            "run_p99",
            "wait_p50",
            "wait_p99",
            "hand_p50",
            "hand_p99",
            "hand_max",
            "wakeups",
            "stalls",
            "migr",
            "loops"
        )?;
        for t in &self.tasks {
            let s = &t.stats;
            writeln!(
                f,
                "{:<16} {:>4} {:>7} {:>8} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>8} {:>7} {:>7} {:>9}",
                t.name,
                t.nice,
                Pct(s.measured_cpu_time, self.measured),
                s.run.count(),
                Us(s.run.quantile(1, 2)),
                Us(s.run.quantile(99, 100)),
                Us(s.wait.quantile(1, 2)),
                Us(s.wait.quantile(99, 100)),
                Us(s.handoff.quantile(1, 2)),
                Us(s.handoff.quantile(99, 100)),
                Us(s.handoff.max()),
                s.wakeups,
                s.stalls,
                s.migrations,
                s.loops
            )?;
        }
        writeln!(f, "(times in us; cpu% of one CPU over the measured time)")?;
        writeln!(f)?;
        writeln!(
            f,
            "{:<6} {:>7} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
            "cpu", "busy%", "wakeups", "vol_sw", "invol_sw", "delayed", "kicks", "pulls"
        )?;
        for c in &self.cpus {
            let k = &c.counters;
            writeln!(
                f,
                "{:<6} {:>7} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
                c.os_id,
                Pct(c.busy, self.measured),
                k.wakeups(),
                k.switches_voluntary,
                k.switches_involuntary,
                k.delayed_dequeues,
                k.kicks,
                k.balance_pulls + k.balance_periodic
            )?;
        }
        writeln!(f)?;
        writeln!(
            f,
            "counters (sum over CPUs, as the threaded runtime's Stats):"
        )?;
        let total = self.total();
        for (name, v) in Counters::NAMES.iter().zip(total.values()) {
            writeln!(f, "  {name:<22} {v}")?;
        }
        Ok(())
    }
}
