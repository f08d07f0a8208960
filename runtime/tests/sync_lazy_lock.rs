//! `lagom::sync::LazyLock` against std's own tests for `std::sync::LazyLock` (adapted:
//! lagom's types, helpers spawned as tasks or threads by `sync_util::spawn`; `force_mut`,
//! unstable in std, through the stable `DerefMut`; the `LazyCell` tests left out), each run
//! on plain threads and in tasks on one worker and on two (`std_test!`); then a task waiting
//! for another task's blocking initialiser on one worker.
//!
//! Not under loom: the values live in `static`s, as std's tests have them, and loom's
//! atomics cannot be built in a constant.
#![cfg(not(loom))]

mod sync_util;

use std::panic;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};

use lagom::sync::mpsc::channel;
use lagom::sync::{LazyLock, Mutex, OnceLock};
use sync_util::{spawn, yield_now};

fn spawn_and_wait<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> R {
    spawn(f).join().unwrap()
}

std_test! {
    fn sync_lazy_new() {
        static CALLED: AtomicUsize = AtomicUsize::new(0);
        static SYNC_LAZY: LazyLock<i32> = LazyLock::new(|| {
            CALLED.fetch_add(1, SeqCst);
            92
        });

        assert_eq!(CALLED.load(SeqCst), 0);
        spawn_and_wait(|| {
            let y = *SYNC_LAZY - 30;
            assert_eq!(y, 62);
            assert_eq!(CALLED.load(SeqCst), 1);
        });
        let y = *SYNC_LAZY - 30;
        assert_eq!(y, 62);
        assert_eq!(CALLED.load(SeqCst), 1);
    }
}

std_test! {
    fn sync_lazy_default() {
        static CALLED: AtomicUsize = AtomicUsize::new(0);
        struct Foo(u8);
        impl Default for Foo {
            fn default() -> Self {
                CALLED.fetch_add(1, SeqCst);
                Foo(42)
            }
        }

        let lazy: LazyLock<Mutex<Foo>> = <_>::default();
        assert_eq!(CALLED.load(SeqCst), 0);
        assert_eq!(lazy.lock().unwrap().0, 42);
        assert_eq!(CALLED.load(SeqCst), 1);
        lazy.lock().unwrap().0 = 21;
        assert_eq!(lazy.lock().unwrap().0, 21);
        assert_eq!(CALLED.load(SeqCst), 1);
    }
}

std_test! {
    fn static_sync_lazy() {
        static XS: LazyLock<Vec<i32>> = LazyLock::new(|| {
            vec![1, 2, 3]
        });
        spawn_and_wait(|| assert_eq!(&*XS, &vec![1, 2, 3]));
        assert_eq!(&*XS, &vec![1, 2, 3]);
    }
}

std_test! {
    fn static_sync_lazy_via_fn() {
        fn xs() -> &'static Vec<i32> {
            static XS: OnceLock<Vec<i32>> = OnceLock::new();
            XS.get_or_init(|| {
                vec![1, 2, 3]
            })
        }
        assert_eq!(xs(), &vec![1, 2, 3]);
    }
}

std_test! {
    /// std's `lazy_type_inference` (for `LazyCell`), on `LazyLock`: `T` from the closure.
    fn lazy_type_inference() {
        let l = LazyLock::new(|| ());
        let () = *l;
    }
}

std_test! {
    fn is_sync_send() {
        fn assert_traits<T: Send + Sync>() {}
        assert_traits::<LazyLock<String>>();
    }
}

std_test! {
    /// std's `lazy_force_mut`, through `DerefMut` (std's `force_mut` is unstable).
    fn lazy_deref_mut() {
        let s = "abc".to_owned();
        let mut lazy = LazyLock::new(move || s);
        let _ = &mut *lazy;
        let p: &mut String = &mut lazy;
        p.clear();
        assert_eq!(*lazy, "");
        lazy.push('x');
        assert_eq!(LazyLock::force(&lazy), "x");
    }
}

std_test! {
    /// std's `lazy_poisoning` (for `LazyCell`), on `LazyLock`: every access after a
    /// panicking initialiser panics.
    fn lazy_poisoning() {
        let x: LazyLock<String> = LazyLock::new(|| panic!("kaboom"));
        for _ in 0..2 {
            let res = panic::catch_unwind(panic::AssertUnwindSafe(|| x.len()));
            assert!(res.is_err());
        }
    }
}

std_test! {
    #[should_panic(expected = "LazyLock instance has previously been poisoned")]
    fn lazy_lock_deref_panic() {
        let lazy: LazyLock<String> = LazyLock::new(|| panic!("initialization failed"));
        // The first access panics in the initialiser...
        let _ = panic::catch_unwind(panic::AssertUnwindSafe(|| {
            let _ = &*lazy;
        }));
        // ...the second with std's message for a poisoned LazyLock.
        let _ = &*lazy;
    }
}

std_test! {
    #[should_panic(expected = "LazyLock instance has previously been poisoned")]
    fn lazy_lock_deref_mut_panic() {
        let mut lazy: LazyLock<String> = LazyLock::new(|| panic!("initialization failed"));
        let _ = panic::catch_unwind(panic::AssertUnwindSafe(|| {
            let _ = &mut *lazy;
        }));
        let _ = &*lazy;
    }
}

std_test! {
    #[should_panic(expected = "custom panic message from closure")]
    fn lazy_lock_preserves_closure_panic_message() {
        let lazy: LazyLock<String> = LazyLock::new(|| panic!("custom panic message from closure"));
        let _ = &*lazy;
    }
}

// What lagom adds.

std_test! {
    /// Tasks dereference a `LazyLock` whose initialiser (another task's) blocks on a message
    /// sent only after they are queued: on one worker, std's would block the worker.
    fn waiters_let_a_blocking_initialiser_finish() {
        type Slot<T> = Mutex<Option<T>>;
        static GO: Slot<lagom::sync::mpsc::Receiver<u32>> = Mutex::new(None);
        static STARTED: Slot<lagom::sync::mpsc::Sender<()>> = Mutex::new(None);
        static VALUE: LazyLock<u32> = LazyLock::new(|| {
            let started = STARTED.lock().unwrap().take().unwrap();
            started.send(()).unwrap();
            let go = GO.lock().unwrap().take().unwrap();
            go.recv().unwrap()
        });
        let (go_tx, go_rx) = channel();
        let (started_tx, started_rx) = channel();
        *GO.lock().unwrap() = Some(go_rx);
        *STARTED.lock().unwrap() = Some(started_tx);
        let first = spawn(|| *VALUE);
        started_rx.recv().unwrap();
        let others: Vec<_> = (0..3).map(|_| spawn(|| *VALUE)).collect();
        for _ in 0..10 {
            yield_now();
        }
        go_tx.send(9).unwrap();
        assert_eq!(first.join().unwrap(), 9);
        for o in others {
            assert_eq!(o.join().unwrap(), 9);
        }
        assert_eq!(format!("{VALUE:?}"), "LazyLock(9)");
    }
}

#[test]
fn debug_before_init() {
    let l: LazyLock<u8> = LazyLock::new(|| 1);
    assert_eq!(format!("{l:?}"), "LazyLock(<uninit>)");
}
