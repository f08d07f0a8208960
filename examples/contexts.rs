//! Creates many suspended contexts and reports the memory they take from `/proc/self/status`
//! (resident, page tables, virtual size), the process's mappings and minor page faults:
//! fibers on default-size stacks that started and switched away once, or (`--tasks`) lagom
//! tasks parked on a runtime, with the time their spawns took; `--stack-size` and `--depth`
//! give the tasks' stack size and how much of it each touches. `--churn` instead runs COUNT
//! short tasks that each touch `--depth` KiB of stack, a thousand alive at a time, and reports
//! what the workers' stack pools keep resident before and after they give memory back.
//!
//! ```text
//! cargo run --release -p lagom-examples --example contexts -- [COUNT] [--tasks|--churn]
//!     [--stack-size KIB] [--depth KIB] [--features SPEC]
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

const USAGE: &str = "usage: contexts [COUNT] [--tasks|--churn] [--stack-size KIB] [--depth KIB]
                [--features SPEC]

Creates COUNT suspended contexts (default 100000) and reports the resident memory.
  (default)        fibers on default-size stacks, each started and switched away from once
  --tasks          lagom tasks instead: COUNT tasks spawned from one task on a runtime, each
                   parked; also reports the time the spawns took and the shutdown, which
                   cancels them
  --churn          COUNT short tasks, a thousand alive at a time, each touching --depth KiB
                   of its stack and ending; reports the memory the stack pools keep, before
                   and after they give it back (an idle second)
  --stack-size KIB the runtime's default task stack size for --tasks and --churn (default:
                   lagom's default)
  --depth KIB      stack each task touches (--tasks: before it parks; default 0, 64 for
                   --churn)
  --workers N      the runtime's worker count (default: one per allowed CPU); with 1, the
                   process's CPU time for the spawns is one thread's work, which a loaded
                   machine delays but does not inflate
  --features SPEC  scheduler features for --tasks, on top of the defaults
                   (default: $LAGOM_FEATURES)";

struct Args {
    count: usize,
    tasks: bool,
    churn: bool,
    stack_kib: Option<usize>,
    depth_kib: Option<usize>,
    workers: Option<usize>,
    features: Option<String>,
}

fn parse_args() -> Result<Args, lexopt::Error> {
    use lexopt::prelude::*;
    let mut a = Args {
        count: 100_000,
        tasks: false,
        churn: false,
        stack_kib: None,
        depth_kib: None,
        workers: None,
        features: None,
    };
    let mut count = None;
    let mut p = lexopt::Parser::from_env();
    while let Some(arg) = p.next()? {
        match arg {
            Long("tasks") => a.tasks = true,
            Long("churn") => a.churn = true,
            Long("stack-size") => a.stack_kib = Some(p.value()?.parse()?),
            Long("depth") => a.depth_kib = Some(p.value()?.parse()?),
            Long("workers") => a.workers = Some(p.value()?.parse()?),
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
    if let Some(k) = a.stack_kib
        && !(16..=MAX_STACK_KIB).contains(&k)
    {
        return Err(format!("--stack-size {k}: give 16 to {MAX_STACK_KIB} KiB").into());
    }
    // A frame of `touch_stack` takes its 4 KiB and up to as much again in an unoptimised
    // build: half the stack is what a depth may touch without overflowing it.
    let stack = a.stack_kib.unwrap_or(DEFAULT_STACK_KIB);
    let d = a.depth_kib.unwrap_or(if a.churn { 64 } else { 0 });
    if d > stack / 2 {
        return Err(format!(
            "--depth {d}: a task may touch at most half its stack ({} KiB of {stack} KiB); \
             raise --stack-size or lower --depth",
            stack / 2
        )
        .into());
    }
    Ok(a)
}

/// The runtime's default task stack, std's 2 MiB (`lagom::runtime::Builder::stack_size`).
const DEFAULT_STACK_KIB: usize = 2048;
/// The largest `--stack-size` taken: 1 GiB a task.
const MAX_STACK_KIB: usize = 1024 * 1024;

thread_local! {
    static CURRENT: Cell<*mut Context> = const { Cell::new(std::ptr::null_mut()) };
    static IDLE: Cell<*mut Context> = const { Cell::new(std::ptr::null_mut()) };
}

/// A `/proc/self/status` field in KiB (`VmRSS`, `VmPTE`, `VmSize`).
fn status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("{field} line in /proc/self/status"))
}

/// VmRSS of this process in KiB.
fn vm_rss_kib() -> u64 {
    status_kib("VmRSS")
}

/// The process's mappings (lines of `/proc/self/maps`), which `vm.max_map_count` bounds.
fn mappings() -> usize {
    std::fs::read_to_string("/proc/self/maps")
        .map(|m| m.lines().count())
        .unwrap_or(0)
}

/// What the contexts take while they live: VmRSS, VmPTE, VmSize (KiB), mappings, minor
/// faults so far.
struct Live(u64, u64, u64, usize, u64);

impl Live {
    fn now() -> Live {
        Live(
            vm_rss_kib(),
            status_kib("VmPTE"),
            status_kib("VmSize"),
            mappings(),
            minor_faults(),
        )
    }
}

/// The process's CPU time so far (user + system, `/proc/self/stat` fields 14 and 15), in ms.
fn cpu_ms() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let rest = stat.rsplit_once(')').map_or("", |r| r.1);
    let f: Vec<u64> = rest
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|v| v.parse().ok())
        .collect();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    f.iter().sum::<u64>() as f64 * 1000.0 / hz
}

