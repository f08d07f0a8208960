//! The error a join returns when the task did not complete normally, and the private payload
//! with which a shutdown's cancellation unwinds a task (`task/cancel.rs`).

use alloc::boxed::Box;
use alloc::string::String;
use core::any::Any;
use core::fmt;

/// Why a task produced no value: it panicked (with feature `std`; without it a panic aborts
/// the process), or the runtime's shutdown cancelled it ([`is_cancelled`](Self::is_cancelled)).
///
/// A panic's payload travels to the joiner, who can resume the panic with
/// `std::panic::resume_unwind(err.into_panic())`.
pub struct JoinError {
    name: String,
    id: u64,
    repr: Repr,
}

enum Repr {
    Panic(Box<dyn Any + Send + 'static>),
    Cancelled,
}

/// The payload with which a shutdown's cancellation unwinds a task (`task/cancel.rs`). Private:
/// no other code can raise one, so a payload of this type is always a cancellation.
pub(crate) struct Cancelled;

impl JoinError {
    /// A task named `name` with id `id` panicked with `payload` (or, if the payload is the
    /// runtime's cancellation, was cancelled).
    pub fn panicked(name: String, id: u64, payload: Box<dyn Any + Send + 'static>) -> Self {
        let repr = match payload.is::<Cancelled>() {
            true => Repr::Cancelled,
            false => Repr::Panic(payload),
        };
        JoinError { name, id, repr }
    }

    /// A task named `name` with id `id` was cancelled by the runtime's shutdown.
    pub(crate) fn cancelled(name: String, id: u64) -> Self {
        JoinError {
            name,
            id,
            repr: Repr::Cancelled,
        }
    }

    /// Whether the task panicked.
    pub fn is_panic(&self) -> bool {
        matches!(self.repr, Repr::Panic(_))
    }

    /// Whether the runtime's shutdown cancelled the task: it was blocked (or, past half the
    /// shutdown's timeout, still running) when the runtime shut down, and it unwound from
    /// the blocking call (running its destructors), or, if it did not end in time, was
    /// abandoned (`Runtime::shutdown_timeout` says which).
    pub fn is_cancelled(&self) -> bool {
        matches!(self.repr, Repr::Cancelled)
    }

    /// The panic payload.
    ///
    /// # Panics
    /// If the error is not a panic (see [`try_into_panic`](Self::try_into_panic)); the panic
    /// names the caller's location.
    #[track_caller]
    pub fn into_panic(self) -> Box<dyn Any + Send + 'static> {
        match self.try_into_panic() {
            Ok(payload) => payload,
            Err(e) => panic!("`into_panic` called on a JoinError that is not a panic: {e}"),
        }
    }

    /// The panic payload, or the error itself if it is not a panic.
    ///
    /// # Errors
    /// Returns `self` when the task did not panic.
    pub fn try_into_panic(self) -> Result<Box<dyn Any + Send + 'static>, JoinError> {
        match self.repr {
            Repr::Panic(payload) => Ok(payload),
            Repr::Cancelled => Err(self),
        }
    }

    /// The name of the task.
    pub fn task_name(&self) -> &str {
        &self.name
    }

    /// The id of the task.
    pub fn task_id(&self) -> u64 {
        self.id
    }

    /// The panic message, when the payload is a string (as `panic!` makes it).
    fn message(&self) -> Option<&str> {
        match &self.repr {
            Repr::Panic(p) => p
                .downcast_ref::<&'static str>()
                .copied()
                .or_else(|| p.downcast_ref::<String>().map(String::as_str)),
            Repr::Cancelled => None,
        }
    }
}

impl fmt::Display for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_cancelled() {
            return write!(
                f,
                "task '{}' (id {}) was cancelled: the runtime shut down before it ended",
                self.name, self.id
            );
        }
        write!(f, "task '{}' (id {}) panicked", self.name, self.id)?;
        match self.message() {
            Some(m) => write!(f, ": {m}"),
            None => f.write_str(" (payload is not a string)"),
        }
    }
}

impl fmt::Debug for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("JoinError");
        d.field("task", &self.name).field("id", &self.id);
        match self.is_cancelled() {
            true => d.field("cancelled", &true),
            false => d.field("panic", &self.message().unwrap_or("<non-string payload>")),
        };
        d.finish()
    }
}

impl core::error::Error for JoinError {}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::format;

    #[test]
    fn display_and_payload() {
        let e = JoinError::panicked("worker".into(), 7, Box::new("boom"));
        assert!(e.is_panic());
        assert_eq!(format!("{e}"), "task 'worker' (id 7) panicked: boom");
        let e2 = JoinError::panicked("w".into(), 1, Box::new(42u32));
        assert_eq!(
            format!("{e2}"),
            "task 'w' (id 1) panicked (payload is not a string)"
        );
        assert_eq!(*e2.into_panic().downcast::<u32>().unwrap(), 42);
    }

    #[test]
    fn the_cancellation_payload_makes_a_cancelled_error() {
        let e = JoinError::panicked("w".into(), 3, Box::new(Cancelled));
        assert!(e.is_cancelled() && !e.is_panic());
        assert_eq!(
            format!("{e}"),
            "task 'w' (id 3) was cancelled: the runtime shut down before it ended"
        );
        let e = e.try_into_panic().unwrap_err();
        assert!(JoinError::cancelled("w".into(), 3).is_cancelled());
        assert!(format!("{e:?}").contains("cancelled"));
    }
}
