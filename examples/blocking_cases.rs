//! `blocking_cases`: the first blocking code a Rust user writes, run in lagom tasks — std's
//! and crossbeam's channels and locks, `std::thread::sleep`, file I/O, spins on `try_*`, a
//! loop without `cond_resched` — each case bounded: it prints one `RESULT` line with its
//! figures, or `HANG: …` once its bound has passed (exit status 3) instead of hanging for
//! ever. The runtime's stall monitor prints its reports on stderr meanwhile.
//!
//! ```text
//! cargo run --release -p lagom-examples --example blocking_cases -- CASE [options]
//! cargo run --release -p lagom-examples --example blocking_cases -- all    # every case, a table
//! cargo run --release -p lagom-examples --features interpose --example blocking_cases -- \
//!     os-sleep --interpose                                                   # the sleep hooks
//! ```
//!
//! The cases and what they show are in `--help`, and the table of their outcomes before and
//! after the stall monitor in the docs' lab page "Blocking code in tasks".

use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use lagom::runtime::{Builder, OnStall};
use lagom::task::{self, spawn};
use lagom_examples::{default_sigpipe, usage_error};

const USAGE: &str = "usage: blocking_cases CASE|all [options]

Blocking code in lagom tasks, one case per run: a RESULT line with the case's figures, or
`HANG: CASE did not finish within BOUND` (exit status 3) once the bound has passed. The
runtime's stall monitor reports on stderr what holds a worker. `all` runs every case of the
table in a child process (with the options given) and prints one Markdown row each, with the
stall reports.

Cases [default workers, tasks, how]:
  pipeline         producer -> 4 stages -> consumer, 10 000 items, over --how std|crossbeam
                   channels, bounded to --cap items (0: unbounded) [-w 1, std, --cap 16]
  pingpong         two tasks bounce a value 1 000 times over two std::sync::mpsc channels [-w 1]
  mutex-sleep      -n tasks each take a std::sync::Mutex 20 times and hold the guard across
                   lagom::task::sleep(1 ms) [-w 1, -n 2]
  mutex-os-sleep   the same with std::thread::sleep(1 ms) under the guard [-w 1, -n 2]
  os-sleep         20 tasks each sleep 20 ms with --how std (std::thread::sleep), lagom
                   (lagom::task::sleep) or blocking (std::thread::sleep in spawn_blocking) [-w 2, std]
  fsync            200 tasks each write 4 KiB to a file of their own, fsync it and read it back,
                   --how task (in the task) or blocking (through spawn_blocking), in a fresh
                   directory under --dir [-w 2, task, --dir .]
  ticker-os-sleep  a 500 µs lagom::task::sleep_until ticker for 1 s beside -n tasks looping on
                   std::thread::sleep(50 ms) [-w 2, -n 4]
  spin-try-recv    a task spins on lagom::sync::mpsc try_recv until a second task sends [-w 1]
  spin-try-send    a task spins on try_send into a full sync_channel(1) until a second receives
  spin-try-lock    a task spins on lagom::sync::Mutex::try_lock while a second holds it across
                   lagom::task::sleep(1 ms)
  no-cond-resched  a 1 ms ticker for 1 s beside a task that computes 400 ms without
                   cond_resched [-w 1]

Options:
  -w, --workers N      workers, on the first N allowed CPUs
  -n, --tasks N        tasks, for the cases that take a count
  --how HOW            the variant, for the cases that have one
  --cap N              the pipeline's channel capacity
  --dir PATH           where fsync makes its directory (a disk, not a tmpfs) [.]
  --bound SECS         how long a case may run before it is called a HANG [5]
  --threshold MS       the stall monitor's threshold [10]
  --no-monitor         run without the stall monitor
  --interpose          std::thread::sleep in tasks sleeps the task (Builder::interpose_sleep;
                       needs the example built with --features interpose)
  -h, --help           this text";

/// The exit status of a case that did not finish within its bound.
const HANG_STATUS: i32 = 3;

#[derive(Debug, Clone)]
struct Args {
    case: String,
    workers: Option<usize>,
    tasks: Option<usize>,
    how: Option<String>,
    cap: Option<usize>,
    dir: std::path::PathBuf,
    bound: Duration,
    threshold: Duration,
    monitor: bool,
    interpose: bool,
    /// The options as given, for `all`'s children.
    passed: Vec<String>,
}

