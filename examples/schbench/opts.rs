//! Command-line options: schbench's (same letters, long names, defaults and
//! order rules) and lagom's own. Numbers are checked, not `atoi`'d: text where a number
//! belongs is an error. Long options may be abbreviated to any unique prefix, as getopt_long
//! allows.

use std::ffi::OsString;

use lagom_topology::CpuSet;

/// The run length when `-r` is not given (schbench's own default is 30 s).
pub const DEFAULT_RUNTIME: u64 = 5;
/// The largest pipe-mode transfer.
pub const PIPE_MAX: u64 = 1 << 20;

/// Which scheduler runs the threads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// lagom tasks on pinned workers.
    Lagom,
    /// Plain OS threads blocking in futex waits.
    Os,
}

impl Backend {
    /// The name `--runtime` takes.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Lagom => "lagom",
            Backend::Os => "os",
        }
    }
}

/// A `-M` / `-W` value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CpuSpec {
    /// `auto`: message threads on the first CPUs, workers on the rest.
    Auto,
    /// An explicit list, in ascending order.
    List(Vec<usize>),
}

/// Every option, after the order rules.
#[derive(Clone, Debug)]
pub struct Opts {
    /// `-m`: message threads.
    pub message_threads: usize,
    /// `-t`: workers per message thread (0: one per CPU, divided among message threads).
    pub worker_threads: usize,
    /// `-r`: seconds to run (0: until Ctrl-C).
    pub runtime: u64,
    /// `-w`: seconds after which the statistics are zeroed once.
    pub warmup: u64,
    /// `-i`: seconds between interval tables.
    pub interval: u64,
    /// `-z`: zero the statistics every this many seconds (0: never).
    pub zerotime: u64,
    /// `-F`: the matrix footprint per worker, KiB.
    pub footprint_kb: u64,
    /// `-n`: matrix multiplies per request.
    pub operations: u64,
    /// `-s`: µs slept per request.
    pub sleep_us: u64,
    /// `-C`: sleep before the request timer starts.
    pub calibrate: bool,
    /// Take the per-CPU lock around the math (`-L` turns it off).
    pub locking: bool,
    /// `-R`: requests per second, all message threads together.
    pub rps: u64,
    /// `-A`: the CPU busy percentage auto-RPS aims at (0: off).
    pub auto_rps: u64,
    /// `-p`: pipe-mode transfer size in bytes (0: off).
    pub pipe: u64,
    /// `-M`.
    pub message_cpus: Option<CpuSpec>,
    /// `-W`.
    pub worker_cpus: Option<CpuSpec>,
    /// `-j`: JSON output file (`-`: stdout).
    pub json: Option<String>,
    /// `-J`.
    pub jobname: Option<String>,
    /// `--split`: percentage of the footprint that is private.
    pub split: Option<u64>,
    /// `--runtime lagom|os`.
    pub backend: Backend,
    /// `--cpus`: lagom's worker CPUs.
    pub cpus: Option<Vec<usize>>,
    /// `--features`: lagom's scheduler features.
    pub features: Option<String>,
    /// `--trace`: write lagom's trace there.
    pub trace: Option<String>,
    /// `--stats`: print lagom's counters.
    pub stats: bool,
    /// `--host-spinners N`: plain spinning threads pinned to each CPU of the pool.
    pub host_spinners: usize,
    /// `--spinner-cpus LIST`: where the host spinners run (`None`: every CPU of the pool).
    pub spinner_cpus: Option<Vec<usize>>,
    /// `--host-hints on|off`: lagom's `Builder::host_hints` (`None`: the default).
    pub host_hints: Option<bool>,
    /// `--float`: lagom's worker threads are not pinned (`Builder::pin_workers(false)`).
    pub float: bool,
    /// The command line, for the JSON.
    pub cmdline: String,
    /// Lines schbench prints while parsing (a capped pipe size).
    pub notes: Vec<String>,
}

impl Default for Opts {
    fn default() -> Opts {
        Opts {
            message_threads: 1,
            worker_threads: 0,
            runtime: DEFAULT_RUNTIME,
            warmup: 0,
            interval: 10,
            zerotime: 0,
            footprint_kb: 256,
            operations: 5,
            sleep_us: 100,
            calibrate: false,
            locking: true,
            rps: 0,
            auto_rps: 0,
            pipe: 0,
            message_cpus: None,
            worker_cpus: None,
            json: None,
            jobname: None,
            split: None,
            backend: Backend::Lagom,
            cpus: None,
            features: None,
            trace: None,
            stats: false,
            host_spinners: 0,
            host_hints: None,
            spinner_cpus: None,
            float: false,
            cmdline: String::new(),
            notes: Vec::new(),
        }
    }
}

