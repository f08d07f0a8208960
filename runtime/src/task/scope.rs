//! `scope` and `join`: tasks that borrow from their caller's stack (`std::thread::scope`'s and
//! rayon's `join`'s shapes), and the lifetime erasure that lets a `'static` task run them.
//!
//! Invariant: *a scope (or a `join`) does not leave its frame — by returning or by unwinding —
//! before every task it spawned has stopped touching what they borrow from it, or can never
//! run again.*
//!
//! ## The protocol
//!
//! **`scope`.** The caller (the *owner*: a task, or with [`Runtime::scope`](crate::Runtime::scope)
//! a plain thread) makes a `ScopeData` (an `Arc`: a child may still hold it for the instant
//! after it reported its end) with a count of running children, the owner's waiter (a task or
//! a thread parker) and a slot for the first unhandled panic. Each spawn increments the count
//! *before* the task exists; a child decrements it as the very last thing it does with
//! anything of the scope (its packet's drop, below), after its closure, its value if nobody
//! will join it and everything the closure captured are gone, and the one that brings it to
//! zero unparks the owner. The increment comes from the owner or from a running child, whose
//! own count is still held, so the count cannot reach zero while a task that could still
//! spawn runs. The owner runs the body under `catch_unwind`, then waits (`park` until the
//! count, loaded with Acquire, is zero; each decrement is a Release read-modify-write, so
//! every child's writes are visible once it reads zero), then resumes the body's panic, or the
//! first unjoined child's panic, or returns the body's value.
//!
//! A child's packet (`ScopedPacket`, shared by the task and its [`ScopedJoinHandle`]) holds
//! its result: the task's closure catches the closure's panic and stores `Ok(value)` or
//! `Err(payload)`; the handle's `join` waits for the task's end and takes it. The packet's
//! drop, by whichever side lets go last, moves a result nobody took that is a panic into the
//! scope's slot, drops a value nobody took, and only then decrements the count: so an
//! unjoined panic is propagated and an unjoined value is dropped before the scope returns,
//! as std does (`std::thread::scope` panics with a message of its own; lagom resumes the first
//! such panic's payload, as rayon does).
//!
//! **`join(a, b)`.** `b` and the slot for its value live in `join`'s frame (`StackJob`);
//! the task gets a `'static` closure holding a raw pointer to it and a function pointer
//! (`JobRef`, rayon-core's trick) and a shared claim word. `a` runs on the caller under
//! `catch_unwind`. Whoever sets the claim first (one swap, AcqRel) runs `b`: the task when it
//! starts, or the caller once `a` returned. If the task won, the caller joins it, resumably
//! (`JoinWait`: one round of the join packet's protocol at a time); if the caller won, it runs
//! `b` itself and does not wait: the task, when it runs, finds the claim taken and ends
//! without touching the frame. So a `join` whose `b` was not picked up meanwhile costs a
//! spawn and the task's empty run, and no block or wakeup of the caller; one whose `a` blocks
//! lets `b`'s task run (it is an ordinary task), so `a` may wait for `b`.
//!
//! ## Spawning ahead
//!
//! A task is a stack, so a body that spawns 100 000 tiny tasks before any of them runs holds
//! 100 000 stacks at once (mapped, first touched, then trimmed): most of the cost of such a
//! fan-out. A spawn in a scope by a task of its runtime therefore first looks at its worker's
//! published count of runnable tasks, and from [`SPAWN_BACKLOG`] on yields to them once
//! (`schedule`, as `yield_now` without its cancellation point): the queued children run and
//! end, their stacks go back to the worker's pool, and the spawner resumes (on its own worker:
//! the migration contract) when EEVDF picks it again. The look is one relaxed load; the
//! count is a hint (the balancers read the same word). After the spawn comes every spawn's
//! preemption point (`task::Builder::spawn`: the spawner's request used up, a wakeup or a
//! timer due), which bounds a fan-out in time as this bounds it in count. `join` throttles
//! the same way (it has no preemption point of its own): a `b` that its
//! caller ran itself leaves a task that ends at once when it runs, and a loop of such joins
//! that never blocks would otherwise pile them up.
//!
//! ## Why it is sound (the SAFETY argument of the lifetime erasure)
//!
//! A child's closure is erased to `'static` (`erase`) because the task system needs one; what
//! it borrows lives in the owner's frame or before it. The frame is left only when:
//!
//! 1. **it returns**: after the wait saw the count at zero (every child's packet dropped,
//!    so every child's closure and captures are gone), or, for `join`, after `b`'s task
//!    delivered its outcome — its closure returned or its panic was caught, so it touches
//!    nothing of the frame any more (the join packet's protocol orders it before the owner's
//!    Acquire); or after the caller won `b`'s claim, when the task never touches the frame;
//! 2. **it unwinds**: the body's and `a`'s panics are caught, and the wait itself is no
//!    cancellation point (`park_uncancelled`, `task/cancel.rs`): a shutdown that cancels the
//!    owner while it waits leaves the request pending; the owner waits on while its children
//!    run, are cancelled in their turn and end (their panics, the cancellation included, are
//!    caught in the child and reach the owner as results), and only then resumes the first
//!    child's cancellation or meets its own at its next point. (A cancellable wait would
//!    unwind the owner first and make it wait again while unwinding: a task that unwinds
//!    keeps its worker's thread, `sched/unwind.rs`, so children on the owner's worker could
//!    never run.) So nothing unwinds across the wait; a guard (`WaitGuard`, `JoinWait`) that
//!    waits again in its `Drop` stays as a safety net should a bug of lagom's unwind out of
//!    it. Without `std` nothing unwinds;
//! 3. **never**: past the shutdown's give-up point (`EXIT`) a waiting owner whose children
//!    do not end waits for good, and is freed without unwinding once every worker thread has
//!    stopped, when no child can run any more either. A child still running then is a worker
//!    thread stuck in a task that never calls into lagom: the runtime then frees no task at
//!    all (`Runtime::shutdown_timeout`), so the owner's stack stays mapped; or a child
//!    waiting for its `task::blocking` closure, which may borrow from the owner's frame: the
//!    runtime then unmaps no stack (`blocking.rs`).
//!
//! A child that never ran and is freed at shutdown has its `'static` closure dropped: that
//! drops only a raw pointer (`Erased`), so the real closure, which may hold references into
//! the owner's frame, leaks rather than running a destructor on borrowed data.
//!
//! The owner and its children run on one runtime: [`scope`] and [`join`] take the calling
//! task's, and [`Runtime::scope`](crate::Runtime::scope) refuses a task of another runtime,
//! whose shutdown could free the owner's stack while the children, on a runtime that goes on,
//! still use it. A plain-thread owner holds `&Runtime` for the whole scope, so that runtime
//! cannot shut down under it.
//!
//! Outside any runtime [`scope`] and [`join`] panic (as [`spawn`](super::spawn) does): their
//! closures are tasks and there is no runtime to run them; `Runtime::scope` works from any
//! thread.

