//! A panicking task's payload reaches the joiner, and the other tasks keep running.

mod fiber_util;
mod panic_util;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use lagom::arch::{DefaultStack, Fiber};

#[test]
fn panic_payload_reaches_join_and_others_keep_running() {
    panic_util::quiet();
    let counts: Arc<[AtomicU32; 2]> = Arc::new([AtomicU32::new(0), AtomicU32::new(0)]);
    let mut fibers = Vec::new();
    fibers.push(Fiber::new(
        "panicker",
        1,
        DefaultStack::with_default_size().unwrap(),
        || {
            fiber_util::yield_now();
            fiber_util::yield_now();
            panic!("deliberate boom after two yields");
        },
    ));
    for i in 0..2 {
        let counts = counts.clone();
        fibers.push(Fiber::new(
            format!("counter-{i}"),
            2 + i as u64,
            DefaultStack::new(64 * 1024).unwrap(),
            move || {
                for _ in 0..10 {
                    counts[i].fetch_add(1, Ordering::Relaxed);
                    fiber_util::yield_now();
                }
            },
        ));
    }
    let switches = fiber_util::run_round_robin(&mut fibers, None);
    // The counters ran 10 times each, i.e. well past the panic at the panicker's third run.
    assert_eq!(counts[0].load(Ordering::Relaxed), 10);
    assert_eq!(counts[1].load(Ordering::Relaxed), 10);
    assert_eq!(switches, 3 + 11 + 11);

    let err = fibers[0]
        .take_outcome()
        .expect("finished")
        .expect_err("it panicked");
    assert!(err.is_panic());
    assert_eq!(err.task_name(), "panicker");
    assert_eq!(err.task_id(), 1);
    assert_eq!(
        err.to_string(),
        "task 'panicker' (id 1) panicked: deliberate boom after two yields"
    );
    let payload = err.into_panic();
    assert_eq!(
        *payload.downcast::<&str>().unwrap(),
        "deliberate boom after two yields"
    );
    for f in &mut fibers[1..] {
        assert!(f.take_outcome().expect("finished").is_ok());
    }
}

#[test]
fn panic_with_string_payload_and_stack_reuse_after_panic() {
    panic_util::quiet();
    let mut fibers = vec![Fiber::new(
        "fmt-panic",
        9,
        DefaultStack::new(64 * 1024).unwrap(),
        || {
            let n = 3;
            panic!("deliberate, formatted {n}");
        },
    )];
    fiber_util::run_round_robin(&mut fibers, None);
    let f = fibers.pop().unwrap();
    let mut f = f;
    let err = f.take_outcome().unwrap().unwrap_err();
    assert_eq!(
        *err.into_panic().downcast::<String>().unwrap(),
        "deliberate, formatted 3"
    );
    // A finished fiber's stack is handed back for reuse and runs a new fiber fine.
    let stack = f
        .into_stack()
        .expect("finished fibers give their stack back");
    let mut again = vec![Fiber::new("reuse", 10, stack, fiber_util::yield_now)];
    assert_eq!(fiber_util::run_round_robin(&mut again, None), 2);
    assert!(again[0].take_outcome().unwrap().is_ok());
}

#[test]
fn dropping_unstarted_fiber_drops_closure_and_suspended_fiber_leaks_stack() {
    let token = Arc::new(());
    let t = token.clone();
    let f = Fiber::new(
        "never",
        1,
        DefaultStack::new(64 * 1024).unwrap(),
        move || drop(t),
    );
    assert_eq!(Arc::strong_count(&token), 2);
    drop(f);
    assert_eq!(
        Arc::strong_count(&token),
        1,
        "an unstarted fiber drops its closure"
    );

    // A fiber suspended mid-run: its stack is not handed back.
    let mut fibers = vec![Fiber::new(
        "suspended",
        2,
        DefaultStack::new(64 * 1024).unwrap(),
        || {
            fiber_util::yield_now();
            fiber_util::yield_now();
        },
    )];
    let mut idle = Box::new(lagom::arch::Context::new());
    let idle_ptr: *mut lagom::arch::Context = &mut *idle;
    // SAFETY: not running; idle outlives the switch.
    unsafe { fibers[0].set_parent(idle_ptr) };
    fiber_util::resume(&mut fibers[0], idle_ptr, None);
    assert!(!fibers[0].is_finished());
    assert!(fibers.pop().unwrap().into_stack().is_none());
}
