//! `lagom::sync`'s types against std's, at compile time: the same auto traits (`Send`,
//! `Sync`, `UnwindSafe`, `RefUnwindSafe`, `Unpin`) for every type std has too, each with
//! type arguments that have and lack each of them (so a bound on `T` that differs from std's
//! shows); the same variance where std's is covariant (where std's is invariant, the
//! `compile_fail` examples of the `lagom::sync` module's hidden `Invariance` item check
//! lagom's is too); the `const` constructors in `static`s; the re-exports of `Arc`, `Weak`
//! and `atomic`. A difference fails the build of this test, naming the type and the trait.
//!
//! Not under loom, where the constructors cannot be `const`.
#![cfg(not(loom))]
// The checks are the items; their constants and functions are never used.
#![allow(dead_code)]

use std::cell::Cell;
use std::marker::PhantomPinned;
use std::panic::{RefUnwindSafe, UnwindSafe};
use std::rc::Rc;

use impls::impls;

/// Fails the build unless `$lagom` and `$std` agree on every auto trait (or on the traits
/// listed after `;`).
macro_rules! same {
    ($lagom:ty, $std:ty) => {
        same!(stringify!($lagom), $lagom, $std);
    };
    ($what:expr, $lagom:ty, $std:ty) => {
        same!($what, $lagom, $std; Send Sync UnwindSafe RefUnwindSafe Unpin);
    };
    ($what:expr, $lagom:ty, $std:ty; $($tr:ident)*) => {
        const _: () = {
            $(
                assert!(
                    impls!($lagom: $tr) == impls!($std: $tr),
                    concat!($what, ": ", stringify!($tr), " is not std's")
                );
            )*
        };
    };
}

