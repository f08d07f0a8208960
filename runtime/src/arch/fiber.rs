//! The fiber: a closure running on its own stack, the unit a task control block embeds.
//!
//! A [`Fiber`] owns a [`Stack`], the [`Context`] saved when it is not running, the closure it
//! runs, its outcome, and a [`TaskInfo`] (name, id, stack size, guard range) for diagnostics.
//! The fiber does not schedule itself: whoever runs it (a worker) switches into
//! [`Fiber::context`] with [`super::switch`] and the fiber's code switches away the same way.
//! When the closure ends, the fiber records the outcome and switches for the last time: to the
//! context its exit hook returns if it has one ([`Fiber::set_on_exit`]; a scheduler's next
//! fiber), else to its parent context (the worker's idle context, see
//! [`Fiber::set_parent`]).
//!
//! With feature `std` a panic is caught at the fiber boundary (`catch_unwind`) and kept as a
//! [`JoinError`] carrying the payload (a shutdown's cancellation, which unwinds a task with a
//! private payload, becomes a cancelled `JoinError` the same way). Without `std` nothing can catch it: the fiber prints the
//! task's name to stderr and aborts, instead of unwinding into the switch code.
//!
//! Dropping a fiber that is suspended mid-run leaks its stack rather than unmapping it: values
//! on that stack may still be referenced from elsewhere (a wait-queue node, say), and nothing
//! unwinds them.
//!
//! # Where the header and the closure live
//!
//! A fiber's bookkeeping (its `Inner`: context, info, outcome, exit hook) and its closure form
//! one `WithClosure<F>`. When that value, padded to its alignment (at least 16), takes at most
//! [`IN_STACK_SHARE`] of the stack's usable bytes (1/16: 1 KiB of a 16 KiB stack, 128 KiB
//! of the default 2 MiB), it is written at the top of the stack itself, so spawning a fiber
//! costs no allocation (one `malloc`/`free` pair fewer per task); otherwise it is
//! boxed. Either way the fiber's *top* is the lowest byte of the header's slot (the stack's
//! base on the boxed path): the parent link, the initial frame and everything the closure
//! pushes lie below it, [`TaskInfo::stack_size`] counts only the bytes from the stack's limit
//! up to it, and the guard page below the limit is unchanged, so an overflow still faults
//! there and is reported as before. The header is dropped in place (or freed) by
//! [`Fiber::into_stack`], [`Fiber::into_stack_abandoned`] or the fiber's drop, before the
//! stack is given back or unmapped, so a reused stack never holds a stale header.
//!
//! ```text
//!   base ->  +---------------------------+  (page-aligned for a DefaultStack)
//!            | WithClosure { Inner, F }  |  in-stack path only, aligned to max(16, align)
//!   top  ->  +---------------------------+  = base on the boxed path
//!            | padding word, parent link |  16 bytes (arch::BASE_RESERVED)
//!            | initial frame, then the   |
//!            | closure's frames ...      |
//!  limit ->  +---------------------------+
//!            | guard page (PROT_NONE)    |
//! ```

use alloc::boxed::Box;
use alloc::string::String;
use core::mem::ManuallyDrop;
use core::ops::Range;
use core::ptr::NonNull;

use super::stack::{DefaultStack, Stack};
use super::valgrind::StackId;
use super::{Context, FpControl, switch};
use crate::JoinError;

/// What the overflow handler and diagnostics know about a task. Lives inside the fiber, at a
/// stable address, for as long as the fiber.
#[derive(Debug)]
#[repr(C)]
pub struct TaskInfo {
    name_ptr: *const u8,
    name_len: usize,
    id: u64,
    stack_size: usize,
    guard_start: usize,
    guard_end: usize,
}

