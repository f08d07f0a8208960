//! `--features` where an example runs more than one side: `schbench_ab` (a base set under each
//! lagom configuration's own, never for the os runs) and `sim_check` (the same set for the
//! threaded runtime and the simulator, from `--features` or `LAGOM_FEATURES`).

#[allow(dead_code)]
mod common;

use std::process::Command;

use common::example;

/// `schbench_ab` against a stand-in for schbench that logs its arguments, one run per line,
/// and prints an empty JSON object (every figure NaN, which the tables print as such).
fn schbench_ab_calls(extra: &[&str]) -> Vec<String> {
    let dir = std::env::temp_dir().join(format!("lagom-features-flag-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let name = extra.join("_");
    let log = dir.join(format!("calls-{name}.log"));
    let bin = dir.join(format!("fake-schbench-{name}"));
    std::fs::write(&bin, "#!/bin/sh\necho \"$*\" >> \"$FAKE_LOG\"\necho '{}'\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    // A process forked by another test thread while the script was open for writing holds
    // it open until its exec, and running the script then fails with ETXTBSY: try again.
    let mut tries = 0;
    let o = loop {
        let _ = std::fs::remove_file(&log);
        let o = Command::new(example("schbench_ab"))
            .args(["-r", "1", "--runs", "1", "--bin"])
            .arg(&bin)
            .args(extra)
            .env("FAKE_LOG", &log)
            .output()
            .unwrap();
        tries += 1;
        if o.status.success() || tries == 20 || !String::from_utf8_lossy(&o.stderr).contains("busy")
        {
            break o;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let calls = std::fs::read_to_string(&log).unwrap();
    calls.lines().map(str::to_string).collect()
}

/// The `--features` value of one logged call, if it has one.
fn features_of(call: &str) -> Option<&str> {
    let mut words = call.split_whitespace();
    words.find(|w| *w == "--features")?;
    Some(words.next().unwrap_or(""))
}

#[test]
fn schbench_ab_puts_the_base_set_under_each_lagom_configuration() {
    let calls = schbench_ab_calls(&["--features", "TTWU_QUEUE_DELAYED"]);
    // 4 rows × 5 configurations.
    assert_eq!(calls.len(), 20, "{calls:#?}");
    let mut seen = std::collections::BTreeSet::new();
    for call in &calls {
        if call.contains("--runtime os") {
            assert_eq!(features_of(call), None, "an os run got features: {call}");
        } else {
            let f = features_of(call).unwrap_or_else(|| panic!("no --features in {call}"));
            assert!(f.starts_with("TTWU_QUEUE_DELAYED"), "{call}");
            seen.insert(f.to_string());
        }
    }
    let want = [
        "TTWU_QUEUE_DELAYED",
        "TTWU_QUEUE_DELAYED,NO_DELAY_DEQUEUE",
        "TTWU_QUEUE_DELAYED,TTWU_QUEUE_DELAYED",
        "TTWU_QUEUE_DELAYED,NO_DELAY_ZERO",
    ];
    assert_eq!(
        seen,
        want.iter().map(|s| s.to_string()).collect(),
        "{calls:#?}"
    );
}

#[test]
fn schbench_ab_without_features_runs_the_seeds_sets_alone() {
    let calls = schbench_ab_calls(&[]);
    let seen: std::collections::BTreeSet<_> = calls.iter().filter_map(|c| features_of(c)).collect();
    let want = [
        "",
        "NO_DELAY_DEQUEUE",
        "TTWU_QUEUE_DELAYED",
        "NO_DELAY_ZERO",
    ];
    assert_eq!(seen, want.into_iter().collect(), "{calls:#?}");
}

#[test]
fn schbench_ab_rejects_an_unknown_feature_with_status_2() {
    let o = Command::new(example("schbench_ab"))
        .args(["--features", "BOGUS"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("BOGUS") && err.contains("DELAY_DEQUEUE"),
        "{err}"
    );
}

/// The runtime and simulator values of `sim_check`'s row `case` / `what`.
fn row(out: &str, case: &str, what: &str) -> (f64, f64) {
    let line = out
        .lines()
        .find(|l| l.starts_with(case) && l[case.len()..].trim_start().starts_with(what))
        .unwrap_or_else(|| panic!("no row {case} {what} in\n{out}"));
    let nums: Vec<f64> = line
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    (nums[0], nums[1])
}

/// Runs a short `sim_check` with `args` and, if set, `LAGOM_FEATURES`.
fn sim_check(args: &[&str], env: Option<&str>) -> std::process::Output {
    let mut cmd = Command::new(example("sim_check"));
    cmd.args(["-n", "2000", "--seconds", "0.2"]).args(args);
    match env {
        Some(v) => cmd.env("LAGOM_FEATURES", v),
        None => cmd.env_remove("LAGOM_FEATURES"),
    };
    cmd.output().unwrap()
}

#[test]
fn sim_check_runs_both_sides_with_the_same_features() {
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        eprintln!("SKIPPED: sim_check needs two CPUs");
        return;
    }
    // Without delayed dequeue a parked task is always off the runqueue, so each wakeup of
    // the one-worker pipe is a local one on both sides, none in place; with the defaults
    // (delayed dequeue) the simulator wakes in place.
    for (args, env) in [
        (&["--features", "NO_DELAY_DEQUEUE"][..], None),
        (&[][..], Some("NO_DELAY_DEQUEUE")),
    ] {
        let o = sim_check(args, env);
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert!(
            out.starts_with("features (both sides): NO_DELAY_DEQUEUE\n"),
            "{out}"
        );
        // The simulator exactly; the runtime's counts allow a stray wakeup or two.
        let (rt_in_place, sim_in_place) = row(&out, "pipe", "in-place wakeups");
        let (rt_local, sim_local) = row(&out, "pipe", "local wakeups");
        assert_eq!((sim_in_place, sim_local), (0.0, 2.0), "{out}");
        assert!(rt_in_place <= 0.01 && rt_local >= 1.99, "{out}");
    }
    let o = sim_check(&[], None);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.starts_with("features (both sides): default\n"), "{out}");
    assert_eq!(row(&out, "pipe", "in-place wakeups").1, 2.0, "{out}");
}

#[test]
fn sim_check_rejects_an_unknown_feature_with_status_2() {
    for (args, env) in [
        (&["--features", "BOGUS"][..], None),
        (&[][..], Some("BOGUS")),
    ] {
        let o = sim_check(args, env);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(
            err.contains("BOGUS") && err.contains("DELAY_DEQUEUE"),
            "{err}"
        );
        assert!(o.stdout.is_empty());
    }
}
