//! The fair runqueue's features and `can_migrate_task` in the threaded runtime: each test
//! toggles one feature (or the migration cost) and shows the runtime doing something
//! different, read from the order in which tasks ran and from the counters, never from
//! wall-clock timing. (The feature → test table is in `runtime_place.rs`.)
//!
//! Most scenarios run on one worker, where the order of events is decided by the runqueue
//! alone: a controller task A wakes or spawns others and records who ran first. The rounds
//! repeat, and the assertions allow for rounds that a loaded host disturbs (a worker thread
//! descheduled by the OS for milliseconds is charged that time, which can end a slice
//! early); the bounds are far from what the feature's absence gives. Lags are taken out of
//! the scenarios that are not about them (`NO_PLACE_LAG`), so that a wakee lands at the
//! average vruntime, eligible, every round.
//!
//! Under an emulator (`LAGOM_TEST_RUNNER`, CI's aarch64 step) every test here says
//! `SKIPPED` (`runtime_util::emulated_skip`): the emulator's pauses are charged as run time,
//! in stretches that decide these scenarios. They run natively in CI's `test` step.

mod runtime_util;
#[path = "../../lab/topology/tests/topology_util/mod.rs"]
mod topology_util;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use lagom::Runtime;
use lagom::task::{self, Builder as TaskBuilder};
use topology_util::one_llc;

/// The scenarios run one at a time: each pins its worker to CPU 0, and two at once would
/// charge each other's time to their running tasks.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// `n` workers with `features`. The task clock leaves out the time a worker's thread was off
/// its CPU: each scenario decides by charged run time, and with the wall clock a host that
/// took the thread away for milliseconds (a loaded machine; three copies of this binary at
/// once did it often) charged that time to the running task and carried it past a slice's
/// protection or a deadline window in one step.
fn runtime(n: usize, features: &str) -> Runtime {
    // SAFETY: the tasks of these tests keep no thread-local state across blocking calls.
    unsafe {
        Runtime::builder()
            .topology(one_llc(n))
            .features(features)
            .task_clock(lagom::runtime::TaskClock::OnCpu)
            .allow_migration()
            .build()
            .unwrap()
    }
}

/// How many rounds each scenario plays.
const ROUNDS: usize = 20;

/// Fails instead of hanging when a scenario's condition never comes.
fn wait_until(what: &str, mut cond: impl FnMut() -> bool, mut pause: impl FnMut()) {
    let start = Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "timed out waiting for {what}"
        );
        pause();
    }
}

/// The calling task's charged run time.
fn ran() -> Duration {
    task::cpu_time().unwrap()
}

/// One worker. Task B (slice `b_slice`) parks; each round the controller A (slice
/// `a_slice`) wakes from a short sleep (so it has just been picked, its slice fresh), wakes
/// B, then either calls `cond_resched` once (`a_spin` `None`) or computes for `a_spin` of
/// its own charged run time, calling `cond_resched`; then it notes whether B has run. Returns
/// in how many rounds B ran before A got that far.
fn wake_order(
    features: &str,
    a_slice: Option<Duration>,
    b_slice: Option<Duration>,
    a_spin: Option<Duration>,
) -> usize {
    wake_order_with(features, a_slice, b_slice, a_spin, false)
}