impl TaskInfo {
    /// The task's name; empty for a task spawned without one, which reports print as
    /// `task-<id>`.
    pub fn name(&self) -> &str {
        // SAFETY: name_ptr/len describe the fiber's name String, alive and unchanged as long
        // as the fiber (and so this info).
        unsafe {
            core::str::from_utf8_unchecked(core::slice::from_raw_parts(
                self.name_ptr,
                self.name_len,
            ))
        }
    }
    /// The task's id.
    pub fn id(&self) -> u64 {
        self.id
    }
    /// Usable bytes of its stack for the closure's run: from the stack's limit up to the
    /// fiber's top, so without the header and closure kept at the top (module doc).
    pub fn stack_size(&self) -> usize {
        self.stack_size
    }
    /// Its stack's guard range.
    pub fn guard(&self) -> Range<usize> {
        self.guard_start..self.guard_end
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    NotStarted,
    Running,
    Finished,
}

/// The part of a fiber the fiber's own code reaches through the entry argument. It is the
/// head of a [`WithClosure`], so that the closure shares its place (the top of the stack or
/// one box, module doc); `run` and `free` are that type's monomorphic functions.
struct Inner {
    ctx: Context,
    info: TaskInfo,
    /// Owns the bytes `info` points at.
    _name: String,
    /// Takes the closure out of the enclosing `WithClosure` and runs it (`None`: already
    /// taken), catching a panic.
    run: unsafe fn(*mut Inner) -> Option<Result<(), JoinError>>,
    /// Frees the enclosing `WithClosure` (and the closure, if never run).
    free: unsafe fn(*mut Inner),
    state: State,
    outcome: Option<Result<(), JoinError>>,
    /// Called on the fiber's stack once the outcome is recorded ([`Fiber::set_on_exit`]).
    on_exit: Option<fn() -> *const Context>,
    /// The fiber's top (module doc): the header's slot on the in-stack path, else the
    /// stack's base; the parent link lies just below it.
    top: usize,
    /// The stack's registration with valgrind while the fiber owns it (`valgrind.rs`).
    vg: StackId,
}

/// The largest share of a stack's usable bytes that the fiber's header and closure may take
/// at its top (module doc): `1 / IN_STACK_SHARE`. Larger ones are boxed.
pub const IN_STACK_SHARE: usize = 16;

/// The fiber's header and closure, at the top of its stack or boxed (module doc): its
/// [`Inner`] first (`repr(C)`, so a pointer to it is a pointer to the whole), then the
/// closure.
#[repr(C)]
struct WithClosure<F> {
    inner: Inner,
    f: Option<F>,
}

/// `Inner::run` for closures of type `F`.
///
/// # Safety
/// `p` is the `Inner` of a live `WithClosure<F>`, not accessed by anyone else meanwhile.
unsafe fn run_closure<F: FnOnce()>(p: *mut Inner) -> Option<Result<(), JoinError>> {
    let w = p.cast::<WithClosure<F>>();
    // SAFETY: per contract, `w` is a live WithClosure<F> that only we access.
    let f = unsafe { (*w).f.take() }?;
    // SAFETY: as above; the info is never written after `Fiber::new`.
    Some(run(f, unsafe { &(*p).info }))
}

/// `Inner::free` for boxed closures of type `F`.
///
/// # Safety
/// `p` is the `Inner` of a `WithClosure<F>` leaked from a `Box` by `Fiber::new`; freed once.
unsafe fn free_boxed<F>(p: *mut Inner) {
    // SAFETY: per contract.
    drop(unsafe { Box::from_raw(p.cast::<WithClosure<F>>()) });
}

/// `Inner::free` for closures of type `F` kept at the top of the fiber's stack: drops the
/// header and the closure in place (the memory is the stack's).
///
/// # Safety
/// `p` is the `Inner` of a `WithClosure<F>` written into its stack by `Fiber::new`, which
/// is still mapped; dropped once, and not used afterwards.
unsafe fn drop_in_stack<F>(p: *mut Inner) {
    // SAFETY: per contract.
    unsafe { core::ptr::drop_in_place(p.cast::<WithClosure<F>>()) }
}

/// Where a `WithClosure<F>` goes at the top of `stack`: the address of its slot, aligned to
/// at least 16 (so the slot's start can be the fiber's top), or `None` if the slot would
/// take more than `1 / IN_STACK_SHARE` of the stack's usable bytes.
fn in_stack_slot<F, S: Stack + ?Sized>(stack: &S) -> Option<usize> {
    let base = stack.base().as_ptr() as usize;
    let align = core::mem::align_of::<WithClosure<F>>().max(16);
    let slot = base.checked_sub(core::mem::size_of::<WithClosure<F>>())? & !(align - 1);
    (base - slot <= stack.size() / IN_STACK_SHARE).then_some(slot)
}

/// A closure running on its own stack, with its saved context and outcome.
pub struct Fiber<S: Stack = DefaultStack> {
    inner: NonNull<Inner>,
    stack: ManuallyDrop<S>,
}

// SAFETY: the closure is Send, the stack is Send, and the fiber's state is only touched by
// whoever runs or owns it, one thread at a time (a suspended fiber may resume elsewhere).
unsafe impl<S: Stack + Send> Send for Fiber<S> {}

impl<S: Stack> Fiber<S> {
    /// A fiber that will run `f` on `stack` when first switched to. Set its parent with
    /// [`set_parent`](Self::set_parent) before that.
    pub fn new<F>(name: impl Into<String>, id: u64, stack: S, f: F) -> Self
    where
        F: FnOnce() + Send + 'static,
    {
        let name = name.into();
        // Before the first write into the stack: valgrind learns it is one (a no-op without
        // the `valgrind` feature).
        let vg = StackId::register(
            stack.limit().as_ptr() as usize,
            stack.base().as_ptr() as usize,
        );
        let guard = stack.guard();
        let slot = in_stack_slot::<F, S>(&stack);
        let top = slot.unwrap_or(stack.base().as_ptr() as usize);
        let stack_size = top - stack.limit().as_ptr() as usize;
        // The header is written where it lives, field by field: built as a local first, it
        // was copied there with a `memcpy` (~40 instructions per spawn).
        let (p, free): (*mut WithClosure<F>, unsafe fn(*mut Inner)) = match slot {
            Some(addr) => (addr as *mut WithClosure<F>, drop_in_stack::<F>),
            None => (
                Box::into_raw(Box::<WithClosure<F>>::new_uninit()).cast(),
                free_boxed::<F>,
            ),
        };
        // SAFETY: `p` is valid for writes of a `WithClosure<F>` and aligned for it: a fresh
        // box, or the slot `in_stack_slot` placed inside `[limit, base)` (it takes at most a
        // sixteenth of the usable bytes) and aligned, in a fresh stack owned by the fiber, so
        // nothing else uses it. Both fields are written, so the whole is initialised.
        unsafe {
            (&raw mut (*p).f).write(Some(f));
            (&raw mut (*p).inner).write(Inner {
                ctx: Context::new(),
                info: TaskInfo {
                    name_ptr: name.as_ptr(),
                    name_len: name.len(),
                    id,
                    stack_size,
                    guard_start: guard.start,
                    guard_end: guard.end,
                },
                _name: name,
                run: run_closure::<F>,
                free,
                state: State::NotStarted,
                outcome: None,
                on_exit: None,
                top,
                vg,
            });
        }
        // SAFETY: `p` is not null (a box, or an address inside the stack's mapping).
        let inner = unsafe { NonNull::new_unchecked(p) }.cast::<Inner>();
        // SAFETY: the stack is fresh and owned by the fiber, and `[limit, top)` is free of
        // the header; fiber_main never returns and ends by switching away for the last time.
        let ctx =
            unsafe { super::init_below(top, fiber_main, inner.as_ptr().cast(), core::ptr::null()) };
        // SAFETY: inner is valid and exclusively owned; the context names the fiber's info
        // (same allocation, so it lives as long as the context).
        unsafe {
            let p = inner.as_ptr();
            (*p).ctx = ctx;
            (*p).ctx.task = &raw const (*p).info;
        }
        Fiber {
            inner,
            stack: ManuallyDrop::new(stack),
        }
    }

