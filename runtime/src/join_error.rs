//! The error a join returns when the task did not complete normally.

use alloc::boxed::Box;
use alloc::string::String;
use core::any::Any;
use core::fmt;

/// Why a task produced no value: today, because it panicked (with feature `std`; without it a
/// panic aborts the process).
///
/// The panic payload travels to the joiner, who can resume the panic with
/// `std::panic::resume_unwind(err.into_panic())`.
pub struct JoinError {
    name: String,
    id: u64,
    repr: Repr,
}

enum Repr {
    Panic(Box<dyn Any + Send + 'static>),
}

impl JoinError {
    /// A task named `name` with id `id` panicked with `payload`.
    pub fn panicked(name: String, id: u64, payload: Box<dyn Any + Send + 'static>) -> Self {
        JoinError {
            name,
            id,
            repr: Repr::Panic(payload),
        }
    }

    /// Whether the task panicked.
    pub fn is_panic(&self) -> bool {
        matches!(self.repr, Repr::Panic(_))
    }

    /// The panic payload.
    ///
    /// # Panics
    /// If the error is not a panic (see [`try_into_panic`](Self::try_into_panic)).
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
        }
    }
}

impl fmt::Display for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "task '{}' (id {}) panicked", self.name, self.id)?;
        match self.message() {
            Some(m) => write!(f, ": {m}"),
            None => f.write_str(" (payload is not a string)"),
        }
    }
}

impl fmt::Debug for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinError")
            .field("task", &self.name)
            .field("id", &self.id)
            .field("panic", &self.message().unwrap_or("<non-string payload>"))
            .finish()
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
}
