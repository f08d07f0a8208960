//! OS threads (`std::thread` with `std`, else `pthread`, so that the no_std build can start
//! workers), pinning
//! (`sched_setaffinity`), and process-wide thread-local slots (`pthread_key_t`) through
//! which a worker thread finds its own state without `std`.

#[cfg(not(feature = "std"))]
use alloc::boxed::Box;
use alloc::string::String;
use core::ffi::c_void;
use core::sync::atomic::{AtomicUsize, Ordering};

/// A started OS thread; join it with [`Thread::join`] or let it go with [`Thread::detach`].
#[derive(Debug)]
pub(crate) struct Thread {
    #[cfg(feature = "std")]
    handle: std::thread::JoinHandle<()>,
    #[cfg(not(feature = "std"))]
    tid: libc::pthread_t,
}

/// The closure a new thread runs, boxed twice so that one thin pointer crosses the C ABI.
#[cfg(not(feature = "std"))]
type Entry = Box<dyn FnOnce() + Send + 'static>;

#[cfg(not(feature = "std"))]
extern "C" fn thread_main(arg: *mut c_void) -> *mut c_void {
    // SAFETY: `arg` is the `Box<Entry>` leaked by `spawn`, handed over exactly once.
    let entry: Box<Entry> = unsafe { Box::from_raw(arg.cast::<Entry>()) };
    entry();
    core::ptr::null_mut()
}

/// Starts an OS thread named `name` running `f`. Returns the `errno` of a failed
/// `pthread_create`.
///
/// With `std` it is a `std::thread` (so that a panic message names it, and
/// `std::thread::current()` works on it); without, a `pthread` whose kernel name
/// (`pthread_setname_np`, at most 15 bytes: longer names are cut) is `name`. Either way its
/// stack is the platform's default for a new thread.
pub(crate) fn spawn(name: String, f: impl FnOnce() + Send + 'static) -> Result<Thread, i32> {
    #[cfg(feature = "std")]
    {
        match std::thread::Builder::new().name(name).spawn(f) {
            Ok(handle) => Ok(Thread { handle }),
            Err(e) => Err(e.raw_os_error().unwrap_or(libc::EAGAIN)),
        }
    }
    #[cfg(not(feature = "std"))]
    {
        let entry: Box<Entry> = Box::new(Box::new(f));
        let arg = Box::into_raw(entry).cast::<c_void>();
        let mut tid: libc::pthread_t = 0;
        // SAFETY: `tid` is writable; `thread_main` takes ownership of `arg` if the call
        // succeeds; default attributes (null).
        let rc = unsafe { libc::pthread_create(&mut tid, core::ptr::null(), thread_main, arg) };
        if rc != 0 {
            // SAFETY: the thread was not created, so `arg` is still ours.
            drop(unsafe { Box::from_raw(arg.cast::<Entry>()) });
            return Err(rc);
        }
        let mut cname = [0u8; 16];
        let n = name.len().min(15);
        cname[..n].copy_from_slice(&name.as_bytes()[..n]);
        // SAFETY: `cname` is NUL-terminated (its last byte is never written) and at most 16
        // bytes, the kernel's limit; `tid` is a live thread of this process. A failure only
        // leaves the thread unnamed.
        unsafe { libc::pthread_setname_np(tid, cname.as_ptr().cast()) };
        Ok(Thread { tid })
    }
}

impl Thread {
    /// Waits for the thread to end.
    pub(crate) fn join(self) {
        #[cfg(feature = "std")]
        {
            // A panic that escaped the thread was already reported by its panic hook.
            let _ = self.handle.join();
        }
        // SAFETY: the thread was created joinable and is joined exactly once (self is consumed).
        #[cfg(not(feature = "std"))]
        unsafe {
            libc::pthread_join(self.tid, core::ptr::null_mut())
        };
    }

    /// Lets the thread run on unjoined: its resources are freed when it ends.
    pub(crate) fn detach(self) {
        #[cfg(feature = "std")]
        drop(self.handle);
        // SAFETY: the thread was created joinable and is detached once, never joined (self is
        // consumed).
        #[cfg(not(feature = "std"))]
        unsafe {
            libc::pthread_detach(self.tid)
        };
    }
}

/// The calling thread's kernel id (`gettid`), which names it under `/proc/self/task/`.
pub(crate) fn gettid() -> u32 {
    // SAFETY: gettid takes no argument and always succeeds.
    unsafe { libc::syscall(libc::SYS_gettid) as u32 }
}

