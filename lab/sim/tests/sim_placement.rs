//! The simulator places tasks by the policy's kernel-faithful decisions over the machine's
//! `CpuMap` (built by the same `layout` function as the threaded runtime's): a sync wakee
//! joins the waker's LLC on an idle CPU there, a spawn spreads over idle CPUs, and ITMT packs
//! busy tasks onto the top-ranked CPUs — each shown against the setting that does otherwise.

#[path = "../../topology/tests/topology_util/mod.rs"]
mod topology_util;

use lagom_policy::Features;
use lagom_sim::{Machine, Options, Report, Sim, builtin, parse};
use lagom_topology::Topology;

fn run(text: &str, machine: &str, features: &str, wakeups: Option<u64>) -> Report {
    let s = parse(text).unwrap_or_else(|e| panic!("{e}"));
    let mut o = Options::of(&s).unwrap();
    o.features = Features::parse(features).unwrap();
    if wakeups.is_some() {
        o.wakeups = wakeups;
    }
    let mut sim = Sim::new(&s, Machine::named(machine).unwrap(), o).unwrap();
    sim.run();
    Report::of(&sim)
}

/// Busy time (ns) of the CPUs whose OS ids `ids` names.
fn busy(r: &Report, ids: impl Fn(usize) -> bool) -> u64 {
    r.cpus.iter().filter(|c| ids(c.os_id)).map(|c| c.busy).sum()
}

/// A waker on CPU 0 that never blocks wakes a sleeper every 100 us; the sleeper is spawned
/// second, so fork placement puts it in the idler LLC (CPUs 4-7 of `cpus-8-llcs-2`).
fn waker_and_sleeper(sync: &str) -> String {
    format!(
        "duration 50ms\n\
         task w cpus=0\n  loop\n    run 100us\n    wake s {sync}\n  end\nend\n\
         task s\n  loop\n    block\n    run 20us\n  end\nend\n"
    )
}

#[test]
fn a_sync_wakee_runs_on_an_idle_cpu_of_the_wakers_llc() {
    // WF_SYNC: wake_affine takes the waker's CPU (it runs one task, about to block), and
    // select_idle_sibling finds an idle CPU of its LLC: not CPU 0 itself, which is busy.
    let r = run(&waker_and_sleeper("sync"), "cpus-8-llcs-2", "", None);
    let near = busy(&r, |c| (1..4).contains(&c));
    let far = busy(&r, |c| c >= 4);
    assert!(near > 5_000_000, "near {near} ns, far {far} ns");
    assert!(far < near / 20, "near {near} ns, far {far} ns");
    let t = r.total();
    assert!(t.place_affine + t.place_idle_sibling > 0, "{t:?}");
    // Without the hint the previous CPU is idle and wins (wake_affine_idle): the sleeper
    // stays in the far LLC.
    let r = run(&waker_and_sleeper(""), "cpus-8-llcs-2", "", None);
    let near = busy(&r, |c| (1..4).contains(&c));
    let far = busy(&r, |c| c >= 4);
    assert!(
        far > 5_000_000 && near < far / 20,
        "near {near} ns, far {far} ns"
    );
}

#[test]
fn spawns_from_one_task_spread_over_idle_cpus() {
    let text = "\
duration 50ms
task parent cpus=0 measure=no
  spawn c[0]
  spawn c[1]
  spawn c[2]
  spawn c[3]
end
task c count=4 start=no
  run 1s
end
";
    let r = run(text, "cpus-4", "", None);
    for c in &r.cpus {
        assert!(c.busy > 45_000_000, "every CPU runs a child: {:?}", r.cpus);
    }
    let t = r.total();
    // The four children by the idlest-group descent; the parent, allowed on one CPU, is
    // placed there with no selection (`select_task_rq`).
    assert_eq!((t.place_fork_idlest, t.place_prev), (4, 1), "{t:?}");
    assert_eq!(
        (t.balance_pulls, t.balance_periodic),
        (0, 0),
        "placed, not balanced: {t:?}"
    );
    assert!(r.tasks.iter().all(|t| t.stats.migrations == 0));
}

