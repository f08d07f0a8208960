//! Moving tasks between workers: newly idle balance (before a worker sleeps) and periodic
//! balance (from the tick of a busy worker). What to move is the policy's decision
//! (`lagom_policy`'s `balance.rs`); this file takes the locks and moves the tasks.
//!
//! ## Protocol
//!
//! The puller reads every worker's published `load` and `nr_running` (Relaxed hints), asks
//! the policy for an imbalance, then locks both runqueues, lower index first, and walks the
//! busiest one. A task may move if the policy allows it and it is neither the runqueue's
//! current entity nor `on_cpu` (Acquire: a task still being switched away from has not
//! saved its registers yet), and — the migration contract (`wake/select.rs`) — it has never
//! run or may migrate: a started task that may not is allowed only where it is queued, so by
//! default only tasks that were never switched in move. It moves with `DequeueKind::Save`
//! and `EnqueueKind::Restore` under both locks, so `on_rq` stays true throughout, its `cpu`
//! changes under both locks, and its handle is rewritten before either lock is released.
//! Readers therefore always find a task where its `cpu` says, once they hold that runqueue's
//! lock:
//!
//! * `ttwu_runnable` locks the runqueue of the `cpu` it read and retries if `cpu` changed
//!   (O4).
//! * A delayed wakeup queued on the old worker's wakelist (TTWU_QUEUE_DELAYED) can meet a
//!   delayed task that the periodic balancer moved (only it moves delayed tasks). The drain
//!   compares `cpu` with its own index under its lock and forwards the entry to the worker
//!   that now owns the task ("chase after it", `wake/queue.rs`); that worker repeats the test
//!   under its own lock. Loom model 7 (`loom-tests/tests/migrate.rs`, mutant
//!   `drain_no_chase`) races the waker, the balancer and the drain.
//!
//! The periodic balance runs on busy workers only (from their tick, which looks every
//! `BALANCE_INTERVAL`, 4 ms); an idle worker sleeps in `futex_wait`. Each domain level
//! balances at its own interval (`periodic_balance_due`, the kernel's
//! `sched_balance_domains`): `policy::LevelBalance` keeps the level's `balance_interval` (from
//! `min_interval`, the span's weight in ms; doubled while the level is balanced, up to
//! `max_interval`, or all pinned, up to 512 ms; back to `min_interval` once it finds an
//! imbalance) and last balance, and a busy worker waits that interval × `busy_factor` (16):
//! 32 ms or more for a 2-CPU domain. Only one worker of each group balances a level for it
//! (`policy::should_we_balance`: the group's first idle CPU, else its first CPU; a busy
//! worker that is not the one stops its walk there). Differences: the tick looks every 4 ms,
//! not every 1 ms jiffy, so a level is late by up to 4 ms; and an idle worker has no periodic
//! (idle) balance of its own, since it sleeps — the nohz kick stands for it. A busy worker whose tick finds nothing to pull but has tasks waiting
//! kicks a sleeping idle worker (`nohz_kick`, the kernel's nohz balancer kick), which wakes,
//! finds its queues empty and runs the newly idle balance.
//!
//! Both balances walk the puller's domains bottom-up (SMT siblings first, then its LLC,
//! then package and NUMA): the newly idle one with `newidle_imbalance_domains`, which may
//! pull up to half the difference in runnable tasks to the busiest CPU at once, the periodic
//! one with `periodic_imbalance_level` at each due level, by load, with each level's `imbalance_pct` (110
//! within a core, 117 above). So work moves between cache siblings before it crosses an LLC.
//! With ITMT (and CPU priorities that differ) a preferred idle CPU first takes the queued
//! work of the least preferred busy one (asym packing, `balance_asym`).
//!
//! ## Active balance (ITMT)
//!
//! When that least preferred CPU runs a single task, the idle preferred worker asks for the
//! running task itself (`request_active`, under the source's lock): it names the task
//! (`Worker::active_push_task`) and itself (`Worker::active_push`) and sets the source's
//! need-resched, so the task's next `cond_resched` (or yield, or preemption) is a schedule
//! point. There (`active_push_point`, from `schedule_prepare`, under the source's lock) a task
//! still running alone, that may move, goes back into the tree (`RunQueue::put_curr`) and the
//! source switches to its idle context instead of picking. Once the switch is complete — the
//! task's registers saved, `on_cpu` clear — `finish_task_switch` hands it over
//! (`active_push_switched_out`: both locks, the pull's checks again, `move_task`), counts it in
//! the destination's `balance_active` and kicks it. If the task blocked or may no longer move,
//! it simply stays queued on the source and its idle loop picks it again. By default neither
//! step re-checks that the destination is still idle (`lagom_policy::may_active_push`): the
//! kernel's `active_load_balance_cpu_stop` does not either, so a task woken onto the preferred
//! CPU while the move was pending ends up sharing it with the moved one — the preferred-core
//! stall that `examples/asym_stall.rs` reproduces. Under lagom's ACTIVE_BALANCE_RECHECK both
//! steps do (the second under the destination's lock, its wakelist counted), and a request the
//! destination's idleness did not outlast is dropped. A task that blocks before its next
//! schedule point is handed over at its wakeup instead (`wake/select.rs`). The kernel pushes
//! the running task at once with its stopper thread; lagom cannot move a task whose registers
//! its worker still holds, so it waits for the task's next schedule point (at most
//! `cond_resched`'s 50 µs tick for a task that computes). A started task moves this way only
//! where migration is opted in (the contract below). A busy worker that runs one such task,
//! with an idle worker preferred to it, kicks that worker from its tick (`nohz_kick`, the
//! kernel's kick for `sd_asym_packing`), so a request lost to a race is made again.
//!
//! Which queued task may move is `policy::can_migrate`, the kernel's `can_migrate_task`,
//! given the domain the two workers meet in (their lowest common level: SMT, then the LLC,
//! then package and NUMA) and the puller's failure count: a task that ran within the
//! migration cost (`Builder::sched_migration_cost_ns`, 0.5 ms by default) is cache hot, as
//! is the source's next buddy while the puller has tasks (CACHE_HOT_BUDDY); nothing is hot
//! within an SMT core; hot tasks move once `nr_balance_failed` exceeds the domain's
//! `cache_nice_tries` (1 within an LLC or package, 2 across NUMA nodes); an ineligible task
//! stays while no attempt has failed and the puller has tasks. `Worker::nr_balance_failed`
//! counts the puller's attempts that found an imbalance and a task that may come, and moved
//! nothing; one that moved something resets it, and so does one that found every source all
//! pinned (`policy::failed_after`, the kernel's `out_all_pinned`). The kernel counts only
//! periodic and idle balances there, not newly idle ones; lagom's idle worker has no
//! separate idle balance (a kicked idle worker runs its newly idle balance, which stands for
//! the kernel's nohz idle balance), so every attempt counts. The kernel also resets the
//! count when a domain is balanced (`out_balanced`); lagom does not yet (`failed_after`
//! says why).
//!
//! ## All pinned: the redo
//!
//! Under the migration contract most queued tasks of a busy worker may not come (they
//! started there). When no task a pull examined may come (LBF_ALL_PINNED:
//! `policy::clears_all_pinned` of none, on a source with more than one runnable task), the
//! attempt leaves that worker out and asks the policy again (`policy::PinnedCpus`, the
//! kernel's `goto redo` in `sched_balance_rq`), so an idle worker that meets a worker full of
//! started tasks goes on to one where a task that never ran waits. Each redo leaves one more
//! worker out, so an attempt takes at most one pull per worker. The kernel redoes within
//! one domain and meets the pinned CPU again at the next; lagom leaves it out for the rest
//! of the walk (the same answer). A moved task is enqueued with `ENQUEUE_MIGRATED`
//! (`EnqueueFlags::MIGRATED`), which clears its `exec_start`: it is not hot where it arrives.
//!
//! A pulled runnable task runs the wakeup-preemption check on its new runqueue, as the
//! kernel's `attach_task` does, so a task with an earlier deadline is not kept waiting for
//! the puller's running task to finish its request.

