//! Each wakeup-path feature that the simulator's mechanism reads changes what it does, as it
//! changes what the threaded runtime does:
//!
//! | feature | test |
//! |---|---|
//! | `DELAY_DEQUEUE` | `delay_dequeue_keeps_ineligible_sleepers_queued` |
//! | `TTWU_QUEUE_DELAYED` | `ttwu_queue_delayed_moves_delayed_wakees_to_idle_cpus` |
//! | `TTWU_DEQUEUE` | `ttwu_dequeue_sends_delayed_wakees_through_selection` |
//! | `DELAYED_WAKE_IDLE` | `delayed_wake_idle_dequeues_only_with_an_idle_cpu_to_go_to` |
//! | `TTWU_QUEUE` | `no_ttwu_queue_enqueues_under_the_remote_lock` |
//! | `TTWU_QUEUE_DEFAULT` | `ttwu_queue_default_queues_to_a_busy_cpu_of_the_llc` |
//! | `TTWU_QUEUE_ON_CPU` | `ttwu_queue_on_cpu_hands_off_to_the_switching_cpu` |
//! | `ITMT` | `sim_placement.rs`: `itmt_packs_busy_tasks_onto_the_top_ranked_cpus` |
//! | `ACTIVE_BALANCE_RECHECK` | `sim_placement.rs`: `active_balance_recheck_leaves_a_busy_preferred_cpu_alone` |
//! | `NEXT_BUDDY` with `WF_SYNC` on the delayed wakee's path | `a_sync_wakeup_of_a_delayed_wakee_goes_through_preempt_sync` |
//!
//! The policy's own features (`PLACE_LAG`, `RUN_TO_PARITY`, `DELAY_ZERO`, `SIS_UTIL`,
//! `WAKE_PREFER_RANK`, …) act inside the policy (`lagom-policy`), which the simulator calls unchanged; their
//! tests are the policy's.

use lagom_policy::Features;
use lagom_sim::{Counters, Machine, Options, Report, Sim, parse};

fn run(text: &str, machine: &str, features: &str) -> Report {
    let s = parse(text).unwrap_or_else(|e| panic!("{e}"));
    let mut o = Options::of(&s).unwrap();
    o.features = Features::parse(features).unwrap();
    let mut sim = Sim::new(&s, Machine::named(machine).unwrap(), o).unwrap();
    sim.run();
    Report::of(&sim)
}

fn total(text: &str, machine: &str, features: &str) -> Counters {
    run(text, machine, features).total()
}

/// Two tasks share CPU 0 and sleep briefly after each burst; a third CPU wakes them.
const SHARED_CPU: &str = "\
duration 200ms
task t count=2 cpus=0
  loop
    run 700us
    wake self after 20us from 1
    block
  end
end
";

#[test]
fn delay_dequeue_keeps_ineligible_sleepers_queued() {
    let on = total(SHARED_CPU, "cpus-4", "");
    let off = total(SHARED_CPU, "cpus-4", "NO_DELAY_DEQUEUE");
    assert!(on.delayed_dequeues > 50, "{on:?}");
    assert!(
        on.runnable_in_place > 50,
        "delayed wakees are requeued in place: {on:?}"
    );
    assert_eq!(
        (off.delayed_dequeues, off.runnable_in_place),
        (0, 0),
        "{off:?}"
    );
}

/// A task allowed on CPUs 0-1 shares each in turn with a pinned task that runs 3 ms and
/// sleeps 3 ms, the two pinned tasks in opposite phases: a delayed wakee sits on a busy CPU
/// while the other allowed CPU is idle.
const MOVABLE: &str = "\
duration 200ms
task t cpus=0-1
  loop
    run 700us
    wake self after 20us from 2
    block
  end
end
task p0 cpus=0 measure=no
  loop
    run 3ms
    sleep 3ms
  end
end
task p1 cpus=1 measure=no
  loop
    sleep 3ms
    run 3ms
  end
end
";

#[test]
fn ttwu_queue_delayed_moves_delayed_wakees_to_idle_cpus() {
    let base = total(MOVABLE, "cpus-4", "");
    let qd = total(MOVABLE, "cpus-4", "TTWU_QUEUE_DELAYED");
    assert!(
        base.runnable_in_place > 0 && base.runnable_queued == 0,
        "{base:?}"
    );
    assert!(
        qd.runnable_queued > 0 && qd.runnable_in_place == 0,
        "{qd:?}"
    );
    assert!(
        qd.runnable_migrated > 0,
        "the owner sends some elsewhere: {qd:?}"
    );
}