use alloc::boxed::Box;
use alloc::sync::Arc;
use core::any::Any;
use core::marker::PhantomData;
use core::ptr;

use super::builder::{Builder, spawn_inner};
use super::join::JoinHandle;
use super::park::{current_waiter, park_uncancelled};
use crate::locking::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};
use crate::locking::cell::UnsafeCell;
use crate::worker::{Shared, Waiter, WorkerThread, local};
use crate::{Error, JoinError};

/// A panic's payload.
type Payload = Box<dyn Any + Send + 'static>;

/// Runs `f`, catching its panic (with `std`; without it a panic aborts the process).
fn catch<R>(f: impl FnOnce() -> R) -> Result<R, Payload> {
    #[cfg(feature = "std")]
    return std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    #[cfg(not(feature = "std"))]
    return Ok(f());
}

/// Resumes `payload` in the calling task or thread (a shutdown's cancellation as a
/// cancellation: `cancel.rs`).
fn resume(payload: Payload) -> ! {
    #[cfg(feature = "std")]
    super::cancel::resume(payload);
    #[cfg(not(feature = "std"))]
    {
        drop(payload);
        unreachable!("lagom: a panic payload without std")
    }
}

/// A closure of any lifetime behind a raw pointer, so that a `'static` task closure can carry
/// it (module doc, "Why it is sound"). Dropping it without [`run`](Self::run) or
/// [`reclaim`](Self::reclaim) leaks the closure.
struct Erased {
    ptr: *mut (),
    call: unsafe fn(*mut ()),
    free: unsafe fn(*mut ()),
}

