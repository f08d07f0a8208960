//! Simulated scenarios whose answers can be computed by hand: CPU shares of hogs by weight,
//! the pipe's round trip from the switch cost, and the counters each path bumps.

use lagom_policy::weight_of_nice;
use lagom_sim::{Machine, Options, Report, Sim, builtin, parse};

fn run(text: &str, machine: &str) -> Report {
    let s = parse(text).unwrap_or_else(|e| panic!("{e}"));
    let m = Machine::named(machine).unwrap();
    let mut sim = Sim::new(&s, m, Options::of(&s).unwrap()).unwrap_or_else(|e| panic!("{e}"));
    sim.run();
    Report::of(&sim)
}

fn share(r: &Report, task: &str) -> f64 {
    let t = r.tasks.iter().find(|t| t.name == task).unwrap();
    t.stats.measured_cpu_time as f64 / r.measured as f64
}

fn hogs(a: i32, b: i32) -> String {
    format!(
        "duration 2s\nwarmup 100ms\ntask a cpus=0 nice={a}\n  run 100s\nend\ntask b cpus=0 nice={b}\n  run 100s\nend\n"
    )
}

/// Two equal hogs on one CPU each get half of it, within 1 %.
#[test]
fn equal_hogs_share_one_cpu_evenly() {
    let r = run(&hogs(0, 0), "cpus-2");
    let (a, b) = (share(&r, "a"), share(&r, "b"));
    assert!(
        (a - 0.5).abs() < 0.005 && (b - 0.5).abs() < 0.005,
        "shares {a}, {b}"
    );
    assert!(
        r.total().switches_involuntary > 1000,
        "they take turns: {}",
        r.total().switches_involuntary
    );
    assert_eq!(r.cpus[1].busy, 0, "nothing runs on the other CPU");
}

/// Nice 0 against nice 5 on one CPU: shares in the weight ratio 1024 : 335, within 1 %.
#[test]
fn nice_levels_share_by_weight() {
    let r = run(&hogs(0, 5), "cpus-2");
    let (w0, w5) = (weight_of_nice(0) as f64, weight_of_nice(5) as f64);
    let (a, b) = (share(&r, "a"), share(&r, "b"));
    let want_a = w0 / (w0 + w5);
    assert!(
        (a - want_a).abs() < 0.01 * want_a,
        "nice 0 got {a}, owed {want_a}"
    );
    assert!(
        (a / b - w0 / w5).abs() < 0.01 * (w0 / w5) * 3.0,
        "ratio {}",
        a / b
    );
}

/// Four hogs at nice 0, 0, 5, −5 free on two CPUs: the periodic balance finds the fair
/// feasible split (the −5 task alone; the others share one CPU by weight), within 1 %.
#[test]
fn four_hogs_on_two_cpus_water_fill() {
    let r = run(builtin("hogs").unwrap(), "cpus-2");
    let (w0, w5) = (weight_of_nice(0) as f64, weight_of_nice(5) as f64);
    let rest = 2.0 * w0 + w5;
    for (name, want) in [
        ("n0a", w0 / rest),
        ("n0b", w0 / rest),
        ("n5", w5 / rest),
        ("nm5", 1.0),
    ] {
        let got = share(&r, name);
        assert!(
            (got - want).abs() < 0.01,
            "{name}: {got}, feasible fair share {want}"
        );
    }
}

/// The pipe on one CPU: every round trip is two wakeups on the CPU and two voluntary
/// switches, and takes exactly two (wake + switch) costs. Each task goes on for `wake` ns
/// after its wakee joined the runqueue, so it blocks while not eligible: it is delayed, and
/// the next wakeup finds it queued and requeues it in place.
#[test]
fn pipe_round_trip_is_two_switches() {
    let r = run(builtin("pipe").unwrap(), "cpus-2");
    let c = lagom_sim::Costs::default();
    let hop = c.wake + c.switch;
    let trips = r.tasks[0].stats.loops;
    let want = r.measured / (2 * hop);
    assert!(
        trips.abs_diff(want) <= 2,
        "{trips} round trips, {want} expected"
    );
    let t = r.total();
    assert!(
        (t.wakeups_local + t.runnable_in_place).abs_diff(2 * trips) <= 4,
        "{t:?}"
    );
    assert!(
        t.runnable_in_place > trips,
        "most blocks are delayed: {t:?}"
    );
    assert!(t.switches_voluntary.abs_diff(2 * trips) <= 4, "{t:?}");
    assert_eq!(t.switches_involuntary, 0);
    assert!(
        close(r.handoff.quantile(1, 2), hop),
        "{}",
        r.handoff.quantile(1, 2)
    );
}

/// `a` within the histograms' bucket resolution (1/64) of `b`.
fn close(a: u64, b: u64) -> bool {
    a.abs_diff(b) <= b / 64
}

/// The pipe across two CPUs: each hand-off goes through the wakelist to a CPU that spins,
/// so a round trip is two (wakelist + switch) costs; each worker switches to its idle loop
/// once per round trip.
#[test]
fn pipe_cross_round_trip_is_two_wakelist_hops() {
    let r = run(builtin("pipe_cross").unwrap(), "cpus-2");
    let c = lagom_sim::Costs::default();
    let hop = c.wakelist + c.switch;
    let trips = r.tasks[0].stats.loops;
    let want = r.measured / (2 * hop);
    assert!(
        trips.abs_diff(want) <= 2,
        "{trips} round trips, {want} expected"
    );
    let t = r.total();
    assert!(t.wakeups_queued.abs_diff(2 * trips) <= 4, "{t:?}");
    assert_eq!(t.wakeups_local, 0);
    assert_eq!(t.kicks, 0, "the CPU spins: no kick needed");
    assert!(
        close(r.handoff.quantile(1, 2), hop),
        "{}",
        r.handoff.quantile(1, 2)
    );
}

/// A wakeup that finds its CPU asleep (the gap exceeds the idle spin) costs a kick: here
/// each task computes longer than the other CPU spins, so every wakeup kicks.
#[test]
fn sleeping_cpu_is_kicked() {
    let text = "duration 100ms\n\
        task a cpus=0\n  loop\n    run 100us\n    wake b\n    block\n  end\nend\n\
        task b cpus=1\n  loop\n    block\n    run 50us\n    wake a\n  end\nend\n";
    let r = run(text, "cpus-2");
    let c = lagom_sim::Costs::default();
    let t = r.total();
    let trips = r.tasks[0].stats.loops;
    assert!(
        t.kicks.abs_diff(2 * trips) <= 2,
        "{} kicks, {trips} round trips",
        t.kicks
    );
    assert!(t.idle_sleeps.abs_diff(2 * trips) <= 2, "{t:?}");
    let hop = c.kick + c.switch;
    let want = r.measured / (150_000 + 2 * hop);
    assert!(
        trips.abs_diff(want) <= 2,
        "{trips} round trips, {want} expected"
    );
    assert!(
        close(r.handoff.quantile(1, 2), hop),
        "every wakeup pays the kick"
    );
}