#[test]
fn itmt_packs_busy_tasks_onto_the_top_ranked_cpus() {
    // asym_stall: two tasks allowed on CPUs 4-7 (ranked 211 / 216 / 231 / 221), started by
    // fork placement on 4 and 5. With ITMT the busy CPUs' ticks kick the idle preferred
    // ones, whose active balance moves each task at its next schedule point: they end on 6
    // and 7.
    let text = builtin("asym_stall").unwrap();
    let on = run(text, "ryzen-7950x", "", Some(20_000));
    let top = busy(&on, |c| c == 6 || c == 7);
    let low = busy(&on, |c| c == 4 || c == 5);
    assert!(top > 10 * low, "ITMT: CPUs 6-7 {top} ns, 4-5 {low} ns");
    assert!(on.total().balance_active >= 2, "{:?}", on.total());
    let off = run(text, "ryzen-7950x", "NO_ITMT", Some(20_000));
    let top = busy(&off, |c| c == 6 || c == 7);
    let low = busy(&off, |c| c == 4 || c == 5);
    assert!(low > 10 * top, "NO_ITMT: CPUs 6-7 {top} ns, 4-5 {low} ns");
    assert_eq!(off.total().balance_active, 0);
}

/// ITMT never moves a task between CPUs of equal priority: the kernel's `sched_asym_prefer`
/// is a strict `>`. On the synthetic Intel hybrid machine (`topology_util::synthetic::
/// intel_hybrid`: the E-cores 12-19 share one priority and have no SMT sibling, so
/// `sched_use_asym_prio` holds at their CLS and MC levels, which carry SD_ASYM_PACKING), two
/// tasks allowed on two E-cores run about 1 ms and sleep 10 µs in turn, each on its own CPU.
/// Whenever one sleeps, its CPU is idle beside a busy CPU of the same rank: with a strict
/// `>` nothing is asked of it, so nothing moves and no wakeup stalls — in one cluster
/// (12, 13), across the two (12, 16), and with the higher-numbered CPU first. (With ties
/// going to the lower CPU number, the mutant `asym_prefer_tie_by_index`, the idle lower CPU
/// actively pulls the other's task: 15 184 active balances and 2 891 stalls over these
/// 20 000 wakeups.)
#[test]
fn itmt_leaves_cpus_of_equal_priority_alone() {
    let tree = topology_util::synthetic::intel_hybrid();
    let topology = Topology::from_sysfs(tree.root()).unwrap();
    for cpus in ["12,13", "12,16", "13,12"] {
        let text = format!(
            "duration 1000s\nwakeups 20000\nstall 500us\nresched 10us\n\
             task worker count=2 cpus={cpus}\n  loop\n    run uniform(990us, 1010us)\n    \
             wake self after 10us from 2\n    block\n  end\nend\n"
        );
        let s = parse(&text).unwrap_or_else(|e| panic!("{e}"));
        let machine = Machine::new("intel-hybrid", topology.clone()).unwrap();
        let mut sim = Sim::new(&s, machine, Options::of(&s).unwrap()).unwrap();
        sim.run();
        let r = Report::of(&sim);
        let t = r.total();
        assert_eq!(r.wakeups, 20_000, "CPUs {cpus}");
        assert_eq!(
            (t.balance_active, t.balance_asym, r.stalls),
            (0, 0, 0),
            "CPUs {cpus}: ITMT acted between equal priorities: {t:?}"
        );
        assert!(
            r.tasks.iter().all(|t| t.stats.migrations == 0),
            "CPUs {cpus}: a task moved: {t:?}"
        );
    }
}

