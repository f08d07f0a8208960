//! `TaskGraph` (`graph/`): the shapes (diamond, chain, fan-out/fan-in), random DAGs checked
//! node by node, the cycle error, a panicking node's isolation and its dependants'
//! cancellation and the outputs a failed run gives back, a node that cannot start, ids of
//! another graph refused, node names as task names, progress read while the graph runs,
//! nodes that borrow, and no task left alive afterwards.
mod panic_util;
mod runtime_util;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use lagom::graph::{GraphError, NodeFailure, NodeId};
use lagom::{Runtime, TaskGraph, task};

fn runtime() -> Runtime {
    Runtime::builder()
        .worker_cpus(runtime_util::two_cpus())
        .build()
        .unwrap()
}

/// Waits (generously) until the runtime's live-task count is back to `before`.
fn settles(rt: &Runtime, before: usize) {
    let t0 = Instant::now();
    while rt.stats().live_tasks != before {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "{} tasks still alive, {before} before",
            rt.stats().live_tasks
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn diamond() {
    let rt = runtime();
    let before = rt.stats().live_tasks;
    let mut g = TaskGraph::new();
    let a = g.add(|i| {
        assert!(i.is_empty());
        String::from("a")
    });
    let b = g.add(|i| format!("{}b", i[0]));
    let c = g.add(|i| format!("{}c", i[0]));
    let d = g.add(|i| i.iter().cloned().collect::<Vec<_>>().join("+") + "d");
    g.add_edge(a, b).unwrap();
    g.add_edge(a, c).unwrap();
    g.add_edge(b, d).unwrap();
    g.add_edge(c, d).unwrap();
    assert_eq!(g.predecessors(d).collect::<Vec<_>>(), [b, c]);
    let out = g.run(&rt).unwrap();
    assert_eq!(out[d], "ab+acd");
    assert_eq!(out.len(), 4);
    settles(&rt, before);
}

#[test]
fn chain_of_a_thousand() {
    let rt = runtime();
    let before = rt.stats().live_tasks;
    let mut g = TaskGraph::new();
    let mut prev: Option<NodeId> = None;
    for _ in 0..1000 {
        let n = g.add(|i| i.get(0).copied().unwrap_or(0u64) + 1);
        if let Some(p) = prev {
            g.add_edge(p, n).unwrap();
        }
        prev = Some(n);
    }
    let out = g.run(&rt).unwrap();
    assert_eq!(out[prev.unwrap()], 1000);
    settles(&rt, before);
}

#[test]
fn wide_fan_out_and_fan_in() {
    let rt = runtime();
    let before = rt.stats().live_tasks;
    let mut g = TaskGraph::new();
    let src = g.add(|_| 1u64);
    let sink = g.add(|i| i.iter().sum::<u64>());
    for k in 0..2000u64 {
        let leaf = g.add(move |i| i[0] * k);
        g.add_edge(src, leaf).unwrap();
        g.add_edge(leaf, sink).unwrap();
    }
    let out = g.run(&rt).unwrap();
    assert_eq!(out[sink], (0..2000u64).sum::<u64>());
    settles(&rt, before);
}

#[test]
fn run_from_inside_a_task_of_the_runtime() {
    let rt = std::sync::Arc::new(runtime());
    let r2 = std::sync::Arc::clone(&rt);
    let v = rt.block_on(move || {
        let data = [3u64, 4, 5];
        let mut g = TaskGraph::new();
        let parts: Vec<_> = data.iter().map(|x| g.add(move |_| x * x)).collect();
        let sum = g.add(|i| i.iter().sum::<u64>());
        for p in parts {
            g.add_edge(p, sum).unwrap();
        }
        g.run(&r2).unwrap()[sum]
    });
    assert_eq!(v, 50);
}

/// A seeded xorshift generator.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

#[test]
fn random_dags_run_every_node_once_after_its_predecessors_with_their_outputs() {
    let rt = runtime();
    let before = rt.stats().live_tasks;
    for seed in 1..=40u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let n = 1 + rng.below(120);
        // A random DAG: edges go from a lower to a higher rank of a random permutation, and
        // are added in random order (many against the order of the nodes' ids).
        let mut rank: Vec<usize> = (0..n).collect();
        for i in (1..n).rev() {
            rank.swap(i, rng.below(i + 1));
        }
        let mut edges = Vec::new();
        for _ in 0..n * 2 {
            let (x, y) = (rng.below(n), rng.below(n));
            if rank[x] < rank[y] {
                edges.push((x, y));
            }
        }
        let runs: Vec<AtomicUsize> = (0..n).map(|_| AtomicUsize::new(0)).collect();
        let clock = AtomicUsize::new(0);
        let runs = &runs;
        let clock = &clock;
        let mut g = TaskGraph::new();
        let ids: Vec<NodeId> = (0..n)
            .map(|k| {
                g.add(move |inputs| {
                    runs[k].fetch_add(1, Ordering::Relaxed);
                    if k % 7 == 0 {
                        task::yield_now();
                    }
                    // Each input is its node's (id, finish time, value).
                    let start = clock.fetch_add(1, Ordering::SeqCst);
                    let mut v = k as u64;
                    for (id, &(pid, pend, pv)) in inputs.ids().zip(inputs.iter()) {
                        assert_eq!(id.index(), pid, "input of the wrong node");
                        assert!(
                            pend < start,
                            "node {k} ran before its predecessor {pid} ended"
                        );
                        v = v.wrapping_mul(31).wrapping_add(pv);
                    }
                    (k, clock.fetch_add(1, Ordering::SeqCst), v)
                })
            })
            .collect();
        for &(x, y) in &edges {
            g.add_edge(ids[x], ids[y]).unwrap();
        }
        // The reference: each node's value from its predecessors' in edge order.
        let mut preds = vec![Vec::new(); n];
        for &(x, y) in &edges {
            if !preds[y].contains(&x) {
                preds[y].push(x);
            }
        }
        let mut by_rank: Vec<usize> = (0..n).collect();
        by_rank.sort_by_key(|&k| rank[k]);
        let mut want = vec![0u64; n];
        for &k in &by_rank {
            want[k] = preds[k]
                .iter()
                .fold(k as u64, |v, &p| v.wrapping_mul(31).wrapping_add(want[p]));
        }
        let out = g.run(&rt).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        for k in 0..n {
            assert_eq!(
                runs[k].load(Ordering::Relaxed),
                1,
                "seed {seed}: node {k} runs"
            );
            assert_eq!(out[ids[k]].2, want[k], "seed {seed}: node {k}'s value");
        }
    }
    settles(&rt, before);
}

#[test]
fn an_edge_closing_a_cycle_is_refused_naming_its_nodes() {
    let mut g: TaskGraph<'_, ()> = TaskGraph::new();
    let named = |n: &str| task::Builder::new().name(n);
    let a = g.add_with(named("compile"), |_| ());
    let b = g.add_with(named("link"), |_| ());
    let c = g.add_with(named("package"), |_| ());
    g.add_edge(a, b).unwrap();
    g.add_edge(b, c).unwrap();
    let e = g.add_edge(c, a).unwrap_err();
    match &e {
        GraphError::Cycle { path } => assert_eq!(path, &["package", "compile", "link", "package"]),
        other => panic!("{other:?}"),
    }
    let msg = e.to_string();
    assert!(
        msg.contains("`package` → `compile` → `link` → `package`") && msg.contains("acyclic"),
        "{msg}"
    );
    let e = g.add_edge(b, b).unwrap_err();
    assert!(matches!(e, GraphError::Cycle { ref path } if path == &["link", "link"]));
    // An id of another, larger graph.
    assert!(matches!(
        g.add_edge(a, fake_id(99)),
        Err(GraphError::ForeignNode { index: 99, .. })
    ));
    // The graph is unchanged and still runs.
    let rt = runtime();
    assert_eq!(g.run(&rt).unwrap().len(), 3);
}

/// Node `index` of another graph (of `index + 1` nodes).
fn fake_id(index: usize) -> NodeId {
    let mut g: TaskGraph<'_, ()> = TaskGraph::new();
    (0..=index).map(|_| g.add(|_| ())).last().unwrap()
}

#[test]
fn an_id_of_another_graph_is_refused_even_with_an_index_in_range() {
    let mut g: TaskGraph<'_, u32> = TaskGraph::new();
    let a = g.add_named("a", |_| 1);
    let b = g.add_named("b", |i| i[0] + 1);
    // Same indices as `a` and `b`, but of another graph.
    let mut other: TaskGraph<'_, u32> = TaskGraph::new();
    let (oa, ob) = (other.add(|_| 0), other.add(|_| 0));
    assert_eq!((oa.index(), ob.index()), (a.index(), b.index()));
    assert_ne!(oa, a, "ids of two graphs differ even at one index");
    for (x, y) in [(a, ob), (oa, b), (oa, ob)] {
        let e = g.add_edge(x, y).unwrap_err();
        let GraphError::ForeignNode {
            index,
            node_graph,
            graph,
        } = e
        else {
            panic!("{e:?}")
        };
        assert_ne!(node_graph, graph);
        assert!(index <= 1);
        let msg = e.to_string();
        assert!(
            msg.contains("is valid only with the graph whose `add` returned it"),
            "{msg}"
        );
    }
    assert_eq!(
        g.predecessors(b).len(),
        0,
        "the refused edges added nothing"
    );
    assert_eq!((g.name(a), g.name(oa)), (Some("a"), None));
    let panic =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| g.predecessors(ob).count()))
            .unwrap_err();
    let msg = panic.downcast_ref::<String>().unwrap();
    assert!(
        msg.contains("TaskGraph::predecessors") && msg.contains("of task graph #"),
        "{msg}"
    );
    g.add_edge(a, b).unwrap();
    let rt = runtime();
    let out = g.run(&rt).unwrap();
    assert_eq!((out.get(b), out.get(ob)), (Some(&2), None));
    assert_eq!(out[b], 2);
    let panic = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| out[ob])).unwrap_err();
    let msg = panic.downcast_ref::<String>().unwrap();
    assert!(msg.contains("is valid only with the graph"), "{msg}");
    // Inputs, too, know their graph.
    let mut g: TaskGraph<'_, Option<u32>> = TaskGraph::new();
    let src = g.add(|_| Some(5));
    let sink = g.add(move |i| {
        assert_eq!(i.ids().collect::<Vec<_>>(), [src]);
        assert_eq!(i.of(oa), None, "a foreign id with a predecessor's index");
        i.of(src).copied().flatten()
    });
    g.add_edge(src, sink).unwrap();
    assert_eq!(g.run(&rt).unwrap()[sink], Some(5));
}

