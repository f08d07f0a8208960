//! Differential test of the runqueue on tiny queues (0–3 entities), the size the hot paths
//! see (a pipe between two tasks, spawn + join): seeded random sequences of wakeups, sleeps,
//! spawns, exits, ticks, yields and migrations a few hundred ns apart, where every decision
//! the runqueue makes is checked against a reference recomputed from scratch by this test in
//! 128-bit arithmetic from the public state just before the operation:
//!
//! * V (`avg_vruntime`): the floor of the exact weighted mean;
//! * a sleep: delayed iff DELAY_DEQUEUE and the entity is not eligible (`Σ w·(vⱼ − v) < 0`),
//!   and the saved lag is `clamp(V − v)` (raised to the old lag and capped at zero for a
//!   delayed entity under DELAY_ZERO);
//! * a placement (enqueue, or a requeue of a delayed entity whose saved lag changed): the
//!   vruntime is `V − vlag·(W + w)/W` and the deadline one request (or half of one) later;
//! * a pick: EEVDF with the next buddy and slice protection, the earliest eligible deadline;
//! * `update_curr`: the running entity is charged exactly the time since it was last, gets a
//!   new request when it reaches its deadline, and need-resched is asked iff others are
//!   queued and its request or its protected slice ran out;
//! * after every step, every invariant (`check_invariants`: tree, sums, counts).
//!
//! These are the paths the tiny-queue fast paths replace (the empty and one-entity tree, the
//! two-entity switch, V reused within an operation, 64-bit arithmetic with 128-bit
//! fallbacks): a fast path that disagrees with the definition fails here. Some sequences use
//! huge weights, so that the 64-bit products overflow and the fallbacks run.
//!
//! Replay a failure with
//! `LAGOM_SEED_TINY_QUEUES_MATCH_THE_REFERENCE=<seed> cargo test -p lagom --test policy_tiny`.

mod policy_util;

use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};

use lagom_policy::{
    DequeueKind, Dequeued, EnqueueFlags, EnqueueKind, Feature, Features, Handle, Pick, RqConfig,
    RunQueue, SchedEntity, WakeFlags, Wakeup, calc_delta_fair, weight_of_nice,
};
use policy_util::Rng;
use policy_util::reference::{eligible_ref, lag_ref, place_ref, queued, v_ref, vd};

const SEQUENCES: u64 = 3_000;
const STEPS: usize = 200;
const TASKS: usize = 3;

#[derive(Clone, Copy, Debug)]
enum Task {
    Queued(Handle),
    Delayed(Handle),
    Asleep(SchedEntity, bool),
    Away(SchedEntity),
}

struct Run {
    rq: RunQueue<usize>,
    cfg: RqConfig,
    now: u64,
    tasks: Vec<Task>,
    rng: Rng,
    huge: bool,
}

impl Run {
    fn entity(&mut self) -> SchedEntity {
        let mut se = if self.huge && self.rng.chance(50) {
            SchedEntity::with_weight(self.rng.range(1 << 30, 1 << 44))
        } else {
            SchedEntity::new(self.rng.range(0, 40) as i32 - 20)
        };
        if self.rng.chance(30) {
            se.set_custom_slice(Some(self.rng.range(100_000, 5_000_000)));
        }
        se
    }

    /// Accounts the running entity at `now` first, so that the snapshot the reference
    /// reads is the state the operation starts from (its own `update_curr` is then a no-op).
    /// The running entity is charged exactly the time since its last accounting point.
    fn snapshot(&mut self) -> (Vec<(Handle, SchedEntity)>, Option<u64>) {
        self.charge(false);
        let q = queued(&self.rq);
        let v = v_ref(&q).map(|x| x.0);
        (q, v)
    }

    /// `update_curr` (or, with `tick`, `task_tick`) checked against the reference; returns
    /// its need-resched.
    fn charge(&mut self, tick: bool) -> bool {
        let mut resched = false;
        if let Some(c) = self.rq.curr() {
            let before = *self.rq.entity(c);
            let others = self.rq.nr_queued() > 1;
            resched = if tick {
                self.rq.task_tick(self.now)
            } else {
                self.rq.update_curr(self.now)
            };
            let after = self.rq.entity(c);
            let delta = vd(self.now, before.exec_start).max(0) as u64;
            let v = before
                .vruntime
                .wrapping_add(calc_delta_fair(delta, before.weight));
            let want = (
                before.exec_start + delta,
                before.sum_exec_runtime + delta,
                v,
            );
            let got = (after.exec_start, after.sum_exec_runtime, after.vruntime);
            assert_eq!(got, want, "update_curr charged the running entity wrongly");
            // A charge that reaches the deadline issues a new request; need-resched iff
            // charged, others are queued, and the request or the protection ran out.
            let used_up = delta > 0 && vd(v, before.deadline) >= 0;
            if used_up {
                let slice = if before.custom_slice {
                    before.slice
                } else {
                    self.cfg.base_slice
                };
                let deadline = v.wrapping_add(calc_delta_fair(slice, before.weight));
                assert_eq!(after.deadline, deadline, "update_curr: wrong new request");
            } else {
                assert_eq!(
                    after.deadline, before.deadline,
                    "update_curr: deadline moved"
                );
            }
            let want = delta > 0 && others && (used_up || vd(v, before.vprot) >= 0);
            assert_eq!(resched, want, "update_curr: wrong need-resched");
        }
        resched
    }