/// [`wake_order`]; with `debt`, each round first lets B run 2 ms without a scheduling point
/// while A waits in the queue, so that B sleeps far ahead of the average (a negative lag).
fn wake_order_with(
    features: &str,
    a_slice: Option<Duration>,
    b_slice: Option<Duration>,
    a_spin: Option<Duration>,
    debt: bool,
) -> usize {
    let rt = runtime(1, features);
    let go = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicUsize::new(0));
    let ready = Arc::new(AtomicBool::new(false));
    let (g, d, r) = (Arc::clone(&go), Arc::clone(&done), Arc::clone(&ready));
    let mut bb = TaskBuilder::new().name("B");
    if let Some(s) = b_slice {
        bb = bb.slice(s);
    }
    let b = rt
        .spawn_with(bb, move || {
            r.store(true, Ordering::Release);
            loop {
                let seen = d.load(Ordering::Relaxed);
                while g.load(Ordering::Acquire) == seen {
                    task::park();
                }
                let phase = g.load(Ordering::Acquire);
                if phase == usize::MAX {
                    return;
                }
                if phase % 2 == 1 {
                    // The debt: compute without a scheduling point, then sleep.
                    let t0 = Instant::now();
                    while t0.elapsed() < Duration::from_millis(2) {
                        std::hint::spin_loop();
                    }
                }
                d.store(phase, Ordering::Release);
            }
        })
        .unwrap();
    let ub = b.unparker();
    let mut ab = TaskBuilder::new().name("A");
    if let Some(s) = a_slice {
        ab = ab.slice(s);
    }
    let (g, d, r) = (Arc::clone(&go), Arc::clone(&done), Arc::clone(&ready));
    let a = rt
        .spawn_with(ab, move || {
            wait_until(
                "B to start",
                || r.load(Ordering::Acquire),
                || task::sleep(Duration::from_micros(200)),
            );
            let mut b_first = 0;
            for round in 1..=ROUNDS {
                // Phases: 2r − 1 for B's debt, 2r for the wakeup under test.
                let phase = 2 * round;
                if debt {
                    g.store(phase - 1, Ordering::Release);
                    ub.unpark();
                    wait_until(
                        "B to compute and park",
                        || d.load(Ordering::Acquire) == phase - 1,
                        task::cond_resched,
                    );
                }
                // B parks at once once it has run: it is asleep before A wakes.
                task::sleep(Duration::from_millis(1));
                g.store(phase, Ordering::Release);
                ub.unpark();
                match a_spin {
                    None => task::cond_resched(),
                    Some(spin) => {
                        let t0 = ran();
                        while ran() - t0 < spin && d.load(Ordering::Acquire) != phase {
                            task::cond_resched();
                        }
                    }
                }
                b_first += usize::from(d.load(Ordering::Acquire) == phase);
                wait_until(
                    "B to run",
                    || d.load(Ordering::Acquire) == phase,
                    || task::sleep(Duration::from_micros(100)),
                );
            }
            g.store(usize::MAX, Ordering::Release);
            ub.unpark();
            b_first
        })
        .unwrap();
    let n = a.join().unwrap();
    b.join().unwrap();
    eprintln!("{features}: B ran first in {n} of {ROUNDS} rounds");
    n
}

const SHORT: Duration = Duration::from_micros(200);

/// WAKEUP_PREEMPTION: a wakee with a shorter slice (which PREEMPT_SHORT lets past the
/// running task's protection) preempts the waker at its next `cond_resched`; with
/// NO_WAKEUP_PREEMPTION it waits until the waker blocks.
#[test]
fn wakeup_preemption_lets_the_wakee_in_at_once() {
    if runtime_util::emulated_skip("wakeup_preemption_lets_the_wakee_in_at_once") {
        return;
    }
    let _serial = serial();
    let on = wake_order("NO_PLACE_LAG", None, Some(SHORT), None);
    let off = wake_order("NO_PLACE_LAG,NO_WAKEUP_PREEMPTION", None, Some(SHORT), None);
    assert!(on >= ROUNDS * 3 / 4, "WAKEUP_PREEMPTION: {on}/{ROUNDS}");
    assert!(off <= ROUNDS / 4, "NO_WAKEUP_PREEMPTION: {off}/{ROUNDS}");
}

/// PREEMPT_SHORT: the same short-slice wakee cuts the waker's protected slice short; without
/// it the wakee only shrinks the protection to its own slice (RUN_TO_PARITY), which the
/// waker, just picked, has not used up at its next `cond_resched`.
#[test]
fn preempt_short_cuts_the_protected_slice() {
    if runtime_util::emulated_skip("preempt_short_cuts_the_protected_slice") {
        return;
    }
    let _serial = serial();
    let on = wake_order("NO_PLACE_LAG", None, Some(SHORT), None);
    let off = wake_order("NO_PLACE_LAG,NO_PREEMPT_SHORT", None, Some(SHORT), None);
    assert!(on >= ROUNDS * 3 / 4, "PREEMPT_SHORT: {on}/{ROUNDS}");
    assert!(off <= ROUNDS / 4, "NO_PREEMPT_SHORT: {off}/{ROUNDS}");
}