use crate::locking::atomic::Ordering;
use crate::trace::MigrateCause;
use crate::wake::{check_preempt, cpu_view};
use crate::worker::{QueuedTask, Shared, Task, Worker, WorkerThread, trace};
use lagom_policy::{
    ActivatePath, ActivePush, BALANCE_INTERVAL, Candidate, CpuView, DequeueKind, Dequeued,
    EnqueueFlags, EnqueueKind, Handle, Imbalance, LbOutcome, LevelBalance, LoadView, MigrateEnv,
    PinnedCpus, PullReason, RunQueue, WakeFlags, activation_flags, active_request_made,
    asym_active_balance, can_migrate, clears_all_pinned, failed_after, may_active_push, moved,
    newidle_imbalance_domains, nohz_kick_target, periodic_imbalance_level, should_we_balance,
    task_hot,
};

/// At most this many queued tasks are examined, and so moved, in one balance (the kernel's
/// `sysctl_sched_nr_migrate` bound on `detach_tasks`' loop), so one pass holds two locks for a
/// bounded time however long the busiest runqueue is (with 10 000 tasks asleep
/// there, delayed, an unbounded scan for one movable task made each newly idle balance cost
/// O(n), 17 % of a spawn storm's CPU time). Each pass resumes after the last slot the previous
/// one examined (`Worker::balance_cursor`).
const NR_MIGRATE: usize = 32;

