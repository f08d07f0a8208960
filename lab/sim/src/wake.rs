//! The wakeup path in virtual time: unpark, `try_to_wake_up`, `ttwu_runnable`, the
//! wakelist and its drain, `activate`, and spawning — the steps of the threaded driver's
//! `wake/` (`ttwu.rs`, `runnable.rs`, `queue.rs`, `select.rs`, `activate.rs`) and
//! `task/builder.rs`, with each decision made by the same policy call (`lagom-policy`)
//! (`select_task_rq`, `ttwu_queue_cond`, `delayed_wake`, `requeue_delayed`,
//! `finish_delayed`, `enqueue`, `wakeup_preempt`) over the machine's `CpuMap`.
//!
//! The waker's CPU is what the policy and the wakelist rules see as "local". Locks and
//! atomics have no counterpart: a step happens at one instant. What takes time is what the
//! threaded runtime spends time on: a wakelist entry waits for its CPU's next scheduling
//! point (or a spinning idle CPU's look, `wakelist` ns, or a sleeping one's kick, `kick`
//! ns), and a waker that finds its wakee still switching out (`on_cpu`) either hands it to
//! that CPU's wakelist (TTWU_QUEUE_ON_CPU, where `ttwu_queue_cond` allows) or waits for the
//! switch to complete.
//!
//! Paths, and the counter each bumps on the target CPU (as the threaded runtime's):
//!
//! * delayed wakee on another CPU, TTWU_QUEUE_DELAYED: its CPU's wakelist (`runnable_queued`);
//!   the drain finishes the dequeue, selects a CPU and activates or forwards it
//!   (`runnable_migrated`), or follows a task that balancing moved (`wakeups_chased`);
//! * delayed wakee that `delayed_wake` dequeues (TTWU_DEQUEUE; DELAYED_WAKE_IDLE when an
//!   allowed CPU of its LLC is idle and waiting would cost more than moving): the dequeue is
//!   finished (`runnable_dequeued`) and the wakeup goes on as for a sleeper;
//! * delayed wakee otherwise: requeued in place with the preemption check
//!   (`runnable_in_place`);
//! * sleeper still switching out, TTWU_QUEUE_ON_CPU, on another CPU, where `ttwu_queue_cond`
//!   would use the wakelist: that CPU's wakelist (`wakeups_on_cpu`); otherwise the waker
//!   waits for the switch;
//! * sleeper: `select_task_rq` (`place_*`), then the waker's own runqueue
//!   (`wakeups_local`), the target's wakelist where `ttwu_queue_cond` says so
//!   (`wakeups_queued`; never for a spawn, activated at once), or the target's runqueue under
//!   its lock (`wakeups_remote`).

use super::engine::{NONE, Sim};
use super::queue::Event;
use super::task::State;
use lagom_policy::{
    ActivatePath, CpuView, DelayedWake, DelayedWakeView, EnqueueFlags, EnqueueKind, Feature,
    Handle, Placement, WakeCtx, WakeFlags, activation_flags, delayed_wake, idle_in_llc,
    select_task_rq, ttwu_queue_cond,
};
use lagom_trace::{MigrateCause, WakePath};

impl Sim {
    fn feat(&self, f: Feature) -> bool {
        self.options.features.is_enabled(f)
    }

    /// Unparks task `t` from `waker` (`None`: outside every CPU) with the waker's flags `wf`
    /// (`WF_SYNC`, `Unparker::unpark_sync`: the waker is about to block; dropped for a waker
    /// outside every CPU, as the runtime drops it): sets its token and, if it was clear and
    /// the task is blocked, wakes it. `waker_task` is the task that wakes, if a task does
    /// (running on `waker`: the threaded runtime's running task of the waking worker), whose
    /// wakee record CPU selection updates. Returns whether it woke it.
    pub(super) fn unpark(
        &mut self,
        t: u32,
        waker: Option<usize>,
        waker_task: Option<u32>,
        wf: WakeFlags,
    ) -> bool {
        let task = &mut self.tasks[t as usize];
        if task.token || task.state == State::Dead || task.state == State::New {
            return false;
        }
        if task.sleeping {
            // The runtime's sleep loop parks again until its deadline (module doc of
            // `task.rs`): the unpark is absorbed.
            return false;
        }
        task.token = true;
        if task.state != State::Blocked {
            return false;
        }
        task.wake_flags = if waker.is_some() {
            wf
        } else {
            wf.without(WakeFlags::SYNC)
        };
        task.waker_task = waker_task.filter(|_| waker.is_some()).unwrap_or(NONE);
        self.try_to_wake_up(t, waker);
        true
    }

