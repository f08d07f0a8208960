//! Where a fiber keeps its header and closure (`arch/fiber.rs`): at the top of its
//! stack when they take at most `1 / IN_STACK_SHARE` of it, else in a box. Both paths run the
//! closure, drop what it captured exactly once, align it as its type asks, keep the closure's
//! frames below the header, and leave the stack reusable.

mod fiber_util;

use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use lagom::arch::{DEFAULT_STACK_SIZE, DefaultStack, Fiber, IN_STACK_SHARE, MIN_STACK_SIZE, Stack};

/// Counts its drops.
struct Tracked(Arc<AtomicUsize>);

impl Drop for Tracked {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// A capture with an alignment above the 16 bytes the stack's top already has.
#[repr(align(4096))]
struct PageAligned(#[allow(dead_code)] [u8; 64]);

fn usable(stack: &DefaultStack) -> Range<usize> {
    stack.limit().as_ptr() as usize..stack.base().as_ptr() as usize
}

/// What a closure saw when it ran: the address of its capture, and of a local of its own.
#[derive(Default)]
struct Seen {
    capture: AtomicUsize,
    local: AtomicUsize,
}

/// Runs, on a fresh stack of `size` bytes, a closure that captures `payload` (and a drop
/// counter); returns the stack's usable range, the fiber's `stack_size`, what it saw, and the
/// stack back, after checking the capture was dropped exactly once.
fn run_with<P: Send + 'static>(
    size: usize,
    payload: P,
) -> (Range<usize>, usize, Arc<Seen>, DefaultStack) {
    let stack = DefaultStack::new(size).unwrap();
    let range = usable(&stack);
    let drops = Arc::new(AtomicUsize::new(0));
    let seen = Arc::new(Seen::default());
    let tracked = Tracked(drops.clone());
    let in_fiber = seen.clone();
    let fiber = Fiber::new("header", 7, stack, move || {
        let _keep = &tracked;
        let local = 0u8;
        in_fiber
            .capture
            .store(&raw const payload as usize, Ordering::SeqCst);
        in_fiber.local.store(
            std::hint::black_box(&raw const local) as usize,
            Ordering::SeqCst,
        );
    });
    let info_size = fiber.info().stack_size();
    let mut fibers = vec![fiber];
    fiber_util::run_round_robin(&mut fibers, None);
    let mut fiber = fibers.pop().unwrap();
    assert!(fiber.take_outcome().unwrap().is_ok());
    assert_eq!(
        drops.load(Ordering::SeqCst),
        1,
        "the capture is dropped once, by the run"
    );
    let stack = fiber.into_stack().expect("finished");
    assert_eq!(
        drops.load(Ordering::SeqCst),
        1,
        "and not again with the header"
    );
    (range, info_size, seen, stack)
}

#[test]
fn a_small_closure_lives_at_the_top_of_its_stack() {
    let (range, size, seen, _) = run_with(MIN_STACK_SIZE, [7u64; 4]);
    let top = range.start + size;
    assert!(size < range.len(), "the header must take some of the stack");
    assert!(size >= range.len() - range.len() / IN_STACK_SHARE);
    assert_eq!(top % 16, 0);
    let capture = seen.capture.load(Ordering::SeqCst);
    // The closure moves its captures into its frame before running, so the capture is seen
    // below the top, like the local: both run on the part of the stack below the header.
    for addr in [capture, seen.local.load(Ordering::SeqCst)] {
        assert!(
            (range.start..top).contains(&addr),
            "{addr:#x} outside {range:x?}"
        );
    }
}

#[test]
fn a_closure_over_the_share_is_boxed_and_keeps_the_whole_stack() {
    let big = [1u8; MIN_STACK_SIZE / IN_STACK_SHARE];
    let (range, size, seen, _) = run_with(MIN_STACK_SIZE, big);
    assert_eq!(
        size,
        range.len(),
        "a boxed header takes nothing from the stack"
    );
    let local = seen.local.load(Ordering::SeqCst);
    assert!(range.contains(&local));
    // The same closure fits in the share of a bigger stack.
    let (range, size, _, _) = run_with(DEFAULT_STACK_SIZE, big);
    assert!(size < range.len() - big.len());
}

#[test]
fn an_over_aligned_capture_is_aligned_on_both_paths() {
    // In the stack: 4 KiB of padding at most, well within 1/16 of 256 KiB.
    let (range, size, seen, _) = run_with(DEFAULT_STACK_SIZE, PageAligned([3; 64]));
    assert!(size < range.len());
    assert_eq!(
        (range.start + size) % 4096,
        0,
        "the header's slot starts at the top"
    );
    assert_eq!(seen.capture.load(Ordering::SeqCst) % 4096, 0);
    // Boxed: the header and closure, 8 KiB once aligned, exceed 1/16 of 64 KiB. (Not on a
    // 16 KiB stack: an unoptimized build makes several 4 KiB-aligned copies of the closure.)
    let (range, size, seen, _) = run_with(64 * 1024, PageAligned([3; 64]));
    assert_eq!(size, range.len());
    assert_eq!(seen.capture.load(Ordering::SeqCst) % 4096, 0);
}

#[test]
fn dropping_an_unrun_fiber_drops_its_closure_on_both_paths() {
    for (size, big) in [(MIN_STACK_SIZE, false), (MIN_STACK_SIZE, true)] {
        let drops = Arc::new(AtomicUsize::new(0));
        let tracked = Tracked(drops.clone());
        let pad = [0u8; MIN_STACK_SIZE / IN_STACK_SHARE];
        let stack = DefaultStack::new(size).unwrap();
        let fiber = if big {
            Fiber::new("unrun", 1, stack, move || drop((tracked, pad)))
        } else {
            Fiber::new("unrun", 1, stack, move || drop(tracked))
        };
        assert_eq!(fiber.info().stack_size() == size, big);
        assert_eq!(drops.load(Ordering::SeqCst), 0);
        let stack = fiber.into_stack().expect("never started");
        assert_eq!(drops.load(Ordering::SeqCst), 1, "big: {big}");
        drop(stack);
    }
}

#[test]
fn a_reused_stack_hosts_header_after_header() {
    let mut stack = DefaultStack::new(MIN_STACK_SIZE).unwrap();
    let ran = Arc::new(AtomicUsize::new(0));
    for round in 0..100usize {
        let ran_in = ran.clone();
        let word = [round; 8];
        let fiber = Fiber::new(format!("round-{round}"), round as u64, stack, move || {
            fiber_util::yield_now();
            assert_eq!(word, [round; 8]);
            ran_in.fetch_add(1, Ordering::SeqCst);
        });
        assert!(fiber.info().stack_size() < MIN_STACK_SIZE);
        assert_eq!(fiber.name(), format!("round-{round}"));
        let mut fibers = vec![fiber];
        assert_eq!(fiber_util::run_round_robin(&mut fibers, None), 2);
        stack = fibers.pop().unwrap().into_stack().expect("finished");
    }
    assert_eq!(ran.load(Ordering::SeqCst), 100);
}
