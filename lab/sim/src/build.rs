//! Building a simulation's tasks from a scenario: every instance of every declaration, with
//! targets resolved to task ids, loops to step indices, affinities and wakers to virtual
//! CPUs — and every mistake that shows only now (a name, an instance, a CPU the machine does
//! not have) reported with its line and field.

use alloc::collections::BTreeMap;
use alloc::vec::Vec;

use super::engine::NONE;
use super::error::ScenarioError;
use super::machine::Machine;
use super::scenario::{Affinity, Op, Scenario, Target, TaskSpec, Waker};
use super::task::{ROp, RWaker, Task};
use lagom_policy::SchedEntity;

/// The tasks of `s`, every instance of every declaration, with targets, affinities and
/// wakers resolved against `m`.
pub(super) fn tasks(s: &Scenario, m: &Machine) -> Result<Vec<Task>, ScenarioError> {
    // Declaration name → (first task id, count, declaration index).
    let mut names: BTreeMap<&str, (u32, u32, usize)> = BTreeMap::new();
    let mut next = 0u32;
    let count_of = |spec: &TaskSpec| {
        if spec.per_cpu {
            spec.count.saturating_mul(m.cpus() as u32)
        } else {
            spec.count
        }
    };
    for (k, spec) in s.tasks.iter().enumerate() {
        let count = count_of(spec);
        if count == 0 {
            return Err(ScenarioError::new(
                spec.line,
                "count",
                "a task needs count ≥ 1",
            ));
        }
        if names.insert(&spec.name, (next, count, k)).is_some() {
            return Err(ScenarioError::new(
                spec.line,
                "task",
                alloc::format!("a task named `{}` is declared twice", spec.name),
            ));
        }
        next = next
            .checked_add(count)
            .filter(|&n| n < NONE)
            .ok_or_else(|| ScenarioError::new(spec.line, "count", "too many tasks"))?;
    }
    let mut tasks = Vec::with_capacity(next as usize);
    for spec in &s.tasks {
        let (first, _, _) = names[spec.name.as_str()];
        let count = count_of(spec);
        for i in 0..count {
            let id = first + i;
            let resolve = |t: &Target,
                           line: usize,
                           field: &'static str|
             -> Result<u32, ScenarioError> {
                match t {
                    Target::Own => Ok(id),
                    Target::Task { name, instance } => {
                        let Some(&(f, count, _)) = names.get(name.as_str()) else {
                            return Err(ScenarioError::new(
                                line,
                                field,
                                alloc::format!("no task is named `{name}`"),
                            ));
                        };
                        let k = instance.of(i);
                        if k >= count {
                            return Err(ScenarioError::new(
                                line,
                                field,
                                alloc::format!(
                                    "for {}[{i}] this names `{name}[{k}]`, but `{name}` has {count} instance{}",
                                    spec.name,
                                    if count == 1 { "" } else { "s" }
                                ),
                            ));
                        }
                        Ok(f + k)
                    }
                }
            };
            let mut script = Vec::with_capacity(spec.script.len());
            // Open loops: (index in `script`, line).
            let mut open: Vec<(usize, usize)> = Vec::new();
            for step in &spec.script {
                let line = step.line;
                let op = match &step.op {
                    Op::Run(d) => ROp::Run(*d),
                    Op::Sleep(d) => ROp::Sleep(*d),
                    Op::Block => ROp::Block,
                    Op::Yield => ROp::Yield,
                    Op::Exit => ROp::Exit,
                    Op::WakePosted => ROp::WakePosted,
                    Op::Wake {
                        target,
                        after,
                        from,
                        sync,
                    } => ROp::Wake {
                        sync: *sync,
                        target: resolve(target, line, "wake")?,
                        after: *after,
                        from: match from {
                            Waker::Here => RWaker::Here,
                            Waker::Outside => RWaker::Outside,
                            Waker::Cpu(id) => RWaker::Cpu(m.index_of(*id).ok_or_else(|| {
                                ScenarioError::new(
                                    line,
                                    "from",
                                    alloc::format!(
                                        "CPU {id} is not a CPU of machine `{}` ({})",
                                        m.name(),
                                        m.topology().allowed_cpus()
                                    ),
                                )
                            })? as u32),
                        },
                    },
                    Op::Post(t) => ROp::Post(resolve(t, line, "post")?),
                    Op::Spawn(t) => {
                        let target = resolve(t, line, "spawn")?;
                        let (_, _, k) = names
                            .values()
                            .find(|(f, c, _)| (*f..f + c).contains(&target))
                            .copied()
                            .expect("resolved ids belong to a declaration");
                        if s.tasks[k].start {
                            return Err(ScenarioError::new(
                                line,
                                "spawn",
                                alloc::format!(
                                    "`{}` starts by itself; declare it with start=no to spawn it",
                                    s.tasks[k].name
                                ),
                            ));
                        }
                        ROp::Spawn(target)
                    }
                    Op::Loop { count } => {
                        open.push((script.len(), line));
                        ROp::Loop {
                            count: *count,
                            end: 0,
                        }
                    }
                    Op::End => {
                        let Some((start, _)) = open.pop() else {
                            return Err(ScenarioError::new(
                                line,
                                "end",
                                "`end` without an open `loop`",
                            ));
                        };
                        let here = script.len();
                        if let ROp::Loop { end, .. } = &mut script[start] {
                            *end = here;
                        }
                        ROp::End { start }
                    }
                };
                script.push(op);
            }
            if let Some(&(_, line)) = open.last() {
                return Err(ScenarioError::new(line, "loop", "this `loop` has no `end`"));
            }
            let allowed = match &spec.affinity {
                Affinity::Any => None,
                Affinity::Cpus(set) => {
                    let missing: lagom_topology::CpuSet =
                        set.iter().filter(|&c| m.index_of(c).is_none()).collect();
                    if !missing.is_empty() || set.is_empty() {
                        return Err(ScenarioError::new(
                            spec.line,
                            "cpus",
                            alloc::format!(
                                "CPUs `{missing}` are not CPUs of machine `{}`, which has {}",
                                m.name(),
                                m.topology().allowed_cpus()
                            ),
                        ));
                    }
                    Some(set.iter().map(|c| m.index_of(c).unwrap_or(0)).collect())
                }
                Affinity::PerInstance(inst) => {
                    let id = inst.of(i) as usize;
                    let Some(c) = m.index_of(id) else {
                        return Err(ScenarioError::new(
                            spec.line,
                            "cpu",
                            alloc::format!(
                                "for {}[{i}] this is CPU {id}, which machine `{}` does not have ({})",
                                spec.name,
                                m.name(),
                                m.topology().allowed_cpus()
                            ),
                        ));
                    };
                    Some(alloc::vec![c])
                }
            };
            let mut se = SchedEntity::new(spec.nice);
            se.set_custom_slice(spec.slice);
            let name = if count == 1 {
                spec.name.clone()
            } else {
                alloc::format!("{}[{i}]", spec.name)
            };
            tasks.push(Task::new(
                name,
                spec.nice,
                script,
                se,
                allowed,
                spec.start,
                spec.measure,
            ));
        }
    }
    Ok(tasks)
}
