//! Spawning tasks (`task::Builder`, `spawn`): the kernel's `fork` and `wake_up_new_task` —
//! build the task control block with its fiber and join packet, register it with its home
//! worker, select a CPU and enqueue it.

use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::ptr::NonNull;
use core::time::Duration;

use super::join::JoinHandle;
use crate::Error;
use crate::arch::{DefaultStack, Fiber, MIN_STACK_SIZE};
use crate::locking::atomic::Ordering;
use crate::sched::{exit_current, finish_task_switch};
use crate::tcb::{Complete, Completion, PacketStore, ValueSlot, next_id, write_inline};
use crate::wake::{enqueue_on, select_cpu};
use crate::worker::{Packet, Shared, Task, TaskRef, Waiter, WorkerThread, local};
use lagom_policy::{MAX_CUSTOM_SLICE, MIN_CUSTOM_SLICE, SchedEntity, WakeFlags, clamp_nice};

/// Options for one task: name, nice level, custom slice, CPU affinity, stack size.
///
/// Spawn it from inside a task with [`Builder::spawn`], or from outside with
/// [`crate::Runtime::spawn_with`].
#[derive(Debug, Clone, Default)]
pub struct Builder {
    pub(crate) name: Option<String>,
    pub(crate) nice: i32,
    pub(crate) slice: Option<Duration>,
    pub(crate) cpus: Option<Vec<usize>>,
    pub(crate) stack_size: Option<usize>,
    pub(crate) migrate: bool,
}

impl Builder {
    /// Default options: nice 0, the runtime's slice, every worker, the runtime's stack size.
    pub fn new() -> Builder {
        Builder::default()
    }

    /// The task's name (default `task-<id>`; an empty name reads as the default too). Unnamed
    /// tasks cost no allocation for it: the default is only formatted when asked for.
    pub fn name(mut self, name: impl Into<String>) -> Builder {
        self.name = Some(name.into());
        self
    }

    /// The nice level, −20 (most CPU) to 19 (least). A nice level is the kernel's concept, so
    /// it follows the kernel's rule for out-of-range values: it is clamped to that range, as
    /// `setpriority(2)` clamps, not refused (settings that are not the kernel's are refused
    /// with an [`Error`] naming the value and the range).
    pub fn nice(mut self, nice: i32) -> Builder {
        self.nice = clamp_nice(nice);
        self
    }

    /// A custom slice (request length). A slice is the kernel's concept, so it follows the
    /// kernel's rule: it is clamped to 0.1 ms – 100 ms as the kernel clamps
    /// `sched_attr.sched_runtime`, not refused. Shorter slices get earlier deadlines: lower
    /// latency.
    pub fn slice(mut self, slice: Duration) -> Builder {
        self.slice = Some(slice);
        self
    }

    /// Restricts the task to these OS CPUs (each must be one of the runtime's workers: another
    /// CPU, or an empty list, is an [`Error::AffinityOutsideWorkers`] at spawn).
    pub fn cpus(mut self, cpus: impl IntoIterator<Item = usize>) -> Builder {
        self.cpus = Some(cpus.into_iter().collect());
        self
    }

    /// The task's stack size in bytes (default: its runtime's,
    /// [`runtime::Builder::stack_size`](crate::runtime::Builder::stack_size), 2 MiB unless
    /// set there; at least [`MIN_STACK_SIZE`]: less is an [`Error::StackTooSmall`] at spawn).
    /// A task given its own size gets a stack mapped for it, not one from its worker's pool.
    /// As for
    /// [`Runtime`](crate::Runtime)'s default, a closure that takes at most 1/16 of it is kept
    /// at its top.
    pub fn stack_size(mut self, bytes: usize) -> Builder {
        self.stack_size = Some(bytes);
        self
    }