/// Why parsing stopped; every case exits with status 1.
#[derive(Debug, PartialEq, Eq)]
pub enum ParseError {
    /// Print the message (if any), then the usage.
    Usage(Option<String>),
    /// Print this one line.
    Line(String),
}

/// The usage text (printed to stderr by `--help` and on a bad option).
pub const USAGE: &str = "\
schbench usage (lagom's port):
\t-m (--message-threads): number of message threads (def: 1)
\t-t (--threads): worker threads per message thread (def: allowed CPUs / message threads)
\t-r (--runtime): seconds to run, 0 = until Ctrl-C (def: 5; schbench's own: 30)
\t-w (--warmuptime): seconds before the stats are zeroed once (def: 0; 0 when -r < 30)
\t-i (--intervaltime): seconds between interval tables (def: 10)
\t-z (--zerotime): zero the stats every this many seconds (def: 0, never)
\t-F (--cache_footprint): matrix footprint per worker in KB (def: 256)
\t-n (--operations): matrix multiplies per request (def: 5)
\t-s (--sleep_usec): usec slept per request (def: 100)
\t-C (--calibrate): sleep before the request timer starts; implies -L
\t-L (--no-locking): no per-CPU lock around the matrix work (def: locking on)
\t-R (--rps): requests per second mode, total over message threads (def: 0, off)
\t-A (--auto-rps): raise or lower RPS until CPU busy% is about this (def: 0, off)
\t-p (--pipe): pipe mode, bytes per transfer, at most 1048576 (def: 0, off)
\t-M (--message-cpus): message thread CPUs, a list like 0-3,8 or auto
\t-W (--worker-cpus): worker thread CPUs, a list like 0-3,8 or auto
\t-j (--json): write JSON results to this file, - for stdout
\t-J (--jobname): a job name for the JSON
\t--split: percent of the footprint private to each worker, 0-100 (def: all private)
\t--help: this text
lagom's options:
\t--runtime lagom|os: run the threads as lagom tasks (def) or as plain OS threads
\t--cpus LIST: lagom's worker CPUs, one pinned worker each (def: every allowed CPU)
\t--features STRING: lagom scheduler features, e.g. NO_DELAY_DEQUEUE,TTWU_QUEUE_DELAYED
\t--trace FILE: write a Chrome/Perfetto trace of lagom's scheduling to FILE
\t--stats: print lagom's per-worker counters after the tables
\t--host-spinners N: N plain threads spin pinned to each CPU of the pool, a noisy host
\t    made on purpose (both runtimes; def: 0)
\t--spinner-cpus LIST: the CPUs the host spinners run on (def: every CPU of the pool)
\t--host-hints on|off: lagom's workers tell the kernel their tasks' slice and weight (def: on)
\t--float: lagom's worker threads float over the allowed CPUs instead of one pinned per CPU";

/// Long options: name, the short letter they stand for, whether they take a value.
const LONG: &[(&str, char, bool)] = &[
    ("message-threads", 'm', true),
    ("threads", 't', true),
    ("runtime", 'r', true),
    ("warmuptime", 'w', true),
    ("intervaltime", 'i', true),
    ("zerotime", 'z', true),
    ("cache_footprint", 'F', true),
    ("operations", 'n', true),
    ("sleep_usec", 's', true),
    ("calibrate", 'C', false),
    ("no-locking", 'L', false),
    ("rps", 'R', true),
    ("auto-rps", 'A', true),
    ("pipe", 'p', true),
    ("message-cpus", 'M', true),
    ("worker-cpus", 'W', true),
    ("json", 'j', true),
    ("jobname", 'J', true),
    ("split", '1', true),
    ("help", 'h', false),
    ("cpus", '2', true),
    ("features", '3', true),
    ("trace", '4', true),
    ("stats", '5', false),
    ("host-spinners", '6', true),
    ("host-hints", '7', true),
    ("float", '8', false),
    ("spinner-cpus", '9', true),
];

/// The long option `name` stands for: an exact name, or the one name it is a prefix of.
fn resolve_long(name: &str) -> Result<(&'static str, char), ParseError> {
    if let Some(&(n, c, _)) = LONG.iter().find(|(n, _, _)| *n == name) {
        return Ok((n, c));
    }
    let hits: Vec<_> = LONG
        .iter()
        .filter(|(n, _, _)| n.starts_with(name))
        .collect();
    match hits.as_slice() {
        [(n, c, _)] => Ok((n, *c)),
        [] => Err(ParseError::Usage(Some(format!(
            "schbench: unrecognized option '--{name}'"
        )))),
        _ => Err(ParseError::Usage(Some(format!(
            "schbench: option '--{name}' is ambiguous"
        )))),
    }
}

/// A whole number for option `opt`.
/// The most threads (message and worker threads together) `-m` and `-t` ask for.
const MAX_THREADS: usize = 1 << 16;

/// The largest count `-n`, `-R` and `-A` take.
const MAX_COUNT: u64 = 1_000_000_000;

/// The largest matrix footprint per worker `-F` takes, in KiB (16 GiB): its matrices are
/// allocated and filled.
const MAX_FOOTPRINT_KB: u64 = 16 << 20;

/// The longest time in seconds an option takes (a year): the run counts in µs.
const MAX_SECONDS: u64 = 365 * 24 * 3600;

fn number(opt: &str, value: &str) -> Result<u64, ParseError> {
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ParseError::Line(format!(
            "schbench: {opt} needs a whole number, got '{value}'"
        )));
    }
    value
        .parse()
        .map_err(|_| ParseError::Line(format!("schbench: {opt} value '{value}' is too large")))
}