    /// The context to [`switch`] to in order to run (or resume) the fiber.
    pub fn context(&self) -> *mut Context {
        // SAFETY: inner is valid; we only form a raw pointer.
        unsafe { &raw mut (*self.inner.as_ptr()).ctx }
    }

    /// Sets the context the fiber returns to when it finishes and through which backtraces
    /// continue: the idle context of the worker that runs it.
    ///
    /// # Safety
    /// The fiber must not be running; `parent` must stay valid while the fiber runs on that
    /// worker (see [`super::set_parent`]).
    pub unsafe fn set_parent(&mut self, parent: *const Context) {
        // SAFETY: forwarded contract; the stack carries a context made by `init_below` at
        // this top, whose reserved words are the stack's and free of the header.
        unsafe { super::set_parent_at((*self.inner.as_ptr()).top, parent) }
    }

    /// Sets the exit hook: a function that the fiber calls on its own stack once its closure
    /// has ended and its outcome is recorded ([`is_finished`](Self::is_finished) is then
    /// true and [`take_outcome`](Self::take_outcome) has it). It returns the context the
    /// fiber switches to for the last time instead of its parent (null: the parent): a
    /// scheduler's next fiber, which frees this one's stack once it runs on its own. That
    /// context must be suspended and stay valid until the switch. Set it before the fiber
    /// first runs.
    pub fn set_on_exit(&mut self, hook: fn() -> *const Context) {
        // SAFETY: inner is valid; the fiber is not running (its owner is setting it up).
        unsafe { (*self.inner.as_ptr()).on_exit = Some(hook) }
    }

