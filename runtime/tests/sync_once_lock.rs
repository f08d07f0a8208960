//! `lagom::sync::OnceLock` against std's own tests for `std::sync::OnceLock` (adapted:
//! lagom's types, helpers spawned as tasks or threads by `sync_util::spawn`), each run on
//! plain threads and in tasks on one worker and on two (`std_test!`); std's tests of its
//! unstable API (`get_or_try_init`) are left out, their panic half kept for `get_or_init`.
//! Then what lagom adds: the deadlock std's `OnceLock` has in tasks on one worker, `wait`,
//! `take`, a reentrant initialiser.
//!
//! Not under loom: the cells live in `static`s, as std's tests have them, and loom's atomics
//! cannot be built in a constant.
#![cfg(not(loom))]

mod sync_util;

use std::panic;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};

use lagom::sync::OnceLock;
use lagom::sync::mpsc::channel;
use sync_util::{spawn, yield_now};

fn spawn_and_wait<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> R {
    spawn(f).join().unwrap()
}

std_test! {
    fn sync_once_cell() {
        static ONCE_CELL: OnceLock<i32> = OnceLock::new();
        assert!(ONCE_CELL.get().is_none());
        spawn_and_wait(|| {
            ONCE_CELL.get_or_init(|| 92);
            assert_eq!(ONCE_CELL.get(), Some(&92));
        });
        ONCE_CELL.get_or_init(|| panic!("Kaboom!"));
        assert_eq!(ONCE_CELL.get(), Some(&92));
    }
}

std_test! {
    fn sync_once_cell_get_mut() {
        let mut c = OnceLock::new();
        assert!(c.get_mut().is_none());
        c.set(90).unwrap();
        *c.get_mut().unwrap() += 2;
        assert_eq!(c.get_mut(), Some(&mut 92));
    }
}

std_test! {
    fn sync_once_cell_drop() {
        static DROP_CNT: AtomicUsize = AtomicUsize::new(0);
        struct Dropper;
        impl Drop for Dropper {
            fn drop(&mut self) {
                DROP_CNT.fetch_add(1, SeqCst);
            }
        }

        let x = OnceLock::new();
        spawn_and_wait(move || {
            x.get_or_init(|| Dropper);
            assert_eq!(DROP_CNT.load(SeqCst), 0);
            drop(x);
        });
        assert_eq!(DROP_CNT.load(SeqCst), 1);
    }
}

std_test! {
    fn sync_once_cell_drop_empty() {
        let x = OnceLock::<String>::new();
        drop(x);
    }
}

std_test! {
    fn clone() {
        let s = OnceLock::new();
        let c = s.clone();
        assert!(c.get().is_none());
        s.set("hello".to_string()).unwrap();
        let c = s.clone();
        assert_eq!(c.get().map(String::as_str), Some("hello"));
    }
}

std_test! {
    /// std's `get_or_try_init` test, its `get_or_init` half: a panicking initialiser leaves
    /// the cell empty, and the next one runs.
    fn get_or_init_after_a_panic() {
        let cell: OnceLock<String> = OnceLock::new();
        assert!(cell.get().is_none());
        let res = panic::catch_unwind(|| cell.get_or_init(|| panic!()));
        assert!(res.is_err());
        assert!(cell.get().is_none());
        assert_eq!(cell.get_or_init(|| "hello".to_string()), "hello");
        assert_eq!(cell.get(), Some(&"hello".to_string()));
    }
}

std_test! {
    fn from_impl() {
        assert_eq!(OnceLock::from("value").get(), Some(&"value"));
        assert_ne!(OnceLock::from("foo").get(), Some(&"bar"));
    }
}

std_test! {
    fn partialeq_impl() {
        assert!(OnceLock::from("value") == OnceLock::from("value"));
        assert!(OnceLock::from("foo") != OnceLock::from("bar"));
        assert!(OnceLock::<String>::new() == OnceLock::new());
        assert!(OnceLock::<String>::new() != OnceLock::from("value".to_owned()));
    }
}

std_test! {
    fn into_inner() {
        let cell: OnceLock<String> = OnceLock::new();
        assert_eq!(cell.into_inner(), None);
        let cell = OnceLock::new();
        cell.set("hello".to_string()).unwrap();
        assert_eq!(cell.into_inner(), Some("hello".to_string()));
    }
}

std_test! {
    fn is_sync_send() {
        fn assert_traits<T: Send + Sync>() {}
        assert_traits::<OnceLock<String>>();
    }
}

std_test! {
    fn eval_once_macro() {
        macro_rules! eval_once {
            (|| -> $ty:ty { $($body:tt)* }) => {{
                static ONCE_CELL: OnceLock<$ty> = OnceLock::new();
                fn init() -> $ty {
                    $($body)*
                }
                ONCE_CELL.get_or_init(init)
            }};
        }

        let fib: &'static Vec<i32> = eval_once! {
            || -> Vec<i32> {
                let mut res = vec![1, 1];
                for i in 0..10 {
                    let next = res[i] + res[i + 1];
                    res.push(next);
                }
                res
            }
        };
        assert_eq!(fib[5], 8);
    }
}