    /// `try_to_wake_up` of blocked task `t` (module doc).
    fn try_to_wake_up(&mut self, t: u32, waker: Option<usize>) {
        let now = self.now;
        let measuring = self.measuring();
        let task = &mut self.tasks[t as usize];
        task.state = State::Waking;
        task.wake_time = Some(now);
        task.stats.wakeups += 1;
        if task.measure && measuring {
            self.measured_wakeups += 1;
        }
        if let Some(h) = task.handle
            && !self.cpus[task.cpu].rq.entity(h).sched_delayed
        {
            // Still queued and not delayed: it announced its sleep and is still running
            // towards `schedule()` (its CPU fires a due timer first). As the runtime's
            // `ttwu_runnable`, the wakeup cancels the sleep: it stays running, and its park
            // returns at once, consuming this wakeup.
            let cpu = task.cpu;
            task.state = State::Running;
            task.wake_time = None;
            task.token = false;
            task.parked = false;
            task.sleeping = false;
            self.trace_wakeup(waker, t, cpu, WakePath::RunnableInPlace);
            self.cpus[cpu].counters.runnable_in_place += 1;
            return;
        }
        let task = &mut self.tasks[t as usize];
        if let Some(h) = task.handle {
            // Still queued: it blocked while not eligible (delayed).
            let cpu = task.cpu;
            if self.feat(Feature::TtwuQueueDelayed) && Some(cpu) != waker {
                let task = &mut self.tasks[t as usize];
                task.wake_cpu = waker;
                task.wake_delayed = true;
                task.waker_task = NONE;
                // The owner selects a CPU with `WF_TTWU` alone (the RFC's `ttwu_delayed`:
                // the waker's `WF_SYNC` does not travel), as `wake/ttwu.rs` does.
                self.trace_wakeup(waker, t, cpu, WakePath::DelayedQueued);
                self.cpus[cpu].counters.runnable_queued += 1;
                self.queue_wakelist(cpu, t, WakeFlags::TTWU);
                return;
            }
            if self.dequeue_delayed(t, cpu, h) {
                // TTWU_DEQUEUE, or DELAYED_WAKE_IDLE with an idle CPU to go to: finish the
                // delayed dequeue and wake it like any sleeper, through CPU selection.
                let (se, _) = self.cpus[cpu].rq.finish_delayed(h, now);
                self.finished_delayed(cpu, t, se);
                self.cpus[cpu].counters.runnable_dequeued += 1;
            } else {
                self.cpus[cpu].rq.requeue_delayed(h, now);
                // The waker's `WF_SYNC` reaches the check (`ttwu_runnable`). Mutant
                // `runnable_sync_dropped` (runtime/tests/mutants.sh): it is dropped.
                let wf = WakeFlags::TTWU | self.tasks[t as usize].wake_flags;
                #[cfg(lagom_mutant = "runnable_sync_dropped")]
                let wf = wf.without(WakeFlags::SYNC);
                self.check_preempt(cpu, h, activation_flags(ActivatePath::RunnableInPlace, wf));
                self.tasks[t as usize].wake_flags = WakeFlags::NONE;
                let task = &mut self.tasks[t as usize];
                task.state = State::Runnable;
                task.ready_since = now;
                self.trace_wakeup(waker, t, cpu, WakePath::RunnableInPlace);
                self.cpus[cpu].counters.runnable_in_place += 1;
                if Some(cpu) != waker && self.kick(cpu) {
                    self.cpus[cpu].counters.kicks += 1;
                }
                return;
            }
        }
        let task = &self.tasks[t as usize];
        if now < task.on_cpu_until {
            let cpu = task.cpu;
            let until = task.on_cpu_until;
            // Gated by the rule of any remote wakeup, as in `wake/ttwu.rs` (TTWU_QUEUE_ON_CPU
            // alone switches the hand-off on or off).
            let nr = self.cpus[cpu].rq.nr_runnable();
            let f = self.options.features.with(Feature::TtwuQueue, true);
            if self.feat(Feature::TtwuQueueOnCpu)
                && ttwu_queue_cond(self.machine.cpu_map(), f, waker, cpu, nr)
                && Some(cpu) != waker
            {
                self.trace_wakeup(waker, t, cpu, WakePath::OnCpu);
                self.cpus[cpu].counters.wakeups_on_cpu += 1;
                // No CPU was selected and the task stays on `cpu`: nothing travels with it.
                let flags = activation_flags(ActivatePath::Wakelist, WakeFlags::NONE);
                self.queue_wakelist(cpu, t, flags);
            } else {
                // The waker waits for the switch; the simulator lets its task run on
                // meanwhile, so the selection after it records no waker task.
                self.tasks[t as usize].waker_task = NONE;
                let waker = waker.map_or(NONE, |w| w as u32);
                self.queue
                    .push(until, Event::WakeAfterSwitch { task: t, waker });
            }
            return;
        }
        self.select_enqueue(t, waker);
    }

