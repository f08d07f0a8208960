//! `Completion`: how a task reaches its join packet, kept in the task's own allocation when
//! it fits (one allocation fewer per spawn).
//!
//! A task owns its packet (`join.rs`): the packet lives exactly as long as the task, and the
//! join handle and the task's closure reach it through plain pointers that the task keeps
//! valid. So the packet need not be an allocation of its own: when a `Packet<T>` fits in
//! [`PacketStore`] (at most [`INLINE_PACKET`] bytes, alignment at most 16) the spawner writes
//! it into that field of the task, right after writing the task into its `Arc` allocation
//! ([`Completion::inline`], [`write_inline`]); otherwise it is an `Arc` of its own, as
//! before (`Completion::from`).
//!
//! Either way a `Completion` is a type-erased pointer to the packet plus the function that
//! drops it: `Arc::from_raw` for a shared packet, `drop_in_place` for an inline one. The
//! inline pointer points into the task itself, which is sound because a task is never moved
//! once it is in its `Arc` (nothing takes it out: no `Arc::try_unwrap` on a `TaskRef`) and the
//! `Completion` is dropped with the task, while the store it points at is still there (a
//! `MaybeUninit` with no drop of its own).

use alloc::sync::Arc;
use core::mem::MaybeUninit;
use core::ops::Deref;
use core::ptr::NonNull;

use super::packet::{Complete, Packet};

/// Bytes a task reserves for an inline packet: enough for `Packet<T>` with a `T` of up to
/// about four words (a `Packet<u64>` takes about 100 bytes).
pub(crate) const INLINE_PACKET: usize = 128;

/// The task's storage for an inline packet (module doc).
#[repr(C, align(16))]
pub(crate) struct PacketStore(MaybeUninit<[u8; INLINE_PACKET]>);

impl PacketStore {
    /// Empty storage.
    pub(crate) const fn new() -> Self {
        PacketStore(MaybeUninit::uninit())
    }

    /// Whether a `Packet<T, W>` fits in the store.
    pub(crate) const fn fits<T, W>() -> bool {
        size_of::<Packet<T, W>>() <= INLINE_PACKET && align_of::<Packet<T, W>>() <= 16
    }
}

/// The task's packet, type-erased but for its waiter `W` (module doc).
pub(crate) struct Completion<W: 'static> {
    packet: NonNull<dyn Complete<W>>,
    /// Drops the packet: releases the `Arc` or drops the inline packet in place.
    drop: unsafe fn(NonNull<dyn Complete<W>>),
}

// SAFETY: the packet is `Complete`, so Send and Sync; the pointer is owned as the `Arc` or
// the inline value it stands for.
unsafe impl<W> Send for Completion<W> {}
// SAFETY: as for Send.
unsafe impl<W> Sync for Completion<W> {}

/// `Completion::drop` for a shared packet.
///
/// # Safety
/// `p` came from `Arc::into_raw`, and is released once.
unsafe fn release_arc<W>(p: NonNull<dyn Complete<W>>) {
    // SAFETY: per contract.
    drop(unsafe { Arc::from_raw(p.as_ptr().cast_const()) });
}

/// `Completion::drop` for an inline packet.
///
/// # Safety
/// `p` is a packet written into a store by `Completion::inline`, dropped once, not used after.
unsafe fn drop_inline<W>(p: NonNull<dyn Complete<W>>) {
    // SAFETY: per contract.
    unsafe { core::ptr::drop_in_place(p.as_ptr()) }
}

impl<W> From<Arc<dyn Complete<W>>> for Completion<W> {
    fn from(packet: Arc<dyn Complete<W>>) -> Self {
        Completion {
            // SAFETY: `Arc::into_raw` is never null.
            packet: unsafe { NonNull::new_unchecked(Arc::into_raw(packet).cast_mut()) },
            drop: release_arc::<W>,
        }
    }
}

impl<W: Send + 'static> Completion<W> {
    /// The completion of a packet to be kept in `store`, and the packet's address (for the
    /// join handle and the task's closure). The packet is not written yet: the task that
    /// holds `store` is written first (which leaves the store uninitialised), then the packet,
    /// with [`write_inline`].
    ///
    /// # Safety
    /// `PacketStore::fits::<T, W>()`; `store` is the `packet_store` of a task in its `Arc`
    /// allocation whose `completion` is the returned value; [`write_inline`] is called on
    /// the returned pointer once that task is written, before the completion is used or
    /// dropped.
    pub(crate) unsafe fn inline<T: Send + 'static>(
        store: *mut PacketStore,
    ) -> (Completion<W>, NonNull<Packet<T, W>>) {
        debug_assert!(PacketStore::fits::<T, W>());
        // SAFETY: `store` points into the task's allocation, not null.
        let packet = unsafe { NonNull::new_unchecked(store.cast::<Packet<T, W>>()) };
        let completion = Completion {
            packet,
            drop: drop_inline::<W>,
        };
        (completion, packet)
    }
}

/// Writes a new packet where [`Completion::inline`] said it goes.
///
/// # Safety
/// `packet` came from `Completion::inline`, whose task is now written; called once.
pub(crate) unsafe fn write_inline<T: Send + 'static, W: Send + 'static>(
    packet: NonNull<Packet<T, W>>,
) {
    // SAFETY: per contract the store is free, and large and aligned enough (`fits`).
    unsafe { packet.as_ptr().write(Packet::new_value()) }
}

impl<W> Deref for Completion<W> {
    type Target = dyn Complete<W>;

    fn deref(&self) -> &(dyn Complete<W> + 'static) {
        // SAFETY: the packet lives as long as this completion (module doc).
        unsafe { self.packet.as_ref() }
    }
}

impl<W> Drop for Completion<W> {
    fn drop(&mut self) {
        // SAFETY: `drop` is the function made for how `packet` is held; called once, here.
        unsafe { (self.drop)(self.packet) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_results_fit_in_the_task_and_large_ones_do_not() {
        // What `tests/runtime_join_packet.rs` relies on to exercise both paths.
        // The waiter is an enum of two `Arc`s, as the runtime's is.
        type W = Result<alloc::sync::Arc<u8>, alloc::sync::Arc<u16>>;
        assert!(PacketStore::fits::<(), W>());
        assert!(PacketStore::fits::<u64, W>());
        assert!(PacketStore::fits::<
            (alloc::sync::Arc<AtomicUsizeLike>, u64),
            W,
        >());
        assert!(!PacketStore::fits::<[u64; 64], W>());
    }

    /// A stand-in with the size of a pointer.
    struct AtomicUsizeLike(#[allow(dead_code)] usize);
}