// SAFETY: made only from a `Send` closure (`erase`), which one thread runs or frees.
unsafe impl Send for Erased {}

/// Boxes `f` and erases its lifetime.
///
/// # Safety
/// Everything `f` borrows must outlive the closure's run, if [`Erased::run`] is called, and
/// its drop, if [`Erased::reclaim`] is; if neither is, `f` leaks.
unsafe fn erase<F: FnOnce() + Send>(f: F) -> Erased {
    /// Runs and frees the box.
    ///
    /// # Safety
    /// `p` is the `Box<F>` made by `erase`, used once.
    unsafe fn call<F: FnOnce()>(p: *mut ()) {
        // SAFETY: per contract.
        let f = unsafe { Box::from_raw(p.cast::<F>()) };
        f();
    }
    /// Drops the box unrun.
    ///
    /// # Safety
    /// As for `call`.
    unsafe fn free<F>(p: *mut ()) {
        // SAFETY: per contract.
        drop(unsafe { Box::from_raw(p.cast::<F>()) });
    }
    Erased {
        ptr: Box::into_raw(Box::new(f)).cast(),
        call: call::<F>,
        free: free::<F>,
    }
}

impl Erased {
    /// Runs the closure.
    fn run(self) {
        // SAFETY: `ptr` and `call` were made together by `erase`, and `self` is consumed.
        unsafe { (self.call)(self.ptr) }
    }

    /// Drops the closure unrun, given the parts of an `Erased` that was dropped unrun.
    ///
    /// # Safety
    /// `ptr` and `free` are one `Erased`'s, which was neither run nor reclaimed.
    unsafe fn reclaim(ptr: *mut (), free: unsafe fn(*mut ())) {
        // SAFETY: per contract.
        unsafe { free(ptr) }
    }
}

/// What a scope shares with its children (module doc).
struct ScopeData {
    /// Children spawned and not yet done.
    running: AtomicUsize,
    /// Whom the last child wakes.
    owner: Waiter,
    /// The first panic nobody joined (`Box<Payload>`, or null).
    panic: AtomicPtr<Payload>,
    /// The runtime the children run on.
    shared: Arc<Shared>,
}

impl ScopeData {
    /// Keeps `p` if it is the first unhandled panic.
    fn record(&self, p: Payload) {
        let b = Box::into_raw(Box::new(p));
        if self
            .panic
            .compare_exchange(ptr::null_mut(), b, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            // SAFETY: `b` was not published: still ours.
            drop(unsafe { Box::from_raw(b) });
        }
    }

    /// The recorded panic, if any.
    fn take_panic(&self) -> Option<Payload> {
        let p = self.panic.swap(ptr::null_mut(), Ordering::Acquire);
        // SAFETY: a non-null pointer came from `record`'s `Box::into_raw` and is swapped out
        // once.
        (!p.is_null()).then(|| *unsafe { Box::from_raw(p) })
    }

    /// One child is done with everything of the scope's (module doc).
    fn done_one(&self) {
        if self.running.fetch_sub(1, Ordering::Release) == 1 {
            crate::wake::unpark(&self.owner, lagom_policy::WakeFlags::NONE);
        }
    }

