//! A one-CPU driver for policy tests: a virtual clock, a tick, and tasks that run, sleep and
//! wake, driving `lagom_policy::RunQueue` the way a worker loop would.

#![allow(dead_code)]

pub mod reference;

use lagom_policy::{
    DequeueKind, Dequeued, EnqueueFlags, EnqueueKind, Feature, Features, Handle, NICE_0_LOAD, Pick,
    RqConfig, RunQueue, SchedEntity, WakeFlags, Wakeup,
};

/// Where a task is.
#[derive(Debug, Clone, Copy)]
pub enum State {
    /// Queued (runnable or running).
    Queued(Handle),
    /// Asleep but still queued (delayed dequeue).
    Delayed(Handle),
    /// Off the runqueue; the test holds its entity.
    Asleep(SchedEntity),
}

/// One virtual CPU.
pub struct Sim {
    pub rq: RunQueue<usize>,
    pub now: u64,
    pub tick: u64,
    pub tasks: Vec<State>,
    /// The task the CPU runs.
    pub curr: Option<usize>,
    /// Picks that found the chosen entity ineligible because it was alone (the kernel's
    /// single-entity short-cut).
    pub alone_picks: u64,
    /// Picks made.
    pub picks: u64,
    /// Delayed entities finished by a pick.
    pub finished_delayed: u64,
    /// Whether the last woken entity was eligible right after its enqueue or requeue.
    pub last_wake_eligible: bool,
    /// The last woken entity's virtual lag (V − v) right after its enqueue or requeue.
    pub last_wake_lag: i64,
}

impl Sim {
    pub fn new(cfg: RqConfig) -> Sim {
        Sim {
            tick: cfg.tick,
            rq: RunQueue::new(cfg),
            now: 0,
            tasks: Vec::new(),
            curr: None,
            alone_picks: 0,
            picks: 0,
            finished_delayed: 0,
            last_wake_eligible: false,
            last_wake_lag: 0,
        }
    }

    /// Forks a task (initial placement) and returns its id; does not reschedule.
    pub fn spawn(&mut self, se: SchedEntity) -> usize {
        let id = self.tasks.len();
        let h = self
            .rq
            .enqueue(se, id, EnqueueKind::Initial, EnqueueFlags::NONE, self.now);
        self.tasks.push(State::Queued(h));
        id
    }

    pub fn handle(&self, id: usize) -> Handle {
        match self.tasks[id] {
            State::Queued(h) | State::Delayed(h) => h,
            State::Asleep(_) => panic!("task {id} is not queued"),
        }
    }

    pub fn entity(&self, id: usize) -> SchedEntity {
        match self.tasks[id] {
            State::Queued(h) | State::Delayed(h) => *self.rq.entity(h),
            State::Asleep(se) => se,
        }
    }

    /// Picks until something runs or the CPU idles, checking that every entity handed out as
    /// work is eligible (or alone) and not delayed, and that the pick is what
    /// `pick_eevdf` predicted.
    ///
    /// A delayed entity the pick finishes must leave with the lag the reference computes
    /// (clamped, and no less than it was delayed with: the lag floor).
    pub fn schedule(&mut self) {
        loop {
            self.rq.update_curr(self.now);
            let q = reference::queued(&self.rq);
            let v = reference::v_ref(&q).map(|x| x.0);
            let predicted = self.rq.pick_eevdf(true);
            if let Some(p) = predicted
                && !self.rq.entity_eligible(p)
            {
                assert_eq!(
                    self.rq.nr_queued(),
                    1,
                    "pick chose an ineligible entity with others queued"
                );
                self.alone_picks += 1;
            }
            match self.rq.pick_next(self.now) {
                Pick::Run(h) => {
                    assert_eq!(Some(h), predicted, "pick_next differs from pick_eevdf");
                    assert!(!self.rq.entity(h).sched_delayed, "a delayed entity was run");
                    let id = *self.rq.payload(h);
                    assert!(matches!(self.tasks[id], State::Queued(_)));
                    self.curr = Some(id);
                    self.picks += 1;
                    return;
                }
                Pick::FinishedDelayed { se, payload } => {
                    let State::Delayed(h) = self.tasks[payload] else {
                        panic!("task {payload} was not delayed");
                    };
                    let before = q.iter().find(|x| x.0 == h).expect("queued").1;
                    let lag = reference::lag_ref(
                        &q,
                        &before,
                        v.expect("queued"),
                        self.rq.features(),
                        self.tick,
                    );
                    assert_eq!(
                        se.vlag, lag,
                        "lag saved by the pick that finished a delayed entity"
                    );
                    assert_lag_clamped(&se, self.tick);
                    assert!(!se.on_rq && !se.sched_delayed);
                    self.tasks[payload] = State::Asleep(se);
                    self.finished_delayed += 1;
                }
                Pick::Idle => {
                    assert_eq!(predicted, None);
                    self.curr = None;
                    return;
                }
            }
        }
    }

    /// The running task blocks, then the CPU picks the next one.
    pub fn sleep_curr(&mut self) {
        let id = self.curr.expect("a task runs");
        self.sleep_task(id);
    }