    /// V of the queue when it is empty: the zero point (reading it changes nothing then).
    fn v_empty(&mut self, q: &[(Handle, SchedEntity)]) -> u64 {
        if q.is_empty() {
            self.rq.avg_vruntime()
        } else {
            0
        }
    }

    fn take_back(&mut self, se: SchedEntity, id: usize) {
        assert!(!se.on_rq && !se.sched_delayed);
        self.tasks[id] = Task::Asleep(se, false);
    }

    /// The expected pick among the queued entities (`pick_eevdf(true)` semantics), as the
    /// set of acceptable handles (equal deadlines tie).
    fn pick_ref(&self, q: &[(Handle, SchedEntity)]) -> Vec<Handle> {
        if q.len() <= 1 {
            return q.iter().map(|x| x.0).collect();
        }
        let el = |se: &SchedEntity| eligible_ref(q, se.vruntime);
        let f = self.cfg.features;
        if let Some(n) = self.rq.next_buddy()
            && f.is_enabled(Feature::PickBuddy)
            && el(self.rq.entity(n))
        {
            return vec![n];
        }
        let curr = self.rq.curr().map(|c| (c, *self.rq.entity(c)));
        let c = curr.filter(|(_, se)| el(se));
        if let Some((h, se)) = c
            && vd(se.vruntime, se.vprot) < 0
        {
            return vec![h];
        }
        let tree: Vec<&(Handle, SchedEntity)> = q
            .iter()
            .filter(|(h, se)| Some(*h) != curr.map(|x| x.0) && el(se))
            .collect();
        let best = tree
            .iter()
            .map(|(_, se)| se.deadline)
            .min_by(|a, b| vd(*a, *b).cmp(&0));
        match (best, c) {
            (Some(d), Some((h, se))) if vd(se.deadline, d) < 0 => vec![h],
            (Some(d), _) => tree
                .iter()
                .filter(|(_, se)| se.deadline == d)
                .map(|x| x.0)
                .collect(),
            (None, Some((h, _))) => vec![h],
            (None, None) => Vec::new(),
        }
    }

    /// Picks until something runs or the queue is empty, checking each pick.
    fn schedule(&mut self) {
        loop {
            let (q, _) = self.snapshot();
            let want = self.pick_ref(&q);
            match self.rq.pick_next(self.now) {
                Pick::Run(h) => {
                    assert!(want.contains(&h), "picked {h:?}, expected one of {want:?}");
                    assert!(!self.rq.entity(h).sched_delayed);
                    return;
                }
                Pick::FinishedDelayed { se, payload } => {
                    let h = self.handle(payload);
                    assert!(
                        want.contains(&h),
                        "finished {h:?}, expected one of {want:?}"
                    );
                    self.take_back(se, payload);
                }
                Pick::Idle => {
                    assert!(want.is_empty());
                    return;
                }
            }
        }
    }

    fn handle(&self, id: usize) -> Handle {
        match self.tasks[id] {
            Task::Queued(h) | Task::Delayed(h) => h,
            t => panic!("task {id} is not queued: {t:?}"),
        }
    }

    fn running(&self) -> Option<usize> {
        let c = self.rq.curr()?;
        Some(*self.rq.payload(c))
    }

    fn sleep(&mut self, id: usize) {
        let h = self.handle(id);
        let was_curr = self.rq.curr() == Some(h);
        let (q, v) = self.snapshot();
        let se = *self.rq.entity(h);
        let v = v.expect("queued");
        let delay = !se.sched_delayed
            && self.cfg.features.is_enabled(Feature::DelayDequeue)
            && !eligible_ref(&q, se.vruntime);
        let lag = lag_ref(&q, &se, v, self.cfg.features, self.cfg.tick);
        match self.rq.dequeue(h, DequeueKind::Sleep, self.now) {
            Dequeued::Delayed => {
                assert!(delay, "delayed an eligible entity");
                assert_eq!(self.rq.entity(h).vlag, lag, "lag saved on delay");
                self.tasks[id] = Task::Delayed(h);
            }
            Dequeued::Removed { se: out, payload } => {
                assert!(!delay, "removed an entity that should be delayed");
                assert_eq!((payload, out.vlag), (id, lag), "lag saved on sleep");
                self.take_back(out, id);
            }
        }
        if was_curr {
            self.schedule();
        }
    }

