//! The wakelist: an intrusive, lock-free list with two operations, *push one* and *take all*.
//!
//! This is the userspace counterpart of the kernel's `llist` as the wakeup path uses it
//! (`__smp_call_single_queue` pushes, `sched_ttwu_pending` takes all): any thread may push an
//! entry onto a worker's list; only the owning worker takes, and it takes everything at once.
//!
//! ## Protocol
//!
//! Invariant: *every pushed entry is handed out by exactly one `take_all`, with everything its
//! pusher wrote before the push visible to the taker.*
//!
//! * The list is one atomic word, `head`, pointing at the most recently pushed node; each node
//!   links to the one pushed before it.
//! * **push** writes the node's `next` to the head it observed and publishes the node with a
//!   compare-exchange on `head` with **Release** ordering: the `next` link and every write the
//!   pusher made to the entry before pushing happen-before any thread that acquires the head.
//!   A failed exchange rewrites `next` and retries. Push returns whether the list was empty,
//!   so exactly one pusher per batch learns that the owner may need a kick.
//! * **take_all** swaps `head` with null with **Acquire** ordering, which synchronises with
//!   the Release of every push in the chain it took (the exchanges form one release sequence
//!   on `head`), then walks the chain. The owner now owns every node in it; it reverses the
//!   chain so entries come out in push order (FIFO), as the kernel does before running them.
//! * There is no pop of a single entry, so there is no ABA problem: a node can only be pushed
//!   again after the owner took it, and the owner reads `next` before handing the entry out.
//!
//! Checked by the loom model `wakelist` in `loom-tests/`, whose mutant
//! `llist_push_relaxed` weakens the publishing exchange to Relaxed.

use core::marker::PhantomData;
use core::ptr::{self, NonNull};

use super::atomic::{AtomicPtr, Ordering};
use super::cell::UnsafeCell;

/// Ordering of the exchange that publishes a pushed node (see the module doc).
#[cfg(not(lagom_mutant = "llist_push_relaxed"))]
const PUBLISH: Ordering = Ordering::Release;
/// Mutant: the publishing exchange without Release; the taker may read a stale link.
#[cfg(lagom_mutant = "llist_push_relaxed")]
const PUBLISH: Ordering = Ordering::Relaxed;

/// The link embedded in every entry that can sit on an [`LList`].
#[derive(Debug)]
pub struct LListNode {
    next: UnsafeCell<*mut LListNode>,
}

// SAFETY: the link is only written by the one thread that owns the entry (a pusher before
// publishing it, or the taker after taking it) and read by the taker after an Acquire that
// synchronises with the publishing Release; the module doc states the protocol.
unsafe impl Send for LListNode {}
// SAFETY: as for `Send`: shared access to the link follows the push/take protocol.
unsafe impl Sync for LListNode {}

impl LListNode {
    /// A link that is on no list.
    pub fn new() -> Self {
        LListNode {
            next: UnsafeCell::new(ptr::null_mut()),
        }
    }
}

impl Default for LListNode {
    fn default() -> Self {
        Self::new()
    }
}

/// An entry type that embeds an [`LListNode`].
///
/// # Safety
///
/// `node` must return a pointer to an `LListNode` that lives inside `*this` for as long as
/// `*this` lives, the same one on every call, and `from_node` must be its exact inverse.
pub unsafe trait Linked {
    /// The link inside the entry at `this`.
    fn node(this: NonNull<Self>) -> NonNull<LListNode>;

    /// The entry that holds `node`.
    ///
    /// # Safety
    ///
    /// `node` must have been returned by [`Linked::node`] for an entry that is still alive.
    unsafe fn from_node(node: NonNull<LListNode>) -> NonNull<Self>;
}

