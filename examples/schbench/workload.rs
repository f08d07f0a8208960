//! The workload, written once against [`Sched`]: message threads
//! each with their workers, the post/wait protocol, the lock-free wait list, and a request.
//!
//! **Post/wait.** Each thread has a word, `BLOCKED` or `RUNNING`: a binary semaphore.
//! *A post made before or during a wait is never lost*: `post` moves `BLOCKED → RUNNING` and
//! only then wakes; `wait` consumes `RUNNING → BLOCKED` and otherwise blocks while the word
//! is `BLOCKED`, re-checking after every return. All accesses to the word and to
//! `stopping` are SeqCst, so the stop sequence (main sets `stopping`, then posts) cannot
//! be missed by a thread that re-checks `stopping` after storing `BLOCKED`.
//!
//! **Wakers.** A thread registers its waker before it first stores `BLOCKED`; words start
//! `RUNNING`. So a poster whose CAS succeeds has read a `BLOCKED` that the thread stored
//! after registering, and sees the waker.
//!
//! **Wait list.** A message thread's workers push themselves with a CAS prepend (Release)
//! and the message thread takes the whole list with one swap (Acquire): push-one/take-all,
//! which has no ABA problem. Links are indices into the record array. The message thread
//! reads a worker's link before posting it, since the woken worker may push itself again.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use crate::hist::Hist;
use crate::matrix::{CpuLocks, Matrix};
use crate::sched::Sched;

/// The word's states.
const BLOCKED: u32 = 0;
const RUNNING: u32 = 1;
/// The end of a wait list.
const NONE: u32 = u32::MAX;

/// Everything the threads need to know, fixed before they start.
#[derive(Clone, Debug, Default)]
pub struct Config {
    /// Message threads.
    pub message_threads: usize,
    /// Workers per message thread.
    pub workers: usize,
    /// µs slept per request.
    pub sleep_us: u64,
    /// Sleep before the request timer starts.
    pub calibrate: bool,
    /// Take the per-CPU lock around the math.
    pub locking: bool,
    /// Pipe-mode transfer size (0: normal mode).
    pub pipe: usize,
    /// RPS mode (`-R` or `-A`).
    pub rps_mode: bool,
    /// Matrix size of each worker's private matrices.
    pub private_n: usize,
    /// Multiplies per request on the private matrices.
    pub ops_private: u64,
    /// Matrix size of the shared matrices (`--split`).
    pub shared_n: usize,
    /// Multiplies per request on the shared matrices.
    pub ops_shared: u64,
    /// Message thread `i`'s CPUs (empty: unrestricted).
    pub message_cpus: Vec<Vec<usize>>,
    /// Whether message threads are pinned one CPU each (`-M`): each says so.
    pub announce_pin: bool,
    /// Every worker's CPUs (empty: unrestricted).
    pub worker_cpus: Vec<usize>,
    /// Locks to make: one per possible CPU.
    pub nr_locks: usize,
}

/// One thread's record (schbench's per-thread data).
pub struct Rec<S: Sched> {
    word: AtomicU32,
    waker: OnceLock<S::Waker>,
    /// When the waker posted (or the worker began waiting), µs.
    pub wake_time: AtomicU64,
    next: AtomicU32,
    /// Head of a message thread's wait list.
    list: AtomicU32,
    /// Wakeup latencies (workers).
    pub wakeup: Hist,
    /// Request latencies (workers).
    pub request: Hist,
    /// Requests done.
    pub loop_count: AtomicU64,
    /// µs since the thread started, at its last request.
    pub runtime_us: AtomicU64,
    /// The CPU it ran its last request on.
    pub last_cpu: AtomicU32,
    /// Its kernel thread id (0: none of its own).
    pub tid: AtomicI32,
    /// RPS mode: requests queued and not yet taken.
    pub queued: AtomicU64,
    /// RPS mode: requests posted since the worker last took its queue.
    pub pending: AtomicU64,
    page: Mutex<Vec<u8>>,
}

impl<S: Sched> Rec<S> {
    fn new(pipe: usize) -> Rec<S> {
        Rec {
            word: AtomicU32::new(RUNNING),
            waker: OnceLock::new(),
            wake_time: AtomicU64::new(0),
            next: AtomicU32::new(NONE),
            list: AtomicU32::new(NONE),
            wakeup: Hist::default(),
            request: Hist::default(),
            loop_count: AtomicU64::new(0),
            runtime_us: AtomicU64::new(0),
            last_cpu: AtomicU32::new(0),
            tid: AtomicI32::new(0),
            queued: AtomicU64::new(0),
            pending: AtomicU64::new(0),
            page: Mutex::new(vec![0; pipe]),
        }
    }

    /// Registers the calling thread as this record's owner.
    fn register(&self) {
        let _ = self.waker.set(S::current_waker());
        self.tid.store(S::os_tid().unwrap_or(0), Ordering::Relaxed);
    }

