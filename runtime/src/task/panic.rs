//! Panic messages that name the task, as std's name the thread.
//!
//! std's default panic hook prints `thread '<name>' (<tid>) panicked at <location>:`, the
//! name being the OS thread's, fixed when the thread was spawned: for a task, that is its
//! worker (`lagom-worker-0`), whichever task panicked. Renaming the worker thread at each
//! switch would cost a system call per switch and std's name cannot be changed anyway. So the
//! first [`Builder::build`](crate::runtime::Builder::build) of the process (with `std`)
//! installs a panic hook that, for a panic raised inside a task, writes std's message with the
//! task in the thread's place:
//!
//! ```text
//! task 'parse' (id 7) panicked at src/main.rs:12:9:
//! bad input
//! note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace
//! ```
//!
//! (`task-<id>` for an unnamed task, as every other report says), and otherwise calls the hook
//! it replaced. The location is the user's code: the hook prints the panic's own location,
//! and `#[track_caller]` functions report their callers as they do under std.
//! `RUST_BACKTRACE` keeps its meaning: unset or `0` prints the note above once per process,
//! `full` a full backtrace, any other value a short one (captured by
//! `std::backtrace::Backtrace`, so its first frames are the hook's and std's panic machinery,
//! which std's own short backtrace trims).
//!
//! **A hook of the user's is respected.** The hook is installed once, by taking the current
//! hook (`take_hook`) and setting a new one that calls it:
//!
//! * if the hook it took is std's default (told by taking the hook a second time: std then
//!   hands out its default, and a default is the same function and value as the first take's
//!   only when the first was the default too), a task's panic is reported as above and every
//!   other panic goes to std's default, unchanged;
//! * if it is a hook the user installed before the runtime, every panic, a task's included,
//!   goes to that hook unchanged (it can name the task with [`current`](super::current));
//! * a hook the user installs after the runtime replaces lagom's as it replaces std's; one that
//!   chains to the hook it took (the usual pattern) gets the task's report through it.
//!
//! `take_hook` and `set_hook` are two calls: a hook another thread sets between them is lost
//! (std offers no atomic update on stable Rust), and a panic on another thread between them
//! is reported by std's default hook. The window is the first `build` of the process; set
//! your own hook before building the first runtime or after, not while another thread
//! builds one.

use alloc::string::String;
use core::fmt::Write;
use std::panic::PanicHookInfo;

/// The hook type std stores.
type Hook = dyn Fn(&PanicHookInfo<'_>) + Sync + Send + 'static;

/// Installs the hook (module doc), once per process.
pub(crate) fn install_hook() {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(|| {
        let prev = std::panic::take_hook();
        // The first take reset the hook to std's default, so this one is std's default.
        let default = std::panic::take_hook();
        let prev_is_default = core::ptr::eq::<Hook>(&*prev, &*default);
        drop(default);
        std::panic::set_hook(alloc::boxed::Box::new(move |info| {
            if prev_is_default && let Some(task) = super::current() {
                report(&task, info);
            } else {
                prev(info);
            }
        }));
    });
}

/// How much backtrace `RUST_BACKTRACE` asks for, read as std's default hook reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Style {
    Off,
    Short,
    Full,
}

fn style_of(var: Option<&str>) -> Style {
    match var {
        None | Some("0") => Style::Off,
        Some("full") => Style::Full,
        Some(_) => Style::Short,
    }
}

/// The report of `info`, raised by `task`, as std's default hook would write it for a thread
/// (module doc); `first` says whether this is the process's first such report (the note is
/// printed once).
fn message(
    task: &super::CurrentTask,
    info: &PanicHookInfo<'_>,
    style: Style,
    first: bool,
) -> String {
    let payload = info.payload();
    let msg = payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("Box<dyn Any>");
    let mut out = String::new();
    let _ = write!(out, "task '{}' (id {}) panicked", task.name, task.id);
    if let Some(loc) = info.location() {
        let _ = write!(out, " at {loc}");
    }
    let _ = writeln!(out, ":\n{msg}");
    match style {
        Style::Off if first => out.push_str(
            "note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n",
        ),
        Style::Off => {}
        Style::Short => {
            let bt = std::backtrace::Backtrace::force_capture();
            let _ = write!(
                out,
                "stack backtrace:\n{bt}\nnote: Some details are omitted, run with \
                 `RUST_BACKTRACE=full` for a verbose backtrace.\n"
            );
        }
        Style::Full => {
            let bt = std::backtrace::Backtrace::force_capture();
            let _ = writeln!(out, "stack backtrace:\n{bt:#}");
        }
    }
    out
}

/// Writes the report of a task's panic to stderr, in one write so that concurrent output
/// does not split it (std's hook buffers for the same reason).
fn report(task: &super::CurrentTask, info: &PanicHookInfo<'_>) {
    static FIRST: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(true);
    let var = std::env::var("RUST_BACKTRACE").ok();
    let style = style_of(var.as_deref());
    let first = style == Style::Off && FIRST.swap(false, core::sync::atomic::Ordering::Relaxed);
    // `eprint!`, not a raw write: the test harness captures it as it captures std's report.
    std::eprint!("{}", message(task, info, style, first));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backtrace_style_as_std_reads_it() {
        assert_eq!(style_of(None), Style::Off);
        assert_eq!(style_of(Some("0")), Style::Off);
        assert_eq!(style_of(Some("1")), Style::Short);
        assert_eq!(style_of(Some("yes")), Style::Short);
        assert_eq!(style_of(Some("full")), Style::Full);
    }
}
