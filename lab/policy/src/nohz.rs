//! The nohz balancer kick's decision (the kernel's `nohz_balancer_kick`): which sleeping idle
//! CPU a busy CPU wakes from its tick so that the idle one balances.

use super::balance::LoadView;
use super::cpumap::CpuMap;
use super::features::Features;

/// The CPU that busy CPU `me` should wake for balancing, if any:
///
/// * with tasks waiting (two or more runnable), the first idle CPU (nothing queued, not even
///   a delayed entity), which will pull one of them;
/// * else, with CPU priorities that differ and a level that packs by them
///   ([`CpuMap::sd_asym_packing`], ITMT on), while `me` runs a task: the first
///   CPU of `me`'s LLC that is preferred to `me` and whose whole core is idle (the kernel's
///   `sd_asym_packing` test with `sched_use_asym_prio`: a more preferred CPU is idle, so the
///   task should move there), which will ask for the task by active balance.
///
/// Only busy CPUs run the periodic balance (from their tick); an idle CPU sleeps and balances
/// only when it goes idle (newly idle balance) or is woken. So a busy CPU that could use help
/// wakes one, which runs its idle loop's newly idle balance (`newidle_imbalance_domains`,
/// `asym_active_balance`) and pulls or asks for what it may. Both of lagom's drivers call this
/// with their CPUs' published counts and kick the CPU it names; a CPU that is not asleep is
/// not kicked.
///
/// ```
/// use lagom_policy::{CpuMap, Features, LevelFlags, LoadView, MapLevel, nohz_kick_target};
/// let map = CpuMap::new(
///     vec![10, 30, 20, 40],
///     vec![MapLevel { name: "MC", flags: LevelFlags::MC.with_asym_packing(), spans: vec![0..2, 2..4] }],
/// )
/// .unwrap();
/// let nr = [1, 0, 2, 0];
/// let view = |i: usize| LoadView { load: 1024 * nr[i] as u64, nr_running: nr[i] };
/// // Tasks wait on CPU 2: the first idle CPU.
/// assert_eq!(nohz_kick_target(&map, 2, view, Features::DEFAULT), Some(1));
/// // CPU 0 runs one task and CPU 1 of its LLC is preferred and idle.
/// assert_eq!(nohz_kick_target(&map, 0, view, Features::DEFAULT), Some(1));
/// let no_itmt = Features::parse("NO_ITMT").unwrap();
/// assert_eq!(nohz_kick_target(&map, 0, view, no_itmt), None);
/// ```
pub fn nohz_kick_target(
    map: &CpuMap,
    me: usize,
    view: impl Fn(usize) -> LoadView,
    features: Features,
) -> Option<usize> {
    let idle = |i: usize| {
        let v = view(i);
        v.nr_running == 0 && v.load == 0
    };
    let nr = view(me).nr_running;
    if nr >= 2 {
        return (0..map.len()).find(|&i| i != me && idle(i));
    }
    if nr == 1 && map.has_asym_priority() && map.sd_asym_packing(features).is_some() {
        // A candidate may use its priority only if its whole core is idle (the kernel's
        // `sched_use_asym_prio`): an idle SMT sibling of a busy core would find nothing to
        // take (`asym_active_balance` asks the same of it).
        let core_idle = |i: usize| map.smt_siblings(i).all(idle);
        return map
            .llc(me)
            .find(|&i| i != me && map.asym_prefer(i, me) && core_idle(i));
    }
    None
}
