//! The instructions: 16 3DES-CBC chains at once, one per 32-bit lane of two 512-bit
//! registers (the `L` and `R` halves), the S-boxes and P looked up with `vpermb`
//! (AVX-512 VBMI). The helpers are `#[target_feature]` functions, which only code with
//! the same features calls without `unsafe`; the entry points `steps` and `wipe` are
//! `unsafe`: callers hold a [`super::Des16`], made only where the CPU reported these
//! features.

use std::arch::x86_64::*;

use super::fips::SPREAD;
use super::{Halves, Row, HALF_ROUNDS, SLOTS};

/// A swap-move: the bits of `(a >> n) ^ b` under `m` are exchanged between `a` and `b`.
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
#[inline]
fn swap_move<const N: u32>(a: &mut __m512i, b: &mut __m512i, m: u32) {
    let t = _mm512_and_si512(_mm512_xor_si512(_mm512_srli_epi32::<N>(*a), *b), _mm512_set1_epi32(m as i32));
    *b = _mm512_xor_si512(*b, t);
    *a = _mm512_xor_si512(*a, _mm512_slli_epi32::<N>(t));
}

/// FIPS 46-3's initial permutation IP of the block `l || r` (big-endian halves), as swap-moves,
/// leaving both halves rotated left by one (the `R'` domain of [`super::fips`]).
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
#[inline]
fn ip(l: &mut __m512i, r: &mut __m512i) {
    swap_move::<4>(l, r, 0x0f0f_0f0f);
    swap_move::<16>(l, r, 0x0000_ffff);
    swap_move::<2>(r, l, 0x3333_3333);
    swap_move::<8>(r, l, 0x00ff_00ff);
    *r = _mm512_rol_epi32::<1>(*r);
    let t = _mm512_and_si512(_mm512_xor_si512(*l, *r), _mm512_set1_epi32(0xaaaa_aaaau32 as i32));
    *l = _mm512_xor_si512(*l, t);
    *r = _mm512_xor_si512(*r, t);
    *l = _mm512_rol_epi32::<1>(*l);
}

/// The inverse of [`ip`]: the final permutation IP⁻¹ of `l || r` (rotated halves in).
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
#[inline]
fn fp(l: &mut __m512i, r: &mut __m512i) {
    *l = _mm512_ror_epi32::<1>(*l);
    let t = _mm512_and_si512(_mm512_xor_si512(*l, *r), _mm512_set1_epi32(0xaaaa_aaaau32 as i32));
    *l = _mm512_xor_si512(*l, t);
    *r = _mm512_xor_si512(*r, t);
    *r = _mm512_ror_epi32::<1>(*r);
    swap_move::<8>(r, l, 0x00ff_00ff);
    swap_move::<2>(r, l, 0x3333_3333);
    swap_move::<16>(l, r, 0x0000_ffff);
    swap_move::<4>(l, r, 0x0f0f_0f0f);
}

/// One Feistel half-round on 16 lanes: `l ^ f(r, k)` with `k = (k0, k1)` (see `fips`).
/// Per S-box: `vpermb` (its byte table, indexed by its input byte), `vpmultishiftqb` (the
/// output bits to their places in the lane), and a masked XOR into the result.
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
#[inline]
fn feistel(l: __m512i, r: __m512i, k0: __m512i, k1: __m512i, c: &Consts) -> __m512i {
    let words = [_mm512_xor_si512(r, k0), _mm512_xor_si512(_mm512_ror_epi32::<4>(r), k1)];
    let w: [__m512i; 8] = std::array::from_fn(|n| {
        let v = _mm512_permutexvar_epi8(words[n / 4], c.table[n]);
        _mm512_multishift_epi64_epi8(c.control[n], v)
    });
    // Two chains of four (short enough not to bound the round): acc ^ (w & mask) is
    // one instruction, 0x78 = A ^ (B & C).
    let step = |acc, n: usize| _mm512_ternarylogic_epi32::<0x78>(acc, w[n], c.mask[n]);
    let a = step(step(step(step(l, 0), 1), 2), 3);
    let b = step(step(step(_mm512_and_si512(w[4], c.mask[4]), 5), 6), 7);
    _mm512_xor_si512(a, b)
}

/// The S-box constants of `fips::SPREAD`, in registers.
struct Consts {
    table: [__m512i; 8],
    control: [__m512i; 8],
    mask: [__m512i; 8],
}

