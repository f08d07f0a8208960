//! Coverage probes of the loom models: `probe!("file: step")` marks one step of a
//! protocol — a branch of the wakeup path, of the switch-out, the exit, the idle loop or the
//! kick — so that `loom-tests/coverage.sh` can tell which steps no model reached.
//!
//! Outside `cfg(loom)` the macro expands to nothing. Under loom, the first time a process
//! passes a probe it appends the probe's name, one line, to the file that the environment
//! variable `LAGOM_PROBE_FILE` names (nothing when it is unset). The flag that remembers
//! this is a `core` atomic, not the shim's: it is bookkeeping of the test run, not state of
//! the runtime, and loom must not explore it.

/// Marks one protocol step for the loom coverage report (module doc).
macro_rules! probe {
    ($name:literal) => {
        #[cfg(loom)]
        {
            static HIT: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);
            if !HIT.swap(true, core::sync::atomic::Ordering::Relaxed) {
                $crate::locking::probe::record($name);
            }
        }
    };
}
pub(crate) use probe;

/// Appends `name` to the file `LAGOM_PROBE_FILE` names, if it is set.
#[cfg(loom)]
pub fn record(name: &str) {
    crate::sys::fs::append_line_to_env_file(c"LAGOM_PROBE_FILE", name);
}
