//! Randomized property test of the runqueue: thousands of seeded random sequences of enqueue,
//! dequeue, run, sleep, wake, migrate, reweight, custom slice, yield and exit, on random
//! feature sets, with every invariant checked after every step, and the decisions checked
//! against the reference of `policy_util/reference.rs` (recomputed from the public state, not
//! from the runqueue's own eligibility and lag code): the charge of the running entity at
//! every tick and operation, delayed-or-removed and the saved lag at every sleep, the lag
//! (with its floor) of every delayed entity that leaves, and every pick (and the resume
//! prefetch's prediction of it).
//!
//! Replay a failure with `LAGOM_SEED_RANDOM_SEQUENCES_KEEP_EVERY_INVARIANT=<seed printed on
//! failure> cargo test -p lagom --test policy_property`.

mod policy_util;

use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};

use lagom_policy::{
    DequeueKind, Dequeued, EnqueueFlags, EnqueueKind, Feature, Features, RqConfig, SchedEntity,
    WakeFlags, weight_of_nice,
};
use policy_util::reference::{charge_ref, eligible_ref, lag_ref, queued as queued_ref, v_ref};
use policy_util::{Rng, Sim, State};

const SEQUENCES: u64 = 5_000;
const STEPS: usize = 300;
const MAX_TASKS: usize = 24;

/// Σ w·(V − v) over every queued entity with V = `avg_vruntime()`, the exact weighted mean
/// recomputed from scratch, and the total weight.
fn recompute(sim: &mut Sim) -> (u64, i128, i128, u64) {
    let v = sim.rq.avg_vruntime();
    let all: Vec<(u64, u64)> = sim
        .rq
        .iter()
        .map(|(_, se, _)| (se.vruntime, se.weight))
        .collect();
    let Some(&(r, _)) = all.first() else {
        return (v, 0, 0, 0);
    };
    let (mut s, mut w) = (0i128, 0i128);
    for &(vr, wt) in &all {
        s += vr.wrapping_sub(r) as i64 as i128 * wt as i128;
        w += wt as i128;
    }
    let exact_floor = r.wrapping_add(s.div_euclid(w) as i64 as u64);
    let lag_sum: i128 = all
        .iter()
        .map(|&(vr, wt)| v.wrapping_sub(vr) as i64 as i128 * wt as i128)
        .sum();
    (exact_floor, lag_sum, w, v)
}

fn check(sim: &mut Sim, step: usize, what: &str) {
    if let Err(e) = sim.rq.check_invariants() {
        panic!("step {step} ({what}): {e}");
    }
    let (exact_floor, lag_sum, w, v) = recompute(sim);
    if w > 0 {
        assert_eq!(
            v, exact_floor,
            "step {step} ({what}): avg_vruntime is not the weighted mean"
        );
        assert!(
            lag_sum <= 0 && lag_sum > -w,
            "step {step} ({what}): Σ w·lag = {lag_sum}, beyond rounding (W = {w})"
        );
    }
    // Pick without protection is brute-force EEVDF: the earliest deadline among eligible
    // entities (P5), eligibility by the reference. With one entity queued the kernel hands
    // it out regardless (short-cut).
    if sim.rq.nr_queued() >= 2 {
        let q = queued_ref(&sim.rq);
        let picked = sim
            .rq
            .pick_eevdf(false)
            .expect("a non-empty queue always has a pick");
        assert!(
            eligible_ref(&q, sim.rq.entity(picked).vruntime),
            "step {step} ({what}): ineligible pick"
        );
        let best = q
            .iter()
            .filter(|(_, se)| eligible_ref(&q, se.vruntime))
            .map(|(_, se)| se.deadline)
            .min_by(|a, b| (a.wrapping_sub(*b) as i64).cmp(&0))
            .unwrap();
        assert_eq!(
            sim.rq.entity(picked).deadline,
            best,
            "step {step} ({what}): not the earliest eligible deadline"
        );
    }
    // The resume prefetch's prediction: the earliest eligible deadline among the queued
    // entities other than the running one, or none if none of them is eligible.
    let q = queued_ref(&sim.rq);
    let curr = sim.rq.curr();
    let best = q
        .iter()
        .filter(|(h, se)| Some(*h) != curr && eligible_ref(&q, se.vruntime))
        .map(|(_, se)| se.deadline)
        .min_by(|a, b| (a.wrapping_sub(*b) as i64).cmp(&0));
    let predicted = sim.rq.predicted_payload().map(|&id| {
        let (h, se, _) = sim.rq.iter().find(|&(_, _, &p)| p == id).expect("queued");
        assert!(
            Some(h) != curr,
            "step {step} ({what}): predicted the running entity"
        );
        se.deadline
    });
    assert_eq!(predicted, best, "step {step} ({what}): predicted_payload");
}

