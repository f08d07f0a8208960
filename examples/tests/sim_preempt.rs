//! `sim --preempt`: the simulator's preemption mode from the command line — lagom's
//! cooperative scheduling points or the kernel's resched IPI and stopper (`resched_curr` →
//! `smp_send_reschedule`, `stop_one_cpu_nowait` → `active_load_balance_cpu_stop`) — and its
//! refusal of bad values with status 2.

#[allow(dead_code)]
mod common;

use std::process::{Command, Output};

use common::example;

fn sim(args: &[&str]) -> Output {
    Command::new(example("sim"))
        .args(["asym_stall_drift", "--wakeups", "2000", "--json"])
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn sim_reports_the_preemption_mode_it_ran_under() {
    for (args, label) in [
        (&[][..], "cooperative"),
        (&["--preempt", "cooperative"][..], "cooperative"),
        (&["--preempt", "kernel"][..], "kernel:2us"),
        (&["--preempt", "kernel:500ns"][..], "kernel:500ns"),
        (&["--preempt", "kernel:0"][..], "kernel:0ns"),
    ] {
        let o = sim(args);
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(
            out.contains(&format!("\"preempt\": \"{label}\"")),
            "{args:?}: {out}"
        );
    }
}

#[test]
fn sim_rejects_a_bad_preemption_mode_with_status_2() {
    for bad in [
        "eager",
        "",
        "kernel:",
        "kernel:abc",
        "kernel:-1us",
        "kernel:99999999999999s",
        "cooperative:2us",
        "kernel:2us:3us",
    ] {
        let o = sim(&["--preempt", bad]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "`{bad}`: {err}");
        assert!(err.contains("--preempt"), "`{bad}`: {err}");
        assert!(o.stdout.is_empty(), "`{bad}`");
    }
}
