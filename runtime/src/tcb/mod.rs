//! The task control block (the kernel's `task_struct`): a green thread's identity, its state
//! word and the flags of the wakeup protocol, its scheduling entity and its fiber — with the
//! data that hangs off it: the registry that owns live tasks, the runqueue payload, the join
//! packet, the park token and the waiter of a join.
//!
//! This is the bottom of the threaded driver: every layer above uses it, and it names none of
//! them. The one thing a task must know of the layer above — the runtime it belongs to, which a
//! waker on any thread needs to find the task's workers — is the type parameter `R` of
//! [`Task<R>`]: the task keeps an `Arc<R>` and never looks inside. The per-CPU layer fixes `R`
//! to its `Shared` (`worker::Task`, `worker::TaskRef`, …), so the parameter costs nothing at
//! run time.
//!
//! Invariant: *a task is on at most one runqueue or wakelist at a time, and at most one worker
//! executes it.*
//!
//! ## The state word (`state`)
//!
//! | state | meaning | who moves it out |
//! |---|---|---|
//! | `RUNNING` | runnable or running | the task itself (→ `BLOCKED`), its exit (→ `DEAD`) |
//! | `BLOCKED` | the task announced it will sleep | one waker (→ `WAKING`, the claim) or the task cancelling its own sleep (→ `RUNNING`) |
//! | `WAKING` | a waker owns the wakeup and will make it runnable | the enqueuer (→ `RUNNING`) |
//! | `DEAD` | the closure ended; the worker frees the task | nobody |
//!
//! The claim `BLOCKED → WAKING` is a compare-exchange, so exactly one waker wins; it replaces
//! the kernel's `pi_lock`. The transition functions return `#[must_use]` results.
//!
//! ## The flags
//!
//! * `on_rq` — queued on the runqueue of worker `cpu` (possibly delayed). Written only under
//!   that runqueue's lock; `false` is stored with **Release** after the entity was saved back
//!   into the task (O2), and wakers load it with **Acquire**.
//! * `on_cpu` — a worker executes the task or is still switching away from it. Set under the
//!   runqueue lock when the task is picked; cleared with **Release** by `finish_task_switch`
//!   on the next context's stack, once the task's registers are saved; wakers and the balancer
//!   load it with **Acquire** before touching the task's context (O2/O3).
//! * `cpu` — the worker index whose runqueue (or wakelist) owns the task. Written by a waker
//!   in its exclusive phase (claimed, off every queue, off every CPU) before it publishes the
//!   task through a lock or a wakelist push, or by the balancer holding both runqueue locks.
//!   Read by wakers after the Acquire of `on_rq`/`on_cpu`, and re-checked under the lock (O4).
//!
//! ## The scheduling part (`Sched`)
//!
//! The entity, the runqueue handle and the fiber live in a cell accessed only by the thread
//! that owns the task's scheduling at that moment: the holder of the lock of the runqueue the
//! task is queued on, or the worker that runs it (its `on_cpu` phase). Hand-offs between owners
//! go through that lock, a wakelist push/take, or the `on_cpu` Release/Acquire pair.
//!
//! The two owners overlap while a task that is still queued (delayed, or woken before it
//! switched away) is being switched away from: the lock holder may then requeue it in place.
//! That is sound because the switching worker touches `Sched` only under the lock; what it
//! writes after the lock is released — the saved registers — lives in the fiber's memory,
//! behind `ctx`, and is handed on only through the `on_cpu` pair (loom models
//! `delayed_wakeup_during_block` and `lost_wakeup`).
//!
//! ## Files
//!
//! * `registry.rs`, `slots.rs` — the owning reference of every live task, per home worker;
//! * `queued.rs` — [`QueuedTask`], the runqueue's (and wakelist's) borrowed reference;
//! * `packet.rs`, `completion.rs` — the join packet and how a task reaches it;
//! * `token.rs` — the park token: the sleeper's and the unparker's halves of `park`/`unpark`;
//! * `waiter.rs` — [`Waiter`], who waits for a join: a task or a plain OS thread.

