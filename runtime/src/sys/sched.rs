//! The calling thread's kernel scheduling attributes: `sched_setattr` / `sched_getattr` for a
//! fair (`SCHED_OTHER` or `SCHED_BATCH`) thread — its nice and its custom slice
//! (`sched_runtime`, which the kernel takes as a fair thread's slice from Linux 6.12 on) —
//! and the soft `RLIMIT_NICE`, which says how far an unprivileged thread may lower its nice.

/// `struct sched_attr` up to `sched_period` (`SCHED_ATTR_SIZE_VER0`, 48 bytes: every kernel
/// with `sched_setattr` takes this size; the utilisation clamps after it are not used).
#[repr(C)]
#[derive(Default)]
struct SchedAttr {
    size: u32,
    sched_policy: u32,
    sched_flags: u64,
    sched_nice: i32,
    sched_priority: u32,
    sched_runtime: u64,
    sched_deadline: u64,
    sched_period: u64,
}

/// A fair thread's attributes as the kernel reports them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FairAttr {
    /// `SCHED_OTHER` (0) or `SCHED_BATCH` (3); any other policy is reported as such.
    pub(crate) policy: u32,
    /// The nice value, −20 … 19.
    pub(crate) nice: i32,
    /// `sched_runtime`: the slice in ns — the custom one, or the kernel's default where none
    /// is set (Linux 6.12 and later report it; earlier kernels report 0).
    pub(crate) slice_ns: u64,
}

/// The `errno` of a nice the caller may not lower to.
pub(crate) const EPERM: i32 = libc::EPERM;

/// Whether `policy` is one of the fair policies whose nice and slice this module sets.
pub(crate) fn is_fair(policy: u32) -> bool {
    policy == libc::SCHED_OTHER as u32 || policy == libc::SCHED_BATCH as u32
}

/// The calling thread's attributes (`sched_getattr`). Returns the `errno` on failure.
pub(crate) fn get() -> Result<FairAttr, i32> {
    let mut a = SchedAttr::default();
    // SAFETY: `a` is writable for the size passed; pid 0 is the calling thread; flags 0.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_sched_getattr,
            0 as libc::c_long,
            &mut a as *mut SchedAttr,
            core::mem::size_of::<SchedAttr>() as libc::c_uint,
            0 as libc::c_uint,
        )
    };
    if rc != 0 {
        return Err(super::mem::errno());
    }
    Ok(FairAttr {
        policy: a.sched_policy,
        nice: a.sched_nice,
        slice_ns: a.sched_runtime,
    })
}

/// Sets the calling thread's fair `policy`, `nice` and custom slice `slice_ns` (0: the
/// kernel's default slice) in one `sched_setattr`. Returns the `errno` on failure: `EPERM`
/// when lowering the nice needs `CAP_SYS_NICE` (or a larger `RLIMIT_NICE`), `EINVAL` for a
/// value the kernel refuses. A kernel before 6.12 takes the call and ignores `slice_ns`
/// (read it back with [`get`] to know).
pub(crate) fn set(policy: u32, nice: i32, slice_ns: u64) -> Result<(), i32> {
    let a = SchedAttr {
        size: core::mem::size_of::<SchedAttr>() as u32,
        sched_policy: policy,
        sched_nice: nice,
        sched_runtime: slice_ns,
        ..SchedAttr::default()
    };
    // SAFETY: `a` is a valid, initialised sched_attr of the size it states; pid 0 is the
    // calling thread; flags 0.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_sched_setattr,
            0 as libc::c_long,
            &a as *const SchedAttr,
            0 as libc::c_uint,
        )
    };
    if rc != 0 {
        return Err(super::mem::errno());
    }
    Ok(())
}

/// The soft `RLIMIT_NICE` (0 … 40): an unprivileged thread may lower its nice to
/// `20 - limit` and no further. 0 if the kernel will not say.
pub(crate) fn nice_rlimit() -> u64 {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `r` is writable.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_NICE, &mut r) };
    if rc != 0 {
        return 0;
    }
    r.rlim_cur.min(40)
}
