//! The runqueue's request for a switch (`RunQueue::need_resched`, the kernel's
//! `TIF_NEED_RESCHED`): every charge of the running entity that asks for a switch is kept,
//! whichever operation charged it, until the next pick answers it.
//!
//! The kernel's rule (`update_curr`, Linux v7.1): after charging the running entity, if
//! more than one entity is queued and its request ran out (`update_deadline`) or its
//! protected slice ended, it calls `resched_curr_lazy` itself; so `enqueue_entity`,
//! `dequeue_entity`, `wakeup_preempt_fair` and every other caller set need-resched through
//! it. `wakeup_preempt_fair` returns at once when need-resched is already set, and
//! `__schedule` clears it at the pick.

use lagom_policy::{
    DequeueKind, Dequeued, EnqueueFlags, EnqueueKind, Feature, Features, Handle, Pick, RqConfig,
    RunQueue, SchedEntity, WakeFlags, Wakeup,
};

const MS: u64 = 1_000_000;

/// Two nice-0 entities A (running, picked at 0) and B, with 3 ms slices, and the features
/// given.
fn two(features: Features) -> (RunQueue<char>, Handle, Handle) {
    let mut cfg = RqConfig::for_cpus(1);
    cfg.base_slice = 3 * MS;
    cfg.features = features;
    let mut rq = RunQueue::new(cfg);
    let a = rq.enqueue(
        SchedEntity::new(0),
        'a',
        EnqueueKind::Wakeup,
        EnqueueFlags::NONE,
        0,
    );
    let b = rq.enqueue(
        SchedEntity::new(0),
        'b',
        EnqueueKind::Wakeup,
        EnqueueFlags::NONE,
        0,
    );
    match rq.pick_next(0) {
        Pick::Run(h) if h == a => (rq, a, b),
        Pick::Run(h) => (rq, h, a),
        _ => panic!("two queued entities: one runs"),
    }
}

/// Past the running entity's deadline (it was picked at 0 with a 3 ms request: 4 ms is past
/// it), an enqueue charges it, and the charge's request for a switch is kept.
#[test]
fn an_enqueue_past_the_deadline_asks_for_a_switch() {
    let (mut rq, a, _) = two(Features::DEFAULT);
    assert!(!rq.need_resched());
    rq.enqueue(
        SchedEntity::new(0),
        'c',
        EnqueueKind::Wakeup,
        EnqueueFlags::NONE,
        4 * MS,
    );
    assert!(rq.need_resched());
    assert_eq!(
        rq.entity(a).sum_exec_runtime,
        4 * MS,
        "charged by the enqueue"
    );
    // The pick answers it.
    let _ = rq.pick_next(4 * MS);
    assert!(!rq.need_resched());
}

/// The same through a dequeue (B blocks while A, past its deadline, runs on).
#[test]
fn a_dequeue_past_the_deadline_asks_for_a_switch() {
    let mut cfg = RqConfig::for_cpus(1);
    cfg.base_slice = 3 * MS;
    let mut rq = RunQueue::new(cfg);
    rq.enqueue(
        SchedEntity::new(0),
        'a',
        EnqueueKind::Wakeup,
        EnqueueFlags::NONE,
        0,
    );
    rq.enqueue(
        SchedEntity::new(0),
        'b',
        EnqueueKind::Wakeup,
        EnqueueFlags::NONE,
        0,
    );
    let c = rq.enqueue(
        SchedEntity::new(0),
        'c',
        EnqueueKind::Wakeup,
        EnqueueFlags::NONE,
        0,
    );
    let Pick::Run(run) = rq.pick_next(0) else {
        panic!()
    };
    // Some other entity than the running one leaves; three were queued, two stay.
    let leave = if run == c {
        rq.iter().map(|(h, _, _)| h).find(|&h| h != run).unwrap()
    } else {
        c
    };
    match rq.dequeue(leave, DequeueKind::Save, 4 * MS) {
        Dequeued::Removed { .. } => {}
        Dequeued::Delayed => panic!("a save dequeue is never delayed"),
    }
    assert!(rq.need_resched());
}

/// The wakeup-preemption check charges the running entity before it decides: a forked
/// wakee never preempts (`WF_FORK`), but the charge past the deadline still asks for a
/// switch, and the answer says so through `need_resched`.
#[test]
fn a_wakeup_check_that_does_not_preempt_keeps_the_charges_request() {
    let (mut rq, _, _) = two(Features::DEFAULT);
    let c = rq.enqueue(
        SchedEntity::new(0),
        'c',
        EnqueueKind::Initial,
        EnqueueFlags::NONE,
        0,
    );
    assert!(!rq.need_resched());
    assert!(matches!(
        rq.wakeup_preempt(c, WakeFlags::FORK, 4 * MS),
        Wakeup::NoPreempt
    ));
    assert!(rq.need_resched());
}

/// With one entity queued the charge asks for nothing (`nr_queued == 1`), however long it ran.
#[test]
fn alone_nothing_asks_for_a_switch() {
    let mut rq = RunQueue::new(RqConfig::for_cpus(1));
    rq.enqueue(
        SchedEntity::new(0),
        'a',
        EnqueueKind::Wakeup,
        EnqueueFlags::NONE,
        0,
    );
    let _ = rq.pick_next(0);
    assert!(!rq.task_tick(100 * MS));
    assert!(!rq.need_resched());
}