mod completion;
mod packet;
mod queued;
mod registry;
mod slots;
mod token;
mod waiter;

pub(crate) use completion::{Completion, PacketStore, write_inline};
pub(crate) use packet::{Complete, Outcome, Packet, ValueSlot};
pub(crate) use queued::QueuedTask;
pub(crate) use registry::{FOREIGN, Registry};
pub(crate) use token::{ParkStep, prepare_park, set_token};
#[cfg(loom)]
pub(crate) use waiter::ThreadParker;
pub(crate) use waiter::{Waiter, thread_parker};

use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::ptr::NonNull;

use crate::arch::{Context, DefaultStack, Fiber};
use crate::locking::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use crate::locking::cell::UnsafeCell;
use crate::locking::llist::{LListNode, Linked};
use lagom_policy::{Handle, SchedEntity};

/// Runnable or running.
pub(crate) const RUNNING: u32 = 0;
/// Announced a sleep; not yet claimed by a waker.
pub(crate) const BLOCKED: u32 = 1;
/// Claimed by a waker, not yet enqueued.
pub(crate) const WAKING: u32 = 2;
/// Finished; to be freed by its worker.
pub(crate) const DEAD: u32 = 3;

/// [`Task::cancel`]: no cancellation.
pub(crate) const CANCEL_NONE: u32 = 0;
/// [`Task::cancel`]: a shutdown asked the blocked task to unwind; it raises the cancellation
/// at its next cancellation point (`task/cancel.rs`).
pub(crate) const CANCEL_REQUESTED: u32 = 1;
/// [`Task::cancel`]: the task raised the cancellation and is unwinding (or caught it): it is
/// not raised again, and its blocking calls no longer sleep.
pub(crate) const CANCEL_RAISED: u32 = 2;

/// The outcome of a waker's claim ([`Task::claim`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub(crate) enum Claim {
    /// This waker owns the wakeup (`BLOCKED → WAKING`).
    Won,
    /// The task was not blocked (running, already being woken, or dead): nothing to do.
    NotBlocked,
}

/// The scheduling part of a task, owned as the module doc describes.
pub(crate) struct Sched {
    /// The entity while the task is on no runqueue.
    pub(crate) se: SchedEntity,
    /// Its handle while it is queued.
    pub(crate) handle: Option<Handle>,
    /// The fiber (taken when the task is freed).
    pub(crate) fiber: Option<Fiber<DefaultStack>>,
    /// Whether it was never enqueued (EnqueueKind::Initial on first enqueue).
    pub(crate) new: bool,
    /// The worker the task last ran on, whose idle context the fiber's parent link names;
    /// [`NEVER_RAN`] until a worker first switches into it. Written when a worker marks the
    /// task running (`sched::prepare_switch`, under its runqueue lock).
    pub(crate) parent_worker: usize,
}

/// [`Sched::parent_worker`] of a task that has not run yet.
pub(crate) const NEVER_RAN: usize = usize::MAX;

impl Sched {
    /// Whether the task has started running: from then on, unless it may migrate
    /// ([`Task::migratable`]), it resumes only on [`parent_worker`](Self::parent_worker)
    /// (the migration contract, `wake/select.rs`).
    pub(crate) fn started(&self) -> bool {
        self.parent_worker != NEVER_RAN
    }
}