#[test]
fn active_balance_does_not_recheck_that_the_preferred_cpu_is_idle() {
    // The preferred-core stall's mechanism: asym_stall with bursts that drift apart (990-1010
    // us instead of exactly 1 ms). When one task blocks on CPU 6, CPU 6's newly idle balance
    // asks for the task running on CPU 7; the move waits for that task's next schedule point,
    // and the first task may be woken onto the still idle CPU 6 meanwhile. As the kernel's
    // stopper, the move does not re-check that CPU 6 is idle: both tasks share it, one blocks
    // while not eligible (DELAY_DEQUEUE keeps it queued) and its wakeup requeues it in place
    // behind the other, a burst late. Without ITMT nothing asks, and nothing stalls.
    let text = builtin("asym_stall")
        .unwrap()
        .replace("run 1ms", "run uniform(990us, 1010us)");
    let on = run(&text, "ryzen-7950x", "", Some(20_000));
    assert!(
        on.stalls > 0,
        "ITMT: {} stalls, {:?}",
        on.stalls,
        on.total()
    );
    assert!(on.total().balance_active > 2, "{:?}", on.total());
    assert!(on.total().runnable_in_place > 0, "{:?}", on.total());
    let off = run(&text, "ryzen-7950x", "NO_ITMT", Some(20_000));
    assert_eq!(off.stalls, 0, "NO_ITMT: {:?}", off.total());
    let no_delay = run(&text, "ryzen-7950x", "NO_DELAY_DEQUEUE", Some(20_000));
    assert!(
        no_delay.stalls * 5 < on.stalls,
        "NO_DELAY_DEQUEUE {} stalls, defaults {}",
        no_delay.stalls,
        on.stalls
    );
}

#[test]
fn active_balance_recheck_leaves_a_busy_preferred_cpu_alone() {
    // The same drifting bursts under lagom's ACTIVE_BALANCE_RECHECK: a request whose
    // preferred CPU got a task meanwhile is dropped, so the two tasks never share a CPU and
    // no wakeup is requeued in place behind the other; ITMT still packs them onto the top
    // ranks by active balance (more moves succeed than by default: none lands on a busy CPU).
    let text = builtin("asym_stall")
        .unwrap()
        .replace("run 1ms", "run uniform(990us, 1010us)");
    let on = run(&text, "ryzen-7950x", "", Some(20_000));
    let re = run(&text, "ryzen-7950x", "ACTIVE_BALANCE_RECHECK", Some(20_000));
    assert!(on.stalls > 0, "defaults: {:?}", on.total());
    assert_eq!(re.stalls, 0, "ACTIVE_BALANCE_RECHECK: {:?}", re.total());
    assert_eq!(re.total().runnable_in_place, 0, "{:?}", re.total());
    assert!(
        re.total().balance_active > on.total().balance_active,
        "{:?}\n{:?}",
        re.total(),
        on.total()
    );
    let both = run(
        &text,
        "ryzen-7950x",
        "DELAYED_WAKE_IDLE,ACTIVE_BALANCE_RECHECK",
        Some(20_000),
    );
    assert_eq!(both.stalls, 0, "with DELAYED_WAKE_IDLE: {:?}", both.total());
}

/// 8 equal hogs spawned in a burst on 2 CPUs land 4 and 4, from a task and from outside,
/// as the threaded runtime's `runtime_place::a_spawn_burst_lands_four_and_four`: each spawn is
/// activated at once on the CPU chosen (`wake_up_new_task`), so the next spawn's
/// `sched_balance_find_dst_cpu` counts it there. Read from the run: no hog ever migrates (a
/// bad split would be evened out by the balancer, which moves simulated tasks freely) and
/// the hogs share the two CPUs equally.
#[test]
fn a_spawn_burst_lands_four_and_four() {
    let from_task = "\
duration 200ms
task parent measure=no
  spawn hog[0]
  spawn hog[1]
  spawn hog[2]
  spawn hog[3]
  spawn hog[4]
  spawn hog[5]
  spawn hog[6]
  spawn hog[7]
  block
end
task hog count=8 start=no
  run 10s
end
";
    let from_outside = "\
duration 200ms
task hog count=8
  run 10s
end
";
    for (what, text) in [("a task", from_task), ("outside", from_outside)] {
        let r = run(text, "cpus-2", "", None);
        let hogs: Vec<_> = r
            .tasks
            .iter()
            .filter(|t| t.name.starts_with("hog"))
            .collect();
        assert_eq!(hogs.len(), 8);
        assert!(
            hogs.iter().all(|t| t.stats.migrations == 0),
            "from {what}: a hog moved, the burst was split unevenly: {:?}",
            r.total()
        );
        let times: Vec<u64> = hogs.iter().map(|t| t.stats.cpu_time).collect();
        let (lo, hi) = (times.iter().min().unwrap(), times.iter().max().unwrap());
        assert!(hi * 10 < lo * 12, "from {what}: unequal shares {times:?}");
    }
}