std_test! {
    fn sync_once_cell_does_not_leak_partially_constructed_boxes() {
        static ONCE_CELL: OnceLock<String> = OnceLock::new();
        let n_readers = 10;
        let n_writers = 3;
        const MSG: &str = "Hello, World";

        let (tx, rx) = channel();
        let mut readers = Vec::new();
        for _ in 0..n_readers {
            let tx = tx.clone();
            readers.push(spawn(move || {
                loop {
                    if let Some(msg) = ONCE_CELL.get() {
                        tx.send(msg).unwrap();
                        break;
                    }
                    // std's readers spin; a task that spins keeps its worker (and, on one
                    // worker, the writers) from running.
                    yield_now();
                }
            }));
        }
        let writers: Vec<_> = (0..n_writers)
            .map(|_| spawn(move || drop(ONCE_CELL.set(MSG.to_owned()))))
            .collect();
        for _ in 0..n_readers {
            let msg = rx.recv().unwrap();
            assert_eq!(msg, MSG);
        }
        for h in readers.into_iter().chain(writers) {
            h.join().unwrap();
        }
    }
}

std_test! {
    fn dropck() {
        let cell = OnceLock::new();
        {
            let s = String::new();
            cell.set(&s).unwrap();
        }
    }
}

// What lagom adds.

std_test! {
    /// The deadlock of std's `OnceLock` in tasks: a task waits in `get_or_init` while another
    /// task's initialiser blocks, here on a message that a third task sends only after the
    /// waiter is queued. On one worker, std's would block the worker in the waiter, and the
    /// sender and the initialiser would never run again.
    fn waiter_lets_a_blocking_initialiser_finish() {
        static CELL: OnceLock<u64> = OnceLock::new();
        let (started_tx, started_rx) = channel::<()>();
        let (go_tx, go_rx) = channel::<u64>();
        let init = spawn(move || {
            *CELL.get_or_init(|| {
                started_tx.send(()).unwrap();
                go_rx.recv().unwrap()
            })
        });
        started_rx.recv().unwrap();
        let waiters: Vec<_> = (0..3)
            .map(|_| spawn(|| *CELL.get_or_init(|| panic!("a second initialiser ran"))))
            .collect();
        let setter = spawn(|| CELL.set(1).unwrap_err());
        let reader = spawn(|| *CELL.wait());
        for _ in 0..10 {
            yield_now();
        }
        assert_eq!(CELL.get(), None, "the value before the initialiser returned");
        go_tx.send(42).unwrap();
        assert_eq!(init.join().unwrap(), 42);
        for w in waiters {
            assert_eq!(w.join().unwrap(), 42);
        }
        assert_eq!(setter.join().unwrap(), 1, "set handed its value back");
        assert_eq!(reader.join().unwrap(), 42);
    }
}

std_test! {
    /// std's `OnceLock::wait` example: a helper sets, the caller waits.
    fn wait_for_set() {
        let value = Arc::new(OnceLock::new());
        let v = Arc::clone(&value);
        let h = spawn(move || v.set(1 + 1));
        assert_eq!(value.wait(), &2);
        assert_eq!(h.join().unwrap(), Ok(()));
    }
}

std_test! {
    fn take_empties_the_cell() {
        let mut cell: OnceLock<String> = OnceLock::new();
        assert_eq!(cell.take(), None);
        cell.set("hello".to_string()).unwrap();
        assert_eq!(cell.take(), Some("hello".to_string()));
        assert_eq!(cell.get(), None);
        // Empty again: the next initialiser runs.
        assert_eq!(cell.get_or_init(|| "again".to_string()), "again");
        assert_eq!(format!("{cell:?}"), "OnceLock(\"again\")");
        assert_eq!(format!("{:?}", OnceLock::<u8>::new()), "OnceLock(<uninit>)");
    }
}

std_test! {
    /// An initialiser that reads its own cell panics, saying so (std's deadlocks); the cell
    /// stays empty and usable.
    fn reentrant_initialiser_panics() {
        static CELL: OnceLock<u32> = OnceLock::new();
        let r = panic::catch_unwind(|| *CELL.get_or_init(|| *CELL.get_or_init(|| 1) + 1));
        let msg = r.unwrap_err();
        let msg = msg.downcast_ref::<&str>().expect("a literal message");
        assert!(msg.contains("from inside its own initialiser"), "{msg}");
        assert_eq!(CELL.get(), None);
        assert_eq!(*CELL.get_or_init(|| 5), 5);
    }
}
