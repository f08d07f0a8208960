//! The policy tests' reference: what the runqueue's decisions must be, recomputed from
//! scratch in 128-bit arithmetic from its public state (the queued entities), independently
//! of the runqueue's own eligibility, lag and placement code. Used by `policy_tiny` and
//! `policy_property`.

use lagom_policy::{Feature, Features, Handle, RqConfig, RunQueue, SchedEntity, calc_delta_fair};

/// The signed virtual-time difference `a − b`.
pub fn vd(a: u64, b: u64) -> i128 {
    a.wrapping_sub(b) as i64 as i128
}

/// The queued entities as (handle, entity), from the public iterator.
pub fn queued(rq: &RunQueue<usize>) -> Vec<(Handle, SchedEntity)> {
    rq.iter().map(|(h, se, _)| (h, *se)).collect()
}

/// The floor of the exact weighted mean vruntime, and the total weight.
pub fn v_ref(q: &[(Handle, SchedEntity)]) -> Option<(u64, i128)> {
    let r = q.first()?.1.vruntime;
    let (s, w) = q.iter().fold((0i128, 0i128), |(s, w), (_, se)| {
        (
            s + vd(se.vruntime, r) * se.weight as i128,
            w + se.weight as i128,
        )
    });
    Some((r.wrapping_add(s.div_euclid(w) as i64 as u64), w))
}

/// `V ≥ v` exactly: `Σ w·(vⱼ − v) ≥ 0`.
pub fn eligible_ref(q: &[(Handle, SchedEntity)], v: u64) -> bool {
    q.iter()
        .map(|(_, se)| vd(se.vruntime, v) * se.weight as i128)
        .sum::<i128>()
        >= 0
}

/// The saved lag of `se` leaving (or being delayed) at V = `v`.
pub fn lag_ref(
    q: &[(Handle, SchedEntity)],
    se: &SchedEntity,
    v: u64,
    features: Features,
    tick: u64,
) -> i64 {
    let max_slice = q.iter().map(|(_, e)| e.slice).max().unwrap_or(0);
    let limit = calc_delta_fair(max_slice + tick, se.weight).min(i64::MAX as u64) as i64;
    let raw = v.wrapping_sub(se.vruntime) as i64;
    let mut vl = raw.clamp(-limit, limit);
    if se.sched_delayed {
        vl = vl.max(se.vlag);
        if features.is_enabled(Feature::DelayZero) {
            vl = vl.min(0);
        }
    }
    vl
}

/// (vruntime, deadline) of `se` placed among `q` (which does not hold it); `v_empty` is V
/// of an empty queue (the runqueue's zero point, which only the runqueue knows).
pub fn place_ref(
    q: &[(Handle, SchedEntity)],
    se: &SchedEntity,
    initial: bool,
    cfg: &RqConfig,
    v_empty: u64,
) -> (u64, u64) {
    let f = cfg.features;
    let (v, w_all) = v_ref(q).unwrap_or((v_empty, 0));
    let slice = if se.custom_slice {
        se.slice
    } else {
        cfg.base_slice
    };
    let mut lag = 0i64;
    if f.is_enabled(Feature::PlaceLag) && !q.is_empty() && se.vlag != 0 {
        let l = se.vlag as i128 * (w_all + se.weight as i128) / w_all;
        lag = l.clamp(i64::MIN as i128 / 2, i64::MAX as i128 / 2) as i64;
    }
    let vr = v.wrapping_sub(lag as u64);
    if se.rel_deadline && f.is_enabled(Feature::PlaceRelDeadline) {
        return (vr, se.deadline.wrapping_add(vr));
    }
    let mut vslice = calc_delta_fair(slice, se.weight);
    if initial && f.is_enabled(Feature::PlaceDeadlineInitial) {
        vslice /= 2;
    }
    (vr, vr.wrapping_add(vslice))
}

/// The running entity `before` charged up to `now` (`update_curr`): exactly the time since
/// its last accounting point, scaled by its weight. Returns (exec_start, sum_exec_runtime,
/// vruntime) after the charge.
pub fn charge_ref(before: &SchedEntity, now: u64) -> (u64, u64, u64) {
    let delta = vd(now, before.exec_start).max(0) as u64;
    (
        before.exec_start + delta,
        before.sum_exec_runtime + delta,
        before
            .vruntime
            .wrapping_add(calc_delta_fair(delta, before.weight)),
    )
}
