//! Delayed dequeue (DELAY_DEQUEUE) and DELAY_ZERO.

use lagom_policy::{
    DequeueKind, Dequeued, EnqueueFlags, EnqueueKind, Feature, Features, Handle, Pick, RqConfig,
    RunQueue, SchedEntity,
};

/// Two nice-0 entities; the first picked runs 0.5 ms (less than a tick, so nothing else runs)
/// and is then not eligible: it has received more than the average.
fn after_one_overrun(features: Features) -> (RunQueue<u32>, Handle, Handle, u64) {
    let mut cfg = RqConfig::for_cpus(1);
    cfg.features = features;
    let mut rq = RunQueue::new(cfg);
    let a = rq.enqueue(
        SchedEntity::new(0),
        0,
        EnqueueKind::Wakeup,
        EnqueueFlags::NONE,
        0,
    );
    let b = rq.enqueue(
        SchedEntity::new(0),
        1,
        EnqueueKind::Wakeup,
        EnqueueFlags::NONE,
        0,
    );
    let Pick::Run(first) = rq.pick_next(0) else {
        panic!("nothing to run")
    };
    let other = if first == a { b } else { a };
    let now = 500_000;
    rq.update_curr(now);
    assert!(
        !rq.entity_eligible(first),
        "the entity that ran is ahead of V"
    );
    (rq, first, other, now)
}

fn lag(rq: &mut RunQueue<u32>, h: Handle) -> i64 {
    let v = rq.avg_vruntime();
    v.wrapping_sub(rq.entity(h).vruntime) as i64
}

/// A sleeper with negative lag stays queued as delayed: counted in nr_queued and the load but
/// not runnable, and the next pick does not run it.
#[test]
fn delay_dequeue_keeps_negative_lag_sleeper_queued() {
    let (mut rq, sleeper, other, now) = after_one_overrun(Features::DEFAULT);
    let lag_before = lag(&mut rq, sleeper);
    assert!(lag_before < 0);
    assert!(matches!(
        rq.dequeue(sleeper, DequeueKind::Sleep, now),
        Dequeued::Delayed
    ));
    let se = *rq.entity(sleeper);
    assert!(se.sched_delayed && se.on_rq);
    assert_eq!(
        se.vlag, lag_before,
        "the lag is saved when the dequeue is delayed"
    );
    assert_eq!(
        (rq.nr_queued(), rq.nr_runnable(), rq.nr_delayed()),
        (2, 1, 1)
    );
    assert_eq!(rq.load_weight(), 2 * SchedEntity::new(0).weight);
    rq.check_invariants().unwrap();
    // The other entity runs; the delayed one is never handed out as work. When the pick
    // finally chooses it, its dequeue completes instead.
    let Pick::Run(h) = rq.pick_next(now) else {
        panic!("the other entity should run")
    };
    assert_eq!(h, other);
    let mut t = now;
    let finished = loop {
        t += 100_000;
        rq.update_curr(t);
        match rq.pick_next(t) {
            Pick::Run(h) => assert_eq!(h, other, "a delayed entity was run"),
            Pick::FinishedDelayed { se, payload } => break (se, payload),
            Pick::Idle => panic!("the runqueue emptied"),
        }
        rq.check_invariants().unwrap();
    };
    assert_eq!(finished.1, *rq.payload(other) ^ 1);
    assert!(!finished.0.on_rq && !finished.0.sched_delayed);
    assert!(
        finished.0.vlag >= lag_before,
        "a delayed entity never leaves with more debt"
    );
    assert_eq!(
        (rq.nr_queued(), rq.nr_runnable(), rq.nr_delayed()),
        (1, 1, 0)
    );
}

