//! Silencing the tests' deliberate panics: a panic hook that says nothing for a panic whose
//! message contains `deliberate` (the tests' convention for a panic they cause on purpose and
//! check) and reports every other panic as the hook it replaces would, backtrace included, so
//! that `RUST_BACKTRACE=1 cargo test` prints no backtrace of an expected panic and still
//! prints every unexpected one.
#![allow(dead_code)]

use std::sync::Once;

/// The marker a deliberate panic's message carries.
pub const DELIBERATE: &str = "deliberate";

/// Installs the hook (once per test binary; every test that panics on purpose calls it first).
pub fn quiet() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let payload = info.payload();
            let msg = payload
                .downcast_ref::<&str>()
                .copied()
                .or_else(|| payload.downcast_ref::<String>().map(String::as_str));
            if msg.is_some_and(|m| m.contains(DELIBERATE)) {
                return;
            }
            previous(info);
        }));
    });
}
