//! Green-thread mechanism: the context switch, task stacks, stack-overflow detection and the
//! fiber that runs a closure on its own stack.
//!
//! **Not public API**: public only so that lagom's own benches and tests can reach the
//! switch and the stacks; hidden from the documentation and not covered by semver — it may
//! change in any release. Of what is here, [`FpControl`] is public, at the crate's root
//! (`lagom::FpControl`), and the stack sizes are `lagom::runtime::{DEFAULT_STACK_SIZE,
//! MIN_STACK_SIZE}`.
//!
//! # The switch
//!
//! A [`Context`] is one saved stack pointer. [`switch`] saves the running context into `from`
//! and resumes `to`; it is symmetric, so a worker switches from one task straight to the next
//! (as the kernel's `__schedule` does) and the worker thread's own stack is simply one more
//! context, its idle task. Everything a suspended context needs — callee-saved registers,
//! the FP control words, the address to resume at — is pushed on its own stack, so a context
//! costs no memory besides its stack.
//!
//! The return-address predictor must stay in step: on x86_64 the switch is an inlined
//! `asm!` block that resumes the other context with a `jmp` and neither calls nor returns, so
//! it pushes and pops no return-stack entry; on aarch64 it is a function entered with `bl` and
//! left with `ret`. The x86_64 module doc says why.
//!
//! The FP control state (MXCSR and the x87 control word on x86_64, FPCR on aarch64) is
//! callee-saved in both ABIs. How a switch treats it is the running context's [`FpControl`]
//! mode, chosen by [`switch`] with a branch in Rust on `from`'s mode (a field of the context,
//! normally set once when it is made), so each mode is its own straight line of asm
//! ([`switch_preserve_fp`] and [`switch_assume_default_fp`] name one path directly):
//!
//! * [`FpControl::Preserve`] (the default) keeps each context's state exactly: every switch
//!   reads the outgoing context's state and stores it in its frame, and the resumed context
//!   compares it with its own saved state and writes the register only when they differ.
//!   Reading is unavoidable for exactness (user space has no way to learn that code changed
//!   the register but to read it); writing is the slow part on some CPUs and is skipped in
//!   the common case where all contexts run in the default environment.
//! * [`FpControl::AssumeDefault`] is a promise that the context's state is the default
//!   whenever it switches away; the switch neither reads nor writes the registers, and debug
//!   builds check the promise at every switch. A round trip then costs what corosensei's
//!   does (`benches/switch.rs`; the figures are in the book, `docs/src/lab/mechanism.md`).
//!
//! A new context starts with its creator's control state (status flags cleared), as a new
//! thread inherits its parent's, in either mode. See [`FpControl`] for the contract and
//! `fp.rs` for what mixing the modes among contexts means.
//!
//! A new context is made by [`init`] on a fresh [`Stack`]: its first resume "returns" into a
//! small trampoline that calls the entry function with its argument. The entry function
//! never returns; it switches away for the last time.
//!
//! # Backtraces across the switch
//!
//! Each stack holds, just below its base, a *parent link*: the address of the [`Context`] of
//! the worker's idle task (the thread's own stack), set by [`init`] and [`set_parent`]. The
//! trampoline carries DWARF CFI that computes its caller's frame from that link: the unwinder
//! reads the link, then the idle context's saved stack pointer, and restores the registers
//! that `switch` pushed there. A backtrace taken inside a task therefore lists the task's
//! frames, the trampoline, and then the worker's frames that last switched away from the
//! thread stack. The idle context is always suspended inside `switch` while any task runs on
//! its thread, so the link is always valid to follow.
//!
//! # Modules
//!
//! * [`Stack`], [`DefaultStack`] (mmap, guard page, lazy commit) and [`StackPool`] (per worker);
//! * [`Fiber`]: stack + context + closure + outcome, panics caught at the boundary;
//!   [`crate::JoinError`] carries a panic to whoever joins;
//! * [`SignalStack`]: the per-worker alternate signal stack through which a stack overflow is
//!   reported as one;
//! * `valgrind`: with feature `valgrind`, the client requests that tell valgrind where each
//!   running fiber's stack is and that an idle pooled stack is no one's
//!   ([`running_on_valgrind`] is public for tests).