    /// Task `id` blocks (if it runs, the CPU then picks the next one).
    pub fn sleep_task(&mut self, id: usize) {
        let h = self.handle(id);
        let was_curr = self.curr == Some(id);
        match self.rq.dequeue(h, DequeueKind::Sleep, self.now) {
            Dequeued::Delayed => self.tasks[id] = State::Delayed(h),
            Dequeued::Removed { se, payload } => {
                assert_eq!(payload, id);
                assert_lag_clamped(&se, self.tick);
                self.tasks[id] = State::Asleep(se);
            }
        }
        if was_curr {
            self.curr = None;
            self.schedule();
        }
    }

    /// Wakes task `id`; returns whether the wakeup preempted (and the CPU re-picked).
    pub fn wake(&mut self, id: usize, wf: WakeFlags) -> bool {
        let h = match self.tasks[id] {
            State::Queued(_) => return false,
            State::Delayed(h) => {
                self.rq.requeue_delayed(h, self.now);
                h
            }
            State::Asleep(se) => {
                self.rq
                    .enqueue(se, id, EnqueueKind::Wakeup, EnqueueFlags::NONE, self.now)
            }
        };
        self.tasks[id] = State::Queued(h);
        self.last_wake_eligible = self.rq.entity_eligible(h);
        let v = self.rq.avg_vruntime();
        self.last_wake_lag = v.wrapping_sub(self.rq.entity(h).vruntime) as i64;
        loop {
            match self.rq.wakeup_preempt(h, wf, self.now) {
                Wakeup::NoPreempt => return false,
                Wakeup::Preempt => {
                    self.schedule();
                    return true;
                }
                Wakeup::FinishedDelayed { se, payload } => {
                    self.tasks[payload] = State::Asleep(se);
                    self.finished_delayed += 1;
                }
            }
        }
    }

    /// Runs the CPU until `until`, ticking at multiples of the tick period; a tick that asks
    /// for a switch re-picks. `each_tick` runs after every tick.
    pub fn run_until_with(&mut self, until: u64, mut each_tick: impl FnMut(&mut Sim)) {
        while self.now < until {
            let next_tick = (self.now / self.tick + 1) * self.tick;
            if next_tick > until {
                self.now = until;
                break;
            }
            self.now = next_tick;
            if self.curr.is_none() || self.rq.task_tick(self.now) {
                self.schedule();
            }
            each_tick(self);
        }
    }

    pub fn run_until(&mut self, until: u64) {
        self.run_until_with(until, |_| {});
    }

    /// Real lag (ns of service owed) of every queued entity, with V recomputed.
    pub fn real_lags(&mut self) -> Vec<(usize, f64)> {
        let v = self.rq.avg_vruntime();
        self.rq
            .iter()
            .map(|(_, se, id)| {
                let vl = v.wrapping_sub(se.vruntime) as i64 as f64;
                (*id, vl * se.weight as f64 / NICE_0_LOAD as f64)
            })
            .collect()
    }
}

/// Loosely: a saved lag never exceeds the clamp for the largest possible
/// slice, `calc_delta_fair(100 ms + tick)`.
pub fn assert_lag_clamped(se: &SchedEntity, tick: u64) {
    let limit = lagom_policy::calc_delta_fair(lagom_policy::MAX_CUSTOM_SLICE + tick, se.weight);
    assert!(
        se.vlag.unsigned_abs() <= limit,
        "saved lag {} beyond the clamp {limit}",
        se.vlag
    );
}

/// splitmix64: a tiny seeded generator for reproducible randomized tests.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `lo..hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next_u64() % (hi - lo)
    }
    pub fn chance(&mut self, percent: u64) -> bool {
        self.range(0, 100) < percent
    }
}

/// The seed to replay for test `test`, from `LAGOM_SEED_<TEST>` (the test's name in
/// capitals; one variable per test, so that replaying one leaves the others whole).
pub fn replay_seed(test: &str) -> Option<u64> {
    std::env::var(seed_var(test))
        .ok()
        .and_then(|s| s.parse().ok())
}

/// The variable [`replay_seed`] reads for test `test`.
pub fn seed_var(test: &str) -> String {
    format!("LAGOM_SEED_{}", test.to_uppercase())
}

/// The features the randomized policy tests toggle; the rest keep their defaults.
pub const TOGGLED: [Feature; 9] = [
    Feature::PlaceLag,
    Feature::PlaceDeadlineInitial,
    Feature::PlaceRelDeadline,
    Feature::RunToParity,
    Feature::PreemptShort,
    Feature::NextBuddy,
    Feature::PickBuddy,
    Feature::DelayDequeue,
    Feature::DelayZero,
];

/// Flips each of [`TOGGLED`] in `features` with probability `percent` %.
pub fn toggle_features(features: &mut Features, rng: &mut Rng, percent: u64) {
    for f in TOGGLED {
        if rng.chance(percent) {
            features.set(f, !features.is_enabled(f));
        }
    }
}