    /// Parks until every child is done; no cancellation point (module doc, "Why it is
    /// sound").
    fn wait(&self) {
        while self.running.load(Ordering::Acquire) != 0 {
            wait_park();
        }
    }

    /// The worker thread to spawn from: the caller's, if it is one of this runtime's.
    fn local(&self) -> Option<&'static WorkerThread> {
        local().filter(|wt| Arc::ptr_eq(&wt.shared, &self.shared))
    }
}

impl Drop for ScopeData {
    fn drop(&mut self) {
        drop(self.take_panic());
    }
}

/// The park of a scope's owner and of `join`'s caller: no cancellation point (module doc,
/// "Why it is sound").
fn wait_park() {
    // Mutant `scope_wait_cancellable` (runtime/tests/mutants.sh): the owner unwinds out of
    // its wait and waits again while unwinding, holding its thread (`sched/unwind.rs`): on
    // one worker its children can then never run, and the shutdown abandons them all.
    #[cfg(lagom_mutant = "scope_wait_cancellable")]
    super::park::park();
    #[cfg(not(lagom_mutant = "scope_wait_cancellable"))]
    park_uncancelled();
}

/// Waits for a scope's children if the owner's wait is unwound by a cancellation (module
/// doc); forgotten once the wait returned.
struct WaitGuard<'a>(&'a ScopeData);

impl Drop for WaitGuard<'_> {
    fn drop(&mut self) {
        self.0.wait();
    }
}

/// A scope to spawn tasks in that borrow from outside it (`'env`); see [`scope`].
///
/// `'scope` is the scope's own lifetime: the tasks spawned in it, and their handles, live no
/// longer.
pub struct Scope<'scope, 'env: 'scope> {
    data: Arc<ScopeData>,
    /// Invariant in `'scope`, as std's (a scope cannot be shrunk or grown).
    scope: PhantomData<&'scope mut &'scope ()>,
    /// Invariant in `'env`.
    env: PhantomData<&'env mut &'env ()>,
}

impl core::fmt::Debug for Scope<'_, '_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Scope")
            .field("running", &self.data.running.load(Ordering::Relaxed))
            .finish()
    }
}

/// A child's result, shared by its task and its handle (module doc).
struct ScopedPacket<T> {
    result: UnsafeCell<Option<Result<T, Payload>>>,
    scope: Arc<ScopeData>,
}

// SAFETY: `result` is written once by the task, before its end, and read by the handle after
// the task's end (the join packet's Acquire orders the write before) or by the packet's drop
// (the `Arc`'s last drop orders every other use before it). `T: Send` lets the value move
// from the task's thread to the joiner's.
unsafe impl<T: Send> Sync for ScopedPacket<T> {}
// SAFETY: as for Sync.
unsafe impl<T: Send> Send for ScopedPacket<T> {}

impl<T> Drop for ScopedPacket<T> {
    fn drop(&mut self) {
        // SAFETY: the last reference: nobody else touches the cell.
        let r = self.result.with_mut(|c| unsafe { (*c).take() });
        match r {
            Some(Err(p)) => self.scope.record(p),
            other => drop(other),
        }
        self.scope.done_one();
    }
}

/// The handle of a task spawned in a [`Scope`]: [`join`](Self::join) waits for it. A handle
/// dropped unjoined leaves the task to the scope, which waits for it and propagates its
/// panic.
pub struct ScopedJoinHandle<'scope, T> {
    handle: JoinHandle<()>,
    packet: Arc<ScopedPacket<T>>,
    scope: PhantomData<&'scope ()>,
}

impl<T> core::fmt::Debug for ScopedJoinHandle<'_, T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ScopedJoinHandle")
            .field("id", &self.handle.id())
            .finish()
    }
}

