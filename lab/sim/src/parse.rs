//! The scenario parser; the format is on [`parse`].

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use super::error::ScenarioError;
use super::rng::Dist;
use super::scenario::{
    Affinity, Instance, KERNEL_PREEMPT_LATENCY, Op, Preempt, Scenario, Step, Target, TaskSpec,
    Waker,
};
use lagom_policy::{MAX_NICE, MIN_NICE};
use lagom_topology::CpuSet;

/// Parses a scenario file.
///
/// The format (`examples/scenarios/` in the repository holds whole files):
///
/// ```text
/// # comment (to the end of the line)
/// scenario NAME            topology NAME|ROOT      features NAME,NO_NAME,…
/// seed N                   duration DUR            warmup DUR
/// wakeups N                stall DUR               resched DUR
/// idle_spin DUR            cost switch|wake|wakelist|kick|migrate DUR
/// preempt cooperative|kernel [DUR]
///
/// task NAME [count=N|cpus] [nice=N] [slice=DUR] [cpus=LIST | cpu=EXPR] [start=yes|no] [measure=yes|no]
///   run DIST | sleep DIST | block | yield | exit
///   wake TARGET [after DIST] [from CPU|outside] [sync]
///   post TARGET | wake_posted | spawn TARGET
///   loop [N]
///     …
///   end
/// end
/// ```
///
/// * DUR: an integer or decimal with a unit, `ns`, `us` (or `µs`), `ms` or `s`: `10us`,
///   `1.5ms`; `0` alone is allowed.
/// * DIST: a DUR (fixed), `uniform(DUR, DUR)`, or `exp(DUR)` (exponential with that mean).
/// * LIST: a CPU list of OS CPU ids, `0-3,8`. EXPR: `K`, `i`, `i/K` or `i%K`, where `i` is
///   the instance's own index (`cpu=i` pins instance i to CPU i).
/// * TARGET: `self`, `NAME` (its instance 0), or `NAME[EXPR]`.
/// * `count=cpus`: one instance per virtual CPU of the machine the scenario runs on.
/// * `preempt`: when a CPU acts on a request made while it runs a task
///   ([`Preempt`](super::Preempt)): `cooperative` (the default, lagom's: at the task's next
///   scheduling point) or `kernel` (within DUR, 2 µs if not given, as the kernel's resched
///   IPI and stopper do).
/// * `wake … sync`: the waker blocks next (the threaded runtime's `Unparker::unpark_sync`):
///   CPU selection and the preemption check get `WF_SYNC`. Only for a wake made now, from
///   the task's own CPU.
///
/// Every error names the line and the field (directive, attribute or step) and says what was
/// expected.
///
/// # Errors
/// The first mistake, with its line and field.
///
/// ```
/// let s = lagom_sim::parse("scenario x\ntask a count=2 nice=5\n  loop 3\n    run 1ms\n  end\nend\n")?;
/// assert_eq!((s.name.as_str(), s.tasks[0].count, s.tasks[0].nice), ("x", 2, 5));
/// assert_eq!(s.tasks[0].script.len(), 3);
/// # Ok::<(), lagom_sim::ScenarioError>(())
/// ```
pub fn parse(text: &str) -> Result<Scenario, ScenarioError> {
    let mut s = Scenario::new("scenario");
    // The task being read, and the lines of its open loops.
    let mut task: Option<TaskSpec> = None;
    let mut loops: Vec<usize> = Vec::new();
    for (k, raw) in text.lines().enumerate() {
        let line = k + 1;
        let code = raw.split('#').next().unwrap_or("").trim();
        if code.is_empty() {
            continue;
        }
        let words = tokens(code).map_err(|m| ScenarioError::new(line, first_word(code), m))?;
        let head = words[0].as_str();
        let args = &words[1..];
        if let Some(t) = task.as_mut() {
            if head == "end" {
                no_args(line, "end", args)?;
                if loops.pop().is_some() {
                    t.script.push(Step { op: Op::End, line });
                } else if let Some(done) = task.take() {
                    s.tasks.push(done);
                }
                continue;
            }
            let op = step(line, head, args)?;
            if let Op::Loop { .. } = op {
                loops.push(line);
            }
            t.script.push(Step { op, line });
            continue;
        }
        match head {
            "task" => task = Some(task_decl(line, args)?),
            "scenario" => s.name = one(line, head, args)?.to_string(),
            "topology" => s.topology = Some(one(line, head, args)?.to_string()),
            "features" => {
                // The rest of the line, blanks and all (`NO_A, B`).
                let rest = code["features".len()..].trim();
                if rest.is_empty() {
                    return Err(ScenarioError::new(
                        line,
                        head,
                        "expected a feature list such as `NO_DELAY_DEQUEUE,TTWU_QUEUE_DELAYED`",
                    ));
                }
                s.features = Some(rest.to_string());
            }
            "seed" => s.seed = int(line, head, one(line, head, args)?)?,
            "duration" => s.duration = dur(line, head, one(line, head, args)?)?,
            "warmup" => s.warmup = dur(line, head, one(line, head, args)?)?,
            "wakeups" => s.wakeups = Some(int(line, head, one(line, head, args)?)?),
            "stall" => s.stall = dur(line, head, one(line, head, args)?)?,
            "resched" => {
                let d = dur(line, head, one(line, head, args)?)?;
                if d == 0 {
                    return Err(ScenarioError::new(
                        line,
                        head,
                        "the interval between scheduling points must be above 0",
                    ));
                }
                s.params.resched = d;
            }
            "preempt" => {
                let spec = match args {
                    [mode] => mode.clone(),
                    [mode, latency] => format!("{mode}:{latency}"),
                    _ => String::new(),
                };
                s.params.preempt = preempt(&spec).map_err(|m| ScenarioError::new(line, head, m))?;
            }
            "idle_spin" => s.params.idle_spin = dur(line, head, one(line, head, args)?)?,
            "cost" => {
                let [what, v] = args else {
                    return Err(ScenarioError::new(
                        line,
                        head,
                        "expected `cost switch|wake|wakelist|kick|migrate DUR`",
                    ));
                };
                let field = format!("cost {what}");
                let v = dur(line, &field, v)?;
                let c = &mut s.params.costs;
                match what.as_str() {
                    "switch" => c.switch = v,
                    "wake" => c.wake = v,
                    "wakelist" => c.wakelist = v,
                    "kick" => c.kick = v,
                    "migrate" => c.migrate = v,
                    _ => {
                        return Err(ScenarioError::new(
                            line,
                            field,
                            "unknown cost; the costs are switch, wake, wakelist, kick and migrate",
                        ));
                    }
                }
            }
            "end" => return Err(ScenarioError::new(line, head, "`end` outside a task")),
            _ => {
                return Err(ScenarioError::new(
                    line,
                    head,
                    "unknown directive; expected scenario, topology, features, seed, duration, \
                     warmup, wakeups, stall, resched, preempt, idle_spin, cost or task",
                ));
            }
        }
    }
    if let Some(t) = task {
        let at = loops.last().copied().unwrap_or(t.line);
        let what = if loops.is_empty() { "task" } else { "loop" };
        return Err(ScenarioError::new(
            at,
            what,
            format!("no `end` closes this {what}"),
        ));
    }
    if s.tasks.is_empty() {
        return Err(ScenarioError::new(
            0,
            "task",
            "the scenario declares no task",
        ));
    }
    if s.warmup >= s.duration {
        return Err(ScenarioError::new(
            0,
            "warmup",
            "the warm-up must end before the duration",
        ));
    }
    Ok(s)
}

