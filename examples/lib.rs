//! Helpers shared by lagom's example programs: argument errors that print usage, JSON
//! output, and timing of repeated runs.

use std::time::{Duration, Instant};

use lagom_topology::CpuSet;

/// Makes a closed stdout end the program quietly (as `head` expects of `topo | head`) rather
/// than panic in `println!`: restores the default action of SIGPIPE, which Rust's runtime
/// sets to "ignore".
pub fn default_sigpipe() {
    // SAFETY: setting a signal's disposition to its default has no preconditions; it runs at
    // the start of `main`, before any other thread exists.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
}

/// Prints `message` and `usage` to stderr and exits with status 2 (a usage error).
pub fn usage_error(message: impl std::fmt::Display, usage: &str) -> ! {
    eprintln!("error: {message}\n\n{usage}");
    std::process::exit(2)
}

/// The value of `--features SPEC`, checked: a spec such as `NO_DELAY_DEQUEUE,TTWU_QUEUE` that
/// `lagom_policy::Features::parse` accepts, so that a bad name is a usage error (exit
/// status 2, naming the valid ones) rather than a failed start.
pub fn features_arg(v: std::ffi::OsString) -> Result<String, lexopt::Error> {
    let spec = v.into_string().map_err(lexopt::Error::NonUnicodeValue)?;
    match lagom_policy::Features::parse(&spec) {
        Ok(_) => Ok(spec),
        Err(e) => Err(format!("--features: {e}").into()),
    }
}

/// The value of a flag given in µs (`--gap-us 3`), in ns: a usage error naming `flag` when
/// it is no number or too large for a count of nanoseconds.
pub fn micros_arg(flag: &str, v: std::ffi::OsString) -> Result<u64, lexopt::Error> {
    let us: u64 = v
        .into_string()
        .map_err(lexopt::Error::NonUnicodeValue)?
        .parse()
        .map_err(|e| format!("{flag}: {e}"))?;
    us.checked_mul(1000)
        .ok_or_else(|| format!("{flag} {us}: too large (at most {} µs)", u64::MAX / 1000).into())
}

/// The value of a flag given in seconds (`--seconds 2.5`): a usage error naming `flag` when it
/// is no number, not above zero, or longer than a year.
pub fn seconds_arg(flag: &str, v: std::ffi::OsString) -> Result<f64, lexopt::Error> {
    const YEAR: f64 = 365.0 * 24.0 * 3600.0;
    let text = v.into_string().map_err(lexopt::Error::NonUnicodeValue)?;
    let s: f64 = text
        .trim()
        .parse()
        .map_err(|e| format!("{flag} `{text}`: {e}"))?;
    if s.is_finite() && s > 0.0 && s <= YEAR {
        Ok(s)
    } else {
        Err(format!("{flag} {text}: a number of seconds above 0 and at most a year").into())
    }
}

/// A CPU set as a JSON array of CPU numbers.
pub fn cpus_json(set: &CpuSet) -> serde_json::Value {
    serde_json::Value::from(set.iter().collect::<Vec<_>>())
}

/// `value` as JSON text: an object with one member per line, each member's value compact
/// (so that long CPU lists stay on one line); anything else compact.
pub fn json_text(value: &serde_json::Value) -> String {
    let serde_json::Value::Object(map) = value else {
        return value.to_string();
    };
    if map.is_empty() {
        return String::from("{}");
    }
    let members: Vec<String> = map
        .iter()
        .map(|(k, v)| format!("  {}: {v}", serde_json::Value::from(k.as_str())))
        .collect();
    format!("{{\n{}\n}}", members.join(",\n"))
}

/// Prints `value` on stdout as [`json_text`] formats it.
pub fn print_json(value: &serde_json::Value) {
    println!("{}", json_text(value));
}

/// Times of repeated runs of one operation.
#[derive(Debug, Clone)]
pub struct Timings {
    samples: Vec<Duration>,
}

impl Timings {
    /// Runs `f` `runs` times (at least once) and records each wall-clock duration.
    pub fn measure<T>(runs: usize, mut f: impl FnMut() -> T) -> (Timings, T) {
        let mut samples = Vec::with_capacity(runs.max(1));
        let mut last = None;
        for _ in 0..runs.max(1) {
            let t0 = Instant::now();
            let out = f();
            samples.push(t0.elapsed());
            last = Some(out);
        }
        samples.sort();
        let Some(out) = last else {
            unreachable!("at least one run")
        };
        (Timings { samples }, out)
    }