/// Implements [`Linked`] for a struct whose field `$field` is its [`LListNode`].
///
/// Exported (hidden) only for the loom models, which reach this module through
/// `lagom::model::locking`; the unit tests below use it as this example does:
///
/// ```text
/// use lagom::model::locking::llist::{LList, LListNode};
///
/// struct Wakeup {
///     link: LListNode,
///     id: u32,
/// }
/// lagom::impl_linked!(Wakeup, link);
///
/// let list = LList::<Wakeup>::new();
/// let entry = Box::leak(Box::new(Wakeup { link: LListNode::new(), id: 7 }));
/// // SAFETY: the entry is live (leaked) and on no list.
/// unsafe { list.push(entry.into()) };
/// // SAFETY: the taken entry is still live (leaked).
/// let taken: Vec<u32> = list.take_all().map(|e| unsafe { e.as_ref().id }).collect();
/// assert_eq!(taken, [7]);
/// ```
#[macro_export]
#[doc(hidden)]
macro_rules! impl_linked {
    ($ty:ty, $field:ident) => {
        // SAFETY: `node` returns the address of the `$field` field, which lives as long as the
        // entry; `from_node` subtracts that field's offset, so it is the exact inverse.
        unsafe impl $crate::locking::llist::Linked for $ty {
            fn node(
                this: ::core::ptr::NonNull<Self>,
            ) -> ::core::ptr::NonNull<$crate::locking::llist::LListNode> {
                // SAFETY: `this` points to a live entry, so its field pointer is in bounds and
                // not null.
                unsafe { ::core::ptr::NonNull::new_unchecked(&raw mut (*this.as_ptr()).$field) }
            }
            unsafe fn from_node(
                node: ::core::ptr::NonNull<$crate::locking::llist::LListNode>,
            ) -> ::core::ptr::NonNull<Self> {
                let offset = ::core::mem::offset_of!($ty, $field);
                // SAFETY: the caller passes a node obtained from `node` of a live entry, which
                // lies `offset` bytes into it.
                unsafe {
                    ::core::ptr::NonNull::new_unchecked(
                        node.as_ptr().byte_sub(offset).cast::<$ty>(),
                    )
                }
            }
        }
    };
}

/// An intrusive multi-producer, single-consumer list: push one, take all.
pub struct LList<T: Linked> {
    head: AtomicPtr<LListNode>,
    _entries: PhantomData<*const T>,
}

// SAFETY: the list only moves pointers to entries between threads; entries must be `Send`
// because the taker may be another thread than the pusher.
unsafe impl<T: Linked + Send> Send for LList<T> {}
// SAFETY: concurrent `push` and `take_all` follow the protocol of the module doc.
unsafe impl<T: Linked + Send> Sync for LList<T> {}

impl<T: Linked> core::fmt::Debug for LList<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("LList")
            .field("empty", &self.is_empty())
            .finish()
    }
}

impl<T: Linked> Default for LList<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Linked> LList<T> {
    /// An empty list.
    pub fn new() -> Self {
        LList {
            head: AtomicPtr::new(ptr::null_mut()),
            _entries: PhantomData,
        }
    }

    /// Pushes `entry`; returns `true` if the list was empty, i.e. this push starts a new
    /// batch and the owner may need to be kicked.
    ///
    /// # Safety
    ///
    /// `entry` must point to a live entry that is on no list, and must stay alive and
    /// untouched by others until a [`take_all`](Self::take_all) hands it out.
    pub unsafe fn push(&self, entry: NonNull<T>) -> bool {
        let node = T::node(entry).as_ptr();
        let mut head = self.head.load(Ordering::Relaxed);
        loop {
            // SAFETY: the entry is on no list (the caller's contract), so this thread is the
            // only one that touches its link until the exchange below publishes it.
            unsafe { (*node).next.with_mut(|next| *next = head) };
            match self
                .head
                .compare_exchange_weak(head, node, PUBLISH, Ordering::Relaxed)
            {
                Ok(_) => return head.is_null(),
                Err(observed) => head = observed,
            }
        }
    }

    /// Takes every entry pushed so far, in push order.
    pub fn take_all(&self) -> Drain<T> {
        let mut node = self.head.swap(ptr::null_mut(), Ordering::Acquire);
        // Reverse the chain (newest first) into push order.
        let mut reversed: *mut LListNode = ptr::null_mut();
        while !node.is_null() {
            // SAFETY: the Acquire swap took ownership of the whole chain; every link in it was
            // published by a Release exchange that happens-before this read.
            let next = unsafe { (*node).next.with(|next| *next) };
            // SAFETY: the taker owns the node now; nobody else reads or writes its link.
            unsafe { (*node).next.with_mut(|link| *link = reversed) };
            reversed = node;
            node = next;
        }
        Drain {
            next: reversed,
            _entries: PhantomData,
        }
    }