/// NEXT_BUDDY: an equal-slice wakee becomes the next buddy, and the pick (PICK_BUDDY)
/// honours it at once, past the waker's protection; by default the waker keeps its slice.
#[test]
fn next_buddy_runs_the_wakee_next() {
    if runtime_util::emulated_skip("next_buddy_runs_the_wakee_next") {
        return;
    }
    let _serial = serial();
    let off = wake_order("NO_PLACE_LAG", None, None, None);
    let on = wake_order("NO_PLACE_LAG,NEXT_BUDDY", None, None, None);
    assert!(on >= ROUNDS * 3 / 4, "NEXT_BUDDY: {on}/{ROUNDS}");
    assert!(off <= ROUNDS / 4, "NO_NEXT_BUDDY: {off}/{ROUNDS}");
}

/// PICK_BUDDY: with NEXT_BUDDY setting the buddy, only a pick that honours it lets the wakee
/// in before the waker's protected slice ends.
#[test]
fn pick_buddy_honours_the_next_buddy() {
    if runtime_util::emulated_skip("pick_buddy_honours_the_next_buddy") {
        return;
    }
    let _serial = serial();
    let on = wake_order("NO_PLACE_LAG,NEXT_BUDDY", None, None, None);
    let off = wake_order("NO_PLACE_LAG,NEXT_BUDDY,NO_PICK_BUDDY", None, None, None);
    assert!(on >= ROUNDS * 3 / 4, "PICK_BUDDY: {on}/{ROUNDS}");
    assert!(off <= ROUNDS / 4, "NO_PICK_BUDDY: {off}/{ROUNDS}");
}

/// RUN_TO_PARITY: waker and wakee have 5 ms slices; the waker computes for 3 ms of its own
/// run time after the wakeup. With RUN_TO_PARITY it is protected to its deadline and the
/// wakee never runs in those 3 ms; without, the protection is 0.7 ms and the wakee runs
/// within them. (Charged run time, not wall time, decides both; a host that deschedules the
/// worker for milliseconds charges that time too, which can carry the waker past its 5 ms
/// deadline in one step: such rounds are allowed for.)
#[test]
fn run_to_parity_protects_the_slice() {
    if runtime_util::emulated_skip("run_to_parity_protects_the_slice") {
        return;
    }
    let _serial = serial();
    let long = Some(Duration::from_millis(5));
    let spin = Some(Duration::from_millis(3));
    let on = wake_order("NO_PLACE_LAG", long, long, spin);
    let off = wake_order("NO_PLACE_LAG,NO_RUN_TO_PARITY", long, long, spin);
    assert!(on <= ROUNDS / 4, "RUN_TO_PARITY: {on}/{ROUNDS}");
    assert!(off >= ROUNDS / 2, "NO_RUN_TO_PARITY: {off}/{ROUNDS}");
}