    /// Announces a coming wait: later posts will wake it.
    pub fn set_blocked(&self) {
        self.word.store(BLOCKED, Ordering::SeqCst);
    }

    /// Marks the thread running (RPS mode, when it has work).
    pub fn set_running(&self) {
        self.word.store(RUNNING, Ordering::SeqCst);
    }

    /// Posts this record's thread.
    pub fn post(&self) {
        if self
            .word
            .compare_exchange(BLOCKED, RUNNING, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
            && let Some(w) = self.waker.get()
        {
            S::wake(&self.word, w);
        }
    }

    /// Waits for a post (the calling thread owns this record).
    pub fn wait(&self) {
        while self
            .word
            .compare_exchange(RUNNING, BLOCKED, Ordering::SeqCst, Ordering::SeqCst)
            .is_err()
        {
            S::block(&self.word, BLOCKED);
        }
    }

    /// Writes `len` bytes into the pipe page.
    fn fill_page(&self, byte: u8) {
        if let Ok(mut p) = self.page.lock() {
            p.fill(byte);
        }
    }
}

/// What every thread shares.
pub struct Shared<S: Sched> {
    /// The fixed configuration.
    pub cfg: Config,
    /// `[msg0, w0_0 … w0_{t-1}, msg1, …]`.
    pub recs: Box<[Rec<S>]>,
    /// Set once at the end of the run.
    pub stopping: AtomicBool,
    /// RPS mode: requests per second per message thread (auto-RPS changes it).
    pub rps_per_thread: AtomicU64,
    locks: CpuLocks,
    shared: Option<Matrix>,
}

impl<S: Sched> Shared<S> {
    /// Records and locks for `cfg`.
    pub fn new(cfg: Config, rps_per_thread: u64) -> Arc<Shared<S>> {
        let n = cfg.message_threads * (cfg.workers + 1);
        Arc::new(Shared {
            recs: (0..n).map(|_| Rec::new(cfg.pipe)).collect(),
            stopping: AtomicBool::new(false),
            rps_per_thread: AtomicU64::new(rps_per_thread),
            locks: CpuLocks::new(cfg.nr_locks),
            shared: (cfg.ops_shared > 0).then(|| Matrix::new(cfg.shared_n)),
            cfg,
        })
    }

    /// The record index of message thread `i`.
    pub fn msg_index(&self, i: usize) -> usize {
        i * (self.cfg.workers + 1)
    }

    /// The records of every worker thread, message thread by message thread.
    pub fn workers(&self) -> impl Iterator<Item = &Rec<S>> {
        let stride = self.cfg.workers + 1;
        self.recs
            .iter()
            .enumerate()
            .filter(move |(i, _)| i % stride != 0)
            .map(|(_, r)| r)
    }

    /// The records of the message threads.
    pub fn messages(&self) -> impl Iterator<Item = &Rec<S>> {
        self.recs.iter().step_by(self.cfg.workers + 1)
    }

    /// Whether the run is over.
    pub fn stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }

    /// One request's CPU work: the multiplies, inside this CPU's lock unless `-L`.
    pub fn do_work(&self, private: &Matrix) {
        let held = self.cfg.locking.then(|| self.locks.lock::<S>());
        for _ in 0..self.cfg.ops_private {
            private.multiply::<S>();
        }
        if let Some(shared) = &self.shared {
            for _ in 0..self.cfg.ops_shared {
                shared.multiply::<S>();
            }
        }
        drop(held);
    }

    /// A request after the wakeup: sleep and math, timed into `rec.request`.
    pub fn request(&self, rec: &Rec<S>, private: &Matrix, start: u64) {
        if self.cfg.calibrate && self.cfg.sleep_us > 0 {
            S::usleep(self.cfg.sleep_us);
        }
        let work_start = S::now_us();
        if !self.cfg.calibrate && self.cfg.sleep_us > 0 {
            S::usleep(self.cfg.sleep_us);
        }
        self.do_work(private);
        let now = S::now_us();
        rec.runtime_us.store(now - start, Ordering::Relaxed);
        rec.loop_count.fetch_add(1, Ordering::Relaxed);
        rec.last_cpu.store(S::cpu() as u32, Ordering::Relaxed);
        if let Some(d) = positive(now, work_start) {
            rec.request.add(d);
        }
    }

    /// Takes message thread `msg`'s wait list and posts every worker on it, stamping each
    /// with one time for the batch (pipe mode: fills its page and stamps it afresh).
    fn wake_all(&self, msg: usize) {
        let mut i = self.recs[msg].list.swap(NONE, Ordering::Acquire);
        let mut now = S::now_us();
        while i != NONE {
            let r = &self.recs[i as usize];
            let next = r.next.load(Ordering::Relaxed);
            if self.cfg.pipe > 0 {
                r.fill_page(2);
                now = S::now_us();
            }
            r.wake_time.store(now, Ordering::Relaxed);
            r.post();
            i = next;
        }
    }
}