/// A task control block of a runtime `R` (module doc). Shared through [`TaskRef`].
pub(crate) struct Task<R: 'static> {
    link: LListNode,
    /// The state word (module doc).
    pub(crate) state: AtomicU32,
    /// Queued on the runqueue of `cpu` (module doc).
    pub(crate) on_rq: AtomicBool,
    /// Executed, or being switched away from, by a worker (module doc).
    pub(crate) on_cpu: AtomicBool,
    /// The owning worker's index (module doc).
    pub(crate) cpu: AtomicUsize,
    /// The park token: `true` when an unpark is pending (see `park.rs`).
    pub(crate) token: AtomicBool,
    /// The shutdown's cancellation of this task: [`CANCEL_NONE`], [`CANCEL_REQUESTED`] (set
    /// with Release by the worker that sweeps the task's registry, before it unparks the
    /// task, whose wakeup then orders it before the task's Acquire load) or
    /// [`CANCEL_RAISED`] (set by the task itself). The protocol is in `lagom::runtime`'s module
    /// doc; the task's side in `task/cancel.rs`.
    pub(crate) cancel: AtomicU32,
    /// The task sleeps queued as delayed (DELAY_DEQUEUE). Set with Release by the worker
    /// that delayed it (under its lock), cleared under the lock when the delay ends; a
    /// waker reads it with Acquire (TTWU_QUEUE_DELAYED: the RFC's ordering argument).
    pub(crate) sched_delayed: AtomicBool,
    /// The wakelist entry is a delayed wakeup (TTWU_QUEUE_DELAYED): the owner finishes the
    /// dequeue and selects a CPU. Written by the claiming waker before the push.
    pub(crate) wake_delayed: AtomicBool,
    /// The waker's worker index for a delayed wakeup (`usize::MAX`: from outside).
    pub(crate) wake_cpu: AtomicUsize,
    /// The `WakeFlags` bits that travel with the task's wakelist entry (`wake/queue.rs`,
    /// `queue_wakelist`; written before the push): a wakeup's activation flags, or a delayed
    /// wakeup's waker flags.
    pub(crate) wake_flags: AtomicU32,
    /// The kernel's `recent_used_cpu`: the previous CPU of the task's last CPU selection
    /// (`usize::MAX`: none yet). Written and read by whoever owns the task's wakeup (the
    /// claiming waker, or the drain of a delayed wakeup), Relaxed: a stale value is only a
    /// hint.
    pub(crate) recent_cpu: AtomicUsize,
    /// The task's record of the tasks it wakes (`record_wakee`, `wake_wide`: the kernel's
    /// `wakee_flips`, `wakee_flip_decay_ts`, `last_wakee`; `lagom_policy::WakeeState`).
    /// Written only by the task itself while it runs, as a waker (`wake/select.rs`), and
    /// read by its wakers as the wakee's flips: hints, Relaxed, and plain atomics that the
    /// loom models need not interleave (no protocol step depends on them).
    pub(crate) wakee_flips: core::sync::atomic::AtomicU32,
    /// See `wakee_flips`.
    pub(crate) wakee_decay_ts: core::sync::atomic::AtomicU64,
    /// See `wakee_flips` (a task id; 0: none).
    pub(crate) last_wakee: core::sync::atomic::AtomicU64,
    /// The worker whose registry holds the task, and its slot there (`registry.rs`): written
    /// by the spawner before the first enqueue publishes the task.
    pub(crate) reg_home: AtomicUsize,
    /// See `reg_home`.
    pub(crate) reg_slot: AtomicUsize,
    /// The token of the worker timer the task waits for (`worker/timer.rs`), 0 for none:
    /// stored by the task when it arms one, cleared by whichever comes first of the expiry
    /// (which then unparks it) and the task's own early return (`task/park.rs`). Relaxed: a
    /// stale read only skips or keeps a wakeup that `park`'s callers absorb either way.
    pub(crate) timer: AtomicU64,
    /// Scheduling state (module doc).
    pub(crate) sched: UnsafeCell<Sched>,
    /// The fiber's saved context; stable for the task's life.
    pub(crate) ctx: *mut Context,
    /// Under loom, which cannot run the asm switch: the stand-in for the registers it saves
    /// into `*ctx`. A model's switch-away writes it before `on_cpu` is cleared; a waker reads
    /// it once its `on_cpu` wait is over, where the context becomes its to hand on (loom
    /// model `lost_wakeup`, mutant `finish_relaxed_on_cpu`), and a model's switch into the
    /// task reads it as the restore (loom model `on_cpu_handoff`).
    #[cfg(loom)]
    pub(crate) loom_ctx: UnsafeCell<u64>,
    /// Identity.
    pub(crate) id: u64,
    /// Name.
    pub(crate) name: String,
    /// Worker indices the task may run on (`None`: all), one bit each.
    pub(crate) affinity: Option<Vec<u64>>,
    /// Once started, the task may resume on a worker other than the one it last ran on:
    /// the `unsafe` migration opt-in of its runtime or its builder (`Builder::allow_migration`,
    /// `task::Builder::allow_migration`). `false`, the default, is the migration contract:
    /// every path that picks a CPU for a started task keeps it where it last ran
    /// (`wake/select.rs`, `sched/balance.rs`), and `sched::prepare_switch` aborts the
    /// process if one ever did not. Fixed at spawn.
    pub(crate) migratable: bool,
    /// The runtime it belongs to (wakers from any thread find its workers here); opaque to
    /// this layer (module doc).
    pub(crate) shared: Arc<R>,
    /// Delivers the outcome to the join handle (`join.rs`): called once, by the exit hook
    /// (`sched/exit.rs`) or, for a task that never ended (it still has its fiber), by
    /// shutdown. Kept until the task is freed: the join handle, which holds a reference to the
    /// task, reaches the packet through this one (no second `Arc` of the packet). The packet
    /// is in `packet_store` when it fits (no allocation of its own, `completion.rs`).
    pub(crate) completion: Completion<Waiter<R>>,
    /// Where `completion`'s packet lives when it fits (`completion.rs`); `completion` points
    /// into it, so a task never moves once in its `Arc`.
    pub(crate) packet_store: PacketStore,
    /// The task's `task_local!` values (`task/local.rs`), made on first use. Touched only
    /// by the task itself while it runs, and emptied by it when its closure returns or
    /// unwinds; what is left is dropped with the task.
    pub(crate) locals: UnsafeCell<Locals>,
}

