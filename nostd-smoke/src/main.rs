//! lagom without std: a `#![no_std]` `#![no_main]` program that starts a runtime on two workers,
//! runs a ring of tasks that block and wake each other, checks what they computed, and exits 0.
//!
//! Everything it uses — worker threads, pinning, futexes, stacks, the clock — reaches the OS
//! through `libc` alone; memory comes from libc's `malloc` through the global allocator below.
//!
//! ```text
//! cargo run --release --manifest-path nostd-smoke/Cargo.toml
//! ```
#![no_std]
#![no_main]

extern crate alloc;

use alloc::format;
use alloc::vec::Vec;
use core::alloc::{GlobalAlloc, Layout};

use lagom::Runtime;
// `Arc` and `atomic` through `lagom::sync`, as `std::sync` has them (here `alloc`'s and
// `core`'s).
use lagom::sync::atomic::{AtomicUsize, Ordering};
use lagom::sync::{Arc, Mutex, OnceLock};
use lagom::task::{self, Unparker};
use lagom_topology::Topology;

/// The global allocator: libc's `malloc`, `posix_memalign` for large alignments, `free`.
struct Malloc;

// SAFETY: every pointer handed out comes from malloc/posix_memalign with at least the
// requested size and alignment, and is released with free.
unsafe impl GlobalAlloc for Malloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.align() <= 16 {
            // SAFETY: malloc has no preconditions; it returns null or a 16-aligned block.
            return unsafe { libc::malloc(layout.size()) }.cast();
        }
        let mut p = core::ptr::null_mut();
        // SAFETY: the alignment is a power of two and a multiple of the pointer size.
        match unsafe { libc::posix_memalign(&mut p, layout.align(), layout.size()) } {
            0 => p.cast(),
            _ => core::ptr::null_mut(),
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: `ptr` came from `alloc` above, so from malloc or posix_memalign.
        unsafe { libc::free(ptr.cast()) }
    }
}

#[global_allocator]
static ALLOC: Malloc = Malloc;

/// Writes `s` to standard error.
fn eprint(s: &str) {
    // SAFETY: the buffer is valid for `s.len()` bytes; fd 2 is standard error.
    unsafe { libc::write(2, s.as_ptr().cast(), s.len()) };
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
    eprint(&format!("nostd-smoke: {info}\n"));
    // SAFETY: abort has no preconditions.
    unsafe { libc::abort() }
}

/// The precompiled `alloc` library was built with unwinding, so it references the personality
/// routine even under `panic = "abort"`; nothing here unwinds, so it is never called. (On
/// nightly, `-Z build-std` with `panic_abort` would make this unnecessary.)
#[unsafe(no_mangle)]
extern "C" fn rust_eh_personality() {}

// `_Unwind_Resume`, referenced by that same precompiled code and never reached, lives in
// libgcc_s, which every glibc system has.
#[link(name = "gcc_s")]
unsafe extern "C" {}

/// Tasks in the ring.
const TASKS: usize = 32;
/// Times the turn goes round the ring.
const ROUNDS: usize = 20;

/// What the ring's tasks share.
struct Ring {
    /// Turns taken so far: task `turn % TASKS` holds the next one.
    turn: AtomicUsize,
    /// Every task's unparker, published once after spawning (empty before), behind a
    /// `lagom::sync::Mutex` (which, without `std`, blocks the task that waits for it).
    unparkers: Mutex<Vec<Unparker>>,
}

/// The first task to start: every task races to set it, in a `static` (`OnceLock::new` is
/// `const`), and the others block on the winner's initialiser, which yields.
static FIRST: OnceLock<usize> = OnceLock::new();

/// Task `i`: waits (parked) for its turn, takes it, wakes the next task; `ROUNDS` times.
fn member(ring: &Ring, i: usize) -> usize {
    let first = *FIRST.get_or_init(|| {
        task::yield_now();
        i
    });
    assert!(first < TASKS);
    let mut sum = 0;
    for round in 0..ROUNDS {
        let next = loop {
            let turn = ring.turn.load(Ordering::Acquire);
            let next = ring.unparkers.lock().unwrap().get((i + 1) % TASKS).cloned();
            match next {
                Some(u) if turn == round * TASKS + i => break u,
                _ => task::park(),
            }
        };
        sum += ring.turn.fetch_add(1, Ordering::AcqRel);
        next.unpark();
    }
    sum
}

fn run() -> Result<(), lagom::Error> {
    let topo = Topology::detect()?;
    let cpus: Vec<usize> = topo.allowed_cpus().iter().take(2).collect();
    let rt = Runtime::builder()
        .worker_cpus(cpus.iter().copied())
        .build()?;
    let total = rt.block_on(|| {
        let ring = Arc::new(Ring {
            turn: AtomicUsize::new(0),
            unparkers: Mutex::new(Vec::new()),
        });
        let handles: Vec<_> = (0..TASKS)
            .map(|i| {
                let ring = Arc::clone(&ring);
                task::spawn(move || member(&ring, i))
            })
            .collect();
        *ring.unparkers.lock().unwrap() = handles.iter().map(|h| h.unparker()).collect();
        for h in &handles {
            h.unparker().unpark();
        }
        let sums: Vec<usize> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        assert_eq!(ring.turn.load(Ordering::Acquire), TASKS * ROUNDS);
        sums
    });
    // Task i took turns i, i + TASKS, i + 2·TASKS, …: check each task's sum of turn numbers.
    for (i, sum) in total.iter().enumerate() {
        let want: usize = (0..ROUNDS).map(|r| r * TASKS + i).sum();
        assert_eq!(*sum, want, "task {i} took the wrong turns");
    }
    assert!(FIRST.get().is_some_and(|&i| i < TASKS));
    let stats = rt.shutdown();
    assert_eq!(
        (stats.live_tasks, stats.live_stacks),
        (0, 0),
        "everything freed"
    );
    let t = stats.total();
    eprint(&format!(
        "nostd-smoke: {TASKS} tasks × {ROUNDS} rounds on CPUs {cpus:?}: ok \
         ({} blocks, {} wakeups, {} kicks)\n",
        t.blocks,
        t.wakeups(),
        t.kicks
    ));
    Ok(())
}

/// The C entry point.
#[unsafe(no_mangle)]
extern "C" fn main(_argc: libc::c_int, _argv: *const *const libc::c_char) -> libc::c_int {
    match run() {
        Ok(()) => 0,
        Err(e) => {
            eprint(&format!("nostd-smoke: {e}\n"));
            1
        }
    }
}