/// The first word of a line, for errors in splitting it.
fn first_word(code: &str) -> String {
    code.split_whitespace().next().unwrap_or("").to_string()
}

/// Splits a line into words at blanks, keeping `( … )` groups (which may hold blanks) in
/// their word.
fn tokens(code: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut depth = 0u32;
    for c in code.chars() {
        match c {
            '(' => {
                depth += 1;
                cur.push(c);
            }
            ')' => {
                depth = depth.checked_sub(1).ok_or("`)` without `(`")?;
                cur.push(c);
            }
            c if c.is_whitespace() && depth == 0 => {
                if !cur.is_empty() {
                    out.push(core::mem::take(&mut cur));
                }
            }
            c if c.is_whitespace() => {}
            c => cur.push(c),
        }
    }
    if depth > 0 {
        return Err(String::from("`(` without `)`"));
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    Ok(out)
}

fn no_args(line: usize, field: &str, args: &[String]) -> Result<(), ScenarioError> {
    match args.first() {
        None => Ok(()),
        Some(a) => Err(ScenarioError::new(
            line,
            field,
            format!("takes no argument, found `{a}`"),
        )),
    }
}

fn one<'a>(line: usize, field: &str, args: &'a [String]) -> Result<&'a str, ScenarioError> {
    match args {
        [a] => Ok(a),
        [] => Err(ScenarioError::new(line, field, "expected one value")),
        [_, extra, ..] => Err(ScenarioError::new(
            line,
            field,
            format!("expected one value, found also `{extra}`"),
        )),
    }
}