    /// Lets this task resume on another worker thread once it has started, whatever its
    /// runtime's setting: wakeup placement and the load balancers may then move it as the
    /// kernel moves threads. By default a task that has started always resumes on the worker
    /// thread it last ran on (the crate's "Soundness" section); a runtime built with
    /// [`crate::runtime::Builder::allow_migration`] lets all its tasks move.
    ///
    /// ```
    /// # let rt = lagom::Runtime::builder().build()?;
    /// let h = rt.block_on(|| {
    ///     let b = lagom::task::Builder::new().name("crunch");
    ///     // SAFETY: the closure holds nothing thread-local across its blocking calls and
    ///     // never asks which thread it runs on.
    ///     let b = unsafe { b.allow_migration() };
    ///     b.spawn(|| (0..10u64).map(|i| { lagom::task::yield_now(); i }).sum::<u64>())
    ///         .unwrap()
    ///         .join()
    ///         .unwrap()
    /// });
    /// assert_eq!(h, 45);
    /// # Ok::<(), lagom::Error>(())
    /// ```
    ///
    /// # Safety
    ///
    /// The task may be suspended by any blocking call (`park`, `sleep`, `join`,
    /// `yield_now`, `cond_resched`, a spawn — a preemption point, [`Builder::spawn`] — and
    /// whatever is built on them) on one OS thread and resumed on another. The caller
    /// promises that the task's code, including the libraries it calls (but not the tasks it
    /// spawns, which have their own setting):
    ///
    /// 1. holds across a blocking call no reference into thread-local storage and no value
    ///    that refers to it or belongs to its thread (an `Rc` to thread-local state such as
    ///    `rand::thread_rng()`, a `std::sync::MutexGuard`, any `!Send` value obtained from
    ///    the thread);
    /// 2. does not touch thread-local storage in a function that also blocks where both
    ///    could be inlined into one body (the compiler may reuse a thread-local's address
    ///    computed before the call after it);
    /// 3. does not rely on its thread's identity staying the same across a blocking call;
    /// 4. does not block in a destructor that runs while a panic unwinds (std counts panics
    ///    per thread).
    ///
    /// [`crate::runtime::Builder::allow_migration`] says why each matters: breaking the promise is a
    /// data race on another thread's storage, which `Send` cannot rule out.
    pub unsafe fn allow_migration(mut self) -> Builder {
        self.migrate = true;
        self
    }

    /// Spawns `f` as a task of the runtime the calling task runs on.
    ///
    /// Like the kernel's `fork`, the spawn is a preemption point: once the task is queued,
    /// the calling task goes through [`super::cond_resched`]'s check (without its
    /// cancellation point: a spawn never unwinds), so if its request is used up, a wakeup
    /// asked for its CPU or a timer is due, it switches away here and resumes when picked
    /// again — possibly after the new task has run. A task that spawns in a loop thus shares
    /// its worker with the children it queues there.
    ///
    /// # Errors
    /// [`Error::NotInTask`] outside tasks; [`Error::StackTooSmall`], [`Error::StackMap`],
    /// [`Error::AffinityOutsideWorkers`] for bad options or no memory.
    pub fn spawn<T, F>(self, f: F) -> Result<JoinHandle<T>, Error>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        // A `let else`, not `ok_or`: that would build (and drop) the error on every spawn.
        let Some(wt) = local() else {
            return Err(Error::NotInTask);
        };
        // Borrowed: the worker thread outlives `spawn_inner`, which does not switch.
        let h = spawn_inner(&wt.shared, Some(wt), self, f)?;
        super::current::spawn_point();
        Ok(h)
    }
}

/// Spawns `f` on the runtime the calling task runs on. A preemption point, as
/// [`Builder::spawn`] says.
///
/// # Panics
/// Outside tasks (use [`crate::Runtime::spawn`] there), or if no stack can be mapped; the
/// panic names the caller's location.
#[track_caller]
pub fn spawn<T, F>(f: F) -> JoinHandle<T>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    match Builder::new().spawn(f) {
        Ok(h) => h,
        Err(e) => panic!("lagom::task::spawn: {e}"),
    }
}