impl<T> ScopedJoinHandle<'_, T> {
    /// The task's id.
    pub fn id(&self) -> u64 {
        self.handle.id()
    }

    /// Whether the task has ended.
    pub fn is_finished(&self) -> bool {
        self.handle.is_finished()
    }

    /// Waits for the task to end and returns its value.
    ///
    /// # Errors
    /// The task's panic, as a [`JoinError`] (the scope then does not propagate it), or a
    /// cancelled one if the runtime's shutdown cancelled the task.
    pub fn join(self) -> Result<T, JoinError> {
        let ScopedJoinHandle { handle, packet, .. } = self;
        let (name, id) = (handle.task.name.clone(), handle.id());
        handle.join()?;
        // SAFETY: the task ended (its join returned its outcome), so its one write is done and
        // ordered before; the task's closure has dropped its reference.
        let r = packet.result.with_mut(|c| unsafe { (*c).take() });
        match r {
            Some(Ok(v)) => Ok(v),
            Some(Err(p)) => Err(JoinError::panicked(name_or_default(name, id), id, p)),
            None => unreachable!("lagom: a scoped task ended without storing its result"),
        }
    }
}

/// A task's name as reports print it.
fn name_or_default(name: alloc::string::String, id: u64) -> alloc::string::String {
    match name.is_empty() {
        true => alloc::format!("task-{id}"),
        false => name,
    }
}

