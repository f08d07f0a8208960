//! Load balancing in virtual time: the periodic balance from a busy CPU's tick, the nohz
//! kick, and the newly idle balance — the steps of the threaded driver's `sched/balance.rs`,
//! with every decision made by the policy's `balance.rs` (`newidle_imbalance_domains` over the
//! machine's `CpuMap`, `asym_active_balance`, `periodic_imbalance_domains`, `can_migrate`
//! over `MigrateEnv::of` — `task_hot` by the runqueue's migration cost, the CPU's
//! `nr_balance_failed` against the meeting domain's `cache_nice_tries` — and `moved`).
//!
//! A pull walks the busiest CPU's runqueue in slot order and moves each entity the policy
//! allows (`DequeueKind::Save` there, `EnqueueKind::Restore` here), at most [`NR_MIGRATE`]
//! per pull; a moved runnable task gets the wakeup-preemption check on its new CPU. The
//! running entity never moves; an entity whose task is still switching out is never queued
//! (a sleeper leaves the runqueue before its switch-out starts), so no `on_cpu` test is
//! needed here.

use super::engine::{NONE, Sim};
use lagom_policy::{
    ActivatePath, ActivePush, BALANCE_INTERVAL, Candidate, DequeueKind, Dequeued, EnqueueFlags,
    EnqueueKind, Imbalance, LbOutcome, LevelBalance, LoadView, MigrateEnv, PinnedCpus, PullReason,
    WakeFlags, activation_flags, active_request_made, asym_active_balance, can_migrate,
    clears_all_pinned, failed_after, may_active_push, moved, newidle_imbalance_domains,
    nohz_kick_target, periodic_imbalance_level, should_we_balance, task_hot,
};
use lagom_trace::MigrateCause;

/// At most this many tasks move in one pull (the threaded runtime's bound, the kernel's
/// `sysctl_sched_nr_migrate`).
pub(super) const NR_MIGRATE: usize = 32;

impl Sim {
    fn load_view(&self, i: usize) -> LoadView {
        let rq = &self.cpus[i].rq;
        LoadView {
            load: rq.load_weight(),
            nr_running: rq.nr_runnable(),
        }
    }

    /// The tick's part (`sched/balance.rs` `tick`): once per [`BALANCE_INTERVAL`], the
    /// periodic balance of the levels that are due; if it pulls nothing, the nohz kick.
    pub(super) fn balance_tick(&mut self, c: usize) {
        if self.now < self.cpus[c].next_balance {
            return;
        }
        self.cpus[c].next_balance = self.now.saturating_add(BALANCE_INTERVAL);
        if self.cpus.len() > 1 && self.periodic_balance(c) == 0 {
            self.nohz_kick(c);
        }
    }

    /// Periodic balance of the busy CPU `me` (`sched/balance.rs`'s `periodic_balance_due`,
    /// the kernel's `sched_balance_domains`): each level bottom-up that is due
    /// (`LevelBalance::due`, busy) balances if `me` is the CPU of its group to do it
    /// (`should_we_balance`; if not, the walk stops), and its interval follows the outcome
    /// (`LevelBalance::after`). Returns how many tasks it pulled.
    fn periodic_balance(&mut self, me: usize) -> usize {
        let now = self.now;
        let n = self.cpus.len();
        let nr_levels = self.machine.cpu_map().levels().len();
        if self.cpus[me].balance_levels.is_empty() {
            let map = self.machine.cpu_map();
            let states = (0..nr_levels).map(|l| LevelBalance::new(&map.params(l, me), now));
            self.cpus[me].balance_levels = states.collect();
        }
        let mut pulled = 0;
        for level in 0..nr_levels {
            let map = self.machine.cpu_map();
            let p = map.params(level, me);
            if !self.cpus[me].balance_levels[level].due(&p, true, n, now) {
                continue;
            }
            let idle = |i: usize| self.load_view(i).nr_running == 0;
            if !should_we_balance(map, level, me, idle) {
                self.cpus[me].balance_levels[level].after(&p, LbOutcome::Balanced, now);
                break;
            }
            let (moved, outcome) = self.periodic_balance_level(me, level);
            self.cpus[me].balance_levels[level].after(&p, outcome, now);
            pulled += moved;
        }
        self.cpus[me].counters.balance_periodic += pulled as u64;
        pulled
    }

