//! The graph's structure and its online topological order (Pearce and Kelly, "A dynamic
//! topological sort algorithm for directed acyclic graphs", 2006): every edge added is checked
//! for a cycle when it is added, at a cost that depends on the part of the order it disturbs,
//! not on the size of the graph.
//!
//! Invariant: *for every edge `x → y`, `ord[x] < ord[y]`; `ord` is a permutation of the node
//! indices.*
//!
//! An edge `x → y` with `ord[x] < ord[y]` keeps the invariant as it is: the common case of a
//! graph built dependencies first, which then costs O(1) (and the duplicate check, a scan of
//! the shorter of `x`'s successors and `y`'s predecessors). Otherwise the affected region is `[ord[y], ord[x]]`: a forward search from `y`
//! over nodes ordered below `ord[x]` either reaches `x` — the edge closes a cycle, which is
//! reported as the path found, and nothing changes — or finds the set `F`; a backward search
//! from `x` over nodes ordered above `ord[y]` finds `B`; the positions that `B` and `F` held,
//! sorted, are given to `B` then `F`, each in its old relative order, which restores the
//! invariant with the new edge.

use alloc::vec;
use alloc::vec::Vec;

/// Nodes, edges both ways, and a topological order kept up to date (module doc).
#[derive(Debug, Default)]
pub(crate) struct Order {
    /// Each node's position in the order.
    ord: Vec<usize>,
    /// Each node's successors, in the order their edges were added.
    pub(crate) succs: Vec<Vec<usize>>,
    /// Each node's predecessors, in the order their edges were added.
    pub(crate) preds: Vec<Vec<usize>>,
    /// Scratch: the search a node was last reached by (two per slow edge).
    mark: Vec<u64>,
    /// The current search's stamp.
    stamp: u64,
    /// Scratch: the node a forward search reached each node from.
    parent: Vec<usize>,
}

impl Order {
    /// Adds a node (last in the order); returns its index.
    pub(crate) fn add_node(&mut self) -> usize {
        let i = self.ord.len();
        self.ord.push(i);
        self.succs.push(Vec::new());
        self.preds.push(Vec::new());
        self.mark.push(0);
        self.parent.push(usize::MAX);
        i
    }

    /// The number of nodes.
    pub(crate) fn len(&self) -> usize {
        self.ord.len()
    }

    /// Adds the edge `x → y` (`x` before `y`): `Ok(true)` if added, `Ok(false)` if it was
    /// there already, `Err(path)` if it would close a cycle, `path` being `x, y, …, x`.
    pub(crate) fn add_edge(&mut self, x: usize, y: usize) -> Result<bool, Vec<usize>> {
        if x == y {
            return Err(vec![x, x]);
        }
        // The shorter of the two lists answers: a fan-out's source or a fan-in's sink has a
        // long one, its other end a short one.
        let there = match self.succs[x].len() <= self.preds[y].len() {
            true => self.succs[x].contains(&y),
            false => self.preds[y].contains(&x),
        };
        if there {
            return Ok(false);
        }
        let (lb, ub) = (self.ord[y], self.ord[x]);
        if lb < ub {
            let f = self.forward(y, x, ub)?;
            let b = self.backward(x, lb);
            self.reorder(b, f);
        }
        self.succs[x].push(y);
        self.preds[y].push(x);
        Ok(true)
    }

    /// The forward search from `y` over nodes ordered below `ub` (`x`'s position): the set
    /// reached, or the cycle `x, y, …, x` if it reaches `x`.
    fn forward(&mut self, y: usize, x: usize, ub: usize) -> Result<Vec<usize>, Vec<usize>> {
        self.stamp += 1;
        let stamp = self.stamp;
        self.mark[y] = stamp;
        self.parent[y] = usize::MAX;
        let (mut stack, mut seen) = (vec![y], Vec::new());
        while let Some(n) = stack.pop() {
            seen.push(n);
            for &w in &self.succs[n] {
                if w == x {
                    let mut path = vec![n];
                    let mut at = n;
                    while self.parent[at] != usize::MAX {
                        at = self.parent[at];
                        path.push(at);
                    }
                    path.push(x);
                    path.reverse();
                    path.push(x);
                    return Err(path);
                }
                if self.ord[w] < ub && self.mark[w] != stamp {
                    self.mark[w] = stamp;
                    self.parent[w] = n;
                    stack.push(w);
                }
            }
        }
        Ok(seen)
    }

