//! The bundled schbench, run as a program: its output parses as schbench's does (every
//! table, the `average rps:` line, the JSON keys) in both runtimes, no worker starves, bad
//! input exits 1 with usage or a one-line error, Ctrl-C and a closed stdout end cleanly.
//! Runs are 1 s each.

mod common;

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{LATENCY, PIPE, RPS, check_table, parse, run, schbench};

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn json(o: &std::process::Output) -> serde_json::Value {
    let text = String::from_utf8_lossy(&o.stdout);
    assert_eq!(text.lines().count(), 1, "one JSON line on stdout: {text:?}");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// `-m 2 -t 2 -r 1 -i 1 -j -` in `runtime`: one interval block and the final block, both
/// well-formed; the JSON carries schbench's keys with the final tables' values; every one
/// of the 4 workers served requests.
fn normal_run(runtime: &str, extra: &str) -> (String, serde_json::Value) {
    let o = run(&format!(
        "--runtime {runtime} -m 2 -t 2 -r 1 -i 1 -j - {extra}"
    ));
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    let (blocks, _) = parse(&err);
    assert_eq!(blocks.len(), 2, "interval block + final block: {err}");
    for b in &blocks {
        assert_eq!(b.tables.len(), 3, "{err}");
        check_table(&b.tables[0], "Wakeup Latencies", LATENCY);
        check_table(&b.tables[1], "Request Latencies", LATENCY);
        check_table(&b.tables[2], "RPS", RPS);
        assert!(b.sched_delay.is_some());
    }
    assert!(blocks[0].current_rps.is_some() && blocks[0].average_rps.is_none());
    let fin = &blocks[1];
    assert_eq!(
        fin.sched_delay,
        Some((0, 0)),
        "the final sched delay is always 0"
    );
    let v = json(&o);
    for k in ["version", "hostname", "sched_ext", "cmdline"] {
        assert!(v["normal"][k].is_string(), "normal.{k}: {v}");
    }
    let int = &v["int"];
    assert!(int["time"].is_u64());
    assert_eq!(int["runtime"], 1);
    for (t, name) in fin
        .tables
        .iter()
        .zip(["wakeup_latency", "request_latency", "rps"])
    {
        assert_eq!(t.runtime, 1);
        for p in ["20.0", "50.0", "90.0", "99.0", "99.9"] {
            assert!(int[format!("{name}_pct{p}")].is_u64(), "{name}_pct{p}: {v}");
        }
        for r in &t.rows {
            assert_eq!(
                int[format!("{name}_pct{:.1}", r.pct)],
                r.value,
                "{name} {r:?}"
            );
        }
        assert_eq!(int[format!("{name}_min")], t.min);
        assert_eq!(int[format!("{name}_max")], t.max);
    }
    let reqs: Vec<u64> = v["lagom"]["worker_requests"]
        .as_array()
        .expect("worker_requests")
        .iter()
        .map(|n| n.as_u64().unwrap())
        .collect();
    assert_eq!(reqs.len(), 4, "-m 2 -t 2: four workers");
    assert!(reqs.iter().all(|&n| n > 0), "a worker starved: {reqs:?}");
    let total: u64 = reqs.iter().sum();
    // Every request records a request latency (each takes ≥ 100 µs of sleep).
    assert_eq!(fin.tables[1].total, total);
    assert!(fin.tables[0].total <= total);
    let avg = fin.average_rps.expect("average rps line");
    assert!(
        (avg - total as f64).abs() < 0.01,
        "{avg} vs {total} requests in 1 s"
    );
    assert_eq!(v["lagom"]["runtime"], runtime);
    (err, v)
}

#[test]
fn os_output_parses_and_every_worker_runs() {
    let (_, v) = normal_run("os", "");
    assert!(v["lagom"]["stats"].is_null());
}

#[test]
fn lagom_output_parses_and_every_worker_runs() {
    let (err, v) = normal_run("lagom", "--stats");
    // --stats: lagom's counters after the tables.
    let after = err.rsplit("sched delay: ").next().expect("final block");
    assert!(after.contains("switches_voluntary"), "{err}");
    assert!(v["lagom"]["stats"]["switches_voluntary"].as_u64().unwrap() > 0);
    assert!(
        v["lagom"]["features"]
            .as_str()
            .unwrap()
            .contains("DELAY_DEQUEUE")
    );
}

#[test]
fn pipe_mode_output_parses() {
    let o = run("-p 4096 -t 2 -r 1 -j -");
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    let (blocks, _) = parse(&err);
    assert_eq!(blocks.len(), 1, "{err}");
    check_table(&blocks[0].tables[0], "Wakeup Latencies", PIPE);
    let t = blocks[0].transfer.as_deref().expect("transfer line");
    let rest = t.strip_prefix("avg worker transfer: ").unwrap();
    let (ops, bytes) = rest.split_once(" ops/sec ").unwrap();
    assert!(ops.parse::<f64>().unwrap() > 0.0, "{t}");
    assert!(bytes.ends_with("B/s"), "{t}");
    let v = json(&o);
    assert!(v["int"]["wakeup_latency_pct50.0"].is_u64());
    assert!(v["int"].get("request_latency_pct50.0").is_none());
    assert!(v["int"].get("rps_pct50.0").is_none());
}

#[test]
fn rps_mode_runs_and_reports() {
    let o = run("--runtime os -R 200 -t 2 -r 1 -j -");
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    let (blocks, _) = parse(&err);
    let fin = blocks.last().expect("final block");
    check_table(&fin.tables[1], "Request Latencies", LATENCY);
    assert!(fin.tables[1].total > 0, "{err}");
    assert!(fin.average_rps.unwrap() > 0.0);
}

#[test]
fn split_mode_prints_its_sizes() {
    let o = run("--split 30 -t 1 -r 1 -L");
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("split mode: 30% private (76 KB per thread), 70% shared (179 KB total)"));
    assert!(err.contains("matrix sizes: private=56, shared=87"));
}

