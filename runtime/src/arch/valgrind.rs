//! Telling valgrind about task stacks (feature `valgrind`; without it every function here is
//! an empty inline function).
//!
//! Valgrind's memcheck follows the stack pointer to know which bytes of a stack are in use:
//! a move of the stack pointer down makes the bytes it uncovers addressable but undefined, a
//! move up makes the bytes it leaves behind unaddressable. A context switch moves the stack
//! pointer to another stack entirely, which memcheck can only tell from a large frame when it
//! knows where the stacks are. Task stacks lie next to each other in batches
//! (`DefaultStack::batch`), so without that knowledge a switch between two of them looks like
//! a frame of a few hundred KiB pushed or popped, and memcheck reports hundreds of invalid
//! reads and writes and uses of undefined values that are not there. The runtime therefore
//! registers each stack while a fiber runs on it ([`StackId`]), and marks the memory of a
//! stack given back for reuse unaddressable until it is handed out again, so that a pointer
//! that outlived its task's stack is reported where it is used.
//!
//! ## The client requests
//!
//! A program speaks to valgrind through *client requests*: a fixed sequence of instructions
//! that does nothing on a real CPU (four rotations of one register by amounts that add up to
//! a multiple of its width, then an exchange of a register with itself) and that valgrind's
//! instruction decoder recognises. The register that is exchanged names the operation — a
//! client request for the exchange of `rbx` on x86_64 and the `orr` of `x10` with itself on
//! aarch64 — and two more registers carry its operands: on x86_64, `rax` points at six
//! machine words (the request's code, then up to five arguments) and `rdx` holds the value to
//! return when no valgrind is there, which valgrind replaces with the request's result; on
//! aarch64 `x4` and `x3` play those parts. This is the protocol that valgrind's public header
//! `valgrind.h` (BSD-licensed) documents and implements as C macros; this module is written
//! from that description, for the requests it needs:
//!
//! | request | code | arguments | result |
//! |---|---|---|---|
//! | stack register | `0x1501` | lowest and highest addressable byte | the stack's id |
//! | stack deregister | `0x1502` | the id | — |
//! | memcheck: make no-access | `0x4D43_0000` (`'M' 'C'` << 16) | address, length | — |
//! | memcheck: make undefined | `0x4D43_0001` | address, length | — |
//! | running on valgrind | `0x1001` | — | its nesting depth (0 outside valgrind) |
//!
//! Requests that a tool does not know (memcheck's under another tool) are ignored. Outside
//! valgrind the sequence costs a few cycles; with the feature off it is not even emitted,
//! although the code is compiled either way (`cfg!`, not `#[cfg]`), so that clippy and the
//! no_std build check it. The `crabgrind` crate offers the same requests, but it would be a
//! dependency of the runtime (the requests must be made where the runtime maps and recycles
//! its stacks), and the runtime keeps to its short list of dependencies.

/// Stack register (`VG_USERREQ__STACK_REGISTER` in valgrind's header).
const STACK_REGISTER: usize = 0x1501;
/// Stack deregister.
const STACK_DEREGISTER: usize = 0x1502;
/// Whether the program runs under valgrind.
const RUNNING_ON_VALGRIND: usize = 0x1001;
/// The first of memcheck's own requests: the tool's two letters in the top 16 bits.
const MEMCHECK_BASE: usize = ((b'M' as usize) << 24) | ((b'C' as usize) << 16);
/// Memcheck: the range may not be read or written.
const MAKE_MEM_NOACCESS: usize = MEMCHECK_BASE;
/// Memcheck: the range may be written; reading it before a write is a use of undefined bytes.
const MAKE_MEM_UNDEFINED: usize = MEMCHECK_BASE + 1;

/// Makes client request `args[0]` with arguments `args[1..]`; returns valgrind's answer, or
/// `default` outside valgrind (the instructions then change nothing).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn client_request(default: usize, args: &[usize; 6]) -> usize {
    let result;
    // SAFETY: on a real CPU the four rotations of `rdi` add up to 128 bits (it ends as it
    // began) and `xchg rbx, rbx` changes nothing; only the flags change, which the asm does
    // not promise to keep. Under valgrind the sequence reads the six words at `rax` (a live
    // array borrowed for the call) and writes the result to `rdx`.
    unsafe {
        core::arch::asm!(
            "rol rdi, 3",
            "rol rdi, 13",
            "rol rdi, 61",
            "rol rdi, 51",
            "xchg rbx, rbx",
            in("rax") args.as_ptr(),
            inout("rdx") default => result,
            options(nostack),
        );
    }
    result
}