/// Woken before it is picked, a delayed entity is requeued in place with its lag: vruntime
/// and deadline unchanged, still owing what it owed, runnable again.
#[test]
fn delayed_sleeper_woken_before_pick_is_requeued_with_its_lag() {
    let (mut rq, sleeper, _, now) = after_one_overrun(Features::DEFAULT);
    assert!(matches!(
        rq.dequeue(sleeper, DequeueKind::Sleep, now),
        Dequeued::Delayed
    ));
    let before = *rq.entity(sleeper);
    let lag_before = lag(&mut rq, sleeper);
    rq.requeue_delayed(sleeper, now);
    let after = *rq.entity(sleeper);
    assert!(!after.sched_delayed && after.on_rq);
    assert_eq!(after.vruntime, before.vruntime);
    assert_eq!(after.deadline, before.deadline);
    assert_eq!(lag(&mut rq, sleeper), lag_before);
    assert!(lag_before < 0 && !rq.entity_eligible(sleeper));
    assert_eq!(
        (rq.nr_queued(), rq.nr_runnable(), rq.nr_delayed()),
        (2, 2, 0)
    );
    rq.check_invariants().unwrap();
}

/// Runs the other entity until the delayed one has positive lag, then finishes the delayed
/// dequeue through a pick; returns the lag it left with and the lag it had at that moment.
fn leave_with_positive_lag(features: Features) -> (i64, i64) {
    let (mut rq, sleeper, other, now) = after_one_overrun(features);
    assert!(matches!(
        rq.dequeue(sleeper, DequeueKind::Sleep, now),
        Dequeued::Delayed
    ));
    let Pick::Run(h) = rq.pick_next(now) else {
        panic!()
    };
    assert_eq!(h, other);
    // The other one runs 1 ms: the delayed entity is now owed service.
    rq.update_curr(now + 1_000_000);
    let owed = lag(&mut rq, sleeper);
    assert!(owed > 0);
    let Pick::FinishedDelayed { se, .. } = rq.pick_next(now + 1_000_000) else {
        panic!("the delayed entity should win the pick and be finished")
    };
    (se.vlag, owed)
}

/// With DELAY_ZERO a delayed entity leaves with its lag clipped to 0 (it gains no credit);
/// without it, it leaves with the positive lag it had.
#[test]
fn delay_zero_clips_the_lag_to_zero() {
    let (vlag, owed) = leave_with_positive_lag(Features::DEFAULT);
    assert_eq!(vlag, 0, "DELAY_ZERO: lag {owed} should be clipped to 0");
    let (vlag, owed) = leave_with_positive_lag(Features::DEFAULT.with(Feature::DelayZero, false));
    assert_eq!(vlag, owed, "NO_DELAY_ZERO keeps the positive lag");
    // The same clipping applies when the delayed entity is woken in place.
    let (mut rq, sleeper, other, now) = after_one_overrun(Features::DEFAULT);
    assert!(matches!(
        rq.dequeue(sleeper, DequeueKind::Sleep, now),
        Dequeued::Delayed
    ));
    let Pick::Run(h) = rq.pick_next(now) else {
        panic!()
    };
    assert_eq!(h, other);
    rq.update_curr(now + 1_000_000);
    assert!(lag(&mut rq, sleeper) > 0);
    rq.requeue_delayed(sleeper, now + 1_000_000);
    assert_eq!(rq.entity(sleeper).vlag, 0);
    assert_eq!(lag(&mut rq, sleeper), 0, "placed at the zero-lag point");
    rq.check_invariants().unwrap();
}

/// With NO_DELAY_DEQUEUE the same sleeper leaves at once, taking its negative lag along.
#[test]
fn no_delay_dequeue_removes_the_sleeper_at_once() {
    let (mut rq, sleeper, _, now) =
        after_one_overrun(Features::DEFAULT.with(Feature::DelayDequeue, false));
    let owed = lag(&mut rq, sleeper);
    let Dequeued::Removed { se, payload } = rq.dequeue(sleeper, DequeueKind::Sleep, now) else {
        panic!("NO_DELAY_DEQUEUE must not delay")
    };
    assert!(!se.on_rq && !se.sched_delayed);
    assert_eq!(se.vlag, owed);
    assert!(owed < 0);
    assert!(payload <= 1);
    assert_eq!(
        (rq.nr_queued(), rq.nr_runnable(), rq.nr_delayed()),
        (1, 1, 0)
    );
    assert_eq!(rq.curr(), None);
    rq.check_invariants().unwrap();
}