fn int(line: usize, field: &str, v: &str) -> Result<u64, ScenarioError> {
    v.parse().map_err(|_| {
        ScenarioError::new(line, field, format!("`{v}` is not a non-negative integer"))
    })
}

/// A duration (module doc) in ns.
/// A preemption mode, `cooperative`, `kernel` or `kernel:DUR` ([`Preempt::parse`]).
pub(super) fn preempt(spec: &str) -> Result<Preempt, String> {
    let expected = "expected `cooperative`, `kernel` or `kernel:DUR` (a latency such as `2us`)";
    match spec.split_once(':') {
        None if spec == "cooperative" => Ok(Preempt::Cooperative),
        None if spec == "kernel" => Ok(Preempt::Kernel {
            latency: KERNEL_PREEMPT_LATENCY,
        }),
        Some(("kernel", latency)) => dur(0, "preempt", latency)
            .map(|latency| Preempt::Kernel { latency })
            .map_err(|e| format!("the latency: {}", e.message)),
        _ => Err(format!("`{spec}`: {expected}")),
    }
}

fn dur(line: usize, field: &str, v: &str) -> Result<u64, ScenarioError> {
    let bad = || {
        ScenarioError::new(
            line,
            field,
            format!(
                "`{v}` is not a duration such as `10us`, `1.5ms` or `2s` (units ns, us, µs, ms, s)"
            ),
        )
    };
    if v == "0" {
        return Ok(0);
    }
    let split = v
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or_else(bad)?;
    let (num, unit) = v.split_at(split);
    let scale: u64 = match unit {
        "ns" => 1,
        "us" | "µs" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        _ => return Err(bad()),
    };
    let (whole, frac) = num.split_once('.').unwrap_or((num, ""));
    if whole.is_empty() && frac.is_empty() {
        return Err(bad());
    }
    let w: u64 = if whole.is_empty() {
        0
    } else {
        whole.parse().map_err(|_| bad())?
    };
    let mut ns = w.checked_mul(scale).ok_or_else(bad)?;
    let mut place = scale;
    for d in frac.bytes() {
        if !d.is_ascii_digit() {
            return Err(bad());
        }
        place /= 10;
        if place == 0 {
            return Err(ScenarioError::new(
                line,
                field,
                format!("`{v}` is finer than a nanosecond"),
            ));
        }
        ns = ns
            .checked_add(u64::from(d - b'0') * place)
            .ok_or_else(bad)?;
    }
    Ok(ns)
}

/// A distribution (module doc).
fn dist(line: usize, field: &str, v: &str) -> Result<Dist, ScenarioError> {
    let inner = |prefix: &str| v.strip_prefix(prefix).and_then(|r| r.strip_suffix(')'));
    if let Some(args) = inner("uniform(") {
        let Some((a, b)) = args.split_once(',') else {
            return Err(ScenarioError::new(
                line,
                field,
                format!("`{v}`: expected `uniform(LOW, HIGH)`"),
            ));
        };
        let (lo, hi) = (dur(line, field, a.trim())?, dur(line, field, b.trim())?);
        if lo > hi {
            return Err(ScenarioError::new(
                line,
                field,
                format!("`{v}`: the low end is above the high end"),
            ));
        }
        return Ok(Dist::Uniform { lo, hi });
    }
    if let Some(mean) = inner("exp(") {
        let mean = dur(line, field, mean.trim())?;
        if mean == 0 {
            return Err(ScenarioError::new(
                line,
                field,
                format!("`{v}`: the mean must be above 0"),
            ));
        }
        return Ok(Dist::Exp { mean });
    }
    if v.contains('(') {
        return Err(ScenarioError::new(
            line,
            field,
            format!("`{v}`: the distributions are a duration, uniform(LOW, HIGH) and exp(MEAN)"),
        ));
    }
    Ok(Dist::Fixed(dur(line, field, v)?))
}

