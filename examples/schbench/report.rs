//! The text tables, in schbench's exact format, for stderr.

use std::fmt::Write;

use crate::hist::{PERCENTILES, Summary};

/// Rows of a latency table: indices into [`PERCENTILES`] and whether the row is starred.
const LATENCY_ROWS: &[(usize, bool)] = &[(1, false), (2, false), (3, true), (4, false)];
/// Rows of the RPS table.
const RPS_ROWS: &[(usize, bool)] = &[(0, false), (1, true), (2, false)];
/// Rows of the pipe-mode wakeup table.
const PIPE_ROWS: &[(usize, bool)] = &[(0, false), (1, false), (2, false), (3, true), (4, false)];

/// One table: header, rows, min/max footer.
fn table(
    out: &mut String,
    label: &str,
    units: &str,
    secs: u64,
    s: &Summary,
    rows: &[(usize, bool)],
) {
    let pct = s.percentiles();
    let _ = writeln!(
        out,
        "{label} percentiles ({units}) runtime {secs} (s) ({} total samples)",
        s.total()
    );
    for &(i, star) in rows {
        let _ = writeln!(
            out,
            "\t{}{:.1}th: {:<10} ({} samples)",
            if star { "* " } else { "  " },
            PERCENTILES[i],
            pct[i].value,
            pct[i].samples
        );
    }
    let _ = writeln!(out, "\t  min={}, max={}", s.min, s.max);
}

/// The three tables of normal and RPS mode.
pub fn tables(out: &mut String, secs: u64, wakeup: &Summary, request: &Summary, rps: &Summary) {
    table(out, "Wakeup Latencies", "usec", secs, wakeup, LATENCY_ROWS);
    table(
        out,
        "Request Latencies",
        "usec",
        secs,
        request,
        LATENCY_ROWS,
    );
    table(out, "RPS", "requests", secs, rps, RPS_ROWS);
}

/// The pipe-mode wakeup table (with a 20th-percentile row).
pub fn pipe_table(out: &mut String, secs: u64, wakeup: &Summary) {
    table(out, "Wakeup Latencies", "usec", secs, wakeup, PIPE_ROWS);
}

/// `sched delay: message <u> (usec) worker <u> (usec)`.
pub fn sched_delay(out: &mut String, message_us: u64, worker_us: u64) {
    let _ = writeln!(
        out,
        "sched delay: message {message_us} (usec) worker {worker_us} (usec)"
    );
}

/// `avg worker transfer: <ops>/sec <bytes><unit>/s`.
pub fn pipe_transfer(out: &mut String, ops_per_sec: f64, bytes: u64) {
    let mut rate = ops_per_sec * bytes as f64;
    let units = ["B", "KB", "MB", "GB", "TB", "PB", "EB"];
    let mut u = 0;
    while rate >= 1024.0 && u + 1 < units.len() {
        rate /= 1024.0;
        u += 1;
    }
    let _ = writeln!(
        out,
        "avg worker transfer: {ops_per_sec:.2} ops/sec {rate:.2}{}/s",
        units[u]
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_format_is_schbenchs() {
        let mut w = Summary::default();
        for v in 1..=10 {
            w.add(v);
        }
        let mut out = String::new();
        table(&mut out, "Wakeup Latencies", "usec", 10, &w, LATENCY_ROWS);
        assert_eq!(
            out,
            "Wakeup Latencies percentiles (usec) runtime 10 (s) (10 total samples)\n\
             \t  50.0th: 5          (3 samples)\n\
             \t  90.0th: 9          (4 samples)\n\
             \t* 99.0th: 10         (1 samples)\n\
             \t  99.9th: 10         (0 samples)\n\
             \t  min=1, max=10\n"
        );
        let mut out = String::new();
        table(&mut out, "RPS", "requests", 3, &w, RPS_ROWS);
        assert!(
            out.contains("\t* 50.0th: 5          (3 samples)\n"),
            "{out}"
        );
        assert!(out.starts_with(
            "RPS percentiles (requests) runtime 3 (s) (10 total samples)\n\t  20.0th: 2 "
        ));
    }

    #[test]
    fn transfer_units() {
        let mut out = String::new();
        pipe_transfer(&mut out, 20967.83, 65536);
        assert_eq!(out, "avg worker transfer: 20967.83 ops/sec 1.28GB/s\n");
        let mut out = String::new();
        pipe_transfer(&mut out, 10.0, 10);
        assert_eq!(out, "avg worker transfer: 10.00 ops/sec 100.00B/s\n");
    }
}