fn parse_args() -> Result<Args, lexopt::Error> {
    use lexopt::prelude::*;
    let mut a = Args {
        case: String::new(),
        workers: None,
        tasks: None,
        how: None,
        cap: None,
        dir: std::path::PathBuf::from("."),
        bound: Duration::from_secs(5),
        threshold: Duration::from_millis(10),
        monitor: true,
        interpose: false,
        passed: Vec::new(),
    };
    let mut p = lexopt::Parser::from_env();
    while let Some(arg) = p.next()? {
        match arg {
            Short('w') | Long("workers") => a.workers = Some(p.value()?.parse()?),
            Short('n') | Long("tasks") => a.tasks = Some(p.value()?.parse()?),
            Long("how") => a.how = Some(p.value()?.string()?),
            Long("cap") => a.cap = Some(p.value()?.parse()?),
            Long("dir") => {
                a.dir = p.value()?.into();
                a.passed.push(format!("--dir={}", a.dir.display()));
            }
            Long("bound") => {
                let s: f64 = p.value()?.parse()?;
                if !(s > 0.0 && s < 86_400.0) {
                    return Err(format!("--bound {s}: give seconds, more than 0").into());
                }
                a.bound = Duration::from_secs_f64(s);
                a.passed.push(format!("--bound={s}"));
            }
            Long("threshold") => {
                let ms: f64 = p.value()?.parse()?;
                if !(ms > 0.0 && ms < 3_600_000.0) {
                    return Err(format!("--threshold {ms}: give milliseconds").into());
                }
                a.threshold = Duration::from_secs_f64(ms / 1e3);
                a.passed.push(format!("--threshold={ms}"));
            }
            Long("no-monitor") => {
                a.monitor = false;
                a.passed.push(String::from("--no-monitor"));
            }
            Long("interpose") => {
                if !cfg!(feature = "interpose") {
                    return Err("--interpose needs the example built with --features \
                                interpose (cargo run -p lagom-examples --features interpose …)"
                        .into());
                }
                a.interpose = true;
                a.passed.push(String::from("--interpose"));
            }
            Short('h') | Long("help") => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            Value(v) if a.case.is_empty() => a.case = v.string()?,
            _ => return Err(arg.unexpected()),
        }
    }
    if a.case.is_empty() {
        return Err("no case given".into());
    }
    Ok(a)
}

fn main() {
    default_sigpipe();
    let a = parse_args().unwrap_or_else(|e| usage_error(e, USAGE));
    if a.case == "all" {
        return all(&a);
    }
    let default_workers = match a.case.as_str() {
        "os-sleep" | "fsync" | "ticker-os-sleep" => 2,
        _ => 1,
    };
    let w = a.workers.unwrap_or(default_workers);
    let mut label = format!("{} -w {w}", a.case);
    if let Some(n) = a.tasks {
        label += &format!(" -n {n}");
    }
    if let Some(h) = &a.how {
        label += &format!(" --how {h}");
    }
    if let Some(c) = a.cap {
        label += &format!(" --cap {c}");
    }
    let rt = runtime(w, &a);
    let how = a.how.as_deref();
    let run =
        |what: fn(&lagom::Runtime, &Args) -> String| bounded(&label, a.bound, || what(&rt, &a));
    let line = match a.case.as_str() {
        "pipeline" => {
            run(|rt, a| pipeline(rt, a.how.as_deref().unwrap_or("std"), a.cap.unwrap_or(16)))
        }
        "pingpong" => run(|rt, _| pingpong(rt)),
        "mutex-sleep" => run(|rt, a| mutex_sleep(rt, a.tasks.unwrap_or(2), false)),
        "mutex-os-sleep" => run(|rt, a| mutex_sleep(rt, a.tasks.unwrap_or(2), true)),
        "os-sleep" => {
            check_how(how, &["std", "lagom", "blocking"]);
            run(|rt, a| os_sleep(rt, a.how.as_deref().unwrap_or("std")))
        }
        "fsync" => {
            check_how(how, &["task", "blocking"]);
            run(|rt, a| fsync(rt, a.how.as_deref() == Some("blocking"), &a.dir))
        }
        "ticker-os-sleep" => run(|rt, a| ticker_os_sleep(rt, a.tasks.unwrap_or(4))),
        "spin-try-recv" => run(|rt, _| spin_try_recv(rt)),
        "spin-try-send" => run(|rt, _| spin_try_send(rt)),
        "spin-try-lock" => run(|rt, _| spin_try_lock(rt)),
        "no-cond-resched" => run(|rt, _| no_cond_resched(rt)),
        other => usage_error(format!("unknown case {other:?}"), USAGE),
    };
    let stalls: u64 = rt.stats().workers.iter().map(|w| w.stalls).sum();
    println!("RESULT {label}: {line}; stalls reported: {stalls}");
}