    /// The end of `try_to_wake_up` for a sleeper off every CPU: select a CPU and enqueue.
    pub(super) fn select_enqueue(&mut self, t: u32, waker: Option<usize>) {
        let task = &mut self.tasks[t as usize];
        let prev = task.cpu;
        let wf = WakeFlags::TTWU | task.wake_flags;
        let waker_task = core::mem::replace(&mut task.waker_task, NONE);
        let (target, added) = self.select_cpu(
            t,
            prev,
            waker,
            (waker_task != NONE).then_some(waker_task),
            wf,
        );
        self.moved(waker, t, prev, target, MigrateCause::Wakeup);
        // `WF_RQ_SELECTED` if CPU selection ran; another CPU than the task's last: the
        // activation is a migration (`WF_MIGRATED`).
        let mut wf = wf | added;
        if target != prev {
            wf |= WakeFlags::MIGRATED;
        }
        self.enqueue_on(target, t, waker, wf);
    }

    /// What CPU selection reads of CPU `i` (`wake/select.rs`'s `cpu_view`): its runnable
    /// count and load and whether its wakelist is empty, combined by the policy's rule.
    pub(super) fn cpu_view(&self, i: usize) -> CpuView {
        let cpu = &self.cpus[i];
        CpuView::of(
            cpu.rq.nr_runnable(),
            cpu.rq.load_weight(),
            !cpu.wakelist.is_empty(),
        )
    }

    /// `select_task_rq` over the CPUs' views and the machine's `CpuMap`, for task `t` that
    /// last ran on (or, new, is spawned from) `prev`, woken from `waker` by `waker_task` (if a
    /// task wakes it: its wakee record is updated), as `wake/select.rs` calls it, with the
    /// wakeup's flags `wf` (`WF_FORK` for a spawn, `WF_SYNC` when the waker said so) and the
    /// task's recently used CPU; a pending ITMT active-balance request for this task on
    /// `prev` is honoured first if its CPU is still idle and allowed. Stores the task's new
    /// recently used CPU where the policy says, counts the outcome (`place_*`,
    /// `place_wide`) on the waker's CPU, or on the chosen one for a wakeup from outside, and
    /// returns the CPU with the flags the selection adds (`WF_RQ_SELECTED`).
    pub(super) fn select_cpu(
        &mut self,
        t: u32,
        prev: usize,
        waker: Option<usize>,
        waker_task: Option<u32>,
        wf: WakeFlags,
    ) -> (usize, WakeFlags) {
        let started = !wf.contains(WakeFlags::FORK);
        if started
            && let Some((dst, who)) = self.cpus[prev].active_push
            && who == t
        {
            self.cpus[prev].active_push = None;
            if self.tasks[t as usize].allowed(dst) && self.cpu_view(dst).idle {
                self.cpus[dst].counters.balance_active += 1;
                return (dst, WakeFlags::NONE);
            }
        }
        let n = self.cpus.len();
        let task = &self.tasks[t as usize];
        let nr_allowed = (0..n).filter(|&i| task.allowed(i)).count();
        let recording = nr_allowed > 1 && wf.contains(WakeFlags::TTWU);
        let waker_task = waker_task.filter(|&w| recording && w != t);
        let mut record = waker_task.map(|w| self.tasks[w as usize].wakee);
        let ctx = WakeCtx {
            prev,
            waker,
            recent: task.recent_cpu,
            flags: wf,
            nr_allowed,
            wakee: u64::from(t) + 1,
            wakee_flips: task.wakee.flips,
            now: self.now,
        };
        let s = select_task_rq(
            self.machine.cpu_map(),
            |i| self.cpu_view(i),
            |i| task.allowed(i),
            self.options.features,
            ctx,
            record.as_mut(),
        );
        if let (Some(w), Some(r)) = (waker_task, record) {
            self.tasks[w as usize].wakee = r;
        }
        if let Some(r) = s.recent_used_cpu {
            self.tasks[t as usize].recent_cpu = Some(r);
        }
        let c = &mut self.cpus[waker.unwrap_or(s.cpu)].counters;
        *match s.how {
            Placement::Affine => &mut c.place_affine,
            Placement::IdleSibling => &mut c.place_idle_sibling,
            Placement::Prev => &mut c.place_prev,
            Placement::ForkIdlest => &mut c.place_fork_idlest,
        } += 1;
        c.place_wide += u64::from(s.wide);
        (s.cpu, s.flags)
    }