impl<'scope> Scope<'scope, '_> {
    /// Spawns `f` as a task of the scope's runtime; `f` may borrow anything that outlives the
    /// scope. The scope waits for it before it returns.
    ///
    /// # Panics
    /// If no stack can be mapped (the panic names the caller's location).
    #[track_caller]
    pub fn spawn<F, T>(&'scope self, f: F) -> ScopedJoinHandle<'scope, T>
    where
        F: FnOnce() -> T + Send + 'scope,
        T: Send + 'scope,
    {
        match self.spawn_with(Builder::new(), f) {
            Ok(h) => h,
            Err(e) => panic!("lagom::Scope::spawn: {e}"),
        }
    }

    /// Spawns `f` with the options of `b` (name, nice, slice, CPUs, stack size).
    ///
    /// # Errors
    /// As [`Builder::spawn`].
    pub fn spawn_with<F, T>(
        &'scope self,
        b: Builder,
        f: F,
    ) -> Result<ScopedJoinHandle<'scope, T>, Error>
    where
        F: FnOnce() -> T + Send + 'scope,
        T: Send + 'scope,
    {
        throttle(self.data.local());
        self.data.running.fetch_add(1, Ordering::Relaxed);
        let packet = Arc::new(ScopedPacket {
            result: UnsafeCell::new(None),
            scope: Arc::clone(&self.data),
        });
        let theirs = Arc::clone(&packet);
        let child = move || {
            let r = catch(f);
            // SAFETY: the one write, before the task's end (`ScopedPacket`'s Sync).
            theirs.result.with_mut(|c| unsafe { *c = Some(r) });
            drop(theirs);
        };
        // SAFETY: `child` borrows only what outlives `'scope`, and the scope does not end
        // before the packet's count is released, which only `child`'s end or drop does
        // (module doc, "Why it is sound"): it runs, is reclaimed below, or leaks.
        let job = unsafe { erase(child) };
        let handle = self.spawn_erased(b, job)?;
        Ok(ScopedJoinHandle {
            handle,
            packet,
            scope: PhantomData,
        })
    }

    /// Spawns `f` without a handle or a value: the scope waits for it and propagates its
    /// panic. For the task graph, which keeps its own results.
    pub(crate) fn spawn_detached<F>(&'scope self, b: Builder, f: F) -> Result<(), Error>
    where
        F: FnOnce() + Send + 'scope,
    {
        /// Counts the child done when it is dropped: after its closure ran, or unrun.
        struct Done(Arc<ScopeData>);
        impl Drop for Done {
            fn drop(&mut self) {
                self.0.done_one();
            }
        }
        throttle(self.data.local());
        self.data.running.fetch_add(1, Ordering::Relaxed);
        let done = Done(Arc::clone(&self.data));
        let child = move || {
            if let Err(p) = catch(f) {
                done.0.record(p);
            }
            drop(done);
        };
        // SAFETY: as in `spawn_with`: the count `done` holds is released only by `child`'s
        // end or drop.
        let job = unsafe { erase(child) };
        self.spawn_erased(b, job).map(drop)
    }

    /// Spawns the erased `job`; on failure drops it (the task never existed), which releases
    /// its count.
    fn spawn_erased(&self, b: Builder, job: Erased) -> Result<JoinHandle<()>, Error> {
        let (p, free) = (job.ptr, job.free);
        let h = spawn_inner(&self.data.shared, self.data.local(), b, move || job.run())
            .inspect_err(|_| {
                // SAFETY: the spawn failed before any task ran the closure that owned `job`,
                // and dropping that closure leaked `job`: these are its parts, neither run nor
                // freed.
                unsafe { Erased::reclaim(p, free) }
            })?;
        // The spawn's preemption point (`task::Builder::spawn`); outside tasks it does nothing.
        super::current::spawn_point();
        Ok(h)
    }
}

/// How many runnable tasks the spawning worker may have queued before a spawn in a scope
/// first lets them run (module doc, "Spawning ahead").
pub(crate) const SPAWN_BACKLOG: usize = 64;

/// Before a spawn in a scope by a task of its runtime: if the task's worker already has
/// [`SPAWN_BACKLOG`] runnable tasks, yield to them once (module doc, "Spawning ahead"). The
/// yield is a plain `schedule`, not `yield_now`: no cancellation point, so a spawn never
/// unwinds with a shutdown's cancellation.
#[inline]
fn throttle(local: Option<&WorkerThread>) {
    let Some(wt) = local else { return };
    if wt.worker().nr_running.load(Ordering::Relaxed) >= SPAWN_BACKLOG
        && crate::worker::with_current_task(|_| ()).is_some()
    {
        crate::sched::schedule(crate::sched::Reason::Yield);
    }
}

/// Makes a scope: tasks spawned in it with [`Scope::spawn`] may borrow from the caller's
/// stack; every one of them has ended when `scope` returns. The calling task waits for them
/// (it blocks as a task: its worker runs others meanwhile).
///
/// A panic of `f` is resumed once every task has ended; otherwise the first panic of a task
/// nobody joined is (rayon resumes the payload, as here; `std::thread::scope` panics with a
/// message of its own).
///
/// ```
/// let rt = lagom::Runtime::builder().build()?;
/// let sum = rt.block_on(|| {
///     let data = vec![1u64, 2, 3, 4];
///     let mut left = 0;
///     lagom::scope(|s| {
///         s.spawn(|| left = data[..2].iter().sum());
///         let right = s.spawn(|| data[2..].iter().sum::<u64>());
///         right.join().unwrap()
///     }) + left
/// });
/// assert_eq!(sum, 10);
/// # Ok::<(), lagom::Error>(())
/// ```
///
/// # Panics
/// Outside a task (from a plain thread use [`Runtime::scope`](crate::Runtime::scope)), with the
/// caller's location; and as said above.
#[track_caller]
pub fn scope<'env, F, T>(f: F) -> T
where
    F: for<'scope> FnOnce(&'scope Scope<'scope, 'env>) -> T,
{
    let Some(wt) = local() else {
        panic!(
            "lagom::scope must be called from inside a task, whose runtime runs the scope's \
             tasks; from a plain thread use Runtime::scope"
        );
    };
    scope_in(Arc::clone(&wt.shared), f)
}

