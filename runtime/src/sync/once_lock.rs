//! [`OnceLock`]: a cell written once, by whichever task or thread gets there first; the
//! others block (the task, not its worker) until the value is there. `std::sync::OnceLock`'s
//! stable API, on a [`Once`](super::Once).
//!
//! Invariant: *the value is `Some` exactly when the `Once` is complete; it is written only
//! by the `Once`'s runner, before the completion (Release) that readers acquire, and never
//! again through `&self`.*
//!
//! A failed or panicking initialiser leaves the cell empty: it ends its run poisoned
//! (`OnceState::poison`, or the panic), and every initialising call goes through
//! `call_once_force`, so the next caller runs its own initialiser (std's behaviour).
//!
//! The value lives in an `Option<T>`, not std's `MaybeUninit<T>` with a `Drop` impl: the
//! option's own drop glue drops it, so no `Drop` impl (whose dropck std relaxes with the
//! unstable `#[may_dangle]`) keeps a `OnceLock<&'a T>` from outliving nothing but `'a`'s end,
//! as std's test `dropck` checks; it costs a discriminant where `T` has no niche.

use core::cell::UnsafeCell;
use core::convert::Infallible;
use core::fmt;
use core::panic::{RefUnwindSafe, UnwindSafe};

use super::once::{OnPoison, Once};

/// A cell that is written once and then read by reference, as `std::sync::OnceLock` (module
/// doc). Initialisation blocks the waiting tasks, not their workers.
///
/// ```
/// use lagom::sync::OnceLock;
///
/// static CONFIG: OnceLock<String> = OnceLock::new();
///
/// let rt = lagom::Runtime::builder().build().unwrap();
/// let readers: Vec<_> = (0..4)
///     .map(|_| rt.spawn(|| CONFIG.wait().len()))
///     .collect();
/// rt.spawn(|| CONFIG.get_or_init(|| "from a task".to_owned()).len())
///     .join()
///     .unwrap();
/// for r in readers {
///     assert_eq!(r.join().unwrap(), 11);
/// }
/// assert_eq!(CONFIG.set("again".to_owned()), Err("again".to_owned()));
/// ```
pub struct OnceLock<T> {
    once: Once,
    value: UnsafeCell<Option<T>>,
}

// SAFETY: shared, the cell hands out `&T` to any thread (`T: Sync`) and takes a `T` written
// by one thread and dropped by another (`T: Send`), as std's.
unsafe impl<T: Sync + Send> Sync for OnceLock<T> {}

// As std's: the value is never seen half-written (a panicking initialiser leaves the cell
// empty), so a shared `OnceLock` is unwind-safe where its value is.
impl<T: RefUnwindSafe + UnwindSafe> RefUnwindSafe for OnceLock<T> {}

impl<T> OnceLock<T> {
    crate::locking::loom_const_fn! {
        /// An empty cell. A `const fn`, as std's (not under `cfg(loom)`).
        #[must_use]
        pub fn new() -> OnceLock<T> {
            OnceLock {
                once: Once::new(),
                value: UnsafeCell::new(None),
            }
        }
    }

    /// The value, or `None` if it is not written yet (or being written). Never blocks; inside
    /// a task, a `None` is a preemption point (as a `cond_resched` without its cancellation:
    /// `sync`'s module doc), so a task that polls it lets the writer run, even on its own
    /// worker ([`wait`](Self::wait) blocks instead).
    #[inline]
    pub fn get(&self) -> Option<&T> {
        let v = self.get_now();
        if v.is_none() {
            crate::task::try_point();
        }
        v
    }

    /// [`get`](Self::get) without its preemption point (the cell's own fast paths, `Debug`,
    /// `Clone`, `PartialEq`).
    #[inline]
    fn get_now(&self) -> Option<&T> {
        if self.once.completed() {
            // SAFETY: complete (Acquire): the value was written before, and nobody writes it
            // through `&self` again.
            unsafe { (*self.value.get()).as_ref() }
        } else {
            None
        }
    }

    /// The value through the exclusive reference, or `None`. Never blocks.
    #[inline]
    pub fn get_mut(&mut self) -> Option<&mut T> {
        self.value.get_mut().as_mut()
    }

