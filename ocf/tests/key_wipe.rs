//! Keys are wiped before their memory goes back to the allocator: an inspecting global
//! allocator copies out a watched block's bytes as it is freed, so the test sees exactly
//! what a later allocation of that memory would find.
//!
//! ```text
//!  watch(ptr, len) ── drop(key) ──► Key's ZeroizeOnDrop wipes ──► dealloc(ptr)
//!                                                                   │ ptr watched?
//!                                                                   ▼ copy len bytes out
//!  freed bytes ◄─────────────────────────────────────────────────── System.dealloc
//! ```
//!
//! A plain `Vec<u8>` dropped under the same watch comes back with the pattern still in it:
//! the control that shows the allocator really sees unwiped memory.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use ocf::{CipherAlg, DigestAlg, Key, MacAlg, Mode, SessionParams};

/// The most bytes a watch copies out.
const MAX: usize = 64;

/// Forwards to the system allocator; on freeing the block this thread watches, first copies
/// its first bytes out.
struct Inspecting;

thread_local! {
    /// The block this thread watches (address, bytes to copy), or (0, 0).
    static WATCH: Cell<(usize, usize)> = const { Cell::new((0, 0)) };
    /// What the watched block held when it was freed.
    static FREED: Cell<Option<[u8; MAX]>> = const { Cell::new(None) };
}

// SAFETY: every allocation and deallocation goes to the system allocator unchanged; the only
// addition reads a block that is still allocated (before it is handed back) and writes
// thread-locals with constant initialisers, which never allocate.
unsafe impl GlobalAlloc for Inspecting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract is passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if let Ok((at, len)) = WATCH.try_with(Cell::get) {
            if at != 0 && at == ptr as usize {
                let mut seen = [0u8; MAX];
                let n = len.min(layout.size()).min(MAX);
                // SAFETY: `ptr` is a live block of `layout.size()` bytes (the caller's
                // contract), `n` is within it, and the watched block's first `len` bytes
                // were written by the test (a key copied in).
                unsafe { std::ptr::copy_nonoverlapping(ptr, seen.as_mut_ptr(), n) };
                let _ = FREED.try_with(|f| f.set(Some(seen)));
            }
        }
        // SAFETY: the caller's contract is passed on.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Inspecting = Inspecting;

/// Runs `free` with the block at `ptr` watched, and returns its first `len` bytes as they
/// were when it was freed (`None`: `free` did not free it).
fn freed_bytes(ptr: *const u8, len: usize, free: impl FnOnce()) -> Option<Vec<u8>> {
    assert!(len <= MAX);
    FREED.set(None);
    WATCH.set((ptr as usize, len));
    free();
    WATCH.set((0, 0));
    FREED.take().map(|b| b[..len].to_vec())
}

/// A key no allocator leaves lying around by chance.
fn pattern() -> Vec<u8> {
    (0..32u8).map(|i| i.wrapping_mul(37) ^ 0xA5).collect()
}

/// The watch sees what a freed block held: a plain vector keeps its bytes.
#[test]
fn the_allocator_sees_an_unwiped_block() {
    let v = pattern();
    let ptr = v.as_ptr();
    assert_eq!(freed_bytes(ptr, 32, || drop(v)), Some(pattern()));
}

#[test]
fn a_dropped_key_is_wiped_before_its_memory_is_freed() {
    let k = Key::new(&pattern());
    let ptr = k.as_bytes().as_ptr();
    assert_eq!(freed_bytes(ptr, 32, || drop(k)), Some(vec![0; 32]), "the key's block was not wiped");
}

/// A clone is a copy of its own, wiped when it goes; the original is untouched.
#[test]
fn a_cloned_key_is_wiped_and_the_original_kept() {
    let k = Key::new(&pattern());
    let copy = k.clone();
    let ptr = copy.as_bytes().as_ptr();
    assert_ne!(ptr, k.as_bytes().as_ptr());
    assert_eq!(freed_bytes(ptr, 32, || drop(copy)), Some(vec![0; 32]));
    assert_eq!(k.as_bytes(), pattern());
}

/// Session parameters wipe every key they hold: a cipher's, a MAC's, an AEAD's, and both
/// of encrypt-then-MAC's.
#[test]
fn session_parameters_wipe_their_keys() {
    fn keys(p: &SessionParams) -> Vec<&Key> {
        match &p.mode {
            Mode::Cipher { key, .. } | Mode::Mac { key, .. } | Mode::Aead { key, .. } => vec![key],
            Mode::CipherThenMac { cipher_key, mac_key, .. } => vec![cipher_key, mac_key],
            other => panic!("no key in {other:?}"),
        }
    }
    let key = pattern();
    let make: [&dyn Fn() -> SessionParams; 4] = [
        &|| SessionParams::cipher(CipherAlg::AesCbc, &key[..16]),
        &|| SessionParams::hmac(DigestAlg::Sha256, &key[..]),
        &|| SessionParams::aead(CipherAlg::AesGcm, &key[..]),
        &|| {
            SessionParams::cipher_then_mac(
                CipherAlg::AesCbc,
                &key[..16],
                MacAlg::Hmac(DigestAlg::Sha1),
                &key[..20],
            )
        },
    ];
    let mut watched = 0;
    for (i, make) in make.iter().enumerate() {
        for which in 0..keys(&make()).len() {
            let p = make();
            let (ptr, len) = {
                let k = keys(&p)[which];
                (k.as_bytes().as_ptr(), k.len())
            };
            assert_eq!(freed_bytes(ptr, len, || drop(p)), Some(vec![0; len]), "case {i}, key {which}");
            watched += 1;
        }
    }
    assert_eq!(watched, 5);
}
