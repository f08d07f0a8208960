//! A joined task's allocation serves the next spawn on its worker (`task/recycle.rs`): every
//! task built in a recycled allocation is whole and fresh, whatever the task before it was.
mod panic_util;
mod runtime_util;

use lagom::{Runtime, task};

/// Named and unnamed tasks, pinned and free ones, small results (kept in the task) and large
/// ones (their own packet), and now and then a panic (each prints its report, hence only a
/// few) follow one another through the same allocations: each task sees its own id and
/// name, returns its own value, and its panic is its own.
#[test]
fn a_task_in_a_recycled_allocation_is_a_fresh_task() {
    panic_util::quiet();
    let cpu = runtime_util::two_cpus()[0];
    let rt = Runtime::builder().worker_cpus([cpu]).build().unwrap();
    let ids = rt.block_on(move || {
        let mut ids = Vec::new();
        for i in 0..300u64 {
            let b = match i % 3 {
                0 => task::Builder::new().name(format!("n{i}")),
                1 => task::Builder::new().cpus([cpu]),
                _ => task::Builder::new(),
            };
            let h = b
                .spawn(move || {
                    let me = task::current().unwrap();
                    (me.id, me.name, i)
                })
                .unwrap();
            let id = h.id();
            let (seen_id, name, v) = h.join().unwrap();
            assert_eq!((seen_id, v), (id, i));
            let want = if i % 3 == 0 {
                format!("n{i}")
            } else {
                format!("task-{id}")
            };
            assert_eq!(name, want, "task {i}");
            ids.push(id);

            let big = task::spawn(move || [i; 64]).join().unwrap();
            assert_eq!(big, [i; 64]);

            if i % 30 != 0 {
                continue;
            }
            let err = task::Builder::new()
                .name(format!("p{i}"))
                .spawn(move || -> u64 { panic!("deliberate boom {i}") })
                .unwrap()
                .join()
                .unwrap_err();
            assert!(
                err.to_string().contains(&format!("deliberate boom {i}")),
                "{err}"
            );
            assert!(err.to_string().contains(&format!("p{i}")), "{err}");
        }
        ids
    });
    let mut sorted = ids.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), ids.len(), "an id was reused");
    let st = rt.shutdown();
    assert_eq!((st.live_tasks, st.live_stacks), (0, 0), "{st}");
}