/// Refuses a `--how` that is not one of `valid` (before the run).
fn check_how(how: Option<&str>, valid: &[&str]) {
    if let Some(h) = how
        && !valid.contains(&h)
    {
        usage_error(format!("--how {h}: one of {}", valid.join(", ")), USAGE);
    }
}

/// The runtime of a case: `workers` workers on the first allowed CPUs, the monitor as asked.
fn runtime(workers: usize, a: &Args) -> lagom::Runtime {
    let all = lagom::Runtime::builder()
        .stall_monitor(false)
        .build()
        .unwrap_or_else(|e| usage_error(e, USAGE))
        .worker_cpus();
    if workers == 0 || workers > all.len() {
        usage_error(
            format!(
                "--workers {workers}: this machine allows 1 to {}",
                all.len()
            ),
            USAGE,
        );
    }
    let b = Builder::default()
        .worker_cpus(all[..workers].iter().copied())
        .stall_monitor(a.monitor)
        .stall_threshold(a.threshold)
        .on_stall(OnStall::Stderr);
    let b = if a.interpose { interpose(b) } else { b };
    b.build().unwrap_or_else(|e| usage_error(e, USAGE))
}

#[cfg(feature = "interpose")]
fn interpose(b: Builder) -> Builder {
    // SAFETY: the cases hold no thread-local borrow or thread-keyed lock across a sleep and
    // install no signal handler; `mutex-os-sleep` holds a std lock across one on purpose, to
    // show the deadlock the opt-in's safety section names (the monitor reports it and the
    // bound ends the run).
    unsafe { b.interpose_sleep() }
}

#[cfg(not(feature = "interpose"))]
fn interpose(_: Builder) -> Builder {
    unreachable!("--interpose is refused without the feature")
}

/// Runs `f` on the calling thread; if it has not returned within `bound`, prints `HANG: <case>
/// did not finish within <bound>` and ends the process with [`HANG_STATUS`] (a hung runtime
/// cannot be shut down: its workers are stuck in the OS, so the process exits without
/// dropping it).
fn bounded<T>(case: &str, bound: Duration, f: impl FnOnce() -> T) -> T {
    let (done, wait) = std::sync::mpsc::channel::<()>();
    let name = case.to_owned();
    let watchdog = std::thread::Builder::new()
        .name("watchdog".into())
        .spawn(move || {
            if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = wait.recv_timeout(bound) {
                println!("HANG: {name} did not finish within {bound:?}");
                let _ = std::io::stdout().flush();
                std::process::exit(HANG_STATUS);
            }
        })
        .expect("spawn the watchdog thread");
    let v = f();
    let _ = done.send(());
    let _ = watchdog.join();
    v
}