/// Within its request and its protection the running entity is not asked to leave.
#[test]
fn within_the_request_nothing_asks_for_a_switch() {
    let (mut rq, _, _) = two(Features::DEFAULT);
    rq.enqueue(
        SchedEntity::new(0),
        'c',
        EnqueueKind::Wakeup,
        EnqueueFlags::NONE,
        MS,
    );
    assert!(!rq.need_resched());
}

/// With need-resched already set, the wakeup check decides nothing (the kernel's early
/// return): a NEXT_BUDDY wakee is not made the next buddy, and the answer is no preemption
/// (the switch is coming anyway).
#[test]
fn a_pending_switch_makes_the_wakeup_check_return_at_once() {
    let (mut rq, _, _) = two(Features::DEFAULT.with(Feature::NextBuddy, true));
    rq.set_need_resched();
    let c = rq.enqueue(
        SchedEntity::new(0),
        'c',
        EnqueueKind::Wakeup,
        EnqueueFlags::NONE,
        MS,
    );
    assert!(matches!(
        rq.wakeup_preempt(c, WakeFlags::TTWU, MS),
        Wakeup::NoPreempt
    ));
    assert_eq!(rq.next_buddy(), None);
    // Cleared, the same wakeup sets the buddy.
    rq.clear_need_resched();
    let _ = rq.wakeup_preempt(c, WakeFlags::TTWU, MS);
    assert_eq!(rq.next_buddy(), Some(c));
}

/// A preempting wakeup sets need-resched; the tick reports a pending request even if its own
/// charge asked for nothing.
#[test]
fn a_preempting_wakeup_sets_need_resched_and_the_tick_reports_it() {
    let (mut rq, _, _) = two(Features::DEFAULT);
    // A shorter slice preempts (PREEMPT_SHORT) as soon as it is the pick.
    let mut se = SchedEntity::new(0);
    se.set_custom_slice(Some(MS / 2));
    let c = rq.enqueue(se, 'c', EnqueueKind::Wakeup, EnqueueFlags::NONE, MS / 10);
    assert!(matches!(
        rq.wakeup_preempt(c, WakeFlags::TTWU, MS / 10),
        Wakeup::Preempt
    ));
    assert!(rq.need_resched());
    assert!(rq.task_tick(MS / 10 + 1));
}

/// `curr_resched_at` names the first time at which the running entity's charge asks for a
/// switch, for every weight, slice, protection and history tried: a charge one ns earlier
/// asks for nothing, a charge at it asks. Each case builds the same runqueue twice (the
/// charge changes it) by a seeded script of enqueues, picks and wakeup checks.
#[test]
fn curr_resched_at_is_the_first_charge_that_asks() {
    // A small xorshift, so the cases are the same on every run.
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let mut checked = 0;
    for case in 0..400 {
        let features = match case % 4 {
            0 => Features::DEFAULT,
            1 => Features::DEFAULT.with(Feature::RunToParity, false),
            2 => Features::DEFAULT.with(Feature::NextBuddy, true),
            _ => Features::DEFAULT.with(Feature::PreemptShort, false),
        };
        let queued = 1 + next(4) as usize;
        let script: Vec<(i32, Option<u64>, u64)> = (0..queued)
            .map(|_| {
                let nice = next(40) as i32 - 20;
                let slice = (next(3) == 0).then(|| 100_000 + next(3 * MS));
                (nice, slice, next(2 * MS))
            })
            .collect();
        let ran = next(5 * MS);
        let build = || {
            let mut cfg = RqConfig::for_cpus(1 + case % 8);
            cfg.features = features;
            let mut rq = RunQueue::new(cfg);
            let mut t = 0;
            for (i, &(nice, slice, gap)) in script.iter().enumerate() {
                let mut se = SchedEntity::new(nice);
                se.set_custom_slice(slice.map(|s| s.clamp(100_000, 100 * MS)));
                let h = rq.enqueue(se, i, EnqueueKind::Wakeup, EnqueueFlags::NONE, t);
                if i == 0 {
                    assert!(matches!(rq.pick_next(t), Pick::Run(_)));
                } else {
                    let _ = rq.wakeup_preempt(h, WakeFlags::TTWU, t);
                }
                t += gap;
            }
            // The running entity runs on a while; a charge that asked is answered by a pick.
            if rq.update_curr(t + ran) || rq.need_resched() {
                let _ = rq.pick_next(t + ran);
            }
            rq
        };
        let rq = build();
        let Some(at) = rq.curr_resched_at() else {
            let c = rq.curr().expect("something runs");
            assert!(
                rq.nr_queued() == 1 || rq.need_resched(),
                "case {case}: no time named while {} are queued ({:?})",
                rq.nr_queued(),
                rq.entity(c)
            );
            continue;
        };
        let start = rq.entity(rq.curr().unwrap()).exec_start;
        let (mut early, mut on_time) = (build(), build());
        if at > start {
            assert!(
                !early.update_curr(at - 1),
                "case {case}: a charge 1 ns before {at} asked for a switch"
            );
        }
        assert!(
            on_time.update_curr(at.max(start + 1)),
            "case {case}: the charge at {at} asked for nothing"
        );
        checked += 1;
    }
    assert!(checked > 100, "only {checked} cases had a time to check");
}
