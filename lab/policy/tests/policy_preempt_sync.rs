//! WF_SYNC wakeup preemption (`preempt_sync`, NEXT_BUDDY on): Linux v7.1's rule, whose
//! threshold is measured as `now − exec_start` right after the charge (always 0: the rule
//! never preempts unless the migration cost is 0), and the fix posted for it
//! (`PREEMPT_SYNC_RUNTIME`: the time run since the waker was picked); and the flags each
//! activation path passes to the check (`activation_flags`).

use lagom_policy::vtime::vbefore;
use lagom_policy::{
    EnqueueFlags, EnqueueKind, Feature, Features, Handle, Pick, RqConfig, RunQueue, SchedEntity,
    WakeFlags, Wakeup,
};

const MS: u64 = 1_000_000;

/// Two nice-0 entities with 3 ms slices; one is picked at 0 and runs. NEXT_BUDDY and
/// PREEMPT_SYNC_RUNTIME on, PREEMPT_SHORT off so that the wakeup goes through the buddy /
/// sync path.
fn running() -> (RunQueue<u32>, Handle) {
    running_with(
        Features::DEFAULT.with(Feature::PreemptSyncRuntime, true),
        500_000,
    )
}

/// [`running`] with `features` (NEXT_BUDDY on, PREEMPT_SHORT off on top) and the migration
/// cost given.
fn running_with(features: Features, migration_cost: u64) -> (RunQueue<u32>, Handle) {
    let mut cfg = RqConfig::for_cpus(1);
    cfg.base_slice = 3 * MS;
    cfg.migration_cost = migration_cost;
    cfg.features = features
        .with(Feature::NextBuddy, true)
        .with(Feature::PreemptShort, false);
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
    let h = rq.enqueue(se, 2, EnqueueKind::Wakeup, EnqueueFlags::NONE, now);
    let curr = rq.curr().expect("something runs");
    assert!(vbefore(rq.entity(h).deadline, rq.entity(curr).deadline));
    match rq.wakeup_preempt(h, wf, now) {
        Wakeup::Preempt => true,
        Wakeup::NoPreempt => false,
        Wakeup::FinishedDelayed { .. } => panic!("nothing is delayed"),
    }
}

/// A WF_SYNC wakeup preempts only once the running task has run the threshold (migration_cost,
/// 0.5 ms) since it was picked. Ticks at 1 ms and 1.6 ms account the running task just before
/// the 1.7 ms wakeup, so `now − exec_start` is only 0.1 ms (and 0 after the wakeup's own
/// accounting: the bug that the posted `preempt_sync` fix corrects), while the task has run 1.7
/// ms since it was picked: only `sum_exec_runtime − prev_sum_exec_runtime` lets this wakeup
/// preempt.
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

/// Linux v7.1 (PREEMPT_SYNC_RUNTIME off, the default): the waker has run 1.7 ms since it was
/// picked, but `preempt_sync` measures `now − exec_start` right after the wakeup's own charge
/// set `exec_start = now`: 0, below the 0.5 ms threshold, so the sync wakeup does not
/// preempt. With a migration cost of 0 the threshold is 0 and `0 ≥ 0` preempts.
#[test]
fn v7_1_sync_threshold_is_dead() {
    let (mut rq, _) = running_with(Features::DEFAULT, 500_000);
    let _ = rq.task_tick(MS);
    assert!(!sync_wake(
        &mut rq,
        WakeFlags::TTWU | WakeFlags::SYNC,
        MS + 700_000
    ));
    let (mut rq, _) = running_with(Features::DEFAULT, 0);
    assert!(sync_wake(
        &mut rq,
        WakeFlags::TTWU | WakeFlags::SYNC,
        MS + 700_000
    ));
}

/// `WF_RQ_SELECTED` quarters the threshold (the fix on): the waker ran 0.2 ms since its pick,
/// the migration cost is 0.5 ms: with the flag (0.2 ≥ 0.125) the sync wakee preempts,
/// without it (0.2 < 0.5) not.
#[test]
fn quarter_threshold_with_rq_selected() {
    let sync = WakeFlags::TTWU | WakeFlags::SYNC;
    let (mut rq, _) = running();
    assert!(sync_wake(&mut rq, sync | WakeFlags::RQ_SELECTED, 200_000));
    let (mut rq, _) = running();
    assert!(!sync_wake(&mut rq, sync, 200_000));
}

/// The kernel's activation flags, path by path (`activation_flags`): the waker's own
/// activation (`ttwu_queue` → `ttwu_do_activate`) keeps every flag; `sched_ttwu_pending`
/// passes only `WF_MIGRATED` (the `sched_remote_wakeup` bit), so a wakelist activation never
/// sees the waker's `WF_SYNC`; `ttwu_runnable` passes `WF_TTWU | WF_SYNC` (no selection ran);
/// `wake_up_new_task` `WF_FORK` with `WF_RQ_SELECTED`; `attach_task` nothing.
#[test]
fn activation_flags_follow_the_path() {
    use lagom_policy::{ActivatePath, EnqueueFlags, activation_flags};
    let t = WakeFlags::TTWU;
    let s = WakeFlags::SYNC;
    let r = WakeFlags::RQ_SELECTED;
    let m = WakeFlags::MIGRATED;
    let f = WakeFlags::FORK;
    assert_eq!(
        activation_flags(ActivatePath::Direct, t | s | r | m),
        t | s | r | m
    );
    assert_eq!(activation_flags(ActivatePath::Wakelist, t | s | r | m), m);
    assert_eq!(
        activation_flags(ActivatePath::Wakelist, t | s | r),
        WakeFlags::NONE
    );
    assert_eq!(
        activation_flags(ActivatePath::RunnableInPlace, t | s),
        t | s
    );
    assert_eq!(activation_flags(ActivatePath::Fork, f | r), f | r);
    assert_eq!(
        activation_flags(ActivatePath::Attach, t | s | r | m),
        WakeFlags::NONE
    );
    assert_eq!(
        EnqueueFlags::of_wake(activation_flags(ActivatePath::Wakelist, t | m)),
        EnqueueFlags::MIGRATED
    );
    // A sync wakee that would preempt by `preempt_sync` when its waker activates it does not
    // when it comes through the wakelist (the flag is dropped): the fix on, the waker ran
    // 1.7 ms since its pick.
    let (mut rq, _) = running();
    let _ = rq.task_tick(MS);
    assert!(sync_wake(
        &mut rq,
        activation_flags(ActivatePath::Direct, t | s),
        MS + 700_000
    ));
    let (mut rq, _) = running();
    let _ = rq.task_tick(MS);
    let plain = sync_wake(&mut rq, t, MS + 700_000);
    let (mut rq, _) = running();
    let _ = rq.task_tick(MS);
    assert_eq!(
        sync_wake(
            &mut rq,
            activation_flags(ActivatePath::Wakelist, t | s),
            MS + 700_000
        ),
        plain,
        "through the wakelist the sync wakeup is a plain one"
    );
}
