//! `lagom::sync`: blocking primitives for tasks — [`Mutex`], [`RwLock`], [`Condvar`],
//! [`Barrier`], [`Once`], [`OnceLock`], [`LazyLock`], [`Semaphore`], channels ([`mpsc`],
//! [`oneshot`]) — with the names, signatures and semantics of `std::sync`, so code moves over
//! by changing an import; [`Arc`], [`Weak`] and [`atomic`] are re-exported as `std::sync`
//! has them, so `use lagom::sync::{Arc, Mutex};` is the one import.
//!
//! **Why not std's.** A `std::sync` primitive blocks the worker *thread*: every task of that
//! worker stops, including, often, the one that would release it — a pipeline of tasks
//! talking over `std::sync::mpsc` hangs, and a task waiting in `std::sync::OnceLock` for an
//! initialiser that another task of its worker runs never sees it finish. These block only
//! the calling *task*: its worker runs other tasks meanwhile. On a plain OS thread (outside
//! any runtime, `block_on`'s caller, a `spawn_blocking` closure) they block the thread, so
//! tasks and threads can share one channel, one mutex, one `OnceLock`.
//!
//! ## std parity
//!
//! Each stable item of `std::sync` and what lagom has for it. The constructors std makes
//! `const fn` are `const fn` here too (`static M: Mutex<Vec<u8>> = Mutex::new(Vec::new());`),
//! except under `cfg(loom)`, where the runtime is built on loom's atomics, which cannot be
//! built in a constant. Each type has std's auto traits (`Send`, `Sync`, `UnwindSafe`,
//! `RefUnwindSafe`, `Unpin`) and variance for the same parameters, but for one difference by
//! design (`mpsc::Receiver` is `Sync`, below); `runtime/tests/sync_traits.rs` checks them
//! against std's own at compile time, and the hidden `Invariance` item's `compile_fail`
//! examples that lagom's are invariant where std's are.
//!
//! | std | lagom | difference, and why |
//! |---|---|---|
//! | `Arc`, `Weak`, `atomic` | [`Arc`], [`Weak`], [`atomic`] | the same items (`alloc::sync`, `core::sync::atomic`), re-exported |
//! | `Mutex`, `MutexGuard` | [`Mutex`], [`MutexGuard`] | hands the lock to a waiter that was overtaken once (fair); std's never hands off |
//! | `RwLock`, `RwLockReadGuard`, `RwLockWriteGuard` (with `downgrade`) | [`RwLock`], [`RwLockReadGuard`], [`RwLockWriteGuard`] | writer-fair: readers queue behind a parked writer (std leaves the policy to the OS); a `downgrade` lets in the readers queued at the front with it |
//! | `Condvar`, `WaitTimeoutResult` | [`Condvar`], [`WaitTimeoutResult`] | a waiter cancelled by a shutdown unwinds without the mutex (below) |
//! | `Barrier`, `BarrierWaitResult` | [`Barrier`], [`BarrierWaitResult`] | a waiter cancelled by a shutdown counts as arrived |
//! | `Once`, `OnceState` | [`Once`], [`OnceState`] | an initialiser that waits for its own `Once` panics with a message saying so (std's deadlocks, "unspecified"); larger: a waiter queue and the runner's identity (64 bytes on x86_64) where std's has a futex word (4) |
//! | `OnceLock` | [`OnceLock`] | as `Once` (an initialiser that reads its own cell panics; larger); the value is an `Option<T>` (a discriminant more where `T` has no niche) where std's is a `MaybeUninit<T>` whose drop needs the unstable `#[may_dangle]` |
//! | `LazyLock` | [`LazyLock`] | as `Once` |
//! | `ONCE_INIT` (deprecated since 1.38) | none | `Once::new()` is `const` |
//! | `mpsc::{channel, sync_channel, Sender, SyncSender, Receiver, …}` | [`mpsc`] | `Receiver` is `Clone` and `Sync` (multi-consumer: several receivers share one channel), and so its `Iter` and `TryIter` are `Send` and `Sync`; `SyncSender::send_timeout` is stable; `recv_deadline` (unstable in std) takes either kind of `Instant`, below |
//! | `LockResult`, `PoisonError`, `TryLockError`, `TryLockResult` | the same | poisoning needs the `std` feature, which can see a panic |
//! | (none; tokio's `Semaphore`) | [`Semaphore`], [`SemaphorePermit`] | blocking, not async; `new` is `const` |
//! | (std's `oneshot` is unstable; tokio's) | [`oneshot`] | blocking, not async; tokio's shape (`&self` receives), with `recv_timeout` and `recv_deadline` |
//!
//! std's unstable items are not here (`Mutex::get_cloned`/`set`/`replace`, mapped guards,
//! `OnceLock::get_or_try_init`, `LazyLock::force_mut`/`get`, `ReentrantLock`, `mpmc`,
//! `nonpoison`, `Exclusive`), but `LazyLock`'s `DerefMut` (stable since 1.89) is.
//!
//! **Deadlines.** Timed waits take a `Duration` and run on the workers' timers inside
//! tasks. The APIs that take a deadline ([`mpsc::Receiver::recv_deadline`],
//! [`oneshot::Receiver::recv_deadline`], [`crate::task::sleep_until`]) take
//! `impl Into<lagom::time::Instant>`: with the `std` feature a `std::time::Instant`, as
//! std's, or lagom's own [`crate::time::Instant`]; without `std` (which has no
//! `std::time::Instant`) lagom's. Both are points on the monotonic clock, and a deadline
//! computed with either type is passed as it is: `rx.recv_deadline(Instant::now() + d)`
//! compiles with either `Instant` imported. (Being generic, the parameter cannot infer the
//! target of an `.into()`: pass the `Instant` itself.)
//!
//! **Calls that do not block are preemption points.** A failing attempt — `try_lock`,
//! `try_read`, `try_write`, `try_recv` (and so the end of a `try_iter`), `try_send`,
//! `try_acquire`, `try_acquire_many`, a `Once::is_completed` or `OnceLock::get` that says
//! not yet —, a timed wait whose time was up before it slept, and every `send` of an
//! unbounded channel (which never blocks) run `task::cond_resched`'s check
//! inside a task, without its cancellation point (none of them ever unwinds with a
//! shutdown's cancellation): a task that spins on one gives its worker up once its request is
//! used up, a wakeup asks for the CPU or a timer is due, so the task it waits for runs even on
//! the same worker. std's channel tests that spin on `try_recv` or on `send` pass on one
//! worker. (Like any call that may switch, they must not be made while holding a lock of
//! std's that another task of the worker may take.) A successful attempt is no such point.
//!
//! **Shutdown.** A task blocked in one of these primitives is cancelled by a shutdown like
//! any blocked task (`Runtime::shutdown_timeout`): its blocking call unwinds, and what it was
//! handed in the meantime — a mutex's lock, permits, a notification, a message's turn — is
//! passed on to the next waiter. A [`Condvar`] waiter unwinds *without* taking its mutex
//! again (pthreads re-acquire it before a cancelled waiter's cleanup): the re-lock could wait
//! for a task that cannot run while this one unwinds (a task that unwinds keeps its worker's
//! thread, `sched/unwind.rs`). Its guard, which no longer holds the lock, is forgotten rather
//! than dropped: no unlock under whoever holds the mutex now, and no poison (the data was
//! consistent when the waiter let the mutex go).
//!
//! For blocking code that is not a primitive of these — a system call, a library that
//! blocks — see `task::blocking` (which may borrow from the task) and `task::spawn_blocking`.
//!
//! Every primitive blocks on one waiter queue, whose protocol they share (who parks, who wakes,
//! what re-checks what; in the source, `sync/waiters.rs`, checked by the loom model
//! `waiters`), and each item's documentation says how it hands off.