/// Pins the calling thread to `cpu`. Returns the `errno` on failure.
pub(crate) fn pin_to(cpu: usize) -> Result<(), i32> {
    // SAFETY: cpu_set_t is plain data; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { core::mem::zeroed() };
    if cpu >= 8 * core::mem::size_of::<libc::cpu_set_t>() {
        return Err(libc::EINVAL);
    }
    // SAFETY: `cpu` is below the set's capacity (checked above).
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: `set` is a valid cpu_set_t of the size passed; pid 0 is the calling thread.
    let rc = unsafe { libc::sched_setaffinity(0, core::mem::size_of_val(&set), &set) };
    if rc == 0 {
        Ok(())
    } else {
        Err(super::mem::errno())
    }
}

/// Lets the calling thread run on any of `cpus` (and no other). Returns the `errno` on
/// failure: `EINVAL` for a CPU beyond the set's capacity or a set with no CPU this process
/// may use.
pub(crate) fn set_affinity(cpus: &[usize]) -> Result<(), i32> {
    // SAFETY: cpu_set_t is plain data; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { core::mem::zeroed() };
    for &cpu in cpus {
        if cpu >= 8 * core::mem::size_of::<libc::cpu_set_t>() {
            return Err(libc::EINVAL);
        }
        // SAFETY: `cpu` is below the set's capacity (checked above).
        unsafe { libc::CPU_SET(cpu, &mut set) };
    }
    // SAFETY: `set` is a valid cpu_set_t of the size passed; pid 0 is the calling thread.
    let rc = unsafe { libc::sched_setaffinity(0, core::mem::size_of_val(&set), &set) };
    if rc == 0 {
        Ok(())
    } else {
        Err(super::mem::errno())
    }
}

/// Sets the calling thread's timer slack (`PR_SET_TIMERSLACK`) to `ns` (at least 1: 0 would
/// restore the default). The kernel lets a timed sleep of a normal thread end up to its slack
/// late so that wakeups can be merged — 50 µs by default, which a worker's idle sleep until
/// the next `sleep` deadline would add to every timed wakeup (`sched/idle.rs`).
pub(crate) fn set_timer_slack(ns: u64) -> Result<(), i32> {
    let ns = libc::c_ulong::try_from(ns.max(1)).unwrap_or(libc::c_ulong::MAX);
    // SAFETY: PR_SET_TIMERSLACK takes one integer argument and touches no memory of ours.
    let rc = unsafe {
        libc::prctl(
            libc::PR_SET_TIMERSLACK,
            ns,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(super::mem::errno())
    }
}

/// A process-wide thread-local slot (`pthread_key_t`), created on first use.
pub(crate) struct Key {
    /// 0 until created, key + 1 after.
    key: AtomicUsize,
    /// Called with a non-null value when a thread holding one exits.
    dtor: Option<unsafe extern "C" fn(*mut c_void)>,
}

impl Key {
    /// A slot whose values are handed to `dtor` when their thread exits.
    pub(crate) const fn new(dtor: Option<unsafe extern "C" fn(*mut c_void)>) -> Key {
        Key {
            key: AtomicUsize::new(0),
            dtor,
        }
    }

    fn key(&self) -> libc::pthread_key_t {
        let k = self.key.load(Ordering::Acquire);
        if k != 0 {
            return (k - 1) as libc::pthread_key_t;
        }
        let mut new: libc::pthread_key_t = 0;
        // SAFETY: `new` is writable; the destructor (if any) is a valid extern "C" fn.
        let rc = unsafe { libc::pthread_key_create(&mut new, self.dtor) };
        assert_eq!(rc, 0, "lagom: pthread_key_create failed ({rc})");
        match self
            .key
            .compare_exchange(0, new as usize + 1, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => new,
            Err(other) => {
                // SAFETY: `new` was created above and never used.
                unsafe { libc::pthread_key_delete(new) };
                (other - 1) as libc::pthread_key_t
            }
        }
    }

    /// Sets the calling thread's value.
    pub(crate) fn set(&self, value: *const ()) {
        // SAFETY: the key is valid (created by `key`); the value is an opaque pointer.
        unsafe { libc::pthread_setspecific(self.key(), value.cast()) };
    }

    /// The calling thread's value (null if never set).
    pub(crate) fn get(&self) -> *const () {
        // SAFETY: the key is valid; getspecific only reads this thread's value.
        unsafe { libc::pthread_getspecific(self.key()) as *const () }
    }
}
