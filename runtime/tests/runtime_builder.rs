//! The builder's error cases, the affinity of tasks, and panics reaching `join`.
mod panic_util;
mod runtime_util;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use lagom::{Error, Runtime};

#[test]
fn no_cpus_is_an_error() {
    let err = Runtime::builder().worker_cpus([]).build().unwrap_err();
    assert_eq!(err, Error::NoCpus);
    assert!(err.to_string().contains("at least one CPU"), "{err}");
}

#[test]
fn cpu_outside_the_allowed_set_lists_the_allowed_ones() {
    // The process's allowed CPUs (a default runtime may run fewer workers: the CPU quota).
    let allowed: Vec<usize> = lagom_topology::process_affinity().unwrap().iter().collect();
    let err = Runtime::builder()
        .worker_cpus([100_000])
        .build()
        .unwrap_err();
    match &err {
        Error::CpuNotAllowed {
            cpu,
            allowed: listed,
        } => {
            assert_eq!(*cpu, 100_000);
            assert_eq!(listed, &allowed);
        }
        other => panic!("expected CpuNotAllowed, got {other:?}"),
    }
    let msg = err.to_string();
    for c in &allowed {
        assert!(msg.contains(&c.to_string()), "{msg}");
    }
    // The same CPU twice is refused too.
    let twice = Runtime::builder()
        .worker_cpus([allowed[0], allowed[0]])
        .build();
    assert!(matches!(twice, Err(Error::CpuNotAllowed { .. })));
}

#[test]
fn a_rank_for_a_cpu_outside_the_allowed_set_is_refused() {
    // The process's allowed CPUs (a default runtime may run fewer workers: the CPU quota).
    let allowed: Vec<usize> = lagom_topology::process_affinity().unwrap().iter().collect();
    let err = Runtime::builder()
        .cpu_priorities([(allowed[0], 200), (100_000, 100)])
        .build()
        .unwrap_err();
    assert_eq!(
        err,
        Error::CpuNotAllowed {
            cpu: 100_000,
            allowed: allowed.clone()
        }
    );
    // An allowed CPU's rank is taken, twice named or not.
    Runtime::builder()
        .cpu_priorities([(allowed[0], 200), (allowed[0], 300)])
        .build()
        .unwrap();
}

#[test]
fn unknown_feature_lists_the_valid_ones() {
    let err = Runtime::builder()
        .features("TTWU_QUEUE,NO_SUCH_FEATURE")
        .build()
        .unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, Error::UnknownFeature { .. }), "{err:?}");
    assert!(
        msg.contains("NO_SUCH_FEATURE") || msg.contains("SUCH_FEATURE"),
        "{msg}"
    );
    assert!(
        msg.contains("DELAY_DEQUEUE") && msg.contains("TTWU_QUEUE_ON_CPU"),
        "{msg}"
    );
}

#[test]
fn stack_below_the_minimum_is_an_error() {
    let err = Runtime::builder().stack_size(4096).build().unwrap_err();
    assert!(
        matches!(err, Error::StackTooSmall { requested: 4096, minimum } if minimum > 4096),
        "{err:?}"
    );
    // Per task too.
    let rt = Runtime::builder().build().unwrap();
    let err = rt
        .spawn_with(lagom::task::Builder::new().stack_size(100), || ())
        .unwrap_err();
    assert!(matches!(err, Error::StackTooSmall { .. }), "{err:?}");
    let err = rt
        .spawn_with(lagom::task::Builder::new().cpus([100_000]), || ())
        .unwrap_err();
    assert!(
        matches!(err, Error::AffinityOutsideWorkers { cpu: 100_000, .. }),
        "{err:?}"
    );
}

