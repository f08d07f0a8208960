//! WF_SYNC wakeup preemption (`preempt_sync`, NEXT_BUDDY on).

use lagom_policy::vtime::vbefore;
use lagom_policy::{
    EnqueueKind, Feature, Features, Handle, Pick, RqConfig, RunQueue, SchedEntity, WakeFlags,
    Wakeup,
};

const MS: u64 = 1_000_000;

/// Two nice-0 entities with 3 ms slices; one is picked at 0 and runs. NEXT_BUDDY on,
/// PREEMPT_SHORT off so that the wakeup goes through the buddy / sync path.
fn running() -> (RunQueue<u32>, Handle) {
    let mut cfg = RqConfig::for_cpus(1);
    cfg.base_slice = 3 * MS;
    cfg.features = Features::DEFAULT
        .with(Feature::NextBuddy, true)
        .with(Feature::PreemptShort, false);
    let mut rq = RunQueue::new(cfg);
    rq.enqueue(SchedEntity::new(0), 0, EnqueueKind::Wakeup, 0);
    rq.enqueue(SchedEntity::new(0), 1, EnqueueKind::Wakeup, 0);
    let Pick::Run(curr) = rq.pick_next(0) else {
        panic!()
    };
    (rq, curr)
}

/// Wakes a fresh 1 ms-slice entity (so its deadline is earlier than the running one's) with
/// `wf` at `now`.
fn sync_wake(rq: &mut RunQueue<u32>, wf: WakeFlags, now: u64) -> bool {
    let mut se = SchedEntity::new(0);
    se.set_custom_slice(Some(MS));
    let h = rq.enqueue(se, 2, EnqueueKind::Wakeup, now);
    let curr = rq.curr().expect("something runs");
    assert!(vbefore(rq.entity(h).deadline, rq.entity(curr).deadline));
    match rq.wakeup_preempt(h, wf, now) {
        Wakeup::Preempt => true,
        Wakeup::NoPreempt => false,
        Wakeup::FinishedDelayed { .. } => panic!("nothing is delayed"),
    }
}

/// A WF_SYNC wakeup preempts only once the running task has run the threshold
/// (migration_cost, 0.5 ms) since it was picked. Ticks at 1 ms and 1.6 ms account the running
/// task just before the 1.7 ms wakeup, so `now − exec_start` is only 0.1 ms (and 0 after the
/// wakeup's own accounting: the seed-002 bug), while the task has run 1.7 ms since it was
/// picked: only `sum_exec_runtime − prev_sum_exec_runtime` lets this wakeup preempt.
#[test]
fn sync_wakeup_preempts_after_the_waker_ran_its_threshold_since_pick() {
    let (mut rq, curr) = running();
    assert!(!rq.task_tick(MS));
    assert!(!rq.task_tick(MS + 600_000));
    assert!(sync_wake(
        &mut rq,
        WakeFlags::TTWU | WakeFlags::SYNC,
        MS + 700_000
    ));
    let se = rq.entity(curr);
    assert_eq!(se.sum_exec_runtime - se.prev_sum_exec_runtime, MS + 700_000);
}

/// Before the threshold a WF_SYNC wakeup does not preempt, although the same wakeup without
/// WF_SYNC does (the wakee is the next buddy and eligible); the threshold is measured from
/// the pick, so run time from earlier turns does not count.
#[test]
fn sync_wakeup_waits_for_the_threshold() {
    let (mut rq, _) = running();
    assert!(!sync_wake(
        &mut rq,
        WakeFlags::TTWU | WakeFlags::SYNC,
        200_000
    ));
    let (mut rq, _) = running();
    assert!(
        sync_wake(&mut rq, WakeFlags::TTWU, 200_000),
        "a plain wakeup preempts"
    );
    // With WF_RQ_SELECTED the threshold is a quarter: 0.125 ms < 0.2 ms.
    let (mut rq, _) = running();
    assert!(sync_wake(
        &mut rq,
        WakeFlags::TTWU | WakeFlags::SYNC | WakeFlags::RQ_SELECTED,
        200_000
    ));
    // The first entity runs its 3 ms request, the second runs its own, and the first is
    // picked again at 6 ms: it has run 3 ms in all but only 0.2 ms since this pick.
    let (mut rq, first) = running();
    assert!(rq.task_tick(3 * MS));
    let Pick::Run(second) = rq.pick_next(3 * MS) else {
        panic!()
    };
    assert_ne!(first, second);
    assert!(rq.task_tick(6 * MS));
    let Pick::Run(again) = rq.pick_next(6 * MS) else {
        panic!()
    };
    assert_eq!(again, first);
    let wake_at = 6 * MS + 200_000;
    rq.update_curr(wake_at);
    let se = *rq.entity(first);
    assert_eq!(se.sum_exec_runtime, 3 * MS + 200_000);
    assert_eq!(se.sum_exec_runtime - se.prev_sum_exec_runtime, 200_000);
    assert!(!sync_wake(
        &mut rq,
        WakeFlags::TTWU | WakeFlags::SYNC,
        wake_at
    ));
}
