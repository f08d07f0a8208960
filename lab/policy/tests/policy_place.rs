//! Placement, reweight and yield.

use lagom_policy::{
    DequeueKind, Dequeued, EnqueueFlags, EnqueueKind, Feature, Features, NICE_0_LOAD, Pick,
    RqConfig, RunQueue, SchedEntity, calc_delta_fair, weight_of_nice,
};

fn rq(features: Features) -> RunQueue<u32> {
    let mut cfg = RqConfig::for_cpus(4);
    cfg.features = features;
    RunQueue::new(cfg)
}

fn real_lag(rq: &mut RunQueue<u32>, h: lagom_policy::Handle) -> i128 {
    let v = rq.avg_vruntime();
    let se = rq.entity(h);
    v.wrapping_sub(se.vruntime) as i64 as i128 * se.weight as i128 / NICE_0_LOAD as i128
}

/// A runqueue with a running nice-0 entity and three queued ones of mixed nice, after some
/// running so that lags are non-zero.
fn busy() -> (RunQueue<u32>, Vec<lagom_policy::Handle>, u64) {
    let mut rq = rq(Features::DEFAULT);
    let hs: Vec<_> = [0, 3, -4, 7]
        .iter()
        .enumerate()
        .map(|(i, n)| {
            rq.enqueue(
                SchedEntity::new(*n),
                i as u32,
                EnqueueKind::Initial,
                EnqueueFlags::NONE,
                0,
            )
        })
        .collect();
    let mut now = 0;
    for _ in 0..7 {
        now += 1_300_000;
        rq.task_tick(now);
        let _ = rq.pick_next(now);
    }
    rq.update_curr(now + 400_000);
    (rq, hs, now + 400_000)
}

/// Reweighting (a nice change) of a queued entity and of the running one leaves V where it
/// was and keeps each one's real lag within rounding.
#[test]
fn reweight_keeps_v_and_real_lag() {
    for running in [false, true] {
        let (mut rq, hs, now) = busy();
        let curr = rq.curr().unwrap();
        let h = if running {
            curr
        } else {
            *hs.iter().find(|h| **h != curr).unwrap()
        };
        let mut v_before = rq.avg_vruntime();
        let mut lag_before = real_lag(&mut rq, h);
        assert_ne!(lag_before, 0);
        for nice in [-15, 12, 0] {
            let w_old = rq.entity(h).weight;
            let load_old = rq.load_weight();
            rq.reweight(h, weight_of_nice(nice), now);
            rq.check_invariants().unwrap();
            let v_after = rq.avg_vruntime();
            // V is a floor: its fraction of a virtual ns, weighted by the old total, spreads
            // over the new total.
            let v_tol = ((load_old + weight_of_nice(nice)) / rq.load_weight() + 2) as i64;
            let moved = v_after.wrapping_sub(v_before) as i64;
            assert!(moved.abs() <= v_tol, "V moved by {moved} (> {v_tol})");
            v_before = v_after;
            let lag_after = real_lag(&mut rq, h);
            // Rounding: one virtual ns of truncation (and of V's floor) is worth w/NICE_0_LOAD
            // real ns at either weight.
            let tol = ((w_old + weight_of_nice(nice)) / NICE_0_LOAD + 2) as i128;
            assert!(
                (lag_after - lag_before).abs() <= tol,
                "{lag_before} -> {lag_after}"
            );
            assert_eq!(rq.entity(h).weight, weight_of_nice(nice));
            lag_before = lag_after;
        }
    }
}

/// A new task starts at V with half a request (PLACE_DEADLINE_INITIAL); without the feature,
/// or on a wakeup, with a full one.
#[test]
fn new_tasks_get_half_a_request() {
    for (features, kind, halves) in [
        (Features::DEFAULT, EnqueueKind::Initial, true),
        (Features::DEFAULT, EnqueueKind::Wakeup, false),
        (
            Features::DEFAULT.with(Feature::PlaceDeadlineInitial, false),
            EnqueueKind::Initial,
            false,
        ),
    ] {
        let (mut q, _, now) = busy();
        q.set_config(RqConfig {
            features,
            ..*q.config()
        });
        let v = q.avg_vruntime();
        let h = q.enqueue(SchedEntity::new(5), 9, kind, EnqueueFlags::NONE, now);
        let se = *q.entity(h);
        let vslice = calc_delta_fair(q.config().base_slice, se.weight);
        assert_eq!(se.vruntime, v, "zero lag: placed at V");
        let want = if halves { vslice / 2 } else { vslice };
        assert_eq!(se.deadline.wrapping_sub(se.vruntime), want);
    }
}

/// A save/restore dequeue (migration) keeps the deadline relative to vruntime
/// (PLACE_REL_DEADLINE) and the lag; a sleep gets a fresh request on wakeup.
#[test]
fn migration_keeps_the_relative_deadline_and_the_lag() {
    let (mut src, hs, now) = busy();
    let curr = src.curr().unwrap();
    let h = *hs.iter().find(|h| **h != curr).unwrap();
    let se = *src.entity(h);
    let rel = se.deadline.wrapping_sub(se.vruntime);
    let lag = {
        let v = src.avg_vruntime();
        v.wrapping_sub(se.vruntime) as i64
    };
    let Dequeued::Removed { se: moved, payload } = src.dequeue(h, DequeueKind::Save, now) else {
        panic!()
    };
    assert!(moved.rel_deadline && moved.deadline == rel);
    assert_eq!(moved.vlag, lag);
    let (mut dst, _, now2) = busy();
    let h2 = dst.enqueue(
        moved,
        payload,
        EnqueueKind::Restore,
        EnqueueFlags::NONE,
        now2,
    );
    let se2 = *dst.entity(h2);
    assert!(!se2.rel_deadline);
    assert_eq!(
        se2.deadline.wrapping_sub(se2.vruntime),
        rel,
        "the request carries over"
    );
    let v = dst.avg_vruntime();
    assert!(
        (v.wrapping_sub(se2.vruntime) as i64 - lag).abs() <= 2,
        "the lag carries over"
    );
    dst.check_invariants().unwrap();
}

/// Yield: an eligible running entity forfeits the rest of its request (vruntime jumps to the
/// deadline, a new request is issued) and the next pick prefers another entity.
#[test]
fn yield_forfeits_the_request() {
    let mut q = rq(Features::DEFAULT);
    let b = q.enqueue(
        SchedEntity::new(0),
        1,
        EnqueueKind::Wakeup,
        EnqueueFlags::NONE,
        0,
    );
    // `a` re-joins owed 1 ms, so it runs first and is still eligible 10 µs later.
    let mut owed = SchedEntity::new(0);
    owed.vlag = 1_000_000;
    let a = q.enqueue(owed, 0, EnqueueKind::Wakeup, EnqueueFlags::NONE, 0);
    let Pick::Run(first) = q.pick_next(0) else {
        panic!()
    };
    assert_eq!(first, a);
    let old = *q.entity(first);
    q.yield_curr(10_000);
    let se = *q.entity(first);
    assert_eq!(se.sum_exec_runtime, 10_000);
    assert_eq!(se.vruntime, old.deadline);
    assert_eq!(
        se.deadline,
        old.deadline
            .wrapping_add(calc_delta_fair(se.slice, se.weight))
    );
    let Pick::Run(next) = q.pick_next(10_000) else {
        panic!()
    };
    assert_ne!(next, first);
    assert!([a, b].contains(&next));
    q.check_invariants().unwrap();
}