/// The `task_local!` values of a task: each key's address, and its value.
pub(crate) type Locals = Vec<(usize, alloc::boxed::Box<dyn core::any::Any + Send>)>;

// SAFETY: every field shared between threads is an atomic or sits in `sched`, whose access
// discipline (module doc) makes one thread at a time its owner; `ctx` points into the fiber,
// which follows the same discipline; the runtime `R` is shared as an `Arc`.
unsafe impl<R: Send + Sync + 'static> Send for Task<R> {}
// SAFETY: as for Send.
unsafe impl<R: Send + Sync + 'static> Sync for Task<R> {}

/// The reference-counted task pointer. A worker registry (`registry.rs`) holds one while the
/// task lives; a runqueue ([`QueuedTask`]) and a wakelist entry (`wake::queue_wakelist`)
/// borrow the registry's; a worker's spare slot holds the only one of a joined task kept for
/// reuse (`task/recycle.rs`).
pub(crate) type TaskRef<R> = Arc<Task<R>>;

// SAFETY: `link` is a field of `Task`; `from_node` subtracts its offset.
unsafe impl<R: 'static> Linked for Task<R> {
    fn node(this: NonNull<Self>) -> NonNull<LListNode> {
        // SAFETY: `this` points to a live task, so the field pointer is in bounds.
        unsafe { NonNull::new_unchecked(&raw mut (*this.as_ptr()).link) }
    }
    unsafe fn from_node(node: NonNull<LListNode>) -> NonNull<Self> {
        let offset = core::mem::offset_of!(Task<R>, link);
        // SAFETY: the node lies `offset` bytes into a live task (the caller's contract).
        unsafe { NonNull::new_unchecked(node.as_ptr().byte_sub(offset).cast::<Task<R>>()) }
    }
}

