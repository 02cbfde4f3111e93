//! The instructions: AES key expansion with AES-NI (`aeskeygenassist`) and the block step
//! of 4–16 CBC chains with VAES on 512-bit registers. Everything here is `unsafe` because
//! of `#[target_feature]`: callers hold a [`super::Cbc16`], made only where the CPU
//! reported these features.

use std::arch::x86_64::*;

use super::{Blocks, MAX_ROUNDS};

/// AES's round constants (FIPS-197 §5.2), one per `Nk` words.
const RCON: [u8; 10] = [0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80, 0x1b, 0x36];

/// `(SubWord(RotWord(w)), SubWord(w))` of FIPS-197 §5.2, through `aeskeygenassist`, whose
/// S-box is the AES unit's (no table in memory indexed by key bytes). A word's first byte
/// is its low byte (memory order, as AES-NI reads round keys), so RotWord is a right
/// rotation by 8 and the round constant XORs into the low byte.
#[target_feature(enable = "aes")]
fn sub_words(w: u32) -> (u32, u32) {
    // The word goes to dword 1: the instruction's dword 0 is SubWord(X1), dword 1
    // RotWord(SubWord(X1)) XOR RCON, with RCON 0 here (added by the caller).
    let r = _mm_aeskeygenassist_si128::<0>(_mm_set_epi32(0, 0, w as i32, 0));
    (_mm_cvtsi128_si32(_mm_srli_si128::<4>(r)) as u32, _mm_cvtsi128_si32(r) as u32)
}

/// FIPS-197 §5.2 `KeyExpansion` of `key` (16, 24 or 32 bytes: checked by the caller) into
/// `rk` (`Nr + 1` round keys); returns `Nr`.
#[target_feature(enable = "aes")]
pub(super) fn expand(key: &[u8], rk: &mut [[u8; 16]; MAX_ROUNDS + 1]) -> usize {
    let nk = key.len() / 4;
    let nr = nk + 6;
    let mut w = [0u32; 4 * (MAX_ROUNDS + 1)];
    for (i, c) in key.chunks_exact(4).enumerate() {
        w[i] = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
    }
    for i in nk..4 * (nr + 1) {
        let mut t = w[i - 1];
        if i % nk == 0 {
            t = sub_words(t).0 ^ u32::from(RCON[i / nk - 1]);
        } else if nk > 6 && i % nk == 4 {
            t = sub_words(t).1;
        }
        w[i] = w[i - nk] ^ t;
    }
    for (k, words) in rk.iter_mut().zip(w.chunks_exact(4)) {
        for (b, word) in k.chunks_exact_mut(4).zip(words) {
            b.copy_from_slice(&word.to_le_bytes());
        }
    }
    zeroize::Zeroize::zeroize(&mut w);
    nr
}

/// Zeroes `blocks` with 64-byte volatile stores (not removed as dead stores; `zeroize` of
/// the table, a 256-byte volatile copy per row, cost about 100 ns per call).
///
/// # Safety
/// The CPU has AVX-512F.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn wipe(blocks: &mut [Blocks]) {
    for b in blocks {
        for z in 0..4 {
            // SAFETY: 64-byte aligned stores inside `b` (256 bytes, 64-aligned).
            unsafe {
                std::ptr::write_volatile(
                    b.0.as_mut_ptr().add(4 * z).cast::<__m512i>(),
                    _mm512_setzero_si512(),
                )
            };
        }
    }
    std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
}

/// One register's four blocks on their way out.
#[repr(C, align(64))]
struct Out([__m128i; 4]);

