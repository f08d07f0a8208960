//! The Chrome trace event format ("JSON object format": `{"traceEvents": [...]}`), which
//! ui.perfetto.dev and `chrome://tracing` open.
//!
//! Hand-written with `core::fmt::Write` because the crate has no dependency and must export
//! without `std` (the runtime's dependencies are kept to a short list); the format needs
//! nothing but strings (escaped by [`Str`]), integers and fixed-point microseconds.

use alloc::collections::BTreeMap;
use alloc::vec::Vec;
use core::fmt::{self, Display, Formatter, Write};

use super::{MigrateCause, StallCause, SwitchReason, Trace, TraceEventKind, WakePath};

/// [`Trace`] as Chrome trace event JSON ("JSON object format": `{"traceEvents": [...]}`);
/// format it with `Display`.
///
/// What is written, all with `"pid": 1`:
///
/// * metadata (`"ph": "M"`): `process_name` "lagom"; per track a `thread_name`
///   (`"worker <i> (cpu <c>)"`, or `"outside threads"`) and a `thread_sort_index`. Worker `i` is
///   `"tid": i + 1`; the outside track is `"tid": workers + 1`.
/// * one complete slice (`"ph": "X"`, category `run`) per run of a task on a worker, from the
///   switch to it to the switch away from it, named by the task's name (`task-<id>` for a
///   task whose name is empty or was not kept). Its `args` hold
///   `task` (id), `prev` (the task switched away from when it started, `null`: the idle loop),
///   `reason` (why it ended: `block`, `yield`, `preempt`, `exit`; `unfinished` if the trace
///   ends first) and `next` (the task switched to when it ended, `null`: the idle loop). So a
///   reader can check the switch sequence of a track: a slice whose `next` is a task is
///   followed at once by that task's slice, whose `prev` names it. The slice is written where
///   the run starts, so each track's events come in time order.
/// * a thread-scoped instant (`"ph": "i"`, `"s": "t"`) per wakeup (category `wakeup`, name
///   `"wakeup <task name>"`, `args`: `task`, `waker` (worker index or `null`), `target`, `path`,
///   `latency_us`: from the wakeup to the start of the wakee's next run, `null` for an in-place
///   runnable wakeup or a wakee that does not run again in the trace) on the waker's track, and per migration (category `migrate`, name
///   `"migrate <task name>"`, `args`: `task`, `from`, `to`, `cause`) on the recording worker's track.
/// * a thread-scoped instant per stall the runtime's monitor reported (category `stall`, name
///   `"stall <task name>"`, `args`: `task`, `worker`, `stalled_us`, `waiting`, `cause` (the
///   kind: `syscall`, `outside_syscall`, `blocked`, `running`, `unknown`, `unwinding`),
///   `state`, `call`, `futex_op` (each `null` where the cause has none), `on_cpu_percent`
///   (for `running`), `text` (the cause in words)) on the stalled worker's track, at the time of the report.
///   The monitor records it into the outside log, but the outside track holds no stall.
/// * a flow (`"ph": "s"` on the waker's track at the wakeup, `"ph": "f"` with `"bp": "e"` on
///   the wakee's track where its next run starts; `id` counts from 1) for each wakeup whose
///   wakee runs later in the trace, except in-place runnable wakeups, whose wakee may never
///   have stopped running.
/// * `"displayTimeUnit": "ns"` and `"otherData"` with the drop counts.
///
/// Event timestamps (`ts`) and durations (`dur`) are microseconds since the trace's start
/// ([`Trace::span_ns`]) in steps of 1/1024 µs (0.977 ns), written exactly (up to ten
/// decimals): each nanosecond timestamp is rounded to the nearest step, which keeps distinct
/// timestamps distinct and in order (a step is shorter than a nanosecond), and a slice's
/// `dur` is the difference of its rounded ends. Viewers read the numbers as float64
/// microseconds, and a multiple of 2^-10 below 2^43 µs (101 days) is exact there, as are the
/// sums and differences of such numbers; so however a viewer adds `ts + dur` or shifts a
/// track to start at 0 (speedscope subtracts the track's first `ts`), a run that ends as the
/// next begins ends exactly at the next `ts`, never an ulp past it, which a viewer would take
/// for nesting. With three-decimal microseconds (exact ns, but not exact in binary) the sums
/// round either way: speedscope drew each worker as an ever-deeper staircase of nested
/// runs. Durations in `args` (`latency_us`) are plain three-decimal microseconds.
#[derive(Debug, Clone, Copy)]
pub struct ChromeJson<'a>(pub(crate) &'a Trace);