/// One worker, tasks A (the controller), B and a fresh C per round. Each round A sleeps 1 ms
/// (so that it is picked afresh, its slice protected: nothing below switches before A
/// blocks), wakes B, computes 20 µs of its own run time (so that the two are placed at
/// different averages), spawns C and blocks until both have run: the earlier deadline runs
/// first. Returns in how many rounds B ran before C.
fn wake_then_spawn(features: &str) -> usize {
    let rt = runtime(1, features);
    let go = Arc::new(AtomicUsize::new(0));
    let seq = Arc::new(AtomicUsize::new(0));
    let b_seq = Arc::new(AtomicUsize::new(0));
    let ready = Arc::new(AtomicBool::new(false));
    let (g, s, bs, r) = (
        Arc::clone(&go),
        Arc::clone(&seq),
        Arc::clone(&b_seq),
        Arc::clone(&ready),
    );
    let b = rt.spawn(move || {
        r.store(true, Ordering::Release);
        let mut seen = 0;
        loop {
            while g.load(Ordering::Acquire) == seen {
                task::park();
            }
            seen = g.load(Ordering::Acquire);
            if seen == usize::MAX {
                return;
            }
            bs.store(s.fetch_add(1, Ordering::AcqRel) + 1, Ordering::Release);
        }
    });
    let ub = b.unparker();
    let (g, s, bs, r) = (
        Arc::clone(&go),
        Arc::clone(&seq),
        Arc::clone(&b_seq),
        Arc::clone(&ready),
    );
    let a = rt.spawn(move || {
        wait_until(
            "B to start",
            || r.load(Ordering::Acquire),
            || task::sleep(Duration::from_micros(200)),
        );
        let mut b_before_c = 0;
        for round in 1..=ROUNDS {
            task::sleep(Duration::from_millis(1));
            let before = bs.load(Ordering::Acquire);
            g.store(round, Ordering::Release);
            ub.unpark();
            let t0 = ran();
            while ran() - t0 < Duration::from_micros(20) {
                std::hint::spin_loop();
            }
            let c_seq = Arc::new(AtomicUsize::new(0));
            let (s2, cs) = (Arc::clone(&s), Arc::clone(&c_seq));
            let c = task::spawn(move || {
                cs.store(s2.fetch_add(1, Ordering::AcqRel) + 1, Ordering::Release);
            });
            c.join().unwrap();
            wait_until(
                "B to run",
                || bs.load(Ordering::Acquire) != before,
                || task::sleep(Duration::from_micros(100)),
            );
            b_before_c += usize::from(bs.load(Ordering::Acquire) < c_seq.load(Ordering::Acquire));
        }
        g.store(usize::MAX, Ordering::Release);
        ub.unpark();
        b_before_c
    });
    let n = a.join().unwrap();
    b.join().unwrap();
    eprintln!("{features}: B before C in {n} of {ROUNDS} rounds");
    n
}

/// PLACE_DEADLINE_INITIAL: B is woken, then C is spawned, 20 µs later: C's first request
/// is half a slice, so its deadline comes before B's and it runs first; without the feature
/// C's full request ends after B's.
#[test]
fn place_deadline_initial_runs_a_new_task_sooner() {
    if runtime_util::emulated_skip("place_deadline_initial_runs_a_new_task_sooner") {
        return;
    }
    let _serial = serial();
    let on = wake_then_spawn("NO_PLACE_LAG");
    let off = wake_then_spawn("NO_PLACE_LAG,NO_PLACE_DEADLINE_INITIAL");
    assert!(
        on <= ROUNDS / 4,
        "PLACE_DEADLINE_INITIAL: B first {on}/{ROUNDS}"
    );
    assert!(
        off >= ROUNDS * 3 / 4,
        "NO_PLACE_DEADLINE_INITIAL: B first {off}/{ROUNDS}"
    );
}

/// PLACE_LAG: B sleeps with a negative lag (it computed 2 ms while A waited; with
/// NO_DELAY_DEQUEUE its sleep dequeues it at once, the lag clamped to about 1.7 ms). Woken
/// with a short slice, PLACE_LAG puts it that far past the average, not eligible, and the
/// waker keeps the CPU; without PLACE_LAG it lands at the average, eligible with the earlier
/// deadline, and preempts the waker (PREEMPT_SHORT).
#[test]
fn place_lag_keeps_the_lag_across_a_sleep() {
    if runtime_util::emulated_skip("place_lag_keeps_the_lag_across_a_sleep") {
        return;
    }
    let _serial = serial();
    let base = "NO_DELAY_DEQUEUE";
    let on = wake_order_with(base, None, Some(SHORT), None, true);
    let off = wake_order_with(
        &format!("{base},NO_PLACE_LAG"),
        None,
        Some(SHORT),
        None,
        true,
    );
    assert!(on <= ROUNDS / 4, "PLACE_LAG: B first {on}/{ROUNDS}");
    assert!(
        off >= ROUNDS * 3 / 4,
        "NO_PLACE_LAG: B first {off}/{ROUNDS}"
    );
}

/// A runtime on two workers with migration opted in and the given migration cost.
fn runtime2(features: &str, migration_cost_ns: u64) -> Runtime {
    // SAFETY: the tasks of these tests keep no thread-local state across blocking calls.
    unsafe {
        Runtime::builder()
            .topology(one_llc(2))
            .features(features)
            .sched_migration_cost_ns(migration_cost_ns)
            .allow_migration()
            .build()
            .unwrap()
    }
}

