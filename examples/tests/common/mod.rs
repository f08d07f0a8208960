//! Shared by the schbench tests: the built binary, and a parser of schbench's text output
//! that accepts exactly schbench's format (it is what scripts written for schbench expect).

use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::OnceLock;

/// The schbench example binary of this build, built on first use (`cargo test` of one test
/// target does not build examples): `<target>/<profile>/examples/schbench`.
pub fn schbench() -> &'static PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let exe = std::env::current_exe().expect("test exe");
        // <target>/<profile>/deps/<test>
        let profile_dir = exe.parent().and_then(|d| d.parent()).expect("profile dir");
        let target = profile_dir.parent().expect("target dir");
        let release = profile_dir.file_name().is_some_and(|n| n == "release");
        let mut cmd = Command::new(env!("CARGO"));
        cmd.args([
            "build",
            "-q",
            "-p",
            "lagom-examples",
            "--example",
            "schbench",
        ])
        .arg("--target-dir")
        .arg(target)
        .current_dir(env!("CARGO_MANIFEST_DIR"));
        cmd.args(if release {
            &["--release"][..]
        } else {
            &["--profile", "test"][..]
        });
        let st = cmd.status().expect("run cargo build");
        assert!(st.success(), "cargo build --example schbench failed");
        profile_dir.join("examples").join("schbench")
    })
}

/// Runs schbench with `args` (split on spaces) to the end.
pub fn run(args: &str) -> Output {
    Command::new(schbench())
        .args(args.split_whitespace())
        .output()
        .expect("run schbench")
}

/// One row of a table.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The percentile (`99.0`).
    pub pct: f64,
    /// Marked with `*`.
    pub starred: bool,
    /// The latency or rate at that percentile.
    pub value: u64,
    /// Samples since the previous percentile.
    pub samples: u64,
}

/// One table.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    /// `Wakeup Latencies`, `Request Latencies` or `RPS`.
    pub label: String,
    /// `usec` or `requests`.
    pub units: String,
    /// The seconds in the header.
    pub runtime: u64,
    /// The total sample count in the header.
    pub total: u64,
    /// The percentile rows.
    pub rows: Vec<Row>,
    /// The footer's min.
    pub min: u64,
    /// The footer's max.
    pub max: u64,
}

/// A block of tables and the lines after them.
#[derive(Debug, Default)]
pub struct Block {
    /// Its tables, in order.
    pub tables: Vec<Table>,
    /// `current rps:` (interval blocks).
    pub current_rps: Option<f64>,
    /// `average rps:` (the final block).
    pub average_rps: Option<f64>,
    /// `sched delay: message M (usec) worker W (usec)`.
    pub sched_delay: Option<(u64, u64)>,
    /// Pipe mode's `avg worker transfer:` line.
    pub transfer: Option<String>,
}

fn parse_header(line: &str) -> Option<(String, String, u64, u64)> {
    // <Label> percentiles (<units>) runtime <secs> (s) (<N> total samples)
    let (label, rest) = line.split_once(" percentiles (")?;
    let (units, rest) = rest.split_once(") runtime ")?;
    let (secs, rest) = rest.split_once(" (s) (")?;
    let total = rest.strip_suffix(" total samples)")?;
    Some((
        label.to_string(),
        units.to_string(),
        secs.parse().ok()?,
        total.parse().ok()?,
    ))
}

fn parse_row(line: &str) -> Option<Row> {
    // \t* 99.0th: <value padded to 10> (<n> samples)
    let rest = line.strip_prefix('\t')?;
    let (starred, rest) = match rest.strip_prefix("* ") {
        Some(r) => (true, r),
        None => (false, rest.strip_prefix("  ")?),
    };
    let (pct, rest) = rest.split_once("th: ")?;
    let (value, rest) = rest.split_at_checked(10)?;
    if value.len() != 10 || !value.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    let samples = rest.strip_prefix(" (")?.strip_suffix(" samples)")?;
    if !pct.contains('.') || pct.split('.').nth(1)?.len() != 1 {
        return None;
    }
    Some(Row {
        pct: pct.parse().ok()?,
        starred,
        value: value.trim_end().parse().ok()?,
        samples: samples.parse().ok()?,
    })
}

fn parse_footer(line: &str) -> Option<(u64, u64)> {
    let rest = line.strip_prefix("\t  min=")?;
    let (min, max) = rest.split_once(", max=")?;
    Some((min.parse().ok()?, max.parse().ok()?))
}

