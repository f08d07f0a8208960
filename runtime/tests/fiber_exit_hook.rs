//! `Fiber::set_on_exit`: an ended fiber calls its exit hook on its own stack and switches for
//! the last time to the context the hook returns (a scheduler's next fiber), or to its parent
//! when the hook returns null.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use lagom::arch::{Context, DefaultStack, Fiber, switch};

/// What ran, in order.
static LOG: Mutex<Vec<&str>> = Mutex::new(Vec::new());
/// The context `to_next` returns.
static NEXT: AtomicUsize = AtomicUsize::new(0);

fn log(what: &'static str) {
    LOG.lock().unwrap().push(what);
}

fn to_next() -> *const Context {
    log("hook a");
    NEXT.load(Ordering::Relaxed) as *const Context
}

fn to_parent() -> *const Context {
    log("hook b");
    std::ptr::null()
}

#[test]
fn an_ended_fiber_switches_to_the_context_its_exit_hook_returns() {
    let mut idle = Box::new(Context::new());
    let idle_ptr: *mut Context = &mut *idle;
    let stack = || DefaultStack::with_default_size().unwrap();
    let mut a = Fiber::new("a", 1, stack(), || log("a"));
    let mut b = Fiber::new("b", 2, stack(), || log("b"));
    a.set_on_exit(to_next);
    b.set_on_exit(to_parent);
    NEXT.store(b.context() as usize, Ordering::Relaxed);
    // SAFETY: neither fiber runs; `idle` outlives both. `a`'s hook hands over to `b`, which
    // has not started, and `b`'s end returns here through its parent link.
    unsafe {
        a.set_parent(idle_ptr);
        b.set_parent(idle_ptr);
        switch(idle_ptr, a.context());
    }
    // `b` ran after `a`'s hook without coming back here in between.
    assert_eq!(*LOG.lock().unwrap(), ["a", "hook a", "b", "hook b"]);
    assert!(a.is_finished() && b.is_finished());
    assert!(a.take_outcome().unwrap().is_ok());
    assert!(b.take_outcome().unwrap().is_ok());
    assert!(a.into_stack().is_some() && b.into_stack().is_some());
}
