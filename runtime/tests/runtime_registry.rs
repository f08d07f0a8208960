//! The registry of live tasks (`tcb/registry.rs`): a task that dies on another worker than
//! its home is handed back to its home, which frees it; the live counts stay exact.
mod runtime_util;

use std::sync::Arc;
use std::time::{Duration, Instant};

use lagom::{Runtime, task};

/// Children spawned on worker A and pinned to worker B die on B and go back to A's registry:
/// A frees them at its next spawn or when it runs out of work, so the live count stays small
/// while a spawner on A keeps going, and falls to zero once everything has ended, while the
/// runtime still runs.
#[test]
fn tasks_that_die_on_another_worker_are_freed_by_their_home() {
    const N: u64 = 300;
    let Some(cpus) =
        runtime_util::two_cpus_or_skip("tasks_that_die_on_another_worker_are_freed_by_their_home")
    else {
        return;
    };
    let (a, b) = (cpus[0], cpus[1]);
    let rt = Arc::new(Runtime::builder().worker_cpus([a, b]).build().unwrap());
    let rt2 = Arc::clone(&rt);
    let max_live = rt.block_on(move || {
        let spawner = task::Builder::new().cpus([a]).spawn(move || {
            let mut max_live = 0;
            for i in 0..N {
                let h = task::Builder::new().cpus([b]).spawn(move || i).unwrap();
                assert_eq!(h.join().unwrap(), i);
                max_live = max_live.max(rt2.stats().live_tasks);
            }
            max_live
        });
        spawner.unwrap().join().unwrap()
    });
    // block_on's task, the spawner, the child just joined and the one before it: B frees a
    // child after waking its joiner, so A's next spawn may reap before the push.
    assert!(max_live <= 4, "{max_live} tasks live at once");
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut st = rt.stats();
    while (st.live_tasks, st.live_stacks) != (0, 0) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
        st = rt.stats();
    }
    assert_eq!((st.live_tasks, st.live_stacks), (0, 0), "{st}");
    let rt = Arc::try_unwrap(rt).unwrap_or_else(|_| panic!("a task kept the runtime"));
    let st = rt.shutdown();
    assert_eq!((st.live_tasks, st.live_stacks), (0, 0), "{st}");
}