/// Which balancer pulls (for the counters).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Balancer {
    NewlyIdle,
    Periodic,
    /// ITMT active balance of a task that was running (`active_push_switched_out`).
    Active,
}

fn view(shared: &Shared) -> impl Fn(usize) -> LoadView + '_ {
    |i| {
        let w = &shared.workers[i];
        LoadView {
            load: w.load.load(Ordering::Relaxed),
            nr_running: w.nr_running.load(Ordering::Relaxed),
        }
    }
}

/// Newly idle balance of worker `me` (module doc): the policy walks `me`'s domains
/// (`newidle_imbalance_domains`: SMT, LLC, then up; ITMT asym packing first where it
/// applies), searching again without a worker whose tasks were all pinned (`PinnedCpus`,
/// the kernel's `redo`). Returns whether a task was pulled.
pub(crate) fn newidle_balance(shared: &Shared, me: usize, now: u64) -> bool {
    let mut pinned = PinnedCpus::default();
    loop {
        let Some((imb, why)) =
            newidle_imbalance_domains(&shared.cpus, me, view(shared), shared.features, &pinned)
        else {
            settle_failed(shared, me, pinned.nothing_found());
            // ITMT active balance: a less preferred worker runs one task that should be here.
            if let Some(src) = asym_active_balance(&shared.cpus, me, view(shared), shared.features)
            {
                request_active(shared, src, me);
            }
            return false;
        };
        let (pulled, outcome) = pull(shared, me, imb, Balancer::NewlyIdle, now);
        if pinned.redo(imb.busiest, outcome) {
            continue;
        }
        settle_failed(shared, me, outcome);
        if why == PullReason::AsymPacking && pulled > 0 {
            let w = &shared.workers[me];
            w.stats
                .balance_asym
                .fetch_add(pulled as u64, Ordering::Relaxed);
        }
        return pulled > 0;
    }
}

/// Worker `me`'s `nr_balance_failed` after an attempt that ended in `outcome`
/// (`policy::failed_after`: reset when all pinned or moved; one more when it failed), and
/// the `balance_failed` counter (the failures). Only `me` writes its count.
fn settle_failed(shared: &Shared, me: usize, outcome: LbOutcome) {
    let w = &shared.workers[me];
    let was = w.nr_balance_failed.load(Ordering::Relaxed);
    let now = failed_after(was, outcome);
    if now != was {
        w.nr_balance_failed.store(now, Ordering::Relaxed);
    }
    if outcome == LbOutcome::Failed {
        w.stats.inc(&w.stats.balance_failed);
    }
}

/// Asks worker `src`, which runs a single task, to hand that task to the idle, preferred
/// worker `me` at its next schedule point (module doc, "Active balance"): the request names
/// the task, and need-resched makes its next `cond_resched` a schedule point. Taken under
/// `src`'s lock, so that the task named is the one running and the need-resched is not lost
/// to a pick in progress.
fn request_active(shared: &Shared, src: usize, me: usize) {
    let w = &shared.workers[src];
    let mut rq = w.rq.lock();
    let Some(c) = rq.curr() else { return };
    if rq.nr_runnable() != 1 {
        return;
    }
    let t = rq.payload(c);
    // The running task has started, so it may come here only if its affinity allows and it
    // opted in to migration (`may_pull` without the `started` read, which would touch the
    // scheduling part of a task another worker is running). A request is pending while it
    // names the task that still runs here.
    let allowed = t.allowed(me) && t.migratable;
    let pending = w.active_push.load(Ordering::Relaxed) != usize::MAX
        && w.active_push_task.load(Ordering::Relaxed) == t.id;
    if !active_request_made(allowed, pending) {
        return;
    }
    w.active_push_task.store(t.id, Ordering::Relaxed);
    w.active_push.store(me, Ordering::Relaxed);
    rq.set_need_resched();
    w.publish(&rq);
    crate::locking::probe::probe!(
        "sched/balance: an idle preferred worker asks for a running task"
    );
}