/// A JSON string literal `"<prefix><text>"`: `prefix` is plain text that needs no escaping;
/// in `text`, `"`, `\` and control characters are escaped.
struct Str<'a>(&'a str, &'a str);

impl Display for Str<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        f.write_char('"')?;
        f.write_str(self.0)?;
        let mut rest = self.1;
        while let Some(i) = rest.find(|c: char| c == '"' || c == '\\' || c < ' ') {
            f.write_str(&rest[..i])?;
            // The characters searched for are ASCII: one byte each.
            match rest.as_bytes()[i] {
                b'"' => f.write_str("\\\"")?,
                b'\\' => f.write_str("\\\\")?,
                b'\n' => f.write_str("\\n")?,
                b'\r' => f.write_str("\\r")?,
                b'\t' => f.write_str("\\t")?,
                c => write!(f, "\\u{:04x}", c)?,
            }
            rest = &rest[i + 1..];
        }
        f.write_str(rest)?;
        f.write_char('"')
    }
}

/// A task's label, `"<prefix><name>"`: its recorded name, else (no name recorded, or an
/// empty one: an unnamed task) `task-<id>`, the name the runtime's errors and reports use.
struct Name<'a> {
    prefix: &'static str,
    trace: &'a Trace,
    id: u64,
}

impl Display for Name<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self.trace.task_name(self.id) {
            Some(n) if !n.is_empty() => Str(self.prefix, n).fmt(f),
            _ => write!(f, "\"{}task-{}\"", self.prefix, self.id),
        }
    }
}

/// Microseconds with three decimals (exact ns), for `args`.
struct Us(u64);

impl Display for Us {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:03}", self.0 / 1000, self.0 % 1000)
    }
}

/// An optional id or index as a number or `null`.
struct Opt<T>(Option<T>);

impl<T: Display> Display for Opt<T> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Some(v) => v.fmt(f),
            None => f.write_str("null"),
        }
    }
}

fn switch_reason(r: SwitchReason) -> &'static str {
    match r {
        SwitchReason::Block => "block",
        SwitchReason::Yield => "yield",
        SwitchReason::Preempt => "preempt",
        SwitchReason::Exit => "exit",
        SwitchReason::Idle => "idle",
    }
}

fn wake_path(p: WakePath) -> &'static str {
    match p {
        WakePath::Local => "local",
        WakePath::Queued => "queued",
        WakePath::Remote => "remote",
        WakePath::RunnableInPlace => "runnable_in_place",
        WakePath::DelayedQueued => "delayed_queued",
        WakePath::OnCpu => "on_cpu",
    }
}

/// An optional string as a JSON string or `null`.
struct OptStr(Option<&'static str>);

impl Display for OptStr {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(s) => Str("", s).fmt(f),
            None => f.write_str("null"),
        }
    }
}

/// The `args` of a stall event after `stalled_us`: `cause`, `state`, `call`, `futex_op`,
/// `on_cpu_percent`, `text`.
struct StallArgs(StallCause);

impl Display for StallArgs {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let c = self.0;
        let (state, futex_op, on_cpu) = match c {
            StallCause::Syscall {
                state, futex_op, ..
            } => (Some(state), futex_op, None),
            StallCause::OutsideSyscall { state } | StallCause::Blocked { state } => {
                (Some(state), None, None)
            }
            StallCause::Running { on_cpu_percent } => (None, None, Some(on_cpu_percent)),
            StallCause::Unknown | StallCause::Unwinding => (None, None, None),
        };
        write!(f, "\"cause\":\"{}\",\"state\":", c.kind())?;
        match state {
            Some(s) => write!(f, "\"{}\"", s.escape_default())?,
            None => f.write_str("null")?,
        }
        write!(
            f,
            ",\"call\":{},\"futex_op\":{},\"on_cpu_percent\":{},\"text\":",
            OptStr(c.call().map(|c| c.name())),
            OptStr(futex_op.map(|o| o.name())),
            Opt(on_cpu)
        )?;
        Str("", &alloc::format!("{c}")).fmt(f)
    }
}

fn migrate_cause(c: MigrateCause) -> &'static str {
    match c {
        MigrateCause::Balance => "balance",
        MigrateCause::PeriodicBalance => "periodic_balance",
        MigrateCause::Wakeup => "wakeup",
    }
}

