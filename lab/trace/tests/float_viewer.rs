//! The export read as a float64 viewer reads it (speedscope, Perfetto's and Chrome's JSON
//! importers parse every number to a double): on each track, a slice's `ts + dur`, added in
//! float64 microseconds, never passes the `ts` of the slice after it, whatever the
//! nanosecond timestamps, neither as written nor shifted to start at 0 as speedscope shifts
//! each track; a slice that ends as the next begins ends exactly there; every timestamp is
//! within half a nanosecond of the truth and in order; and no slice has an empty name.

use lagom_trace::{SwitchReason, Trace, TraceEvent, TraceEventKind, TrackTrace};

/// splitmix64: a small, well-mixed generator, seeded per case so a failure names its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A random trace: `workers` tracks of back-to-back runs (a run ending exactly where the
/// next begins, the case that overlaps when added in float64), runs separated by idle gaps,
/// timestamps anywhere up to a day after a start that is itself up to 2^52 ns; task 3 is
/// named with an empty name, as the runtime records unnamed tasks.
fn random_trace(rng: &mut Rng) -> (Trace, Vec<Vec<(u64, u64)>>) {
    let start = rng.below(1 << 52);
    let mut t = start + rng.below(86_400_000_000_000);
    let workers = 1 + rng.below(3) as usize;
    let mut tracks = Vec::new();
    let mut truth = Vec::new();
    for w in 0..workers {
        let mut events = Vec::new();
        let mut runs = Vec::new();
        let mut current: Option<u64> = None;
        for _ in 0..rng.below(200) {
            // Mostly tiny gaps (ns), sometimes long ones (ms to s): all digits matter.
            let gap = match rng.below(4) {
                0 => 0,
                1 => rng.below(1_000),
                2 => rng.below(10_000_000),
                _ => rng.below(3_000_000_000),
            };
            t += gap;
            let next = match rng.below(5) {
                0 => None,
                _ => Some(1 + rng.below(8)),
            };
            if current.is_none() && next.is_none() {
                continue;
            }
            events.push(TraceEvent {
                ts_ns: t,
                kind: TraceEventKind::Switch {
                    prev: current,
                    next,
                    reason: if current.is_some() {
                        SwitchReason::Block
                    } else {
                        SwitchReason::Idle
                    },
                },
            });
            if let Some(last) = runs.last_mut().filter(|_| current.is_some()) {
                let (_, end): &mut (u64, u64) = last;
                *end = t;
            }
            if next.is_some() {
                runs.push((t, u64::MAX));
            }
            current = next;
        }
        tracks.push(TrackTrace {
            cpu: Some(w),
            events,
            dropped: 0,
        });
        truth.push(runs);
    }
    // A run the trace ends in ends at the trace's end.
    let end = t + rng.below(1_000);
    for r in truth.iter_mut().flatten() {
        if r.1 == u64::MAX {
            r.1 = end;
        }
    }
    let names = [(1, String::from("one")), (3, String::new())]
        .into_iter()
        .collect();
    let trace = Trace::new((start, end), tracks, TrackTrace::default(), names, 0);
    let truth = truth
        .into_iter()
        .map(|runs| {
            runs.into_iter()
                .map(|(s, e)| (s - start, e - start))
                .collect()
        })
        .collect();
    (trace, truth)
}

/// The text of field `key`'s value in one event line (`"key":value`).
fn field<'a>(line: &'a str, key: &str) -> &'a str {
    let pat = format!("\"{key}\":");
    let at = line
        .find(&pat)
        .unwrap_or_else(|| panic!("no {key} in {line}"))
        + pat.len();
    let rest = &line[at..];
    let end = rest.find([',', '}']).unwrap_or(rest.len());
    &rest[..end]
}

fn num(text: &str) -> f64 {
    text.parse().unwrap()
}