impl<R: 'static> Task<R> {
    /// Inlined so that a caller writing it into its allocation builds it in place.
    ///
    /// A new task around `fiber` (`None` only in loom models, which never switch), runnable
    /// (state `RUNNING`), on no queue (its `cpu` is set by the spawner once chosen), with
    /// its affinity and whether it may migrate once started ([`Task::migratable`]).
    #[inline(always)]
    pub(crate) fn new(
        fiber: Option<Fiber<DefaultStack>>,
        se: SchedEntity,
        id: u64,
        name: String,
        (affinity, migratable): (Option<Vec<u64>>, bool),
        completion: impl Into<Completion<Waiter<R>>>,
        shared: Arc<R>,
    ) -> Task<R> {
        let ctx = fiber.as_ref().map_or(core::ptr::null_mut(), Fiber::context);
        Task {
            link: LListNode::new(),
            state: AtomicU32::new(RUNNING),
            on_rq: AtomicBool::new(false),
            on_cpu: AtomicBool::new(false),
            cpu: AtomicUsize::new(0),
            token: AtomicBool::new(false),
            cancel: AtomicU32::new(CANCEL_NONE),
            sched_delayed: AtomicBool::new(false),
            wake_delayed: AtomicBool::new(false),
            wake_cpu: AtomicUsize::new(usize::MAX),
            wake_flags: AtomicU32::new(0),
            recent_cpu: AtomicUsize::new(usize::MAX),
            wakee_flips: core::sync::atomic::AtomicU32::new(0),
            wakee_decay_ts: core::sync::atomic::AtomicU64::new(0),
            last_wakee: core::sync::atomic::AtomicU64::new(0),
            reg_home: AtomicUsize::new(usize::MAX),
            reg_slot: AtomicUsize::new(usize::MAX),
            timer: AtomicU64::new(0),
            sched: UnsafeCell::new(Sched {
                se,
                handle: None,
                fiber,
                new: true,
                parent_worker: NEVER_RAN,
            }),
            ctx,
            #[cfg(loom)]
            loom_ctx: UnsafeCell::new(0),
            id,
            name,
            affinity,
            migratable,
            shared,
            completion: completion.into(),
            packet_store: PacketStore::new(),
            locals: UnsafeCell::new(Vec::new()),
        }
    }

    /// Whether the task may run on worker `i`.
    pub(crate) fn allowed(&self, i: usize) -> bool {
        match &self.affinity {
            None => true,
            Some(words) => words.get(i / 64).is_some_and(|w| w & (1 << (i % 64)) != 0),
        }
    }

    /// The task announces a sleep (`set_current_state(TASK_INTERRUPTIBLE)`): stores `BLOCKED`
    /// then `fence(SeqCst)`, so that its re-check of the wait condition is ordered after the
    /// store, against the waker's condition store + fence + state load (the lost-wakeup
    /// handshake, loom model 1). The store is Release so that a waker whose claim (Acquire)
    /// reads it also sees `on_rq = true` of the enqueue that preceded this run (O1).
    pub(crate) fn set_blocked(&self) {
        self.state.store(BLOCKED, Ordering::Release);
        #[cfg(not(lagom_mutant = "ttwu_no_sleeper_fence"))]
        crate::locking::atomic::fence(Ordering::SeqCst);
    }

    /// Checks, in debug builds and under loom, that the task may be freed or reused: dead, off
    /// every runqueue and off every CPU. A task freed while a worker still switches away from
    /// it is written after its free (`finish_task_switch` clears its `on_cpu`): memcheck
    /// reports that write (feature `valgrind`), but loom, which does not model the
    /// allocation, cannot; this check makes the loom models and the debug tests fail at the
    /// free instead (mutant `put_dead_before_clear_on_cpu`). `at` names the caller. Relaxed
    /// loads: each caller is ordered after the task's last switch-out already (it cleared
    /// `on_cpu` itself, or took the task from a list or a unique `Arc` that the clearing
    /// worker published after it).
    #[inline(always)]
    pub(crate) fn check_freeable(&self, at: &str) {
        if cfg!(any(debug_assertions, loom)) {
            let (state, on_cpu, on_rq) = (
                self.state.load(Ordering::Relaxed),
                self.on_cpu.load(Ordering::Relaxed),
                self.on_rq.load(Ordering::Relaxed),
            );
            if state != DEAD || on_cpu || on_rq {
                freed_in_use(self.id, at, state == DEAD, on_cpu, on_rq);
            }
        }
    }

    /// The task cancels its own sleep (its condition came true before it slept). Fails if a
    /// waker claimed it first; that waker will make it runnable.
    #[must_use]
    pub(crate) fn cancel_block(&self) -> bool {
        self.state
            .compare_exchange(BLOCKED, RUNNING, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    }

    /// A shutdown that frees the task without resuming it makes it unwakeable first: its
    /// state becomes `DEAD`, unless a waker holds its claim (`WAKING`: that wakeup is in
    /// flight), so that a later wakeup — a joiner's, a `task::blocking` closure's that ends
    /// after the shutdown, an outside `Unparker`'s — finds it not blocked and touches no queue
    /// of the stopped runtime (whose runqueues the shutdown replaces).
    pub(crate) fn retire(&self) {
        let mut s = self.state.load(Ordering::Relaxed);
        while s != WAKING && s != DEAD {
            match self
                .state
                .compare_exchange(s, DEAD, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return,
                Err(now) => s = now,
            }
        }
    }

    /// A waker's claim: `BLOCKED → WAKING`. Acquire on success: the waker then reads `on_rq`
    /// and `cpu` written before the task blocked (O1).
    pub(crate) fn claim(&self) -> Claim {
        #[cfg(not(any(lagom_mutant = "ttwu_no_claim", lagom_mutant = "ttwu_claim_relaxed")))]
        let won = self
            .state
            .compare_exchange(BLOCKED, WAKING, Ordering::Acquire, Ordering::Relaxed)
            .is_ok();
        // Mutant: the claim without Acquire. The waker's later Acquire loads of `on_rq` and
        // `on_cpu` do not make up for it: each may read a value older than the one the
        // previous round published, and nothing then orders what the waker reads of the task
        // after the previous round's writes (loom model `two_wakers` at three preemptions:
        // the enqueue reads the entity before the dequeue that stored it).
        #[cfg(lagom_mutant = "ttwu_claim_relaxed")]
        let won = self
            .state
            .compare_exchange(BLOCKED, WAKING, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok();
        // Mutant: a plain check then store; two wakers may both "win".
        #[cfg(lagom_mutant = "ttwu_no_claim")]
        let won = self.state.load(Ordering::Acquire) == BLOCKED && {
            self.state.store(WAKING, Ordering::Relaxed);
            true
        };
        if won { Claim::Won } else { Claim::NotBlocked }
    }

    /// Runs `f` on the scheduling part.
    ///
    /// # Safety
    /// The caller owns the task's scheduling (module doc): it holds the lock of the runqueue
    /// the task is queued on or being queued on, or runs the task, or is its only owner.
    pub(crate) unsafe fn sched<T>(&self, f: impl FnOnce(&mut Sched) -> T) -> T {
        // SAFETY: the caller's contract makes this the only access.
        self.sched.with_mut(|s| f(unsafe { &mut *s }))
    }
}

/// [`Task::check_freeable`] failed: a bug of lagom's, about to corrupt memory. Under loom the
/// model panics; otherwise the process aborts with the message (a panic here would unwind
/// into whatever task the worker switched to).
#[cold]
#[inline(never)]
fn freed_in_use(id: u64, at: &str, dead: bool, on_cpu: bool, on_rq: bool) -> ! {
    let msg = alloc::format!(
        "lagom: internal error: {at} frees task {id} while it is {}{}{}; aborting\n",
        if dead { "dead" } else { "not dead" },
        if on_cpu { ", still on_cpu" } else { "" },
        if on_rq { ", still on_rq" } else { "" },
    );
    #[cfg(loom)]
    panic!("{msg}");
    #[cfg(not(loom))]
    {
        crate::sys::signal::write_stderr(msg.as_bytes());
        crate::sys::signal::abort()
    }
}

/// Task ids are process-wide and never reused (a plain counter: no protocol hangs on it).
static NEXT_ID: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(1);

/// The next task id.
pub(crate) fn next_id() -> u64 {
    NEXT_ID.fetch_add(1, core::sync::atomic::Ordering::Relaxed)
}
