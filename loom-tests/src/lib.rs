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