/// Writes the comma before every event but the first.
struct Sep(bool);

impl Sep {
    fn next(&mut self, f: &mut Formatter<'_>) -> fmt::Result {
        if core::mem::replace(&mut self.0, true) {
            f.write_str(",\n")?;
        }
        Ok(())
    }
}

/// A run of a task on a worker: the task, when it started, what ran before it.
struct Run {
    task: u64,
    start: u64,
    prev: Option<u64>,
}

impl Display for ChromeJson<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let t = self.0;
        let rel = |ts: u64| Ticks(ticks(ts.saturating_sub(t.start_ns)));
        let outside_tid = t.workers.len() + 1;
        let mut sep = Sep(false);
        f.write_str("{\"traceEvents\":[\n")?;
        sep.next(f)?;
        f.write_str(
            "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"tid\":0,\
             \"args\":{\"name\":\"lagom\"}}",
        )?;
        let mut tracks: Vec<(usize, &super::TrackTrace)> = t
            .workers
            .iter()
            .enumerate()
            .map(|(i, w)| (i + 1, w))
            .collect();
        // The outside track is named only if it holds events of its own (stalls are drawn on
        // their worker's track).
        let outside_named = t
            .outside
            .events
            .iter()
            .any(|e| !matches!(e.kind, TraceEventKind::Stall { .. }));
        if !t.outside.events.is_empty() {
            tracks.push((outside_tid, &t.outside));
        }
        for &(tid, track) in &tracks {
            if tid == outside_tid && !outside_named {
                continue;
            }
            sep.next(f)?;
            write!(
                f,
                "{{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":{tid},\"args\":{{\"name\":"
            )?;
            match track.cpu {
                Some(cpu) => write!(f, "\"worker {} (cpu {cpu})\"", tid - 1)?,
                None => f.write_str("\"outside threads\"")?,
            }
            f.write_str("}}")?;
            sep.next(f)?;
            write!(
                f,
                "{{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":1,\"tid\":{tid},\
                 \"args\":{{\"sort_index\":{tid}}}}}"
            )?;
        }
        // Each task's run starts, in time order, for the flows: (start, tid).
        let mut runs: BTreeMap<u64, Vec<(u64, usize)>> = BTreeMap::new();
        for (i, w) in t.workers.iter().enumerate() {
            for ev in &w.events {
                if let TraceEventKind::Switch { next: Some(n), .. } = ev.kind {
                    runs.entry(n).or_default().push((ev.ts_ns, i + 1));
                }
            }
        }
        for list in runs.values_mut() {
            list.sort_unstable();
        }
        let mut flow_id = 0u64;
        for &(tid, track) in &tracks {
            let evs = &track.events;
            // For each event, the index of the next switch: where a run starting there ends.
            let mut ends = alloc::vec![usize::MAX; evs.len()];
            let mut after = usize::MAX;
            for i in (0..evs.len()).rev() {
                ends[i] = after;
                if matches!(evs[i].kind, TraceEventKind::Switch { .. }) {
                    after = i;
                }
            }
            for (i, ev) in evs.iter().enumerate() {
                let ts = ev.ts_ns;
                match ev.kind {
                    TraceEventKind::Switch {
                        prev,
                        next: Some(task),
                        ..
                    } => {
                        let run = Run {
                            task,
                            start: ts,
                            prev,
                        };
                        sep.next(f)?;
                        match evs.get(ends[i]).map(|e| (e.ts_ns, e.kind)) {
                            Some((end, TraceEventKind::Switch { next, reason, .. })) => {
                                run_slice(f, t, tid, &run, end, switch_reason(reason), next)?;
                            }
                            _ => run_slice(f, t, tid, &run, t.end_ns.max(ts), "unfinished", None)?,
                        }
                    }
                    TraceEventKind::Switch { next: None, .. } => {}
                    TraceEventKind::Wakeup {
                        task,
                        waker,
                        target,
                        path,
                    } => {
                        // The wakee's next run, unless the wakeup was in place (the wakee
                        // may never have stopped running).
                        let next_run = (path != WakePath::RunnableInPlace)
                            .then(|| {
                                runs.get(&task).and_then(|l| {
                                    let i = l.partition_point(|&(s, _)| s < ts);
                                    l.get(i).copied()
                                })
                            })
                            .flatten();
                        sep.next(f)?;
                        write!(
                            f,
                            "{{\"name\":{},\"cat\":\"wakeup\",\"ph\":\"i\",\"s\":\"t\",\
                             \"pid\":1,\"tid\":{tid},\"ts\":{},\"args\":{{\"task\":{task},\
                             \"waker\":{},\"target\":{target},\"path\":\"{}\",\"latency_us\":",
                            Name {
                                prefix: "wakeup ",
                                trace: t,
                                id: task
                            },
                            rel(ts),
                            Opt(waker),
                            wake_path(path)
                        )?;
                        match next_run {
                            Some((start, _)) => write!(f, "{}}}}}", Us(start - ts))?,
                            None => f.write_str("null}}")?,
                        }
                        if let Some((start, to_tid)) = next_run {
                            flow_id += 1;
                            write!(
                                f,
                                ",\n{{\"name\":\"wakeup\",\"cat\":\"wakeup\",\"ph\":\"s\",\
                                 \"id\":{flow_id},\"pid\":1,\"tid\":{tid},\"ts\":{}}},\n\
                                 {{\"name\":\"wakeup\",\"cat\":\"wakeup\",\"ph\":\"f\",\"bp\":\"e\",\
                                 \"id\":{flow_id},\"pid\":1,\"tid\":{to_tid},\"ts\":{}}}",
                                rel(ts),
                                rel(start)
                            )?;
                        }
                    }
                    TraceEventKind::Migrate {
                        task,
                        from,
                        to,
                        cause,
                    } => {
                        sep.next(f)?;
                        write!(
                            f,
                            "{{\"name\":{},\"cat\":\"migrate\",\"ph\":\"i\",\"s\":\"t\",\
                         \"pid\":1,\"tid\":{tid},\"ts\":{},\"args\":{{\"task\":{task},\
                         \"from\":{from},\"to\":{to},\"cause\":\"{}\"}}}}",
                            Name {
                                prefix: "migrate ",
                                trace: t,
                                id: task
                            },
                            rel(ts),
                            migrate_cause(cause)
                        )?;
                    }
                    TraceEventKind::Stall {
                        task,
                        worker,
                        stalled_ns,
                        cause,
                        waiting,
                    } => {
                        sep.next(f)?;
                        write!(
                            f,
                            "{{\"name\":{},\"cat\":\"stall\",\"ph\":\"i\",\"s\":\"t\",\
                             \"pid\":1,\"tid\":{},\"ts\":{},\"args\":{{\"task\":{task},\
                             \"worker\":{worker},\"stalled_us\":{},\"waiting\":{waiting},{}}}}}",
                            Name {
                                prefix: "stall ",
                                trace: t,
                                id: task
                            },
                            worker as usize + 1,
                            rel(ts),
                            Us(stalled_ns),
                            StallArgs(cause)
                        )?;
                    }
                }
            }
        }
        write!(
            f,
            "\n],\"displayTimeUnit\":\"ns\",\"otherData\":{{\"workers\":{},\"dropped\":{},\
             \"names_dropped\":{}}}}}",
            t.workers.len(),
            t.dropped(),
            t.names_dropped
        )
    }
}