/// `record_wakee` and `wake_wide` in the simulator's wakeups (the threaded runtime's
/// `wake/select.rs` does the same). On `cpus-8-llcs-2` (LLCs of 4: the factor), 16 workers
/// each wake both of 2 hubs every round (`post`), so a worker's wakee changes at every wakeup
/// and its flips grow by 2 a round; each hub wakes every worker that posted (`wake_posted`),
/// 8 or more different ones a round. Once a worker flips 4 times and its hub 4 times as often,
/// the hub's wakeups of it are wide (`place_wide`). When every worker posts to one hub only,
/// its wakee never changes, its flips stay at 1, and nothing is wide.
#[test]
fn wake_wide_sees_many_to_many_wakeups() {
    let text = |posts: &str| {
        format!(
            "duration 200ms\n\
             task hub count=2 measure=no\n  loop\n    block\n    wake_posted\n  end\nend\n\
             task worker count=16\n  loop\n{posts}    block\n    sleep 100us\n  end\nend\n"
        )
    };
    let wide = run(
        &text("    post hub[0]\n    post hub[1]\n"),
        "cpus-8-llcs-2",
        "",
        None,
    );
    assert!(wide.total().place_wide > 1000, "{:?}", wide.total());
    let narrow = run(&text("    post hub[0]\n"), "cpus-8-llcs-2", "", None);
    assert_eq!(narrow.total().place_wide, 0, "{:?}", narrow.total());
}

/// The first idle CPU's active-balance request for a running task stands: the kernel's
/// `sched_balance_rq` sets `busiest->active_balance` and `push_cpu` only when no stopper
/// work is pending, so a later asker leaves the request alone (`active_request_made`).
/// Two hogs allowed on CPUs 4-7 of the 7950X (ranked 211 / 216 / 231 / 221) start on 4 and
/// 5; at the start the idle CPUs 6 and 7 both ask, 6 first, for CPU 4's task: it goes to
/// 6, the top-ranked CPU, at once, and CPU 5's follows to 7 later. (With the last asker
/// overwriting, the mutant `active_request_last_wins`, CPU 4's task goes to 7 and CPU 6
/// gets a task only 4 ms later.)
#[test]
fn the_first_active_balance_request_stands() {
    let text = "duration 20ms\nresched 10us\n\
                task hog count=2 cpus=4,5,6,7\n  loop\n    run 1ms\n  end\nend\n";
    let r = run(text, "ryzen-7950x", "", None);
    let (six, seven) = (busy(&r, |c| c == 6), busy(&r, |c| c == 7));
    assert!(
        six > 19_900_000 && seven < 16_000_000,
        "CPU 6 busy {six} ns, CPU 7 {seven} ns of 20 ms: {:?}",
        r.total()
    );
}

/// `sched_balance_rq`'s LBF_ALL_PINNED redo in the simulator's newly idle balance. Three
/// CPUs: CPU 1 runs three hogs pinned there, CPU 2 a pinned hog and a task `f` that may also
/// run on CPU 0, where two short tasks keep CPU 0 busy for its first 10 ms (so fork placement
/// put `f` on CPU 2). When they exit, CPU 0's busiest CPU is CPU 1, whose tasks are all
/// pinned: the kernel clears it from the candidates and searches again, finding `f` on CPU
/// 2 (moved once its failures let a cache-hot task go). Without the redo (mutant
/// `lb_all_pinned_no_redo`) CPU 0 stays idle while `f` shares CPU 2.
#[test]
fn an_idle_cpu_passes_over_a_cpu_whose_tasks_are_all_pinned() {
    let text = "\
duration 60ms
task z count=2 cpus=0
  run 5ms
end
task p count=3 cpus=1
  run 1s
end
task q cpus=2
  run 1s
end
task f cpus=0,2
  run 1s
end
";
    let r = run(text, "cpus-3", "", None);
    let cpu0 = busy(&r, |c| c == 0);
    assert!(
        cpu0 > 40_000_000,
        "CPU 0 ran {cpu0} ns of 60 ms: f was not pulled past the all-pinned CPU 1 ({:?})",
        r.total()
    );
}
