//! Spawning and finishing a million tasks maps stacks only for the first round: after it the
//! pool holds the high-water mark of live stacks, in a few batches.

mod fiber_util;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use lagom::arch::{DEFAULT_STACK_SIZE, Fiber, StackPool};

const TASKS: u64 = 1_000_000;
/// Tasks alive at once (each suspended once mid-run before it finishes).
const LIVE: usize = 32;
const POOL_CAPACITY: usize = 64;

#[test]
fn a_million_spawns_map_at_most_pool_size_stacks() {
    let mut pool = StackPool::new(DEFAULT_STACK_SIZE, POOL_CAPACITY).unwrap();
    let ran = Arc::new(AtomicU64::new(0));
    let mut spawned = 0u64;
    let mut live = Vec::with_capacity(LIVE);
    let mut after_first_round = None;
    while spawned < TASKS {
        while live.len() < LIVE && spawned < TASKS {
            let ran = ran.clone();
            let stack = pool.get().unwrap();
            live.push(Fiber::new("short", spawned, stack, move || {
                fiber_util::yield_now();
                ran.fetch_add(1, Ordering::Relaxed);
            }));
            spawned += 1;
        }
        fiber_util::run_round_robin(&mut live, None);
        for mut f in live.drain(..) {
            assert!(f.take_outcome().unwrap().is_ok());
            pool.put(f.into_stack().expect("finished"));
        }
        after_first_round.get_or_insert((pool.mmaps(), pool.batches()));
    }
    let (mapped, batches) = after_first_round.unwrap();
    assert_eq!(ran.load(Ordering::Relaxed), TASKS);
    assert_eq!(
        (pool.mmaps(), pool.batches()),
        (mapped, batches),
        "nothing mapped after the first round"
    );
    assert!(
        (LIVE as u64..=POOL_CAPACITY as u64).contains(&mapped),
        "mapped {mapped} stacks for {LIVE} live ones"
    );
    assert!(batches < 16, "{batches} batches for {mapped} stacks");
    assert_eq!(
        pool.idle() as u64,
        mapped,
        "every stack came back to the pool"
    );
}