mod barrier;
mod condvar;
mod lazy_lock;
pub mod mpsc;
mod mutex;
mod once;
mod once_lock;
pub mod oneshot;
mod poison;
mod rwlock;
mod semaphore;
mod waiters;

pub use alloc::sync::{Arc, Weak};
/// Atomic types, as `std::sync::atomic` (which is `core::sync::atomic`): re-exported so that
/// `lagom::sync` stands in for `std::sync` in imports.
pub use core::sync::atomic;

pub use barrier::{Barrier, BarrierWaitResult};
pub use condvar::{Condvar, WaitTimeoutResult};
pub use lazy_lock::LazyLock;
pub use mutex::{Mutex, MutexGuard};
pub use once::{Once, OnceState};
pub use once_lock::OnceLock;
pub use poison::{LockResult, PoisonError, TryLockError, TryLockResult};
pub use rwlock::{RwLock, RwLockReadGuard, RwLockWriteGuard};
pub use semaphore::{Semaphore, SemaphorePermit};

/// Compile-time checks that each type of this module is invariant where std's is: each
/// example must fail to compile ("lifetime may not live long enough"), as the same code does
/// with std's type. (A covariant type would accept code that std's rejects, and might be
/// unsound: these hand out `&mut T` or move `T`s between threads. Covariance where std's is
/// covariant — `RwLockReadGuard` in `T`, every guard in its lifetime, the error types — is
/// checked by `runtime/tests/sync_traits.rs`, which compiles.)
///
/// `Mutex`:
///
/// ```compile_fail
/// use lagom::sync::*;
/// fn f<'a>(x: Mutex<&'static ()>) -> Mutex<&'a ()> { x }
/// ```
///
/// `MutexGuard`:
///
/// ```compile_fail
/// use lagom::sync::*;
/// fn f<'a, 'b>(x: MutexGuard<'b, &'static ()>) -> MutexGuard<'b, &'a ()> { x }
/// ```
///
/// `RwLock`:
///
/// ```compile_fail
/// use lagom::sync::*;
/// fn f<'a>(x: RwLock<&'static ()>) -> RwLock<&'a ()> { x }
/// ```
///
/// `RwLockWriteGuard`:
///
/// ```compile_fail
/// use lagom::sync::*;
/// fn f<'a, 'b>(x: RwLockWriteGuard<'b, &'static ()>) -> RwLockWriteGuard<'b, &'a ()> { x }
/// ```
///
/// `OnceLock`:
///
/// ```compile_fail
/// use lagom::sync::*;
/// fn f<'a>(x: OnceLock<&'static ()>) -> OnceLock<&'a ()> { x }
/// ```
///
/// `LazyLock` in `T`:
///
/// ```compile_fail
/// use lagom::sync::*;
/// fn f<'a>(x: LazyLock<&'static ()>) -> LazyLock<&'a ()> { x }
/// ```
///
/// `LazyLock` in `F`:
///
/// ```compile_fail
/// use lagom::sync::*;
/// fn f<'a>(x: LazyLock<(), &'static ()>) -> LazyLock<(), &'a ()> { x }
/// ```
///
/// `mpsc::Sender`:
///
/// ```compile_fail
/// use lagom::sync::*;
/// fn f<'a>(x: mpsc::Sender<&'static ()>) -> mpsc::Sender<&'a ()> { x }
/// ```
///
/// `mpsc::SyncSender`:
///
/// ```compile_fail
/// use lagom::sync::*;
/// fn f<'a>(x: mpsc::SyncSender<&'static ()>) -> mpsc::SyncSender<&'a ()> { x }
/// ```
///
/// `mpsc::Receiver`:
///
/// ```compile_fail
/// use lagom::sync::*;
/// fn f<'a>(x: mpsc::Receiver<&'static ()>) -> mpsc::Receiver<&'a ()> { x }
/// ```
///
/// `mpsc::Iter`:
///
/// ```compile_fail
/// use lagom::sync::*;
/// fn f<'a, 'b>(x: mpsc::Iter<'b, &'static ()>) -> mpsc::Iter<'b, &'a ()> { x }
/// ```
///
/// `mpsc::TryIter`:
///
/// ```compile_fail
/// use lagom::sync::*;
/// fn f<'a, 'b>(x: mpsc::TryIter<'b, &'static ()>) -> mpsc::TryIter<'b, &'a ()> { x }
/// ```
///
/// `mpsc::IntoIter`:
///
/// ```compile_fail
/// use lagom::sync::*;
/// fn f<'a>(x: mpsc::IntoIter<&'static ()>) -> mpsc::IntoIter<&'a ()> { x }
/// ```
#[cfg(doctest)]
pub struct Invariance;
