//! The request's CPU work: naive u64 matrix multiplies over a footprint,
//! inside the per-CPU lock.
//!
//! The cells are `AtomicU64` used with Relaxed loads and stores (plain moves on x86_64):
//! `--split`'s shared matrix is written by every worker at once, unsynchronised on purpose
//! (the cache lines bounce), which Rust allows only through atomics; the private matrices
//! use the same code so that both cost the same per cell.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::sched::Sched;

/// The matrix size for a footprint of `kb` KiB: three `n × n` u64 matrices fit in it.
pub fn msize(kb: u64) -> usize {
    ((kb * 1024 / 3 / 8) as f64).sqrt() as usize
}

/// Three `n × n` matrices: `m3 = m1 × m2`.
pub struct Matrix {
    n: usize,
    cells: Box<[AtomicU64]>,
}

impl Matrix {
    /// Matrices of size `n`, filled (schbench leaves them uninitialised) so that every page
    /// is backed and the footprint is real.
    pub fn new(n: usize) -> Matrix {
        let cells = (0..3 * n * n)
            .map(|i| AtomicU64::new((i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1))
            .collect();
        Matrix { n, cells }
    }

    /// One naive i-j-k multiply (`n³` multiply-adds, wrapping), with a preemption point
    /// after each row of the result.
    pub fn multiply<S: Sched>(&self) {
        let n = self.n;
        if n == 0 {
            return;
        }
        let (m1, rest) = self.cells.split_at(n * n);
        let (m2, m3) = rest.split_at(n * n);
        for (row, out) in m1.chunks_exact(n).zip(m3.chunks_exact(n)) {
            for (j, cell) in out.iter().enumerate() {
                let col = m2[j..].iter().step_by(n);
                let acc = row.iter().zip(col).fold(0u64, |acc, (a, b)| {
                    let (a, b) = (a.load(Ordering::Relaxed), b.load(Ordering::Relaxed));
                    acc.wrapping_add(a.wrapping_mul(b))
                });
                cell.store(acc, Ordering::Relaxed);
            }
            S::tick();
        }
    }
}

/// One CPU's lock (schbench takes `trylock` in a loop).
#[repr(align(64))]
#[derive(Default)]
pub struct CpuLock(AtomicBool);

/// The per-CPU locks, indexed by the CPU a thread runs on.
pub struct CpuLocks(Box<[CpuLock]>);

/// A held [`CpuLock`]; unlocks on drop.
pub struct Held<'a>(&'a CpuLock);

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.0.0.store(false, Ordering::Release);
    }
}

impl CpuLocks {
    /// Locks for CPUs `0..cpus`.
    pub fn new(cpus: usize) -> CpuLocks {
        CpuLocks((0..cpus.max(1)).map(|_| CpuLock::default()).collect())
    }

    /// Takes the lock of the CPU the caller runs on, relaxing between attempts; if the caller
    /// moved to another CPU meanwhile, it lets go and starts over.
    pub fn lock<S: Sched>(&self) -> Held<'_> {
        loop {
            let cpu = S::cpu();
            let l = &self.0[cpu % self.0.len()];
            while l
                .0
                .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
            {
                S::relax();
            }
            let held = Held(l);
            if S::cpu() == cpu {
                return held;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_match_schbench() {
        assert_eq!(msize(256), 104);
        assert_eq!(msize(4096), 418);
        // --split 30 of 256 KB: 76 KB private, 179 KB shared.
        assert_eq!((msize(76), msize(179)), (56, 87));
        assert_eq!(msize(0), 0);
    }

    #[test]
    fn multiply_is_a_matrix_product() {
        let m = Matrix::new(3);
        m.multiply::<crate::os::Os>();
        let c: Vec<u64> = m.cells.iter().map(|c| c.load(Ordering::Relaxed)).collect();
        let (a, b, r) = (&c[0..9], &c[9..18], &c[18..27]);
        for i in 0..3 {
            for j in 0..3 {
                let want = (0..3).fold(0u64, |s, k| {
                    s.wrapping_add(a[i * 3 + k].wrapping_mul(b[k * 3 + j]))
                });
                assert_eq!(r[i * 3 + j], want);
            }
        }
    }

    #[test]
    fn lock_excludes_and_releases() {
        let locks = CpuLocks::new(1);
        let h = locks.lock::<crate::os::Os>();
        assert!(locks.0[0].0.load(Ordering::Relaxed));
        drop(h);
        assert!(!locks.0[0].0.load(Ordering::Relaxed));
        drop(locks.lock::<crate::os::Os>());
    }
}