/// [`client_request`] on aarch64: `x4` points at the words, `x3` carries the result.
#[cfg(target_arch = "aarch64")]
#[inline(always)]
fn client_request(default: usize, args: &[usize; 6]) -> usize {
    let result;
    // SAFETY: on a real CPU the four rotations of `x12` add up to 128 bits and
    // `orr x10, x10, x10` changes nothing. Under valgrind the sequence reads the six words at
    // `x4` (a live array borrowed for the call) and writes the result to `x3`.
    unsafe {
        core::arch::asm!(
            "ror x12, x12, #3",
            "ror x12, x12, #13",
            "ror x12, x12, #51",
            "ror x12, x12, #61",
            "orr x10, x10, x10",
            in("x4") args.as_ptr(),
            inout("x3") default => result,
            options(nostack),
        );
    }
    result
}

/// [`client_request`] where valgrind has no sequence we know: nothing to tell.
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
#[inline(always)]
fn client_request(default: usize, _args: &[usize; 6]) -> usize {
    default
}

/// Makes request `code` if the feature is on; else returns `default` at once.
#[inline(always)]
fn request(default: usize, code: usize, a1: usize, a2: usize) -> usize {
    if cfg!(feature = "valgrind") {
        client_request(default, &[code, a1, a2, 0, 0, 0])
    } else {
        default
    }
}

/// Whether the program runs under valgrind (always `false` without the feature).
pub fn running_on_valgrind() -> bool {
    request(0, RUNNING_ON_VALGRIND, 0, 0) != 0
}

/// A stack registered with valgrind for as long as a fiber runs on it: the id valgrind gave
/// it (0, and nothing registered, without the feature or outside valgrind). Deregistered by
/// [`StackId::deregister`], which the fiber calls when it gives its stack up.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StackId(usize);

impl StackId {
    /// Registers the stack `[limit, base)` (`limit < base`), whose bytes a new fiber is about
    /// to write: they are made addressable and undefined first (a recycled stack holds the
    /// bytes of its last task, and bytes that stack pointer moves had made unaddressable).
    #[inline(always)]
    pub(crate) fn register(limit: usize, base: usize) -> StackId {
        make_undefined(limit, base - limit);
        StackId(request(0, STACK_REGISTER, limit, base - 1))
    }

    /// Tells valgrind that no stack pointer will point into the stack any more.
    #[inline(always)]
    pub(crate) fn deregister(self) {
        if self.0 != 0 {
            request(0, STACK_DEREGISTER, self.0, 0);
        }
    }
}

/// Memcheck: `[addr, addr + len)` may not be read or written until it is made addressable
/// again (a stack given back to its pool, [`make_undefined`] when it is handed out).
#[inline(always)]
pub(crate) fn make_noaccess(addr: usize, len: usize) {
    request(0, MAKE_MEM_NOACCESS, addr, len);
}

/// Memcheck: `[addr, addr + len)` may be written, and reading it before is reported.
#[inline(always)]
pub(crate) fn make_undefined(addr: usize, len: usize) {
    request(0, MAKE_MEM_UNDEFINED, addr, len);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Outside valgrind every request answers its default and changes nothing (a test run
    /// under memcheck takes the other branch: the registration then has an id).
    #[test]
    fn the_requests_are_harmless_on_a_real_cpu() {
        let mut buf = [7u8; 64];
        let (lo, hi) = (buf.as_ptr() as usize, buf.as_ptr() as usize + buf.len());
        let under = running_on_valgrind();
        let id = StackId::register(lo, hi);
        assert_eq!(id.0 != 0, under && cfg!(feature = "valgrind"));
        id.deregister();
        make_noaccess(lo, 0);
        // Undefined under memcheck now: written before it is read.
        buf.fill(1);
        assert_eq!(
            core::hint::black_box(buf)
                .iter()
                .map(|&b| usize::from(b))
                .sum::<usize>(),
            64
        );
        // The sequence itself, with the feature off too: the default comes back.
        if !under {
            assert_eq!(
                client_request(42, &[RUNNING_ON_VALGRIND, 0, 0, 0, 0, 0]),
                42
            );
        }
    }
}
