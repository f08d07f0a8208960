//! The two ways a context switch treats the FP control state ([`FpControl`]), and the debug
//! check that catches a context breaking the promise of [`FpControl::AssumeDefault`].
//!
//! The mode belongs to a [`Context`](super::Context): a switch away from a context takes the
//! path its mode names (a branch in Rust on a field of the context, outside the asm), so the
//! default path carries no test inside its asm and each path is its own straight line. What a suspended context needs when it is resumed is fixed by the path that
//! suspended it: the resume code lies in the switch that saved it.
//!
//! Mixing the modes among contexts that switch to one another is defined in one direction
//! only. An `AssumeDefault` switch hands the resumed context the *default* state to compare
//! with (it never read the register, and the promise says that is what it holds), so a
//! resumed `Preserve` context, or a fresh one, gets its own state back. A context suspended by
//! an `AssumeDefault` switch restores nothing when resumed: resume it only from a context in
//! the default environment (a `Preserve` context with its own rounding mode hands it that
//! mode on x86_64; on aarch64 it gets the default, since the frame records FPCR = 0). The
//! runtime gives every context of a runtime the same mode, so it never mixes.

#[cfg(debug_assertions)]
use super::Context;
#[cfg(debug_assertions)]
use crate::sys::signal::{abort, write_stderr};

/// How context switches treat the FP control state: MXCSR and the x87 control word on
/// x86_64, FPCR on aarch64 (rounding mode, flush-to-zero, denormals-are-zero, x87 precision,
/// exception masks). Both ABIs make that state callee-saved; the status flags (MXCSR bits 0–5,
/// FPSR) are caller-saved and flow from context to context in both modes.
///
/// Set per runtime with [`crate::runtime::Builder::fp_control`], or per context with
/// [`Context::set_fp_control`] / [`crate::arch::Fiber::set_fp_control`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
#[repr(u8)]
pub enum FpControl {
    /// Each context keeps its own FP control state exactly (the default). Every switch away
    /// reads the register(s) into the outgoing frame, and the resumed context gets its own
    /// saved state back (the registers are written only when the state differs). Safe for
    /// any code, including foreign code that sets its own rounding mode or FTZ/DAZ; the read
    /// costs a few nanoseconds per switch on some CPUs (`stmxcsr` on AMD Zen).
    #[default]
    Preserve,
    /// A promise: whenever the context switches away — blocks, yields, is preempted at a
    /// runtime call, or ends — its FP control state is the platform default (x86_64: MXCSR
    /// control bits `0x1F80`, all exceptions masked, round to nearest, no FTZ/DAZ, and x87
    /// control word `0x037F`; aarch64: FPCR `0`). The switch then neither reads nor writes
    /// the FP control registers.
    ///
    /// Consequence when the promise is broken: a context that changes its rounding mode,
    /// FTZ/DAZ or x87 precision and switches away *leaks* that state to whatever runs next
    /// on the same thread (the next task, the worker's idle loop, and through them every
    /// later task there), and it does not get its own state back when resumed. Rust code
    /// never changes this state (Rust assumes the default environment; changing it from Rust
    /// is undefined behaviour), so the promise concerns foreign code and inline asm.
    ///
    /// In builds with `debug_assertions` (of the `lagom` crate), every switch in this mode
    /// checks the outgoing state and, if it is not the default, prints the task's name and
    /// the state found and aborts the process. Release builds do not check.
    AssumeDefault,
}

/// Called when a context in [`FpControl::AssumeDefault`] switches away with the FP control
/// state `found` (as `imp::fp_control_now` encodes it) instead of the default: says which
/// context broke the promise and aborts (a panic could not unwind through a scheduler in the
/// middle of a switch).
#[cfg(debug_assertions)]
#[cold]
#[inline(never)]
pub(super) fn broken_promise(from: *const Context, found: u64) -> ! {
    let mut dec = [0u8; 20];
    let mut hex = [0u8; 18];
    write_stderr(b"lagom: ");
    // SAFETY: `from` is the running context (switch's contract); `task`, when set, points at
    // the TaskInfo of the fiber that owns the context, alive while the fiber runs.
    match unsafe { (*from).task.as_ref() } {
        Some(info) => {
            write_stderr(b"task '");
            write_stderr(info.name().as_bytes());
            write_stderr(b"' (id ");
            write_stderr(super::overflow::fmt_u64(info.id(), &mut dec));
            write_stderr(b")");
        }
        None => write_stderr(b"a context that is not a task's (a worker's idle context?)"),
    }
    write_stderr(b" switched away with FP control state ");
    write_stderr(fmt_hex(found, &mut hex));
    write_stderr(b" (");
    write_stderr(super::imp::FP_CONTROL_LAYOUT.as_bytes());
    write_stderr(b") under FpControl::AssumeDefault, which promises the default ");
    write_stderr(fmt_hex(super::imp::DEFAULT_FP_CONTROL, &mut hex));
    write_stderr(
        b"; the state would leak to whatever runs next on this thread. Restore the default \
          before the task blocks, yields or ends, or use FpControl::Preserve (the default). \
          Aborting.\n",
    );
    abort()
}

/// Formats `n` as `0x` and lowercase hex digits into `buf`, without allocating.
#[cfg(debug_assertions)]
fn fmt_hex(mut n: u64, buf: &mut [u8; 18]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b"0123456789abcdef"[(n & 15) as usize];
        n >>= 4;
        if n == 0 {
            break;
        }
    }
    buf[i - 2..i].copy_from_slice(b"0x");
    &buf[i - 2..]
}