    /// The backward search from `x` over nodes ordered above `lb` (`y`'s position).
    fn backward(&mut self, x: usize, lb: usize) -> Vec<usize> {
        self.stamp += 1;
        let stamp = self.stamp;
        self.mark[x] = stamp;
        let (mut stack, mut seen) = (vec![x], Vec::new());
        while let Some(n) = stack.pop() {
            seen.push(n);
            for &w in &self.preds[n] {
                if self.ord[w] > lb && self.mark[w] != stamp {
                    self.mark[w] = stamp;
                    stack.push(w);
                }
            }
        }
        seen
    }

    /// Gives the positions of `b` and `f` to `b` first, then `f` (module doc).
    fn reorder(&mut self, mut b: Vec<usize>, mut f: Vec<usize>) {
        b.sort_unstable_by_key(|&n| self.ord[n]);
        f.sort_unstable_by_key(|&n| self.ord[n]);
        let mut pool: Vec<usize> = b.iter().chain(&f).map(|&n| self.ord[n]).collect();
        pool.sort_unstable();
        for (&n, o) in b.iter().chain(&f).zip(pool) {
            self.ord[n] = o;
        }
    }

    /// Whether `ord` is a topological order of the edges (for tests).
    #[cfg(test)]
    fn is_consistent(&self) -> bool {
        let mut seen = vec![false; self.len()];
        self.ord
            .iter()
            .all(|&o| o < seen.len() && !core::mem::replace(&mut seen[o], true))
            && (0..self.len()).all(|x| self.succs[x].iter().all(|&y| self.ord[x] < self.ord[y]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_backward_edge_reorders_and_a_closing_edge_reports_its_cycle() {
        let mut o = Order::default();
        for _ in 0..5 {
            o.add_node();
        }
        // 3 → 1, 4 → 3, 1 → 0: each against the insertion order.
        assert_eq!(o.add_edge(3, 1), Ok(true));
        assert_eq!(o.add_edge(4, 3), Ok(true));
        assert_eq!(o.add_edge(1, 0), Ok(true));
        assert!(o.is_consistent());
        assert_eq!(o.add_edge(4, 3), Ok(false));
        // 0 → 4 closes 0 → 4 → 3 → 1 → 0.
        assert_eq!(o.add_edge(0, 4), Err(vec![0, 4, 3, 1, 0]));
        assert_eq!(o.add_edge(2, 2), Err(vec![2, 2]));
        assert!(o.is_consistent());
        assert_eq!(o.add_edge(0, 2), Ok(true));
        assert!(o.is_consistent());
    }

    #[test]
    fn random_edges_keep_the_order_consistent_and_find_every_cycle() {
        // A seeded generator (xorshift); a reachability matrix is the reference.
        let mut s = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |m: usize| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s % m as u64) as usize
        };
        for _ in 0..20 {
            let n = 2 + next(30);
            let mut o = Order::default();
            let mut reach = vec![vec![false; n]; n];
            for (i, row) in reach.iter_mut().enumerate() {
                o.add_node();
                row[i] = true;
            }
            for _ in 0..n * 3 {
                let (x, y) = (next(n), next(n));
                let closes = reach[y][x];
                match o.add_edge(x, y) {
                    Err(path) => {
                        assert!(closes, "false cycle {x} → {y}");
                        assert_eq!((path[0], path[1], *path.last().unwrap()), (x, y, x));
                        assert!(
                            path.windows(2)
                                .skip(1)
                                .all(|w| o.succs[w[0]].contains(&w[1]))
                        );
                    }
                    Ok(_) => {
                        assert!(!closes, "missed cycle {x} → {y}");
                        for a in 0..n {
                            for b in 0..n {
                                if reach[a][x] && reach[y][b] {
                                    reach[a][b] = true;
                                }
                            }
                        }
                    }
                }
                assert!(o.is_consistent());
            }
        }
    }
}