    /// How the fiber's switches away treat the FP control state (default:
    /// [`FpControl::Preserve`]). Set it before the fiber first runs, or at any time it is
    /// suspended; see [`FpControl`] for the promise [`FpControl::AssumeDefault`] makes.
    pub fn set_fp_control(&mut self, mode: FpControl) {
        // SAFETY: inner is valid; as for the other accessors, the owner does not touch the
        // fiber while it runs (its code reaches Inner only through the entry argument).
        unsafe { (*self.inner.as_ptr()).ctx.set_fp_control(mode) }
    }

    /// How the fiber's switches away treat the FP control state.
    pub fn fp_control(&self) -> FpControl {
        // SAFETY: inner is valid; only read.
        unsafe { (*self.inner.as_ptr()).ctx.fp_control() }
    }

    /// Diagnostics for this task (what [`super::SignalStack::set_current`] publishes).
    pub fn info(&self) -> &TaskInfo {
        // SAFETY: inner is valid; info is never written after new.
        unsafe { &(*self.inner.as_ptr()).info }
    }

    /// The task's name.
    pub fn name(&self) -> &str {
        self.info().name()
    }

    /// The task's id.
    pub fn id(&self) -> u64 {
        self.info().id()
    }

    /// Whether the closure has ended (returned or panicked).
    pub fn is_finished(&self) -> bool {
        self.state() == State::Finished
    }

    fn state(&self) -> State {
        // SAFETY: inner is valid; the fiber is not running while its owner looks.
        unsafe { (*self.inner.as_ptr()).state }
    }

    /// The outcome, once finished: `Ok(())`, or the panic as a [`JoinError`]. `None` before
    /// the end or after the outcome was taken.
    pub fn take_outcome(&mut self) -> Option<Result<(), JoinError>> {
        // SAFETY: inner is valid and the fiber is not running while its owner looks.
        unsafe { (*self.inner.as_ptr()).outcome.take() }
    }

