//! `lagom::sync`: blocking primitives for tasks — [`Mutex`], [`RwLock`], [`Condvar`],
//! [`Barrier`], [`Semaphore`], channels ([`mpsc`], [`oneshot`]) — with the names and signatures of `std::sync`, so code moves over by changing
//! an import.
//!
//! **Why not std's.** A `std::sync` primitive blocks the worker *thread*: every task of that
//! worker stops, including, often, the one that would release it — a pipeline of tasks
//! talking over `std::sync::mpsc` hangs. These block only the calling *task*: its worker runs
//! other tasks meanwhile. On a plain OS thread (outside any runtime, `block_on`'s caller, a
//! `spawn_blocking` closure) they block the thread, so tasks and threads can share one
//! channel or one mutex.
//!
//! | std | lagom | difference |
//! |---|---|---|
//! | `std::sync::Mutex`, `MutexGuard` | [`Mutex`], [`MutexGuard`] | hands the lock to the longest waiter (fair) |
//! | `std::sync::RwLock`, `RwLockReadGuard`, `RwLockWriteGuard` | [`RwLock`], … | writer-fair: readers queue behind a parked writer |
//! | `std::sync::Condvar`, `WaitTimeoutResult` | [`Condvar`], [`WaitTimeoutResult`] | |
//! | `std::sync::Barrier`, `BarrierWaitResult` | [`Barrier`], [`BarrierWaitResult`] | |
//! | `std::sync::Once`, `OnceState`, `OnceLock`, `LazyLock` | [`Once`], [`OnceState`], [`OnceLock`], [`LazyLock`] | an initialiser that waits for itself panics, saying so (std's deadlocks) |
//! | (none; tokio's `Semaphore`) | [`Semaphore`], [`SemaphorePermit`] | blocking, not async |
//! | (none; tokio's `oneshot`) | [`oneshot`] | blocking, not async |
//! | `std::sync::mpsc::{channel, sync_channel, Sender, SyncSender, Receiver}` | [`mpsc`] | `Receiver` is `Clone` (multi-consumer); `SyncSender::send_timeout` is stable |
//! | `LockResult`, `PoisonError`, `TryLockError`, `TryLockResult` | the same | |
//!
//! Timed waits take a `Duration` and run on the workers' timers inside tasks; deadlines are
//! [`crate::time::Instant`]s.
//!
//! Every primitive blocks on one waiter queue (`waiters.rs`), whose module doc holds the
//! protocol they share: who parks, who wakes, what re-checks what. Each primitive's module
//! doc adds its own state and how it hands off.

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

pub use barrier::{Barrier, BarrierWaitResult};
pub use condvar::{Condvar, WaitTimeoutResult};
pub use lazy_lock::LazyLock;
pub use mutex::{Mutex, MutexGuard};
pub use once::{Once, OnceState};
pub use once_lock::OnceLock;
pub use poison::{LockResult, PoisonError, TryLockError, TryLockResult};
pub use rwlock::{RwLock, RwLockReadGuard, RwLockWriteGuard};
pub use semaphore::{Semaphore, SemaphorePermit};