#[test]
fn ttwu_dequeue_sends_delayed_wakees_through_selection() {
    let b = total(MOVABLE, "cpus-4", "");
    let d = total(MOVABLE, "cpus-4", "TTWU_DEQUEUE");
    assert!(b.runnable_in_place > 0, "{b:?}");
    assert_eq!(d.runnable_in_place, 0, "{d:?}");
    assert!(
        d.delayed_finished > b.delayed_finished,
        "the wakeup finishes the dequeue: {b:?} {d:?}"
    );
    assert!(
        d.runnable_dequeued > 0 && b.runnable_dequeued == 0,
        "{b:?}\n{d:?}"
    );
    // What was requeued in place is now an ordinary wakeup: selected and enqueued on the
    // chosen CPU (the waker, CPU 2, is no allowed CPU), through its wakelist or its lock as
    // `ttwu_queue_cond` says.
    let plain = |c: &Counters| c.wakeups_queued + c.wakeups_remote;
    assert!(
        plain(&d) >= plain(&b) + b.runnable_in_place / 2,
        "{b:?}\n{d:?}"
    );
}

#[test]
fn delayed_wake_idle_dequeues_only_with_an_idle_cpu_to_go_to() {
    let b = total(MOVABLE, "cpus-4", "");
    let w = total(MOVABLE, "cpus-4", "DELAYED_WAKE_IDLE");
    let d = total(MOVABLE, "cpus-4", "TTWU_DEQUEUE");
    assert_eq!(b.runnable_dequeued, 0, "{b:?}");
    assert!(w.runnable_dequeued > 0, "{w:?}");
    // Unlike TTWU_DEQUEUE, it keeps in place a wakee whose CPU has nothing else to run
    // or no idle CPU to send it to.
    assert!(
        w.runnable_in_place > 0 && d.runnable_in_place == 0,
        "{w:?}\n{d:?}"
    );
    assert!(w.runnable_dequeued < d.runnable_dequeued, "{w:?}\n{d:?}");
}

#[test]
fn ttwu_queue_default_queues_to_a_busy_cpu_of_the_llc() {
    // The waker (CPU 1) shares the LLC with the target (CPU 0), which runs the other task:
    // the lock by default, the wakelist with TTWU_QUEUE_DEFAULT (the RFC's rule).
    let base = total(SHARED_CPU, "cpus-4", "NO_DELAY_DEQUEUE");
    let def = total(SHARED_CPU, "cpus-4", "NO_DELAY_DEQUEUE,TTWU_QUEUE_DEFAULT");
    assert!(base.wakeups_remote > 50, "{base:?}");
    assert!(
        def.wakeups_queued > 50 && def.wakeups_remote == 0,
        "{def:?}"
    );
    // Across LLCs the wakelist either way.
    let far = total(SHARED_CPU, "cpus-4-llcs-4", "NO_DELAY_DEQUEUE");
    assert!(
        far.wakeups_queued > 50 && far.wakeups_remote == 0,
        "{far:?}"
    );
}

#[test]
fn no_ttwu_queue_enqueues_under_the_remote_lock() {
    let cross = lagom_sim::builtin("pipe_cross").unwrap();
    let on = total(cross, "cpus-2", "");
    let off = total(cross, "cpus-2", "NO_TTWU_QUEUE");
    assert!(on.wakeups_queued > 1000 && on.wakeups_remote == 0, "{on:?}");
    assert!(
        off.wakeups_remote > 1000 && off.wakeups_queued == 0,
        "{off:?}"
    );
}

/// A task on CPU 0 is woken from CPU 1 100 ns after it blocks, while CPU 0 still switches
/// away from it (the switch costs 115 ns).
const ON_CPU: &str = "\
duration 50ms
task a cpus=0
  loop
    run 10us
    wake self after 100ns from 1
    block
  end
end
";

#[test]
fn ttwu_queue_on_cpu_hands_off_to_the_switching_cpu() {
    let on = run(ON_CPU, "cpus-2", "");
    let off = run(ON_CPU, "cpus-2", "NO_TTWU_QUEUE_ON_CPU");
    assert!(on.total().wakeups_on_cpu > 1000, "{:?}", on.total());
    assert_eq!(off.total().wakeups_on_cpu, 0);
    // Without the hand-off the waker waits for the switch, then queues the task normally.
    assert!(off.total().wakeups_queued > 1000, "{:?}", off.total());
}