/// Runs every case of the table in a child process and prints one Markdown row each.
fn all(a: &Args) {
    let rows: &[&[&str]] = &[
        &["pipeline", "-w", "1", "--how", "std"],
        &["pipeline", "-w", "2", "--how", "std"],
        &["pipeline", "-w", "1", "--how", "std", "--cap", "0"],
        &["pipeline", "-w", "1", "--how", "crossbeam"],
        &["pipeline", "-w", "2", "--how", "crossbeam"],
        &["pingpong", "-w", "1"],
        &["pingpong", "-w", "2"],
        &["mutex-sleep", "-w", "1", "-n", "2"],
        &["mutex-sleep", "-w", "2", "-n", "8"],
        &["mutex-os-sleep", "-w", "1", "-n", "2"],
        &["os-sleep", "-w", "2", "--how", "std"],
        &["os-sleep", "-w", "2", "--how", "lagom"],
        &["os-sleep", "-w", "2", "--how", "blocking"],
        &["fsync", "-w", "2", "--how", "task"],
        &["fsync", "-w", "2", "--how", "blocking"],
        &["ticker-os-sleep", "-w", "2", "-n", "4"],
        &["spin-try-recv", "-w", "1"],
        &["spin-try-send", "-w", "1"],
        &["spin-try-lock", "-w", "1"],
        &["no-cond-resched", "-w", "1"],
    ];
    let me = std::env::current_exe().expect("the program's own path");
    println!("| case | outcome | stall reports (stderr) |");
    println!("|---|---|---|");
    for row in rows {
        let out = std::process::Command::new(&me)
            .args(*row)
            .args(&a.passed)
            .output()
            .expect("run a case");
        let text = String::from_utf8_lossy(&out.stdout);
        let result = text
            .lines()
            .find(|l| l.starts_with("RESULT") || l.starts_with("HANG"))
            .unwrap_or("(no result line)");
        let err = String::from_utf8_lossy(&out.stderr);
        let reports: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
        println!(
            "| `{}` | {} | {} |",
            row.join(" "),
            result.replace('|', "\\|"),
            reports.join("<br>").replace('|', "\\|")
        );
    }
}

/// Producer → 4 stages → consumer.
fn pipeline(rt: &lagom::Runtime, how: &str, cap: usize) -> String {
    const ITEMS: u64 = 10_000;
    type Tx = Box<dyn Fn(u64) + Send>;
    type Rx = Box<dyn FnMut() -> Option<u64> + Send>;
    if how != "std" && how != "crossbeam" {
        usage_error(format!("--how {how}: std or crossbeam"), USAGE);
    }
    let how = how.to_owned();
    let chan = move || -> (Tx, Rx) {
        match (how.as_str(), cap) {
            ("std", 0) => {
                let (t, r) = std::sync::mpsc::channel();
                (
                    Box::new(move |v| t.send(v).unwrap()),
                    Box::new(move || r.recv().ok()),
                )
            }
            ("std", c) => {
                let (t, r) = std::sync::mpsc::sync_channel(c);
                (
                    Box::new(move |v| t.send(v).unwrap()),
                    Box::new(move || r.recv().ok()),
                )
            }
            (_, 0) => {
                let (t, r) = crossbeam_channel::unbounded();
                (
                    Box::new(move |v| t.send(v).unwrap()),
                    Box::new(move || r.recv().ok()),
                )
            }
            (_, c) => {
                let (t, r) = crossbeam_channel::bounded(c);
                (
                    Box::new(move |v| t.send(v).unwrap()),
                    Box::new(move || r.recv().ok()),
                )
            }
        }
    };
    let t0 = Instant::now();
    let sum = rt.block_on(move || {
        let (tx, mut rx) = chan();
        let producer = spawn(move || (0..ITEMS).for_each(tx));
        let mut stages = Vec::new();
        for _ in 0..4 {
            let (tx, next) = chan();
            let mut input = std::mem::replace(&mut rx, next);
            stages.push(spawn(move || {
                while let Some(v) = input() {
                    tx(v + 1)
                }
            }));
        }
        let consumer = spawn(move || {
            let mut s = 0;
            while let Some(v) = rx() {
                s += v
            }
            s
        });
        producer.join().unwrap();
        stages.into_iter().for_each(|s| s.join().unwrap());
        consumer.join().unwrap()
    });
    assert_eq!(sum, ITEMS * (ITEMS - 1) / 2 + 4 * ITEMS);
    format!("done in {:.1} ms", ms(t0.elapsed()))
}

/// Two tasks bounce a value over two std channels.
fn pingpong(rt: &lagom::Runtime) -> String {
    const ROUNDS: u32 = 1_000;
    let t0 = Instant::now();
    rt.block_on(|| {
        let (ping, ping_rx) = std::sync::mpsc::channel::<u32>();
        let (pong, pong_rx) = std::sync::mpsc::channel::<u32>();
        let b = spawn(move || {
            for v in ping_rx {
                pong.send(v + 1).unwrap()
            }
        });
        let a = spawn(move || {
            let mut v = 0;
            for _ in 0..ROUNDS {
                ping.send(v).unwrap();
                v = pong_rx.recv().unwrap();
            }
            v
        });
        assert_eq!(a.join().unwrap(), ROUNDS);
        b.join().unwrap();
    });
    format!("{ROUNDS} round trips in {:.1} ms", ms(t0.elapsed()))
}

