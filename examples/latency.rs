//! `latency`: latency under load, lagom against the kernel. N CPU-bound hogs and
//! one periodic sleeper share one CPU for S seconds. The sleeper sleeps until an absolute
//! deadline every P µs and records how late it wakes; each hog counts its work. Printed: the
//! lateness p50 / p90 / p99 / max and each task's share of the CPU against its weight.
//!
//! ```text
//! cargo run --release -p lagom-examples --example latency -- [--runtime lagom|os] [-n HOGS]
//!     [--nice N[,N…]] [-p PERIOD_US] [-s SECONDS] [--slice-us US] [--cpu CPU] [--json]
//!     [--task-clock wall|on-cpu] [--host-spinners N] [--host-hints on|off]
//! ```
//!
//! - `lagom`: one worker on the CPU; the hogs call `task::cond_resched` every iteration of
//!   their loop; the sleeper is a task (with `--slice-us`, spawned with that custom slice)
//!   that sleeps with `task::sleep` for the time left to its next deadline.
//! - `os`: plain threads pinned to the CPU (`sched_setaffinity`), nice set per thread
//!   (`setpriority`); the hogs just loop (the kernel preempts them at its tick or at a
//!   wakeup); the sleeper uses `clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME)`, and
//!   `--slice-us` is set with `sched_setattr` (`sched_runtime` of a `SCHED_OTHER` thread,
//!   Linux 6.12 and later). The slice is read back with `sched_getattr`: a kernel that
//!   ignores it, or refuses it, is reported and the run fails rather than measure without it.
//!
//! Lateness is the time from the deadline to the sleeper's first clock read after its wake,
//! on `CLOCK_MONOTONIC` in both runtimes. A deadline already past when the sleeper looks
//! (it woke more than a period late) is skipped and counted as missed, as a periodic thread
//! that does not queue up overruns behaves.
//!
//! Host delay (lagom only): on a shared machine the host may keep the worker thread off its
//! CPU for milliseconds, which no runtime can hide. The sleeper reads its worker thread's
//! `run_delay` (the second field of `/proc/thread-self/schedstat`: ns spent runnable but
//! waiting for a CPU) before each sleep and after each wake; `lateness_excl_host_us` gives the
//! percentiles of each lateness less the host delay in that interval — what lagom itself
//! made the sleeper wait, and `host_delay_fraction` the share of the run the worker thread
//! waited for a CPU. (On `os` the sleeper's own `run_delay` is the very latency
//! measured, so there it is not subtracted.)
//!
//! CPU shares: each task's CPU time over the run — on `os` the thread's
//! `CLOCK_THREAD_CPUTIME_ID`, on lagom the run time the scheduler charged it
//! (`task::cpu_time`, its `sum_exec_runtime`) — as a fraction of all the tasks' CPU time. The
//! hogs always want the CPU, so each hog's share *among the hogs* should match its weight
//! among theirs (`weight_share`); `max_share_error` is the largest gap, in percentage
//! points. The sleeper's own share is printed beside its weight; it uses less than its
//! entitlement by design. On lagom the charged time is the scheduler's own account, so the
//! hogs' *work* (iterations of the same unit) is given beside it: `share_of_hog_work` and
//! `max_work_share_error_pct`, what each hog really got.
//!
//! A noisy host on purpose: `--host-spinners N` runs N plain threads spinning on the same CPU
//! for the whole run (in both runtimes), so the host keeps the worker thread (lagom) or the
//! tasks' threads (os) off the CPU part of the time. `--task-clock wall` is lagom's
//! `Builder::task_clock(TaskClock::Wall)`: the time the worker thread was off its CPU is
//! charged to the task that was current (the default, `on-cpu`, leaves it out). `--host-hints off` is lagom's
//! `Builder::host_hints(false)`: the worker thread keeps the kernel's default slice and its
//! nice instead of passing on its tasks' (the default passes them on).

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use lagom::Runtime;
use lagom_examples::{features_arg, usage_error};
use lagom_policy::weight_of_nice;