/// [`scope`] on the runtime `shared`, from its task or from a plain thread (module doc).
pub(crate) fn scope_in<'env, F, T>(shared: Arc<Shared>, f: F) -> T
where
    F: for<'scope> FnOnce(&'scope Scope<'scope, 'env>) -> T,
{
    let scope = Scope {
        data: Arc::new(ScopeData {
            running: AtomicUsize::new(0),
            owner: current_waiter(),
            panic: AtomicPtr::new(ptr::null_mut()),
            shared,
        }),
        scope: PhantomData,
        env: PhantomData,
    };
    let guard = WaitGuard(&scope.data);
    let r = catch(|| f(&scope));
    scope.data.wait();
    core::mem::forget(guard);
    match r {
        Err(p) => resume(p),
        Ok(v) => match scope.data.take_panic() {
            Some(p) => resume(p),
            None => v,
        },
    }
}

/// `b` and its value, in `join`'s frame (module doc).
struct StackJob<B, RB> {
    f: UnsafeCell<Option<B>>,
    result: UnsafeCell<Option<RB>>,
}

/// A pointer to a [`StackJob`], the function that runs it, and the claim word that decides
/// who runs it: what `b`'s task carries.
struct JobRef {
    job: *const (),
    run: unsafe fn(*const ()),
    /// Set by whichever of the task and the owner comes first (module doc).
    claim: Arc<AtomicBool>,
}

// SAFETY: made only from a `StackJob` of a `Send` closure with a `Send` value, which the task
// runs on its thread, if it wins the claim, while the owner waits.
unsafe impl Send for JobRef {}

impl JobRef {
    /// Runs the job, unless the owner claimed it first.
    ///
    /// # Safety
    /// As for `run_job`, when this wins the claim.
    unsafe fn execute(self) {
        // AcqRel: the owner's claim (or ours) is one read-modify-write on one word: exactly
        // one of the two sees `false`.
        if self.claim.swap(true, Ordering::AcqRel) {
            // The owner runs `b` itself and does not wait for this task: `job` may be gone.
            return;
        }
        // SAFETY: per contract; `run` is `run_job` for the job's types, and the owner, which
        // lost the claim, waits for this task's end before it leaves the job's frame.
        unsafe { (self.run)(self.job) }
    }
}

/// Runs the job at `p`.
///
/// # Safety
/// `p` is a live `StackJob<B, RB>`, run once, whose owner does not touch it until the task
/// that runs this has ended.
unsafe fn run_job<B: FnOnce() -> RB, RB>(p: *const ()) {
    // SAFETY: per contract.
    let job = unsafe { &*p.cast::<StackJob<B, RB>>() };
    // SAFETY: the owner does not touch the cells until this task ended (per contract).
    let f = job.f.with_mut(|c| unsafe { (*c).take() });
    let r = f.expect("lagom: a join's job runs once")();
    // SAFETY: as above.
    job.result.with_mut(|c| unsafe { *c = Some(r) });
}

/// Waits for `b`'s task: a join that a cancellation may interrupt and the guard's drop resumes
/// (module doc).
struct JoinWait {
    handle: Option<JoinHandle<()>>,
}

impl JoinWait {
    /// Waits for the task's outcome (once), then recycles it.
    fn wait(&mut self) -> Option<Result<(), JoinError>> {
        let h = self.handle.as_ref()?;
        let r = loop {
            if let Some(r) = h.try_take(current_waiter) {
                break r;
            }
            wait_park();
        };
        if let Some(h) = self.handle.take() {
            super::recycle::recycle(h.task);
        }
        Some(r)
    }
}

impl Drop for JoinWait {
    fn drop(&mut self) {
        self.wait();
    }
}