#[test]
fn nodes_run_as_tasks_named_after_them() {
    let rt = runtime();
    let mut g = TaskGraph::new();
    let name = || task::current().unwrap().name.to_string();
    let named = g.add_named("fetch", move |_| name());
    let unnamed = g.add(move |_| name());
    let empty = g.add_with(task::Builder::new().name(""), move |_| name());
    let out = g.run(&rt).unwrap();
    assert_eq!(out[named], "fetch");
    assert_eq!(out[unnamed], "node-1");
    assert_eq!(out[empty], "node-2");
}

#[test]
fn a_panicking_node_cancels_its_dependants_and_nothing_else() {
    panic_util::quiet();
    let rt = runtime();
    let before = rt.stats().live_tasks;
    let ran = [(); 7].map(|_| AtomicBool::new(false));
    let ran = &ran;
    let mut g = TaskGraph::new();
    let named = |n: &str| task::Builder::new().name(n);
    let mark = move |k: usize| ran[k].store(true, Ordering::Relaxed);
    // a → bad → c → d, bad → d; a → e; f alone; g after e.
    let a = g.add_with(named("a"), move |_| mark(0));
    let bad = g.add_with(named("bad"), move |_| {
        mark(1);
        panic!("deliberate: node fails")
    });
    let c = g.add_with(named("c"), move |_| mark(2));
    let d = g.add_with(named("d"), move |_| mark(3));
    let e = g.add_with(named("e"), move |_| {
        task::sleep(Duration::from_millis(20));
        mark(4)
    });
    let f = g.add_with(named("f"), move |_| mark(5));
    let gg = g.add_with(named("g"), move |_| mark(6));
    for (x, y) in [(a, bad), (bad, c), (c, d), (bad, d), (a, e), (e, gg)] {
        g.add_edge(x, y).unwrap();
    }
    let progress = g.progress();
    let run_err = g.run(&rt).unwrap_err();
    // The outputs of the nodes that finished: a, e, f, g (all `()`), none of the others.
    let done = run_err.outputs();
    let finished_ids: Vec<NodeId> = done.iter().map(|(id, _)| id).collect();
    assert_eq!(finished_ids, [a, e, f, gg]);
    assert_eq!(
        (done.get(bad), done.get(c), done.get(d)),
        (None, None, None)
    );
    assert_eq!((done.finished(), done.len()), (4, 7));
    let debug = format!("{run_err:?}");
    assert!(debug.contains("finished: 4"), "{debug}");
    let err = GraphError::from(run_err);
    let GraphError::Failed {
        failed,
        cancelled,
        finished,
        total,
    } = &err
    else {
        panic!("{err:?}")
    };
    assert_eq!((failed.len(), failed[0].name.as_str()), (1, "bad"));
    assert!(matches!(&failed[0].failure, NodeFailure::Panicked(j) if j.is_panic()));
    assert_eq!(cancelled, &["c", "d"]);
    assert_eq!((*finished, *total), (4, 7));
    let ran: Vec<bool> = ran.iter().map(|r| r.load(Ordering::Relaxed)).collect();
    assert_eq!(ran, [true, true, false, false, true, true, true]);
    assert_eq!(
        (progress.done(), progress.failed(), progress.cancelled()),
        (7, 1, 2)
    );
    let msg = err.to_string();
    assert!(msg.contains("node `bad` failed") && msg.contains("deliberate: node fails"));
    assert!(msg.contains("2 dependant(s) cancelled: `c`, `d`") && msg.contains("4 of 7"));
    settles(&rt, before);
}

