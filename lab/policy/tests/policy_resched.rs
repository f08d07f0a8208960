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
