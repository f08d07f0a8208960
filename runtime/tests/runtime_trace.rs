//! Tracing (issue #5): the exported Chrome trace JSON, parsed with serde_json, agrees with the
//! runtime's counters and with what the workload did; tracing off records nothing; a full log
//! drops and counts; names are escaped. Every test runs on (at most) two workers.
mod runtime_util;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use lagom::Runtime;
use lagom::task::{Builder, Unparker};
use lagom::trace::{Trace, TraceEventKind};
use serde_json::Value;

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
    fn ns(&self, key: &str) -> u64 {
        (self.v[key].as_f64().expect(key) * 1000.0).round() as u64
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
fn check_json(trace: &Trace) -> Value {
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
fn instants(doc: &Value, cat: &str, key: &str) -> BTreeMap<String, u64> {
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
fn run_reasons(doc: &Value) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for v in doc["traceEvents"].as_array().unwrap() {
        if v["ph"] == "X" {
            *m.entry(v["args"]["reason"].as_str().unwrap().to_string())
                .or_default() += 1;
        }
    }
    m
}

/// 32 tasks wake each other at random and block, yield or call `cond_resched`, `rounds`
/// times each; the main thread (an outside waker) then unparks them until all have ended.
fn storm(rt: &Runtime, seed: u64, rounds: u64) {
    const TASKS: usize = 32;
    let peers: Arc<Vec<OnceLock<Unparker>>> =
        Arc::new((0..TASKS).map(|_| OnceLock::new()).collect());
    let progress = Arc::new(AtomicU64::new(0));
    let _dog = runtime_util::Watchdog::new("storm", Arc::clone(&progress), Duration::from_secs(5));
    let handles: Vec<_> = (0..TASKS)
        .map(|i| {
            let (peers, progress) = (Arc::clone(&peers), Arc::clone(&progress));
            rt.spawn(move || {
                peers[i].set(lagom::task::current_unparker()).unwrap();
                let mut rng = runtime_util::Rng(seed ^ (i as u64 + 1).wrapping_mul(0x9e37_79b9));
                for _ in 0..rounds {
                    for _ in 0..=rng.below(2) {
                        if let Some(u) = peers[rng.below(TASKS as u64) as usize].get() {
                            u.unpark();
                        }
                    }
                    match rng.below(4) {
                        0 => lagom::task::yield_now(),
                        1 => lagom::task::cond_resched(),
                        _ => lagom::task::park(),
                    }
                    progress.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    let unparkers: Vec<Unparker> = handles.iter().map(|h| h.unparker()).collect();
    while !handles.iter().all(|h| h.is_finished()) {
        for u in &unparkers {
            u.unpark();
        }
        std::thread::sleep(Duration::from_millis(1));
        progress.fetch_add(1, Ordering::Relaxed);
    }
    for h in handles {
        h.join().unwrap();
    }
}

/// Under each wakeup-feature set, the trace of a storm agrees with the counters: one wakeup
/// event per counted wakeup, path by path; one migrate event per balance pull; one run ended
/// by `schedule()` per counted switch and one per exit. And the switch sequences hold.
#[test]
fn storm_trace_agrees_with_the_counters() {
    let seed = runtime_util::seed();
    for features in [
        "",
        "NO_TTWU_QUEUE",
        "TTWU_QUEUE_ON_CPU,TTWU_QUEUE_DELAYED",
        "TTWU_DEQUEUE",
    ] {
        let rt = Runtime::builder()
            .worker_cpus(runtime_util::two_cpus())
            .features(features)
            .tracing(true)
            .trace_capacity(1 << 20)
            .build()
            .unwrap();
        storm(&rt, seed, 300);
        let (st, trace) = rt.shutdown_with_trace();
        let ctx = format!("[{features}] seed {seed}\n{st}");
        assert!(trace.enabled());
        assert_eq!(trace.dropped(), 0, "{ctx}");
        for w in trace.workers() {
            assert!(
                w.events.windows(2).all(|p| p[0].ts_ns <= p[1].ts_ns),
                "{ctx}"
            );
        }
        let doc = check_json(&trace);
        let t = st.total();
        let wakes = instants(&doc, "wakeup", "path");
        let get = |m: &BTreeMap<String, u64>, k: &str| m.get(k).copied().unwrap_or(0);
        assert_eq!(wakes.values().sum::<u64>(), t.wakeups(), "{wakes:?} {ctx}");
        for (path, counter) in [
            ("local", t.wakeups_local),
            ("queued", t.wakeups_queued),
            ("remote", t.wakeups_remote),
            ("on_cpu", t.wakeups_on_cpu),
            ("runnable_in_place", t.runnable_in_place),
            ("delayed_queued", t.runnable_queued),
        ] {
            assert_eq!(get(&wakes, path), counter, "path {path}: {wakes:?} {ctx}");
        }
        assert!(get(&wakes, "local") > 0, "{wakes:?} {ctx}");
        let migrations = instants(&doc, "migrate", "cause");
        assert_eq!(get(&migrations, "balance"), t.balance_pulls, "{ctx}");
        let reasons = run_reasons(&doc);
        let scheduled = ["block", "yield", "preempt"].map(|r| get(&reasons, r));
        assert_eq!(
            scheduled.iter().sum::<u64>(),
            t.switches_voluntary + t.switches_involuntary,
            "{reasons:?} {ctx}"
        );
        assert_eq!(get(&reasons, "exit"), t.exits, "{reasons:?} {ctx}");
        assert_eq!(get(&reasons, "unfinished"), 0, "{reasons:?} {ctx}");
        println!("[{features}] seed {seed}: wakeups {wakes:?}, migrations {migrations:?}");
        // The main thread's unparks are the outside track's wakeups.
        assert!(
            trace.outside().events.iter().all(|e| matches!(
                e.kind,
                TraceEventKind::Wakeup { waker: None, .. } | TraceEventKind::Migrate { .. }
            )),
            "{ctx}"
        );
    }
}

/// Two tasks pinned to different workers ping-pong: each appears only on its worker's
/// track, and every wakeup crosses from one track to the other.
#[test]
fn a_pinned_task_runs_only_on_its_workers_track() {
    let cpus = runtime_util::two_cpus();
    let rt = Runtime::builder()
        .worker_cpus(cpus.clone())
        .tracing(true)
        .build()
        .unwrap();
    let n = 2000u64;
    let turn = Arc::new(AtomicU64::new(0));
    let _dog = runtime_util::Watchdog::new("ping-pong", Arc::clone(&turn), Duration::from_secs(5));
    let peer: Arc<[OnceLock<Unparker>; 2]> = Arc::new(Default::default());
    let player = |me: u64| {
        let (turn, peer) = (Arc::clone(&turn), Arc::clone(&peer));
        move || {
            peer[me as usize]
                .set(lagom::task::current_unparker())
                .unwrap();
            let other = loop {
                if let Some(o) = peer[1 - me as usize].get() {
                    break o.clone();
                }
                lagom::task::yield_now();
            };
            for i in 0..n {
                while turn.load(Ordering::Acquire) != 2 * i + me {
                    lagom::task::park();
                }
                turn.store(2 * i + me + 1, Ordering::Release);
                other.unpark();
            }
        }
    };
    let last = *cpus.last().unwrap();
    let a = rt
        .spawn_with(Builder::new().name("ping").cpus([cpus[0]]), player(0))
        .unwrap();
    let b = rt
        .spawn_with(Builder::new().name("pong").cpus([last]), player(1))
        .unwrap();
    a.join().unwrap();
    b.join().unwrap();
    let (st, trace) = rt.shutdown_with_trace();
    let doc = check_json(&trace);
    let tid_of = |cpu: usize| cpus.iter().position(|&c| c == cpu).unwrap() as u64 + 1;
    let mut seen = BTreeMap::new();
    for v in doc["traceEvents"].as_array().unwrap() {
        if v["ph"] == "X" {
            let name = v["name"].as_str().unwrap();
            let want = match name {
                "ping" => tid_of(cpus[0]),
                "pong" => tid_of(last),
                _ => continue,
            };
            assert_eq!(
                v["tid"].as_u64(),
                Some(want),
                "{name} ran off its worker: {v}"
            );
            *seen.entry(name.to_string()).or_insert(0u64) += 1;
        }
    }
    // Each task runs at least once per round it waits for (blocks are woken once each).
    assert!(seen["ping"] >= 1 && seen["pong"] >= 1, "{seen:?}");
    let t = st.total();
    assert_eq!(
        instants(&doc, "wakeup", "path").values().sum::<u64>(),
        t.wakeups(),
        "{st}"
    );
    if cpus.len() == 2 {
        // Every wakeup of one by the other targets the other worker.
        for v in doc["traceEvents"].as_array().unwrap() {
            if v["ph"] == "i" && v["cat"] == "wakeup" && !v["args"]["waker"].is_null() {
                assert_ne!(v["args"]["waker"], v["args"]["target"], "{v}");
            }
        }
    }
}

/// Newly idle balance made to happen: worker 1 is kept busy by a pinned hog while a task
/// pinned to worker 0 spawns two unpinned tasks (CPU selection keeps them on the spawner's
/// busy worker); then the hog ends, worker 1 goes idle, and its balance pulls one of them.
/// The pull is a migrate event from worker 0 to worker 1.
#[test]
fn a_balance_pull_is_a_migrate_event() {
    let cpus = runtime_util::two_cpus();
    if cpus.len() < 2 {
        eprintln!("skipped: balancing needs two allowed CPUs");
        return;
    }
    let rt = Runtime::builder()
        .worker_cpus(cpus.clone())
        .tracing(true)
        .build()
        .unwrap();
    let hog_runs = Arc::new(AtomicBool::new(false));
    let hog_go = Arc::new(AtomicBool::new(false));
    let (r, g) = (Arc::clone(&hog_runs), Arc::clone(&hog_go));
    let hog = rt
        .spawn_with(Builder::new().name("hog").cpus([cpus[1]]), move || {
            r.store(true, Ordering::Release);
            while !g.load(Ordering::Acquire) {
                std::hint::spin_loop();
            }
        })
        .unwrap();
    let t0 = Instant::now();
    while !hog_runs.load(Ordering::Acquire) {
        assert!(t0.elapsed() < Duration::from_secs(10), "the hog never ran");
        std::thread::yield_now();
    }
    let worker1 = cpus[1];
    let pulled = rt
        .spawn_with(Builder::new().name("spawner").cpus([cpus[0]]), move || {
            let on_1 = Arc::new(AtomicU64::new(0));
            let child = |name: &str| {
                let on_1 = Arc::clone(&on_1);
                Builder::new()
                    .name(name)
                    .spawn(move || {
                        let me = lagom::task::current().unwrap();
                        if me.cpu == worker1 {
                            on_1.store(me.id, Ordering::Release);
                        }
                    })
                    .unwrap()
            };
            let (b, c) = (child("pulled-b"), child("pulled-c"));
            hog_go.store(true, Ordering::Release);
            // No runtime call here: this task keeps worker 0 until a child ran on worker 1.
            let t0 = Instant::now();
            while on_1.load(Ordering::Acquire) == 0 && t0.elapsed() < Duration::from_secs(10) {
                std::hint::spin_loop();
            }
            b.join().unwrap();
            c.join().unwrap();
            on_1.load(Ordering::Acquire)
        })
        .unwrap()
        .join()
        .unwrap();
    hog.join().unwrap();
    let (st, trace) = rt.shutdown_with_trace();
    assert_ne!(pulled, 0, "no child ran on worker 1\n{st}");
    let doc = check_json(&trace);
    let pulls: Vec<&Value> = doc["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["cat"] == "migrate" && v["args"]["cause"] == "balance")
        .collect();
    assert_eq!(pulls.len() as u64, st.total().balance_pulls, "{st}");
    let p = pulls
        .iter()
        .find(|v| v["args"]["task"].as_u64() == Some(pulled))
        .unwrap_or_else(|| panic!("no balance migrate of task {pulled}: {pulls:?}\n{st}"));
    assert_eq!(
        (p["args"]["from"].as_u64(), p["args"]["to"].as_u64()),
        (Some(0), Some(1))
    );
    assert_eq!(p["tid"].as_u64(), Some(2), "recorded by the pulling worker");
    assert!(p["name"].as_str().unwrap().starts_with("migrate pulled-"));
}

/// Names with quotes, backslashes, control and non-ASCII characters come out escaped: the
/// parsed JSON gives them back unchanged.
#[test]
fn task_names_are_escaped() {
    let rt = Runtime::builder()
        .worker_cpus(runtime_util::two_cpus())
        .tracing(true)
        .build()
        .unwrap();
    let names = [
        "say \"hi\"",
        "C:\\path\\",
        "line\nbreak\ttab\r",
        "bell\u{7}nul\u{0}esc\u{1b}\u{1f}",
        "schön ✓ 🚀",
        "",
    ];
    for name in names {
        rt.spawn_with(Builder::new().name(name), lagom::task::yield_now)
            .unwrap()
            .join()
            .unwrap();
    }
    let (_, trace) = rt.shutdown_with_trace();
    let text = trace.json().to_string();
    assert!(
        text.contains("\\u0007nul\\u0000esc\\u001b\\u001f"),
        "control characters"
    );
    let doc = check_json(&trace);
    let runs: Vec<&str> = doc["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["ph"] == "X")
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    for name in names {
        assert!(runs.contains(&name), "{name:?} missing from {runs:?}");
    }
}

/// Without `tracing(true)` nothing is recorded, and the export is an empty trace.
#[test]
fn tracing_off_records_nothing() {
    let rt = Runtime::builder()
        .worker_cpus(runtime_util::two_cpus())
        .build()
        .unwrap();
    storm(&rt, runtime_util::seed(), 50);
    let (st, trace) = rt.shutdown_with_trace();
    assert!(st.total().wakeups() > 0, "the workload woke nobody\n{st}");
    assert!(!trace.enabled());
    assert!(trace.is_empty() && trace.workers().is_empty() && trace.dropped() == 0);
    let doc = check_json(&trace);
    assert!(
        doc["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .all(|v| v["ph"] == "M"),
        "{doc}"
    );
}

/// A full log keeps its first events and counts the rest; the counts reach the JSON.
#[test]
fn a_full_log_drops_and_counts() {
    const CAP: usize = 64;
    let rt = Runtime::builder()
        .worker_cpus(runtime_util::two_cpus())
        .tracing(true)
        .trace_capacity(CAP)
        .build()
        .unwrap();
    storm(&rt, runtime_util::seed(), 100);
    let (st, trace) = rt.shutdown_with_trace();
    let t = st.total();
    for w in trace.workers() {
        assert!(w.events.len() <= CAP);
        if w.dropped > 0 {
            assert_eq!(w.events.len(), CAP, "a log drops only when full");
        }
    }
    assert!(
        trace.dropped() > 0,
        "the storm fit in {CAP} events per worker\n{st}"
    );
    // Everything counted was either kept or dropped (idle→task switches come on top).
    let kept_or_dropped = trace.len() as u64 + trace.dropped();
    let counted = t.wakeups() + t.switches_voluntary + t.switches_involuntary + t.exits;
    assert!(
        kept_or_dropped >= counted,
        "{kept_or_dropped} < {counted}\n{st}"
    );
    check_json(&trace);
    assert!(matches!(
        Runtime::builder().tracing(true).trace_capacity(0).build(),
        Err(lagom::Error::TraceCapacity { events: 0, .. })
    ));
}

/// A snapshot taken while the workers run is, per worker, a prefix of the final trace.
#[test]
fn a_snapshot_while_running_is_a_prefix() {
    let rt = Arc::new(
        Runtime::builder()
            .worker_cpus(runtime_util::two_cpus())
            .tracing(true)
            .build()
            .unwrap(),
    );
    let r = Arc::clone(&rt);
    let snapper = std::thread::spawn(move || {
        let mut snaps = Vec::new();
        for _ in 0..20 {
            snaps.push(r.trace());
            std::thread::sleep(Duration::from_millis(2));
        }
        snaps
    });
    storm(&rt, runtime_util::seed(), 300);
    let snaps = snapper.join().unwrap();
    let rt = Arc::into_inner(rt).expect("the snapper is done");
    let (_, last) = rt.shutdown_with_trace();
    for s in &snaps {
        for (w, fin) in s.workers().iter().zip(last.workers()) {
            assert_eq!(w.events[..], fin.events[..w.events.len()]);
        }
        check_json(s);
    }
}

/// `save` writes the JSON to a file; an unwritable path is a `TraceWrite` error.
#[test]
fn save_writes_the_json() {
    let rt = Runtime::builder().tracing(true).build().unwrap();
    rt.block_on(|| lagom::task::spawn(|| ()).join().unwrap());
    let (_, trace) = rt.shutdown_with_trace();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.json");
    trace.save(&path).unwrap();
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        trace.json().to_string()
    );
    let err = trace
        .save(dir.path().join("missing/trace.json"))
        .unwrap_err();
    assert!(matches!(err, lagom::Error::TraceWrite { .. }), "{err}");
}
