//! Which CPUs the threads may use: the process's allowed set, and the `-M` / `-W` / `--cpus`
//! lists checked against it (a CPU outside it is a one-line error naming the allowed ones).

use lagom_topology::CpuSet;

use crate::opts::{Backend, CpuSpec, Opts};

/// The CPUs this process may run on (its affinity mask), ascending.
pub fn allowed() -> Vec<usize> {
    // SAFETY: an all-zero cpu_set_t is the empty set, a valid value.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is writable and its size is passed; pid 0 is the calling thread.
    let rc = unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) };
    if rc != 0 {
        return vec![0];
    }
    (0..libc::CPU_SETSIZE as usize)
        // SAFETY: `c` is below CPU_SETSIZE, the set's capacity.
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect()
}

/// `list` in cpulist form (`0-3,8`).
pub fn format(list: &[usize]) -> String {
    list.iter().copied().collect::<CpuSet>().to_string()
}

/// Where the threads may run, after `-M`, `-W` and `--cpus`.
#[derive(Clone, Debug, Default)]
pub struct Placement {
    /// lagom's worker CPUs (the allowed set, or `--cpus`); os mode: the allowed set.
    pub pool: Vec<usize>,
    /// Message thread `i` runs on `message[i % len]` (empty: anywhere in `workers`' set or
    /// the pool).
    pub message: Vec<usize>,
    /// The CPUs every worker thread may use (empty: the pool).
    pub workers: Vec<usize>,
}

/// Checks the lists against the allowed CPUs and resolves `auto`.
pub fn place(o: &Opts, allowed: &[usize]) -> Result<Placement, String> {
    let allowed_text = format(allowed);
    let pool = match &o.cpus {
        Some(list) => {
            check("--cpus", list, allowed, &allowed_text, "allowed")?;
            list.clone()
        }
        None => allowed.to_vec(),
    };
    let pool_text = format(&pool);
    let what = if o.backend == Backend::Lagom {
        "one of lagom's worker CPUs"
    } else {
        "allowed"
    };
    let mut p = Placement {
        pool: pool.clone(),
        ..Placement::default()
    };
    let auto = matches!(o.message_cpus, Some(CpuSpec::Auto))
        || matches!(o.worker_cpus, Some(CpuSpec::Auto));
    if auto {
        // Message threads on the first m CPUs (wrapping when there are fewer), workers on
        // the others (all of them when none is left).
        let m = o.message_threads.min(pool.len());
        p.message = pool[..m].to_vec();
        p.workers = if m < pool.len() {
            pool[m..].to_vec()
        } else {
            pool.clone()
        };
    }
    if let Some(CpuSpec::List(list)) = &o.message_cpus {
        check("-M", list, &pool, &pool_text, what)?;
        p.message = list.clone();
    }
    if let Some(CpuSpec::List(list)) = &o.worker_cpus {
        check("-W", list, &pool, &pool_text, what)?;
        p.workers = list.clone();
    }
    Ok(p)
}

fn check(
    opt: &str,
    list: &[usize],
    pool: &[usize],
    pool_text: &str,
    what: &str,
) -> Result<(), String> {
    match list.iter().find(|c| !pool.contains(c)) {
        Some(c) => Err(format!(
            "schbench: CPU {c} in {opt} {} is not {what}; the CPUs that are: {pool_text}",
            format(list)
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(args: &str) -> Opts {
        let v: Vec<std::ffi::OsString> = std::iter::once("schbench")
            .chain(args.split_whitespace())
            .map(Into::into)
            .collect();
        crate::opts::parse(&v).unwrap()
    }

    #[test]
    fn lists_are_checked_against_the_pool() {
        let all = [0, 1, 2, 3];
        let e = place(&opts("-M 5"), &all).unwrap_err();
        assert!(
            e.contains("CPU 5 in -M 5 is not one of lagom's worker CPUs"),
            "{e}"
        );
        assert!(e.ends_with("0-3"), "{e}");
        let e = place(&opts("--cpus 0,1 -W 2"), &all).unwrap_err();
        assert!(e.contains("CPU 2 in -W 2") && e.ends_with("0-1"), "{e}");
        let e = place(&opts("--cpus 0-7"), &all).unwrap_err();
        assert!(e.contains("CPU 4 in --cpus 0-7 is not allowed"), "{e}");
        let p = place(&opts("-M 1 -W 2-3"), &all).unwrap();
        assert_eq!((p.message, p.workers), (vec![1], vec![2, 3]));
    }

    #[test]
    fn auto_puts_workers_on_the_other_cpus() {
        let p = place(&opts("-m 2 -M auto"), &[0, 1, 2, 3]).unwrap();
        assert_eq!((p.message, p.workers), (vec![0, 1], vec![2, 3]));
        // More message threads than CPUs: they wrap, workers get every CPU.
        let p = place(&opts("-m 3 -W auto"), &[0, 1]).unwrap();
        assert_eq!((p.message, p.workers), (vec![0, 1], vec![0, 1]));
    }
}
