//! The Chrome trace event format ("JSON object format": `{"traceEvents": [...]}`), which
//! ui.perfetto.dev and `chrome://tracing` open.
//!
//! Hand-written with `core::fmt::Write` because the crate has no dependency and must export
//! without `std` (the runtime's dependencies are kept to a short list); the format needs
//! nothing but strings (escaped by [`Str`]), integers and fixed-point microseconds.

use alloc::collections::BTreeMap;
use alloc::vec::Vec;
use core::fmt::{self, Display, Formatter, Write};

use super::{MigrateCause, SwitchReason, Trace, TraceEventKind, WakePath};

/// [`Trace`] as Chrome trace event JSON ("JSON object format": `{"traceEvents": [...]}`);
/// format it with `Display`.
///
/// What is written, all with `"pid": 1`:
///
/// * metadata (`"ph": "M"`): `process_name` "lagom"; per track a `thread_name`
///   (`"worker <i> (cpu <c>)"`, or `"outside threads"`) and a `thread_sort_index`. Worker `i` is
///   `"tid": i + 1`; the outside track is `"tid": workers + 1`.
/// * one complete slice (`"ph": "X"`, category `run`) per run of a task on a worker, from the
///   switch to it to the switch away from it, named by the task's name. Its `args` hold
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
/// * a flow (`"ph": "s"` on the waker's track at the wakeup, `"ph": "f"` with `"bp": "e"` on
///   the wakee's track where its next run starts; `id` counts from 1) for each wakeup whose
///   wakee runs later in the trace, except in-place runnable wakeups, whose wakee may never
///   have stopped running.
/// * `"displayTimeUnit": "ns"` and `"otherData"` with the drop counts.
///
/// Timestamps are microseconds since the trace's start ([`Trace::span_ns`]), with three
/// decimals (exact ns).
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

/// A task's label, `"<prefix><name>"`: its recorded name, else `task-<id>`.
struct Name<'a> {
    prefix: &'static str,
    trace: &'a Trace,
    id: u64,
}

impl Display for Name<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self.trace.task_name(self.id) {
            Some(n) => Str(self.prefix, n).fmt(f),
            None => write!(f, "\"{}task-{}\"", self.prefix, self.id),
        }
    }
}

/// Microseconds since the start, from a monotonic timestamp.
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
        let rel = |ts: u64| Us(ts.saturating_sub(t.start_ns));
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
        if !t.outside.events.is_empty() {
            tracks.push((outside_tid, &t.outside));
        }
        for &(tid, track) in &tracks {
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
        Us(o.start.saturating_sub(t.start_ns)),
        Us(end.saturating_sub(o.start)),
        o.task,
        Opt(o.prev),
        Opt(next)
    )
}