    /// Whether the delayed wakee `t`, queued (handle `h`) on CPU `cpu`, is dequeued for CPU
    /// selection instead of requeued in place (`wake/runnable.rs`'s `dequeue_delayed`: the
    /// policy's `delayed_wake` over the same view). Simulated tasks may all migrate.
    fn dequeue_delayed(&self, t: u32, cpu: usize, h: Handle) -> bool {
        let f = self.options.features;
        if !f.is_enabled(Feature::TtwuDequeue) && !f.is_enabled(Feature::DelayedWakeIdle) {
            return false;
        }
        let task = &self.tasks[t as usize];
        let idle_elsewhere = idle_in_llc(
            self.machine.cpu_map(),
            cpu,
            |i| task.allowed(i),
            |i| self.cpu_view(i),
        );
        let v = DelayedWakeView::of(&self.cpus[cpu].rq, h, self.now, idle_elsewhere);
        delayed_wake(f, v) == DelayedWake::Dequeue
    }

    /// Task `t` now belongs to `to` instead of `from` (nothing if they are the same), as CPU
    /// `by` decided (`None`: outside).
    pub(super) fn moved(
        &mut self,
        by: Option<usize>,
        t: u32,
        from: usize,
        to: usize,
        cause: MigrateCause,
    ) {
        self.tasks[t as usize].cpu = to;
        if from != to {
            self.tasks[t as usize].stats.migrations += 1;
            self.trace_migrate(by, t, from, to, cause);
        }
    }

    /// Makes claimed or new task `t` runnable on CPU `target` (`enqueue_on`), with the
    /// wakeup's flags `wf` (`WF_FORK`: a spawn), which reach the activation as
    /// `activation_flags` says for the path taken (`wake/queue.rs`'s `enqueue_on`).
    fn enqueue_on(&mut self, target: usize, t: u32, local: Option<usize>, wf: WakeFlags) {
        let spawn = wf.contains(WakeFlags::FORK);
        // `ttwu_queue_cond` for a wakeup; a spawn is activated at once under the target's
        // lock (`wake/queue.rs`'s `enqueue_on`). Mutant `spawn_counted_late`
        // (runtime/tests/mutants.sh): a spawn to another CPU through its wakelist.
        let path = if local == Some(target) {
            WakePath::Local
        } else if self.feat(Feature::TtwuQueue)
            && if spawn {
                cfg!(lagom_mutant = "spawn_counted_late")
            } else {
                ttwu_queue_cond(
                    self.machine.cpu_map(),
                    self.options.features,
                    local,
                    target,
                    self.cpus[target].rq.nr_runnable(),
                )
            }
        {
            WakePath::Queued
        } else {
            WakePath::Remote
        };
        if spawn {
            self.cpus[target].counters.spawns += 1;
        } else {
            self.trace_wakeup(local, t, target, path);
        }
        match path {
            WakePath::Local => {
                self.activate(target, t, activation_flags(ActivatePath::Direct, wf));
                if !spawn {
                    self.cpus[target].counters.wakeups_local += 1;
                }
            }
            WakePath::Queued => {
                if !spawn {
                    self.cpus[target].counters.wakeups_queued += 1;
                }
                self.queue_wakelist(target, t, activation_flags(ActivatePath::Wakelist, wf));
            }
            _ => {
                self.activate(target, t, activation_flags(ActivatePath::Direct, wf));
                if !spawn {
                    self.cpus[target].counters.wakeups_remote += 1;
                }
                if self.kick(target) {
                    self.cpus[target].counters.kicks += 1;
                } else {
                    self.notify(target);
                }
            }
        }
    }

    /// Pushes `t` on CPU `cpu`'s wakelist, with `flags` travelling with the entry (a
    /// wakeup's activation flags, or a delayed wakeup's waker flags: `queue_wakelist` of
    /// `wake/queue.rs`), and lets the CPU know.
    fn queue_wakelist(&mut self, cpu: usize, t: u32, flags: WakeFlags) {
        self.tasks[t as usize].wake_flags = flags;
        self.cpus[cpu].wakelist.push(t);
        self.notify(cpu);
    }