//! # Example
//!
//! A thread runs a fiber until it yields back, then to its end. The fiber reaches the thread's
//! context through a pointer it captured; a scheduler keeps such pointers per worker.
//!
//! ```
//! use std::sync::Arc;
//! use std::sync::atomic::{AtomicUsize, Ordering};
//!
//! use lagom::arch::{Context, DefaultStack, Fiber, switch};
//!
//! let mut idle = Box::new(Context::new()); // this thread's context
//! let idle_ptr: *mut Context = &mut *idle;
//! let idle_addr = idle_ptr as usize;
//! let me = Arc::new(AtomicUsize::new(0)); // the fiber's context, known once it exists
//! let me_in_fiber = me.clone();
//! let mut fiber = Fiber::new("hello", 1, DefaultStack::with_default_size()?, move || {
//!     let me = me_in_fiber.load(Ordering::Relaxed) as *mut Context;
//!     // SAFETY: `me` is this running fiber's context, `idle` the suspended thread.
//!     unsafe { switch(me, idle_addr as *mut Context) }; // yield once
//! });
//! me.store(fiber.context() as usize, Ordering::Relaxed);
//! // SAFETY: the fiber is not running and `idle` outlives it.
//! unsafe {
//!     fiber.set_parent(idle_ptr);
//!     switch(idle_ptr, fiber.context()); // runs until the yield
//!     assert!(!fiber.is_finished());
//!     switch(idle_ptr, fiber.context()); // runs to the end, then switches back here
//! }
//! assert!(fiber.take_outcome().unwrap().is_ok());
//! # Ok::<(), lagom::Error>(())
//! ```

#[cfg(target_arch = "aarch64")]
mod aarch64;
#[cfg(target_arch = "x86_64")]
mod x86_64;

#[cfg(target_arch = "aarch64")]
use aarch64 as imp;
#[cfg(target_arch = "x86_64")]
use x86_64 as imp;

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
compile_error!("lagom's context switch exists for x86_64 and aarch64 only");

mod fiber;
mod fp;
mod overflow;
mod pool;
mod stack;
pub(crate) mod valgrind;

pub use fiber::{Fiber, IN_STACK_SHARE, TaskInfo};
pub use fp::FpControl;
pub use overflow::SignalStack;
pub use pool::{MAX_BATCH, StackPool, TRIM_AFTER};
pub use stack::{DEFAULT_STACK_SIZE, DefaultStack, MIN_STACK_SIZE, Stack};
pub use valgrind::running_on_valgrind;

/// A suspended execution context: the stack pointer saved by [`switch`], and how switches
/// away from it treat the FP control state.
///
/// Everything else the context needs lies on its stack, above that pointer. A `Context` that
/// is resumed must stay at the same address until the next switch away from it writes it
/// again (the worker's idle context also must not move while tasks run: stacks link to it).
#[derive(Debug)]
#[repr(C)]
pub struct Context {
    /// The saved stack pointer; first, because the trampoline's CFI reads it (mod doc).
    sp: *mut u8,
    /// The mode of switches away from this context.
    fp_control: FpControl,
    /// The fiber that owns this context, for diagnostics (null for other contexts).
    task: *const TaskInfo,
}

// SAFETY: a Context is a plain saved stack pointer (and a pointer to its owner's info, read
// only for diagnostics while the owner runs); which thread resumes it is the scheduler's
// business (a context may migrate between workers like a kernel task).
unsafe impl Send for Context {}

impl Context {
    /// An empty context, to be filled by the first [`switch`] away from it (the worker's idle
    /// context), or by [`init`]. Its FP control mode is [`FpControl::Preserve`].
    pub const fn new() -> Self {
        Context::with_fp_control(FpControl::Preserve)
    }

    /// An empty context whose switches away treat the FP control state as `mode` says.
    pub const fn with_fp_control(mode: FpControl) -> Self {
        Context {
            sp: core::ptr::null_mut(),
            fp_control: mode,
            task: core::ptr::null(),
        }
    }

    /// The saved stack pointer (null for a context that was never saved).
    pub fn stack_pointer(&self) -> *const u8 {
        self.sp
    }

    /// How switches away from this context treat the FP control state.
    pub fn fp_control(&self) -> FpControl {
        self.fp_control
    }

    /// Sets how the next switches away from this context treat the FP control state. It
    /// may be set at any time, even while the context runs (it takes effect at its next
    /// switch away): what a suspended context needs when resumed is recorded by the switch
    /// that suspended it.
    pub fn set_fp_control(&mut self, mode: FpControl) {
        self.fp_control = mode;
    }
}

impl Default for Context {
    fn default() -> Self {
        Self::new()
    }
}

/// The entry function of a new context: called once with the argument given to [`init`], on
/// the new stack. It must never return; it ends by switching away for the last time.
pub type EntryFn = unsafe extern "C" fn(arg: *mut u8) -> !;

/// Bytes reserved at the base of every stack: the parent link and one padding word.
const BASE_RESERVED: usize = 16;

