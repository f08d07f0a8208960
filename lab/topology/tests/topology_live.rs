//! `Topology::detect()` on the machine running the tests: the same reader as for recorded
//! trees, plus the thread's affinity mask.

use lagom_topology::{CpuSet, Topology};

#[test]
fn detect_reads_this_machine() {
    let t = Topology::detect().expect("this machine's sysfs is readable");
    assert!(!t.online_cpus().is_empty());
    assert!(t.allowed_cpus().is_subset(t.online_cpus()));
    assert!(!t.allowed_cpus().is_empty());
    let parallelism = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert!(
        parallelism <= t.allowed_cpus().len(),
        "available_parallelism {parallelism} > allowed {}",
        t.allowed_cpus()
    );
    for c in t.cpus() {
        assert!(t.llc(c.id).unwrap().contains(c.id));
        assert!(t.cores()[c.core].contains(c.id));
    }
}

#[test]
fn detect_intersects_the_thread_affinity_mask() {
    let all = Topology::detect().unwrap();
    let last = all.allowed_cpus().last().unwrap();
    let pinned = std::thread::spawn(move || {
        // SAFETY: `set` is a zeroed, properly sized cpu_set_t that outlives the call; pid 0
        // is this (new) thread.
        let rc = unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(last, &mut set);
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
        };
        assert_eq!(rc, 0, "sched_setaffinity to CPU {last}");
        Topology::detect().unwrap()
    })
    .join()
    .unwrap();
    assert_eq!(pinned.allowed_cpus(), &CpuSet::from_iter([last]));
    assert_eq!(pinned.online_cpus(), all.online_cpus());
}