/// Tasks that hold a std `MutexGuard` across `lagom::task::sleep` (or, `os`, across
/// `std::thread::sleep`).
fn mutex_sleep(rt: &lagom::Runtime, tasks: usize, os: bool) -> String {
    const ROUNDS: u32 = 20;
    let t0 = Instant::now();
    let m = Arc::new(std::sync::Mutex::new(0u32));
    let total = rt.block_on(move || {
        let hs: Vec<_> = (0..tasks)
            .map(|_| {
                let m = Arc::clone(&m);
                spawn(move || {
                    for _ in 0..ROUNDS {
                        let mut g = m.lock().unwrap();
                        *g += 1;
                        if os {
                            std::thread::sleep(Duration::from_millis(1))
                        } else {
                            task::sleep(Duration::from_millis(1))
                        }
                    }
                })
            })
            .collect();
        hs.into_iter().for_each(|h| h.join().unwrap());
        *m.lock().unwrap()
    });
    format!("{total} locked sleeps in {:.1} ms", ms(t0.elapsed()))
}

/// 20 tasks × a 20 ms sleep.
fn os_sleep(rt: &lagom::Runtime, how: &str) -> String {
    let d = Duration::from_millis(20);
    let sleep: fn(Duration) = match how {
        "std" => std::thread::sleep,
        "lagom" => task::sleep,
        _ => |d| {
            task::spawn_blocking(move || std::thread::sleep(d))
                .join()
                .unwrap()
        },
    };
    let t0 = Instant::now();
    rt.block_on(move || {
        let hs: Vec<_> = (0..20).map(|_| spawn(move || sleep(d))).collect();
        hs.into_iter().for_each(|h| h.join().unwrap());
    });
    format!("20 × 20 ms sleeps took {:.1} ms", ms(t0.elapsed()))
}

/// 200 × (write 4 KiB + fsync + read), each in its own task.
fn fsync(rt: &lagom::Runtime, blocking: bool, dir: &std::path::Path) -> String {
    use std::io::{Read, Seek};
    fn op(path: std::path::PathBuf) {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .read(true)
            .write(true)
            .open(&path)
            .unwrap();
        f.write_all(&[7u8; 4096]).unwrap();
        f.sync_all().unwrap();
        f.rewind().unwrap();
        let mut back = Vec::new();
        f.read_to_end(&mut back).unwrap();
        assert_eq!(back.len(), 4096);
    }
    let dir = dir.join(format!("blocking-cases-fsync-{}", std::process::id()));
    std::fs::create_dir_all(&dir)
        .unwrap_or_else(|e| usage_error(format!("--dir: {}: {e}", dir.display()), USAGE));
    let t0 = Instant::now();
    let d2 = dir.clone();
    rt.block_on(move || {
        let hs: Vec<_> = (0..200)
            .map(|i| {
                let p = d2.join(format!("f{i}"));
                spawn(move || {
                    if blocking {
                        task::spawn_blocking(move || op(p)).join().unwrap()
                    } else {
                        op(p)
                    }
                })
            })
            .collect();
        hs.into_iter().for_each(|h| h.join().unwrap());
    });
    let took = t0.elapsed();
    let _ = std::fs::remove_dir_all(&dir);
    format!("200 × (write 4 KiB + fsync + read) took {:.1} ms", ms(took))
}

/// A 500 µs ticker beside tasks in `std::thread::sleep(50 ms)`.
fn ticker_os_sleep(rt: &lagom::Runtime, tasks: usize) -> String {
    let run = Duration::from_secs(1);
    rt.block_on(move || {
        let ticker = spawn(move || Lateness::tick(Duration::from_micros(500), run));
        let end = Instant::now() + run;
        let sleepers: Vec<_> = (0..tasks)
            .map(|_| {
                spawn(move || {
                    while Instant::now() < end {
                        std::thread::sleep(Duration::from_millis(50))
                    }
                })
            })
            .collect();
        sleepers.into_iter().for_each(|h| h.join().unwrap());
        ticker.join().unwrap().summary()
    })
}