/// An instance expression (module doc).
fn instance(line: usize, field: &str, v: &str) -> Result<Instance, ScenarioError> {
    let bad = || {
        ScenarioError::new(
            line,
            field,
            format!("`{v}` is not an index such as `3`, `i`, `i/4` or `i%4`"),
        )
    };
    let k = |s: &str| -> Result<u32, ScenarioError> {
        match s.parse::<u32>() {
            Ok(0) => Err(ScenarioError::new(
                line,
                field,
                format!("`{v}` divides by zero"),
            )),
            Ok(k) => Ok(k),
            Err(_) => Err(bad()),
        }
    };
    if v == "i" {
        return Ok(Instance::Same);
    }
    if let Some(d) = v.strip_prefix("i/") {
        return Ok(Instance::Div(k(d)?));
    }
    if let Some(m) = v.strip_prefix("i%") {
        return Ok(Instance::Mod(k(m)?));
    }
    v.parse().map(Instance::Index).map_err(|_| bad())
}

/// A target (module doc).
fn target(line: usize, field: &str, v: &str) -> Result<Target, ScenarioError> {
    if v == "self" {
        return Ok(Target::Own);
    }
    let (name, inst) = match v.split_once('[') {
        Some((n, rest)) => {
            let Some(e) = rest.strip_suffix(']') else {
                return Err(ScenarioError::new(
                    line,
                    field,
                    format!("`{v}`: expected `NAME[INDEX]`"),
                ));
            };
            (n, instance(line, field, e)?)
        }
        None => (v, Instance::Index(0)),
    };
    check_name(line, field, name)?;
    Ok(Target::Task {
        name: name.to_string(),
        instance: inst,
    })
}

fn check_name(line: usize, field: &str, name: &str) -> Result<(), ScenarioError> {
    let ok = !name.is_empty()
        && name != "self"
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.');
    if ok {
        Ok(())
    } else {
        Err(ScenarioError::new(
            line,
            field,
            format!("`{name}` is not a task name (letters, digits, `_`, `-`, `.`; not `self`)"),
        ))
    }
}

fn yes_no(line: usize, field: &str, v: &str) -> Result<bool, ScenarioError> {
    match v {
        "yes" => Ok(true),
        "no" => Ok(false),
        _ => Err(ScenarioError::new(
            line,
            field,
            format!("`{v}`: expected yes or no"),
        )),
    }
}

/// `task NAME [attr=value …]`.
fn task_decl(line: usize, args: &[String]) -> Result<TaskSpec, ScenarioError> {
    let Some((name, attrs)) = args.split_first() else {
        return Err(ScenarioError::new(
            line,
            "task",
            "expected `task NAME [attribute=value …]`",
        ));
    };
    check_name(line, "task", name)?;
    let mut t = TaskSpec::new(name, Vec::new());
    t.line = line;
    for a in attrs {
        let Some((key, v)) = a.split_once('=') else {
            return Err(ScenarioError::new(
                line,
                a.as_str(),
                "expected `attribute=value`",
            ));
        };
        match key {
            "count" if v == "cpus" => t.per_cpu = true,
            "count" => {
                let n = int(line, key, v)?;
                if n == 0 || n > 1_000_000 {
                    return Err(ScenarioError::new(
                        line,
                        key,
                        format!("`{v}`: a count from 1 to 1000000"),
                    ));
                }
                t.count = n as u32;
            }
            "nice" => {
                t.nice = match v.parse::<i32>() {
                    Ok(n) if (MIN_NICE..=MAX_NICE).contains(&n) => n,
                    _ => {
                        return Err(ScenarioError::new(
                            line,
                            key,
                            format!("`{v}` is not an integer from {MIN_NICE} to {MAX_NICE}"),
                        ));
                    }
                }
            }
            "slice" => t.slice = Some(dur(line, key, v)?),
            "cpus" => {
                let set = CpuSet::parse_list(v)
                    .filter(|s| !s.is_empty())
                    .ok_or_else(|| {
                        ScenarioError::new(
                            line,
                            key,
                            format!("`{v}` is not a CPU list such as `0-3,8`"),
                        )
                    })?;
                t.affinity = Affinity::Cpus(set);
            }
            "cpu" => t.affinity = Affinity::PerInstance(instance(line, key, v)?),
            "start" => t.start = yes_no(line, key, v)?,
            "measure" => t.measure = yes_no(line, key, v)?,
            _ => {
                return Err(ScenarioError::new(
                    line,
                    key,
                    "unknown attribute; expected count, nice, slice, cpus, cpu, start or measure",
                ));
            }
        }
    }
    Ok(t)
}

