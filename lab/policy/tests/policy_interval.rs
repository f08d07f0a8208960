//! When a busy CPU runs its periodic balance, through the pure decisions (`LevelBalance`,
//! `should_we_balance`): the expected answers come from the kernel's `sched_balance_domains`
//! (a level is due `balance_interval × busy_factor` after its last balance),
//! `get_sd_balance_interval`, `sched_balance_rq`'s interval tuning and `should_we_balance`.

// A domain level that spans every CPU has one span: a `Vec` of one `Range`, as meant.
#![allow(clippy::single_range_in_vec_init)]

use lagom_policy::{
    CpuMap, LbOutcome, LevelBalance, LevelFlags, MapLevel, max_load_balance_interval,
    should_we_balance,
};

const MS: u64 = 1_000_000;

/// The times a busy CPU of a 2-CPU domain balances it over `until` ns, ticking every 4 ms
/// (lagom's tick cadence), each attempt ending in `outcome`.
fn balances(outcome: LbOutcome, until: u64) -> Vec<u64> {
    let map = CpuMap::flat(2);
    let p = map.params(0, 0);
    let mut lb = LevelBalance::new(&p, 0);
    let mut at = Vec::new();
    for now in (0..until).step_by(4 * MS as usize) {
        if lb.due(&p, true, 2, now) {
            at.push(now);
            lb.after(&p, outcome, now);
        }
    }
    at
}

/// `sched_balance_domains` on a busy CPU of a 2-CPU domain: `min_interval` 2 ms × the busy
/// factor 16 = 32 ms at least between balances while it finds an imbalance; 4 ms × 16 =
/// 64 ms once it finds the domain balanced (`max_interval`); where every source is pinned
/// the interval doubles past that, up to `max_load_balance_interval` (200 ms for 2 CPUs).
#[test]
fn a_busy_cpu_balances_a_two_cpu_domain_every_32_ms_or_more() {
    let gaps = |at: &[u64]| at.windows(2).map(|w| w[1] - w[0]).collect::<Vec<_>>();
    let failed = balances(LbOutcome::Failed, 1000 * MS);
    assert_eq!(
        failed[0],
        32 * MS,
        "the first balance an interval after the start"
    );
    assert!(gaps(&failed).iter().all(|&g| g == 32 * MS), "{failed:?}");
    let balanced = balances(LbOutcome::Balanced, 1000 * MS);
    assert!(
        gaps(&balanced).iter().all(|&g| g == 64 * MS),
        "{balanced:?}"
    );
    let pinned = balances(LbOutcome::AllPinned, 2000 * MS);
    let g = gaps(&pinned);
    assert_eq!(g[0], 64 * MS, "{pinned:?}");
    assert_eq!(*g.last().unwrap(), 200 * MS, "{pinned:?}");
    assert_eq!(max_load_balance_interval(2), 200 * MS);
}

/// An idle CPU's interval is not multiplied (`get_sd_balance_interval` with `busy` false),
/// and a larger domain waits longer: an 8-CPU LLC, busy, 8 ms × 16 = 128 ms.
#[test]
fn the_interval_grows_with_the_domain_and_the_busy_factor() {
    let map = CpuMap::flat(8);
    let p = map.params(0, 0);
    let lb = LevelBalance::new(&p, 0);
    assert_eq!(lb.effective(&p, false, 8), 8 * MS);
    assert_eq!(lb.effective(&p, true, 8), 128 * MS);
}

/// `should_we_balance` (periodic, busy CPU): in two LLCs of two SMT cores each (SMT, MC,
/// PKG), the package level is balanced for an LLC by its first CPU while every CPU of it is
/// busy; by nobody busy once one is idle (the idle one does); and at the SMT level every
/// CPU balances its own core with its sibling.
#[test]
fn one_cpu_of_each_group_balances() {
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
    let all_busy = |_: usize| false;
    for cpu in 0..8 {
        assert!(should_we_balance(&map, 0, cpu, all_busy), "SMT, CPU {cpu}");
        // MC: the group is the core; its first CPU balances.
        assert_eq!(should_we_balance(&map, 1, cpu, all_busy), cpu % 2 == 0);
        // PKG: the group is the LLC.
        assert_eq!(should_we_balance(&map, 2, cpu, all_busy), cpu % 4 == 0);
    }
    // CPU 3 idle (its sibling 2 busy): at PKG, no idle core in LLC 0, so the first idle CPU
    // with busy siblings (3) balances for it, not CPU 0.
    let idle3 = |i: usize| i == 3;
    assert!(!should_we_balance(&map, 2, 0, idle3));
    // CPUs 2 and 3 idle (a whole idle core): it balances for the LLC.
    let core1 = |i: usize| i == 2 || i == 3;
    assert!(!should_we_balance(&map, 2, 0, core1));
    // LLC 1 is unaffected by LLC 0's idle CPUs.
    assert!(should_we_balance(&map, 2, 4, core1));
}