const USAGE: &str = "usage: latency [--runtime lagom|os] [-n HOGS] [--nice N[,N...]] [-p PERIOD_US]
               [-s SECONDS] [--slice-us US] [--cpu CPU] [--timer-spin-us US] [--no-tick-timer] [--json]
               [--features SPEC] [--task-clock wall|on-cpu] [--host-spinners N]
               [--host-hints on|off]

HOGS CPU-bound tasks and one periodic sleeper on one CPU for SECONDS; the sleeper sleeps
until an absolute deadline every PERIOD_US µs and records how late it wakes. Prints the
lateness p50/p90/p99/max (µs) and each task's CPU share against its weight.
  --runtime R      lagom (one worker; hogs call cond_resched each iteration; default) or
                   os (plain threads pinned to the CPU, clock_nanosleep TIMER_ABSTIME)
  -n HOGS          number of hogs (default 4)
  --nice N[,N...]  the hogs' nice: one value for all, or one per hog (default 0); the
                   sleeper runs at nice 0. Kernel nice below 0 needs CAP_SYS_NICE.
  -p PERIOD_US     the sleeper's period in µs (default 1000)
  -s SECONDS       run time, fractional allowed (default 10)
  --slice-us US    the sleeper's custom slice: lagom task::Builder::slice, os sched_setattr
                   sched_runtime (Linux >= 6.12); both clamp to 100..100000 µs
  --cpu CPU        the CPU (default: the first CPU this process may use)
  --timer-spin-us US
                   lagom: how long before a timer an idle worker spins instead of sleeping
                   (Builder::timer_spin; default: the runtime's)
  --no-tick-timer  lagom: Builder::tick_timer(false), every cond_resched reads the clock
  --json           one JSON object on one line
  --features SPEC  lagom's scheduler features on top of the defaults, e.g. NO_DELAY_DEQUEUE
                   (default: $LAGOM_FEATURES; an error with --runtime os)
  --task-clock C   lagom: what charges a running task, on-cpu (the default: the
                   worker thread's time off its CPU left out) or wall (Builder::task_clock)
  --host-spinners N
                   N plain OS threads spin on the same CPU for the whole run, a noisy host
                   made on purpose (default 0); both runtimes
  --host-hints on|off
                   lagom: whether the worker tells the kernel its tasks' slice and weight
                   (Builder::host_hints; default on)";

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Rt {
    Lagom,
    Os,
}

struct Args {
    runtime: Rt,
    hogs: usize,
    nice: Vec<i32>,
    period: Duration,
    seconds: f64,
    slice: Option<Duration>,
    cpu: Option<usize>,
    timer_spin: Option<Duration>,
    no_tick_timer: bool,
    json: bool,
    features: Option<String>,
    task_clock: Option<lagom::runtime::TaskClock>,
    host_spinners: usize,
    host_hints: Option<bool>,
}

fn parse_args() -> Result<Args, lexopt::Error> {
    use lexopt::prelude::*;
    let mut a = Args {
        runtime: Rt::Lagom,
        hogs: 4,
        nice: vec![0],
        period: Duration::from_micros(1000),
        seconds: 10.0,
        slice: None,
        cpu: None,
        timer_spin: None,
        no_tick_timer: false,
        json: false,
        features: None,
        task_clock: None,
        host_spinners: 0,
        host_hints: None,
    };
    let mut p = lexopt::Parser::from_env();
    while let Some(arg) = p.next()? {
        match arg {
            Long("runtime") => {
                a.runtime = match p.value()?.string()?.as_str() {
                    "lagom" => Rt::Lagom,
                    "os" => Rt::Os,
                    v => return Err(format!("--runtime: {v:?} is neither lagom nor os").into()),
                }
            }
            Short('n') => a.hogs = p.value()?.parse()?,
            Long("nice") => {
                let v = p.value()?.string()?;
                a.nice = v
                    .split(',')
                    .map(|s| s.trim().parse::<i32>())
                    .collect::<Result<_, _>>()
                    .map_err(|e| format!("--nice {v:?}: {e}"))?;
                if let Some(n) = a.nice.iter().find(|n| !(-20..=19).contains(*n)) {
                    return Err(format!("--nice: {n} is outside -20..=19").into());
                }
            }
            Short('p') => a.period = Duration::from_micros(p.value()?.parse()?),
            Short('s') => a.seconds = p.value()?.parse()?,
            Long("slice-us") => a.slice = Some(Duration::from_micros(p.value()?.parse()?)),
            Long("cpu") => a.cpu = Some(p.value()?.parse()?),
            Long("timer-spin-us") => {
                a.timer_spin = Some(Duration::from_micros(p.value()?.parse()?));
            }
            Long("no-tick-timer") => a.no_tick_timer = true,
            Long("json") => a.json = true,
            Long("features") => a.features = Some(features_arg(p.value()?)?),
            Long("task-clock") => {
                a.task_clock = Some(match p.value()?.string()?.as_str() {
                    "wall" => lagom::runtime::TaskClock::Wall,
                    "on-cpu" => lagom::runtime::TaskClock::OnCpu,
                    v => {
                        return Err(
                            format!("--task-clock: {v:?} is neither wall nor on-cpu").into()
                        );
                    }
                })
            }
            Long("host-spinners") => {
                a.host_spinners = p.value()?.parse()?;
                if a.host_spinners > 64 {
                    return Err(format!("--host-spinners {}: at most 64", a.host_spinners).into());
                }
            }
            Long("host-hints") => {
                a.host_hints = Some(match p.value()?.string()?.as_str() {
                    "on" => true,
                    "off" => false,
                    v => return Err(format!("--host-hints: {v:?} is neither on nor off").into()),
                });
            }
            Short('h') | Long("help") => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            _ => return Err(arg.unexpected()),
        }
    }
    if a.period < Duration::from_micros(10) || a.period > Duration::from_secs(60) {
        return Err(format!(
            "-p {} µs: the period must be from 10 µs to 60 s",
            a.period.as_micros()
        )
        .into());
    }
    if !(a.seconds.is_finite() && a.seconds > 0.0 && a.seconds <= 3600.0) {
        return Err(format!("-s {}: must be in (0, 3600]", a.seconds).into());
    }
    if a.nice.len() != 1 && a.nice.len() != a.hogs {
        return Err(format!(
            "--nice: {} values for {} hogs (give one for all, or one per hog)",
            a.nice.len(),
            a.hogs
        )
        .into());
    }
    if a.runtime == Rt::Os
        && (a.features.is_some()
            || a.timer_spin.is_some()
            || a.task_clock.is_some()
            || a.no_tick_timer
            || a.host_hints.is_some())
    {
        return Err(
            "--features, --timer-spin-us, --task-clock, --no-tick-timer and --host-hints apply \
             to --runtime lagom only"
                .into(),
        );
    }
    Ok(a)
}

impl Args {
    fn hog_nice(&self, i: usize) -> i32 {
        if self.nice.len() == 1 {
            self.nice[0]
        } else {
            self.nice[i]
        }
    }
}

/// `CLOCK_MONOTONIC` in ns: the clock of the deadlines in both runtimes (lagom's timers are
/// on it too).
fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is writable; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// One unit of a hog's work (about a microsecond), opaque to the optimiser.
fn work_unit(x: u64) -> u64 {
    let mut h = x;
    for _ in 0..256 {
        h = black_box(
            h.wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407),
        );
    }
    h
}

/// What the sleeper measured.
#[derive(Default)]
struct SleeperOut {
    lateness_ns: Vec<u64>,
    /// Lateness less the worker thread's host run delay over the same sleep (lagom only).
    excl_host_ns: Vec<u64>,
    /// The fraction of the run the worker thread waited for a CPU (lagom only).
    host_delay_fraction: Option<f64>,
    missed: u64,
    cpu_ns: u64,
}

/// What one hog measured.
struct HogOut {
    iterations: u64,
    cpu_ns: u64,
}

/// The sleeper's loop, shared by both runtimes: `sleep_until(deadline)` blocks until the
/// absolute deadline (ns on `CLOCK_MONOTONIC`).
fn sleeper_loop(period_ns: u64, stop: &AtomicBool, mut sleep_until: impl FnMut(u64)) -> SleeperOut {
    let mut out = SleeperOut::default();
    let mut deadline = now_ns() + period_ns;
    while !stop.load(Ordering::Relaxed) {
        sleep_until(deadline);
        let now = now_ns();
        out.lateness_ns.push(now.saturating_sub(deadline));
        deadline += period_ns;
        while deadline <= now {
            deadline += period_ns;
            out.missed += 1;
        }
    }
    out
}

fn hog_loop(stop: &AtomicBool, mut tick: impl FnMut()) -> u64 {
    let mut n = 0u64;
    let mut h = 1;
    while !stop.load(Ordering::Relaxed) {
        h = work_unit(h);
        n += 1;
        tick();
    }
    black_box(h);
    n
}

/// The calling thread's `run_delay` (ns it waited runnable for a CPU), from
/// `/proc/thread-self/schedstat` opened once as `f`; `None` if unreadable.
fn run_delay_ns(f: &std::fs::File) -> Option<u64> {
    use std::os::unix::fs::FileExt;
    let mut buf = [0u8; 96];
    let n = f.read_at(&mut buf, 0).ok()?;
    std::str::from_utf8(&buf[..n])
        .ok()?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// What a run measured: the sleeper, the hogs, and (lagom) what the kernel refused of the
/// worker's host hints (`Stats::host_hints`).
type RunOut = (SleeperOut, Vec<HogOut>, Vec<&'static str>);

fn run_lagom(a: &Args, cpu: usize) -> Result<RunOut, String> {
    let mut b = Runtime::builder()
        .worker_cpus([cpu])
        .tick_timer(!a.no_tick_timer)
        .host_hints(a.host_hints.unwrap_or(true));
    if let Some(s) = a.timer_spin {
        b = b.timer_spin(s);
    }
    if let Some(f) = &a.features {
        b = b.features(f.as_str());
    }
    if let Some(c) = a.task_clock {
        b = b.task_clock(c);
    }
    let rt = b.build().map_err(|e| e.to_string())?;
    let stop = Arc::new(AtomicBool::new(false));
    let charged = || lagom::task::cpu_time().map_or(0, |d| d.as_nanos() as u64);
    let hogs: Vec<_> = (0..a.hogs)
        .map(|i| {
            let stop = Arc::clone(&stop);
            let b = lagom::task::Builder::new()
                .name(format!("hog-{i}"))
                .nice(a.hog_nice(i));
            rt.spawn_with(b, move || {
                let iterations = hog_loop(&stop, lagom::task::cond_resched);
                HogOut {
                    iterations,
                    cpu_ns: charged(),
                }
            })
        })
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    let mut b = lagom::task::Builder::new().name("sleeper");
    if let Some(s) = a.slice {
        b = b.slice(s);
    }
    let period_ns = a.period.as_nanos() as u64;
    let st = Arc::clone(&stop);
    let sleeper = rt
        .spawn_with(b, move || {
            // One worker: the task's thread is always the same, so the file stays its own.
            let stat = std::fs::File::open("/proc/thread-self/schedstat").ok();
            let mut host = Vec::new();
            let (t0, d0) = (now_ns(), stat.as_ref().and_then(run_delay_ns));
            let mut out = sleeper_loop(period_ns, &st, |deadline| {
                let before = stat.as_ref().and_then(run_delay_ns);
                let now = now_ns();
                if deadline > now {
                    lagom::task::sleep(Duration::from_nanos(deadline - now));
                }
                let after = stat.as_ref().and_then(run_delay_ns);
                host.push(before.zip(after).map(|(b, a)| a.saturating_sub(b)));
            });
            let (t1, d1) = (now_ns(), stat.as_ref().and_then(run_delay_ns));
            out.host_delay_fraction = d0
                .zip(d1)
                .map(|(a, b)| b.saturating_sub(a) as f64 / t1.saturating_sub(t0).max(1) as f64);
            if host.iter().all(Option::is_some) {
                out.excl_host_ns = out
                    .lateness_ns
                    .iter()
                    .zip(&host)
                    .map(|(l, h)| l.saturating_sub(h.unwrap_or(0)))
                    .collect();
            }
            out.cpu_ns = charged();
            out
        })
        .map_err(|e| e.to_string())?;
    std::thread::sleep(Duration::from_secs_f64(a.seconds));
    stop.store(true, Ordering::Relaxed);
    let s = sleeper.join().map_err(|e| e.to_string())?;
    let h = hogs
        .into_iter()
        .map(|h| h.join().map_err(|e| e.to_string()))
        .collect::<Result<_, _>>()?;
    let notes = rt.stats().host_hints;
    rt.shutdown();
    Ok((s, h, notes))
}

/// The calling thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`), ns.
fn thread_cpu_ns() -> u64 {
    lagom_examples::thread_cpu_time().as_nanos() as u64
}

fn gettid() -> libc::pid_t {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() }
}

use lagom_examples::pin_thread as pin;

/// Sets the calling thread's nice (Linux: `setpriority` on a thread id applies to that thread).
fn set_nice(nice: i32) -> Result<(), String> {
    // SAFETY: setpriority has no memory preconditions.
    let r = unsafe { libc::setpriority(libc::PRIO_PROCESS, gettid() as libc::id_t, nice) };
    if r != 0 {
        return Err(format!(
            "setpriority(nice {nice}): {} (nice below 0 needs CAP_SYS_NICE)",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

/// `struct sched_attr` (`include/uapi/linux/sched/types.h`), SCHED_ATTR_SIZE_VER1.
#[repr(C)]
#[derive(Default, Debug)]
struct SchedAttr {
    size: u32,
    sched_policy: u32,
    sched_flags: u64,
    sched_nice: i32,
    sched_priority: u32,
    sched_runtime: u64,
    sched_deadline: u64,
    sched_period: u64,
    sched_util_min: u32,
    sched_util_max: u32,
}

/// Gives the calling `SCHED_OTHER` thread the custom slice `slice` (`sched_runtime`, Linux
/// 6.12+), keeping nice 0, and reads it back: an error if the kernel refuses it or does not
/// keep it (an older kernel ignores `sched_runtime` of a fair task without saying so).
fn set_slice(slice: Duration) -> Result<u64, String> {
    let want = slice.as_nanos() as u64;
    let attr = SchedAttr {
        size: std::mem::size_of::<SchedAttr>() as u32,
        sched_policy: libc::SCHED_OTHER as u32,
        sched_runtime: want,
        ..SchedAttr::default()
    };
    // SAFETY: `attr` is a valid, initialised sched_attr of the size it states; flags 0.
    let r = unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &attr as *const SchedAttr, 0) };
    if r != 0 {
        return Err(format!(
            "sched_setattr(sched_runtime {} µs): {}",
            want / 1000,
            std::io::Error::last_os_error()
        ));
    }
    let mut got = SchedAttr::default();
    // SAFETY: `got` is writable for the size passed; flags 0.
    let r = unsafe {
        libc::syscall(
            libc::SYS_sched_getattr,
            0,
            &mut got as *mut SchedAttr,
            std::mem::size_of::<SchedAttr>() as u32,
            0,
        )
    };
    if r != 0 {
        return Err(format!(
            "sched_getattr: {}",
            std::io::Error::last_os_error()
        ));
    }
    // The kernel clamps to 0.1..100 ms; anything else (0 on kernels without custom slices,
    // or the default slice) means it did not take.
    let clamped = want.clamp(100_000, 100_000_000);
    if got.sched_runtime != clamped {
        return Err(format!(
            "sched_setattr accepted sched_runtime {} ns but sched_getattr reads back {} ns: \
             this kernel does not support custom slices for SCHED_OTHER (needs Linux 6.12+)",
            want, got.sched_runtime
        ));
    }
    Ok(got.sched_runtime)
}

fn run_os(a: &Args, cpu: usize) -> Result<RunOut, String> {
    let stop = Arc::new(AtomicBool::new(false));
    // Each thread reports its set-up (pinning, nice, slice) before it starts its loop, so a
    // failure ends the run before anything is measured.
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<(), String>>();
    let go = Arc::new(std::sync::Barrier::new(a.hogs + 2));
    let mut hogs = Vec::new();
    for i in 0..a.hogs {
        let (stop, ready, go, nice) = (
            Arc::clone(&stop),
            ready_tx.clone(),
            Arc::clone(&go),
            a.hog_nice(i),
        );
        hogs.push(std::thread::spawn(move || {
            let setup = pin(cpu).and_then(|()| set_nice(nice));
            let ok = setup.is_ok();
            let _ = ready.send(setup);
            go.wait();
            if !ok {
                return HogOut {
                    iterations: 0,
                    cpu_ns: 0,
                };
            }
            let c0 = thread_cpu_ns();
            let iterations = hog_loop(&stop, || ());
            HogOut {
                iterations,
                cpu_ns: thread_cpu_ns() - c0,
            }
        }));
    }
    let (st, ready, g) = (Arc::clone(&stop), ready_tx.clone(), Arc::clone(&go));
    let (period_ns, slice) = (a.period.as_nanos() as u64, a.slice);
    let sleeper = std::thread::spawn(move || {
        let setup = pin(cpu).and_then(|()| slice.map_or(Ok(()), |s| set_slice(s).map(|_| ())));
        let ok = setup.is_ok();
        let _ = ready.send(setup);
        g.wait();
        if !ok {
            return SleeperOut::default();
        }
        let c0 = thread_cpu_ns();
        let mut out = sleeper_loop(period_ns, &st, |deadline| {
            let ts = libc::timespec {
                tv_sec: (deadline / 1_000_000_000) as libc::time_t,
                tv_nsec: (deadline % 1_000_000_000) as libc::c_long,
            };
            // EINTR: the loop around it looks at the clock again (a wake before the deadline
            // would count as 0 late; no signal is expected here).
            // SAFETY: `ts` is a valid timespec; the remaining-time pointer may be null with
            // TIMER_ABSTIME.
            unsafe {
                libc::clock_nanosleep(
                    libc::CLOCK_MONOTONIC,
                    libc::TIMER_ABSTIME,
                    &ts,
                    std::ptr::null_mut(),
                )
            };
        });
        out.cpu_ns = thread_cpu_ns() - c0;
        out
    });
    drop(ready_tx);
    let mut err = None;
    for r in ready_rx.iter().take(a.hogs + 1) {
        if let Err(e) = r {
            err.get_or_insert(e);
        }
    }
    if err.is_some() {
        stop.store(true, Ordering::Relaxed);
    }
    go.wait();
    if err.is_none() {
        std::thread::sleep(Duration::from_secs_f64(a.seconds));
    }
    stop.store(true, Ordering::Relaxed);
    let s = sleeper.join().map_err(|_| "the sleeper thread panicked")?;
    let h = hogs
        .into_iter()
        .map(|h| h.join().map_err(|_| "a hog thread panicked".to_string()))
        .collect::<Result<_, _>>()?;
    match err {
        Some(e) => Err(e),
        None => Ok((s, h, Vec::new())),
    }
}

/// The value at fraction `q` of sorted `v` (nearest rank), 0 if empty.
fn pct(v: &[u64], q: f64) -> u64 {
    if v.is_empty() {
        return 0;
    }
    let i = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1;
    v[i]
}

fn main() {
    lagom_examples::default_sigpipe();
    let a = parse_args().unwrap_or_else(|e| usage_error(e, USAGE));
    let cpu = match a.cpu {
        Some(c) => c,
        None => match Runtime::builder().build() {
            Ok(rt) => rt.worker_cpus()[0],
            Err(e) => {
                eprintln!("error: {e}");
                std::process::exit(1)
            }
        },
    };
    // The noisy host, made on purpose: plain threads spinning on the same CPU, stopped
    // when `spinners` drops (before an error exits, too).
    let result =
        lagom_examples::HostSpinners::start(&[cpu], a.host_spinners).and_then(|spinners| {
            let r = match a.runtime {
                Rt::Lagom => run_lagom(&a, cpu),
                Rt::Os => run_os(&a, cpu),
            };
            drop(spinners);
            r
        });
    let (mut sleeper, hogs, notes) = result.unwrap_or_else(|e| {
        eprintln!("error: {e}");
        std::process::exit(1)
    });
    for n in &notes {
        eprintln!("note: host hints: {n}");
    }
    sleeper.lateness_ns.sort_unstable();
    sleeper.excl_host_ns.sort_unstable();
    let ex = &sleeper.excl_host_ns;
    let excl_host = (!ex.is_empty()).then(|| {
        let us = |ns: u64| ns as f64 / 1e3;
        serde_json::json!({"p50": us(pct(ex, 0.5)), "p90": us(pct(ex, 0.9)),
                           "p99": us(pct(ex, 0.99)), "max": us(ex.last().copied().unwrap_or(0))})
    });
    let lat = &sleeper.lateness_ns;
    let us = |ns: u64| ns as f64 / 1e3;
    let (p50, p90, p99, max) = (
        us(pct(lat, 0.50)),
        us(pct(lat, 0.90)),
        us(pct(lat, 0.99)),
        us(lat.last().copied().unwrap_or(0)),
    );
    let total_cpu: u64 = sleeper.cpu_ns + hogs.iter().map(|h| h.cpu_ns).sum::<u64>();
    let hog_cpu: u64 = hogs.iter().map(|h| h.cpu_ns).sum();
    let hog_weight: u64 = (0..a.hogs).map(|i| weight_of_nice(a.hog_nice(i))).sum();
    let frac = |x: u64, of: u64| if of == 0 { 0.0 } else { x as f64 / of as f64 };
    let hog_work: u64 = hogs.iter().map(|h| h.iterations).sum();
    let mut tasks = Vec::new();
    let mut max_err = 0.0f64;
    let mut max_work_err = 0.0f64;
    for (i, h) in hogs.iter().enumerate() {
        let nice = a.hog_nice(i);
        let w = weight_of_nice(nice);
        let (share, weight_share) = (frac(h.cpu_ns, hog_cpu), frac(w, hog_weight));
        let work_share = frac(h.iterations, hog_work);
        max_err = max_err.max((share - weight_share).abs() * 100.0);
        max_work_err = max_work_err.max((work_share - weight_share).abs() * 100.0);
        tasks.push(serde_json::json!({
            "name": format!("hog-{i}"), "nice": nice, "weight": w >> 10,
            "cpu_ms": h.cpu_ns as f64 / 1e6, "share_of_cpu": frac(h.cpu_ns, total_cpu),
            "share_of_hogs": share, "weight_share": weight_share,
            "iterations": h.iterations, "share_of_hog_work": work_share,
        }));
    }
    let slice_us = a.slice.map(|s| s.as_micros() as u64);
    let rt_name = match a.runtime {
        Rt::Lagom => "lagom",
        Rt::Os => "os",
    };
    if a.json {
        let v = serde_json::json!({
            "runtime": rt_name, "hogs": a.hogs, "cpu": cpu,
            "period_us": a.period.as_micros() as u64, "seconds": a.seconds,
            "slice_us": slice_us, "features": a.features,
            "timer_spin_us": a.timer_spin.map(|s| s.as_micros() as u64),
            "tick_timer": a.runtime == Rt::Lagom && !a.no_tick_timer,
            "wakes": lat.len(), "missed": sleeper.missed,
            "lateness_us": {"p50": p50, "p90": p90, "p99": p99, "max": max},
            "lateness_excl_host_us": excl_host,
            "host_delay_fraction": sleeper.host_delay_fraction,
            "sleeper": {"cpu_ms": sleeper.cpu_ns as f64 / 1e6,
                        "share_of_cpu": frac(sleeper.cpu_ns, total_cpu),
                        "weight": weight_of_nice(0) >> 10},
            "tasks": tasks, "max_share_error_pct": max_err,
            "max_work_share_error_pct": max_work_err,
            "task_clock": a.task_clock.map(|c| format!("{c:?}")),
            "host_spinners": a.host_spinners,
            "host_hints": (a.runtime == Rt::Lagom).then_some(a.host_hints.unwrap_or(true)),
            "host_hint_notes": notes,
        });
        println!("{v}");
        return;
    }
    println!(
        "latency: {rt_name}, {} hogs + 1 sleeper (period {} µs, slice {}) on CPU {cpu} for {} s",
        a.hogs,
        a.period.as_micros(),
        slice_us.map_or("default".to_string(), |s| format!("{s} µs")),
        a.seconds
    );
    println!(
        "lateness µs: p50 {p50:.1}  p90 {p90:.1}  p99 {p99:.1}  max {max:.1}  ({} wakes, {} \
         missed periods)",
        lat.len(),
        sleeper.missed
    );
    if let Some(e) = &excl_host {
        println!(
            "  less the worker thread's host run delay: p50 {:.1}  p90 {:.1}  p99 {:.1}  max {:.1}",
            e["p50"].as_f64().unwrap_or(0.0),
            e["p90"].as_f64().unwrap_or(0.0),
            e["p99"].as_f64().unwrap_or(0.0),
            e["max"].as_f64().unwrap_or(0.0)
        );
    }
    println!(
        "task      nice  weight   cpu ms  share of cpu  share of hogs  weight share  share of work"
    );
    for t in &tasks {
        println!(
            "{:<8} {:>5} {:>7} {:>8.1} {:>12.2}% {:>13.2}% {:>12.2}% {:>13.2}%",
            t["name"].as_str().unwrap_or(""),
            t["nice"].as_i64().unwrap_or(0),
            t["weight"].as_u64().unwrap_or(0),
            t["cpu_ms"].as_f64().unwrap_or(0.0),
            t["share_of_cpu"].as_f64().unwrap_or(0.0) * 100.0,
            t["share_of_hogs"].as_f64().unwrap_or(0.0) * 100.0,
            t["weight_share"].as_f64().unwrap_or(0.0) * 100.0,
            t["share_of_hog_work"].as_f64().unwrap_or(0.0) * 100.0,
        );
    }
    println!(
        "{:<8} {:>5} {:>7} {:>8.1} {:>12.2}%",
        "sleeper",
        0,
        weight_of_nice(0) >> 10,
        sleeper.cpu_ns as f64 / 1e6,
        frac(sleeper.cpu_ns, total_cpu) * 100.0
    );
    println!(
        "largest gap between a hog's share of the hogs and its weight share: {max_err:.2} points \
         (by CPU time), {max_work_err:.2} points (by work done)"
    );
}
