//! `schbench`: lagom's port of schbench, the scheduler wakeup-latency benchmark, written from
//! a description of its behaviour, never from schbench's GPL C.
//!
//! Message threads each wake a group of worker threads; every worker, once woken, sleeps a
//! little, does some matrix math under a per-CPU lock, and goes back to wait. It reports the
//! wakeup latency (message thread's post to the worker running), the request latency
//! (sleep + lock + math) and the requests per second, in schbench's tables and JSON.
//!
//! The same workload runs as lagom tasks (`--runtime lagom`, the default) or as plain OS
//! threads blocking in futex waits (`--runtime os`), so the two schedulers can be compared
//! side by side. `--help` lists the options; the book's `docs/src/tools/schbench.md`
//! lists every difference from schbench.
//!
//! ```text
//! cargo run --release --example schbench -- [-m N] [-t N] [-r SECS] [--runtime os] …
//! ```

#[path = "schbench/control.rs"]
mod control;
#[path = "schbench/cpus.rs"]
mod cpus;
#[path = "schbench/finish.rs"]
mod finish;
#[path = "schbench/hist.rs"]
mod hist;
#[path = "schbench/json.rs"]
mod json;
#[path = "schbench/lagom_rt.rs"]
mod lagom_rt;
#[path = "schbench/matrix.rs"]
mod matrix;
#[path = "schbench/opts.rs"]
mod opts;
#[path = "schbench/os.rs"]
mod os;
#[path = "schbench/report.rs"]
mod report;
#[path = "schbench/rps.rs"]
mod rps;
#[path = "schbench/sched.rs"]
mod sched;
#[path = "schbench/sys.rs"]
mod sys;
#[path = "schbench/workload.rs"]
mod workload;

use std::io::Write;
use std::sync::atomic::Ordering;

use lagom::Runtime;

use crate::finish::Finished;
use crate::opts::{Backend, Opts, ParseError};
use crate::sched::Sched;
use crate::workload::{Config, Shared};

/// Writes `text` to stderr; a closed stderr is not an error worth dying for.
pub fn eprint_all(text: &str) {
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

/// Prints `msg` and exits with status 1.
fn die(msg: impl std::fmt::Display) -> ! {
    eprintln!("{msg}");
    std::process::exit(1)
}

/// Starts the workload on `S`, runs the control loop, stops and collects.
fn run<S: Sched>(
    o: &Opts,
    cfg: Config,
    launch: impl FnMut(&[usize], Box<dyn FnOnce() + Send>) -> Result<S::Join, String>,
) -> Result<Finished, String> {
    let per_thread = o.rps / cfg.message_threads as u64;
    let sh = Shared::<S>::new(cfg, per_thread);
    let joins = workload::start(&sh, launch)?;
    sys::unblock_sigint();
    let outcome = control::run(&sh, o);
    workload::stop(&sh, joins)?;
    let (wakeup, request) = control::sums(&sh);
    Ok(Finished {
        wakeup,
        request,
        outcome,
        worker_requests: sh
            .workers()
            .map(|r| r.loop_count.load(Ordering::Relaxed))
            .collect(),
        worker_cpus: sh
            .workers()
            .map(|r| r.last_cpu.load(Ordering::Relaxed))
            .collect(),
        worker_runtime_us: sh
            .workers()
            .map(|r| r.runtime_us.load(Ordering::Relaxed))
            .sum(),
        sched_delay: control::sched_delay(&sh),
        final_rps_goal: sh.rps_per_thread.load(Ordering::Relaxed) * sh.cfg.message_threads as u64,
    })
}

/// The workload's configuration from the options (and schbench's start-up lines).
fn config(o: &Opts, place: &cpus::Placement) -> Config {
    let m = o.message_threads;
    let workers = if o.worker_threads == 0 {
        let t = place.pool.len().div_ceil(m);
        eprintln!("setting worker threads to {t}");
        t
    } else {
        o.worker_threads
    };
    let (private_n, ops_private, shared_n, ops_shared) = match o.split {
        None => (matrix::msize(o.footprint_kb), o.operations, 0, 0),
        Some(p) => {
            let private_kb = o.footprint_kb * p / 100;
            let shared_kb = o.footprint_kb * (100 - p) / 100;
            let (pn, sn) = (matrix::msize(private_kb), matrix::msize(shared_kb));
            eprintln!(
                "split mode: {p}% private ({private_kb} KB per thread), {}% shared \
                 ({shared_kb} KB total)",
                100 - p
            );
            eprintln!("matrix sizes: private={pn}, shared={sn}");
            let ops_private = o.operations * p / 100;
            (pn, ops_private, sn, o.operations - ops_private)
        }
    };
    let message_cpus = (0..m)
        .map(|i| match place.message.len() {
            0 => place.workers.clone(),
            n => vec![place.message[i % n]],
        })
        .collect();
    // SAFETY: sysconf has no preconditions.
    let conf = usize::try_from(unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) }).unwrap_or(1);
    Config {
        message_threads: m,
        workers,
        sleep_us: o.sleep_us,
        calibrate: o.calibrate,
        locking: o.locking,
        pipe: o.pipe as usize,
        rps_mode: o.rps > 0 || o.auto_rps > 0,
        private_n,
        ops_private,
        shared_n,
        ops_shared,
        message_cpus,
        announce_pin: !place.message.is_empty(),
        worker_cpus: place.workers.clone(),
        nr_locks: conf.max(place.pool.iter().max().map_or(1, |c| c + 1)),
    }
}

