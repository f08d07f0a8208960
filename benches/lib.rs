//! Shared helpers for lagom's criterion benchmarks and their example programs.

use lagom_policy::{EnqueueFlags, EnqueueKind, Features, RqConfig, RunQueue, SchedEntity};

/// splitmix64 step: deterministic pseudo-random numbers for reproducible setups.
pub fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A one-CPU runqueue holding `n` nice-0 entities whose vruntimes are spread pseudo-randomly
/// (each joins with a saved lag drawn from ±`spread` virtual ns), with one of them running.
/// Payloads are the entity numbers. Deterministic for a given `seed`.
pub fn runqueue_with(n: usize, spread: u64, seed: u64) -> RunQueue<u32> {
    runqueue_with_features(n, spread, seed, Features::default())
}

/// [`runqueue_with`] under the scheduler features `features`.
pub fn runqueue_with_features(
    n: usize,
    spread: u64,
    seed: u64,
    features: Features,
) -> RunQueue<u32> {
    let mut cfg = RqConfig::for_cpus(1);
    cfg.features = features;
    let mut rq = RunQueue::new(cfg);
    rq.reserve(n);
    let mut state = seed;
    for i in 0..n {
        let mut se = SchedEntity::new(0);
        se.vlag = (splitmix64(&mut state) % (2 * spread + 1)) as i64 - spread as i64;
        let _ = rq.enqueue(se, i as u32, EnqueueKind::Wakeup, EnqueueFlags::NONE, 0);
    }
    let _ = rq.pick_next(0);
    rq
}

/// Makes a closed stdout end the program quietly (as `remote_wake | head` expects) rather
/// than panic in `println!`: restores the default action of SIGPIPE, which Rust's runtime sets
/// to "ignore".
pub fn default_sigpipe() {
    // SAFETY: setting a signal's disposition to its default has no preconditions; it runs at
    // the start of `main`, before any other thread exists.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
}

/// The value of `--features SPEC`, checked with `lagom_policy::Features::parse`, so that a
/// bad name is a usage error (exit status 2, naming the valid ones).
pub fn features_arg(spec: String) -> Result<String, String> {
    match lagom_policy::Features::parse(&spec) {
        Ok(_) => Ok(spec),
        Err(e) => Err(format!("--features: {e}")),
    }
}

pub mod pingpong;
pub mod workloads;
