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