    /// Blocks the calling task (or thread) until the cell is written, and returns the value
    /// (as std's, stable since Rust 1.86).
    ///
    /// # Panics
    /// If called from the initialiser of this very cell (it would wait for itself).
    #[track_caller]
    pub fn wait(&self) -> &T {
        self.once.wait_force();
        self.get_completed()
    }

    /// Writes `value` if the cell is empty (`Ok`), else hands it back (`Err`). Blocks while
    /// another caller's initialiser runs; afterwards the cell holds a value, not necessarily
    /// this one.
    ///
    /// # Errors
    /// `value` itself, if the cell already held one.
    #[track_caller]
    pub fn set(&self, value: T) -> Result<(), T> {
        let mut value = Some(value);
        self.get_or_init(|| value.take().expect("the initialiser runs once"));
        match value {
            None => Ok(()),
            Some(v) => Err(v),
        }
    }

    /// The value, written first with `f()` if the cell is empty. Many callers may race with
    /// different `f`s: one runs (and the others wait for it), unless it panics, when the
    /// next caller runs its own.
    ///
    /// # Panics
    /// If `f` panics (the panic goes on to the caller; the cell stays empty); if `f` reads
    /// this very cell (std's deadlocks; this one says so).
    #[inline]
    #[track_caller]
    pub fn get_or_init<F: FnOnce() -> T>(&self, f: F) -> &T {
        if let Some(v) = self.get_now() {
            return v;
        }
        match self.initialize(|| Ok::<T, Infallible>(f())) {
            Ok(()) => self.get_completed(),
            Err(e) => match e {},
        }
    }

    /// The value, consuming the cell; `None` if it was empty.
    pub fn into_inner(self) -> Option<T> {
        self.value.into_inner()
    }

    /// Takes the value out, leaving the cell empty (and initialisable again).
    pub fn take(&mut self) -> Option<T> {
        let v = self.value.get_mut().take();
        if v.is_some() {
            self.once = Once::new();
        }
        v
    }

    /// Runs `f` as the `Once`'s initialiser, if no value is there yet (module doc).
    #[cold]
    #[track_caller]
    fn initialize<E>(&self, f: impl FnOnce() -> Result<T, E>) -> Result<(), E> {
        let mut f = Some(f);
        let mut res = Ok(());
        let slot = &self.value;
        // A poisoned `Once` (an earlier initialiser failed) runs the next one: `force`.
        self.once.call(OnPoison::Run, &mut |st| {
            let Some(f) = f.take() else { return };
            match f() {
                // SAFETY: this is the `Once`'s runner: nobody else reads or writes the value
                // until the completion this run ends with.
                Ok(v) => unsafe { *slot.get() = Some(v) },
                Err(e) => {
                    res = Err(e);
                    st.poison();
                }
            }
        });
        res
    }

    /// The value of a cell whose `Once` is complete.
    fn get_completed(&self) -> &T {
        self.get_now()
            .expect("a completed OnceLock holds its value (module invariant)")
    }
}

impl<T> Default for OnceLock<T> {
    /// An empty cell.
    fn default() -> OnceLock<T> {
        OnceLock::new()
    }
}

impl<T: fmt::Debug> fmt::Debug for OnceLock<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_tuple("OnceLock");
        match self.get_now() {
            Some(v) => d.field(v),
            None => d.field(&format_args!("<uninit>")),
        };
        d.finish()
    }
}

impl<T: Clone> Clone for OnceLock<T> {
    /// A new cell holding a clone of the value, if there is one now.
    fn clone(&self) -> OnceLock<T> {
        match self.get_now() {
            Some(v) => OnceLock::from(v.clone()),
            None => OnceLock::new(),
        }
    }
}

impl<T> From<T> for OnceLock<T> {
    /// A cell holding `value`.
    fn from(value: T) -> Self {
        let mut cell = OnceLock::new();
        *cell.value.get_mut() = Some(value);
        cell.once.set_exclusive(super::once::Exclusive::Complete);
        cell
    }
}

impl<T: PartialEq> PartialEq for OnceLock<T> {
    /// Equal if both are empty, or both hold equal values.
    fn eq(&self, other: &OnceLock<T>) -> bool {
        self.get_now() == other.get_now()
    }
}

impl<T: Eq> Eq for OnceLock<T> {}