/// `same!` for a type of one parameter `T` (`$lagom` and `$std` written with `T`), over
/// arguments that between them have and lack each auto trait; `[traits]` after the name
/// limits the comparison to those.
macro_rules! same_for_each_t {
    ($($name:ident $([$($tr:ident)*])?: $lagom:ty, $std:ty;)*) => {$(
        mod $name {
            use super::*;
            type L<T> = $lagom;
            type S<T> = $std;
            same_for_each_t!(@args $name, L, S, [$($($tr)*)?]);
        }
    )*};
    (@args $name:ident, $l:ident, $s:ident, [$($tr:ident)*]) => {
        same_for_each_t!(@one $name, $l, $s, i32, [$($tr)*]);
        // Send, not Sync; UnwindSafe, not RefUnwindSafe.
        same_for_each_t!(@one $name, $l, $s, Cell<i32>, [$($tr)*]);
        // Neither Send nor Sync.
        same_for_each_t!(@one $name, $l, $s, Rc<i32>, [$($tr)*]);
        same_for_each_t!(@one $name, $l, $s, *const i32, [$($tr)*]);
        // Sync, not Send.
        same_for_each_t!(@one $name, $l, $s, std::sync::MutexGuard<'static, i32>, [$($tr)*]);
        // Not UnwindSafe.
        same_for_each_t!(@one $name, $l, $s, &'static mut i32, [$($tr)*]);
        // Not Unpin.
        same_for_each_t!(@one $name, $l, $s, PhantomPinned, [$($tr)*]);
    };
    (@one $name:ident, $l:ident, $s:ident, $t:ty, []) => {
        same!(concat!(stringify!($name), "<", stringify!($t), ">"), $l<$t>, $s<$t>);
    };
    (@one $name:ident, $l:ident, $s:ident, $t:ty, [$($tr:ident)+]) => {
        same!(concat!(stringify!($name), "<", stringify!($t), ">"), $l<$t>, $s<$t>; $($tr)+);
    };
}

// The types without parameters.
same!(lagom::sync::Condvar, std::sync::Condvar);
same!(lagom::sync::WaitTimeoutResult, std::sync::WaitTimeoutResult);
same!(lagom::sync::Barrier, std::sync::Barrier);
same!(lagom::sync::BarrierWaitResult, std::sync::BarrierWaitResult);
same!(lagom::sync::Once, std::sync::Once);
same!(lagom::sync::OnceState, std::sync::OnceState);
same!(lagom::sync::mpsc::RecvError, std::sync::mpsc::RecvError);
same!(
    lagom::sync::mpsc::TryRecvError,
    std::sync::mpsc::TryRecvError
);
same!(
    lagom::sync::mpsc::RecvTimeoutError,
    std::sync::mpsc::RecvTimeoutError
);

// Unsized data.
same!(lagom::sync::Mutex<[u8]>, std::sync::Mutex<[u8]>);
same!(lagom::sync::RwLock<[u8]>, std::sync::RwLock<[u8]>);
same!(
    lagom::sync::Mutex<dyn std::any::Any>,
    std::sync::Mutex<dyn std::any::Any>
);
same!(
    lagom::sync::MutexGuard<'static, [u8]>,
    std::sync::MutexGuard<'static, [u8]>
);
same!(
    lagom::sync::RwLockReadGuard<'static, [u8]>,
    std::sync::RwLockReadGuard<'static, [u8]>
);

same_for_each_t! {
    mutex: lagom::sync::Mutex<T>, std::sync::Mutex<T>;
    mutex_guard: lagom::sync::MutexGuard<'static, T>, std::sync::MutexGuard<'static, T>;
    rwlock: lagom::sync::RwLock<T>, std::sync::RwLock<T>;
    rwlock_read_guard: lagom::sync::RwLockReadGuard<'static, T>, std::sync::RwLockReadGuard<'static, T>;
    rwlock_write_guard: lagom::sync::RwLockWriteGuard<'static, T>, std::sync::RwLockWriteGuard<'static, T>;
    once_lock: lagom::sync::OnceLock<T>, std::sync::OnceLock<T>;
    lazy_lock: lagom::sync::LazyLock<T>, std::sync::LazyLock<T>;
    lazy_lock_f: lagom::sync::LazyLock<i32, T>, std::sync::LazyLock<i32, T>;
    poison_error: lagom::sync::PoisonError<T>, std::sync::PoisonError<T>;
    try_lock_error: lagom::sync::TryLockError<T>, std::sync::TryLockError<T>;
    lock_result: lagom::sync::LockResult<T>, std::sync::LockResult<T>;
    sender: lagom::sync::mpsc::Sender<T>, std::sync::mpsc::Sender<T>;
    sync_sender: lagom::sync::mpsc::SyncSender<T>, std::sync::mpsc::SyncSender<T>;
    // lagom's receivers are multi-consumer, `Sync` where std's are not (below).
    receiver [Send UnwindSafe RefUnwindSafe Unpin]:
        lagom::sync::mpsc::Receiver<T>, std::sync::mpsc::Receiver<T>;
    iter [UnwindSafe RefUnwindSafe Unpin]:
        lagom::sync::mpsc::Iter<'static, T>, std::sync::mpsc::Iter<'static, T>;
    try_iter [UnwindSafe RefUnwindSafe Unpin]:
        lagom::sync::mpsc::TryIter<'static, T>, std::sync::mpsc::TryIter<'static, T>;
    into_iter [Send UnwindSafe RefUnwindSafe Unpin]:
        lagom::sync::mpsc::IntoIter<T>, std::sync::mpsc::IntoIter<T>;
    send_error: lagom::sync::mpsc::SendError<T>, std::sync::mpsc::SendError<T>;
    try_send_error: lagom::sync::mpsc::TrySendError<T>, std::sync::mpsc::TrySendError<T>;
}

// The one difference, by design (the `sync` module's parity table): lagom's `Receiver` is
// `Clone` and `Sync` (several receivers share a channel), so it, and what borrows it, may be
// shared between threads wherever its messages may be sent, as its `Sender` may.
const _: () = {
    use lagom::sync::mpsc::{IntoIter, Iter, Receiver, TryIter};
    assert!(impls!(Receiver<i32>: Sync) && impls!(Receiver<Cell<i32>>: Sync));
    assert!(!impls!(Receiver<Rc<i32>>: Sync) && !impls!(Receiver<*const i32>: Sync));
    assert!(impls!(Iter<'static, Cell<i32>>: Send & Sync));
    assert!(impls!(TryIter<'static, Cell<i32>>: Send & Sync));
    assert!(impls!(IntoIter<Cell<i32>>: Sync));
    assert!(!impls!(Iter<'static, Rc<i32>>: Send) && !impls!(Iter<'static, Rc<i32>>: Sync));
    assert!(!impls!(std::sync::mpsc::Receiver<i32>: Sync));
};

// lagom's own types, which std does not have: what a user of a blocking primitive expects.
const _: () = {
    assert!(impls!(lagom::sync::Semaphore: Send & Sync & UnwindSafe & RefUnwindSafe & Unpin));
    assert!(
        impls!(lagom::sync::SemaphorePermit<'static>: Send & Sync & UnwindSafe & RefUnwindSafe)
    );
};

// The re-exports are std's items themselves.
const _: fn(lagom::sync::Arc<u8>) -> std::sync::Arc<u8> = |a| a;
const _: fn(lagom::sync::Weak<u8>) -> std::sync::Weak<u8> = |w| w;
const _: fn(lagom::sync::atomic::AtomicU64) -> std::sync::atomic::AtomicU64 = |a| a;

// Covariance where std's is covariant (std's own test `test_read_guard_covariance` is the
// read guard's; `sync_rwlock.rs` runs it).
fn read_guard_t<'a, 'b>(
    g: lagom::sync::RwLockReadGuard<'b, &'static ()>,
) -> lagom::sync::RwLockReadGuard<'b, &'a ()> {
    g
}
fn read_guard_lt<'a>(
    g: lagom::sync::RwLockReadGuard<'static, ()>,
) -> lagom::sync::RwLockReadGuard<'a, ()> {
    g
}
fn mutex_guard_lt<'a>(g: lagom::sync::MutexGuard<'static, ()>) -> lagom::sync::MutexGuard<'a, ()> {
    g
}
fn write_guard_lt<'a>(
    g: lagom::sync::RwLockWriteGuard<'static, ()>,
) -> lagom::sync::RwLockWriteGuard<'a, ()> {
    g
}
fn iter_lt<'a>(i: lagom::sync::mpsc::Iter<'static, ()>) -> lagom::sync::mpsc::Iter<'a, ()> {
    i
}
fn try_iter_lt<'a>(
    i: lagom::sync::mpsc::TryIter<'static, ()>,
) -> lagom::sync::mpsc::TryIter<'a, ()> {
    i
}
fn send_error<'a>(
    e: lagom::sync::mpsc::SendError<&'static ()>,
) -> lagom::sync::mpsc::SendError<&'a ()> {
    e
}
fn try_send_error<'a>(
    e: lagom::sync::mpsc::TrySendError<&'static ()>,
) -> lagom::sync::mpsc::TrySendError<&'a ()> {
    e
}
fn poison_error<'a>(e: lagom::sync::PoisonError<&'static ()>) -> lagom::sync::PoisonError<&'a ()> {
    e
}
fn try_lock_error<'a>(
    e: lagom::sync::TryLockError<&'static ()>,
) -> lagom::sync::TryLockError<&'a ()> {
    e
}

