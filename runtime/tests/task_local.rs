//! `task_local!`: each task has its own value (two tasks on one worker, interleaved by
//! yields, never see each other's), made on first use, dropped when the task ends; outside a
//! task `try_with` fails and `with` panics.
mod sync_util;

use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use lagom::task;
use sync_util::{on, rt2};

lagom::task_local! {
    static COUNT: Cell<u64> = Cell::new(0);
}

#[test]
fn each_task_has_its_own_value() {
    let (rt, cpus) = rt2();
    let hs: Vec<_> = (0..8u64)
        .map(|k| {
            on(&rt, cpus[0], move || {
                for _ in 0..1000 {
                    COUNT.with(|c| c.set(c.get() + k));
                    task::yield_now();
                }
                COUNT.with(Cell::get)
            })
        })
        .collect();
    for (k, h) in hs.into_iter().enumerate() {
        assert_eq!(h.join().unwrap(), 1000 * k as u64);
    }
}

/// A task's value is dropped once, when its closure returns (before its join sees the
/// outcome), and a task that never touched the key makes none.
#[test]
fn values_drop_when_the_task_ends() {
    let (rt, cpus) = rt2();
    let drops = Arc::new(AtomicUsize::new(0));
    let (d, d2) = (drops.clone(), drops.clone());
    let h = on(&rt, cpus[0], move || {
        TRACK.with(|t| *t.0.lock().unwrap() = Some(d));
        task::yield_now();
        TRACK.with(|t| assert!(t.0.lock().unwrap().is_some()));
        d2.load(Ordering::SeqCst)
    });
    assert_eq!(h.join().unwrap(), 0, "dropped while the task ran");
    assert_eq!(
        drops.load(Ordering::SeqCst),
        1,
        "the task's value was not dropped once"
    );
    on(&rt, cpus[1 % cpus.len()], || ()).join().unwrap();
    assert_eq!(drops.load(Ordering::SeqCst), 1);
}

/// A task-local whose counter is set after it is made.
struct Late(std::sync::Mutex<Option<Arc<AtomicUsize>>>);

impl Drop for Late {
    fn drop(&mut self) {
        if let Some(c) = self.0.lock().unwrap().take() {
            c.fetch_add(1, Ordering::SeqCst);
        }
    }
}

lagom::task_local! {
    static TRACK: Late = Late(std::sync::Mutex::new(None));
}

#[test]
fn outside_a_task() {
    assert!(COUNT.try_with(Cell::get).is_err());
    let r = std::panic::catch_unwind(|| COUNT.with(Cell::get));
    let msg = r.unwrap_err();
    let msg = msg.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(
        msg.contains("COUNT") && msg.contains("outside a lagom task"),
        "{msg}"
    );
    // block_on's closure is a task.
    let (rt, _) = rt2();
    assert_eq!(rt.block_on(|| COUNT.with(|c| c.get() + 1)), 1);
}

/// A task that panics drops its values while it unwinds, before its join sees the panic.
#[test]
fn values_drop_when_the_task_panics() {
    let (rt, cpus) = rt2();
    let drops = Arc::new(AtomicUsize::new(0));
    let d = drops.clone();
    let h = on(&rt, cpus[0], move || {
        TRACK.with(|t| *t.0.lock().unwrap() = Some(d));
        panic!("a task-local's owner panics");
    });
    assert!(h.join().is_err());
    assert_eq!(drops.load(Ordering::SeqCst), 1);
}
