//! The final report of a run: the JSON line first (stdout or the `-j` file), then
//! schbench's final block on stderr, then lagom's counters with `--stats`.

use std::io::Write;

use lagom::runtime::{Stats, WorkerStats};

use crate::hist::Summary;
use crate::opts::{Backend, Opts};
use crate::{control, eprint_all, json, report};

/// What a finished run hands to the report.
pub struct Finished {
    /// Wakeup latencies, summed over workers.
    pub wakeup: Summary,
    /// Request latencies, summed over workers.
    pub request: Summary,
    /// The control loop's RPS samples and how it ended.
    pub outcome: control::Outcome,
    /// Requests each worker served.
    pub worker_requests: Vec<u64>,
    /// The CPU each worker ran its last request on.
    pub worker_cpus: Vec<u32>,
    /// Σ over workers of their µs of run time (pipe mode's transfer rate).
    pub worker_runtime_us: u64,
    /// Average sched delay of message threads and workers, µs.
    pub sched_delay: (u64, u64),
    /// Auto-RPS: the last rate, all message threads together.
    pub final_rps_goal: u64,
}

/// lagom's counters as a JSON object, one key per counter.
fn stats_json(s: &WorkerStats) -> serde_json::Value {
    s.counters()
        .map(|(name, v)| (name.to_string(), serde_json::Value::from(v)))
        .collect::<serde_json::Map<_, _>>()
        .into()
}

/// Prints the final report: JSON first (stdout or the `-j` file), then the tables on stderr.
pub fn print(o: &Opts, f: &Finished, stats: Option<&Stats>) -> Result<(), String> {
    let elapsed_s = f.outcome.elapsed_us as f64 / 1e6;
    // An interrupted or endless run reports what it ran; otherwise, as schbench, `-r`.
    let (secs, divisor) = if f.outcome.interrupted || o.runtime == 0 {
        (f.outcome.elapsed_us / 1_000_000, elapsed_s.max(1e-6))
    } else {
        (o.runtime, o.runtime as f64)
    };
    let pipe = o.pipe > 0;
    let mut failed = Ok(());
    if let Some(path) = &o.json {
        let features = o
            .features
            .clone()
            .or_else(|| std::env::var("LAGOM_FEATURES").ok());
        let extra = serde_json::json!({
            "runtime": o.backend.name(),
            "message_threads": o.message_threads,
            "worker_threads": f.worker_requests.len() / o.message_threads,
            "worker_requests": f.worker_requests,
            "worker_last_cpu": f.worker_cpus,
            "interrupted": f.outcome.interrupted,
            "features": (o.backend == Backend::Lagom).then(|| {
                lagom_policy::Features::parse(features.as_deref().unwrap_or(""))
                    .map(|f| f.to_string())
                    .unwrap_or_default()
            }),
            "stats": stats.map(|s| stats_json(&s.total())),
        });
        let line = json::line(&json::Results {
            cmdline: &o.cmdline,
            jobname: o.jobname.as_deref(),
            wakeup: &f.wakeup,
            request: (!pipe).then_some(&f.request),
            rps: (!pipe).then_some(&f.outcome.rps),
            runtime: secs,
            extra,
        }) + "\n";
        if path == "-" {
            // A closed stdout (`| head`) just loses the line.
            let _ = std::io::stdout().lock().write_all(line.as_bytes());
        } else if let Err(e) = std::fs::write(path, line) {
            failed = Err(format!("schbench: cannot write the JSON to {path}: {e}"));
        }
    }
    let mut out = String::new();
    if pipe {
        report::pipe_table(&mut out, secs, &f.wakeup);
        let total: u64 = f.worker_requests.iter().sum();
        let ops = if f.worker_runtime_us == 0 {
            0.0
        } else {
            total as f64 * 1e6 / f.worker_runtime_us as f64
        };
        report::pipe_transfer(&mut out, ops, o.pipe);
    } else {
        report::tables(&mut out, secs, &f.wakeup, &f.request, &f.outcome.rps);
        if o.auto_rps > 0 {
            out.push_str(&format!("final rps goal was {}\n", f.final_rps_goal));
        } else {
            let total: u64 = f.worker_requests.iter().sum();
            out.push_str(&format!("average rps: {:.2}\n", total as f64 / divisor));
        }
        report::sched_delay(&mut out, f.sched_delay.0, f.sched_delay.1);
    }
    if let (true, Some(s)) = (o.stats, stats) {
        out.push_str(&s.to_string());
    }
    eprint_all(&out);
    failed
}