    /// The periodic balance of CPU `me` at `level`, searching again without a CPU whose
    /// entities were all pinned (`PinnedCpus`, the kernel's `redo`); settles
    /// `nr_balance_failed`. Returns how many tasks it pulled and how the attempt ended.
    fn periodic_balance_level(&mut self, me: usize, level: usize) -> (usize, LbOutcome) {
        let mut pinned = PinnedCpus::default();
        loop {
            let map = self.machine.cpu_map();
            let view = |i| self.load_view(i);
            let Some(imb) = periodic_imbalance_level(map, level, me, view, &pinned) else {
                let outcome = pinned.nothing_found();
                self.settle_failed(me, outcome);
                return (0, outcome);
            };
            let (pulled, outcome) = self.pull(me, imb, MigrateCause::PeriodicBalance);
            if !pinned.redo(imb.busiest, outcome) {
                self.settle_failed(me, outcome);
                return (pulled, outcome);
            }
        }
    }

    /// CPU `me`'s `nr_balance_failed` after an attempt that ended in `outcome`
    /// (`policy::failed_after`), and its `balance_failed` counter (`sched/balance.rs`'s
    /// `settle_failed`).
    fn settle_failed(&mut self, me: usize, outcome: LbOutcome) {
        let cpu = &mut self.cpus[me];
        cpu.nr_balance_failed = failed_after(cpu.nr_balance_failed, outcome);
        cpu.counters.balance_failed += u64::from(outcome == LbOutcome::Failed);
    }

    /// Newly idle balance of CPU `me` (`sched/balance.rs`'s `newidle_balance`): the policy
    /// walks `me`'s domains bottom-up (`newidle_imbalance_domains`: SMT, LLC, then up, ITMT
    /// asym packing first where it applies); when it finds nothing to pull, ITMT active
    /// balance may ask for the running task of a less preferred CPU (`asym_active_balance`),
    /// a request carried out at that task's next schedule point ([`Sim::active_push_point`]
    /// and [`Sim::active_push_switched_out`]), or, if it blocks and leaves the runqueue
    /// first, at its next wakeup placement (`wake.rs`'s `select_cpu`), as in the threaded
    /// runtime, which cannot move a running task either. Returns whether it pulled a task.
    pub(super) fn newidle_balance(&mut self, me: usize) -> bool {
        let features = self.options.features;
        let mut pinned = PinnedCpus::default();
        loop {
            let map = self.machine.cpu_map();
            let Some((imb, why)) =
                newidle_imbalance_domains(map, me, |i| self.load_view(i), features, &pinned)
            else {
                self.settle_failed(me, pinned.nothing_found());
                break;
            };
            let (pulled, outcome) = self.pull(me, imb, MigrateCause::Balance);
            if pinned.redo(imb.busiest, outcome) {
                continue;
            }
            self.settle_failed(me, outcome);
            let counters = &mut self.cpus[me].counters;
            counters.balance_pulls += pulled as u64;
            if why == PullReason::AsymPacking {
                counters.balance_asym += pulled as u64;
            }
            return pulled > 0;
        }
        // ITMT active balance: a less preferred CPU runs one task that should be here.
        let map = self.machine.cpu_map();
        if let Some(src) = asym_active_balance(map, me, |i| self.load_view(i), features) {
            let curr = self.cpus[src].curr;
            // A request pending for the same running task stands (the first asker wins),
            // and none is made for a task that may not run here.
            let pending = matches!(self.cpus[src].active_push, Some((_, who)) if who == curr);
            if curr != NONE && active_request_made(self.tasks[curr as usize].allowed(me), pending) {
                // `request_active`: name the task, and need-resched makes its next
                // `cond_resched` a schedule point; in the kernel's mode that point comes
                // within the stopper's latency (`resched_ipi`).
                let cpu = &mut self.cpus[src];
                cpu.active_push = Some((me, curr));
                cpu.rq.set_need_resched();
                self.resched_ipi(src);
            }
        }
        false
    }