    /// Gives the stack back for reuse: `Some` if the fiber finished or never started, `None`
    /// (the stack is leaked, see the module doc) if it is suspended mid-run.
    pub fn into_stack(self) -> Option<S> {
        let mut this = ManuallyDrop::new(self);
        let reusable = this.state() != State::Running;
        this.release_header();
        // SAFETY: the stack is taken exactly once; `this` is never dropped.
        let stack = unsafe { ManuallyDrop::take(&mut this.stack) };
        if reusable {
            Some(stack)
        } else {
            core::mem::forget(stack);
            None
        }
    }
}

impl<S: Stack> Fiber<S> {
    /// Gives the stack back even if the fiber is suspended mid-run (a task cancelled at
    /// shutdown): the values on it are never dropped (they leak, as with `mem::forget`).
    ///
    /// # Safety
    /// The fiber must never be resumed, and nothing may still point into its stack (no wait
    /// node or borrowed value living there is reachable by any thread).
    pub unsafe fn into_stack_abandoned(self) -> S {
        let mut this = ManuallyDrop::new(self);
        this.release_header();
        // SAFETY: the stack is taken exactly once; `this` is never dropped.
        unsafe { ManuallyDrop::take(&mut this.stack) }
    }
}

impl<S: Stack> Fiber<S> {
    /// Frees the header and the closure (dropped in place at the top of the stack, or the
    /// box) and deregisters the stack from valgrind: no stack pointer will point into it
    /// again on this fiber's behalf. Called once, by whatever consumes the fiber, before the
    /// stack is released.
    fn release_header(&mut self) {
        let p = self.inner.as_ptr();
        // SAFETY: inner is valid until it is freed just below.
        let vg = unsafe { (*p).vg };
        // SAFETY: inner is the WithClosure made by new (boxed or in the still-mapped stack,
        // which `free` knows); the caller consumes the fiber, so it is freed exactly once.
        unsafe { ((*p).free)(p) };
        vg.deregister();
    }
}

impl<S: Stack> Drop for Fiber<S> {
    fn drop(&mut self) {
        let reusable = self.state() != State::Running;
        self.release_header();
        if reusable {
            // SAFETY: dropped exactly once; nothing runs on it.
            unsafe { ManuallyDrop::drop(&mut self.stack) };
        }
    }
}

impl<S: Stack> core::fmt::Debug for Fiber<S> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Fiber")
            .field("name", &self.name())
            .field("id", &self.id())
            .field("state", &self.state())
            .finish()
    }
}

/// The entry function of every fiber: runs the closure, records the outcome, calls the exit
/// hook if there is one, and switches for the last time to the context it returned, or to the
/// parent.
///
/// # Safety
/// `arg` is the fiber's `Inner`, valid until the fiber is dropped, which cannot happen while
/// the fiber runs.
unsafe extern "C" fn fiber_main(arg: *mut u8) -> ! {
    let inner = arg.cast::<Inner>();
    // SAFETY: per contract; the owner does not touch inner while we run, and `run` is the
    // function made for the closure type of the WithClosure that `inner` heads.
    let outcome = unsafe {
        (*inner).state = State::Running;
        ((*inner).run)(inner)
    }
    .unwrap_or(Ok(()));
    // SAFETY: per contract.
    let hook = unsafe {
        (*inner).outcome = Some(outcome);
        (*inner).state = State::Finished;
        (*inner).on_exit
    };
    // No reference into `inner` is live here: the hook reaches the fiber through its owner.
    let to = hook.map_or(core::ptr::null(), |hook| hook());
    // SAFETY: per contract; the parent link was set before the fiber was first resumed, and a
    // hook's context is suspended and valid (`set_on_exit`).
    unsafe {
        let to = if to.is_null() {
            *super::parent_link((*inner).top)
        } else {
            to
        };
        switch(&raw mut (*inner).ctx, to);
    }
    // Nobody resumes a finished fiber.
    crate::sys::signal::abort()
}

/// Runs the closure, catching a panic.
#[cfg(feature = "std")]
fn run(f: impl FnOnce(), info: &TaskInfo) -> Result<(), JoinError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(|payload| {
        let name = match info.name() {
            "" => alloc::format!("task-{}", info.id()),
            named => String::from(named),
        };
        JoinError::panicked(name, info.id(), payload)
    })
}

/// Runs the closure; a panic unwinding out of it prints the task and aborts.
#[cfg(not(feature = "std"))]
fn run(f: impl FnOnce(), info: &TaskInfo) -> Result<(), JoinError> {
    /// Dropped only while unwinding out of the closure.
    struct AbortOnUnwind<'a>(&'a TaskInfo);
    impl Drop for AbortOnUnwind<'_> {
        fn drop(&mut self) {
            use crate::sys::signal::{abort, write_stderr};
            let mut buf = [0u8; 20];
            write_stderr(b"task '");
            super::overflow::write_name(self.0, &mut buf);
            write_stderr(b"' (id ");
            write_stderr(super::overflow::fmt_u64(self.0.id(), &mut buf));
            write_stderr(
                b") panicked; without the `std` feature panics cannot be caught: aborting\n",
            );
            abort();
        }
    }
    let bomb = AbortOnUnwind(info);
    f();
    core::mem::forget(bomb);
    Ok(())
}
