//! The same scenario, machine, features and seed give byte-identical output — the report and
//! the Chrome-trace timeline — and another seed gives another run.

use lagom_sim::{Machine, Options, Report, Sim, builtin, parse};

/// A scenario that draws from every distribution and takes every path: posts and batch
/// wakeups, sleeps, yields, spawns, delayed wakeups from a fixed CPU, nice levels, a custom
/// slice, affinities, more tasks than CPUs.
const MIXED: &str = "\
scenario mixed
duration 200ms
warmup 20ms
task msg count=2 cpu=i measure=no
  loop
    block
    wake_posted
  end
end
task worker count=12 cpus=0-7,16-23
  loop
    post msg[i/6]
    block
    sleep uniform(20us, 200us)
    run exp(300us)
  end
end
task hog count=3 nice=5 cpus=4-7
  loop
    run uniform(1ms, 3ms)
    yield
  end
end
task parent slice=200us
  loop 5
    run 1ms
    sleep exp(2ms)
  end
  spawn child
end
task child count=1 start=no
  loop
    run 500us
    wake self after 50us from 2
    block
  end
end
";

fn run(text: &str, machine: &str, seed: u64, features: &str) -> (String, String) {
    let s = parse(text).unwrap();
    let mut o = Options::of(&s).unwrap();
    o.seed = seed;
    o.features = lagom_policy::Features::parse(features).unwrap();
    o.features_label = features.to_string();
    o.trace_capacity = Some(1 << 20);
    // At most 200 ms of virtual time: determinism shows in the first events already.
    o.duration = o.duration.min(200_000_000);
    let mut sim = Sim::new(&s, Machine::named(machine).unwrap(), o).unwrap();
    sim.run();
    let report = Report::of(&sim).to_string();
    let trace = sim.trace().unwrap().json().to_string();
    (report, trace)
}

#[test]
fn same_seed_same_bytes() {
    for features in [
        "",
        "NO_DELAY_DEQUEUE,TTWU_QUEUE_DELAYED",
        "TTWU_DEQUEUE,NO_TTWU_QUEUE",
    ] {
        let a = run(MIXED, "ryzen-7950x", 7, features);
        let b = run(MIXED, "ryzen-7950x", 7, features);
        assert!(
            a.0 == b.0,
            "reports differ ({features}):\n{}\n---\n{}",
            a.0,
            b.0
        );
        assert!(a.1 == b.1, "traces differ ({features})");
        assert!(a.1.len() > 10_000, "the trace records the run");
        assert!(
            a.0.contains("worker[11]") && a.0.contains("child"),
            "{}",
            a.0
        );
    }
}

#[test]
fn another_seed_another_run() {
    let a = run(MIXED, "ryzen-7950x", 7, "");
    let b = run(MIXED, "ryzen-7950x", 8, "");
    assert_ne!(a.0, b.0);
}

#[test]
fn builtin_schbench_twice_on_a_synthetic_machine() {
    // The built-in's own recorded topology is not needed for determinism: 20 uniform CPUs.
    let a = run(builtin("schbench").unwrap(), "cpus-20", 1, "");
    let b = run(builtin("schbench").unwrap(), "cpus-20", 1, "");
    assert_eq!(a, b);
}