/// The counters of worker `i` moved by from `a` to `b`.
fn moved_by(a: &lagom::runtime::Stats, b: &lagom::runtime::Stats, i: usize) -> (u64, u64) {
    let (x, y) = (&a.workers[i], &b.workers[i]);
    (
        y.balance_failed - x.balance_failed,
        y.balance_hot_skipped - x.balance_hot_skipped,
    )
}

/// Two workers, a free task T sharing its worker `c` with a heavy hog (nice −19, so T runs
/// about 1.4 % of the time: it is queued, and it ran recently), and a nice-0 hog on the
/// other worker `o`. `o`'s periodic balance sees the load imbalance and pulls T; returns
/// the failed attempts and the cache-hot candidates it left, counted on `o` until T ran
/// there.
fn pull_recent_runner(migration_cost_ns: u64) -> (u64, u64) {
    let rt = runtime2("", migration_cost_ns);
    let cpu = Arc::new(AtomicUsize::new(usize::MAX));
    let stop = Arc::new(AtomicBool::new(false));
    let (c2, s2) = (Arc::clone(&cpu), Arc::clone(&stop));
    let t = rt.spawn(move || {
        while !s2.load(Ordering::Relaxed) {
            c2.store(task::current().unwrap().cpu, Ordering::Release);
            task::cond_resched();
        }
    });
    wait_until(
        "T to start",
        || cpu.load(Ordering::Acquire) != usize::MAX,
        || std::thread::sleep(Duration::from_millis(1)),
    );
    let c = cpu.load(Ordering::Acquire);
    let o = 1 - c;
    // The light hog first, so that `o` is busy (it balances periodically, with tasks of
    // its own) before `c` has two.
    let ho = runtime_util::pinned_hog(&rt, o, 0, &stop);
    std::thread::sleep(Duration::from_millis(20));
    let before = rt.stats();
    let hc = runtime_util::pinned_hog(&rt, c, -19, &stop);
    wait_until(
        "T to be pulled",
        || cpu.load(Ordering::Acquire) == o,
        || std::thread::sleep(Duration::from_millis(1)),
    );
    let after = rt.stats();
    stop.store(true, Ordering::Relaxed);
    for h in [t, ho, hc] {
        h.join().unwrap();
    }
    let r = moved_by(&before, &after, o);
    eprintln!("migration cost {migration_cost_ns} ns: (failed, hot skipped) {r:?}");
    r
}

/// `task_hot` with the migration cost (`Builder::sched_migration_cost_ns`): with a cost of
/// 1 s the recently run T is cache hot, left in place by the first attempts and pulled only
/// once they have failed more than `cache_nice_tries` (1 within an LLC) times; with a cost
/// of 0 it is never hot. (Either way the first attempt may fail: T, behind a heavy hog, is
/// rarely eligible, and an ineligible task stays while no attempt has failed.) The failures
/// that let T go may come from attempts that found it running (it may move, so the source
/// is not all pinned: `can_migrate_task` tests affinity before `task_on_cpu`), so how many
/// times T was left as cache hot is printed, not asserted; an attempt that found only the
/// pinned hog and an ineligible T is all pinned and resets the count (`out_all_pinned`).
#[test]
fn a_cache_hot_task_is_pulled_only_after_failed_attempts() {
    if runtime_util::emulated_skip("a_cache_hot_task_is_pulled_only_after_failed_attempts") {
        return;
    }
    let _serial = serial();
    let (failed, _) = pull_recent_runner(1_000_000_000);
    assert!(failed >= 2, "hot: pulled after {failed} failed attempts");
    let (_, hot) = pull_recent_runner(0);
    assert_eq!(hot, 0, "migration cost 0: nothing is hot");
}