/// `now - then` in µs when it is positive (zero-µs samples are dropped), capped to u32.
pub fn positive(now: u64, then: u64) -> Option<u32> {
    let d = now.saturating_sub(then);
    (d > 0).then(|| u32::try_from(d).unwrap_or(u32::MAX))
}

/// A worker in normal or pipe mode: post the message thread, wait, record the wakeup
/// latency, serve a request.
fn worker<S: Sched>(sh: &Shared<S>, msg: usize, me: usize, private: &Matrix) {
    let rec = &sh.recs[me];
    let m = &sh.recs[msg];
    let start = S::now_us();
    while !sh.stopping() {
        rec.set_blocked();
        rec.wake_time.store(S::now_us(), Ordering::Relaxed);
        if sh.cfg.pipe > 0 {
            rec.fill_page(1);
        }
        // Push onto the message thread's list (CAS prepend), then post it.
        let mut head = m.list.load(Ordering::Relaxed);
        loop {
            rec.next.store(head, Ordering::Relaxed);
            match m.list.compare_exchange_weak(
                head,
                me as u32,
                Ordering::Release,
                Ordering::Relaxed,
            ) {
                Ok(_) => break,
                Err(h) => head = h,
            }
        }
        m.post();
        if !sh.stopping() {
            rec.wait();
        }
        let now = S::now_us();
        if let Some(d) = positive(now, rec.wake_time.load(Ordering::Relaxed)) {
            rec.wakeup.add(d);
        }
        if sh.cfg.pipe > 0 {
            rec.runtime_us.store(now - start, Ordering::Relaxed);
            rec.loop_count.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        sh.request(rec, private, start);
    }
}

/// A message thread: starts its workers, then wakes them in batches (or generates RPS
/// load) until the run stops; then posts and joins them.
fn message<S: Sched>(sh: Arc<Shared<S>>, i: usize) {
    let msg = sh.msg_index(i);
    let rec = &sh.recs[msg];
    rec.register();
    let mut joins = Vec::with_capacity(sh.cfg.workers);
    for j in 0..sh.cfg.workers {
        let me = msg + 1 + j;
        let private = Matrix::new(sh.cfg.private_n);
        let sh2 = Arc::clone(&sh);
        let f = move || {
            sh2.recs[me].register();
            if sh2.cfg.rps_mode {
                crate::rps::worker(&sh2, msg, me, &private);
            } else {
                worker(&sh2, msg, me, &private);
            }
        };
        match S::spawn("schbench-worker", &sh.cfg.worker_cpus, f) {
            Ok(j) => joins.push(j),
            Err(e) => fail(&e),
        }
    }
    if let (true, Some(&[cpu])) = (
        sh.cfg.announce_pin,
        sh.cfg.message_cpus.get(i).map(Vec::as_slice),
    ) {
        eprintln!("Pinning to message thread index {i} cpu {cpu}");
    }
    if sh.cfg.rps_mode {
        crate::rps::generator(&sh, msg);
    } else {
        loop {
            rec.set_blocked();
            sh.wake_all(msg);
            if sh.stopping() {
                sh.wake_all(msg);
                break;
            }
            rec.wait();
        }
    }
    for w in &sh.recs[msg + 1..msg + 1 + sh.cfg.workers] {
        w.post();
    }
    for j in joins {
        if let Err(e) = S::join(j) {
            fail(&e);
        }
    }
}

/// Ends the process on an error inside the workload.
fn fail(e: &str) -> ! {
    eprintln!("{e}");
    std::process::exit(1)
}

/// Starts the message threads through `launch` (how the caller's scheduler spawns from
/// outside the workload), each with its CPUs.
pub fn start<S: Sched>(
    sh: &Arc<Shared<S>>,
    mut launch: impl FnMut(&[usize], Box<dyn FnOnce() + Send>) -> Result<S::Join, String>,
) -> Result<Vec<S::Join>, String> {
    (0..sh.cfg.message_threads)
        .map(|i| {
            let sh2 = Arc::clone(sh);
            let cpus = sh.cfg.message_cpus.get(i).cloned().unwrap_or_default();
            launch(&cpus, Box::new(move || message(sh2, i)))
        })
        .collect()
}

/// Ends the run: sets `stopping`, posts every message thread and joins them (each joins
/// its workers).
pub fn stop<S: Sched>(sh: &Shared<S>, joins: Vec<S::Join>) -> Result<(), String> {
    sh.stopping.store(true, Ordering::SeqCst);
    for m in sh.messages() {
        m.post();
    }
    joins.into_iter().try_for_each(S::join)
}