// `const fn` constructors: every primitive in a `static`, as with std's.
static MUTEX: lagom::sync::Mutex<Vec<u32>> = lagom::sync::Mutex::new(Vec::new());
static RWLOCK: lagom::sync::RwLock<u32> = lagom::sync::RwLock::new(0);
static CONDVAR: lagom::sync::Condvar = lagom::sync::Condvar::new();
static BARRIER: lagom::sync::Barrier = lagom::sync::Barrier::new(1);
static ONCE: lagom::sync::Once = lagom::sync::Once::new();
static ONCE_LOCK: lagom::sync::OnceLock<String> = lagom::sync::OnceLock::new();
static LAZY: lagom::sync::LazyLock<String> = lagom::sync::LazyLock::new(|| "lazy".into());
static SEMAPHORE: lagom::sync::Semaphore = lagom::sync::Semaphore::new(1);

/// The statics work, from a task of a one-worker runtime and from this thread.
#[test]
fn statics_in_tasks_and_threads() {
    fn use_them() {
        MUTEX.lock().unwrap().push(1);
        *RWLOCK.write().unwrap() += 1;
        let g = MUTEX.lock().unwrap();
        let (g, r) = CONDVAR
            .wait_timeout(g, std::time::Duration::from_millis(1))
            .unwrap();
        assert!(r.timed_out());
        drop(g);
        CONDVAR.notify_all();
        assert!(BARRIER.wait().is_leader());
        ONCE.call_once(|| {});
        ONCE_LOCK.get_or_init(|| "cell".into());
        assert_eq!(*LAZY, "lazy");
        drop(SEMAPHORE.acquire());
    }
    let cpu = lagom::Runtime::builder().build().unwrap().worker_cpus()[0];
    let rt = lagom::Runtime::builder()
        .worker_cpus([cpu])
        .build()
        .unwrap();
    rt.spawn(use_them).join().unwrap();
    use_them();
    assert_eq!(*MUTEX.lock().unwrap(), [1, 1]);
    assert_eq!(*RWLOCK.read().unwrap(), 2);
    assert!(ONCE.is_completed());
    assert_eq!(ONCE_LOCK.get().map(String::as_str), Some("cell"));
}

/// One import for both, as with `std::sync`.
#[test]
fn arc_and_mutex_from_one_import() {
    use lagom::sync::atomic::{AtomicUsize, Ordering};
    use lagom::sync::{Arc, Mutex};
    let m = Arc::new(Mutex::new(AtomicUsize::new(1)));
    let w = Arc::downgrade(&m);
    m.lock().unwrap().fetch_add(1, Ordering::Relaxed);
    let back = w.upgrade().unwrap();
    assert_eq!(back.lock().unwrap().load(Ordering::Relaxed), 2);
}