#[test]
fn a_node_that_cannot_start_fails_and_cancels_its_dependants() {
    let rt = runtime();
    let before = rt.stats().live_tasks;
    let mut g = TaskGraph::new();
    let a = g.add(|_| 1);
    let pinned = g.add_with(task::Builder::new().name("pinned").cpus([100_000]), |i| {
        i[0]
    });
    let after = g.add(|i| i[0]);
    g.add_edge(a, pinned).unwrap();
    g.add_edge(pinned, after).unwrap();
    let err = g.run(&rt).unwrap_err();
    assert_eq!(
        err.outputs().get(a),
        Some(&1),
        "the finished node's output is kept"
    );
    assert_eq!(err.outputs()[a], 1);
    let (err, mut outputs) = err.into_parts();
    assert_eq!((outputs.take(a), outputs.take(a)), (Some(1), None));
    let GraphError::Failed {
        failed, cancelled, ..
    } = &err
    else {
        panic!("{err:?}")
    };
    assert!(matches!(&failed[0].failure, NodeFailure::Spawn(_)));
    assert_eq!(cancelled, &["node-2"]);
    assert!(
        err.to_string()
            .contains("node `pinned` could not start: CPU 100000")
    );
    settles(&rt, before);
}

#[test]
fn progress_is_readable_while_the_graph_runs() {
    let rt = runtime();
    let release = AtomicBool::new(false);
    let release = &release;
    let mut g = TaskGraph::new();
    for _ in 0..10 {
        g.add(|_| ());
    }
    // One node waits until the observer has seen the other ten done.
    let waiter = g.add(move |_| {
        while !release.load(Ordering::Acquire) {
            task::sleep(Duration::from_millis(1));
        }
    });
    let p = g.progress();
    assert_eq!((p.total(), p.done()), (11, 0));
    std::thread::scope(|s| {
        s.spawn(|| {
            let t0 = Instant::now();
            while p.done() < 10 {
                assert!(t0.elapsed() < Duration::from_secs(10), "no progress seen");
                std::thread::sleep(Duration::from_millis(1));
            }
            assert!(!p.is_finished());
            release.store(true, Ordering::Release);
        });
        let out = g.run(&rt).unwrap();
        assert_eq!(out.get(waiter), Some(&()));
    });
    assert!(p.is_finished());
}