/// CACHE_HOT_BUDDY (with NEXT_BUDDY, NO_DELAY_DEQUEUE and a migration cost of 0, so only the
/// buddy rule makes anything hot): T computes 3 ms without a scheduling point beside a
/// heavy hog on worker `c` and parks, far ahead of the average; its wakeup from outside
/// places it back on `c` (every worker is busy) not eligible, and makes it the next buddy. Then one of the two
/// hogs of worker `o` ends, and `o`'s periodic balance, with a task of its own, finds the
/// buddy cache hot and leaves it until its attempts have failed; without CACHE_HOT_BUDDY no
/// candidate is ever hot.
#[test]
fn cache_hot_buddy_keeps_the_next_buddy_in_place() {
    if runtime_util::emulated_skip("cache_hot_buddy_keeps_the_next_buddy_in_place") {
        return;
    }
    let _serial = serial();
    let run = |features: &str| -> u64 {
        let rt = runtime2(features, 0);
        let cpu = Arc::new(AtomicUsize::new(usize::MAX));
        let go = Arc::new(AtomicBool::new(false));
        let woke = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let parked = Arc::new(AtomicBool::new(false));
        let (c2, g2, w2, s2, p2) = (
            Arc::clone(&cpu),
            Arc::clone(&go),
            Arc::clone(&woke),
            Arc::clone(&stop),
            Arc::clone(&parked),
        );
        let t = rt.spawn(move || {
            let here = || c2.store(task::current().unwrap().cpu, Ordering::Release);
            while !g2.load(Ordering::Acquire) {
                here();
                task::cond_resched();
            }
            let t0 = Instant::now();
            while t0.elapsed() < Duration::from_millis(3) {
                std::hint::spin_loop();
            }
            p2.store(true, Ordering::Release);
            while !w2.load(Ordering::Acquire) {
                task::park();
            }
            while !s2.load(Ordering::Relaxed) {
                here();
                task::cond_resched();
            }
        });
        wait_until(
            "T to start",
            || cpu.load(Ordering::Acquire) != usize::MAX,
            || std::thread::sleep(Duration::from_millis(1)),
        );
        let c = cpu.load(Ordering::Acquire);
        let o = 1 - c;
        // Equal loads on both workers while T builds its history: no periodic imbalance.
        let stop_heavy = Arc::new(AtomicBool::new(false));
        let ho_heavy = runtime_util::pinned_hog(&rt, o, -19, &stop_heavy);
        let ho = runtime_util::pinned_hog(&rt, o, 0, &stop);
        let hc = runtime_util::pinned_hog(&rt, c, -19, &stop);
        std::thread::sleep(Duration::from_millis(20));
        go.store(true, Ordering::Release);
        wait_until(
            "T to park",
            || parked.load(Ordering::Acquire),
            || std::thread::sleep(Duration::from_micros(200)),
        );
        // Let it switch out, then wake it: a remote wakeup to the busy `c` (its previous
        // CPU; every CPU is busy), where the heavy hog runs and the wakeup-preemption check
        // makes T the next buddy.
        std::thread::sleep(Duration::from_millis(1));
        woke.store(true, Ordering::Release);
        t.unparker().unpark();
        let before = rt.stats();
        stop_heavy.store(true, Ordering::Relaxed);
        ho_heavy.join().unwrap();
        wait_until(
            "T to be pulled",
            || cpu.load(Ordering::Acquire) == o,
            || std::thread::sleep(Duration::from_millis(1)),
        );
        let after = rt.stats();
        stop.store(true, Ordering::Relaxed);
        for h in [t, ho, hc] {
            h.join().unwrap();
        }
        let (failed, hot) = moved_by(&before, &after, o);
        eprintln!("{features}: failed {failed}, hot skipped {hot}");
        hot
    };
    // NO_TTWU_QUEUE: the outside waker takes `c`'s lock and runs the preemption check
    // against the running hog (the wakelist's drain may meet need-resched already set, and
    // skip the check that sets the buddy). Under load that can still happen: up to three
    // plays for the outcome with the feature on.
    let base = "NEXT_BUDDY,NO_DELAY_DEQUEUE,NO_TTWU_QUEUE";
    let hot = (0..3).map(|_| run(base)).find(|&h| h > 0).unwrap_or(0);
    assert!(hot >= 1, "CACHE_HOT_BUDDY: the buddy is hot");
    assert_eq!(
        run(&format!("{base},NO_CACHE_HOT_BUDDY")),
        0,
        "NO_CACHE_HOT_BUDDY: nothing is hot"
    );
}

