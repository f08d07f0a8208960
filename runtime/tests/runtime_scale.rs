//! Tasks at scale: 10 000 live tasks spawn and finish; the stack pool keeps their stacks for
//! the next burst (which maps nothing), and gives the memory back once its worker has idled
//! for `arch::TRIM_AFTER`.
mod runtime_util;

use std::sync::Arc;
use std::time::{Duration, Instant};

use lagom::Runtime;
use lagom::sync::Barrier;
use lagom::task;

/// VmRSS of this process in KiB.
fn vm_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS line")
}

/// `n` tasks that each sleep 1 ms, spawned from one task and joined, all alive at once: each
/// first waits at a barrier that opens once the last is spawned (a spawn is a preemption
/// point, so without it the first ones could end while the spawning goes on). The spawning
/// task runs on the first worker, whose pool the stacks come from (and go back to, wherever
/// the tasks end). The tasks are pinned there too: fork placement would spread them over the
/// workers, and this test is about one pool's reuse, not about placement.
fn burst(rt: &Runtime, n: u64) -> Duration {
    let first = rt.worker_cpus()[0];
    let spawner = task::Builder::new().name("spawner").cpus([first]);
    let h = rt.spawn_with(spawner, move || {
        let t0 = Instant::now();
        let all = Arc::new(Barrier::new(n as usize + 1));
        let hs: Vec<_> = (0..n)
            .map(|i| {
                let all = Arc::clone(&all);
                task::Builder::new()
                    .cpus([first])
                    .spawn(move || {
                        // Touch a few KiB of stack, as real tasks do.
                        let buf = std::hint::black_box([i as u8; 4096]);
                        all.wait();
                        task::sleep(Duration::from_millis(1));
                        u64::from(buf[4095])
                    })
                    .unwrap()
            })
            .collect();
        all.wait();
        let sum: u64 = hs.into_iter().map(|h| h.join().unwrap()).sum();
        assert_eq!(sum, (0..n).map(|i| i % 256).sum::<u64>());
        t0.elapsed()
    });
    h.unwrap().join().unwrap()
}

#[test]
fn ten_thousand_live_tasks_reuse_their_stacks_and_give_memory_back() {
    const N: u64 = 10_000;
    let rt = Runtime::builder()
        .worker_cpus(runtime_util::two_cpus())
        .build()
        .unwrap();
    let base = vm_rss_kib();
    let first = burst(&rt, N);
    let grown = vm_rss_kib();
    // Let the workers go idle and publish their pools' totals.
    std::thread::sleep(Duration::from_millis(50));
    let mapped = rt.stats().total().stacks_mapped;
    let second = burst(&rt, N);
    std::thread::sleep(Duration::from_millis(50));
    let st = rt.stats();
    println!(
        "{N} tasks sleeping 1 ms: {first:?}, then {second:?}; {mapped} stacks mapped; VmRSS \
         {base} KiB before, {grown} KiB after the first burst\n{st}"
    );
    assert_eq!((st.live_tasks, st.live_stacks), (0, 0), "{st}");
    assert!(mapped >= N / 2, "{mapped} stacks for {N} live tasks?");
    assert!(
        st.total().stacks_mapped <= mapped + 2 * lagom::arch::MAX_BATCH as u64,
        "the second burst mapped {} more stacks: the pools did not keep the first's",
        st.total().stacks_mapped - mapped
    );
    // Idle for the trim delay: the pools unmap what is beyond their floor and release the
    // rest.
    let t0 = Instant::now();
    let trimmed = loop {
        std::thread::sleep(Duration::from_millis(100));
        let st = rt.stats().total();
        if st.stacks_trimmed > 0 && vm_rss_kib() < grown {
            break st.stacks_trimmed;
        }
        assert!(
            t0.elapsed() < lagom::arch::TRIM_AFTER * 5,
            "no trim: {st:?}"
        );
    };
    let after = vm_rss_kib();
    println!("trimmed {trimmed} stacks; VmRSS {after} KiB");
    // qemu-user 7.2 (Debian 12's) answers `madvise` with success and does nothing, so under
    // it only the stacks the trim unmaps give their memory back, not those it releases in
    // place.
    if runtime_util::emulated_skip("the released stacks' memory (the emulator ignores madvise)") {
        return;
    }
    assert!(
        after < base + (grown - base) / 2,
        "VmRSS {after} KiB: the memory of {N} stacks was not given back ({base} -> {grown})"
    );
}
