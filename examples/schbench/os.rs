//! The `--runtime os` backend: one std thread per schbench thread, blocking in
//! `FUTEX_WAIT_PRIVATE` on the thread's own word, as schbench does, and scheduled by the
//! kernel.

use std::sync::atomic::AtomicU32;

use crate::sched::Sched;

/// Plain OS threads.
pub struct Os;

impl Sched for Os {
    // The futex word itself is the address to wake: no handle needed.
    type Waker = ();
    type Join = std::thread::JoinHandle<()>;

    fn spawn(
        name: &'static str,
        cpus: &[usize],
        f: impl FnOnce() + Send + 'static,
    ) -> Result<Self::Join, String> {
        let cpus = cpus.to_vec();
        std::thread::Builder::new()
            .name(name.to_string())
            .spawn(move || {
                if !cpus.is_empty() {
                    pin_self(&cpus);
                }
                f()
            })
            .map_err(|e| format!("schbench: cannot start a thread: {e}"))
    }

    fn join(j: Self::Join) -> Result<(), String> {
        j.join()
            .map_err(|_| "schbench: a thread panicked".to_string())
    }

    fn current_waker() {}

    fn block(word: &AtomicU32, expected: u32) {
        // SAFETY: the word is a live, aligned u32 for the whole call; FUTEX_WAIT reads it
        // and sleeps only while it holds `expected`. EAGAIN and EINTR just return.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                word.as_ptr(),
                libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
                expected,
                std::ptr::null::<libc::timespec>(),
            )
        };
    }

    fn wake(word: &AtomicU32, _: &()) {
        // SAFETY: FUTEX_WAKE only uses the address as a key; the word is live.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                word.as_ptr(),
                libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
                1,
            )
        };
    }

    fn usleep(us: u64) {
        std::thread::sleep(std::time::Duration::from_micros(us));
    }

    fn relax() {
        std::hint::spin_loop();
    }

    fn tick() {}

    fn os_tid() -> Option<i32> {
        // SAFETY: gettid has no preconditions.
        Some(unsafe { libc::gettid() })
    }
}

/// Restricts the calling thread to `cpus`.
pub fn pin_self(cpus: &[usize]) {
    // SAFETY: an all-zero cpu_set_t is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus {
        // SAFETY: the CPUs were checked against the allowed set, below CPU_SETSIZE.
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    // SAFETY: `set` is a valid cpu_set_t of the size passed; pid 0 is the calling thread.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) };
    if rc != 0 {
        eprintln!(
            "unable to set CPU affinity to cpus {}",
            crate::cpus::format(cpus)
        );
        std::process::exit(1);
    }
}
