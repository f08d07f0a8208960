//! One balance attempt through the pure decisions, as both drivers make it: search for the
//! busiest CPU ([`newidle_imbalance_domains`], [`periodic_imbalance_domains`]) leaving out
//! the CPUs found all pinned, examine its entities ([`can_migrate`], [`clears_all_pinned`]),
//! settle the outcome ([`LbOutcome::of_pull`], [`PinnedCpus::redo`], [`failed_after`]). The
//! expected answers come from the kernel's `sched_balance_rq`: LBF_ALL_PINNED clears the
//! busiest CPU from the candidates and redoes the search (`goto redo`) while CPUs remain;
//! `sd->nr_balance_failed` is reset when all pinned (`out_all_pinned`) and by a move, and
//! raised by an attempt that moved nothing although something could have come. (The
//! kernel's reset when balanced, `out_balanced`, is not lagom's yet: `failed_after`.)

// A domain level that spans every CPU has one span: a `Vec` of one `Range`, as meant.
#![allow(clippy::single_range_in_vec_init)]

use lagom_policy::{
    Candidate, CpuMap, Features, Imbalance, LbOutcome, LevelFlags, LoadView, MIGRATION_COST,
    MapLevel, MigrateEnv, PinnedCpus, can_migrate, clears_all_pinned, failed_after, moved,
    newidle_imbalance_domains, periodic_imbalance_domains,
};

const NOW: u64 = 1_000_000_000;

/// A queued nice-0 entity that last ran 10 ms ago (cold) and may come to the puller.
fn free() -> Candidate {
    Candidate {
        weight: 1024,
        delayed: false,
        running: false,
        allowed: true,
        next_buddy: false,
        exec_start: NOW - 10_000_000,
        eligible: true,
    }
}

/// A started task under lagom's migration contract: its affinity is its own CPU.
fn pinned() -> Candidate {
    Candidate {
        allowed: false,
        ..free()
    }
}

/// The running entity of its CPU, started and so pinned by the contract.
fn running() -> Candidate {
    Candidate {
        running: true,
        ..pinned()
    }
}

/// Ran 0.1 ms ago: cache hot, and may come.
fn hot() -> Candidate {
    Candidate {
        exec_start: NOW - 100_000,
        ..free()
    }
}

/// Which balancer: newly idle (by runnable count) or periodic (by load).
#[derive(Clone, Copy)]
enum Kind {
    NewlyIdle,
    Periodic,
}

/// What one attempt did: the CPU it pulled from, if any, how it ended, and the puller's
/// `nr_balance_failed` after it.
#[derive(Debug, PartialEq, Eq)]
struct Attempt {
    from: Option<usize>,
    outcome: LbOutcome,
    failed: u32,
}

/// One balance attempt of CPU `me` over `map`, whose CPUs queue `rqs` (the running entity
/// included), with `failed` earlier failures: the drivers' loop (`sched/balance.rs`,
/// `lab/sim/src/balance.rs`), on plain data.
fn attempt(map: &CpuMap, me: usize, rqs: &[Vec<Candidate>], kind: Kind, failed: u32) -> Attempt {
    let view = |i: usize| LoadView {
        load: rqs[i].iter().map(|c| c.weight).sum(),
        nr_running: rqs[i].iter().filter(|c| !c.delayed).count(),
    };
    let mut pinned = PinnedCpus::default();
    for _ in 0..map.len() {
        let imb: Option<Imbalance> = match kind {
            Kind::NewlyIdle => {
                newidle_imbalance_domains(map, me, view, Features::DEFAULT, &pinned).map(|p| p.0)
            }
            Kind::Periodic => periodic_imbalance_domains(map, me, view, &pinned),
        };
        let Some(imb) = imb else {
            let outcome = pinned.nothing_found();
            return Attempt {
                from: None,
                outcome,
                failed: failed_after(failed, outcome),
            };
        };
        let src = imb.busiest;
        let env = MigrateEnv::of(
            map,
            me,
            src,
            NOW,
            MIGRATION_COST,
            view(me).nr_running,
            failed,
            Features::DEFAULT,
        );
        let (mut left, mut pulled, mut affine) = (imb.amount, 0, false);
        for &c in &rqs[src] {
            affine |= clears_all_pinned(&env, &imb, c);
            if can_migrate(&env, &imb, left, c) {
                left -= moved(&imb, c).min(left);
                pulled += 1;
            }
        }
        let outcome = LbOutcome::of_pull(view(src).nr_running, pulled, affine);
        if !pinned.redo(src, outcome) {
            return Attempt {
                from: (pulled > 0).then_some(src),
                outcome,
                failed: failed_after(failed, outcome),
            };
        }
    }
    panic!("the redo loop ran more than once per CPU");
}

/// Three CPUs in one LLC.
fn flat3() -> CpuMap {
    CpuMap::new(
        vec![0; 3],
        vec![MapLevel {
            name: "MC",
            flags: LevelFlags::MC,
            spans: vec![0..3],
        }],
    )
    .unwrap()
}

/// Two LLCs of two CPUs each.
fn two_llcs() -> CpuMap {
    CpuMap::new(
        vec![0; 4],
        vec![
            MapLevel {
                name: "MC",
                flags: LevelFlags::MC,
                spans: vec![0..2, 2..4],
            },
            MapLevel {
                name: "PKG",
                flags: LevelFlags::PKG,
                spans: vec![0..4],
            },
        ],
    )
    .unwrap()
}

