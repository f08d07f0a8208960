//! Helpers of the trace tests: the checks every exported trace must pass (parsed with
//! serde_json), counts over its events, and a seeded wakeup storm.
#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};

use lagom::Runtime;
use lagom::trace::Trace;
use serde_json::Value;

use crate::runtime_util;

/// One parsed trace event.
struct Ev<'a> {
    v: &'a Value,
}

impl<'a> Ev<'a> {
    fn ph(&self) -> &'a str {
        self.v["ph"].as_str().expect("ph")
    }
    fn cat(&self) -> &'a str {
        self.v["cat"].as_str().unwrap_or("")
    }
    fn tid(&self) -> u64 {
        self.v["tid"].as_u64().expect("tid")
    }
    /// A microsecond field as integer nanoseconds (the exporter writes exact ns).
    /// A timestamp or duration in the export's unit, 1/1024 µs (`lagom_trace`'s `ChromeJson`:
    /// exact in binary, so sums compare exactly); named `ns` for the nanosecond it nearly is.
    fn ns(&self, key: &str) -> u64 {
        let steps = self.v[key].as_f64().expect(key) * 1024.0;
        assert_eq!(
            steps.fract(),
            0.0,
            "{key} is not in steps of 1/1024 µs: {}",
            self.v
        );
        steps as u64
    }
    fn arg(&self, key: &str) -> &'a Value {
        &self.v["args"][key]
    }
    fn name(&self) -> &'a str {
        self.v["name"].as_str().expect("name")
    }
}

/// Parses `trace`'s JSON and checks what holds for every trace: the top-level shape, one
/// named track per worker, the switch sequence of each worker track, the flows. Returns the
/// parsed document.
pub fn check_json(trace: &Trace) -> Value {
    let text = trace.json().to_string();
    let doc: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("bad JSON: {e}"));
    let events: Vec<Ev> = doc["traceEvents"]
        .as_array()
        .expect("traceEvents")
        .iter()
        .map(|v| Ev { v })
        .collect();
    assert_eq!(doc["otherData"]["dropped"].as_u64(), Some(trace.dropped()));
    let workers = trace.workers().len() as u64;
    // Worker i is tid i + 1, named after its CPU.
    for (i, w) in trace.workers().iter().enumerate() {
        let tid = i as u64 + 1;
        let meta = events
            .iter()
            .find(|e| e.ph() == "M" && e.name() == "thread_name" && e.tid() == tid)
            .unwrap_or_else(|| panic!("no thread_name for worker {i}"));
        let want = format!("worker {i} (cpu {})", w.cpu.unwrap());
        assert_eq!(meta.arg("name").as_str(), Some(want.as_str()));
    }
    // Per worker track, the run slices follow the switch sequence.
    for tid in 1..=workers {
        let runs: Vec<&Ev> = events
            .iter()
            .filter(|e| e.ph() == "X" && e.tid() == tid)
            .collect();
        let mut last_ts = 0;
        for (k, e) in runs.iter().enumerate() {
            assert!(
                e.ns("ts") >= last_ts,
                "tid {tid}: slice {k} goes back in time"
            );
            last_ts = e.ns("ts");
            if k == 0 {
                assert!(
                    e.arg("prev").is_null(),
                    "tid {tid}: the first run follows idle"
                );
            }
            let end = e.ns("ts") + e.ns("dur");
            let Some(b) = runs.get(k + 1) else { break };
            assert!(
                b.ns("ts") >= end,
                "tid {tid}: slices {k} and {} overlap",
                k + 1
            );
            assert_ne!(
                e.arg("reason"),
                "unfinished",
                "tid {tid}: only the last may be open"
            );
            match e.arg("next").as_u64() {
                Some(next) => {
                    assert_eq!(
                        b.ns("ts"),
                        end,
                        "tid {tid}: a switch to a task starts its run"
                    );
                    assert_eq!(b.arg("task").as_u64(), Some(next), "tid {tid}: slice {k}");
                    assert_eq!(b.arg("prev"), e.arg("task"), "tid {tid}: slice {}", k + 1);
                }
                None => assert!(
                    b.arg("prev").is_null(),
                    "tid {tid}: slice {} after idle",
                    k + 1
                ),
            }
        }
    }
    // Each track's slices, instants and flow starts come in time order.
    for tid in 1..=workers + 1 {
        let ts: Vec<u64> = events
            .iter()
            .filter(|e| e.tid() == tid && matches!(e.ph(), "X" | "i" | "s"))
            .map(|e| e.ns("ts"))
            .collect();
        assert!(
            ts.windows(2).all(|p| p[0] <= p[1]),
            "tid {tid} out of order"
        );
    }
    // Wakeups: on a worker's track the waker is that worker; outside, none.
    for e in events
        .iter()
        .filter(|e| e.cat() == "wakeup" && e.ph() == "i")
    {
        match e.arg("waker").as_u64() {
            Some(w) => assert_eq!(e.tid(), w + 1),
            None => assert_eq!(e.tid(), workers + 1),
        }
        assert!(e.arg("target").as_u64().unwrap() < workers);
    }
    // Flows: each start has one finish, not earlier, where a run of the wakee starts.
    let mut starts: HashMap<u64, u64> = HashMap::new();
    for e in events.iter().filter(|e| e.ph() == "s") {
        assert!(
            starts
                .insert(e.v["id"].as_u64().unwrap(), e.ns("ts"))
                .is_none()
        );
    }
    let run_starts: Vec<(u64, u64)> = events
        .iter()
        .filter(|e| e.ph() == "X")
        .map(|e| (e.tid(), e.ns("ts")))
        .collect();
    let mut finished = 0;
    for e in events.iter().filter(|e| e.ph() == "f") {
        let s = starts[&e.v["id"].as_u64().unwrap()];
        assert!(e.ns("ts") >= s, "a flow ends before it starts");
        assert!(
            run_starts.contains(&(e.tid(), e.ns("ts"))),
            "a flow ends off a run start"
        );
        finished += 1;
    }
    assert_eq!(finished, starts.len());
    doc
}

/// Counts of the instant events by category and `args[key]`.
pub fn instants(doc: &Value, cat: &str, key: &str) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for v in doc["traceEvents"].as_array().unwrap() {
        if v["ph"] == "i" && v["cat"] == cat {
            *m.entry(v["args"][key].as_str().unwrap().to_string())
                .or_default() += 1;
        }
    }
    m
}

/// Run slices by their `reason`.
pub fn run_reasons(doc: &Value) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for v in doc["traceEvents"].as_array().unwrap() {
        if v["ph"] == "X" {
            *m.entry(v["args"]["reason"].as_str().unwrap().to_string())
                .or_default() += 1;
        }
    }
    m
}

/// 32 tasks wake each other at random and block, yield or call `cond_resched`, about
/// `rounds` times each, seeded by test `test`'s seed; the main thread then unparks each once
/// and they must all end (`runtime_util::storm`). Returns the seed.
pub fn storm(rt: &Runtime, test: &str, rounds: u64) -> u64 {
    let seed = runtime_util::seed(test);
    let what = runtime_util::replay(test, seed);
    runtime_util::storm(rt, seed, &what, 32, 2, runtime_util::Stop::Rounds(rounds));
    seed
}
