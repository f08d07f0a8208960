//! A task's exit (`worker/exit.rs`): it switches straight to the next runnable task (its
//! joiner) instead of through the worker's idle loop, and a task that ends on another worker
//! than the one whose registry holds it is handed back and freed there (`task/registry.rs`).
mod runtime_util;

use std::time::{Duration, Instant};

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

/// Children spawned by a task on worker A but pinned to worker B end on B, after A has gone
/// to sleep idle (their spawner ended long before): B hands them back and kicks A, which
/// frees them (they stop counting as live) without a shutdown. Without the kick A would keep
/// them until its next wakeup, here never.
#[test]
fn tasks_ending_on_another_worker_are_freed_by_their_sleeping_home() {
    let cpus = runtime_util::two_cpus();
    if cpus.len() < 2 {
        eprintln!("skipped: needs two CPUs");
        return;
    }
    let (a, b) = (cpus[0], cpus[1]);
    let rt = Runtime::builder().worker_cpus(cpus).build().unwrap();
    let children = rt
        .spawn_with(task::Builder::new().cpus([a]), move || {
            (0..50u64)
                .map(|i| {
                    task::Builder::new()
                        .cpus([b])
                        .spawn(move || {
                            task::sleep(Duration::from_millis(30));
                            (i, task::current().unwrap().cpu)
                        })
                        .unwrap()
                })
                .collect::<Vec<_>>()
        })
        .unwrap()
        .join()
        .unwrap();
    for (i, h) in children.into_iter().enumerate() {
        assert_eq!(h.join().unwrap(), (i as u64, b));
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let st = rt.stats();
        if (st.live_tasks, st.live_stacks) == (0, 0) {
            break;
        }
        assert!(Instant::now() < deadline, "dead tasks never freed:\n{st}");
        std::thread::sleep(Duration::from_millis(1));
    }
    let st = rt.shutdown();
    assert_eq!((st.live_tasks, st.live_stacks), (0, 0), "{st}");
    assert_eq!(st.total().exits, 51, "{st}");
}