/// Runs `steps` 3DES-CBC block steps on all 16 slots. Encrypting, per slot `i`, `steps`
/// blocks at `ptr[i]` are each replaced by `EDE_k(chain ^ block)`, which becomes the
/// chain; with `DECRYPT`, by `EDE_k⁻¹(block) ^ chain`, and the block (ciphertext) becomes
/// the chain. `chain` holds the slots' chaining values as big-endian halves (read, then
/// written back); `keys[h]` slot `i`'s half-round key word `h` (48 rounds × `[k0, k1]`,
/// in encryption order: decryption reads the rounds backwards). With `SHARED`, every slot
/// has the words `shared` instead, broadcast.
///
/// # Safety
/// The CPU has AVX-512F, AVX-512BW and AVX-512 VBMI; each `ptr[i]` is valid for reads and
/// writes of `8 * steps` bytes, used by nothing else meanwhile (slots may share a pointer
/// only where the bytes are scratch).
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
pub(super) unsafe fn steps<const SHARED: bool, const DECRYPT: bool>(
    chain: &mut Halves,
    keys: &[Row; HALF_ROUNDS],
    shared: &[u32; HALF_ROUNDS],
    ptr: &[*mut u8; SLOTS],
    steps: usize,
) {
    let key = |h: usize| {
        // Decryption runs the 48 rounds backwards, each round's two words as they are.
        let h = if DECRYPT { 2 * (HALF_ROUNDS / 2 - 1 - h / 2) + h % 2 } else { h };
        if SHARED {
            _mm512_set1_epi32(shared[h] as i32)
        } else {
            // SAFETY: `Row` is 64 bytes, 64-aligned.
            unsafe { _mm512_load_si512(keys[h].0.as_ptr().cast()) }
        }
    };
    let load_row = |row: &Row| {
        // SAFETY: as in `key`.
        unsafe { _mm512_load_si512(row.0.as_ptr().cast()) }
    };
    // SAFETY: `SPREAD`'s arrays are 64-byte aligned; each row is one aligned load.
    let c = unsafe {
        Consts {
            table: std::array::from_fn(|n| _mm512_load_si512(SPREAD.table[n].as_ptr().cast())),
            control: std::array::from_fn(|n| _mm512_load_si512(SPREAD.control[n].as_ptr().cast())),
            mask: std::array::from_fn(|n| _mm512_load_si512(SPREAD.mask[n].as_ptr().cast())),
        }
    };
    let (mut cl, mut cr) = (load_row(&chain.l), load_row(&chain.r));
    let mut blocks = Halves { l: Row([0; SLOTS]), r: Row([0; SLOTS]) };
    for step in 0..steps {
        let off = 8 * step;
        for (i, p) in ptr.iter().enumerate() {
            // SAFETY: `off + 8 <= 8 * steps`: inside slot `i`'s bytes (the caller's promise).
            let b = unsafe { std::ptr::read_unaligned(p.add(off).cast::<[u8; 8]>()) };
            blocks.l.0[i] = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
            blocks.r.0[i] = u32::from_be_bytes([b[4], b[5], b[6], b[7]]);
        }
        let (bl, br) = (load_row(&blocks.l), load_row(&blocks.r));
        let (mut l, mut r) =
            if DECRYPT { (bl, br) } else { (_mm512_xor_si512(bl, cl), _mm512_xor_si512(br, cr)) };
        ip(&mut l, &mut r);
        // E with K1, D with K2 (its subkeys stored reversed), E with K3 (decrypting: all
        // of it backwards); between them the halves swap, and FP·IP cancel.
        for des in 0..3 {
            for pair in 0..8 {
                let h = 32 * des + 4 * pair;
                l = feistel(l, r, key(h), key(h + 1), &c);
                r = feistel(r, l, key(h + 2), key(h + 3), &c);
            }
            std::mem::swap(&mut l, &mut r);
        }
        fp(&mut l, &mut r);
        if DECRYPT {
            (l, r) = (_mm512_xor_si512(l, cl), _mm512_xor_si512(r, cr));
            (cl, cr) = (bl, br);
        } else {
            (cl, cr) = (l, r);
        }
        // SAFETY: as in `key`.
        unsafe {
            _mm512_store_si512(blocks.l.0.as_mut_ptr().cast(), l);
            _mm512_store_si512(blocks.r.0.as_mut_ptr().cast(), r);
        }
        for (i, p) in ptr.iter().enumerate() {
            let (hi, lo) = (blocks.l.0[i].to_be_bytes(), blocks.r.0[i].to_be_bytes());
            let out = [hi[0], hi[1], hi[2], hi[3], lo[0], lo[1], lo[2], lo[3]];
            // SAFETY: the same 8 bytes of slot `i` read above.
            unsafe { std::ptr::write_unaligned(p.add(off).cast::<[u8; 8]>(), out) };
        }
    }
    // SAFETY: as in `key`.
    unsafe {
        _mm512_store_si512(chain.l.0.as_mut_ptr().cast(), cl);
        _mm512_store_si512(chain.r.0.as_mut_ptr().cast(), cr);
    }
    // The last blocks in and out of each slot (decrypting, plaintext) are not left in this
    // frame. What else a release build keeps here is the chaining values (ciphertext); the
    // subkeys stay in registers (the disassembly). A debug build spills every value: the
    // caller zeroes the stack after the call there (`Workspace::call`).
    // SAFETY: the CPU has AVX-512F (the caller's promise); `blocks` is a live local.
    unsafe { wipe(std::slice::from_mut(&mut blocks.l)) };
    // SAFETY: as above.
    unsafe { wipe(std::slice::from_mut(&mut blocks.r)) };
}

/// Zeroes `rows` with 64-byte volatile stores (not removed as dead stores).
///
/// # Safety
/// The CPU has AVX-512F.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn wipe(rows: &mut [Row]) {
    for row in rows {
        // SAFETY: one aligned 64-byte store onto `row` (64 bytes, 64-aligned).
        unsafe { std::ptr::write_volatile(row.0.as_mut_ptr().cast::<__m512i>(), _mm512_setzero_si512()) };
    }
    std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
}