    fn wake(&mut self, id: usize) {
        let (q, v) = self.snapshot();
        let h = match self.tasks[id] {
            Task::Queued(_) | Task::Away(_) => return,
            Task::Delayed(h) => {
                let se = *self.rq.entity(h);
                let vl = lag_ref(
                    &q,
                    &se,
                    v.expect("queued"),
                    self.cfg.features,
                    self.cfg.tick,
                );
                let raw = v.unwrap().wrapping_sub(se.vruntime) as i64;
                let others: Vec<_> = q.iter().filter(|x| x.0 != h).copied().collect();
                let v0 = self.v_empty(&others);
                let placed = place_ref(
                    &others,
                    &SchedEntity { vlag: vl, ..se },
                    false,
                    &self.cfg,
                    v0,
                );
                self.rq.requeue_delayed(h, self.now);
                let got = self.rq.entity(h);
                let want = if vl != raw {
                    placed
                } else {
                    (se.vruntime, se.deadline)
                };
                assert_eq!(
                    (got.vruntime, got.deadline, got.vlag),
                    (want.0, want.1, vl),
                    "requeue"
                );
                h
            }
            Task::Asleep(se, new) => {
                let kind = if new {
                    EnqueueKind::Initial
                } else {
                    EnqueueKind::Wakeup
                };
                let v0 = self.v_empty(&q);
                let want = place_ref(&q, &se, new, &self.cfg, v0);
                let h = self.rq.enqueue(se, id, kind, EnqueueFlags::NONE, self.now);
                let got = self.rq.entity(h);
                assert_eq!((got.vruntime, got.deadline), want, "placement");
                h
            }
        };
        self.tasks[id] = Task::Queued(h);
        let wf = [
            WakeFlags::TTWU,
            WakeFlags::FORK,
            WakeFlags::TTWU | WakeFlags::SYNC,
        ][self.rng.range(0, 3) as usize];
        loop {
            match self.rq.wakeup_preempt(h, wf, self.now) {
                Wakeup::NoPreempt => return,
                Wakeup::Preempt => return self.schedule(),
                Wakeup::FinishedDelayed { se, payload } => self.take_back(se, payload),
            }
        }
    }

    fn step(&mut self) {
        let id = self.rng.range(0, TASKS as u64) as usize;
        match self.rng.range(0, 100) {
            0..=29 => {
                // Mostly a few hundred ns, as between the hot paths' operations; sometimes
                // enough to use up a request.
                self.now += match self.rng.range(0, 10) {
                    0 => 0,
                    1 => self.rng.range(100_000, 3_000_000),
                    _ => self.rng.range(1, 2_000),
                };
                if self.charge(true) || self.rq.curr().is_none() {
                    self.schedule();
                }
            }
            30..=49 => {
                if let Some(c) = self.running() {
                    self.sleep(c);
                }
            }
            50..=74 => self.wake(id),
            75..=79 => {
                if let Task::Asleep(..) = self.tasks[id] {
                    // The task exited; a new one takes its place.
                    let se = self.entity();
                    self.tasks[id] = Task::Asleep(se, true);
                    self.wake(id);
                }
            }
            80..=84 => {
                if let Task::Delayed(h) = self.tasks[id] {
                    let was_curr = self.rq.curr() == Some(h);
                    let (se, p) = self.rq.finish_delayed(h, self.now);
                    self.take_back(se, p);
                    if was_curr {
                        self.schedule();
                    }
                }
            }
            85..=89 => {
                if self.rq.curr().is_some() {
                    self.rq.yield_curr(self.now);
                    self.schedule();
                }
            }
            90..=94 => match self.tasks[id] {
                Task::Queued(h) | Task::Delayed(h) if self.rq.curr() != Some(h) => {
                    let (q, v) = self.snapshot();
                    let se = *self.rq.entity(h);
                    let lag = lag_ref(&q, &se, v.unwrap(), self.cfg.features, self.cfg.tick);
                    let Dequeued::Removed { se: out, .. } =
                        self.rq.dequeue(h, DequeueKind::Save, self.now)
                    else {
                        panic!("a save dequeue is never delayed")
                    };
                    assert_eq!(out.vlag, lag, "lag saved on migration");
                    self.tasks[id] = Task::Away(out);
                }
                _ => {}
            },
            _ => {
                if let Task::Away(se) = self.tasks[id] {
                    let (q, _) = self.snapshot();
                    let v0 = self.v_empty(&q);
                    let want = place_ref(&q, &se, false, &self.cfg, v0);
                    let h =
                        self.rq
                            .enqueue(se, id, EnqueueKind::Restore, EnqueueFlags::NONE, self.now);
                    let got = self.rq.entity(h);
                    assert_eq!((got.vruntime, got.deadline), want, "restore placement");
                    self.tasks[id] = if se.sched_delayed {
                        Task::Delayed(h)
                    } else {
                        Task::Queued(h)
                    };
                    if self.rq.curr().is_none() {
                        self.schedule();
                    }
                }
            }
        }
    }
}

