//! `sleep` (the timer heap and the idle worker's futex timeout), `current()`, and the stats
//! table.
mod runtime_util;

use std::time::{Duration, Instant};

use lagom::Runtime;
use lagom::task::Builder;

/// How late a sleep may end and still pass: generous, for a loaded machine; a timer that is
/// never fired, or fired only by some later event, misses it.
const LATE: Duration = Duration::from_secs(2);

/// Sleeping tasks wake no earlier than asked and not much later, with nothing else to wake
/// their workers (the idle sleep must time out at the next timer).
#[test]
fn sleepers_wake_after_their_deadline() {
    let rt = Runtime::builder()
        .worker_cpus(runtime_util::two_cpus())
        .idle_spin(Duration::ZERO)
        .build()
        .unwrap();
    let t0 = Instant::now();
    let hs: Vec<_> = (1..=8u64)
        .map(|i| {
            rt.spawn(move || {
                let d = Duration::from_millis(5 * i);
                let s = Instant::now();
                lagom::task::sleep(d);
                let took = s.elapsed();
                assert!(took >= d, "slept {took:?}, asked for {d:?}");
                assert!(took <= d + LATE, "slept {took:?}, asked for {d:?}");
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    let all = t0.elapsed();
    assert!(all >= Duration::from_millis(40), "{all:?}");
    assert!(all <= Duration::from_millis(40) + LATE, "{all:?}");
    // Outside tasks sleep is an OS sleep.
    let s = Instant::now();
    lagom::task::sleep(Duration::from_millis(3));
    let took = s.elapsed();
    assert!(
        took >= Duration::from_millis(3) && took <= Duration::from_millis(3) + LATE,
        "{took:?}"
    );
    let st = rt.shutdown();
    assert!(st.total().idle_sleeps > 0, "workers never slept\n{st}");
    assert_eq!(st.total().blocks, st.total().wakeups(), "{st}");
    assert_eq!((st.live_tasks, st.live_stacks), (0, 0));
}

#[test]
fn current_reports_id_name_and_cpu() {
    let cpus = runtime_util::two_cpus();
    let rt = Runtime::builder()
        .worker_cpus(cpus.clone())
        .build()
        .unwrap();
    assert!(
        lagom::task::current().is_none(),
        "no task outside the runtime"
    );
    let last = *cpus.last().unwrap();
    let h = rt
        .spawn_with(Builder::new().name("whoami").cpus([last]), || {
            lagom::task::current().unwrap()
        })
        .unwrap();
    let id = h.id();
    let me = h.join().unwrap();
    assert_eq!((me.id, me.name.as_str(), me.cpu), (id, "whoami", last));
    let table = rt.stats().to_string();
    for needle in [
        "counter",
        "wakeups_local",
        "runnable_in_place",
        "balance_pulls",
        "idle_sleeps",
        "total",
        &format!("cpu{last}"),
    ] {
        assert!(table.contains(needle), "no `{needle}` in\n{table}");
    }
}
