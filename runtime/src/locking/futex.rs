//! A 32-bit word that threads can sleep on: `futex(2)` normally, a loom-visible stand-in under
//! `cfg(loom)`.
//!
//! Under loom a futex cannot be called, so [`Futex`] keeps a loom `Mutex` + `Condvar` beside
//! the word: `wait` checks the word and sleeps under the mutex, `wake` notifies under it. That
//! keeps the one property the protocols rely on — checking the word and going to sleep are
//! atomic with respect to `wake` — so a lost wakeup shows up as a loom deadlock. Timeouts are
//! not modelled: under loom `wait` sleeps until woken, so a wakeup that only a timeout would
//! rescue counts as lost, which is what the models want to find.

use super::atomic::AtomicU32;
#[cfg(loom)]
use super::atomic::Ordering;

/// A word to sleep on until another thread changes it and wakes the sleepers.
#[derive(Debug)]
pub struct Futex {
    word: AtomicU32,
    #[cfg(loom)]
    sleepers: (loom::sync::Mutex<()>, loom::sync::Condvar),
}

impl Futex {
    super::loom_const_fn! {
        /// A futex word holding `value`.
        pub fn new(value: u32) -> Self {
            Futex {
                word: AtomicU32::new(value),
                #[cfg(loom)]
                sleepers: (loom::sync::Mutex::new(()), loom::sync::Condvar::new()),
            }
        }
    }

    /// The word itself, for loads, stores and read-modify-writes.
    pub fn word(&self) -> &AtomicU32 {
        &self.word
    }

    /// Sleeps while the word holds `expected`, for at most `timeout_ns` (`None`: no limit).
    ///
    /// May return spuriously; callers re-check their condition.
    pub fn wait(&self, expected: u32, timeout_ns: Option<u64>) {
        #[cfg(not(loom))]
        crate::sys::futex::futex_wait(&self.word, expected, timeout_ns);
        #[cfg(loom)]
        {
            let _ = timeout_ns;
            let guard = self.sleepers.0.lock().unwrap();
            if self.word.load(Ordering::SeqCst) == expected {
                drop(self.sleepers.1.wait(guard).unwrap());
            }
        }
    }

    /// Wakes one thread sleeping in [`wait`](Self::wait) (under loom: every one, which a
    /// caller that re-checks cannot tell from spurious wakeups).
    pub fn wake_one(&self) {
        #[cfg(not(loom))]
        crate::sys::futex::futex_wake(&self.word, 1);
        #[cfg(loom)]
        self.wake_all();
    }

    /// Wakes every thread sleeping in [`wait`](Self::wait).
    pub fn wake_all(&self) {
        #[cfg(not(loom))]
        crate::sys::futex::futex_wake(&self.word, u32::MAX);
        #[cfg(loom)]
        {
            let _guard = self.sleepers.0.lock().unwrap();
            self.sleepers.1.notify_all();
        }
    }
}
