//! Random scenarios on random machines under random wakeup-path features: the simulator
//! never panics (every policy call's own assertions included), and its books balance — CPU
//! time within what the CPUs had, every task's wakeups counted once on a CPU, a CPU's busy
//! time its tasks' run time. Each case prints its seed when it fails; `LAGOM_SIM_SEED=N`
//! reruns one.

use lagom_policy::Features;
use lagom_sim::{Machine, Options, Report, Rng, Sim, parse};

const FEATURES: &[&str] = &[
    "",
    "NO_DELAY_DEQUEUE",
    "TTWU_QUEUE_DELAYED",
    "TTWU_DEQUEUE",
    "NO_TTWU_QUEUE",
    "NO_TTWU_QUEUE_ON_CPU",
    "NO_DELAY_ZERO,NEXT_BUDDY",
    "TTWU_QUEUE_DELAYED,NO_TTWU_QUEUE",
    "NO_RUN_TO_PARITY,NO_PREEMPT_SHORT",
];

const MACHINES: &[&str] = &["cpus-1", "cpus-2", "cpus-3", "cpus-8-llcs-2", "ryzen-7950x"];

fn dur(r: &mut Rng) -> String {
    match r.range(0, 3) {
        0 => format!("{}us", r.range(0, 300)),
        1 => format!("uniform({}us, {}us)", r.range(0, 50), r.range(50, 500)),
        2 => format!("exp({}us)", r.range(1, 200)),
        _ => "0".to_string(),
    }
}

/// A scenario of `decls` declarations, each with a random script.
fn scenario(r: &mut Rng, cpus: usize) -> String {
    let decls = r.range(1, 5) as usize;
    let counts: Vec<u64> = (0..decls).map(|_| r.range(1, 6)).collect();
    let mut s = format!(
        "duration {}ms\nwarmup 1ms\nresched {}us\nidle_spin {}us\ncost migrate {}us\n",
        r.range(5, 30),
        r.range(1, 50),
        r.range(0, 40),
        r.range(0, 3)
    );
    for d in 0..decls {
        let nice = r.range(0, 39) as i64 - 20;
        let mut attrs = format!("count={} nice={nice}", counts[d]);
        match r.range(0, 3) {
            0 => attrs += &format!(" cpus={}", r.range(0, cpus as u64 - 1)),
            1 => attrs += &format!(" cpus=0-{}", r.range(0, cpus as u64 - 1)),
            _ => {}
        }
        if r.range(0, 3) == 0 {
            attrs += &format!(" slice={}us", r.range(100, 3000));
        }
        let spawned = d > 0 && r.range(0, 4) == 0;
        if spawned {
            attrs += " start=no";
        }
        s += &format!("task t{d} {attrs}\n  loop\n");
        for _ in 0..r.range(1, 6) {
            let other = r.range(0, decls as u64 - 1) as usize;
            let inst = r.range(0, counts[other] - 1);
            s += "    ";
            s += &match r.range(0, 7) {
                0 | 1 => format!("run {}\n", dur(r)),
                2 => format!("sleep {}\n", dur(r)),
                3 => "block\n".to_string(),
                4 => "yield\n".to_string(),
                5 => format!(
                    "wake t{other}[{inst}] after {} from {}\n",
                    dur(r),
                    r.range(0, cpus as u64 - 1)
                ),
                _ => format!("post t{other}[{inst}]\n    wake_posted\n"),
            };
        }
        // Something takes time in every loop, so that no loop is endless at one instant.
        s += "    run 5us\n  end\nend\n";
        if spawned {
            s += &format!("task spawner{d} measure=no\n  spawn t{d}[0]\nend\n");
        }
    }
    s
}

/// Runs case `seed`; returns its (events, wakeups, delayed dequeues).
fn check(seed: u64) -> (u64, u64, u64) {
    let mut r = Rng::new(seed);
    let machine = MACHINES[r.range(0, MACHINES.len() as u64 - 1) as usize];
    let m = Machine::named(machine).unwrap();
    let text = scenario(&mut r, m.cpus());
    let features = FEATURES[r.range(0, FEATURES.len() as u64 - 1) as usize];
    let ctx =
        format!("seed {seed} (LAGOM_SIM_SEED={seed}), {machine}, features `{features}`:\n{text}");
    let s = parse(&text).unwrap_or_else(|e| panic!("{ctx}\n{e}"));
    let mut o = Options::of(&s).unwrap();
    o.features = Features::parse(features).unwrap();
    o.seed = seed;
    let cpus = m.cpus() as u64;
    let mut sim = match Sim::new(&s, m, o) {
        Ok(sim) => sim,
        // A spawn of a task that a post also names is fine; an unstartable spawn is not
        // generated. Any other build error is a generator bug.
        Err(e) => panic!("{ctx}\n{e}"),
    };
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| sim.run()));
    let stop = result.unwrap_or_else(|_| panic!("the simulation panicked: {ctx}"));
    let rep = Report::of(&sim);
    let cpu_time: u64 = rep.tasks.iter().map(|t| t.stats.cpu_time).sum();
    assert!(
        cpu_time <= cpus * rep.elapsed,
        "{ctx}\ncpu time {cpu_time} > {cpus} x {}",
        rep.elapsed
    );
    let task_wakeups: u64 = rep.tasks.iter().map(|t| t.stats.wakeups).sum();
    assert_eq!(
        task_wakeups,
        rep.total().wakeups(),
        "{ctx}\nwakeups counted once each"
    );
    let measured_cpu: u64 = rep.tasks.iter().map(|t| t.stats.measured_cpu_time).sum();
    let busy: u64 = rep.cpus.iter().map(|c| c.busy).sum();
    assert_eq!(
        measured_cpu, busy,
        "{ctx}\nbusy time is run time ({stop:?})"
    );
    (rep.events, task_wakeups, rep.total().delayed_dequeues)
}

#[test]
fn random_scenarios_keep_their_books() {
    if let Some(seed) = std::env::var("LAGOM_SIM_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        check(seed);
        return;
    }
    let (mut events, mut wakeups, mut delayed) = (0, 0, 0);
    for seed in 0..150 {
        let (e, w, d) = check(seed);
        events += e;
        wakeups += w;
        delayed += d;
    }
    // The cases exercise the paths, not only the clock.
    assert!(
        events > 500_000 && wakeups > 50_000 && delayed > 1_000,
        "{events} {wakeups} {delayed}"
    );
}
