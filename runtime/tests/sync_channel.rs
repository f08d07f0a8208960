//! `lagom::sync::mpsc` across two workers and OS threads: per-sender FIFO and exactly-once
//! delivery with 4 producers × 4 consumers × 100 k messages (unbounded and bounded),
//! disconnection on both sides, the bound respected, the rendezvous, timeouts, and the
//! producer → 4 workers → collector pipeline that hangs with `std::sync::mpsc` in tasks.
mod sync_util;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use lagom::sync::mpsc::{
    self, Receiver, RecvTimeoutError, SendError, SendTimeoutError, TryRecvError, TrySendError,
};
use sync_util::{on, rt2, watchdog};

const PER_PRODUCER: u64 = 100_000;

/// A sender of either kind.
#[derive(Clone)]
enum Tx {
    Unbounded(mpsc::Sender<(u64, u64)>),
    Bounded(mpsc::SyncSender<(u64, u64)>),
}

impl Tx {
    fn send(&self, m: (u64, u64)) {
        match self {
            Tx::Unbounded(t) => t.send(m).unwrap(),
            Tx::Bounded(t) => t.send(m).unwrap(),
        }
    }
}

/// A consumer: receives until disconnected; checks that each producer's sequence numbers
/// arrive increasing; returns what it got per producer.
fn consume(rx: Receiver<(u64, u64)>, progress: &std::sync::atomic::AtomicU64) -> Vec<Vec<u64>> {
    let mut got = vec![Vec::new(); 4];
    for (p, seq) in rx.iter() {
        if let Some(&last) = got[p as usize].last() {
            assert!(seq > last, "producer {p}: {seq} after {last}");
        }
        got[p as usize].push(seq);
        progress.fetch_add(1, Ordering::Relaxed);
    }
    got
}

/// 2 producer tasks (one per worker) and 2 producer threads; 2 consumer tasks and 2 consumer
/// threads; every message is received exactly once, in order per producer.
fn four_by_four(bound: Option<usize>) {
    let (rt, cpus) = rt2();
    let (progress, _wd) = watchdog("channel 4x4");
    let (tx, rx) = match bound {
        None => {
            let (t, r) = mpsc::channel();
            (Tx::Unbounded(t), r)
        }
        Some(b) => {
            let (t, r) = mpsc::sync_channel(b);
            (Tx::Bounded(t), r)
        }
    };
    let produce = |tx: Tx, p: u64| {
        move || {
            for seq in 0..PER_PRODUCER {
                tx.send((p, seq));
            }
        }
    };
    let mut prod_tasks = Vec::new();
    let mut prod_threads = Vec::new();
    for p in 0..4u64 {
        let f = produce(tx.clone(), p);
        if p < 2 {
            prod_tasks.push(on(&rt, cpus[p as usize % cpus.len()], f));
        } else {
            prod_threads.push(std::thread::spawn(f));
        }
    }
    drop(tx);
    let mut cons_tasks = Vec::new();
    let mut cons_threads = Vec::new();
    for c in 0..4 {
        let (rx, p) = (rx.clone(), progress.clone());
        if c < 2 {
            cons_tasks.push(on(&rt, cpus[c % cpus.len()], move || consume(rx, &p)));
        } else {
            cons_threads.push(std::thread::spawn(move || consume(rx, &p)));
        }
    }
    drop(rx);
    for h in prod_tasks {
        h.join().unwrap();
    }
    for t in prod_threads {
        t.join().unwrap();
    }
    let mut all: Vec<Vec<u64>> = vec![Vec::new(); 4];
    let results: Vec<_> = cons_tasks
        .into_iter()
        .map(|h| h.join().unwrap())
        .chain(cons_threads.into_iter().map(|t| t.join().unwrap()))
        .collect();
    for r in results {
        for (p, seqs) in r.into_iter().enumerate() {
            all[p].extend(seqs);
        }
    }
    for (p, mut seqs) in all.into_iter().enumerate() {
        seqs.sort_unstable();
        assert_eq!(seqs.len() as u64, PER_PRODUCER, "producer {p}: count");
        assert!(
            seqs.iter().copied().eq(0..PER_PRODUCER),
            "producer {p}: a message lost or duplicated"
        );
    }
}

