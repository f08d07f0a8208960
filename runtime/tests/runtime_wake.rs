//! The wakeup path under load: park/unpark ping-pong across workers (no lost wakeup, a
//! watchdog fails the test if progress stops for 5 s) and the storm (64 tasks blocking and
//! waking each other at random; every wakeup accounted for), under every feature combination.
mod runtime_util;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use lagom::Runtime;
use lagom::task::{Builder, Unparker};

/// Two tasks pinned to different workers pass a turn back and forth `n` times.
fn ping_pong(features: &str, n: u64) {
    let cpus = runtime_util::two_cpus();
    let rt = Runtime::builder()
        .worker_cpus(cpus.clone())
        .features(features)
        .build()
        .unwrap();
    let turn = Arc::new(AtomicU64::new(0));
    let _dog = runtime_util::Watchdog::new("ping-pong", Arc::clone(&turn), Duration::from_secs(5));
    let peer: Arc<[std::sync::OnceLock<Unparker>; 2]> = Arc::new(Default::default());
    let player = |me: u64| {
        let (turn, peer) = (Arc::clone(&turn), Arc::clone(&peer));
        move || {
            peer[me as usize]
                .set(lagom::task::current_unparker())
                .unwrap();
            let other = loop {
                if let Some(o) = peer[1 - me as usize].get() {
                    break o.clone();
                }
                lagom::task::yield_now();
            };
            for i in 0..n {
                let mine = 2 * i + me;
                while turn.load(Ordering::Acquire) != mine {
                    lagom::task::park();
                }
                turn.store(mine + 1, Ordering::Release);
                other.unpark();
            }
        }
    };
    let a = rt
        .spawn_with(Builder::new().name("ping").cpus([cpus[0]]), player(0))
        .unwrap();
    let b = rt
        .spawn_with(
            Builder::new().name("pong").cpus([*cpus.last().unwrap()]),
            player(1),
        )
        .unwrap();
    a.join().unwrap();
    b.join().unwrap();
    assert_eq!(turn.load(Ordering::Relaxed), 2 * n);
    let st = rt.shutdown();
    let t = st.total();
    assert_eq!(
        t.blocks,
        t.wakeups(),
        "[{features}] a block without its wakeup\n{st}"
    );
    assert_eq!((st.live_tasks, st.live_stacks), (0, 0), "{st}");
}

/// 64 tasks block and wake each other at random for `secs`; then the main thread wakes them
/// until all have ended. Every block must have been ended by exactly one wakeup.
fn storm(features: &str, dur: Duration) {
    let seed = runtime_util::seed();
    let rt = Runtime::builder()
        .worker_cpus(runtime_util::two_cpus())
        .features(features)
        .build()
        .unwrap();
    const TASKS: usize = 64;
    let stop = Arc::new(AtomicBool::new(false));
    let progress = Arc::new(AtomicU64::new(0));
    let _dog = runtime_util::Watchdog::new("storm", Arc::clone(&progress), Duration::from_secs(5));
    let peers: Arc<Vec<std::sync::OnceLock<Unparker>>> =
        Arc::new((0..TASKS).map(|_| Default::default()).collect());
    let handles: Vec<_> = (0..TASKS)
        .map(|i| {
            let (stop, peers, progress) =
                (Arc::clone(&stop), Arc::clone(&peers), Arc::clone(&progress));
            rt.spawn(move || {
                peers[i].set(lagom::task::current_unparker()).unwrap();
                let mut rng = runtime_util::Rng(seed ^ (i as u64 + 1).wrapping_mul(0x9e37_79b9));
                let mut rounds = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    for _ in 0..=rng.below(3) {
                        if let Some(u) = peers[rng.below(TASKS as u64) as usize].get() {
                            u.unpark();
                        }
                    }
                    match rng.below(4) {
                        0 => lagom::task::yield_now(),
                        1 => lagom::task::cond_resched(),
                        _ => lagom::task::park(),
                    }
                    rounds += 1;
                    progress.fetch_add(1, Ordering::Relaxed);
                }
                rounds
            })
        })
        .collect();
    let unparkers: Vec<Unparker> = handles.iter().map(|h| h.unparker()).collect();
    let t0 = Instant::now();
    while t0.elapsed() < dur {
        std::thread::sleep(Duration::from_millis(10));
    }
    stop.store(true, Ordering::Relaxed);
    while !handles.iter().all(|h| h.is_finished()) {
        for u in &unparkers {
            u.unpark();
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let rounds: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    let st = rt.shutdown();
    let t = st.total();
    assert!(rounds > 0);
    assert_eq!(
        t.blocks,
        t.wakeups(),
        "[{features}] seed {seed}: blocks and wakeups differ\n{st}"
    );
    assert!(
        t.blocks > 0,
        "[{features}] seed {seed}: nothing ever blocked\n{st}"
    );
    assert_eq!((st.live_tasks, st.live_stacks), (0, 0), "seed {seed}\n{st}");
    println!(
        "[{features}] seed {seed}: {rounds} rounds, {} blocks\n{st}",
        t.blocks
    );
}

#[test]
fn ping_pong_million_round_trips() {
    ping_pong("", 1_000_000);
}

#[test]
fn storm_three_seconds() {
    storm("", Duration::from_secs(3));
}

#[test]
fn every_feature_combination() {
    for f in runtime_util::feature_combinations() {
        ping_pong(&f, 10_000);
        storm(&f, Duration::from_millis(200));
    }
}