/// At a schedule point of `prev`, running on worker `me` (which holds its runqueue lock,
/// `rq`, and has put `prev` back with `put_prev`): whether an ITMT active-balance request
/// names `prev`, which still runs alone here and may go to the worker that asked (idle when
/// it asked; re-checked only under ACTIVE_BALANCE_RECHECK, as the kernel's stopper does not,
/// `policy::may_active_push`). Then
/// `prev` goes back into the tree (`put_curr`) and the caller switches to the idle context
/// instead of picking; [`active_push_switched_out`] moves it once its registers are saved.
pub(crate) fn active_push_point(
    shared: &Shared,
    me: usize,
    rq: &mut RunQueue<QueuedTask>,
    prev: &Task,
) -> bool {
    let w = &shared.workers[me];
    let dst = w.active_push.load(Ordering::Relaxed);
    if dst == usize::MAX || w.active_push_task.load(Ordering::Relaxed) != prev.id {
        return false;
    }
    // Whether `dst` is still idle counts only under ACTIVE_BALANCE_RECHECK: the kernel's
    // stopper does not re-check it (`lagom_policy::may_active_push`).
    if dst >= shared.workers.len()
        || !may_active_push(
            shared.features,
            ActivePush {
                named: true,
                on_src: rq.nr_runnable() == 1 && prev.on_rq.load(Ordering::Relaxed),
                allowed: may_pull(prev, dst),
                dst_idle: cpu_view(shared, dst).idle,
            },
        )
    {
        w.active_push.store(usize::MAX, Ordering::Relaxed);
        return false;
    }
    rq.put_curr();
    true
}

/// On worker thread `wt`, just switched away from `prev` and before its `on_cpu` is
/// cleared (so `prev` is alive and still this worker's): the handle under which `prev` stays
/// queued here if [`active_push_point`] chose to hand it over, for
/// [`active_push_switched_out`].
pub(crate) fn active_push_pending(wt: &WorkerThread, prev: &Task) -> Option<Handle> {
    let w = &wt.shared.workers[wt.index];
    if w.active_push.load(Ordering::Relaxed) == usize::MAX
        || w.active_push_task.load(Ordering::Relaxed) != prev.id
    {
        return None;
    }
    // SAFETY: `prev` is still on this worker's CPU (`on_cpu` not yet cleared): nobody else
    // touches its scheduling part (wakers wait for `on_cpu`, balancers skip it).
    unsafe { prev.sched(|s| s.handle) }
}

/// After the switch away from `prev` (its registers saved, `on_cpu` cleared), queued here
/// under `h` ([`active_push_pending`]): moves it to the worker that asked, under both locks,
/// with the checks of the kernel's stopper (`policy::may_active_push`: still queued here
/// under `h`, not running, may move there — whether that worker is still idle only under
/// ACTIVE_BALANCE_RECHECK, read under its lock);
/// counted in `balance_active` there, which is kicked. Else nothing: it runs here again. `prev` is dereferenced only once this worker's lock shows
/// it still queued here (so its registry keeps it alive).
pub(crate) fn active_push_switched_out(wt: &WorkerThread, prev: *const Task, h: Handle) {
    let shared = &wt.shared;
    let me = wt.index;
    let dst = shared.workers[me]
        .active_push
        .swap(usize::MAX, Ordering::Relaxed);
    if dst >= shared.workers.len() || dst == me {
        return;
    }
    let now = crate::sys::time::sched_clock();
    let (lo, hi) = (me.min(dst), me.max(dst));
    let mut g_lo = shared.workers[lo].rq.lock();
    let mut g_hi = shared.workers[hi].rq.lock();
    let (src_rq, dst_rq) = if me == lo {
        (&mut *g_lo, &mut *g_hi)
    } else {
        (&mut *g_hi, &mut *g_lo)
    };
    match src_rq.try_payload(h) {
        Some(p) if p.as_ptr() == prev => {}
        _ => return,
    }
    let t = src_rq.payload(h);
    let on_src = src_rq.curr() != Some(h) && !t.on_cpu.load(Ordering::Acquire);
    let d = &shared.workers[dst];
    let push = ActivePush {
        named: true,
        on_src,
        allowed: on_src && may_pull(t, dst),
        dst_idle: CpuView::of(
            dst_rq.nr_runnable(),
            dst_rq.load_weight(),
            !d.wakelist.is_empty(),
        )
        .idle,
    };
    if !may_active_push(shared.features, push) {
        return;
    }
    move_task(shared, src_rq, dst_rq, h, (me, dst), Balancer::Active, now);
    shared.workers[me].publish(src_rq);
    d.publish(dst_rq);
    d.stats.inc(&d.stats.balance_active);
    drop(g_lo);
    drop(g_hi);
    crate::locking::probe::probe!("sched/balance: active balance hands a task over");
    d.kick.kick();
}

