//! `task_local!`: storage that follows the task — the replacement for `thread_local!` inside
//! tasks. A `thread_local!` inside a task is the *worker thread's*: every task of that worker
//! shares it, and a task that may migrate (`allow_migration`) finds another thread's after a
//! blocking call. A `task_local!` value belongs to one task: made from its initialiser on the
//! task's first access, kept in the task control block (`Task::locals`), and dropped when the
//! task's closure returns or unwinds (a panic, a shutdown's cancellation) — still inside the
//! task, so a destructor may block or use other task-locals; a value that one of them sets up
//! again is dropped too, up to a few rounds; what is left after those is dropped with the
//! task. A destructor that panics while the closure unwinds aborts, as with `thread_local!`.
//!
//! **Outside a task** (a plain OS thread, `block_on`'s caller — `block_on`'s closure itself
//! runs as a task, so it has task-locals of its own) there is no task to hold the value:
//! [`LocalKey::with`] panics with a message that names the key, and [`LocalKey::try_with`]
//! returns [`AccessError`], so code that runs in both places can fall back to a
//! `thread_local!` of its own.
//!
//! Values must be `Send` (a task's values are dropped where the task is freed, and a
//! migrating task takes them along) and `'static`.

use alloc::boxed::Box;
use core::any::Any;
use core::fmt;

use crate::worker::{self, Task};

/// How many rounds of destructors that set task-locals up again the end of a task drops.
const DROP_ROUNDS: usize = 8;

/// A key of a [`task_local!`](crate::task_local) value (made by the macro).
pub struct LocalKey<T: Send + 'static> {
    name: &'static str,
    init: fn() -> T,
}

/// [`LocalKey::try_with`] outside a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AccessError;

impl fmt::Display for AccessError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a lagom task_local! used outside a lagom task")
    }
}

#[cfg(feature = "std")]
impl std::error::Error for AccessError {}

impl<T: Send + 'static> LocalKey<T> {
    #[doc(hidden)]
    pub const fn new(name: &'static str, init: fn() -> T) -> LocalKey<T> {
        LocalKey { name, init }
    }

    /// Runs `f` on the calling task's value, made by the initialiser on first use.
    ///
    /// # Panics
    /// Outside a task (use [`try_with`](Self::try_with) there).
    pub fn with<R>(&'static self, f: impl FnOnce(&T) -> R) -> R {
        match self.try_with(f) {
            Ok(r) => r,
            Err(AccessError) => panic!(
                "task_local! `{}` used outside a lagom task (a plain thread or block_on's \
                 caller): use `try_with` and a thread_local! there",
                self.name
            ),
        }
    }

    /// As [`with`](Self::with), or `Err(AccessError)` outside a task.
    ///
    /// # Errors
    /// [`AccessError`] outside a task.
    pub fn try_with<R>(&'static self, f: impl FnOnce(&T) -> R) -> Result<R, AccessError> {
        let p = worker::with_current_task(|t| self.get_or_init(t)).ok_or(AccessError)?;
        // SAFETY: the value lives in its own box in the task's locals, which only the task
        // itself touches and which drop values only once its closure returned (module doc):
        // it outlives this call, and nobody holds a `&mut` to it.
        Ok(f(unsafe { &*p }))
    }

    /// The address of the task's value, made first if needed.
    fn get_or_init(&'static self, t: &Task) -> *const T {
        let key = core::ptr::from_ref(self).addr();
        if let Some(p) = find::<T>(t, key) {
            return p;
        }
        // Outside any borrow of the locals: the initialiser may use other task-locals.
        let value: Box<dyn Any + Send> = Box::new((self.init)());
        if let Some(p) = find::<T>(t, key) {
            // The initialiser set this key up itself (recursively): keep that value.
            drop(value);
            return p;
        }
        let p = (&*value as *const (dyn Any + Send)).cast::<T>();
        // SAFETY: the running task's own locals (module doc); no reference into the vector
        // is live (values are reached through their boxes).
        t.locals.with_mut(|l| unsafe { (*l).push((key, value)) });
        p
    }
}

/// The address of `t`'s value of key `key`, if it has one.
fn find<T: 'static>(t: &Task, key: usize) -> Option<*const T> {
    // SAFETY: as in `get_or_init`.
    t.locals.with(|l| unsafe {
        (*l).iter()
            .find(|(k, _)| *k == key)
            .and_then(|(_, v)| v.downcast_ref::<T>())
            .map(core::ptr::from_ref)
    })
}

/// Drops the calling task's task-locals when dropped: made before a task's closure runs, it
/// drops them when the closure returns or unwinds (module doc).
pub(crate) struct DropOnExit;

impl Drop for DropOnExit {
    fn drop(&mut self) {
        drop_current();
    }
}

/// Drops the calling task's task-locals, at the end of its closure (module doc).
fn drop_current() {
    for _ in 0..DROP_ROUNDS {
        let taken = worker::with_current_task(|t| {
            // SAFETY: the running task's own locals; its closure has returned, so no
            // reference into them is live.
            t.locals.with_mut(|l| unsafe { core::mem::take(&mut *l) })
        });
        match taken {
            Some(v) if !v.is_empty() => drop(v),
            _ => return,
        }
    }
}

impl<T: Send + 'static> fmt::Debug for LocalKey<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalKey")
            .field("name", &self.name)
            .finish()
    }
}

/// Declares task-local statics: `static NAME: Type = init;` each, read with
/// [`LocalKey::with`](crate::task::LocalKey::with). The counterpart of `thread_local!` for
/// tasks (see `lagom::task::LocalKey`).
///
/// ```
/// use std::cell::Cell;
///
/// lagom::task_local! {
///     static REQUESTS: Cell<u32> = Cell::new(0);
/// }
///
/// let rt = lagom::Runtime::builder().build().unwrap();
/// let a = rt.spawn(|| {
///     REQUESTS.with(|r| r.set(r.get() + 1));
///     lagom::task::yield_now();
///     REQUESTS.with(|r| r.get())
/// });
/// let b = rt.spawn(|| REQUESTS.with(|r| r.get()));
/// assert_eq!((a.join().unwrap(), b.join().unwrap()), (1, 0));
/// // Outside a task there is no value.
/// assert!(REQUESTS.try_with(|r| r.get()).is_err());
/// ```
#[macro_export]
macro_rules! task_local {
    () => {};
    ($(#[$attr:meta])* $vis:vis static $name:ident: $t:ty = $init:expr; $($rest:tt)*) => {
        $(#[$attr])*
        $vis static $name: $crate::task::LocalKey<$t> = $crate::task::LocalKey::new(
            ::core::stringify!($name),
            {
                fn __lagom_task_local_init() -> $t {
                    $init
                }
                __lagom_task_local_init
            },
        );
        $crate::task_local!($($rest)*);
    };
    ($(#[$attr:meta])* $vis:vis static $name:ident: $t:ty = $init:expr) => {
        $crate::task_local!($(#[$attr])* $vis static $name: $t = $init;);
    };
}