/// A task spins on `try_recv` until another sends.
fn spin_try_recv(rt: &lagom::Runtime) -> String {
    let t0 = Instant::now();
    let spins = rt.block_on(|| {
        let (tx, rx) = lagom::sync::mpsc::channel::<u32>();
        let spinner = spawn(move || {
            let mut spins = 0u64;
            while rx.try_recv().is_err() {
                spins += 1;
                std::hint::spin_loop();
            }
            spins
        });
        let sender = spawn(move || tx.send(1).unwrap());
        sender.join().unwrap();
        spinner.join().unwrap()
    });
    format!("received after {spins} spins, {:.1} ms", ms(t0.elapsed()))
}

/// A task spins on `try_send` into a full channel until another receives.
fn spin_try_send(rt: &lagom::Runtime) -> String {
    let t0 = Instant::now();
    let spins = rt.block_on(|| {
        let (tx, rx) = lagom::sync::mpsc::sync_channel::<u32>(1);
        tx.send(0).unwrap();
        let spinner = spawn(move || {
            let mut spins = 0u64;
            while tx.try_send(1).is_err() {
                spins += 1;
                std::hint::spin_loop();
            }
            spins
        });
        let receiver = spawn(move || (rx.recv().unwrap(), rx.recv().unwrap()));
        assert_eq!(receiver.join().unwrap(), (0, 1));
        spinner.join().unwrap()
    });
    format!("sent after {spins} spins, {:.1} ms", ms(t0.elapsed()))
}

/// A task spins on `try_lock` while another holds the lock across a `lagom::task::sleep`.
fn spin_try_lock(rt: &lagom::Runtime) -> String {
    let t0 = Instant::now();
    let spins = rt.block_on(|| {
        let m = Arc::new(lagom::sync::Mutex::new(0u32));
        let (held, is_held) = lagom::sync::mpsc::channel::<()>();
        let m2 = Arc::clone(&m);
        let holder = spawn(move || {
            let _g = m2.lock().unwrap();
            held.send(()).unwrap();
            task::sleep(Duration::from_millis(1));
        });
        is_held.recv().unwrap();
        let spinner = spawn(move || {
            let mut spins = 0u64;
            while m.try_lock().is_err() {
                spins += 1;
                std::hint::spin_loop();
            }
            spins
        });
        holder.join().unwrap();
        spinner.join().unwrap()
    });
    format!("locked after {spins} spins, {:.1} ms", ms(t0.elapsed()))
}

/// A 1 ms ticker beside a task that computes 400 ms without `cond_resched`.
fn no_cond_resched(rt: &lagom::Runtime) -> String {
    rt.block_on(|| {
        let ticker = spawn(|| Lateness::tick(Duration::from_millis(1), Duration::from_secs(1)));
        // Let the ticker start before the hog does.
        task::sleep(Duration::from_millis(50));
        let hog = spawn(|| {
            let end = Instant::now() + Duration::from_millis(400);
            let mut x = 0u64;
            while Instant::now() < end {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
            }
            x
        });
        hog.join().unwrap();
        ticker.join().unwrap().summary()
    })
}

/// A periodic ticker's record: how late each wakeup was against its absolute deadline.
#[derive(Debug, Default)]
struct Lateness {
    late: Vec<Duration>,
    /// Deadlines already past when the ticker looked (it woke more than a period late).
    missed: usize,
}

impl Lateness {
    /// Runs a ticker in the calling task for `run`: it sleeps with `lagom::task::sleep_until`
    /// to deadlines `period` apart and records how late it wakes.
    fn tick(period: Duration, run: Duration) -> Lateness {
        let mut l = Lateness::default();
        let start = Instant::now();
        let mut next = start + period;
        while next < start + run {
            task::sleep_until(next);
            let now = Instant::now();
            l.late.push(now.saturating_duration_since(next));
            next += period;
            while next < now {
                l.missed += 1;
                next += period;
            }
        }
        l
    }

    /// `ticks, p50 … max` of the lateness, in µs.
    fn summary(&self) -> String {
        let mut v = self.late.clone();
        v.sort();
        let q = |p: f64| {
            v.get(((v.len() as f64 - 1.0) * p).round() as usize)
                .map_or(0, Duration::as_micros)
        };
        format!(
            "ticks {}, lateness p50 {} µs, p99 {} µs, max {} µs, missed {}",
            v.len(),
            q(0.5),
            q(0.99),
            q(1.0),
            self.missed
        )
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