/// Runs `steps` CBC block steps on slots `0..4 * NZ` with `NR` rounds: per slot `i`,
/// `steps` blocks at `ptr[i]` are each replaced by `E_k(chain ^ block)`, which becomes the
/// chain. `chain` holds the slots' chaining values (read, then written back); `keys[r]`
/// slot `i`'s round key `r`. With `SHARED`, every slot has slot 0's keys: they are
/// broadcast into registers once instead of read per round.
///
/// # Safety
/// The CPU has AVX-512F and VAES; each `ptr[i]`, `i < 4 * NZ`, is valid for reads and
/// writes of `16 * steps` bytes, used by nothing else meanwhile (slots may share a pointer
/// only where the bytes are scratch).
#[target_feature(enable = "avx512f,vaes")]
pub(super) unsafe fn steps<const NZ: usize, const NR: usize, const SHARED: bool>(
    chain: &mut Blocks,
    keys: &[Blocks; MAX_ROUNDS + 1],
    ptr: &[*mut u8; 16],
    steps: usize,
) {
    const { assert!(NZ >= 1 && NZ <= 4 && NR <= MAX_ROUNDS) };
    // Register `z`'s four slots of a row (`chain` or a round key).
    let row = |b: &Blocks, z: usize| {
        // SAFETY: `Blocks` is 256 bytes, 64-aligned; `z < NZ <= 4` names one of its four
        // aligned 64-byte vectors.
        unsafe { _mm512_load_si512(b.0.as_ptr().add(4 * z).cast()) }
    };
    // A release build keeps these in registers in every `SHARED` variant (no stack load or
    // store of them in the disassembly); without `SHARED`, the table's rows are copied into
    // this frame, and a debug build spills everything: the caller zeroes the stack after
    // such a call (`Workspace::encrypt`).
    let shared: [__m512i; MAX_ROUNDS + 1] = std::array::from_fn(|r| {
        // SAFETY: a 16-byte load inside `keys[r]` (aligned 16).
        let k = unsafe { _mm_load_si128(keys[r].0.as_ptr().cast()) };
        if SHARED && r <= NR {
            _mm512_broadcast_i32x4(k)
        } else {
            _mm512_setzero_si512()
        }
    });
    let key = |r: usize, z: usize| if SHARED { shared[r] } else { row(&keys[r], z) };
    // Register `z`'s four blocks at byte `off` of their slots.
    let load = |z: usize, off: usize| {
        // SAFETY: `off + 16 <= 16 * steps`: inside each slot's bytes (the caller's
        // promise); unaligned 16-byte loads.
        let p = |j: usize| unsafe { _mm_loadu_si128(ptr[4 * z + j].add(off).cast()) };
        let mut v = _mm512_castsi128_si512(p(0));
        v = _mm512_inserti32x4::<1>(v, p(1));
        v = _mm512_inserti32x4::<2>(v, p(2));
        _mm512_inserti32x4::<3>(v, p(3))
    };
    // Out through memory: one 64-byte store, then a 16-byte load and store per slot.
    // `vextracti32x4` to memory (what LLVM makes of extract + store) cost 10% more per
    // step (17.4 against 15.7 ns, 4 registers, AES-128): the extracts compete with the
    // AES instructions for the vector pipes. The volatile loads keep LLVM from folding
    // the copy back into extracts.
    let store = |z: usize, off: usize, v: __m512i| {
        let mut out = Out([_mm_setzero_si128(); 4]);
        // SAFETY: `out` is a local 64-aligned 64-byte array.
        unsafe { _mm512_store_si512(out.0.as_mut_ptr().cast(), v) };
        for (j, block) in out.0.iter().enumerate() {
            // SAFETY: `block` is a live local; the store goes to the same 16 bytes of
            // slot `4z + j` that `load(z, off)` read (the caller's promise).
            unsafe {
                let b = std::ptr::read_volatile(block);
                _mm_storeu_si128(ptr[4 * z + j].add(off).cast(), b);
            }
        }
    };
    if steps == 0 {
        return;
    }
    // The state entering round 1: chain ^ block ^ round key 0 (0x96: three-way XOR).
    let mut s: [__m512i; NZ] =
        std::array::from_fn(|z| _mm512_ternarylogic_epi64::<0x96>(row(chain, z), load(z, 0), key(0, z)));
    for step in 0..steps {
        let off = 16 * step;
        // Rounds outside, chains inside: the NZ independent chains interleave, so the
        // AES units stay busy while each chain waits on its own latency.
        for r in 1..NR {
            for (z, sz) in s.iter_mut().enumerate() {
                *sz = _mm512_aesenc_epi128(*sz, key(r, z));
            }
        }
        for (z, sz) in s.iter_mut().enumerate() {
            if step + 1 < steps {
                // The next block and round key 0 go into the last round's key, as
                // aesenclast(x, k) = f(x) ^ k: its result is already the state that
                // enters round 1 of the next block (one XOR less on the chain, which is
                // all that bounds 1 to 3 lanes), and the ciphertext is that ^ m.
                let next = load(z, off + 16);
                let m = _mm512_xor_si512(next, key(0, z));
                let t = _mm512_aesenclast_epi128(
                    *sz,
                    _mm512_ternarylogic_epi64::<0x96>(key(NR, z), next, key(0, z)),
                );
                store(z, off, _mm512_xor_si512(t, m));
                *sz = t;
            } else {
                *sz = _mm512_aesenclast_epi128(*sz, key(NR, z));
                store(z, off, *sz);
            }
        }
    }
    for (z, sz) in s.iter().enumerate() {
        // SAFETY: as `row`, an aligned 64-byte store.
        unsafe { _mm512_store_si512(chain.0.as_mut_ptr().add(4 * z).cast(), *sz) };
    }
}