    /// The nohz kick: CPU `me` wakes the sleeping idle CPU the policy names
    /// (`nohz_kick_target`: with tasks waiting, the first idle CPU; with ITMT, a preferred
    /// idle CPU of its LLC while it runs one task), which then runs its newly idle balance.
    fn nohz_kick(&mut self, me: usize) {
        let target = nohz_kick_target(
            self.machine.cpu_map(),
            me,
            |i| self.load_view(i),
            self.options.features,
        );
        if let Some(i) = target
            && self.kick(i)
        {
            self.cpus[me].counters.nohz_kicks += 1;
        }
    }

    /// At a schedule point of `prev`, running on CPU `c` and put back (`put_prev`), not
    /// blocking (`sched/balance.rs`'s `active_push_point`): whether an ITMT active-balance
    /// request names `prev`, which still runs alone here and may go to the CPU that asked
    /// (`policy::may_active_push`; that CPU is re-checked for idleness only under
    /// ACTIVE_BALANCE_RECHECK, as the kernel's stopper does not). Then `prev` goes back into the tree and `c` switches to its idle
    /// loop; the move follows in [`Sim::active_push_switched_out`]. A request refused here
    /// is dropped.
    pub(super) fn active_push_point(&mut self, c: usize, prev: u32) -> bool {
        let Some((dst, who)) = self.cpus[c].active_push else {
            return false;
        };
        if who != prev {
            return false;
        }
        let queued = self.tasks[prev as usize].handle.is_some();
        let p = ActivePush {
            named: true,
            on_src: self.cpus[c].rq.nr_runnable() == 1 && queued,
            allowed: self.tasks[prev as usize].allowed(dst),
            dst_idle: dst < self.cpus.len() && self.cpu_view(dst).idle,
        };
        if !may_active_push(self.options.features, p) {
            self.cpus[c].active_push = None;
            return false;
        }
        self.cpus[c].rq.put_curr();
        true
    }

    /// CPU `c` has switched away from `prev` (`finish_task_switch`'s part,
    /// `sched/balance.rs`'s `active_push_switched_out`): if an ITMT active-balance request
    /// names `prev` and it is still queued here, not running, and may go to the CPU that
    /// asked (`policy::may_active_push`, with an idle re-check of that CPU only under
    /// ACTIVE_BALANCE_RECHECK), it moves there
    /// (counted in that CPU's `balance_active`, which is notified). That is the task
    /// [`Sim::active_push_point`] put back, or one that blocked and whose dequeue was
    /// delayed; a task that left the runqueue keeps the request for its wakeup. The threaded
    /// runtime does this once the switch completes; the simulator at the switch itself.
    pub(super) fn active_push_switched_out(&mut self, c: usize, prev: u32) {
        let Some((dst, who)) = self.cpus[c].active_push else {
            return;
        };
        let Some(h) = self.tasks[prev as usize].handle else {
            return;
        };
        if who != prev {
            return;
        }
        self.cpus[c].active_push = None;
        if dst == c || dst >= self.cpus.len() {
            return;
        }
        let on_src = self.tasks[prev as usize].cpu == c && self.cpus[c].rq.curr() != Some(h);
        let p = ActivePush {
            named: true,
            on_src,
            allowed: self.tasks[prev as usize].allowed(dst),
            dst_idle: self.cpu_view(dst).idle,
        };
        if !may_active_push(self.options.features, p) {
            return;
        }
        let now = self.now;
        let Dequeued::Removed { se, payload: t } =
            self.cpus[c].rq.dequeue(h, DequeueKind::Save, now)
        else {
            unreachable!("a Save dequeue is never delayed");
        };
        // ENQUEUE_MIGRATED: not cache hot where it arrives (`task_hot`).
        let nh =
            self.cpus[dst]
                .rq
                .enqueue(se, t, EnqueueKind::Restore, EnqueueFlags::MIGRATED, now);
        self.tasks[t as usize].handle = Some(nh);
        self.moved(Some(c), t, c, dst, MigrateCause::Balance);
        let counters = &mut self.cpus[dst].counters;
        counters.balance_active += 1;
        if se.sched_delayed {
            counters.balance_delayed += 1;
        } else {
            self.check_preempt(
                dst,
                nh,
                activation_flags(ActivatePath::Attach, WakeFlags::NONE),
            );
        }
        self.notify(dst);
    }