/// One periodic balance attempt of worker `me` over every level, as if all were due (the
/// model's entry, `model/mod.rs`): levels bottom-up until one finds an imbalance. Returns
/// how many tasks were pulled.
#[cfg(loom)]
pub(crate) fn periodic_balance(shared: &Shared, me: usize, now: u64) -> usize {
    for level in 0..shared.cpus.levels().len() {
        let (pulled, outcome) = periodic_balance_level(shared, me, level, now);
        if outcome != LbOutcome::Balanced {
            return pulled;
        }
    }
    0
}

/// The periodic balance of worker `me` at `level` (the kernel's `sched_balance_rq` of one
/// domain), searching again without a worker whose tasks were all pinned (`PinnedCpus`, the
/// kernel's `redo`); settles `nr_balance_failed`. Returns how many tasks were pulled and how
/// the attempt ended.
fn periodic_balance_level(
    shared: &Shared,
    me: usize,
    level: usize,
    now: u64,
) -> (usize, LbOutcome) {
    let mut pinned = PinnedCpus::default();
    loop {
        let Some(imb) = periodic_imbalance_level(&shared.cpus, level, me, view(shared), &pinned)
        else {
            let outcome = pinned.nothing_found();
            settle_failed(shared, me, outcome);
            return (0, outcome);
        };
        let (pulled, outcome) = pull(shared, me, imb, Balancer::Periodic, now);
        if !pinned.redo(imb.busiest, outcome) {
            settle_failed(shared, me, outcome);
            return (pulled, outcome);
        }
    }
}

/// The tick's periodic balance of worker thread `wt` (the kernel's `sched_balance_domains`
/// for a busy CPU): each level bottom-up that is due (`LevelBalance::due`: its interval times
/// `busy_factor`, since a worker that ticks is busy) balances if this worker is the one of
/// its group to do it (`should_we_balance`; if not, the walk stops there, as the kernel's
/// `continue_balancing`), and its interval follows the outcome (`LevelBalance::after`).
/// Returns how many tasks were pulled.
fn periodic_balance_due(wt: &WorkerThread, now: u64) -> usize {
    let (shared, me) = (&*wt.shared, wt.index);
    let map = &shared.cpus;
    let n = map.len();
    let mut levels = wt.balance_levels.borrow_mut();
    if levels.is_empty() {
        levels.extend((0..map.levels().len()).map(|l| LevelBalance::new(&map.params(l, me), now)));
    }
    let mut pulled = 0;
    for (level, state) in levels.iter_mut().enumerate() {
        let p = map.params(level, me);
        if !state.due(&p, true, n, now) {
            continue;
        }
        let idle = |i: usize| shared.workers[i].nr_running.load(Ordering::Relaxed) == 0;
        if !should_we_balance(map, level, me, idle) {
            state.after(&p, LbOutcome::Balanced, now);
            break;
        }
        let (moved, outcome) = periodic_balance_level(shared, me, level, now);
        state.after(&p, outcome, now);
        pulled += moved;
    }
    pulled
}