/// Under the default features (DELAY_DEQUEUE on) an eligible sleeper is not delayed: it
/// leaves the runqueue at once with its lag, whether that lag is positive (it was owed
/// service) or exactly zero (eligible at V itself).
#[test]
fn an_eligible_sleeper_leaves_at_once() {
    // Positive lag: the entity that did not run first, run for no time.
    let (mut rq, first, other, now) = after_one_overrun(Features::DEFAULT);
    rq.yield_curr(now);
    let Pick::Run(h) = rq.pick_next(now) else {
        panic!("nothing to run")
    };
    assert_eq!(
        h, other,
        "the eligible entity runs once the ineligible one yields"
    );
    let owed = lag(&mut rq, other);
    assert!(owed > 0, "{owed}");
    let Dequeued::Removed { se, .. } = rq.dequeue(other, DequeueKind::Sleep, now) else {
        panic!("an eligible sleeper (lag {owed}) was delayed")
    };
    assert!(!se.on_rq && !se.sched_delayed);
    assert_eq!(se.vlag, owed);
    assert_eq!(
        (rq.nr_queued(), rq.nr_runnable(), rq.nr_delayed()),
        (1, 1, 0)
    );
    assert!(rq.entity(first).on_rq);
    rq.check_invariants().unwrap();

    // Zero lag: two entities placed together, the first picked sleeps before it ran.
    let mut rq: RunQueue<u32> = RunQueue::new(RqConfig::for_cpus(1));
    rq.enqueue(
        SchedEntity::new(0),
        0,
        EnqueueKind::Wakeup,
        EnqueueFlags::NONE,
        0,
    );
    rq.enqueue(
        SchedEntity::new(0),
        1,
        EnqueueKind::Wakeup,
        EnqueueFlags::NONE,
        0,
    );
    let Pick::Run(h) = rq.pick_next(0) else {
        panic!("nothing to run")
    };
    assert_eq!(lag(&mut rq, h), 0);
    let Dequeued::Removed { se, .. } = rq.dequeue(h, DequeueKind::Sleep, 0) else {
        panic!("a sleeper at V was delayed")
    };
    assert_eq!(se.vlag, 0);
    assert_eq!((rq.nr_queued(), rq.nr_delayed()), (1, 0));
    rq.check_invariants().unwrap();
}

/// What the rest of a runqueue shows after an entity left it: the counts, the load, V and
/// every remaining entity, then the next pick and the entities after it.
fn rest(rq: &mut RunQueue<u32>, now: u64) -> String {
    let mut out = format!(
        "queued {} runnable {} delayed {} load {} curr {:?} V {}",
        rq.nr_queued(),
        rq.nr_runnable(),
        rq.nr_delayed(),
        rq.load_weight(),
        rq.curr(),
        rq.avg_vruntime()
    );
    for (h, se, p) in rq.iter() {
        out += &format!("\n{h:?} {p} {se:?}");
    }
    out += &format!("\npick {:?}", rq.pick_next(now));
    for (h, se, p) in rq.iter() {
        out += &format!("\n{h:?} {p} {se:?}");
    }
    out
}

