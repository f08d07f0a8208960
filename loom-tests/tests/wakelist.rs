//! Model 3, **wakelist**: several pushers against the draining owner.
//!
//! The race: pushers publish entries on a worker's lock-free wakelist
//! (`lagom::model::locking::llist::LList::push`) while the owner takes them all
//! (`LList::take_all`). Checked, over every interleaving loom explores:
//! * every entry is taken exactly once, none lost, none twice;
//! * what a pusher wrote into its entry before pushing is visible to the owner that takes it
//!   (loom's cell tracking fails the model on any unordered access);
//! * the number of pushes that found the list empty (the ones that would kick the owner)
//!   equals the number of non-empty takes: each batch announces itself exactly once.
//!
//! Mutant: `--cfg lagom_mutant="llist_push_relaxed"` makes the publishing compare-exchange in
//! `LList::push` Relaxed instead of Release; loom then reports the owner reading a link and a
//! payload that no happens-before edge orders after the pusher's writes.
#![cfg(loom)]

use std::ptr::NonNull;

use lagom::model::locking::cell::UnsafeCell;
use lagom::model::locking::llist::{LList, LListNode};
use loom::sync::Arc;
use loom::thread;
use loom_tests::SendPtr;

struct Entry {
    link: LListNode,
    value: UnsafeCell<u32>,
}

lagom::impl_linked!(Entry, link);

fn new_entry() -> SendPtr<Entry> {
    SendPtr(NonNull::from(Box::leak(Box::new(Entry {
        link: LListNode::new(),
        value: UnsafeCell::new(0),
    }))))
}

/// Takes everything on `list`, marking each entry's value in `seen`; returns whether the
/// take was non-empty.
fn drain(list: &LList<Entry>, seen: &mut Vec<u32>) -> bool {
    let mut any = false;
    for e in list.take_all() {
        // SAFETY: the take handed the entry to this thread; its pusher published it.
        let value = unsafe { e.as_ref().value.with(|v| *v) };
        seen.push(value);
        any = true;
    }
    any
}

#[test]
fn wakelist_two_pushers_vs_owner() {
    loom::model(|| {
        let list = Arc::new(LList::<Entry>::new());
        let entries: Vec<SendPtr<Entry>> = (0..3).map(|_| new_entry()).collect();
        // Pusher A pushes entries 1 and 2, pusher B entry 3.
        let spawn = |mine: Vec<(SendPtr<Entry>, u32)>| {
            let list = Arc::clone(&list);
            thread::spawn(move || {
                let mut empties = 0;
                for (e, value) in mine {
                    // SAFETY: the entry is live and on no list; only this thread touches it
                    // until the push publishes it.
                    unsafe { e.0.as_ref().value.with_mut(|v| *v = value) };
                    // SAFETY: as above.
                    if unsafe { list.push(e.0) } {
                        empties += 1;
                    }
                }
                empties
            })
        };
        let a = spawn(vec![(entries[0], 1), (entries[1], 2)]);
        let b = spawn(vec![(entries[2], 3)]);

        let mut seen = Vec::new();
        let mut batches = 0;
        // The owner drains while the pushers run, then once more after they finish.
        if drain(&list, &mut seen) {
            batches += 1;
        }
        let empties = a.join().unwrap() + b.join().unwrap();
        if drain(&list, &mut seen) {
            batches += 1;
        }

        seen.sort_unstable();
        assert_eq!(seen, [1, 2, 3], "every entry taken exactly once");
        assert_eq!(empties, batches, "one 'was empty' push per batch taken");
        for e in entries {
            // SAFETY: every entry was taken and is on no list.
            drop(unsafe { Box::from_raw(e.0.as_ptr()) });
        }
    });
}