/// The tick's part: runs the periodic balance when its interval has passed. The caller is
/// the worker thread's running task, holding no runqueue lock. The check is one inlined
/// compare; the balance itself is out of line.
#[inline]
pub(crate) fn tick(wt: &WorkerThread, now: u64) {
    if now >= wt.next_balance.get() {
        tick_due(wt, now);
    }
}

/// [`tick`] once the interval has passed.
#[cold]
#[inline(never)]
fn tick_due(wt: &WorkerThread, now: u64) {
    wt.next_balance.set(now.saturating_add(BALANCE_INTERVAL));
    // The periodic balance switched off (runtime/tests/mutants.sh): only the nohz kick left.
    #[cfg(lagom_mutant = "periodic_balance_off")]
    let periodic_balance_due = |_: &_, _| 0;
    if wt.shared.workers.len() > 1 && periodic_balance_due(wt, now) == 0 {
        let curr = wt.curr.get();
        // SAFETY: the running task (the caller) is kept alive by its registry.
        let movable = !curr.is_null() && unsafe { (*curr).migratable };
        nohz_kick(&wt.shared, wt.index, movable);
    }
}

/// The kernel's `nohz_balancer_kick`: a busy worker wakes the sleeping idle worker the
/// policy names (`nohz_kick_target`: with tasks waiting here, the first idle worker; with
/// ITMT, a preferred idle worker of this one's LLC while this one runs a task), whose idle
/// loop then runs the newly idle balance and pulls a task, or asks for the running one by
/// active balance. Without it a worker that went to sleep stays asleep while tasks spawned
/// on (or woken to) another one wait there, since only the newly idle balance runs on idle
/// workers and it runs before they sleep.
///
/// The asym-packing kick asks for the running task, so it is sent only when that task may
/// move (`curr_movable`: the migration contract); a kick for waiting tasks always is.
fn nohz_kick(shared: &Shared, me: usize, curr_movable: bool) {
    let w = &shared.workers[me];
    if !curr_movable && w.nr_running.load(Ordering::Relaxed) < 2 {
        return;
    }
    let target = nohz_kick_target(&shared.cpus, me, view(shared), shared.features);
    if let Some(i) = target
        && shared.workers[i].kick.kick()
    {
        crate::locking::probe::probe!("sched/balance: the nohz kick wakes an idle worker");
        w.stats.inc(&w.stats.nohz_kicks);
    }
}

/// Pulls tasks from `imb.busiest` to `me` while the policy allows; returns how many moved
/// and the outcome (`LbOutcome::of_pull`: all pinned when no task examined may come here).
/// The caller settles `nr_balance_failed` ([`settle_failed`]) once the attempt is over.
fn pull(shared: &Shared, me: usize, imb: Imbalance, who: Balancer, now: u64) -> (usize, LbOutcome) {
    let src = imb.busiest;
    let (lo, hi) = (me.min(src), me.max(src));
    let mut g_lo = shared.workers[lo].rq.lock();
    let mut g_hi = shared.workers[hi].rq.lock();
    let (src_rq, dst_rq) = if src == lo {
        (&mut *g_lo, &mut *g_hi)
    } else {
        (&mut *g_hi, &mut *g_lo)
    };
    let curr = src_rq.curr();
    let buddy = src_rq.next_buddy();
    let src_nr_running = src_rq.nr_runnable();
    let env = MigrateEnv::of(
        &shared.cpus,
        me,
        src,
        now,
        src_rq.config().migration_cost,
        dst_rq.nr_runnable(),
        shared.workers[me].nr_balance_failed.load(Ordering::Relaxed),
        src_rq.features(),
    );
    let mut affine = false;
    let mut hot_skipped = 0;
    let mut left = imb.amount;
    // Choose first (at most NR_MIGRATE examined), then move: handles stay valid while other
    // entities leave the slab.
    let cursor = &shared.workers[src].balance_cursor;
    let mut chosen = [None; NR_MIGRATE];
    let mut n = 0;
    let mut next = cursor.load(Ordering::Relaxed);
    for (h, se, t) in src_rq.iter_from(next).take(NR_MIGRATE) {
        if left == 0 {
            break;
        }
        next = h.index() as usize + 1;
        let running = Some(h) == curr || t.on_cpu.load(Ordering::Acquire);
        let c = Candidate {
            weight: se.weight,
            delayed: se.sched_delayed,
            running,
            // A running task has started: it may come iff its affinity allows and it opted
            // in (the contract), read without its scheduling part, which its CPU owns.
            allowed: if running {
                t.allowed(me) && t.migratable
            } else {
                may_pull(t, me)
            },
            next_buddy: Some(h) == buddy,
            exec_start: se.exec_start,
            eligible: src_rq.entity_eligible(h),
        };
        affine |= clears_all_pinned(&env, &imb, c);
        if can_migrate(&env, &imb, left, c) {
            chosen[n] = Some(h);
            n += 1;
            left -= moved(&imb, c).min(left);
        } else if c.allowed && !c.running && task_hot(&env, c) {
            hot_skipped += 1;
        }
    }
    cursor.store(next, Ordering::Relaxed);
    for h in chosen.into_iter().flatten() {
        move_task(shared, src_rq, dst_rq, h, (src, me), who, now);
    }
    let pulled = n;
    let w = &shared.workers[me];
    if hot_skipped > 0 {
        w.stats
            .balance_hot_skipped
            .fetch_add(hot_skipped, Ordering::Relaxed);
    }
    if pulled > 0 {
        shared.workers[src].publish(src_rq);
        w.publish(dst_rq);
        let counter = match who {
            Balancer::NewlyIdle | Balancer::Active => &w.stats.balance_pulls,
            Balancer::Periodic => {
                crate::locking::probe::probe!("sched/balance: the periodic balance pulls a task");
                &w.stats.balance_periodic
            }
        };
        counter.fetch_add(pulled as u64, Ordering::Relaxed);
    }
    (pulled, LbOutcome::of_pull(src_nr_running, pulled, affine))
}