/// What is left of the request of a task M that was spawned queued on worker 0 and pulled,
/// never having run, to worker 1 by its newly idle balance, read by M as it first runs
/// there, as a fraction of its full request (`calc_delta_fair(slice)`); `None` if M ran on
/// worker 0 first (the round is void).
///
/// Worker 1 runs a pinned nice −20 task B; a pinned nice −20 task A on worker 0 spawns M
/// (nice 19): both workers run one task of the same weight, so fork placement keeps M on its
/// spawner's worker (`sched_balance_find_dst_group`: two fully busy groups of equal load,
/// the local one stays), queued, where A's far earlier deadlines keep it from running. A then
/// releases B, whose end makes worker 1 newly idle: it pulls M (`DequeueKind::Save` there, a
/// restore here).
fn moved_request_left(features: &str) -> Option<f64> {
    let rt = runtime2(features, 0);
    let stop = Arc::new(AtomicBool::new(false));
    let b = runtime_util::pinned_spinner_nice(&rt, "B", 1, -20);
    b.wait_running();
    let (s2, r2) = (Arc::clone(&stop), Arc::clone(&b.stop));
    let a = rt
        .spawn_with(
            TaskBuilder::new().name("A").cpus([0]).nice(-20),
            move || {
                let m = TaskBuilder::new()
                    .name("M")
                    .nice(19)
                    .spawn(|| {
                        let info = task::sched_info().unwrap();
                        let full =
                            lagom_policy::calc_delta_fair(info.entity.slice, info.entity.weight);
                        (
                            task::current().unwrap().cpu,
                            info.deadline_left() as f64 / full as f64,
                        )
                    })
                    .unwrap();
                r2.store(true, Ordering::Release);
                while !s2.load(Ordering::Relaxed) && !m.is_finished() {
                    task::cond_resched();
                }
                m.join().unwrap()
            },
        )
        .unwrap();
    let (cpu, left) = a.join().unwrap();
    stop.store(true, Ordering::Relaxed);
    b.end();
    let stats = rt.stats();
    eprintln!(
        "{features:?}: M first ran on worker {cpu} with {left:.3} of its request left \
         (pulls {})",
        stats.workers[1].balance_pulls
    );
    (cpu == rt.worker_cpus()[1]).then_some(left)
}

/// PLACE_REL_DEADLINE: a task moved between workers keeps what was left of its request
/// (its deadline saved relative to its vruntime on the dequeue that is not a sleep,
/// restored at the enqueue). M never ran, so what it keeps is its first request, half a
/// slice with PLACE_DEADLINE_INITIAL; without PLACE_REL_DEADLINE the enqueue on the new
/// worker issues a fresh, full one. A round in which M ran before it moved is void, and
/// replayed.
#[test]
fn place_rel_deadline_keeps_the_request_across_a_move() {
    if runtime_util::emulated_skip("place_rel_deadline_keeps_the_request_across_a_move") {
        return;
    }
    let _serial = serial();
    let sample = |features: &str| {
        (0..10)
            .find_map(|_| moved_request_left(features))
            .unwrap_or_else(|| panic!("{features:?}: M ran on worker 0 first in 10 rounds"))
    };
    let kept = sample("");
    assert!(
        (0.4..=0.5).contains(&kept),
        "PLACE_REL_DEADLINE: {kept:.3} of the request left after the move, not the half of \
         a first request"
    );
    let fresh = sample("NO_PLACE_REL_DEADLINE");
    assert!(
        (0.9..=1.0).contains(&fresh),
        "NO_PLACE_REL_DEADLINE: {fresh:.3} of the request left after the move, not a fresh one"
    );
}