    /// The fastest run.
    pub fn min(&self) -> Duration {
        self.samples[0]
    }

    /// The median run.
    pub fn median(&self) -> Duration {
        self.samples[self.samples.len() / 2]
    }

    /// The slowest run.
    pub fn max(&self) -> Duration {
        self.samples[self.samples.len() - 1]
    }

    /// The number of runs.
    pub fn runs(&self) -> usize {
        self.samples.len()
    }
}

impl std::fmt::Display for Timings {
    /// `"min 1.234 ms, median 1.300 ms, max 2.000 ms over 20 runs"`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        write!(
            f,
            "min {:.3} ms, median {:.3} ms, max {:.3} ms over {} runs",
            ms(self.min()),
            ms(self.median()),
            ms(self.max()),
            self.runs()
        )
    }
}

/// CPU time the calling OS thread has used (`CLOCK_THREAD_CPUTIME_ID`). Inside a lagom task it
/// is the CPU time of the worker thread running it: a measure that other processes taking
/// the CPU away do not inflate, unlike wall-clock time on a shared machine.
pub fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is writable; CLOCK_THREAD_CPUTIME_ID always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// A noisy host made on purpose: plain OS threads outside any runtime, each pinned to one
/// CPU and spinning there at nice 0 until this is dropped (also on an early return or a
/// panic that unwinds; a process exit ends them with it). `--host-spinners` of `latency`
/// and `schbench` starts them.
pub struct HostSpinners {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl HostSpinners {
    /// Starts `per_cpu` spinners on each of `cpus`, and returns once every one of them is
    /// pinned and spinning. An error (a CPU this process may not use) stops those started.
    pub fn start(cpus: &[usize], per_cpu: usize) -> Result<HostSpinners, String> {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::{Arc, mpsc};
        let mut s = HostSpinners {
            stop: Arc::new(AtomicBool::new(false)),
            threads: Vec::new(),
        };
        let (tx, rx) = mpsc::channel();
        for &cpu in cpus {
            for _ in 0..per_cpu {
                let (stop, tx) = (Arc::clone(&s.stop), tx.clone());
                s.threads.push(std::thread::spawn(move || {
                    let pinned = pin_thread(cpu);
                    let ok = pinned.is_ok();
                    let _ = tx.send(pinned);
                    while ok && !stop.load(Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                }));
            }
        }
        drop(tx);
        let n = s.threads.len();
        // Each spinner keeps its sender while it spins: take one report from each.
        for r in rx.iter().take(n) {
            r.map_err(|e| format!("host spinner: {e}"))?;
        }
        Ok(s)
    }

    /// How many spinners run.
    pub fn len(&self) -> usize {
        self.threads.len()
    }

    /// Whether none runs.
    pub fn is_empty(&self) -> bool {
        self.threads.is_empty()
    }
}

impl Drop for HostSpinners {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Pins the calling thread to `cpu`.
pub fn pin_thread(cpu: usize) -> Result<(), String> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(format!("CPU {cpu} is beyond CPU_SETSIZE"));
    }
    // SAFETY: an all-zero cpu_set_t is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `cpu` < CPU_SETSIZE (checked above).
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: `set` is a valid cpu_set_t of the size passed; pid 0 is the calling thread.
    let r = unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) };
    if r != 0 {
        return Err(format!(
            "sched_setaffinity to CPU {cpu}: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timings_are_sorted_and_count_runs() {
        let mut n = 0u64;
        let (t, out) = Timings::measure(5, || {
            n += 1;
            n
        });
        assert_eq!(out, 5);
        assert_eq!(t.runs(), 5);
        assert!(t.min() <= t.median() && t.median() <= t.max());
    }

    #[test]
    fn json_text_is_valid_json_with_one_member_per_line() {
        let v = serde_json::json!({"pus": 2, "l3": [[0, 1]], "name": "a\"b"});
        let text = json_text(&v);
        assert_eq!(text.lines().count(), 5);
        assert_eq!(serde_json::from_str::<serde_json::Value>(&text).unwrap(), v);
        assert_eq!(json_text(&serde_json::json!({})), "{}");
    }

    #[test]
    fn cpus_json_lists_cpus() {
        let set: CpuSet = "0-2,8".parse().unwrap();
        assert_eq!(cpus_json(&set).to_string(), "[0,1,2,8]");
    }
}

// The README's program compiles and runs as a doctest of this unpublished package
// (`cargo test --doc -p lagom-examples`), where the README's path holds in every build.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