/// A CPU list (`0-3,8`) for option `opt`.
pub fn cpu_list(opt: &str, value: &str) -> Result<Vec<usize>, ParseError> {
    match CpuSet::parse_list(value) {
        Some(set) if !set.is_empty() && !value.trim().is_empty() => Ok(set.iter().collect()),
        _ => Err(ParseError::Line(format!(
            "schbench: {opt} '{value}' is not a CPU list such as 0-3,8"
        ))),
    }
}

fn cpu_spec(opt: &str, value: &str) -> Result<CpuSpec, ParseError> {
    if value == "auto" {
        return Ok(CpuSpec::Auto);
    }
    cpu_list(opt, value).map(CpuSpec::List)
}

/// Parses `args` (the program name first).
pub fn parse(args: &[OsString]) -> Result<Opts, ParseError> {
    use lexopt::prelude::*;
    let mut o = Opts {
        cmdline: args
            .iter()
            .map(|a| a.to_string_lossy())
            .collect::<Vec<_>>()
            .join(" "),
        ..Opts::default()
    };
    let mut rps_given = false;
    let mut extra = Vec::new();
    let mut p = lexopt::Parser::from_args(args.iter().skip(1).cloned());
    let bad = |e: lexopt::Error| ParseError::Usage(Some(format!("schbench: {e}")));
    while let Some(arg) = p.next().map_err(bad)? {
        let (c, opt) = match arg {
            Short(c) => (c, format!("-{c}")),
            Long(name) => {
                let (n, c) = resolve_long(name)?;
                (c, format!("--{n}"))
            }
            Value(v) => {
                extra.push(v.to_string_lossy().into_owned());
                continue;
            }
        };
        let takes_value = LONG.iter().any(|&(_, l, v)| l == c && v);
        let value = if takes_value {
            let v = p.value().map_err(bad)?;
            Some(v.to_string_lossy().into_owned())
        } else {
            None
        };
        let v = value.as_deref().unwrap_or("");
        match c {
            'm' => o.message_threads = number(&opt, v)? as usize,
            't' => o.worker_threads = number(&opt, v)? as usize,
            'r' => match v {
                "lagom" => o.backend = Backend::Lagom,
                "os" => o.backend = Backend::Os,
                _ if opt == "-r" => o.runtime = number(&opt, v)?,
                _ => {
                    o.runtime = number(&opt, v).map_err(|_| {
                        ParseError::Line(format!(
                            "schbench: --runtime takes seconds (a whole number), lagom or \
                             os; got '{v}'"
                        ))
                    })?
                }
            },
            'w' => o.warmup = number(&opt, v)?,
            'i' => o.interval = number(&opt, v)?,
            'z' => o.zerotime = number(&opt, v)?,
            'F' => o.footprint_kb = number(&opt, v)?,
            'n' => o.operations = number(&opt, v)?,
            's' => o.sleep_us = number(&opt, v)?,
            'C' => o.calibrate = true,
            'L' => o.locking = false,
            'R' => {
                o.rps = number(&opt, v)?;
                rps_given = true;
            }
            'A' => {
                o.auto_rps = number(&opt, v)?;
                o.warmup = 0;
                if !rps_given {
                    o.rps = 10;
                }
            }
            'p' => {
                o.pipe = number(&opt, v)?;
                if o.pipe > PIPE_MAX {
                    o.notes.push(format!("pipe size too big, using {PIPE_MAX}"));
                    o.pipe = PIPE_MAX;
                }
                o.warmup = 0;
            }
            'M' => o.message_cpus = Some(cpu_spec(&opt, v)?),
            'W' => o.worker_cpus = Some(cpu_spec(&opt, v)?),
            'j' => o.json = Some(v.to_string()),
            'J' => o.jobname = Some(v.to_string()),
            '1' => {
                let s = number(&opt, v)?;
                if s > 100 {
                    return Err(ParseError::Line(format!(
                        "schbench: --split must be between 0 and 100, got {s}"
                    )));
                }
                o.split = Some(s);
            }
            'h' => return Err(ParseError::Usage(None)),
            '2' => o.cpus = Some(cpu_list(&opt, v)?),
            '3' => o.features = Some(v.to_string()),
            '4' => o.trace = Some(v.to_string()),
            '5' => o.stats = true,
            '6' => {
                o.host_spinners = number(&opt, v)? as usize;
                if o.host_spinners > 64 {
                    return Err(ParseError::Line(format!(
                        "schbench: --host-spinners {}: at most 64 per CPU",
                        o.host_spinners
                    )));
                }
            }
            '7' => {
                o.host_hints = Some(match v {
                    "on" => true,
                    "off" => false,
                    _ => {
                        return Err(ParseError::Line(format!(
                            "schbench: --host-hints takes on or off, got '{v}'"
                        )));
                    }
                })
            }
            '8' => o.float = true,
            '9' => o.spinner_cpus = Some(cpu_list(&opt, v)?),
            _ => {
                return Err(ParseError::Usage(Some(format!(
                    "schbench: invalid option -- '{c}'"
                ))));
            }
        }
    }
    if !extra.is_empty() {
        return Err(ParseError::Line(format!(
            "Error Extra arguments '{}'",
            extra.join(" ")
        )));
    }
    if o.message_threads == 0 {
        return Err(ParseError::Line(
            "schbench: -m must be at least 1, got 0".to_string(),
        ));
    }
    if o.message_threads > MAX_THREADS
        || o.worker_threads > MAX_THREADS
        || o.message_threads.saturating_mul(o.worker_threads.max(1)) > MAX_THREADS
    {
        return Err(ParseError::Line(format!(
            "schbench: -m {} x -t {} threads: at most {MAX_THREADS} in all",
            o.message_threads, o.worker_threads
        )));
    }
    for (name, v, max) in [
        ("--operations", o.operations, MAX_COUNT),
        ("--rps", o.rps, MAX_COUNT),
        ("--auto-rps", o.auto_rps, MAX_COUNT),
        ("--sleep_usec", o.sleep_us, MAX_SECONDS * 1_000_000),
    ] {
        if v > max {
            return Err(ParseError::Line(format!(
                "schbench: {name} {v} is too large: at most {max}"
            )));
        }
    }
    if o.footprint_kb > MAX_FOOTPRINT_KB {
        return Err(ParseError::Line(format!(
            "schbench: --cache_footprint {} KB is too large: at most {MAX_FOOTPRINT_KB} KB \
             (16 GiB) per worker",
            o.footprint_kb
        )));
    }
    // Times in seconds are counted in µs while running: bounded so that none overflows.
    for (name, secs) in [
        ("--runtime", o.runtime),
        ("--warmuptime", o.warmup),
        ("--intervaltime", o.interval),
        ("--zerotime", o.zerotime),
    ] {
        if secs > MAX_SECONDS {
            return Err(ParseError::Line(format!(
                "schbench: {name} {secs} is too long: at most {MAX_SECONDS} seconds (a year)"
            )));
        }
    }
    if o.calibrate {
        o.locking = false;
    }
    if o.runtime < 30 {
        o.warmup = 0;
    }
    if o.backend == Backend::Os {
        let lagom_only = [
            ("--cpus", o.cpus.is_some()),
            ("--features", o.features.is_some()),
            ("--trace", o.trace.is_some()),
            ("--stats", o.stats),
            ("--host-hints", o.host_hints.is_some()),
            ("--float", o.float),
        ];
        if let Some((name, _)) = lagom_only.iter().find(|(_, set)| *set) {
            return Err(ParseError::Line(format!(
                "schbench: {name} is a lagom option; it has no meaning with --runtime os"
            )));
        }
    }
    Ok(o)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(args: &str) -> Result<Opts, ParseError> {
        let v: Vec<OsString> = std::iter::once("schbench")
            .chain(args.split_whitespace())
            .map(OsString::from)
            .collect();
        parse(&v)
    }

    fn line(r: Result<Opts, ParseError>) -> String {
        match r {
            Err(ParseError::Line(l)) => l,
            other => panic!("expected a one-line error, got {other:?}"),
        }
    }

    #[test]
    fn defaults() {
        let o = p("").unwrap();
        assert_eq!((o.message_threads, o.worker_threads, o.runtime), (1, 0, 5));
        assert_eq!(
            (o.interval, o.footprint_kb, o.operations, o.sleep_us),
            (10, 256, 5, 100)
        );
        assert!(o.locking && !o.calibrate && o.backend == Backend::Lagom);
    }

    #[test]
    fn short_long_prefix_and_attached_forms() {
        let o = p("-m2 --threads 3 --runtime=7 --oper 9 --cache_footprint 512 -CL").unwrap();
        assert_eq!((o.message_threads, o.worker_threads, o.runtime), (2, 3, 7));
        assert_eq!((o.operations, o.footprint_kb), (9, 512));
        assert!(o.calibrate && !o.locking);
        assert_eq!(p("--runtime os -r 3").unwrap().backend, Backend::Os);
        assert_eq!(p("--runtime os --runtime 3").unwrap().runtime, 3);
        assert!(matches!(p("--c 1"), Err(ParseError::Usage(Some(m))) if m.contains("ambiguous")));
    }

    #[test]
    fn order_rules() {
        // Warmup is forced to 0 below 30 s; -A resets it, a later -w wins.
        assert_eq!(p("-w 5 -r 10").unwrap().warmup, 0);
        assert_eq!(p("-w 5 -r 30").unwrap().warmup, 5);
        assert_eq!(p("-r 30 -w 5 -A 50").unwrap().warmup, 0);
        assert_eq!(p("-r 30 -A 50 -w 5").unwrap().warmup, 5);
        // -A starts at 10 RPS unless -R came before it.
        assert_eq!(p("-A 50").unwrap().rps, 10);
        assert_eq!(p("-R 100 -A 50").unwrap().rps, 100);
        assert_eq!(p("-A 50 -R 100").unwrap().rps, 100);
        // -C implies -L; -p is capped.
        assert!(!p("-C").unwrap().locking);
        let o = p("-p 2000000").unwrap();
        assert_eq!(o.pipe, PIPE_MAX);
        assert_eq!(o.notes, ["pipe size too big, using 1048576"]);
    }

    #[test]
    fn cpu_lists() {
        let o = p("-M 0 -W 1-3,5 --cpus 0,1").unwrap();
        assert_eq!(o.message_cpus, Some(CpuSpec::List(vec![0])));
        assert_eq!(o.worker_cpus, Some(CpuSpec::List(vec![1, 2, 3, 5])));
        assert_eq!(o.cpus, Some(vec![0, 1]));
        assert_eq!(p("-W auto").unwrap().worker_cpus, Some(CpuSpec::Auto));
        for bad in ["-M 3-1", "-W 0-", "--cpus x", "-M ,"] {
            assert!(line(p(bad)).contains("is not a CPU list"), "{bad}");
        }
    }

    #[test]
    fn bad_input() {
        assert!(line(p("-m abc")).contains("-m needs a whole number, got 'abc'"));
        assert!(line(p("--threads -1")).contains("whole number"));
        assert!(line(p("--runtime fast")).contains("lagom or os"));
        assert!(line(p("--split 101")).contains("between 0 and 100, got 101"));
        assert_eq!(p("--split 100").unwrap().split, Some(100));
        assert_eq!(line(p("-r 1 foo bar")), "Error Extra arguments 'foo bar'");
        assert!(line(p("-m 0")).contains("at least 1"));
        assert!(matches!(p("--bogus"), Err(ParseError::Usage(Some(m))) if m.contains("'--bogus'")));
        assert!(matches!(p("-x"), Err(ParseError::Usage(Some(_)))));
        assert!(matches!(p("-m"), Err(ParseError::Usage(Some(_)))));
        assert_eq!(p("--help").unwrap_err(), ParseError::Usage(None));
        assert!(matches!(
            p("--calibrate=3"),
            Err(ParseError::Usage(Some(_)))
        ));
    }

    #[test]
    fn lagom_options_are_refused_in_os_mode() {
        for opt in [
            "--cpus 0",
            "--features NO_DELAY_DEQUEUE",
            "--trace t.json",
            "--stats",
        ] {
            let l = line(p(&format!("--runtime os {opt}")));
            assert!(l.contains("is a lagom option"), "{opt}: {l}");
        }
        assert!(p("--runtime lagom --stats").unwrap().stats);
    }
}