/// One step of a script.
fn step(line: usize, head: &str, args: &[String]) -> Result<Op, ScenarioError> {
    Ok(match head {
        "run" => Op::Run(dist(line, head, one(line, head, args)?)?),
        "sleep" => Op::Sleep(dist(line, head, one(line, head, args)?)?),
        "block" => {
            no_args(line, head, args)?;
            Op::Block
        }
        "yield" => {
            no_args(line, head, args)?;
            Op::Yield
        }
        "exit" => {
            no_args(line, head, args)?;
            Op::Exit
        }
        "wake_posted" => {
            no_args(line, head, args)?;
            Op::WakePosted
        }
        "post" => Op::Post(target(line, head, one(line, head, args)?)?),
        "spawn" => Op::Spawn(target(line, head, one(line, head, args)?)?),
        "loop" => match args {
            [] => Op::Loop { count: None },
            [n] => Op::Loop {
                count: Some(int(line, head, n)?),
            },
            [_, extra, ..] => {
                return Err(ScenarioError::new(
                    line,
                    head,
                    format!("expected `loop [N]`, found also `{extra}`"),
                ));
            }
        },
        "wake" => {
            let Some((who, mut rest)) = args.split_first() else {
                return Err(ScenarioError::new(
                    line,
                    head,
                    "expected `wake TARGET [after DIST] [from CPU|outside] [sync]`",
                ));
            };
            let target = target(line, head, who)?;
            let (mut after, mut from, mut sync) = (None, Waker::Here, false);
            while let Some((k, more)) = rest.split_first() {
                if k == "sync" {
                    sync = true;
                    rest = more;
                    continue;
                }
                let Some((v, more)) = more.split_first() else {
                    return Err(ScenarioError::new(
                        line,
                        head,
                        format!("`{k}` needs a value"),
                    ));
                };
                match k.as_str() {
                    "after" => after = Some(dist(line, "after", v)?),
                    "from" if v == "outside" => from = Waker::Outside,
                    "from" => {
                        from = Waker::Cpu(v.parse().map_err(|_| {
                            ScenarioError::new(
                                line,
                                "from",
                                format!("`{v}`: expected a CPU id or `outside`"),
                            )
                        })?)
                    }
                    _ => {
                        return Err(ScenarioError::new(
                            line,
                            head,
                            format!("`{k}`: expected `after`, `from` or `sync`"),
                        ));
                    }
                }
                rest = more;
            }
            if sync && (after.is_some() || from != Waker::Here) {
                return Err(ScenarioError::new(
                    line,
                    "sync",
                    "`sync` says this task blocks next: only for a wake made now, from here \
                     (no `after`, no `from`)",
                ));
            }
            Op::Wake {
                target,
                after,
                from,
                sync,
            }
        }
        "task" => {
            return Err(ScenarioError::new(
                line,
                head,
                "a task is declared inside another; close it with `end` first",
            ));
        }
        _ => {
            return Err(ScenarioError::new(
                line,
                head,
                "unknown step; expected run, sleep, block, yield, exit, wake, post, wake_posted, \
                 spawn, loop or end",
            ));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        let d = |v| dur(1, "x", v);
        assert_eq!(d("0"), Ok(0));
        assert_eq!(d("10us"), Ok(10_000));
        assert_eq!(d("10µs"), Ok(10_000));
        assert_eq!(d("1.5ms"), Ok(1_500_000));
        assert_eq!(d(".5s"), Ok(500_000_000));
        assert_eq!(d("7ns"), Ok(7));
        assert!(d("1.5ns").is_err());
        assert!(d("10").is_err());
        assert!(d("ms").is_err());
        assert!(d("1e3us").is_err());
    }

    #[test]
    fn tokens_keep_groups() {
        assert_eq!(
            tokens("run uniform(1ms, 2ms)  # x").unwrap(),
            ["run", "uniform(1ms,2ms)", "#", "x"]
        );
        assert!(tokens("run uniform(1ms").is_err());
    }
}