/// `sched_balance_rq`'s LBF_ALL_PINNED redo, newly idle: idle CPU 0's busiest CPU (1, three
/// started tasks, all pinned by the migration contract) has nothing that may come, so the
/// search is redone without it and finds CPU 2, where a spawn that never ran waits behind
/// the running task. Without the redo the idle CPU gives up while that spawn waits (mutant
/// `lb_all_pinned_no_redo`).
#[test]
fn an_idle_cpu_passes_over_an_all_pinned_busiest_cpu() {
    let rqs = [
        vec![],
        vec![running(), pinned(), pinned()],
        vec![running(), free()],
    ];
    let a = attempt(&flat3(), 0, &rqs, Kind::NewlyIdle, 0);
    assert_eq!(
        a,
        Attempt {
            from: Some(2),
            outcome: LbOutcome::Moved,
            failed: 0
        },
        "the spawn on CPU 2 is pulled after CPU 1 was found all pinned"
    );
}

/// The same redo for the periodic balance, across the domain walk: CPU 0's cache sibling
/// (CPU 1) is the first level's busiest and all pinned; the search goes on without it and
/// the package level finds CPU 3, whose free task moves (the kernel finds CPU 1 pinned
/// again at the package level, clears it again and reaches CPU 3: the same answer).
#[test]
fn the_periodic_balance_passes_over_an_all_pinned_sibling() {
    let rqs = [
        vec![running()],
        vec![running(), pinned(), pinned()],
        vec![],
        vec![running(), free(), free()],
    ];
    let a = attempt(&two_llcs(), 0, &rqs, Kind::Periodic, 0);
    assert_eq!(
        (a.from, a.outcome, a.failed),
        (Some(3), LbOutcome::Moved, 0)
    );
}

/// `out_all_pinned`: when every CPU with something to spare is all pinned, the attempt ends
/// all pinned, and `nr_balance_failed` is reset rather than raised (nothing could have
/// moved, so it must not make cache-hot tasks movable later).
#[test]
fn an_attempt_that_finds_everything_pinned_resets_the_failures() {
    let rqs = [
        vec![],
        vec![running(), pinned(), pinned()],
        vec![running(), pinned()],
    ];
    for kind in [Kind::NewlyIdle, Kind::Periodic] {
        let a = attempt(&flat3(), 0, &rqs, kind, 3);
        assert_eq!(
            a,
            Attempt {
                from: None,
                outcome: LbOutcome::AllPinned,
                failed: 0
            }
        );
    }
}

/// An attempt that finds no imbalance leaves `nr_balance_failed` as it was: lagom does not
/// yet make the kernel's `out_balanced` reset (`failed_after` says why), and this test pins
/// that down until it does.
#[test]
fn a_balanced_attempt_keeps_the_failures_for_now() {
    let rqs = [vec![running()], vec![running()], vec![running()]];
    for kind in [Kind::NewlyIdle, Kind::Periodic] {
        let a = attempt(&flat3(), 0, &rqs, kind, 2);
        assert_eq!(
            a,
            Attempt {
                from: None,
                outcome: LbOutcome::Balanced,
                failed: 2
            }
        );
    }
}

/// `ld_moved == 0` with a task that may come (cache hot, and no failure yet past
/// `cache_nice_tries`): a failure, counted; no redo, since the busiest CPU is not all pinned.
/// After a second failure the hot task moves, and the count is reset.
#[test]
fn a_hot_task_makes_a_failure_and_then_moves() {
    let rqs = [vec![running()], vec![running(), hot(), pinned()], vec![]];
    let a = attempt(&flat3(), 0, &rqs, Kind::Periodic, 0);
    assert_eq!(
        a,
        Attempt {
            from: None,
            outcome: LbOutcome::Failed,
            failed: 1
        }
    );
    let a = attempt(&flat3(), 0, &rqs, Kind::Periodic, 2);
    assert_eq!(
        (a.from, a.outcome, a.failed),
        (Some(1), LbOutcome::Moved, 0)
    );
}

/// A running task that may migrate clears LBF_ALL_PINNED (the kernel's `can_migrate_task`
/// tests affinity before `task_on_cpu`): with it, CPU 1 is not all pinned, the attempt fails
/// there without a redo, and CPU 2's free task waits for a later attempt.
#[test]
fn a_movable_running_task_is_not_pinned() {
    let movable = Candidate {
        allowed: true,
        ..running()
    };
    let rqs = [
        vec![],
        vec![movable, pinned(), pinned()],
        vec![running(), free()],
    ];
    let a = attempt(&flat3(), 0, &rqs, Kind::NewlyIdle, 0);
    assert_eq!(
        a,
        Attempt {
            from: None,
            outcome: LbOutcome::Failed,
            failed: 1
        }
    );
}

/// A delayed entity is turned away before the affinity test when tasks (not load) move, so
/// it leaves LBF_ALL_PINNED set: a CPU with one runnable entity and delayed ones may be all
/// pinned in the newly idle balance (which moves tasks), and the search goes on to CPU 2.
#[test]
fn delayed_entities_do_not_clear_all_pinned_when_tasks_move() {
    let delayed = Candidate {
        delayed: true,
        ..free()
    };
    let rqs = [
        vec![],
        vec![running(), pinned(), pinned(), delayed],
        vec![running(), free()],
    ];
    let a = attempt(&flat3(), 0, &rqs, Kind::NewlyIdle, 0);
    assert_eq!((a.from, a.outcome), (Some(2), LbOutcome::Moved));
}