    /// Pulls tasks from `imb.busiest` to `me` while the policy allows; returns how many and
    /// the outcome (`LbOutcome::of_pull`: all pinned when no entity examined may come here).
    /// The caller settles `nr_balance_failed` ([`Sim::settle_failed`]).
    fn pull(&mut self, me: usize, imb: Imbalance, cause: MigrateCause) -> (usize, LbOutcome) {
        let src = imb.busiest;
        let now = self.now;
        let src_nr_running = self.cpus[src].rq.nr_runnable();
        let curr = self.cpus[src].rq.curr();
        let buddy = self.cpus[src].rq.next_buddy();
        let env = MigrateEnv::of(
            self.machine.cpu_map(),
            me,
            src,
            now,
            self.cpus[src].rq.config().migration_cost,
            self.cpus[me].rq.nr_runnable(),
            self.cpus[me].nr_balance_failed,
            self.cpus[src].rq.features(),
        );
        let mut hot_skipped = 0;
        let mut affine = false;
        let mut left = imb.amount;
        let mut pulled = 0;
        while left > 0 && pulled < NR_MIGRATE {
            let tasks = &self.tasks;
            let rq = &self.cpus[src].rq;
            let found = rq.iter().find_map(|(h, se, &t)| {
                let c = Candidate {
                    weight: se.weight,
                    delayed: se.sched_delayed,
                    running: Some(h) == curr,
                    allowed: tasks[t as usize].allowed(me),
                    next_buddy: Some(h) == buddy,
                    exec_start: se.exec_start,
                    eligible: rq.entity_eligible(h),
                };
                affine |= clears_all_pinned(&env, &imb, c);
                if can_migrate(&env, &imb, left, c) {
                    Some((h, c))
                } else {
                    hot_skipped += u64::from(c.allowed && !c.running && task_hot(&env, c));
                    None
                }
            });
            let Some((h, c)) = found else { break };
            let Dequeued::Removed { se, payload: t } =
                self.cpus[src].rq.dequeue(h, DequeueKind::Save, now)
            else {
                unreachable!("a Save dequeue is never delayed");
            };
            // ENQUEUE_MIGRATED, as every move (the threaded `move_task`).
            let nh =
                self.cpus[me]
                    .rq
                    .enqueue(se, t, EnqueueKind::Restore, EnqueueFlags::MIGRATED, now);
            self.tasks[t as usize].handle = Some(nh);
            self.moved(Some(me), t, src, me, cause);
            if se.sched_delayed {
                self.cpus[me].counters.balance_delayed += 1;
            } else {
                let wf = activation_flags(ActivatePath::Attach, WakeFlags::NONE);
                self.check_preempt(me, nh, wf);
            }
            left -= moved(&imb, c).min(left);
            pulled += 1;
        }
        self.cpus[me].counters.balance_hot_skipped += hot_skipped;
        (pulled, LbOutcome::of_pull(src_nr_running, pulled, affine))
    }
}