    /// Whether the list holds no entry at this instant (a hint: a push may land right after).
    pub fn is_empty(&self) -> bool {
        self.head.load(Ordering::Acquire).is_null()
    }
}

/// The entries taken by [`LList::take_all`], in push order.
///
/// Each entry handed out belongs to the caller again, free to be pushed anew. Entries of a
/// dropped `Drain` are not lost to memory (the list never owned them) but are no longer
/// listed anywhere: drain it fully.
#[must_use = "entries of a dropped Drain are no longer on any list"]
pub struct Drain<T: Linked> {
    next: *mut LListNode,
    _entries: PhantomData<*const T>,
}

impl<T: Linked> Iterator for Drain<T> {
    type Item = NonNull<T>;

    fn next(&mut self) -> Option<NonNull<T>> {
        let node = NonNull::new(self.next)?;
        // SAFETY: `take_all` gave this chain to the caller; its links were rewritten by this
        // thread, and the link is read before the entry is handed out (and maybe re-pushed).
        self.next = unsafe { node.as_ref().next.with(|next| *next) };
        // SAFETY: every node on the list came from `Linked::node` of a live entry (push's
        // contract).
        Some(unsafe { T::from_node(node) })
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use alloc::boxed::Box;
    use alloc::vec::Vec;

    struct Entry {
        link: LListNode,
        value: u32,
    }

    crate::impl_linked!(Entry, link);

    #[test]
    fn take_all_returns_push_order_and_empties() {
        let list = LList::<Entry>::new();
        let entries: Vec<NonNull<Entry>> = (0..5)
            .map(|value| {
                NonNull::from(Box::leak(Box::new(Entry {
                    link: LListNode::new(),
                    value,
                })))
            })
            .collect();
        for (i, e) in entries.iter().enumerate() {
            // SAFETY: each entry is live (leaked) and on no list.
            let was_empty = unsafe { list.push(*e) };
            assert_eq!(
                was_empty,
                i == 0,
                "only the first push finds the list empty"
            );
        }
        assert!(!list.is_empty());
        // SAFETY: the entries are live until freed below.
        let got: Vec<u32> = list
            .take_all()
            .map(|e| unsafe { e.as_ref().value })
            .collect();
        assert_eq!(got, [0, 1, 2, 3, 4]);
        assert!(list.is_empty());
        assert_eq!(list.take_all().count(), 0);
        // Entries can be pushed again after being taken.
        // SAFETY: entry 3 was handed back by the drain above and is on no list.
        assert!(unsafe { list.push(entries[3]) });
        let again: Vec<NonNull<Entry>> = list.take_all().collect();
        assert_eq!(again, [entries[3]]);
        for e in entries {
            // SAFETY: each entry came from Box::leak and is on no list any more.
            drop(unsafe { Box::from_raw(e.as_ptr()) });
        }
    }

    #[test]
    fn concurrent_pushers_lose_nothing() {
        use std::sync::Arc;
        const THREADS: u32 = 2;
        const PER_THREAD: u32 = 20_000;
        struct Shared(LList<Entry>);
        let list = Arc::new(Shared(LList::new()));
        let pushers: Vec<_> = (0..THREADS)
            .map(|t| {
                let list = Arc::clone(&list);
                std::thread::spawn(move || {
                    for i in 0..PER_THREAD {
                        let e = Box::leak(Box::new(Entry {
                            link: LListNode::new(),
                            value: t * PER_THREAD + i,
                        }));
                        // SAFETY: a fresh leaked entry, on no list; the taker frees it.
                        unsafe { list.0.push(NonNull::from(e)) };
                    }
                })
            })
            .collect();
        let mut seen = alloc::vec![false; (THREADS * PER_THREAD) as usize];
        let mut taken = 0;
        let mut drain = |seen: &mut Vec<bool>| {
            for e in list.0.take_all() {
                // SAFETY: the entry was leaked by a pusher and is owned by us now.
                let e = unsafe { Box::from_raw(e.as_ptr()) };
                assert!(!seen[e.value as usize], "entry {} taken twice", e.value);
                seen[e.value as usize] = true;
                taken += 1;
            }
        };
        while pushers.iter().any(|p| !p.is_finished()) {
            drain(&mut seen);
        }
        for p in pushers {
            p.join().unwrap();
        }
        drain(&mut seen);
        assert_eq!(taken, THREADS * PER_THREAD);
    }
}