/// A dead entity (`DequeueKind::Dead`) leaves at once even when it is not eligible, and the
/// runqueue it leaves behind is exactly the one a delayed sleep finished at once
/// (`finish_delayed`, the kernel's `task_dead_fair`) leaves, under every delay feature and
/// with a waiting entity of any nice level.
#[test]
fn a_dead_entity_leaves_at_once_as_a_finished_delayed_sleep_would() {
    for delay_zero in [false, true] {
        for nice in [-5, 0, 7] {
            let build = || {
                let mut cfg = RqConfig::for_cpus(1);
                cfg.features = Features::DEFAULT.with(Feature::DelayZero, delay_zero);
                let mut rq = RunQueue::new(cfg);
                for (p, n) in [(0, 0), (1, nice)] {
                    rq.enqueue(
                        SchedEntity::new(n),
                        p,
                        EnqueueKind::Wakeup,
                        EnqueueFlags::NONE,
                        0,
                    );
                }
                let Pick::Run(first) = rq.pick_next(0) else {
                    panic!("nothing to run")
                };
                let now = 700_000;
                rq.update_curr(now);
                (rq, first, now)
            };
            let (mut dead_rq, dead, now) = build();
            assert!(!dead_rq.entity_eligible(dead), "nice {nice}: not eligible");
            let Dequeued::Removed { se, payload } = dead_rq.dequeue(dead, DequeueKind::Dead, now)
            else {
                panic!("nice {nice}: a dead entity was delayed")
            };
            assert!(!se.on_rq && !se.sched_delayed);
            dead_rq.check_invariants().unwrap();

            let (mut slept_rq, slept, _) = build();
            assert!(matches!(
                slept_rq.dequeue(slept, DequeueKind::Sleep, now),
                Dequeued::Delayed
            ));
            let (_, slept_payload) = slept_rq.finish_delayed(slept, now);
            assert_eq!(payload, slept_payload);
            assert_eq!(
                rest(&mut dead_rq, now + 1),
                rest(&mut slept_rq, now + 1),
                "delay_zero {delay_zero} nice {nice}"
            );
        }
    }
}

/// `REQUEUE_UPDATE_CURR` (mainline's 333238da9a19, v7.2): the in-place requeue of a woken
/// delayed entity charges the running entity first, so the lag saved again is measured
/// against an up-to-date average. A and B (nice 0) start together; the one picked runs 1 ms
/// and sleeps 0.5 ms behind the average, delayed. The other then runs 2 ms without being
/// charged, and the delayed one is woken in place:
///
/// * Linux v7.1 (off): V is still as of 1 ms, so the lag saved again is the −0.5 ms it left
///   with (`requeue_delayed_entity` keeps it: nothing to re-place), and it stays ineligible;
/// * on: the charge moves V by half of the 2 ms (two equal weights): the lag is +0.5 ms,
///   which DELAY_ZERO clips to 0, so it is placed afresh at V, eligible.
#[test]
fn requeue_update_curr_measures_lag_against_now() {
    let run = |features: Features| {
        let mut cfg = RqConfig::for_cpus(1);
        cfg.features = features;
        let mut rq = RunQueue::new(cfg);
        rq.enqueue(
            SchedEntity::new(0),
            0,
            EnqueueKind::Wakeup,
            EnqueueFlags::NONE,
            0,
        );
        rq.enqueue(
            SchedEntity::new(0),
            1,
            EnqueueKind::Wakeup,
            EnqueueFlags::NONE,
            0,
        );
        let Pick::Run(first) = rq.pick_next(0) else {
            panic!()
        };
        assert!(matches!(
            rq.dequeue(first, DequeueKind::Sleep, 1_000_000),
            Dequeued::Delayed
        ));
        let vlag0 = rq.entity(first).vlag;
        assert_eq!(
            vlag0, -500_000,
            "half of the 1 ms it ran ahead of the other"
        );
        let Pick::Run(second) = rq.pick_next(1_000_000) else {
            panic!()
        };
        assert_ne!(second, first);
        rq.requeue_delayed(first, 3_000_000);
        (
            rq.entity(first).vlag,
            rq.entity_eligible(first),
            rq.entity(second).sum_exec_runtime,
        )
    };
    let (vlag, eligible, charged) = run(Features::DEFAULT);
    assert_eq!((vlag, eligible, charged), (-500_000, false, 0));
    let (vlag, eligible, charged) = run(Features::parse("REQUEUE_UPDATE_CURR").unwrap());
    assert_eq!((vlag, eligible, charged), (0, true, 2_000_000));
}
