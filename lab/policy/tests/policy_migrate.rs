//! `can_migrate_task` through the pure policy (`can_migrate`, `task_hot`,
//! `cache_nice_tries`): what load balancing may move, rule by rule.

// A domain level that spans every CPU has one span: a `Vec` of one `Range`, as meant.
#![allow(clippy::single_range_in_vec_init)]

use lagom_policy::{
    Candidate, CpuMap, Features, Imbalance, LevelFlags, MIGRATION_COST, MIGRATION_COST_ALWAYS_HOT,
    MapLevel, MigrateEnv, Migration, cache_nice_tries, can_migrate, task_hot,
};

const NOW: u64 = 1_000_000_000;

fn env() -> MigrateEnv {
    MigrateEnv {
        now: NOW,
        migration_cost: MIGRATION_COST,
        smt: false,
        dst_nr_running: 1,
        nr_balance_failed: 0,
        cache_nice_tries: 1,
        features: Features::DEFAULT,
    }
}

/// A queued nice-0 entity that last ran 10 ms ago: cold, eligible, movable.
fn cold() -> Candidate {
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

/// Ran 0.1 ms ago.
fn hot() -> Candidate {
    Candidate {
        exec_start: NOW - 100_000,
        ..cold()
    }
}

const TASK: Imbalance = Imbalance {
    busiest: 1,
    kind: Migration::Task,
    amount: 1,
};
const LOAD: Imbalance = Imbalance {
    busiest: 1,
    kind: Migration::Load,
    amount: 4096,
};

#[test]
fn task_hot_by_the_migration_cost() {
    let e = env();
    assert!(task_hot(&e, hot()));
    assert!(!task_hot(&e, cold()));
    // Just at the cost: no longer hot (delta < cost is hot).
    let at = Candidate {
        exec_start: NOW - MIGRATION_COST,
        ..cold()
    };
    assert!(!task_hot(&e, at));
    let never = MigrateEnv {
        migration_cost: 0,
        ..e
    };
    assert!(!task_hot(&never, hot()), "0: nothing is hot by time");
    let always = MigrateEnv {
        migration_cost: MIGRATION_COST_ALWAYS_HOT,
        ..e
    };
    assert!(task_hot(&always, cold()), "the kernel's −1: always hot");
    // A task that never ran here (exec_start 0, a new or migrated one) is cold.
    assert!(!task_hot(
        &e,
        Candidate {
            exec_start: 0,
            ..cold()
        }
    ));
}

#[test]
fn nothing_is_hot_within_an_smt_core() {
    let smt = MigrateEnv { smt: true, ..env() };
    assert!(!task_hot(&smt, hot()));
    let buddy = Candidate {
        next_buddy: true,
        ..hot()
    };
    assert!(!task_hot(&smt, buddy));
    assert!(can_migrate(&smt, &TASK, 1, buddy));
}

#[test]
fn the_next_buddy_is_hot_only_while_the_destination_has_tasks() {
    let buddy = Candidate {
        next_buddy: true,
        ..cold()
    };
    assert!(task_hot(&env(), buddy), "a busy destination: hot");
    let idle_dst = MigrateEnv {
        dst_nr_running: 0,
        ..env()
    };
    assert!(!task_hot(&idle_dst, buddy), "an idle destination: cold");
    let no_feature = MigrateEnv {
        features: Features::parse("NO_CACHE_HOT_BUDDY").unwrap(),
        ..env()
    };
    assert!(!task_hot(&no_feature, buddy), "NO_CACHE_HOT_BUDDY: cold");
}

#[test]
fn hot_tasks_move_after_cache_nice_tries_failures() {
    for tries in [0, 1, 2] {
        for failed in 0..5 {
            let e = MigrateEnv {
                nr_balance_failed: failed,
                cache_nice_tries: tries,
                ..env()
            };
            assert_eq!(
                can_migrate(&e, &TASK, 1, hot()),
                failed > tries,
                "tries {tries}, failed {failed}"
            );
            assert!(can_migrate(&e, &TASK, 1, cold()));
        }
    }
}

#[test]
fn ineligible_tasks_stay_until_an_attempt_failed() {
    let late = Candidate {
        eligible: false,
        ..cold()
    };
    assert!(!can_migrate(&env(), &TASK, 1, late));
    let failed = MigrateEnv {
        nr_balance_failed: 1,
        ..env()
    };
    assert!(can_migrate(&failed, &TASK, 1, late));
    let idle_dst = MigrateEnv {
        dst_nr_running: 0,
        ..env()
    };
    assert!(
        can_migrate(&idle_dst, &TASK, 1, late),
        "an idle destination takes it"
    );
    let no_lag = MigrateEnv {
        features: Features::parse("NO_PLACE_LAG").unwrap(),
        ..env()
    };
    assert!(
        can_migrate(&no_lag, &TASK, 1, late),
        "without PLACE_LAG its lag does not travel"
    );
}

#[test]
fn delayed_tasks_move_only_with_load() {
    let delayed = Candidate {
        delayed: true,
        ..cold()
    };
    assert!(!can_migrate(&env(), &TASK, 1, delayed));
    assert!(can_migrate(&env(), &LOAD, LOAD.amount, delayed));
    // Still only if its weight fits.
    assert!(!can_migrate(&env(), &LOAD, 1000, delayed));
}

#[test]
fn running_pinned_and_done_never_move() {
    let e = MigrateEnv {
        nr_balance_failed: 10,
        ..env()
    };
    let running = Candidate {
        running: true,
        ..cold()
    };
    let pinned = Candidate {
        allowed: false,
        ..cold()
    };
    assert!(!can_migrate(&e, &TASK, 1, running));
    assert!(!can_migrate(&e, &TASK, 1, pinned));
    assert!(!can_migrate(&e, &TASK, 0, cold()), "nothing left to settle");
}

#[test]
fn cache_nice_tries_per_level() {
    let level = |name, flags| MapLevel {
        name,
        flags,
        spans: vec![0..2],
    };
    assert_eq!(cache_nice_tries(&level("SMT", LevelFlags::SMT)), 0);
    assert_eq!(cache_nice_tries(&level("MC", LevelFlags::MC)), 1);
    assert_eq!(cache_nice_tries(&level("PKG", LevelFlags::PKG)), 1);
    assert_eq!(cache_nice_tries(&level("NUMA", LevelFlags::NUMA)), 2);
    assert_eq!(cache_nice_tries(&level("NUMA", LevelFlags::NUMA_FAR)), 2);
}

#[test]
fn a_balance_acts_in_the_lowest_common_domain() {
    // Two cores of two threads each in one LLC, two such LLCs.
    let map = CpuMap::new(
        vec![0; 8],
        vec![
            MapLevel {
                name: "SMT",
                flags: LevelFlags::SMT,
                spans: vec![0..2, 2..4, 4..6, 6..8],
            },
            MapLevel {
                name: "MC",
                flags: LevelFlags::MC,
                spans: vec![0..4, 4..8],
            },
            MapLevel {
                name: "PKG",
                flags: LevelFlags::PKG,
                spans: vec![0..8],
            },
        ],
    )
    .unwrap();
    let name = |a, b| map.levels()[map.lowest_common_level(a, b)].name;
    assert_eq!(name(0, 1), "SMT");
    assert_eq!(name(0, 3), "MC");
    assert_eq!(name(1, 6), "PKG");
    assert_eq!(name(7, 4), "MC");
}

/// The periodic balance walks the domains bottom-up: an imbalance inside the LLC is settled
/// there before a larger one across it; a level's `imbalance_pct` is 110 within a core, 117
/// above.
#[test]
fn periodic_balance_walks_the_levels() {
    use lagom_policy::{LoadView, PinnedCpus, imbalance_pct, periodic_imbalance_domains};
    let map = CpuMap::new(
        vec![0; 4],
        vec![
            MapLevel {
                name: "SMT",
                flags: LevelFlags::SMT,
                spans: vec![0..2, 2..4],
            },
            MapLevel {
                name: "MC",
                flags: LevelFlags::MC,
                spans: vec![0..4],
            },
        ],
    )
    .unwrap();
    assert_eq!(imbalance_pct(&map.levels()[0]), 110);
    assert_eq!(imbalance_pct(&map.levels()[1]), 117);
    let run = |load: [u64; 4]| {
        let view = |i: usize| LoadView {
            load: load[i],
            nr_running: (load[i] / 1000) as usize,
        };
        periodic_imbalance_domains(&map, 0, view, &PinnedCpus::default())
            .map(|imb| (imb.busiest, imb.amount))
    };
    // The sibling has 1.15 × CPU 0's load: enough within a core (110 %), and it is taken
    // before CPU 3's larger excess across the core.
    assert_eq!(run([10_000, 11_500, 0, 20_000]), Some((1, 750)));
    // No excess within the core: the next level decides.
    assert_eq!(run([10_000, 10_500, 0, 20_000]), Some((3, 5_000)));
    // 1.15 × is not enough at 117 %.
    assert_eq!(run([10_000, 10_000, 0, 11_500]), None);
}

/// `enqueue_entity` with `ENQUEUE_MIGRATED` clears `exec_start`: a task that ran 0.1 ms ago on
/// its old CPU is cold where it arrives (`task_hot`), whichever path moved it (a wakeup that
/// chose another CPU, a balance, an active balance); without the flag the time stays.
#[test]
fn a_migrated_enqueue_is_cache_cold() {
    use lagom_policy::{
        DequeueKind, Dequeued, EnqueueFlags, EnqueueKind, Pick, RqConfig, RunQueue, SchedEntity,
    };
    let mut src = RunQueue::new(RqConfig::for_cpus(2));
    let a = src.enqueue(
        SchedEntity::new(0),
        'a',
        EnqueueKind::Wakeup,
        EnqueueFlags::NONE,
        0,
    );
    let Pick::Run(_) = src.pick_next(NOW - 1_000_000) else {
        panic!()
    };
    let Dequeued::Removed { se, .. } = src.dequeue(a, DequeueKind::Sleep, NOW - 100_000) else {
        panic!("an eligible sleeper leaves at once")
    };
    assert_eq!(se.exec_start, NOW - 100_000);
    let hot_at = |se: &SchedEntity| {
        task_hot(
            &env(),
            Candidate {
                exec_start: se.exec_start,
                ..cold()
            },
        )
    };
    assert!(hot_at(&se), "ran 0.1 ms ago");
    let mut dst = RunQueue::new(RqConfig::for_cpus(2));
    let h = dst.enqueue(se, 'a', EnqueueKind::Wakeup, EnqueueFlags::MIGRATED, NOW);
    assert_eq!(dst.entity(h).exec_start, 0);
    assert!(!hot_at(dst.entity(h)));
    let mut same = RunQueue::new(RqConfig::for_cpus(2));
    let h = same.enqueue(se, 'a', EnqueueKind::Wakeup, EnqueueFlags::NONE, NOW);
    assert!(hot_at(same.entity(h)), "not migrated: still hot");
}