/// Runs `a` and `b` at once and returns both values: `b` as a new task of the calling task's
/// runtime, `a` on the calling task, which then waits for `b` (it blocks as a task: its worker
/// runs others meanwhile) or, if `b`'s task has not started by the time `a` returned, runs `b`
/// itself (rayon's "pop it back", without touching the runqueue: the task, when it runs,
/// finds `b` taken and ends). Both may borrow from the caller's stack and may block (`park`,
/// `sleep`, channels, locks): `b` starts as a task of its own whenever `a` blocks or a worker
/// is free, so `a` may wait for `b`.
///
/// If either panics, the panic is resumed once both have ended (`a`'s if both panicked), as
/// rayon does.
///
/// ```
/// fn fib(n: u64) -> u64 {
///     if n < 12 {
///         return if n < 2 { n } else { fib(n - 1) + fib(n - 2) }; // sequential below 12
///     }
///     let (a, b) = lagom::join(|| fib(n - 1), || fib(n - 2));
///     a + b
/// }
/// let rt = lagom::Runtime::builder().build()?;
/// assert_eq!(rt.block_on(|| fib(20)), 6765);
/// # Ok::<(), lagom::Error>(())
/// ```
///
/// # Panics
/// Outside a task (`join`'s closures are tasks of the caller's runtime; from a plain thread
/// use [`Runtime::scope`](crate::Runtime::scope)), or if no stack can be mapped, with the
/// caller's location; and as said above.
#[track_caller]
pub fn join<A, B, RA, RB>(a: A, b: B) -> (RA, RB)
where
    A: FnOnce() -> RA,
    B: FnOnce() -> RB + Send,
    RB: Send,
{
    let Some(wt) = local() else {
        panic!(
            "lagom::join must be called from inside a task, whose runtime runs `b`; from a \
             plain thread use Runtime::scope"
        );
    };
    // Claimed `b`s leave tasks that end when they run: bound them as a scope bounds its
    // spawns (module doc, "Spawning ahead").
    throttle(Some(wt));
    let job = StackJob {
        f: UnsafeCell::new(Some(b)),
        result: UnsafeCell::new(None),
    };
    let claim = Arc::new(AtomicBool::new(false));
    let r = JobRef {
        job: (&raw const job).cast(),
        run: run_job::<B, RB>,
        claim: Arc::clone(&claim),
    };
    // The lifetime erasure: the task touches `job` only if it wins the claim, and then this
    // frame is not left before the task's outcome arrived, or at all (module doc, "Why it is
    // sound"): `JoinWait` waits in its drop if the wait below unwinds.
    let task = move || {
        // SAFETY: `r` points to `job`, run at most once, by this task if it wins the claim,
        // while this frame waits.
        unsafe { r.execute() }
    };
    let handle = match spawn_inner(&wt.shared, Some(wt), Builder::new(), task) {
        Ok(h) => h,
        Err(e) => panic!("lagom::join: {e}"),
    };
    let mut wait = JoinWait {
        handle: Some(handle),
    };
    let ra = catch(a);
    if !claim.swap(true, Ordering::AcqRel) {
        // `b`'s task has not started: run `b` here, and leave the task to end on its own (it
        // will find the claim taken and touch nothing of this frame).
        wait.handle = None;
        // SAFETY: this frame won the claim: nobody else touches `job`.
        let f = job.f.with_mut(|c| unsafe { (*c).take() });
        let rb = catch(f.expect("lagom: a join's job runs once"));
        return match (ra, rb) {
            (Err(p), _) | (Ok(_), Err(p)) => resume(p),
            (Ok(ra), Ok(rb)) => (ra, rb),
        };
    }
    let rb = wait.wait().expect("lagom: a join waits once");
    drop(wait);
    match (ra, rb) {
        (Err(p), _) => resume(p),
        (Ok(_), Err(e)) => resume(match e.try_into_panic() {
            Ok(p) => p,
            Err(_) => cancelled_payload(),
        }),
        (Ok(ra), Ok(())) => {
            // SAFETY: the task ended (its outcome arrived): its write is ordered before.
            let rb = job.result.with_mut(|c| unsafe { (*c).take() });
            (ra, rb.expect("lagom: a joined task stored its value"))
        }
    }
}

/// The payload of a shutdown's cancellation, to pass on a child's to its owner.
fn cancelled_payload() -> Payload {
    #[cfg(feature = "std")]
    return Box::new(crate::join_error::Cancelled);
    #[cfg(not(feature = "std"))]
    unreachable!("lagom: a cancellation without std")
}