/// Charges the running entity up to `sim.now` (`task_tick` with `tick`, else `update_curr`)
/// and checks the charge against the reference: exactly the time since its last accounting
/// point, weighted. Returns the need-resched.
fn charge(sim: &mut Sim, tick: bool, step: usize) -> bool {
    let Some(c) = sim.rq.curr() else {
        return false;
    };
    let before = *sim.rq.entity(c);
    let resched = if tick {
        sim.rq.task_tick(sim.now)
    } else {
        sim.rq.update_curr(sim.now)
    };
    let after = sim.rq.entity(c);
    assert_eq!(
        (after.exec_start, after.sum_exec_runtime, after.vruntime),
        charge_ref(&before, sim.now),
        "step {step}: the running entity (weight {}) was charged wrongly",
        before.weight
    );
    resched
}

/// The lag a queued entity `id` leaves with now, by the reference (the running entity
/// charged first).
fn leaving_lag(sim: &mut Sim, id: usize, step: usize) -> i64 {
    charge(sim, false, step);
    let q = queued_ref(&sim.rq);
    let v = v_ref(&q).expect("queued").0;
    let se = *sim.rq.entity(sim.handle(id));
    lag_ref(&q, &se, v, sim.rq.features(), sim.tick)
}

fn random_entity(rng: &mut Rng) -> SchedEntity {
    let mut se = SchedEntity::new(rng.range(0, 40) as i32 - 20);
    if rng.chance(30) {
        se.set_custom_slice(Some(rng.range(100_000, 20_000_000)));
    }
    se
}

fn queued(sim: &Sim) -> Vec<usize> {
    (0..sim.tasks.len())
        .filter(|&i| matches!(sim.tasks[i], State::Queued(_)))
        .collect()
}

fn pick_one(rng: &mut Rng, v: &[usize]) -> Option<usize> {
    (!v.is_empty()).then(|| v[rng.range(0, v.len() as u64) as usize])
}