/// Saves the running context into `from` and resumes `to`. Returns when some other context
/// switches back to `from`. The FP control state is treated as `from`'s [`FpControl`] mode
/// says (see [`switch_preserve_fp`] and [`switch_assume_default_fp`]).
///
/// # Safety
/// * `from` must be valid for a write; it becomes a resumable context.
/// * `to` must hold a context saved by `switch` or made by [`init`], that is not running
///   and whose stack is still mapped; after this call it must not be resumed again until it
///   was saved again.
/// * If `to` is a context made by [`init`] whose parent link is used for backtraces, the
///   linked context must be the suspended idle context of this thread.
#[inline(always)]
pub unsafe fn switch(from: *mut Context, to: *const Context) {
    // SAFETY: forwarded contract; `from` is valid for reads as it is for writes.
    unsafe {
        match (*from).fp_control {
            FpControl::Preserve => imp::switch_preserve(from, to),
            FpControl::AssumeDefault => imp::switch_assume_default(from, to),
        }
    }
}

/// [`switch`] on the [`FpControl::Preserve`] path, whatever `from`'s mode: the outgoing FP
/// control state is saved, and the resumed context gets its own back.
///
/// # Safety
/// As for [`switch`].
#[inline(always)]
pub unsafe fn switch_preserve_fp(from: *mut Context, to: *const Context) {
    // SAFETY: forwarded contract.
    unsafe { imp::switch_preserve(from, to) }
}

/// [`switch`] on the [`FpControl::AssumeDefault`] path, whatever `from`'s mode: the FP
/// control registers are neither read nor written, the outgoing state is taken to be the
/// default (checked, with `debug_assertions`: a broken promise aborts the process).
///
/// # Safety
/// As for [`switch`].
#[inline(always)]
pub unsafe fn switch_assume_default_fp(from: *mut Context, to: *const Context) {
    // SAFETY: forwarded contract.
    unsafe { imp::switch_assume_default(from, to) }
}

/// Prepares a new context on `stack` that calls `entry(arg)` when first resumed.
///
/// `parent` is written to the stack's parent link (see the module doc); it may be null and
/// set later with [`set_parent`], before any backtrace is taken in the new context.
///
/// # Safety
/// * The stack must be unused: nothing else may run on it while the context exists.
/// * `entry` must never return, and must eventually stop using the stack by switching away
///   for the last time (or the stack is never reused).
pub unsafe fn init<S: Stack + ?Sized>(
    stack: &S,
    entry: EntryFn,
    arg: *mut u8,
    parent: *const Context,
) -> Context {
    // SAFETY: forwarded contract; the base is the top of the stack's usable bytes.
    unsafe { init_below(stack.base().as_ptr() as usize, entry, arg, parent) }
}

/// [`init`] for a context whose stack ends at `top` (rounded down to 16) rather than at its
/// stack's base: the fiber keeps its header above `top` (`fiber.rs`).
///
/// # Safety
/// As for [`init`], for the stack bytes below `top`: `top` lies in a [`Stack`] whose bytes
/// from its limit up to `top` are at least 15/16 of [`MIN_STACK_SIZE`] (the fiber takes at
/// most `1 / IN_STACK_SHARE` of the stack, [`IN_STACK_SHARE`]) and are not used by anything
/// else.
pub(crate) unsafe fn init_below(
    top: usize,
    entry: EntryFn,
    arg: *mut u8,
    parent: *const Context,
) -> Context {
    let top = top & !15;
    // SAFETY: top is the top of stack bytes we may write (contract of Stack and of this fn);
    // the reserved words and the initial frame fit far above the minimum stack size.
    unsafe {
        set_parent_at(top, parent);
        let sp = imp::initial_frame(top - BASE_RESERVED, entry, arg);
        Context {
            sp,
            ..Context::new()
        }
    }
}

/// Points the parent link of `stack` at `parent` (the idle context of the worker the task now
/// runs on; a scheduler calls this when a task migrates).
///
/// # Safety
/// `stack` must carry a context made by [`init`] that is not running on another thread.
pub unsafe fn set_parent<S: Stack + ?Sized>(stack: &S, parent: *const Context) {
    let base = stack.base().as_ptr() as usize & !15;
    // SAFETY: forwarded contract; the link lies in the reserved words below the base.
    unsafe { set_parent_at(base, parent) }
}

/// The address of the parent link of the stack whose base is `base`.
pub(crate) fn parent_link(base: usize) -> *mut *const Context {
    ((base & !15) - BASE_RESERVED) as *mut *const Context
}

/// Writes the parent link of the stack whose base (or fiber top) is `base`.
///
/// # Safety
/// The two reserved words below `base` must be writable.
pub(crate) unsafe fn set_parent_at(base: usize, parent: *const Context) {
    let link = parent_link(base);
    // SAFETY: per contract; the padding word above the link stays zero.
    unsafe {
        link.write(parent);
        link.add(1).write(core::ptr::null());
    }
}
