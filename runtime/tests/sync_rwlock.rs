//! `lagom::sync::RwLock` against std's own tests for `std::sync::RwLock` (adapted: lagom's
//! types, helpers spawned as tasks or threads by `sync_util::spawn`; the tests of std's
//! unstable API — mapped guards, `get_cloned`, `set`, `replace`, `nonpoison` — left out),
//! each run on plain threads and in tasks on one worker and on two (`std_test!`): the
//! `downgrade` tests, the read guard's covariance, and the basics around them. What lagom's
//! downgrade does with its queue (the readers at the front come in, a writer stays) is a
//! unit test of `sync/rwlock.rs`, which can wait until its waiters are queued.
//!
//! Not under loom (a `static` lock below, and these tests run the real runtime).
#![cfg(not(loom))]

mod sync_util;

use std::panic::{self, AssertUnwindSafe};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use lagom::sync::mpsc::channel;
use lagom::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard, TryLockError};
use sync_util::{spawn, yield_now};

#[derive(Eq, PartialEq, Debug)]
struct NonCopy(i32);

std_test! {
    fn smoke() {
        let l = RwLock::new(());
        drop(l.read().unwrap());
        drop(l.write().unwrap());
        drop((l.read().unwrap(), l.read().unwrap()));
        drop(l.write().unwrap());
    }
}

std_test! {
    /// std's `frob`, with a small generator of its own in place of `rand`.
    fn frob() {
        const N: u64 = 10;
        const M: usize = 1000;
        let r = Arc::new(RwLock::new(()));
        let (tx, rx) = channel::<()>();
        for seed in 0..N {
            let tx = tx.clone();
            let r = r.clone();
            spawn(move || {
                let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
                for _ in 0..M {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    if x % N == 0 {
                        drop(r.write().unwrap());
                    } else {
                        drop(r.read().unwrap());
                    }
                }
                drop(tx);
            });
        }
        drop(tx);
        let _ = rx.recv();
    }
}

std_test! {
    fn test_rw_arc() {
        let arc = Arc::new(RwLock::new(0));
        let arc2 = arc.clone();
        let (tx, rx) = channel();
        spawn(move || {
            let mut lock = arc2.write().unwrap();
            for _ in 0..10 {
                let tmp = *lock;
                *lock = -1;
                yield_now();
                *lock = tmp + 1;
            }
            tx.send(()).unwrap();
        });
        // Readers try to catch the writer in the act.
        let children: Vec<_> = (0..5)
            .map(|_| {
                let arc3 = arc.clone();
                spawn(move || {
                    let lock = arc3.read().unwrap();
                    assert!(*lock >= 0);
                })
            })
            .collect();
        for r in children {
            assert!(r.join().is_ok());
        }
        rx.recv().unwrap();
        assert_eq!(*arc.read().unwrap(), 10);
    }
}

std_test! {
    fn test_rw_arc_access_in_unwind() {
        let arc = Arc::new(RwLock::new(1));
        let arc2 = arc.clone();
        let _ = spawn(move || {
            struct Unwinder {
                i: Arc<RwLock<isize>>,
            }
            impl Drop for Unwinder {
                fn drop(&mut self) {
                    *self.i.write().unwrap() += 1;
                }
            }
            let _u = Unwinder { i: arc2 };
            panic!();
        })
        .join();
        assert_eq!(*arc.read().unwrap(), 2);
    }
}

std_test! {
    fn test_rwlock_unsized() {
        let rw: &RwLock<[i32]> = &RwLock::new([1, 2, 3]);
        {
            let b = &mut *rw.write().unwrap();
            b[0] = 4;
            b[2] = 5;
        }
        let comp: &[i32] = &[4, 2, 5];
        assert_eq!(&*rw.read().unwrap(), comp);
    }
}

std_test! {
    fn test_into_inner_and_get_mut() {
        let mut m = RwLock::new(NonCopy(10));
        *m.get_mut().unwrap() = NonCopy(20);
        assert_eq!(m.into_inner().unwrap(), NonCopy(20));
    }
}

std_test! {
    fn test_rw_arc_poison_and_not() {
        // A writer's panic poisons, for readers and writers.
        let arc = Arc::new(RwLock::new(1));
        let arc2 = arc.clone();
        let _ = spawn(move || {
            let _lock = arc2.write().unwrap();
            panic!();
        })
        .join();
        assert!(arc.read().is_err());
        assert!(arc.write().is_err());
        assert!(arc.is_poisoned());
        // A reader's does not.
        let arc = Arc::new(RwLock::new(1));
        let arc2 = arc.clone();
        let _ = spawn(move || {
            let _lock = arc2.read().unwrap();
            panic!();
        })
        .join();
        assert_eq!(*arc.write().unwrap(), 1);
    }
}