#[test]
fn slices_never_overlap_in_float64_however_a_viewer_adds() {
    let mut checked = 0usize;
    let mut abutting = 0usize;
    for seed in 0..400u64 {
        let mut rng = Rng(seed);
        let (trace, truth) = random_trace(&mut rng);
        let json = trace.json().to_string();
        // Per track (tid = worker + 1): (ts, dur), in the order written (time order).
        let mut slices: Vec<Vec<(f64, f64)>> = vec![Vec::new(); truth.len()];
        for line in json.lines().filter(|l| l.contains("\"ph\":\"X\"")) {
            let tid: usize = field(line, "tid").parse().unwrap();
            let name = field(line, "name");
            assert!(
                name.len() > 2 && name != "\"\"",
                "seed {seed}: a slice without a name: {line}"
            );
            if field(line, "task") == "3" {
                assert_eq!(name, "\"task-3\"", "seed {seed}: {line}");
            }
            slices[tid - 1].push((num(field(line, "ts")), num(field(line, "dur"))));
        }
        for (w, (got, want)) in slices.iter().zip(&truth).enumerate() {
            assert_eq!(got.len(), want.len(), "seed {seed}, worker {w}");
            // speedscope shifts each track by its first ts before adding.
            let min = got.iter().map(|s| s.0).fold(f64::INFINITY, f64::min);
            for (i, (&(ts, dur), &(start, end))) in got.iter().zip(want).enumerate() {
                let near = |us: f64, ns: u64| (us * 1000.0 - ns as f64).abs() <= 0.5;
                assert!(
                    near(ts, start),
                    "seed {seed}, worker {w}, slice {i}: {ts} vs {start}"
                );
                assert!(
                    near(ts + dur, end),
                    "seed {seed}, worker {w}, slice {i}: end"
                );
                let Some(&(next, _)) = got.get(i + 1) else {
                    continue;
                };
                let next_start = want[i + 1].0;
                assert!(
                    ts + dur <= next,
                    "seed {seed}, worker {w}: slice {i} ({ts} + {dur} = {}) passes the next \
                     one's start {next}",
                    ts + dur
                );
                assert!(
                    (ts - min) + dur <= next - min,
                    "seed {seed}, worker {w}: slice {i} passes the next once shifted by {min}"
                );
                assert_eq!(next_start > start, next > ts, "seed {seed}: order kept");
                if end == next_start {
                    assert_eq!(ts + dur, next, "seed {seed}: abutting slices meet exactly");
                    assert_eq!((ts - min) + dur, next - min, "seed {seed}: shifted too");
                    abutting += 1;
                }
                checked += 1;
            }
        }
    }
    assert!(
        checked > 10_000,
        "only {checked} neighbouring slices checked"
    );
    assert!(abutting > 1_000, "only {abutting} abutting slices checked");
}

/// The case of the report: runs that end exactly as the next begins, at timestamps where
/// three-decimal microseconds, shifted as speedscope shifts a track, add up past the next
/// start. The export's numbers meet exactly.
#[test]
fn a_known_overshoot_is_gone() {
    let dec = |ns: u64| {
        format!("{}.{:03}", ns / 1000, ns % 1000)
            .parse::<f64>()
            .unwrap()
    };
    let mut found = None;
    'search: for a in 2_000_000u64..2_200_000 {
        for (first, d) in [(1_886_412u64, 16_365u64), (1_234, 333), (977, 1_001)] {
            let (ts, end) = (a, a + d);
            let (m, t, e) = (dec(first), dec(ts), dec(end));
            if (t - m) + dec(d) > e - m {
                found = Some((first, ts, end));
                break 'search;
            }
        }
    }
    let (first, ts, end) = found.expect("an overshooting case in the range searched");
    let sw = |ts_ns, prev, next| TraceEvent {
        ts_ns,
        kind: TraceEventKind::Switch {
            prev,
            next,
            reason: SwitchReason::Yield,
        },
    };
    let track = TrackTrace {
        cpu: Some(0),
        events: vec![
            sw(first, None, Some(9)),
            sw(first + 10, Some(9), None),
            sw(ts, None, Some(1)),
            sw(end, Some(1), Some(2)),
            sw(end + 5, Some(2), None),
        ],
        dropped: 0,
    };
    let trace = Trace::new(
        (0, end + 10),
        vec![track],
        TrackTrace::default(),
        Default::default(),
        0,
    );
    let json = trace.json().to_string();
    let xs: Vec<&str> = json
        .lines()
        .filter(|l| l.contains("\"ph\":\"X\""))
        .collect();
    let min = num(field(xs[0], "ts"));
    let (t, d, next) = (
        num(field(xs[1], "ts")),
        num(field(xs[1], "dur")),
        num(field(xs[2], "ts")),
    );
    assert_eq!((t - min) + d, next - min, "{json}");
    assert_eq!(t + d, next, "{json}");
    assert_eq!(field(xs[1], "name"), "\"task-1\"");
}