/// Creates the task and makes it runnable (CPU selection as for a wakeup, from `local`).
pub(crate) fn spawn_inner<T, F>(
    shared: &Arc<Shared>,
    local: Option<&WorkerThread>,
    b: Builder,
    f: F,
) -> Result<JoinHandle<T>, Error>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    let affinity = match &b.cpus {
        None => None,
        Some(cpus) => {
            let mut bits = alloc::vec![0u64; shared.workers.len().div_ceil(64)];
            for &cpu in cpus {
                let Some(i) = shared.workers.iter().position(|w| w.os_cpu == cpu) else {
                    return Err(Error::AffinityOutsideWorkers {
                        cpu,
                        workers: shared.workers.iter().map(|w| w.os_cpu).collect(),
                    });
                };
                bits[i / 64] |= 1 << (i % 64);
            }
            if cpus.is_empty() {
                return Err(Error::AffinityOutsideWorkers {
                    cpu: usize::MAX,
                    workers: shared.workers.iter().map(|w| w.os_cpu).collect(),
                });
            }
            Some(bits)
        }
    };
    let stack = match (b.stack_size, local) {
        (Some(size), _) if size < MIN_STACK_SIZE => {
            return Err(Error::StackTooSmall {
                requested: size,
                minimum: MIN_STACK_SIZE,
            });
        }
        (Some(size), _) => DefaultStack::new(size)?,
        (None, Some(wt)) => wt.pool.borrow_mut().get()?,
        (None, None) => DefaultStack::new(shared.stack_size)?,
    };
    let id = next_id();
    // Empty for unnamed tasks (no allocation); `current()`, panics and the overflow report
    // print `task-<id>` for it.
    let name = b.name.unwrap_or_default();
    // The task's allocation comes first: the packet goes in it when it fits (`tcb/completion.rs`),
    // and the closure needs the packet's address. Built in place: `Arc::new(Task::new(..))`
    // compiled to a ~270-byte copy from the stack. A spawn by a task takes its
    // worker's spare allocation if there is one (`recycle.rs`).
    // SAFETY: `wt` is the calling worker, whose spare this thread is the one to touch.
    let spare = local.and_then(|wt| unsafe { wt.worker().tasks.take_spare() });
    let uninit = match spare {
        Some(old) => {
            let p = Arc::into_raw(old).cast_mut();
            // SAFETY: a spare is the only reference to a dead task (`recycle.rs`): its fields
            // are dropped once, here, and the allocation, whose count stays 1, is written
            // whole again below before the `Arc` is rebuilt from `p`; a panic in between
            // leaks it rather than dropping it twice.
            unsafe { core::ptr::drop_in_place(p) };
            p.cast::<core::mem::MaybeUninit<Task>>()
        }
        None => Arc::into_raw(Arc::<Task>::new_uninit()).cast_mut(),
    };
    let task_ptr = uninit.cast::<Task>();
    let (completion, packet) = if PacketStore::fits::<T, Waiter>() {
        // SAFETY: the packet fits; the store is the task's, written below with the task as
        // its completion, and `write_inline` follows right after.
        unsafe { Completion::inline::<T>(&raw mut (*task_ptr).packet_store) }
    } else {
        let packet = Packet::<T>::new();
        let at = NonNull::from(&*packet);
        (Completion::from(packet as Arc<dyn Complete<Waiter>>), at)
    };
    // Not `Arc` clones: the task's completion keeps the packet alive (`tcb/packet.rs`).
    let slot = ValueSlot::new(packet);
    // The fiber's copy of the name (for overflow and panic reports); `String::clone` costs
    // ~20 instructions even for an empty name.
    let fiber_name = if name.is_empty() {
        String::new()
    } else {
        name.clone()
    };
    let mut fiber = Fiber::new(fiber_name, id, stack, move || {
        // First run: complete the switch that brought us here.
        finish_task_switch();
        // Its task-locals end with its closure, inside the task, also when it unwinds
        // (`local.rs`).
        let v = {
            let _locals = super::local::DropOnExit;
            f()
        };
        // SAFETY: the task's one store, just before its closure ends; the fiber's exit hook
        // (`sched::exit_current`) then calls `complete` on this OS thread. The task, and so
        // its completion, which owns the packet, outlives its closure.
        unsafe { slot.set(v) };
    });
    fiber.set_fp_control(shared.fp_control);
    fiber.set_on_exit(exit_current);
    let mut se = SchedEntity::new(b.nice);
    if let Some(s) = b.slice {
        let ns = u64::try_from(s.as_nanos()).unwrap_or(u64::MAX);
        se.set_custom_slice(Some(ns.clamp(MIN_CUSTOM_SLICE, MAX_CUSTOM_SLICE)));
    }
    let inline = PacketStore::fits::<T, Waiter>();
    // SAFETY: the allocation is fresh (or a spare's, its old task dropped) and `uninit` its
    // only pointer; it is written once, whole, then its inline packet (if any) as
    // `Completion::inline` requires, before `assume_init`. `uninit` came from `into_raw` of
    // an `Arc<MaybeUninit<Task>>` or of an `Arc<Task>`, the same size and alignment.
    let task: TaskRef = unsafe {
        (*uninit).write(Task::new(
            Some(fiber),
            se,
            id,
            name,
            (affinity, b.migrate || shared.allow_migration),
            completion,
            Arc::clone(shared),
        ));
        if inline {
            write_inline(packet);
        }
        Arc::from_raw(uninit).assume_init()
    };
    crate::worker::trace::spawn(shared, &task);
    let local_idx = local.map(|wt| wt.index);
    let prev = local_idx.unwrap_or_else(|| {
        shared.next_outside.fetch_add(1, Ordering::Relaxed) % shared.workers.len()
    });
    // The registry's reference; home and slot are published with the task (`tcb/registry.rs`).
    let reg = &shared.workers[prev].tasks;
    let slot = match local {
        // SAFETY: `prev` is the calling worker, whose own part this thread is the one to touch.
        Some(wt) => unsafe { reg.insert_own(Arc::clone(&task), |s| wt.pool.borrow_mut().put(s)) },
        None => reg.insert_foreign(Arc::clone(&task)),
    };
    task.reg_home.store(prev, Ordering::Relaxed);
    task.reg_slot.store(slot, Ordering::Relaxed);
    // A new task: placement is free (the migration contract binds started tasks only).
    let (target, added) = select_cpu(shared, &task, prev, local_idx, local, WakeFlags::FORK);
    task.cpu.store(target, Ordering::Relaxed);
    // Activated at once where it goes, under that worker's lock (`wake_up_new_task`).
    enqueue_on(shared, local, target, &task, WakeFlags::FORK | added);
    Ok(JoinHandle {
        packet,
        id,
        task,
        registered: None,
    })
}
