//! Scenario files: every built-in parses; each kind of mistake is reported with its line and
//! field, by the parser or when the scenario meets a machine.

use lagom_sim::{BUILTIN, Dist, Machine, Op, Options, Sim, builtin, parse};

/// `(line, field)` of the error `text` gives, parsed and then built on a 2-CPU machine.
fn error_at(text: &str) -> (usize, String, String) {
    let e = match parse(text) {
        Err(e) => e,
        Ok(s) => match Sim::new(
            &s,
            Machine::named("cpus-2").unwrap(),
            Options::of(&s).unwrap(),
        ) {
            Err(e) => e,
            Ok(_) => panic!("no error in:\n{text}"),
        },
    };
    (e.line, e.field.clone(), e.message.clone())
}

#[test]
fn every_builtin_parses() {
    for name in BUILTIN {
        let s = parse(builtin(name).unwrap()).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(s.name, *name);
        assert!(!s.tasks.is_empty());
    }
}

#[test]
fn a_scenario_reads_as_written() {
    let s = parse(
        "scenario x   # a comment\n\
         duration 1.5s\nwarmup 100ms\nseed 42\nstall 250us\nwakeups 1000\n\
         cost switch 300ns\ncost kick 20us\nresched 5us\nidle_spin 0\n\
         features NO_DELAY_DEQUEUE, TTWU_QUEUE_DELAYED\n\
         task a count=3 nice=-5 slice=300us cpus=0-1 measure=no\n\
           loop 10\n    run uniform(1ms, 2ms)\n    wake b[i%2] after exp(10us) from 1\n  end\n\
           sleep 5ms\nend\n\
         task b count=2 cpu=i start=no\n  block\nend\n",
    )
    .unwrap();
    assert_eq!(
        (s.name.as_str(), s.duration, s.warmup, s.seed),
        ("x", 1_500_000_000, 100_000_000, 42)
    );
    assert_eq!((s.stall, s.wakeups), (250_000, Some(1000)));
    assert_eq!((s.params.costs.switch, s.params.costs.kick), (300, 20_000));
    assert_eq!((s.params.resched, s.params.idle_spin), (5_000, 0));
    assert_eq!(
        s.features.as_deref(),
        Some("NO_DELAY_DEQUEUE, TTWU_QUEUE_DELAYED")
    );
    let a = &s.tasks[0];
    assert_eq!(
        (a.count, a.nice, a.slice, a.measure, a.start),
        (3, -5, Some(300_000), false, true)
    );
    assert_eq!(
        a.script[1].op,
        Op::Run(Dist::Uniform {
            lo: 1_000_000,
            hi: 2_000_000
        })
    );
    assert_eq!(a.script[1].line, 14);
    assert!(!s.tasks[1].start);
}

#[test]
fn mistakes_name_their_line_and_field() {
    let cases: &[(&str, usize, &str, &str)] = &[
        (
            "task a nice=40\n  run 1ms\nend\n",
            1,
            "nice",
            "from -20 to 19",
        ),
        (
            "task a\n  run 1ms\n  wake self after 1us sync\nend\n",
            3,
            "sync",
            "only for a wake made now",
        ),
        (
            "durashun 1s\ntask a\nend\n",
            1,
            "durashun",
            "unknown directive",
        ),
        (
            "duration 10\ntask a\nend\n",
            1,
            "duration",
            "not a duration",
        ),
        (
            "task a\n  run 1ms\n  loop 3\n    run 1ms\n",
            3,
            "loop",
            "no `end`",
        ),
        (
            "task a\n  loop 3\n    run 1ms\n  end\n",
            1,
            "task",
            "no `end`",
        ),
        ("task a\n  run 1ms\n", 1, "task", "no `end`"),
        (
            "task a\n  run uniform(2ms, 1ms)\nend\n",
            2,
            "run",
            "low end is above",
        ),
        ("task a\n  run fast\nend\n", 2, "run", "not a duration"),
        ("cost foo 1us\ntask a\nend\n", 1, "cost foo", "unknown cost"),
        (
            "task a\n  wake b after\nend\ntask b\nend\n",
            2,
            "wake",
            "needs a value",
        ),
        ("task a\n  jump\nend\n", 2, "jump", "unknown step"),
        ("task a colour=red\nend\n", 1, "colour", "unknown attribute"),
        ("task a cpus=3-\nend\n", 1, "cpus", "not a CPU list"),
        (
            "task a\n  block extra\nend\n",
            2,
            "block",
            "takes no argument",
        ),
        ("end\n", 1, "end", "outside a task"),
        // Found when the scenario meets the machine (2 CPUs, ids 0-1).
        (
            "task a\n  wake nobody\nend\n",
            2,
            "wake",
            "no task is named `nobody`",
        ),
        (
            "task a count=3\n  post b[i]\nend\ntask b count=2\nend\n",
            2,
            "post",
            "`b[2]`, but `b` has 2",
        ),
        ("task a cpus=0-3\nend\n", 1, "cpus", "`2-3` are not CPUs"),
        ("task a count=3 cpu=i\nend\n", 1, "cpu", "CPU 2"),
        (
            "task a\n  wake self after 1us from 7\nend\n",
            2,
            "from",
            "CPU 7 is not",
        ),
        (
            "task a\n  spawn b\nend\ntask b\nend\n",
            2,
            "spawn",
            "start=no",
        ),
        ("task a\nend\ntask a\nend\n", 3, "task", "declared twice"),
    ];
    for &(text, line, field, says) in cases {
        let (l, f, m) = error_at(text);
        assert_eq!(
            (l, f.as_str()),
            (line, field),
            "for:\n{text}\n(message: {m})"
        );
        assert!(
            m.contains(says),
            "for:\n{text}\nthe message `{m}` does not say `{says}`"
        );
    }
}

#[test]
fn an_unknown_feature_is_the_crate_error() {
    let s = parse("features NO_SUCH_FEATURE\ntask a\nend\n").unwrap();
    let e = Options::of(&s).unwrap_err();
    assert!(e.to_string().contains("valid names are"), "{e}");
}

/// The example scenario files of `examples/scenarios/` parse, and run on the machine each
/// names.
#[test]
fn example_files_parse_and_run() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/scenarios");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "scn") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let s = parse(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let machine = s.topology.as_deref().unwrap_or("cpus-2");
        let m = Machine::named(machine)
            .unwrap_or_else(|| panic!("{}: machine {machine}", path.display()));
        let mut o = Options::of(&s).unwrap();
        o.duration = o.duration.min(100_000_000);
        let mut sim = Sim::new(&s, m, o).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        sim.run();
        assert!(sim.events() > 0);
        n += 1;
    }
    assert!(n >= 1, "no scenario file in {}", dir.display());
}