/// `ns` in steps of 1/1024 µs, rounded to the nearest ([`ChromeJson`]): `ns · 1024 / 1000`
/// = `ns · 128 / 125`. A step (0.977 ns) is shorter than a nanosecond, so distinct `ns` give
/// distinct steps, in the same order.
fn ticks(ns: u64) -> u64 {
    let t = (u128::from(ns) * 128 + 62) / 125;
    u64::try_from(t).unwrap_or(u64::MAX)
}

/// A count of 1/1024 µs steps written as microseconds, exactly: the integer part, then the
/// fraction `k / 1024` = `k · 9 765 625 / 10^10` in ten decimals, trailing zeros dropped.
struct Ticks(u64);

impl Display for Ticks {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let (us, frac) = (self.0 >> 10, self.0 & 1023);
        if frac == 0 {
            return write!(f, "{us}");
        }
        let mut digits = frac * 9_765_625;
        let mut width = 10;
        while digits % 10 == 0 {
            digits /= 10;
            width -= 1;
        }
        write!(f, "{us}.{digits:0width$}")
    }
}

/// A complete slice for run `o` ending at `end`.
fn run_slice(
    f: &mut Formatter<'_>,
    t: &Trace,
    tid: usize,
    o: &Run,
    end: u64,
    reason: &str,
    next: Option<u64>,
) -> fmt::Result {
    write!(
        f,
        "{{\"name\":{},\"cat\":\"run\",\"ph\":\"X\",\"pid\":1,\"tid\":{tid},\"ts\":{},\
         \"dur\":{},\"args\":{{\"task\":{},\"prev\":{},\"reason\":\"{reason}\",\"next\":{}}}}}",
        Name {
            prefix: "",
            trace: t,
            id: o.task
        },
        Ticks(ticks(o.start.saturating_sub(t.start_ns))),
        Ticks(
            ticks(end.saturating_sub(t.start_ns))
                .saturating_sub(ticks(o.start.saturating_sub(t.start_ns)))
        ),
        o.task,
        Opt(o.prev),
        Opt(next)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::{String, ToString};
    use alloc::vec;

    use crate::{
        FutexOp, StallCause, SwitchReason, Syscall, Trace, TraceEvent, TraceEventKind, TrackTrace,
    };

    /// A stall event is no larger than the others were (a trace log is an array of events).
    #[test]
    fn a_stall_event_keeps_events_small() {
        assert!(core::mem::size_of::<TraceEvent>() <= 48);
    }

    /// A stall recorded in the outside log is drawn on its worker's track, with its cause;
    /// the outside track, which holds nothing else, is not named.
    #[test]
    fn a_stall_is_an_instant_on_its_worker_s_track() {
        let run = TraceEvent {
            ts_ns: 1_000,
            kind: TraceEventKind::Switch {
                prev: None,
                next: Some(7),
                reason: SwitchReason::Idle,
            },
        };
        let stall = TraceEvent {
            ts_ns: 12_000_000,
            kind: TraceEventKind::Stall {
                task: 7,
                worker: 1,
                stalled_ns: 11_500_000,
                cause: StallCause::Syscall {
                    state: 'S',
                    call: Some(Syscall::Futex),
                    nr: 202,
                    futex_op: Some(FutexOp::WaitBitset),
                },
                waiting: 3,
            },
        };
        let workers = vec![
            TrackTrace {
                cpu: Some(0),
                events: vec![],
                dropped: 0,
            },
            TrackTrace {
                cpu: Some(4),
                events: vec![run],
                dropped: 0,
            },
        ];
        let outside = TrackTrace {
            cpu: None,
            events: vec![stall],
            dropped: 0,
        };
        let names = [(7, String::from("pipe \"stage\""))].into_iter().collect();
        let json = Trace::new((0, 13_000_000), workers, outside, names, 0)
            .json()
            .to_string();
        assert!(
            json.contains(
                "{\"name\":\"stall pipe \\\"stage\\\"\",\"cat\":\"stall\",\"ph\":\"i\",\
                 \"s\":\"t\",\"pid\":1,\"tid\":2,\"ts\":12000,\"args\":{\"task\":7,\
                 \"worker\":1,\"stalled_us\":11500.000,\"waiting\":3,\"cause\":\"syscall\",\
                 \"state\":\"S\",\"call\":\"futex\",\"futex_op\":\"FUTEX_WAIT_BITSET\",\
                 \"on_cpu_percent\":null,\"text\":\"blocked in the OS in futex \
                 (FUTEX_WAIT_BITSET), state S\"}}"
            ),
            "{json}"
        );
        assert!(!json.contains("outside threads"), "{json}");
    }

    #[test]
    fn ticks_are_exact_binary_fractions_in_order() {
        assert_eq!(Ticks(0).to_string(), "0");
        assert_eq!(Ticks(1024).to_string(), "1");
        assert_eq!(Ticks(1).to_string(), "0.0009765625");
        assert_eq!(Ticks(512 + 3 * 1024).to_string(), "3.5");
        // Every written value parses to exactly k / 1024.
        for k in [1u64, 7, 1023, 1025, 123_456_789, (1 << 43) - 1] {
            let v: f64 = Ticks(k).to_string().parse().unwrap();
            assert_eq!(v, k as f64 / 1024.0, "{k}");
        }
        // Distinct nanoseconds stay distinct and ordered, within half a step of the truth.
        let mut last = None;
        for ns in (0..5_000u64).chain(1_000_000_000_000..1_000_000_005_000) {
            let k = ticks(ns);
            assert!(last.is_none_or(|l| k > l), "{ns}");
            last = Some(k);
            let err = (k as f64 * 1000.0 / 1024.0 - ns as f64).abs();
            assert!(err <= 0.49, "{ns}: {err}");
        }
        assert_eq!(ticks(u64::MAX), u64::MAX);
    }
}
