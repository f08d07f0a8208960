//! Creates many suspended contexts (fibers that started and yielded once) on default-size
//! stacks and reports the resident memory from `/proc/self/status`.
//!
//! ```text
//! cargo run --release -p lagom --example contexts [COUNT]     # COUNT defaults to 100000
//! ```
//!
//! Each default stack is two kernel mappings (guard + usable part), so COUNT above about
//! 32 000 needs `vm.max_map_count` above its default of 65530; when the kernel refuses a
//! mapping the example says so, and reports the figures for the contexts it did create.

use std::cell::Cell;

use lagom::arch::{Context, DefaultStack, Fiber, switch};

thread_local! {
    static CURRENT: Cell<*mut Context> = const { Cell::new(std::ptr::null_mut()) };
    static IDLE: Cell<*mut Context> = const { Cell::new(std::ptr::null_mut()) };
}

/// VmRSS of this process in KiB.
fn vm_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS line")
}

fn main() {
    let count: usize = match std::env::args().nth(1) {
        Some(a) => a
            .parse()
            .unwrap_or_else(|_| panic!("COUNT must be a number, got {a:?}")),
        None => 100_000,
    };
    let max_maps = std::fs::read_to_string("/proc/sys/vm/max_map_count").unwrap_or_default();
    let mut idle = Box::new(Context::new());
    let idle_ptr: *mut Context = &mut *idle;
    IDLE.set(idle_ptr);
    let before = vm_rss_kib();
    let mut fibers = Vec::with_capacity(count);
    let mut refused = None;
    for i in 0..count {
        let stack = match DefaultStack::with_default_size() {
            Ok(s) => s,
            Err(e) => {
                refused = Some(e);
                break;
            }
        };
        let mut f = Fiber::new("ctx", i as u64, stack, || {
            let (me, idle) = (CURRENT.get(), IDLE.get());
            // SAFETY: me is this fiber's context and idle the suspended main context.
            unsafe { switch(me, idle) };
        });
        // SAFETY: the fiber is not running; idle outlives it.
        unsafe { f.set_parent(idle_ptr) };
        CURRENT.set(f.context());
        // SAFETY: idle is this thread's context; the fiber is fresh.
        unsafe { switch(idle_ptr, f.context()) };
        fibers.push(f);
    }
    let after = vm_rss_kib();
    let n = fibers.len();
    println!(
        "suspended contexts:   {n} (requested {count}), stack {} KiB each",
        lagom::arch::DEFAULT_STACK_SIZE / 1024
    );
    println!("VmRSS before:         {before} KiB");
    println!(
        "VmRSS after:          {after} KiB ({:.1} MiB)",
        after as f64 / 1024.0
    );
    println!(
        "per context:          {:.2} KiB",
        (after - before) as f64 / n.max(1) as f64
    );
    println!(
        "projected for 100000: {:.1} MiB",
        before as f64 / 1024.0 + (after - before) as f64 / n.max(1) as f64 * 100_000.0 / 1024.0
    );
    println!("vm.max_map_count:     {}", max_maps.trim());
    if let Some(e) = refused {
        println!("stopped early: {e}");
    }
    // The fibers are suspended mid-run: dropping them leaks their stacks by design, and the
    // process exits right after.
    std::process::exit(0);
}