/// Runs one sequence; returns (picks, picks of a lone ineligible entity, delayed entities
/// finished by a pick).
fn run_sequence(seed: u64, steps: usize) -> [u64; 3] {
    let mut rng = Rng::new(seed);
    let mut cfg = RqConfig::for_cpus(rng.range(1, 17) as usize);
    cfg.tick = if rng.chance(50) { 1_000_000 } else { 4_000_000 };
    let mut features = Features::DEFAULT;
    policy_util::toggle_features(&mut features, &mut rng, 30);
    cfg.features = features;
    let mut sim = Sim::new(cfg);
    // Tasks off this runqueue ("migrated away"): their entities, held by the test.
    let mut away: Vec<Option<SchedEntity>> = Vec::new();
    for step in 0..steps {
        let op = rng.range(0, 100);
        let what;
        match op {
            0..=14 if sim.tasks.len() < MAX_TASKS => {
                what = "spawn";
                let id = sim.spawn(random_entity(&mut rng));
                away.push(None);
                if sim.curr.is_none() {
                    sim.schedule();
                }
                let _ = id;
            }
            0..=34 => {
                what = "run";
                // `Sim::run_until`, with every tick's charge checked.
                let until = sim.now + rng.range(1, 6_000_000);
                while sim.now < until {
                    let next_tick = (sim.now / sim.tick + 1) * sim.tick;
                    if next_tick > until {
                        sim.now = until;
                        break;
                    }
                    sim.now = next_tick;
                    if charge(&mut sim, true, step) || sim.curr.is_none() {
                        sim.schedule();
                    }
                    sim.rq.check_invariants().unwrap();
                }
            }
            35..=49 => {
                what = "sleep";
                if let Some(id) = sim.curr {
                    // Delayed iff DELAY_DEQUEUE and not eligible, by the reference; the
                    // saved lag is the reference's either way.
                    charge(&mut sim, false, step);
                    let h = sim.handle(id);
                    let q = queued_ref(&sim.rq);
                    let v = v_ref(&q).expect("queued").0;
                    let se = *sim.rq.entity(h);
                    let delay = features.is_enabled(Feature::DelayDequeue)
                        && !eligible_ref(&q, se.vruntime);
                    let lag = lag_ref(&q, &se, v, features, sim.tick);
                    match sim.rq.dequeue(h, DequeueKind::Sleep, sim.now) {
                        Dequeued::Delayed => {
                            assert!(delay, "step {step}: delayed an eligible sleeper");
                            assert_eq!(sim.rq.entity(h).vlag, lag, "step {step}: lag on delay");
                            sim.tasks[id] = State::Delayed(h);
                        }
                        Dequeued::Removed { se, payload } => {
                            assert!(!delay, "step {step}: removed an ineligible sleeper");
                            assert_eq!((payload, se.vlag), (id, lag), "step {step}: lag on sleep");
                            sim.tasks[id] = State::Asleep(se);
                        }
                    }
                    sim.curr = None;
                    sim.schedule();
                }
            }
            50..=64 => {
                what = "wake";
                let asleep: Vec<usize> = (0..sim.tasks.len())
                    .filter(|&i| away[i].is_none() && !matches!(sim.tasks[i], State::Queued(_)))
                    .collect();
                if let Some(id) = pick_one(&mut rng, &asleep) {
                    let mut wf = WakeFlags::TTWU;
                    if rng.chance(30) {
                        wf |= WakeFlags::SYNC;
                    }
                    if rng.chance(30) {
                        wf |= WakeFlags::RQ_SELECTED;
                    }
                    let placed_with = match sim.tasks[id] {
                        State::Asleep(se) => Some(se.vlag),
                        _ => None,
                    };
                    let others = sim.rq.nr_queued();
                    let before = sim.now;
                    sim.wake(id, wf);
                    // P7: right after a wakeup placement the entity's lag is its saved lag.
                    if placed_with.is_some()
                        && others > 0
                        && sim.rq.features().is_enabled(Feature::PlaceLag)
                    {
                        let (lag, vlag) = (sim.last_wake_lag, placed_with.unwrap_or(0));
                        assert!(
                            (lag - vlag).abs() <= 3,
                            "step {step}: placed with lag {lag}, saved {vlag} (t={before})"
                        );
                    }
                }
            }
            65..=71 => {
                what = "migrate";
                // Save-dequeue a queued or delayed task that is not running, or bring one back.
                let back: Vec<usize> = (0..away.len()).filter(|&i| away[i].is_some()).collect();
                if rng.chance(50) && !back.is_empty() {
                    let id = pick_one(&mut rng, &back).unwrap();
                    let se = away[id].take().unwrap();
                    assert!(se.rel_deadline == features.is_enabled(Feature::PlaceRelDeadline));
                    let h =
                        sim.rq
                            .enqueue(se, id, EnqueueKind::Restore, EnqueueFlags::NONE, sim.now);
                    sim.tasks[id] = if se.sched_delayed {
                        State::Delayed(h)
                    } else {
                        State::Queued(h)
                    };
                    if sim.curr.is_none() {
                        sim.schedule();
                    }
                } else {
                    let movable: Vec<usize> = (0..sim.tasks.len())
                        .filter(|&i| {
                            Some(i) != sim.curr && !matches!(sim.tasks[i], State::Asleep(_))
                        })
                        .collect();
                    if let Some(id) = pick_one(&mut rng, &movable) {
                        let lag = leaving_lag(&mut sim, id, step);
                        let h = sim.handle(id);
                        let was_delayed = matches!(sim.tasks[id], State::Delayed(_));
                        let Dequeued::Removed { se, payload } =
                            sim.rq.dequeue(h, DequeueKind::Save, sim.now)
                        else {
                            panic!("a save dequeue is never delayed")
                        };
                        assert_eq!(payload, id);
                        assert_eq!(se.sched_delayed, was_delayed);
                        assert_eq!(se.vlag, lag, "step {step}: lag saved on migration");
                        sim.tasks[id] = State::Asleep(se);
                        away[id] = Some(se);
                    }
                }
            }
            72..=81 => {
                what = "reweight";
                if let Some(id) = pick_one(&mut rng, &queued(&sim)) {
                    let h = sim.handle(id);
                    let w = weight_of_nice(rng.range(0, 40) as i32 - 20);
                    sim.rq.reweight(h, w, sim.now);
                    assert_eq!(sim.rq.entity(h).weight, w);
                }
            }
            82..=89 => {
                what = "slice";
                if let Some(id) = pick_one(&mut rng, &queued(&sim)) {
                    let h = sim.handle(id);
                    let s = rng.chance(70).then(|| rng.range(50_000, 120_000_000));
                    sim.rq.set_slice(h, s, sim.now);
                    assert_eq!(sim.rq.entity(h).custom_slice, s.is_some());
                }
            }
            90..=95 => {
                what = "yield";
                if sim.curr.is_some() {
                    sim.rq.yield_curr(sim.now);
                    sim.schedule();
                }
            }
            _ => {
                what = "exit";
                let delayed: Vec<usize> = (0..sim.tasks.len())
                    .filter(|&i| matches!(sim.tasks[i], State::Delayed(_)))
                    .collect();
                if let Some(id) = pick_one(&mut rng, &delayed) {
                    let lag = leaving_lag(&mut sim, id, step);
                    let (se, payload) = sim.rq.finish_delayed(sim.handle(id), sim.now);
                    assert_eq!(payload, id);
                    assert_eq!(
                        se.vlag, lag,
                        "step {step}: lag of a finished delayed entity"
                    );
                    assert!(!se.on_rq && !se.sched_delayed);
                    sim.tasks[id] = State::Asleep(se);
                    if sim.curr == Some(id) {
                        sim.curr = None;
                        sim.schedule();
                    }
                }
            }
        }
        // The CPU runs what the runqueue says is current.
        assert_eq!(
            sim.curr.map(|id| sim.handle(id)),
            sim.rq.curr(),
            "step {step} ({what})"
        );
        check(&mut sim, step, what);
    }
    [sim.picks, sim.alone_picks, sim.finished_delayed]
}