/// Whether the queued task `t` may be pulled to worker `me`: its affinity allows `me`, and it
/// has not started or may migrate (the migration contract, `wake/select.rs`: a started task
/// that may not is given an affinity of one, the worker it is queued on, where it last ran).
/// The caller holds the lock of `t`'s runqueue, and `t` is either not running (nor being
/// switched away from) or running on the caller's own worker (`active_push_point`).
pub(super) fn may_pull(t: &Task, me: usize) -> bool {
    // Mutant `balance_ignores_contract` (loom model `contract`): started tasks are pulled too.
    #[cfg(lagom_mutant = "balance_ignores_contract")]
    return t.allowed(me);
    // SAFETY: the caller holds the lock of the runqueue `t` is queued on, and `t` is not
    // running elsewhere (not at all, or on the caller's worker, which is the caller):
    // nobody else touches its scheduling part.
    t.allowed(me) && (t.migratable || !unsafe { t.sched(|s| s.started()) })
}

/// Moves the queued, not running task `h` of `src_rq` (worker `src`'s) to `dst_rq` (worker
/// `me`'s) for balancer `who`. The caller holds both locks.
fn move_task(
    shared: &Shared,
    src_rq: &mut RunQueue<QueuedTask>,
    dst_rq: &mut RunQueue<QueuedTask>,
    h: Handle,
    (src, me): (usize, usize),
    who: Balancer,
    now: u64,
) {
    let Dequeued::Removed { se, payload } = src_rq.dequeue(h, DequeueKind::Save, now) else {
        unreachable!("a Save dequeue is never delayed");
    };
    let delayed = se.sched_delayed;
    payload.cpu.store(me, Ordering::Relaxed);
    // ENQUEUE_MIGRATED: not cache hot where it arrives (`task_hot`).
    let nh = dst_rq.enqueue(
        se,
        payload,
        EnqueueKind::Restore,
        EnqueueFlags::MIGRATED,
        now,
    );
    let t = dst_rq.payload(nh);
    // SAFETY: both runqueue locks are held; the task is queued, not on any CPU.
    unsafe { t.sched(|s| s.handle = Some(nh)) };
    let cause = match who {
        Balancer::NewlyIdle | Balancer::Active => MigrateCause::Balance,
        Balancer::Periodic => MigrateCause::PeriodicBalance,
    };
    trace::migrate(shared, t, src, me, cause);
    let w: &Worker = &shared.workers[me];
    if delayed {
        w.stats.inc(&w.stats.balance_delayed);
    } else {
        let wf = activation_flags(ActivatePath::Attach, WakeFlags::NONE);
        check_preempt(w, dst_rq, nh, wf, now);
    }
}