/// What is left of the request of a task M (as a fraction of a whole one) when it first runs
/// after a wakeup that found it delayed and eligible again, requeued in place; `None` if the
/// round did not meet that case (M's sleep was not delayed, or the pick finished it first).
///
/// One worker runs M and a hog H (both nice 0, so their lags are opposite: H reads M's from
/// its own). M computes with no scheduling point and parks in the middle of a request
/// (between a fifth and three fifths of it left) while behind the average: it sleeps
/// ineligible and DELAY_DEQUEUE keeps it queued. H runs on and, the moment its own lag turns
/// negative — M's positive: M eligible again, before any pick can finish M's dequeue, since
/// H makes no scheduling call in between — unparks M: `ttwu_runnable` requeues it in place
/// (`requeue_delayed_entity`).
///
/// M starts its search only once H is queued: spawned from outside, H waits on the worker's
/// wakelist until a scheduling call drains it, and M alone on the runqueue has a lag of 0.
/// So M first calls `cond_resched` until the test thread has spawned H (and once more, to
/// drain it), and H calls it until M has parked.
fn requeued_request_left(features: &str) -> Option<f64> {
    let rt = runtime(1, features);
    let parked = Arc::new(AtomicBool::new(false));
    let spawned = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let (p2, h_spawned) = (Arc::clone(&parked), Arc::clone(&spawned));
    let m = rt
        .spawn_with(TaskBuilder::new().name("M"), move || {
            while !h_spawned.load(Ordering::Acquire) {
                task::cond_resched();
            }
            // H's wakelist entry was pushed before the flag: this drains it.
            task::cond_resched();
            let deadline = Instant::now() + Duration::from_secs(5);
            loop {
                for _ in 0..50 {
                    std::hint::black_box(0u64);
                }
                let info = task::sched_info().unwrap();
                let full =
                    lagom_policy::calc_delta_fair(info.entity.slice, info.entity.weight) as i64;
                let left = info.deadline_left();
                if info.lag() < 0 && left > full / 5 && left < full * 3 / 5 {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "M never parked mid-request behind V"
                );
            }
            p2.store(true, Ordering::Release);
            task::park();
            let info = task::sched_info().unwrap();
            let full = lagom_policy::calc_delta_fair(info.entity.slice, info.entity.weight);
            info.deadline_left() as f64 / full as f64
        })
        .unwrap();
    let unparker = m.unparker();
    let (p3, s3) = (Arc::clone(&parked), Arc::clone(&stop));
    let h = rt.spawn(move || {
        let mut woke = false;
        while !s3.load(Ordering::Relaxed) {
            for _ in 0..50 {
                std::hint::black_box(0u64);
            }
            if !woke && p3.load(Ordering::Acquire) && task::sched_info().unwrap().lag() < 0 {
                unparker.unpark();
                woke = true;
            }
            if woke || !p3.load(Ordering::Acquire) {
                task::cond_resched();
            }
        }
    });
    spawned.store(true, Ordering::Release);
    let left = m.join().unwrap();
    stop.store(true, Ordering::Relaxed);
    h.join().unwrap();
    let s = rt.stats().total();
    eprintln!(
        "{features:?}: {left:.3} of M's request left; delayed {}, finished {}, requeued in \
         place {}",
        s.delayed_dequeues, s.delayed_finished, s.runnable_in_place
    );
    (s.delayed_dequeues == 1 && s.runnable_in_place == 1 && s.delayed_finished == 0).then_some(left)
}

/// DELAY_ZERO in the requeue of a delayed task (`requeue_delayed_entity`): woken while still
/// delayed but eligible again (a positive lag), it has its lag clipped to 0 and so is placed
/// afresh, with a new request; without DELAY_ZERO it keeps its place and what was left of
/// its request (a fifth to three fifths). A round that did not meet the case is void, and
/// replayed.
#[test]
fn delay_zero_renews_the_request_of_an_eligible_delayed_wakee() {
    if runtime_util::emulated_skip("delay_zero_renews_the_request_of_an_eligible_delayed_wakee") {
        return;
    }
    let _serial = serial();
    let sample = |features: &str| {
        (0..10)
            .find_map(|_| requeued_request_left(features))
            .unwrap_or_else(|| panic!("{features:?}: no round met the case in 10"))
    };
    let zero = sample("");
    assert!(
        zero > 0.85,
        "DELAY_ZERO: {zero:.3} of the request left: not placed afresh"
    );
    let kept = sample("NO_DELAY_ZERO");
    assert!(
        kept < 0.65,
        "NO_DELAY_ZERO: {kept:.3} of the request left: its old request not kept"
    );
}
