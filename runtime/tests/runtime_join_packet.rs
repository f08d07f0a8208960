//! The join packet in the task's allocation or in its own (`tcb/completion.rs`):
//! small results (the packet fits in the task) and large ones (it does not) are delivered,
//! panics are reported, and a result nobody joins is dropped exactly once, on both paths.
mod panic_util;
mod runtime_util;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use lagom::Runtime;

/// A result that counts its drops; `P` pads it to choose the packet's path.
struct Counted<P> {
    drops: Arc<AtomicUsize>,
    pad: P,
}

impl<P> Drop for Counted<P> {
    fn drop(&mut self) {
        self.drops.fetch_add(1, Ordering::SeqCst);
    }
}

fn runtime() -> Runtime {
    Runtime::builder()
        .worker_cpus(runtime_util::two_cpus())
        .stack_size(64 * 1024)
        .build()
        .unwrap()
}

/// Spawns `n` tasks returning `Counted { pad: make(i) }`, joins every other one (checking
/// its pad), drops the other handles unjoined, and checks each result was dropped once.
fn joined_and_unjoined<P: PartialEq + std::fmt::Debug + Send + 'static>(make: fn(usize) -> P) {
    const N: usize = 200;
    let rt = runtime();
    let drops = Arc::new(AtomicUsize::new(0));
    let d = Arc::clone(&drops);
    rt.block_on(move || {
        let handles: Vec<_> = (0..N)
            .map(|i| {
                let drops = Arc::clone(&d);
                lagom::task::spawn(move || Counted {
                    drops,
                    pad: make(i),
                })
            })
            .collect();
        for (i, h) in handles.into_iter().enumerate() {
            if i % 2 == 0 {
                let v = h.join().unwrap_or_else(|e| panic!("task {i}: {e}"));
                assert_eq!(v.pad, make(i), "task {i} returned a wrong value");
            } else {
                drop(h);
            }
        }
    });
    rt.shutdown();
    assert_eq!(
        drops.load(Ordering::SeqCst),
        N,
        "every result dropped exactly once"
    );
}

#[test]
fn small_results_in_the_tasks_packet() {
    joined_and_unjoined(|i| i as u64 * 3);
}

#[test]
fn large_results_in_a_packet_of_their_own() {
    joined_and_unjoined(|i| [i as u64; 64]);
}

#[test]
fn panics_reach_the_joiner_on_both_paths() {
    panic_util::quiet();
    let rt = runtime();
    rt.block_on(|| {
        let small = lagom::task::spawn(|| -> u64 { panic!("deliberate small boom") });
        let large = lagom::task::spawn(|| -> [u64; 64] { panic!("deliberate large boom") });
        let e = small.join().unwrap_err();
        assert!(format!("{e}").contains("deliberate small boom"), "{e}");
        let e = large.join().unwrap_err();
        assert!(format!("{e}").contains("deliberate large boom"), "{e}");
    });
}