/// Minor page faults of the process so far (`/proc/self/stat` field 10): pages the kernel
/// committed on first touch, a count no load on the machine changes.
fn minor_faults() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The command name (field 2) may hold spaces: count from after its closing parenthesis.
    let rest = stat.rsplit_once(')').map_or("", |r| r.1);
    rest.split_whitespace()
        .nth(7)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Touches `kib` KiB of the calling task's stack, a page at a time, in frames of 4 KiB.
#[inline(never)]
fn touch_stack(kib: usize) -> u64 {
    if kib == 0 {
        return 0;
    }
    let frame = std::hint::black_box([kib as u8; 4096]);
    touch_stack(kib.saturating_sub(4)) + u64::from(frame[17])
}

fn main() {
    lagom_examples::default_sigpipe();
    let args = parse_args().unwrap_or_else(|e| usage_error(e, USAGE));
    let max_maps = std::fs::read_to_string("/proc/sys/vm/max_map_count").unwrap_or_default();
    if args.churn {
        churn(&args);
        std::process::exit(0);
    }
    let before = vm_rss_kib();
    let (pte0, size0, maps0, faults0) = (
        status_kib("VmPTE"),
        status_kib("VmSize"),
        mappings(),
        minor_faults(),
    );
    let (n, refused, Live(after, pte, size, maps, faults)) = match args.tasks {
        true => tasks(&args),
        false => {
            let (n, refused) = fibers(args.count);
            (n, refused, Live::now())
        }
    };
    println!(
        "suspended contexts:   {n} (requested {}), stack {} KiB each",
        args.count,
        args.stack_kib
            .unwrap_or(lagom::arch::DEFAULT_STACK_SIZE / 1024)
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
    let per = |a: u64, b: u64| a.saturating_sub(b) as f64 / n.max(1) as f64;
    println!(
        "page tables (VmPTE):  {pte} KiB ({:.2} KiB per context)",
        per(pte, pte0)
    );
    println!(
        "virtual size:         {:.1} GiB ({:.0} KiB per context)",
        size as f64 / (1024.0 * 1024.0),
        per(size, size0)
    );
    println!(
        "minor faults:         {:.2} per context",
        per(faults, faults0)
    );
    println!(
        "mappings:             {maps} ({:+} for them)",
        maps as i64 - maps0 as i64
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
/// how many were made, the error that stopped it early, and what they took while parked.
fn tasks(args: &Args) -> (usize, Option<lagom::Error>, Live) {
    let mut b = lagom::Runtime::builder();
    if let Some(f) = &args.features {
        b = b.features(f.as_str());
    }
    if let Some(k) = args.stack_kib {
        b = b.stack_size(k * 1024);
    }
    if let Some(w) = args.workers {
        b = b.worker_threads(w);
    }
    let depth = args.depth_kib.unwrap_or(0);
    let rt = b.build().unwrap_or_else(|e| {
        eprintln!("error: {e}");
        std::process::exit(1)
    });
    let parked = Arc::new(AtomicUsize::new(0));
    let count = args.count;
    let p = Arc::clone(&parked);
    let cpu0 = cpu_ms();
    let (n, spawn_time, refused) = rt.block_on(move || {
        let t0 = Instant::now();
        let mut n = 0;
        let mut refused = None;
        for _ in 0..count {
            let p = Arc::clone(&p);
            let spawned = lagom::task::Builder::new().spawn(move || {
                std::hint::black_box(touch_stack(depth));
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
    let live = Live::now();
    let cpu = cpu_ms() - cpu0;
    println!(
        "spawned {n} tasks from one task in {:.1} ms ({:.0} ns per spawn); all parked after \
         {:.1} ms more",
        spawn_time.as_secs_f64() * 1e3,
        spawn_time.as_nanos() as f64 / n.max(1) as f64,
        t0.elapsed().as_secs_f64() * 1e3
    );
    println!(
        "process CPU time for the spawns and first runs: {cpu:.0} ms ({:.0} ns per task)",
        cpu * 1e6 / n.max(1) as f64
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

/// `--churn`: COUNT short tasks touching `--depth` KiB each, a thousand at a time; the memory
/// the stack pools keep after them, then after an idle second and a half (the pools' trim).
fn churn(args: &Args) {
    let mut b = lagom::Runtime::builder();
    if let Some(k) = args.stack_kib {
        b = b.stack_size(k * 1024);
    }
    let rt = b.build().unwrap_or_else(|e| {
        eprintln!("error: {e}");
        std::process::exit(1)
    });
    let depth = args.depth_kib.unwrap_or(64);
    let count = args.count;
    let before = vm_rss_kib();
    let t0 = Instant::now();
    rt.block_on(move || {
        let mut left = count;
        while left > 0 {
            let wave = left.min(1000);
            let hs: Vec<_> = (0..wave)
                .map(|_| lagom::task::spawn(move || std::hint::black_box(touch_stack(depth))))
                .collect();
            for h in hs {
                h.join().unwrap();
            }
            left -= wave;
        }
    });
    let took = t0.elapsed();
    let kept = vm_rss_kib();
    std::thread::sleep(Duration::from_millis(1500));
    let trimmed = vm_rss_kib();
    println!(
        "churn: {count} tasks touching {depth} KiB of {} KiB stacks, 1000 alive at a time, in \
         {:.1} ms",
        args.stack_kib
            .unwrap_or(lagom::arch::DEFAULT_STACK_SIZE / 1024),
        took.as_secs_f64() * 1e3
    );
    println!("VmRSS before:         {before} KiB");
    println!("VmRSS after them:     {kept} KiB (the pools keep the touched pages)");
    println!("VmRSS idle 1.5 s:     {trimmed} KiB (after the pools' trim)");
}