#[test]
fn four_by_four_unbounded() {
    four_by_four(None);
}

#[test]
fn four_by_four_bounded() {
    four_by_four(Some(16));
}

#[test]
fn four_by_four_rendezvous() {
    // The rendezvous is slower (each message one hand-off); the same check.
    four_by_four(Some(0));
}

/// Disconnection, receiver side: a receiver blocked in a task and one on a thread wake when
/// the last sender (a task) drops, after draining what was sent.
#[test]
fn last_sender_drop_wakes_blocked_receivers() {
    let (rt, cpus) = rt2();
    let (_p, _wd) = watchdog("sender disconnect");
    let (tx, rx) = mpsc::channel::<u32>();
    tx.send(7).unwrap();
    let r1 = rx.clone();
    let task_rx = on(&rt, cpus[0], move || {
        let mut got = Vec::new();
        loop {
            match r1.recv() {
                Ok(v) => got.push(v),
                Err(_) => return got,
            }
        }
    });
    let r2 = rx.clone();
    let thread_rx = std::thread::spawn(move || {
        let mut got = Vec::new();
        while let Ok(v) = r2.recv() {
            got.push(v);
        }
        got
    });
    std::thread::sleep(Duration::from_millis(30));
    let tx2 = tx.clone();
    drop(tx);
    on(&rt, cpus[1 % cpus.len()], move || drop(tx2))
        .join()
        .unwrap();
    let mut got = task_rx.join().unwrap();
    got.extend(thread_rx.join().unwrap());
    assert_eq!(got, vec![7]);
    assert_eq!(rx.try_recv(), Err(TryRecvError::Disconnected));
    assert_eq!(
        rx.recv_timeout(Duration::from_millis(1)),
        Err(RecvTimeoutError::Disconnected)
    );
}

/// Disconnection, sender side: a sender blocked on a full bounded channel (a task) wakes with
/// its message back when the last receiver drops; a later send fails at once.
#[test]
fn last_receiver_drop_wakes_blocked_sender() {
    let (rt, cpus) = rt2();
    let (_p, _wd) = watchdog("receiver disconnect");
    let (tx, rx) = mpsc::sync_channel::<u32>(1);
    tx.send(1).unwrap();
    let tx2 = tx.clone();
    let blocked = on(&rt, cpus[0], move || tx2.send(2));
    std::thread::sleep(Duration::from_millis(30));
    assert!(!blocked.is_finished(), "send on a full channel returned");
    drop(rx);
    assert_eq!(blocked.join().unwrap(), Err(SendError(2)));
    assert_eq!(tx.send(3), Err(SendError(3)));
    assert_eq!(tx.try_send(4), Err(TrySendError::Disconnected(4)));
    // The unbounded kind too.
    let (tx, rx) = mpsc::channel::<u32>();
    drop(rx);
    assert_eq!(tx.send(5), Err(SendError(5)));
}

/// A bound of 3 takes exactly 3 messages; a 4th send blocks until a receive makes room; the
/// channel never holds more than 3 (checked by a consumer task against a producer thread).
#[test]
fn bounded_capacity_respected() {
    let (rt, cpus) = rt2();
    let (_p, _wd) = watchdog("bounded");
    let (tx, rx) = mpsc::sync_channel::<u64>(3);
    for i in 0..3 {
        tx.try_send(i).unwrap();
    }
    assert_eq!(tx.try_send(3), Err(TrySendError::Full(3)));
    let done = Arc::new(AtomicBool::new(false));
    let (tx2, d2) = (tx.clone(), done.clone());
    let h = on(&rt, cpus[0], move || {
        tx2.send(3).unwrap();
        d2.store(true, Ordering::SeqCst);
    });
    std::thread::sleep(Duration::from_millis(30));
    assert!(
        !done.load(Ordering::SeqCst),
        "a 4th message fit in a bound of 3"
    );
    assert_eq!(rx.recv().unwrap(), 0);
    h.join().unwrap();
    assert!(done.load(Ordering::SeqCst));
    assert_eq!(rx.try_iter().collect::<Vec<_>>(), vec![1, 2, 3]);
    // Under load: the producer counts what it sent, the consumer what it took; after each
    // send returns, at most the bound plus the one being handed over are in flight.
    let sent = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let s2 = sent.clone();
    let producer = std::thread::spawn(move || {
        for i in 0..50_000u64 {
            tx.send(i).unwrap();
            s2.fetch_add(1, Ordering::SeqCst);
        }
    });
    let consumer = on(&rt, cpus[1 % cpus.len()], move || {
        let mut taken = 0u64;
        while let Ok(v) = rx.recv() {
            assert_eq!(v, taken);
            taken += 1;
            let in_flight = sent.load(Ordering::SeqCst) as i64 - taken as i64;
            assert!(in_flight <= 3, "{in_flight} messages in a channel of 3");
        }
        taken
    });
    producer.join().unwrap();
    assert_eq!(consumer.join().unwrap(), 50_000);
}

