//! A task's exit (`worker/exit.rs`): it switches straight to the next runnable task (its
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
