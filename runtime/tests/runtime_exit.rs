//! A task's exit (`sched/exit.rs`): it switches straight to the next runnable task (its
//! joiner) instead of through the worker's idle loop.
mod runtime_util;

use lagom::trace::{SwitchReason, TraceEventKind};
use lagom::{Runtime, task};

/// On one worker, each child's exit switches directly to the parent that joins it: no
/// switch to the idle loop comes in between.
#[test]
fn an_ending_task_switches_straight_to_its_joiner() {
    const N: u64 = 50;
    let cpu = runtime_util::two_cpus()[0];
    let rt = Runtime::builder()
        .worker_cpus([cpu])
        .tracing(true)
        .build()
        .unwrap();
    let (parent, children) = rt.block_on(|| {
        let me = task::current().unwrap().id;
        let mut ids = Vec::new();
        for i in 0..N {
            let h = task::spawn(move || i * 2);
            ids.push(h.id());
            assert_eq!(h.join().unwrap(), i * 2);
        }
        (me, ids)
    });
    let (st, trace) = rt.shutdown_with_trace();
    assert_eq!(trace.dropped(), 0);
    let exits: Vec<_> = trace.workers()[0]
        .events
        .iter()
        .filter_map(|e| match e.kind {
            TraceEventKind::Switch {
                prev: Some(p),
                next,
                reason: SwitchReason::Exit,
            } => Some((p, next)),
            _ => None,
        })
        .collect();
    for id in &children {
        assert!(
            exits.contains(&(*id, Some(parent))),
            "child {id} did not exit straight to its joiner {parent}: {exits:?}\n{st}"
        );
    }
    assert_eq!((st.live_tasks, st.live_stacks), (0, 0), "{st}");
}

/// An exit wakes its joiner on every path, under every combination of the wakeup features:
/// a joiner on the same worker (woken in the exit's own lock section), a joiner on another
/// worker (the exit releases its lock first) and a plain OS thread (a futex wake, never under
/// the lock). A lost or doubled wakeup hangs here or corrupts the values.
#[test]
fn an_exit_wakes_its_joiner_on_every_path() {
    const N: u64 = 20;
    let cpus = runtime_util::two_cpus();
    let (here, there) = (cpus[0], *cpus.last().unwrap());
    for f in runtime_util::feature_combinations() {
        let rt = Runtime::builder()
            .worker_cpus(cpus.clone())
            .features(f.as_str())
            .build()
            .unwrap();
        let parent = rt
            .spawn_with(task::Builder::new().cpus([here]), move || {
                let mut sum = 0;
                for i in 0..N {
                    for cpu in [here, there] {
                        let h = task::Builder::new().cpus([cpu]).spawn(move || i + 1);
                        sum += h.unwrap().join().unwrap();
                    }
                }
                sum
            })
            .unwrap();
        let outside: u64 = (0..N)
            .map(|i| rt.spawn(move || i + 1).join().unwrap())
            .sum();
        assert_eq!(parent.join().unwrap(), N * (N + 1), "{f}");
        assert_eq!(outside, N * (N + 1) / 2, "{f}");
        let st = rt.shutdown();
        assert_eq!((st.live_tasks, st.live_stacks), (0, 0), "{f}: {st}");
    }
}
