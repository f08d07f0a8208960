//! The wakeup path under load: park/unpark ping-pong across workers (no lost wakeup, a
//! watchdog fails the test if progress stops for 5 s) and the storm (64 tasks blocking and
//! waking each other at random; every wakeup accounted for), under every feature combination.
mod runtime_util;

use std::time::Duration;

use lagom::Runtime;

/// Two tasks pinned to different workers pass a turn back and forth `n` times.
fn ping_pong(features: &str, n: u64) {
    let cpus = runtime_util::two_cpus();
    let rt = Runtime::builder()
        .worker_cpus(cpus.clone())
        .features(features)
        .build()
        .unwrap();
    runtime_util::pinned_ping_pong(&rt, n);
    let st = rt.shutdown();
    let t = st.total();
    assert_eq!(
        t.blocks,
        t.wakeups(),
        "[{features}] a block without its wakeup\n{st}"
    );
    assert_eq!((st.live_tasks, st.live_stacks), (0, 0), "{st}");
}

/// 64 tasks block and wake each other at random for `dur`; then the main thread unparks each
/// once and all must end within a bound (a lost wakeup fails the process, naming the seed of
/// test `test`). Every block must have been ended by exactly one wakeup.
fn storm(test: &str, features: &str, dur: Duration) {
    let seed = runtime_util::seed(test);
    let what = format!("[{features}] {}", runtime_util::replay(test, seed));
    let rt = Runtime::builder()
        .worker_cpus(runtime_util::two_cpus())
        .features(features)
        .build()
        .unwrap();
    let rounds = runtime_util::storm(&rt, seed, &what, 64, 3, runtime_util::Stop::After(dur));
    let st = rt.shutdown();
    let t = st.total();
    assert!(rounds > 0);
    assert_eq!(
        t.blocks,
        t.wakeups(),
        "{what}: blocks and wakeups differ\n{st}"
    );
    assert!(t.blocks > 0, "{what}: nothing ever blocked\n{st}");
    assert_eq!((st.live_tasks, st.live_stacks), (0, 0), "{what}\n{st}");
    println!("{what}: {rounds} rounds, {} blocks\n{st}", t.blocks);
}

#[test]
fn ping_pong_million_round_trips() {
    ping_pong("", 1_000_000);
}

#[test]
fn storm_three_seconds() {
    storm("storm_three_seconds", "", Duration::from_secs(3));
}

#[test]
fn every_feature_combination() {
    for f in runtime_util::feature_combinations() {
        ping_pong(&f, 10_000);
        storm("every_feature_combination", &f, Duration::from_millis(200));
    }
}