/// A sleep whose timer is already due when `schedule()` fires the CPU's timers is woken
/// before it is dequeued: the wakeup cancels it in place (as the runtime's `ttwu_runnable`
/// does for a task still queued and not delayed), and the task runs on without a switch.
#[test]
fn a_wakeup_before_the_switch_cancels_the_sleep() {
    let r = run(
        "duration 10ms\ntask a cpus=0\n  loop\n    run 10us\n    sleep 0\n  end\nend\n",
        "cpus-2",
        "",
    );
    let t = r.total();
    let loops = r.tasks[0].stats.loops;
    assert!(loops > 900, "{loops}");
    assert!(t.runnable_in_place.abs_diff(loops) <= 1, "{t:?}");
    assert_eq!(t.switches_voluntary, 0, "it never leaves the CPU: {t:?}");
    assert!(r.tasks[0].stats.handoff.count() == 0);
}

/// A script whose loop never lets time pass (a yield with nothing else to run, and a wake
/// of an awake task) is stopped and named, not run forever.
#[test]
fn an_endless_loop_at_one_instant_is_stopped() {
    let r = run(
        "duration 1s\ntask spin cpus=0\n  loop\n    yield\n    wake self\n  end\nend\n",
        "cpus-2",
        "",
    );
    assert_eq!(r.stop, lagom_sim::Stop::Endless(0));
    assert!(r.to_string().contains("task #0 is spin"), "{r}");
    assert!(r.elapsed < 1_000, "it stops at once: {}", r.elapsed);
}

/// With every cost zero, two tasks can hand the CPU back and forth without the clock moving:
/// the run is stopped, not looped forever.
#[test]
fn a_zero_cost_ping_pong_is_stopped() {
    let r = run(
        "duration 1s\ncost switch 0\ncost wake 0\n\
         task a cpus=0\n  loop\n    wake b\n    block\n  end\nend\n\
         task b cpus=0\n  loop\n    block\n    wake a\n  end\nend\n",
        "cpus-2",
        "",
    );
    assert!(
        matches!(r.stop, lagom_sim::Stop::Endless(_)),
        "{:?}",
        r.stop
    );
    assert_eq!(r.elapsed, 0);
}

/// A sleeper that blocks with a negative lag stays queued, delayed, and its wakeup requeues it
/// in place (`ttwu_runnable`). One CPU: `d` computes 400 µs, wakes `w` and blocks; `w`
/// computes 100 µs, wakes `d` (`sync`: `Unparker::unpark_sync`) and computes 600 µs more
/// before it blocks.
fn delayed_wakee(sync: &str) -> String {
    format!(
        "duration 100ms\nresched 10us\n\
         task d cpus=0\n  loop\n    run 400us\n    wake w\n    block\n  end\nend\n\
         task w measure=no cpus=0\n  loop\n    block\n    run 100us\n    wake d {sync}\n    \
         run 600us\n  end\nend\n"
    )
}

/// `ttwu_runnable` hands the waker's `WF_SYNC` to the preemption check of a delayed wakee it
/// requeues in place (`activation_flags(RunnableInPlace, ..)`; the threaded
/// `wake/runnable.rs` does the same). With NEXT_BUDDY a sync wakeup is decided by
/// `preempt_sync` alone, which under v7.1's rule (the time since `exec_start`, just reset by
/// the charge: 0) never reschedules: the wakee waits until its waker blocks, the 600 µs left
/// of its burst. Without NEXT_BUDDY `WF_SYNC` plays no part in the check, and the eligible
/// wakee, whose deadline is earlier, preempts at the waker's next scheduling point (10 µs).
/// If the driver dropped `WF_SYNC` on this path (mutant `runnable_sync_dropped`), the
/// NEXT_BUDDY run would look like the other.
#[test]
fn a_sync_wakeup_of_a_delayed_wakee_goes_through_preempt_sync() {
    let buddy = run(&delayed_wakee("sync"), "cpus-1", "NEXT_BUDDY");
    let plain = run(&delayed_wakee("sync"), "cpus-1", "");
    for (what, r) in [("NEXT_BUDDY", &buddy), ("defaults", &plain)] {
        let t = r.total();
        assert!(r.handoff.count() >= 80, "{what}: {t:?}");
        assert!(
            t.runnable_in_place * 10 >= r.handoff.count() * 9,
            "{what}: the wakee is delayed at most wakeups: {} of {}: {t:?}",
            t.runnable_in_place,
            r.handoff.count()
        );
    }
    let (b, p) = (buddy.handoff.quantile(1, 2), plain.handoff.quantile(1, 2));
    assert!(
        b >= 550_000,
        "NEXT_BUDDY: a sync wakee requeued in place waits {b} ns, not for its waker to block \
         (was WF_SYNC dropped on the way?)"
    );
    assert!(p <= 20_000, "defaults: the wakee waits {p} ns");
}