/// Runs one sequence; returns how many steps had 0, 1, 2 and 3 entities queued.
fn run_sequence(seed: u64) -> [u64; 4] {
    let mut rng = Rng::new(seed);
    let mut cfg = RqConfig::for_cpus(rng.range(1, 9) as usize);
    cfg.tick = if rng.chance(50) { 1_000_000 } else { 4_000_000 };
    policy_util::toggle_features(&mut cfg.features, &mut rng, 25);
    let huge = rng.chance(10);
    let mut run = Run {
        rq: RunQueue::new(cfg),
        cfg,
        now: rng.range(0, 1 << 40),
        tasks: Vec::new(),
        rng,
        huge,
    };
    for _ in 0..TASKS {
        let se = if run.rng.chance(80) {
            SchedEntity::new(0)
        } else {
            run.entity()
        };
        run.tasks.push(Task::Asleep(se, true));
    }
    let mut sizes = [0u64; 4];
    for step in 0..STEPS {
        run.step();
        if let Err(e) = run.rq.check_invariants() {
            panic!("step {step}: {e}");
        }
        let q = queued(&run.rq);
        // Not after every step: reading V re-bases the sums, and the operations must also
        // start from sums that were not just re-based.
        if let Some((v, _)) = v_ref(&q).filter(|_| run.rng.chance(30)) {
            assert_eq!(
                run.rq.avg_vruntime(),
                v,
                "step {step}: V is not the floor of the mean"
            );
        }
        sizes[q.len()] += 1;
    }
    sizes
}

/// Thousands of seeded tiny-queue sequences, every decision checked against the reference
/// (see the module doc); the sizes the steps saw are reported and must cover 0 to 3.
#[test]
fn tiny_queues_match_the_reference() {
    const TEST: &str = "tiny_queues_match_the_reference";
    if let Some(seed) = policy_util::replay_seed(TEST) {
        eprintln!("replaying seed {seed}");
        run_sequence(seed);
        return;
    }
    let mut seeds = Rng::new(0x7113_5eed);
    let mut sizes = [0u64; 4];
    for _ in 0..SEQUENCES {
        let seed = seeds.next_u64();
        match catch_unwind(AssertUnwindSafe(|| run_sequence(seed))) {
            Ok(s) => (0..4).for_each(|k| sizes[k] += s[k]),
            Err(p) => {
                eprintln!(
                    "policy_tiny failed: replay with {}={seed}",
                    policy_util::seed_var(TEST)
                );
                resume_unwind(p);
            }
        }
    }
    println!("steps by queued entities (0, 1, 2, 3): {sizes:?}");
    for (n, &k) in sizes.iter().enumerate() {
        assert!(
            k > SEQUENCES * 5,
            "{n} queued entities barely exercised: {k}"
        );
    }
}

/// The reference itself on a hand-made case: of two nice-0 entities placed together, the
/// one that then ran 3 ns is ahead of the mean (floored: 1 ns past the other) and not
/// eligible; the other is.
#[test]
fn reference_sanity() {
    let mut rq: RunQueue<usize> = RunQueue::new(RqConfig::for_cpus(1));
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
    let Pick::Run(ran) = rq.pick_next(0) else {
        panic!("nothing to run")
    };
    let other = if ran == a { b } else { a };
    rq.update_curr(3);
    let q = queued(&rq);
    let (vr, vo) = (rq.entity(ran).vruntime, rq.entity(other).vruntime);
    assert_eq!(vd(vr, vo), 3);
    let (v, w) = v_ref(&q).unwrap();
    assert_eq!(w, 2 * weight_of_nice(0) as i128);
    assert_eq!(vd(v, vo), 1);
    assert_eq!(rq.avg_vruntime(), v);
    assert!(eligible_ref(&q, vo));
    assert!(!eligible_ref(&q, vr));
    assert_eq!(rq.features(), Features::DEFAULT);
}