    /// Enqueues claimed or new task `t` on CPU `c` and runs the wakeup-preemption check
    /// (`ttwu_do_activate`) with the activation's flags `wf` (`activation_flags` of its
    /// path; `WF_MIGRATED` makes the enqueue `ENQUEUE_MIGRATED`). A new task's is a fork.
    fn activate(&mut self, c: usize, t: u32, wf: WakeFlags) {
        let now = self.now;
        let task = &mut self.tasks[t as usize];
        let kind = if task.fresh {
            EnqueueKind::Initial
        } else {
            EnqueueKind::Wakeup
        };
        let wf = if kind == EnqueueKind::Initial {
            activation_flags(ActivatePath::Fork, wf | WakeFlags::FORK)
        } else {
            wf
        };
        task.fresh = false;
        let h = self.cpus[c]
            .rq
            .enqueue(task.se, t, kind, EnqueueFlags::of_wake(wf), now);
        task.handle = Some(h);
        task.state = State::Runnable;
        task.ready_since = now;
        task.wake_flags = WakeFlags::NONE;
        self.check_preempt(c, h, wf);
    }

    /// Takes every wakelist entry of CPU `me` and activates it here (`sched_ttwu_pending`),
    /// or, for a delayed wakeup (TTWU_QUEUE_DELAYED), finishes its dequeue, selects a CPU
    /// and activates or forwards it, following a task that balancing moved.
    pub(super) fn drain(&mut self, me: usize) {
        if self.cpus[me].wakelist.is_empty() {
            return;
        }
        let list = core::mem::take(&mut self.cpus[me].wakelist);
        for &t in &list {
            let task = &mut self.tasks[t as usize];
            if task.wake_delayed {
                task.wake_delayed = false;
                let owner = task.cpu;
                if let Some(h) = task.handle {
                    if owner != me {
                        task.wake_delayed = true;
                        let flags = task.wake_flags;
                        self.cpus[me].counters.wakeups_chased += 1;
                        self.queue_wakelist(owner, t, flags);
                        continue;
                    }
                    let (se, _) = self.cpus[me].rq.finish_delayed(h, self.now);
                    self.finished_delayed(me, t, se);
                }
                let waker = self.tasks[t as usize]
                    .wake_cpu
                    .filter(|&w| w < self.cpus.len());
                // The entry's flags (`WF_TTWU`); no waker task runs here to record the wakee.
                let wf = self.tasks[t as usize].wake_flags;
                let (target, added) = self.select_cpu(t, me, waker, None, wf);
                if target != me {
                    self.moved(Some(me), t, me, target, MigrateCause::Wakeup);
                    self.cpus[me].counters.runnable_migrated += 1;
                    let flags = activation_flags(ActivatePath::Wakelist, WakeFlags::MIGRATED);
                    self.queue_wakelist(target, t, flags);
                    continue;
                }
                self.tasks[t as usize].cpu = me;
                self.activate(me, t, activation_flags(ActivatePath::Direct, wf | added));
                continue;
            }
            // The entry's flags (`WF_MIGRATED` or nothing: `sched_ttwu_pending`).
            let wf = activation_flags(ActivatePath::Wakelist, self.tasks[t as usize].wake_flags);
            self.activate(me, t, wf);
        }
        // Give the allocation back unless a forward refilled the list meanwhile.
        let mut list = list;
        list.clear();
        if self.cpus[me].wakelist.is_empty() {
            self.cpus[me].wakelist = list;
        }
    }

    /// Spawns task `t` from `parent`'s CPU (`None`: from outside, round robin), as
    /// `task/builder.rs` does: CPU selection from the parent's CPU, then `enqueue_on` as a new
    /// task.
    pub(super) fn spawn(&mut self, t: u32, parent: Option<usize>) {
        let prev = parent.unwrap_or_else(|| {
            let p = self.next_outside % self.cpus.len();
            self.next_outside += 1;
            p
        });
        self.tasks[t as usize].state = State::Waking;
        let (target, added) = self.select_cpu(t, prev, parent, None, WakeFlags::FORK);
        self.tasks[t as usize].cpu = target;
        // Activated at once where it goes (`wake_up_new_task`).
        self.enqueue_on(target, t, parent, WakeFlags::FORK | added);
    }
}