/// Splits stderr into blocks: each ends with its `current rps:` / `average rps:` /
/// `final rps goal` / `avg worker transfer:` line. Lines of no block (start-up notes, the
/// lagom counters) are returned apart. Panics on a malformed table.
pub fn parse(stderr: &str) -> (Vec<Block>, Vec<String>) {
    let mut blocks = Vec::new();
    let mut other = Vec::new();
    let mut cur = Block::default();
    let mut lines = stderr.lines().peekable();
    while let Some(line) = lines.next() {
        if let Some((label, units, runtime, total)) = parse_header(line) {
            let mut rows = Vec::new();
            while let Some(r) = lines.peek().and_then(|l| parse_row(l)) {
                rows.push(r);
                lines.next();
            }
            let footer = lines.next().unwrap_or_default();
            let (min, max) =
                parse_footer(footer).unwrap_or_else(|| panic!("bad footer {footer:?}"));
            cur.tables.push(Table {
                label,
                units,
                runtime,
                total,
                rows,
                min,
                max,
            });
        } else if let Some(v) = line.strip_prefix("current rps: ") {
            cur.current_rps = Some(v.parse().expect("current rps"));
            blocks.push(std::mem::take(&mut cur));
        } else if let Some(v) = line.strip_prefix("average rps: ") {
            cur.average_rps = Some(v.parse().expect("average rps"));
        } else if let Some(v) = line.strip_prefix("sched delay: message ") {
            let (m, w) = v
                .strip_suffix(" (usec)")
                .and_then(|v| v.split_once(" (usec) worker "))
                .expect("sched delay line");
            cur.sched_delay = Some((m.parse().unwrap(), w.parse().unwrap()));
            if cur.average_rps.is_some() {
                blocks.push(std::mem::take(&mut cur));
            }
        } else if line.starts_with("avg worker transfer: ") {
            cur.transfer = Some(line.to_string());
            blocks.push(std::mem::take(&mut cur));
        } else {
            assert!(
                !line.starts_with('\t'),
                "a table line outside a table: {line:?}"
            );
            other.push(line.to_string());
        }
    }
    assert!(
        cur.tables.is_empty(),
        "tables without an ending line: {cur:?}"
    );
    (blocks, other)
}

/// Checks one table's shape: its label, units, rows (percentiles and stars) and counts.
pub fn check_table(t: &Table, label: &str, pcts: &[(f64, bool)]) {
    assert_eq!(t.label, label);
    let units = if label == "RPS" { "requests" } else { "usec" };
    assert_eq!(t.units, units, "{t:?}");
    let got: Vec<(f64, bool)> = t.rows.iter().map(|r| (r.pct, r.starred)).collect();
    assert_eq!(got, pcts, "{t:?}");
    // Per-row counts run from the previous percentile: they never add up to more than all.
    assert!(
        t.rows.iter().map(|r| r.samples).sum::<u64>() <= t.total,
        "{t:?}"
    );
    assert!(t.rows.windows(2).all(|w| w[0].value <= w[1].value), "{t:?}");
    if t.total > 0 {
        assert!(t.min <= t.max, "{t:?}");
    }
}

/// The rows of latency tables.
pub const LATENCY: &[(f64, bool)] = &[(50.0, false), (90.0, false), (99.0, true), (99.9, false)];
/// The rows of the RPS table.
pub const RPS: &[(f64, bool)] = &[(20.0, false), (50.0, true), (90.0, false)];
/// The rows of pipe mode's wakeup table.
pub const PIPE: &[(f64, bool)] = &[
    (20.0, false),
    (50.0, false),
    (90.0, false),
    (99.0, true),
    (99.9, false),
];

/// Another example binary of this build, built on first use as [`schbench`] is.
#[allow(dead_code)] // schbench's tests use only `schbench`
pub fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test exe");
    let profile_dir = exe.parent().and_then(|d| d.parent()).expect("profile dir");
    let target = profile_dir.parent().expect("target dir");
    let release = profile_dir.file_name().is_some_and(|n| n == "release");
    let mut cmd = Command::new(env!("CARGO"));
    cmd.args(["build", "-q", "-p", "lagom-examples", "--example", name])
        .arg("--target-dir")
        .arg(target)
        .current_dir(env!("CARGO_MANIFEST_DIR"));
    cmd.args(if release {
        &["--release"][..]
    } else {
        &["--profile", "test"][..]
    });
    let st = cmd.status().expect("run cargo build");
    assert!(st.success(), "cargo build --example {name} failed");
    profile_dir.join("examples").join(name)
}