/// Thousands of random sequences (seeded; the failing seed is printed) with, after every
/// step: the tree's order, balance and augmentation and every runqueue counter
/// (`check_invariants`); `avg_vruntime` equal to the floor of the weighted mean recomputed
/// from scratch; the weighted sum of lags zero within rounding; the unprotected pick equal to
/// brute-force EEVDF; lag preserved by wakeup placement; and, inside the driver, every pick
/// eligible (or alone on the queue: the kernel's single-entity short-cut) and never delayed.
#[test]
fn random_sequences_keep_every_invariant() {
    const TEST: &str = "random_sequences_keep_every_invariant";
    if let Some(seed) = policy_util::replay_seed(TEST) {
        eprintln!("replaying seed {seed}");
        let _ = run_sequence(seed, STEPS * 10);
        return;
    }
    let base = 0x1a90_4ee5;
    let mut seeds = Rng::new(base);
    let mut totals = [0u64; 3];
    for _ in 0..SEQUENCES {
        let seed = seeds.next_u64();
        match catch_unwind(AssertUnwindSafe(|| run_sequence(seed, STEPS))) {
            Ok(counts) => (0..3).for_each(|k| totals[k] += counts[k]),
            Err(p) => {
                eprintln!(
                    "policy_property failed: replay with {}={seed}",
                    policy_util::seed_var(TEST)
                );
                resume_unwind(p);
            }
        }
    }
    let [picks, alone, finished] = totals;
    println!(
        "{SEQUENCES} sequences × {STEPS} steps: {picks} picks, {alone} of a lone ineligible entity, {finished} delayed entities finished by a pick"
    );
    // The generator must keep exercising the paths the invariants are about.
    assert!(picks > SEQUENCES * 10, "too few picks: {picks}");
    assert!(
        finished > SEQUENCES / 10,
        "delayed dequeues barely exercised: {finished}"
    );
}
