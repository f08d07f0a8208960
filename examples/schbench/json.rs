//! The `-j` JSON: schbench's one line with its `"normal"` and `"int"` objects and their keys,
//! spaced as schbench spaces them, plus a `"lagom"` object that schbench's readers ignore: the
//! scheduler, each worker's request count, and with lagom its features and counters.

use std::fmt::Write;

use crate::hist::{PERCENTILES, Summary};

/// What the JSON reports.
pub struct Results<'a> {
    /// The command line.
    pub cmdline: &'a str,
    /// `-J`.
    pub jobname: Option<&'a str>,
    /// Wakeup latencies.
    pub wakeup: &'a Summary,
    /// Request latencies (absent in pipe mode).
    pub request: Option<&'a Summary>,
    /// RPS samples (absent in pipe mode).
    pub rps: Option<&'a Summary>,
    /// The run length in seconds.
    pub runtime: u64,
    /// The port's extras, already JSON (the `"lagom"` object).
    pub extra: serde_json::Value,
}

fn string(s: &str) -> String {
    serde_json::Value::from(s).to_string()
}

/// `"<name>_pct20.0": v, …, "<name>_min": v,"<name>_max": v`.
fn stat(out: &mut String, name: &str, s: &Summary) {
    for (p, v) in PERCENTILES.iter().zip(s.percentiles()) {
        let _ = write!(out, ", \"{name}_pct{p:.1}\": {}", v.value);
    }
    let _ = write!(out, ", \"{name}_min\": {},\"{name}_max\": {}", s.min, s.max);
}

/// The JSON line (without a newline).
pub fn line(r: &Results) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "{{\"normal\": {{\"version\": {},\"hostname\": {},\"sched_ext\": {},\"cmdline\": {}",
        string(&crate::sys::kernel_release()),
        string(&crate::sys::hostname()),
        string(&crate::sys::sched_ext()),
        string(r.cmdline)
    );
    if let Some(j) = r.jobname {
        let _ = write!(out, ",\"jobname\": {}", string(j));
    }
    let time = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let _ = write!(out, "}},\"int\": {{\"time\": {time}");
    stat(&mut out, "wakeup_latency", r.wakeup);
    if let Some(s) = r.request {
        stat(&mut out, "request_latency", s);
    }
    if let Some(s) = r.rps {
        stat(&mut out, "rps", s);
    }
    let _ = write!(
        out,
        ", \"runtime\": {}}},\"lagom\": {}}}",
        r.runtime, r.extra
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_values() {
        let mut w = Summary::default();
        (1..=10).for_each(|v| w.add(v));
        let r = Results {
            cmdline: "./schbench -j - \"q\"",
            jobname: Some("job"),
            wakeup: &w,
            request: Some(&w),
            rps: None,
            runtime: 2,
            extra: serde_json::json!({"runtime": "os"}),
        };
        let text = line(&r);
        assert!(!text.contains('\n'));
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["normal"]["cmdline"], "./schbench -j - \"q\"");
        assert_eq!(v["normal"]["jobname"], "job");
        for k in ["version", "hostname", "sched_ext"] {
            assert!(v["normal"][k].is_string(), "{k}");
        }
        let int = &v["int"];
        assert_eq!(int["wakeup_latency_pct20.0"], 2);
        assert_eq!(int["request_latency_pct99.9"], 10);
        assert_eq!(int["wakeup_latency_min"], 1);
        assert_eq!(int["wakeup_latency_max"], 10);
        assert_eq!(int["runtime"], 2);
        assert!(int["time"].is_u64());
        assert!(int.get("rps_pct50.0").is_none());
        assert_eq!(v["lagom"]["runtime"], "os");
        assert!(text.contains("\"wakeup_latency_min\": 1,\"wakeup_latency_max\": 10, "));
    }
}
