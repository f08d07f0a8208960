//! Silencing the tests' deliberate panics: a panic hook that says nothing for a panic whose
//! message contains `deliberate` (the tests' convention for a panic they cause on purpose and
//! check) and reports every other panic as the hook it replaces would, backtrace included, so
//! that `RUST_BACKTRACE=1 cargo test` prints no backtrace of an expected panic and still
//! prints every unexpected one. [`expect`] runs a closure that must panic on the calling
//! thread, silently, and reports where the panic was raised.
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
            if msg.is_some_and(|m| m.contains(DELIBERATE)) || expected(info) {
                return;
            }
            previous(info);
        }));
    });
}

std::thread_local! {
    /// Whether the calling thread is inside [`expect`].
    static EXPECTING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// Where the last panic [`expect`] caught was raised.
    static LOCATION: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// Runs `f`, which must panic on the calling thread, silently; returns the panic's message
/// and the `file:line` it was raised at (for `#[track_caller]` checks).
pub fn expect(f: impl FnOnce()) -> (String, String) {
    quiet();
    EXPECTING.set(true);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    EXPECTING.set(false);
    let payload = r.expect_err("the closure was expected to panic");
    let msg = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_default();
    let loc = LOCATION.take().unwrap_or_default();
    (msg, loc)
}

/// The hook's side of [`expect`]: records where the panic was raised and says nothing.
fn expected(info: &std::panic::PanicHookInfo<'_>) -> bool {
    if !EXPECTING.get() {
        return false;
    }
    let loc = info
        .location()
        .map(|l| format!("{}:{}", l.file(), l.line()))
        .unwrap_or_default();
    LOCATION.set(Some(loc));
    true
}