/// Runs schbench with `args` and expects exit status 1, no panic, nothing on stdout.
fn fails(args: &[&str]) -> String {
    let o = Command::new(schbench()).args(args).output().unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
    assert!(!err.contains("panicked"), "{args:?}: {err}");
    assert!(o.stdout.is_empty(), "{args:?}");
    err
}

#[test]
fn bad_input_exits_1_with_usage_or_one_line() {
    // Usage after the option's message.
    for args in [
        &["--bogus"][..],
        &["-x"],
        &["-m"],
        &["--help"],
        &["--c", "1"],
    ] {
        let err = fails(args);
        assert!(err.contains("schbench usage"), "{args:?}: {err}");
    }
    assert!(fails(&["--bogus"]).starts_with("schbench: unrecognized option '--bogus'\n"));
    // One line naming the value and what is allowed.
    let one_line = [
        (&["-m", "abc"][..], "-m needs a whole number, got 'abc'"),
        (&["-r", "1", "extra"], "Error Extra arguments 'extra'"),
        (&["--split", "101"], "between 0 and 100, got 101"),
        (&["-M", "0-"], "'0-' is not a CPU list"),
        (
            &["--cpus", "4096"],
            "CPU 4096 in --cpus 4096 is not allowed",
        ),
        (&["-W", "4095"], "is not one of lagom's worker CPUs"),
        (
            &["--runtime", "os", "-M", "4095"],
            "CPU 4095 in -M 4095 is not allowed",
        ),
        (&["--runtime", "os", "--stats"], "--stats is a lagom option"),
        (
            &["--runtime", "os", "--features", "NO_DELAY_DEQUEUE"],
            "--features is a lagom",
        ),
        (
            &["--runtime", "os", "--trace", "/tmp/x.json"],
            "--trace is a lagom option",
        ),
        (
            &["--runtime", "os", "--cpus", "0"],
            "--cpus is a lagom option",
        ),
    ];
    for (args, want) in one_line {
        let err = fails(args);
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

#[test]
fn unknown_feature_lists_the_valid_names() {
    let err = fails(&["--features", "BOGUS"]);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("BOGUS"), "{err}");
    for name in lagom_policy::Features::NAMES {
        assert!(err.contains(name), "{name} missing from {err}");
    }
}

/// Waits for `child` for at most `limit`.
fn wait_for(child: &mut std::process::Child, limit: Duration) -> std::process::ExitStatus {
    let t0 = Instant::now();
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st;
        }
        if t0.elapsed() > limit {
            let _ = child.kill();
            panic!("schbench did not end within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn ctrl_c_ends_the_run_with_the_tables_so_far() {
    let start = |rt: &str| {
        Command::new(schbench())
            .args(["--runtime", rt, "-r", "60", "-j", "-"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let mut kids = [start("lagom"), start("os")];
    std::thread::sleep(Duration::from_millis(1500));
    for k in &kids {
        // SAFETY: kill(2) on the child's pid, which has not been waited for yet.
        unsafe { libc::kill(k.id() as i32, libc::SIGINT) };
    }
    for k in &mut kids {
        let st = wait_for(k, Duration::from_secs(10));
        let mut err = String::new();
        k.stderr.take().unwrap().read_to_string(&mut err).unwrap();
        let mut out = String::new();
        k.stdout.take().unwrap().read_to_string(&mut out).unwrap();
        assert!(st.success(), "{st:?}: {err}");
        let (blocks, _) = parse(&err);
        let fin = blocks.last().expect("final tables");
        assert!(fin.average_rps.unwrap() > 0.0, "{err}");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["lagom"]["interrupted"], true);
        // The run stopped at the interrupt, not at -r 60: it reports what it ran.
        let secs = v["int"]["runtime"].as_u64().unwrap();
        assert!((1..10).contains(&secs), "{secs}");
        assert_eq!(fin.tables[0].runtime, secs);
    }
}

#[test]
fn closed_stdout_does_not_panic() {
    let mut child = Command::new(schbench())
        .args(["-r", "1", "-t", "1", "-j", "-"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let st = wait_for(&mut child, Duration::from_secs(10));
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(st.success(), "{st:?}: {err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(err.contains("average rps: "), "{err}");
}