std_test! {
    fn test_rwlock_try_write() {
        let lock = RwLock::new(0isize);
        let read_guard = lock.read().unwrap();
        match lock.try_write() {
            Err(TryLockError::WouldBlock) => (),
            Ok(_) => panic!("try_write should not succeed while read_guard is in scope"),
            Err(_) => panic!("unexpected error"),
        }
        drop(read_guard);
    }
}

std_test! {
    fn test_read_guard_covariance() {
        fn do_stuff<'a>(_: RwLockReadGuard<'_, &'a i32>, _: &'a i32) {}
        let j: i32 = 5;
        let lock = RwLock::new(&j);
        {
            let i = 6;
            do_stuff(lock.read().unwrap(), &i);
        }
        drop(lock);
    }
}

std_test! {
    fn test_downgrade_basic() {
        let r = RwLock::new(());
        let write_guard = r.write().unwrap();
        let _read_guard = RwLockWriteGuard::downgrade(write_guard);
    }
}

std_test! {
    fn test_downgrade_observe() {
        const W: usize = 20;
        const N: usize = 100;
        // W writers each increment N times, checking that the value they wrote has not
        // changed once downgraded.
        let rw = Arc::new(RwLock::new(0));
        let handles: Vec<_> = (0..W)
            .map(|_| {
                let rw = rw.clone();
                spawn(move || {
                    for _ in 0..N {
                        let mut write_guard = rw.write().unwrap();
                        *write_guard += 1;
                        let cur_val = *write_guard;
                        let read_guard = RwLockWriteGuard::downgrade(write_guard);
                        assert_eq!(cur_val, *read_guard);
                    }
                })
            })
            .collect();
        for handle in handles {
            handle.join().unwrap();
        }
        assert_eq!(*rw.read().unwrap(), W * N);
    }
}

std_test! {
    /// As soon as a write hold is downgraded, no writer may take the lock before the
    /// downgrader's read: it must see its own write.
    fn test_downgrade_atomic() {
        const NEW_VALUE: i32 = -1;
        const W: usize = 20;
        let rwlock = Arc::new(RwLock::new(0));
        let started = Arc::new(AtomicUsize::new(0));
        let mut main_write_guard = rwlock.write().unwrap();
        // The evil writers, each of which will increment the value once it gets the lock.
        let handles: Vec<_> = (0..W)
            .map(|_| {
                let (rwlock, started) = (rwlock.clone(), started.clone());
                spawn(move || {
                    started.fetch_add(1, Ordering::SeqCst);
                    *rwlock.write().unwrap() += 1;
                })
            })
            .collect();
        // std sleeps 42 ms so that they are asleep on the lock; here: until all have
        // started, then a little more (shorter only weakens the test, never fails it).
        while started.load(Ordering::SeqCst) < W {
            lagom::task::sleep(Duration::from_millis(1));
        }
        lagom::task::sleep(Duration::from_millis(5));
        *main_write_guard = NEW_VALUE;
        let main_read_guard = RwLockWriteGuard::downgrade(main_write_guard);
        assert_eq!(*main_read_guard, NEW_VALUE, "`downgrade` was not atomic");
        drop(main_read_guard);
        for handle in handles {
            handle.join().unwrap();
        }
        assert_eq!(*rwlock.read().unwrap(), W as i32 + NEW_VALUE);
    }
}

std_test! {
    /// std's doc example of `downgrade`: the writer waiting on the lock sees the value
    /// written before the downgrade, and only after the reader left.
    fn downgrade_doc_example() {
        let rw = Arc::new(RwLock::new(1));
        let mut main_write_guard = rw.write().unwrap();
        let rw_clone = rw.clone();
        let evil = spawn(move || {
            let mut evil_guard = rw_clone.write().unwrap();
            assert_eq!(*evil_guard, 2);
            *evil_guard = 3;
        });
        *main_write_guard = 2;
        let main_read_guard = RwLockWriteGuard::downgrade(main_write_guard);
        assert_eq!(*main_read_guard, 2, "`downgrade` was not atomic");
        drop(main_read_guard);
        evil.join().unwrap();
        assert_eq!(*rw.read().unwrap(), 3);
    }
}

std_test! {
    /// A downgrade while unwinding does not poison (as std's: only a write guard's drop
    /// does), and the reader it made releases the lock.
    fn downgrade_in_unwind_does_not_poison() {
        let lock = RwLock::new(0);
        let r = panic::catch_unwind(AssertUnwindSafe(|| {
            struct D<'a>(Option<RwLockWriteGuard<'a, i32>>);
            impl Drop for D<'_> {
                fn drop(&mut self) {
                    let g = self.0.take().unwrap();
                    assert_eq!(*RwLockWriteGuard::downgrade(g), 0);
                }
            }
            let _d = D(Some(lock.write().unwrap()));
            panic!("unwinding");
        }));
        assert!(r.is_err());
        assert!(!lock.is_poisoned());
        assert!(lock.try_write().is_ok());
    }
}