fn main() {
    sys::catch_sigint();
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let o = match opts::parse(&args) {
        Ok(o) => o,
        Err(ParseError::Usage(msg)) => {
            if let Some(m) = msg {
                eprintln!("{m}");
            }
            die(opts::USAGE)
        }
        Err(ParseError::Line(l)) => die(l),
    };
    if let Some(f) = &o.features
        && let Err(e) = lagom_policy::Features::parse(f)
    {
        die(format!("schbench: --features: {e}"));
    }
    let place = cpus::place(&o, &cpus::allowed()).unwrap_or_else(|e| die(e));
    for n in &o.notes {
        eprintln!("{n}");
    }
    if [&o.message_cpus, &o.worker_cpus]
        .iter()
        .any(|s| matches!(s, Some(opts::CpuSpec::Auto)))
    {
        eprintln!("auto pinning message and worker threads");
    }
    let cfg = config(&o, &place);
    // A noisy host made on purpose, stopped when `spinners` drops (before an error exits).
    let result = lagom_examples::HostSpinners::start(
        o.spinner_cpus.as_deref().unwrap_or(&place.pool),
        o.host_spinners,
    )
    .map_err(|e| format!("schbench: {e}"))
    .and_then(|spinners| {
        let r = match o.backend {
            Backend::Os => run::<os::Os>(&o, cfg, |cpus, f| os::Os::spawn("schbench-msg", cpus, f))
                .and_then(|fin| finish::print(&o, &fin, None)),
            Backend::Lagom => run_lagom(&o, cfg, &place),
        };
        drop(spinners);
        r
    });
    if let Err(e) = result {
        die(e);
    }
}

/// Builds the runtime, runs on it, shuts it down, reports (with counters and the trace).
fn run_lagom(o: &Opts, cfg: Config, place: &cpus::Placement) -> Result<(), String> {
    let mut b = Runtime::builder()
        .worker_cpus(place.pool.iter().copied())
        .tracing(o.trace.is_some())
        .pin_workers(!o.float);
    if let Some(on) = o.host_hints {
        b = b.host_hints(on);
    }
    // SAFETY: schbench measures the kernel-faithful scheduler, wakeup placement and balancing
    // of started tasks included, so its tasks may migrate. Their code keeps the migration
    // contract's promises: nothing thread-local is held across a blocking call (the per-CPU
    // locks are atomic flags, released by whichever thread holds the guard; the pipe page's
    // std Mutex is locked and released with no blocking call in between), no thread-local is
    // touched beside a blocking call, and the CPU a task reads (`sched_getcpu`) only picks a
    // lock and labels a report, as on kernel threads that migrate.
    b = unsafe { b.allow_migration() };
    if let Some(f) = &o.features {
        b = b.features(f.clone());
    }
    let rt = b.build().map_err(|e| format!("schbench: {e}"))?;
    let fin = run::<lagom_rt::Lagom>(o, cfg, |cpus, f| {
        let mut tb = lagom::task::Builder::new().name("schbench-msg");
        if !cpus.is_empty() {
            tb = tb.cpus(cpus.iter().copied());
        }
        rt.spawn_with(tb, f).map_err(|e| format!("schbench: {e}"))
    })?;
    let (stats, trace) = rt.shutdown_with_trace();
    for n in &stats.host_hints {
        eprintln!("note: host hints: {n}");
    }
    finish::print(o, &fin, Some(&stats))?;
    if let Some(path) = &o.trace {
        trace.save(path).map_err(|e| format!("schbench: {e}"))?;
        let mut note = format!(
            "trace: {} events written to {path} (open it in ui.perfetto.dev)\n",
            trace.len()
        );
        if trace.dropped() > 0 {
            note += &format!(
                "trace: {} events dropped (the per-worker logs were full): shorten the run\n",
                trace.dropped()
            );
        }
        eprint_all(&note);
    }
    Ok(())
}
