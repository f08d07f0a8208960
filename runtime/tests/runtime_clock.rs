//! The task clock (`Builder::task_clock`, `worker/clock.rs`): with [`TaskClock::OnCpu`] a
//! task is charged the time its worker's thread was on a CPU, with the host's stalls left
//! out (the default); with [`TaskClock::Wall`], wall time.
//!
//! The host stalls are made, not waited for: a plain OS thread spins pinned to the worker's
//! CPU, so the host shares that CPU between it and the worker's thread (about half each). A
//! task computes for a while, calling `cond_resched`, and compares what the runtime charged
//! it (`task::cpu_time`) with its thread's CPU clock (`CLOCK_THREAD_CPUTIME_ID`: it runs on
//! the worker's thread) and with the wall clock. Both bounds hold whatever share the host
//! gives: the wall charge follows the wall clock, the on-CPU charge the CPU clock. Where the
//! host gave the worker nearly all of the CPU anyway (the spinner did not contend), the two
//! cannot be told apart and the test says so and does not judge the difference.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use lagom::Runtime;
use lagom::runtime::TaskClock;

/// The calling thread's CPU time.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is writable; every Linux thread has its CPU clock.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Pins the calling OS thread to `cpu`.
fn pin(cpu: usize) {
    // SAFETY: an all-zero cpu_set_t is the empty set; CPU_SET writes within it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        assert_eq!(
            libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set),
            0,
            "pin to cpu {cpu}"
        );
    }
}

/// What one run measured: the charge, the worker thread's CPU time and the wall time over
/// the same stretch, and the stalls the runtime counted.
struct Run {
    charged: Duration,
    cpu: Duration,
    wall: Duration,
    stalls: u64,
    stall_ns: u64,
}

/// One worker on the first allowed CPU with `clock`, a spinner pinned beside it, and a task
/// that computes for 400 ms of wall time.
fn run(clock: TaskClock) -> Run {
    let rt = Runtime::builder()
        .worker_cpus([first_cpu()])
        .task_clock(clock)
        .build()
        .unwrap();
    let cpu = rt.worker_cpus()[0];
    let stop = Arc::new(AtomicBool::new(false));
    let spinner = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            pin(cpu);
            while !stop.load(Ordering::Relaxed) {
                std::hint::spin_loop();
            }
        })
    };
    // Let the spinner start sharing the CPU.
    std::thread::sleep(Duration::from_millis(20));
    let (charged, cpu_time, wall) = rt.block_on(|| {
        let (r0, c0, w0) = (
            lagom::task::cpu_time().unwrap(),
            thread_cpu(),
            Instant::now(),
        );
        let mut x = 1u64;
        while w0.elapsed() < Duration::from_millis(400) {
            for _ in 0..200 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
            }
            lagom::task::cond_resched();
        }
        let (r1, c1, w1) = (
            lagom::task::cpu_time().unwrap(),
            thread_cpu(),
            Instant::now(),
        );
        (r1 - r0, c1 - c0, w1 - w0)
    });
    stop.store(true, Ordering::Relaxed);
    spinner.join().unwrap();
    let total = rt.stats().total();
    Run {
        charged,
        cpu: cpu_time,
        wall,
        stalls: total.host_stalls,
        stall_ns: total.host_stall_ns,
    }
}

fn first_cpu() -> usize {
    let rt = Runtime::builder().build().unwrap();
    rt.worker_cpus()[0]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// With the wall clock the task is charged about the wall time, stalls included, and no
/// stall is counted; with the task clock, about its thread's CPU time, and the stalls it
/// left out are counted.
#[test]
fn the_task_clock_leaves_host_stalls_out_of_the_charge() {
    let wall = run(TaskClock::Wall);
    let on_cpu = run(TaskClock::OnCpu);
    for (name, r) in [("wall", &wall), ("on_cpu", &on_cpu)] {
        println!(
            "{name}: charged {:.1} ms, thread cpu {:.1} ms, wall {:.1} ms, {} stalls, {:.1} ms left out",
            ms(r.charged),
            ms(r.cpu),
            ms(r.wall),
            r.stalls,
            r.stall_ns as f64 / 1e6
        );
    }
    // The wall clock: the charge is the wall time (less what the first and last reads
    // straddle), never the CPU time alone.
    assert!(
        wall.charged.as_secs_f64() >= 0.95 * wall.wall.as_secs_f64() - 2e-3,
        "the wall clock charged {:.1} ms of {:.1} ms wall",
        ms(wall.charged),
        ms(wall.wall)
    );
    assert_eq!(
        (wall.stalls, wall.stall_ns),
        (0, 0),
        "the wall clock counts no stall"
    );
    // The task clock: the charge is the thread's CPU time, within the short stalls it
    // cannot see (under STALL_GAP each, at most one per gap) and the clocks' own slack.
    let slack = 0.15 * on_cpu.cpu.as_secs_f64() + 5e-3;
    assert!(
        on_cpu.charged.as_secs_f64() <= on_cpu.cpu.as_secs_f64() + slack,
        "the task clock charged {:.1} ms for {:.1} ms on the CPU ({:.1} ms wall)",
        ms(on_cpu.charged),
        ms(on_cpu.cpu),
        ms(on_cpu.wall)
    );
    assert!(
        on_cpu.charged.as_secs_f64() >= 0.9 * on_cpu.cpu.as_secs_f64() - 2e-3,
        "the task clock left out time the task ran: charged {:.1} ms for {:.1} ms on the CPU",
        ms(on_cpu.charged),
        ms(on_cpu.cpu)
    );
    let share = on_cpu.cpu.as_secs_f64() / on_cpu.wall.as_secs_f64();
    if share > 0.85 {
        eprintln!(
            "NOTE: the host gave the worker {:.0} % of the CPU beside the spinner: too few \
             stalls to tell the clocks apart",
            share * 100.0
        );
        return;
    }
    assert!(
        on_cpu.stalls > 0 && on_cpu.stall_ns > 0,
        "the worker had {:.0} % of its CPU, yet no stall was counted",
        share * 100.0
    );
}