/// A rendezvous send returns only once its message is received.
#[test]
fn rendezvous_waits_for_the_receiver() {
    let (rt, cpus) = rt2();
    let (_p, _wd) = watchdog("rendezvous");
    let (tx, rx) = mpsc::sync_channel::<u32>(0);
    assert_eq!(tx.try_send(1), Err(TrySendError::Full(1)));
    let done = Arc::new(AtomicBool::new(false));
    let d2 = done.clone();
    let h = on(&rt, cpus[0], move || {
        tx.send(9).unwrap();
        d2.store(true, Ordering::SeqCst);
        tx.send_timeout(10, Duration::from_millis(20))
    });
    std::thread::sleep(Duration::from_millis(30));
    assert!(
        !done.load(Ordering::SeqCst),
        "a rendezvous send returned unreceived"
    );
    assert_eq!(rx.recv().unwrap(), 9);
    assert_eq!(h.join().unwrap(), Err(SendTimeoutError::Timeout(10)));
    assert_eq!(rx.try_recv(), Err(TryRecvError::Disconnected));
}

/// `recv_timeout` and `send_timeout` give up after their timeout, in a task and on a thread.
#[test]
fn timeouts_fire() {
    let (rt, cpus) = rt2();
    let check = || {
        let (tx, rx) = mpsc::sync_channel::<u8>(1);
        let t0 = Instant::now();
        assert_eq!(
            rx.recv_timeout(Duration::from_millis(25)),
            Err(RecvTimeoutError::Timeout)
        );
        let a = t0.elapsed();
        tx.send(1).unwrap();
        let t0 = Instant::now();
        assert_eq!(
            tx.send_timeout(2, Duration::from_millis(25)),
            Err(SendTimeoutError::Timeout(2))
        );
        (a, t0.elapsed())
    };
    for (a, b) in [on(&rt, cpus[0], check).join().unwrap(), check()] {
        for took in [a, b] {
            assert!(took >= Duration::from_millis(25), "{took:?}");
            assert!(took < Duration::from_secs(3), "{took:?}");
        }
    }
}

/// The pipeline: a producer task, 4 worker tasks, a collector task, connected with
/// `lagom::sync::mpsc` (with `std::sync::mpsc` it hung 3 runs out of 3).
#[test]
fn pipeline_producer_workers_collector() {
    let (rt, _cpus) = rt2();
    let (progress, _wd) = watchdog("pipeline");
    let (work_tx, work_rx) = mpsc::sync_channel::<u64>(8);
    let (res_tx, res_rx) = mpsc::channel::<u64>();
    let producer = rt.spawn(move || {
        for i in 1..=20_000u64 {
            work_tx.send(i).unwrap();
        }
    });
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let (rx, tx) = (work_rx.clone(), res_tx.clone());
            rt.spawn(move || {
                for i in rx.iter() {
                    tx.send(i * i).unwrap();
                }
            })
        })
        .collect();
    drop((work_rx, res_tx));
    let collector = rt.spawn(move || {
        let mut sum = 0u64;
        let mut n = 0;
        for v in res_rx {
            sum += v;
            n += 1;
            progress.fetch_add(1, Ordering::Relaxed);
        }
        (n, sum)
    });
    producer.join().unwrap();
    for w in workers {
        w.join().unwrap();
    }
    let n = 20_000u64;
    assert_eq!(
        collector.join().unwrap(),
        (n, n * (n + 1) * (2 * n + 1) / 6)
    );
}
