//! Creates many suspended contexts and reports the resident memory from `/proc/self/status`:
//! fibers on default-size stacks that started and switched away once, or (`--tasks`) lagom
//! tasks parked on a runtime, with the time their spawns took.
//!
//! ```text
//! cargo run --release -p lagom-examples --example contexts -- [COUNT] [--tasks] [--features SPEC]
//! ```
//!
//! COUNT defaults to 100 000. When the kernel refuses a stack mapping the example says so
//! (the error names the limit and the fix) and reports the figures for the contexts it did
//! create.

use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use lagom::arch::{Context, DefaultStack, Fiber, switch};
use lagom_examples::{features_arg, usage_error};

const USAGE: &str = "usage: contexts [COUNT] [--tasks] [--features SPEC]

Creates COUNT suspended contexts (default 100000) and reports the resident memory.
  (default)        fibers on default-size stacks, each started and switched away from once
  --tasks          lagom tasks instead: COUNT tasks spawned from one task on a runtime, each
                   parked; also reports the time the spawns took and the shutdown, which
                   cancels them
  --features SPEC  scheduler features for --tasks, on top of the defaults
                   (default: $LAGOM_FEATURES)";

struct Args {
    count: usize,
    tasks: bool,
    features: Option<String>,
}

fn parse_args() -> Result<Args, lexopt::Error> {
    use lexopt::prelude::*;
    let mut a = Args {
        count: 100_000,
        tasks: false,
        features: None,
    };
    let mut count = None;
    let mut p = lexopt::Parser::from_env();
    while let Some(arg) = p.next()? {
        match arg {
            Long("tasks") => a.tasks = true,
            Long("features") => a.features = Some(features_arg(p.value()?)?),
            Short('h') | Long("help") => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            Value(v) if count.is_none() => count = Some(v.parse::<usize>()?),
            _ => return Err(arg.unexpected()),
        }
    }
    if let Some(c) = count {
        if c == 0 {
            return Err("COUNT must be at least 1".into());
        }
        a.count = c;
    }
    Ok(a)
}

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
    lagom_examples::default_sigpipe();
    let args = parse_args().unwrap_or_else(|e| usage_error(e, USAGE));
    let max_maps = std::fs::read_to_string("/proc/sys/vm/max_map_count").unwrap_or_default();
    let before = vm_rss_kib();
    let (n, refused, after) = match args.tasks {
        true => tasks(&args),
        false => {
            let (n, refused) = fibers(args.count);
            (n, refused, vm_rss_kib())
        }
    };
    println!(
        "suspended contexts:   {n} (requested {}), stack {} KiB each",
        args.count,
        lagom::arch::DEFAULT_STACK_SIZE / 1024
    );
    println!("VmRSS before:         {before} KiB");
    println!(
        "VmRSS with them:      {after} KiB ({:.1} MiB)",
        after as f64 / 1024.0
    );
    println!(
        "per context:          {:.2} KiB",
        after.saturating_sub(before) as f64 / n.max(1) as f64
    );
    println!(
        "projected for 100000: {:.1} MiB",
        before as f64 / 1024.0
            + after.saturating_sub(before) as f64 / n.max(1) as f64 * 100_000.0 / 1024.0
    );
    println!("vm.max_map_count:     {}", max_maps.trim());
    if let Some(e) = refused {
        println!("stopped early: {e}");
    }
    // The fibers are suspended mid-run: dropping them leaks their stacks by design, and the
    // process exits right after.
    std::process::exit(0);
}

/// `count` fibers started and suspended once; how many were made, and the error that
/// stopped it early.
fn fibers(count: usize) -> (usize, Option<lagom::Error>) {
    let idle = Box::leak(Box::new(Context::new()));
    let idle_ptr: *mut Context = idle;
    IDLE.set(idle_ptr);
    let mut fibers = Vec::with_capacity(count);
    for i in 0..count {
        let stack = match DefaultStack::with_default_size() {
            Ok(s) => s,
            Err(e) => return (leak(fibers), Some(e)),
        };
        let mut f = Fiber::new("ctx", i as u64, stack, || {
            let (me, idle) = (CURRENT.get(), IDLE.get());
            // SAFETY: me is this fiber's context and idle the suspended main context.
            unsafe { switch(me, idle) };
        });
        // SAFETY: the fiber is not running; idle (leaked) outlives it.
        unsafe { f.set_parent(idle_ptr) };
        CURRENT.set(f.context());
        // SAFETY: idle is this thread's context; the fiber is fresh.
        unsafe { switch(idle_ptr, f.context()) };
        fibers.push(f);
    }
    (leak(fibers), None)
}

/// Keeps the suspended fibers alive until the process exits; their count.
fn leak<T>(v: Vec<T>) -> usize {
    let n = v.len();
    std::mem::forget(v);
    n
}

/// `args.count` parked tasks spawned from one task; prints the spawn time and the shutdown's;
/// how many were made, the error that stopped it early, and VmRSS while they were parked.
fn tasks(args: &Args) -> (usize, Option<lagom::Error>, u64) {
    let mut b = lagom::Runtime::builder();
    if let Some(f) = &args.features {
        b = b.features(f.as_str());
    }
    let rt = b.build().unwrap_or_else(|e| {
        eprintln!("error: {e}");
        std::process::exit(1)
    });
    let parked = Arc::new(AtomicUsize::new(0));
    let count = args.count;
    let p = Arc::clone(&parked);
    let (n, spawn_time, refused) = rt.block_on(move || {
        let t0 = Instant::now();
        let mut n = 0;
        let mut refused = None;
        for _ in 0..count {
            let p = Arc::clone(&p);
            let spawned = lagom::task::Builder::new().spawn(move || {
                p.fetch_add(1, Ordering::Relaxed);
                loop {
                    lagom::task::park();
                }
            });
            match spawned {
                Ok(_detached) => n += 1,
                Err(e) => {
                    refused = Some(e);
                    break;
                }
            }
        }
        (n, t0.elapsed(), refused)
    });
    let t0 = Instant::now();
    while parked.load(Ordering::Relaxed) < n && t0.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(1));
    }
    let live = vm_rss_kib();
    println!(
        "spawned {n} tasks from one task in {:.1} ms ({:.0} ns per spawn); all parked after \
         {:.1} ms more",
        spawn_time.as_secs_f64() * 1e3,
        spawn_time.as_nanos() as f64 / n.max(1) as f64,
        t0.elapsed().as_secs_f64() * 1e3
    );
    let t0 = Instant::now();
    let st = rt.shutdown_timeout(Duration::from_secs(30));
    println!(
        "shutdown cancelled {} of them in {:.1} ms",
        st.total().cancelled,
        t0.elapsed().as_secs_f64() * 1e3
    );
    (n, refused, live)
}