/// A task restricted to one CPU only ever runs there, although it blocks, yields and is
/// woken from the other worker many times, and other tasks keep both workers busy.
#[test]
fn affinity_is_respected() {
    let cpus = runtime_util::two_cpus();
    let rt = Runtime::builder()
        .worker_cpus(cpus.clone())
        .build()
        .unwrap();
    for &cpu in &cpus {
        let other = *cpus.iter().find(|&&c| c != cpu).unwrap_or(&cpu);
        let bad = Arc::new(AtomicU64::new(0));
        let runs = Arc::new(AtomicU64::new(0));
        // Busy tasks that may run anywhere, so that balancing has something to move.
        let busy: Vec<_> = (0..4)
            .map(|_| {
                rt.spawn(|| {
                    for _ in 0..2_000 {
                        lagom::task::yield_now();
                    }
                })
            })
            .collect();
        let (b, r) = (Arc::clone(&bad), Arc::clone(&runs));
        let pinned = rt
            .spawn_with(
                lagom::task::Builder::new().name("pinned").cpus([cpu]),
                move || {
                    for _ in 0..2_000 {
                        // SAFETY: sched_getcpu has no preconditions.
                        let now = unsafe { libc::sched_getcpu() } as usize;
                        if now != cpu || lagom::task::current().unwrap().cpu != cpu {
                            b.fetch_add(1, Ordering::Relaxed);
                        }
                        r.fetch_add(1, Ordering::Relaxed);
                        lagom::task::yield_now();
                        lagom::task::park();
                    }
                },
            )
            .unwrap();
        // Wake it from a task pinned to the other CPU.
        let waker_un = pinned.unparker();
        let waker = rt
            .spawn_with(lagom::task::Builder::new().cpus([other]), move || {
                while !pinned.is_finished() {
                    waker_un.unpark();
                    lagom::task::yield_now();
                }
                pinned.join().unwrap();
            })
            .unwrap();
        waker.join().unwrap();
        for h in busy {
            h.join().unwrap();
        }
        assert_eq!(runs.load(Ordering::Relaxed), 2_000);
        assert_eq!(
            bad.load(Ordering::Relaxed),
            0,
            "the pinned task ran elsewhere"
        );
    }
    let st = rt.shutdown();
    assert_eq!((st.live_tasks, st.live_stacks), (0, 0));
}

/// A panic reaches `join` with its payload, task name and id, while other tasks keep running.
#[test]
fn panic_payload_reaches_join() {
    panic_util::quiet();
    let rt = Runtime::builder().build().unwrap();
    let (ok, id) = rt.block_on(|| {
        let h = lagom::task::Builder::new()
            .name("doomed")
            .spawn(|| -> u32 { panic!("deliberate boom {}", 7) })
            .unwrap();
        let id = h.id();
        let others: Vec<_> = (0..10u32)
            .map(|i| {
                lagom::task::spawn(move || {
                    lagom::task::yield_now();
                    i
                })
            })
            .collect();
        let err = h.join().unwrap_err();
        assert!(err.is_panic());
        assert_eq!(err.task_name(), "doomed");
        assert_eq!(err.task_id(), id);
        let payload = err.into_panic();
        let text = payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()));
        assert_eq!(text.as_deref(), Some("deliberate boom 7"));
        (
            others.into_iter().map(|h| h.join().unwrap()).sum::<u32>(),
            id,
        )
    });
    assert_eq!(ok, 45);
    assert!(id > 0);
    // block_on resumes a panic of its own closure.
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        rt.block_on(|| panic!("deliberate, outer"));
    }));
    assert!(r.is_err());
    let st = rt.shutdown();
    assert_eq!((st.live_tasks, st.live_stacks), (0, 0));
}

/// Panics from the API name the caller's location (`#[track_caller]`), and worker threads
/// are named, so that a task's panic message says where it ran.
#[test]
fn api_panics_name_the_caller_and_workers_are_named() {
    let (msg, at) = panic_util::expect(|| {
        lagom::task::spawn(|| ());
    });
    assert!(msg.contains("inside a task"), "{msg}");
    assert!(
        at.contains("runtime_builder.rs"),
        "the panic points at {at}"
    );
    let rt = Runtime::builder().build().unwrap();
    let cancelled = rt.block_on(|| {
        let h = lagom::task::spawn(|| {
            loop {
                lagom::task::park();
            }
        });
        lagom::task::yield_now();
        h
    });
    drop(rt);
    let e = cancelled.join().unwrap_err();
    let (msg, at) = panic_util::expect(|| {
        e.into_panic();
    });
    assert!(msg.contains("not a panic"), "{msg}");
    assert!(
        at.contains("runtime_builder.rs"),
        "the panic points at {at}"
    );
    let rt = Runtime::builder().build().unwrap();
    let names = rt.block_on(|| {
        let mine = std::thread::current().name().map(String::from);
        let other = lagom::task::spawn(|| std::thread::current().name().map(String::from));
        (mine, other.join().unwrap())
    });
    for name in [names.0, names.1] {
        let name = name.expect("worker threads are named");
        assert!(name.starts_with("lagom-worker-"), "{name}");
    }
}
