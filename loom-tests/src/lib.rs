//! Helpers shared by the loom models in `tests/`.
//!
//! The models themselves only compile under `RUSTFLAGS="--cfg loom"`, which turns lagom's
//! `sync` shim into loom's primitives:
//!
//! ```text
//! RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test -p loom-tests --release
//! ```
//!
//! `mutants.sh` beside this crate builds each model once more with the one-line mutation its
//! doc comment names (`--cfg lagom_mutant="<name>"`, set for lagom alone through
//! `LAGOM_MUTANT=<name>` and `runtime/build.rs`) and reports whether loom caught it;
//! `coverage.sh` runs the suite and reports the protocol steps no model reached.

use core::ptr::NonNull;

/// The least preemption bound of the models that run a waker's claim (`BLOCKED → WAKING`):
/// three. At two, loom misses the claim's compare-exchange made Relaxed (`two_wakers` catches
/// it at three: the enqueue reads the task's entity before the dequeue that stored it), and
/// the waker's path after the claim is where lagom's orderings are finest.
pub const CLAIM_PREEMPTIONS: usize = 3;

/// Runs `f` as [`loom::model`] does, with a preemption bound of at least
/// [`CLAIM_PREEMPTIONS`]: `LOOM_MAX_PREEMPTIONS` if it is larger, none if it is unset (loom's
/// default: every interleaving).
#[cfg(loom)]
pub fn claim_model<F>(f: F)
where
    F: Fn() + Sync + Send + 'static,
{
    let mut b = loom::model::Builder::new();
    if let Some(p) = b.preemption_bound {
        b.preemption_bound = Some(p.max(CLAIM_PREEMPTIONS));
    }
    b.check(f);
}

/// A pointer that a model hands to another loom thread.
///
/// Models move entries between threads by raw pointer, as the runtime does; the protocol
/// under test, not the type system, is what makes that sound, and loom checks it.
#[derive(Debug)]
pub struct SendPtr<T>(pub NonNull<T>);

impl<T> Clone for SendPtr<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for SendPtr<T> {}

// SAFETY: a model only dereferences the pointer under the protocol it checks; loom reports
// any access that the protocol fails to order.
unsafe impl<T> Send for SendPtr<T> {}
