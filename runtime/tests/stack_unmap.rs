//! `DefaultStack::unmap_all` unmaps exactly the stacks it is given, each run of neighbours in
//! one call. A file with one test and no runtime: no other thread of the process maps memory,
//! so a range just unmapped stays a hole while it is checked (in the crate's unit tests other
//! threads' mappings may land there at once).

use lagom::arch::{DefaultStack, MIN_STACK_SIZE, Stack};

/// Whether every page of `[start, start + len)` is mapped (`mincore` fails with ENOMEM where
/// one is not).
fn mapped(start: usize, len: usize) -> bool {
    let page = 4096;
    let mut vec = vec![0u8; len.div_ceil(page)];
    // SAFETY: `mincore` writes one byte per page of the range to `vec`, which has room, and
    // reads none of the range.
    unsafe { libc::mincore(start as *mut libc::c_void, len, vec.as_mut_ptr()) == 0 }
}

/// The usable part of a stack, `[limit, base)` (the guard is left out: qemu-user reports
/// its `PROT_NONE` page as unmapped).
fn usable(s: &DefaultStack) -> (usize, usize) {
    let limit = s.limit().as_ptr() as usize;
    (limit, s.base().as_ptr() as usize - limit)
}

#[test]
fn unmap_all_unmaps_the_stacks_given_and_no_others() {
    let mut batch = DefaultStack::batch(MIN_STACK_SIZE, 8).unwrap();
    let areas: Vec<_> = batch.iter().map(usable).collect();
    assert!(areas.iter().all(|&(a, l)| mapped(a, l)));
    // Out of order, with a gap: areas 0..3 and 4..8 are two runs.
    let kept = batch.remove(3);
    batch.reverse();
    assert_eq!(DefaultStack::unmap_all(batch), 2);
    for (i, &(a, l)) in areas.iter().enumerate() {
        assert_eq!(
            mapped(a, l),
            i == 3,
            "area {i} after unmapping all but area 3"
        );
    }
    assert_eq!(DefaultStack::unmap_all(vec![kept]), 1);
    assert!(!mapped(areas[3].0, areas[3].1), "area 3 after unmapping it");
}
