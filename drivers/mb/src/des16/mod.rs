//! # des16 — 3DES-CBC on up to 16 buffers at once with AVX-512 VBMI
//!
//! CBC encryption is serial within a buffer, and 3DES is 48 Feistel rounds of table
//! look-ups per 8-byte block: one buffer runs at ~34 MB/s here (aws-lc, the soft driver).
//! Sixteen independent buffers are the sixteen 32-bit lanes of two 512-bit registers
//! (the `L` and `R` halves), and every round looks up all sixteen lanes' S-boxes at once:
//!
//! ```text
//!  Des16::new() (CPU checked once) ─ expand(24-byte key) → Box<Des3Keys> (per session:
//!                                  │   48 subkeys, K2's reversed, made where they stay;
//!                                  │   wiped on drop)
//!                                  └ workspace() → Workspace (per thread)
//!  Workspace::encrypt / decrypt(lanes: [Lane { keys, iv, data }; any number])
//!    slots 0..16 ◄── the lanes (longest first when more than 16), 0-length ones skipped
//!    loop:  steps = min(blocks left in the active slots, CHUNK)
//!           kernel, `steps` times: L||R = block ^ chain (16 lanes, big-endian halves);
//!             IP (swap-moves) ─ 16 rounds K1 ─ swap ─ 16 rounds K2⁻¹ ─ swap ─ 16 rounds
//!             K3 ─ swap ─ FP; out and chain = the result (FP·IP between the three cancel)
//!             (decrypting: the 48 rounds backwards on the block; out = that ^ chain,
//!             chain = the block)
//!           a round: l ^= f(r): per S-box j (8): vpermb (its 64-byte table, indexed by
//!             its input byte) ─ vpmultishiftqb (its 4 output bits to their places after
//!             P) ─ vpternlogd (masked XOR into l)
//!           slots whose lane ended leave (`crate::slots`), waiting lanes take free slots
//!    wipe the workspace's key copies and chaining values
//! ```
//!
//! Figures: MB/s, one thread, best of 11 alternating rounds, on this 2-core Zen 5
//! (`taskset -c 1 cargo test --release -p ocf-mb --lib -- --ignored --nocapture
//! des16_throughput`, see `bench.rs`); aws-lc is aws-lc-rs, the soft driver's 3DES-CBC;
//! job is IPsec-MB's job API (its AVX-512 DES) through the driver's `ffi::Manager`:
//!
//! | case | aws-lc | job | des16 | des16/aws-lc | des16/job |
//! |---|---:|---:|---:|---:|---:|
//! | 16 x 1 KiB, one key | 33.7 | 106.2 | 305.8 | 9.1x | 2.9x |
//! | 16 x 1 KiB, 16 keys | 33.7 | 106.3 | 303.5 | 9.0x | 2.9x |
//! | 16 x 64..1500 B, 16 keys | 33.7 | 55.5 | 156.3 | 4.6x | 2.8x |
//! | 1 x 1 KiB | 33.6 | 6.8 | 19.1 | 0.57x | 2.8x |
//! | 4 x 1 KiB | 33.6 | 27.0 | 76.5 | 2.3x | 2.8x |
//! | 64 x 1 KiB, one key | 33.7 | 107.4 | 305.7 | 9.1x | 2.9x |
//! | decrypt 16 x 1 KiB, 16 keys | 35.0 | 106.4 | 288.1 | 8.2x | 2.7x |
//! | decrypt 1 x 1 KiB | 34.9 | 6.8 | 18.6 | 0.53x | 2.7x |
//!
//! Choices, and why:
//! - **The S-box look-up** (`kernel::feistel`, tables in `fips`). `R` is kept rotated left
//!   by one, so each S-box's six input bits are the low six bits of one byte of `R' ^ k0`
//!   or `rotr(R', 4) ^ k1`, which `vpermb` reads as they are (it ignores bits 6-7). Each
//!   S-box's output after P is four bits spread over the 32-bit word; its table holds them
//!   in one byte, and one `vpmultishiftqb` (any 8-bit window of the lane, per byte) puts
//!   them in place: 16 shuffles and 8 three-way logic ops per round. Measured before it,
//!   at 16 x 1 KiB: the combined SP tables byte by byte, four merge-masked `vpermb`s per
//!   S-box (32 per round): 180 MB/s; the same with zero-masking and an OR tree: 160;
//!   `vpermi2b` with two tables per look-up (16 per round, bit 6 of the index picking
//!   the table): 186–189. Shuffles are what bounds it: on this CPU `vpermb`,
//!   `vpermi2b`, `vpmultishiftqb` on 512 bits each issue once per cycle, with latencies of
//!   5, 5 and 3 cycles (1.37, 1.37, 0.82 ns, measured). The eight masked XORs run as two
//!   chains of four (305 MB/s; one chain of eight 292, four chains of two 294).
//! - **IP and FP** are the classic swap-move sequences on all 16 lanes, once per 3DES
//!   block (the FP of one DES and the IP of the next cancel).
//! - **Per-slot subkeys** are copied into the workspace's `keys[word][slot]`, so one
//!   aligned load gives a round's key word for 16 slots: lanes of one call may have
//!   different keys. When every lane has the same [`Des3Keys`], the kernel broadcasts the
//!   key words instead (`SHARED`: 305.8 against 303.5 MB/s, the loads are not what bounds
//!   it).
//! - **Lanes of different lengths, more than 16 lanes**: as in cbc16 (its docs); the
//!   compaction is `crate::slots`, shared. A call is as long as its longest lane.
//! - **Few lanes**: a step costs the same for 1 lane as for 16 (the round's chain of
//!   look-ups), so one lane runs at 0.57x aws-lc and two break even; runs of one 3DES
//!   request still come here, as IPsec-MB's job would be slower (6.8 MB/s).
//! - **Decryption** uses the same kernel, one buffer per lane, the rounds read backwards
//!   from the same key copies (no second schedule). CBC decryption is parallel within a
//!   buffer, so one long buffer could fill all 16 lanes; not done: runs of requests fill
//!   them already, and IPsec-MB's decryption is no faster (106 MB/s at 16 x 1 KiB).
//! - **Key schedule**: FIPS 46-3's PC-1, shifts and PC-2, bit by bit (once per session),
//!   tested by CAVP's TCBCvarkey/permop/subtab sets; parity bits are ignored.
//! - **No secret-indexed memory**: `vpermb` reads a whole 64-byte table (a register, or
//!   a fixed address) and picks the entries inside the instruction, so no load address
//!   depends on key or data (a table-driven DES in memory leaks its indices to the
//!   cache).
//! - **Wiping**: [`Des3Keys`] are written in their box by the key schedule itself (never
//!   returned or moved: a moved value leaves its old bytes behind) and zeroize on drop; the
//!   [`Workspace`]'s key copies and chaining values are wiped at the end of every call and
//!   on drop (64-byte volatile stores, as cbc16's); the kernel wipes its last blocks
//!   (plaintext when decrypting) and keeps the subkeys in registers (the release
//!   disassembly: its frame holds those blocks and chaining values only); a debug build,
//!   which spills every value, zeroes the stack after each call (`ocf::scrub`). Zeroing
//!   2 KiB after every release call was tried: 16 x 8 B calls ran at 0.81-0.91x (two
//!   alternating pairs each, word by word and as a memset; noisy), for no secret left
//!   there. No type that holds key or data bytes is `Copy`.
//! - **Chosen once**: [`Des16::new`] checks the CPU (AVX-512F, BW, VBMI) and is the only
//!   way to get the handle that expands keys and makes workspaces; `None` elsewhere (the
//!   driver then keeps IPsec-MB).

#[cfg(test)]
mod bench;
mod fips;
mod kernel;
#[cfg(test)]
mod tests;

use ocf::Error;
use zeroize::Zeroize;

/// Slots (buffers in flight): one per 32-bit lane of a 512-bit register.
pub(crate) const SLOTS: usize = 16;
/// Half-round key words of 3DES: 3 × 16 rounds × `[k0, k1]`.
const HALF_ROUNDS: usize = 96;
/// Most block steps per kernel call: bounds the scratch that idle slots read and write.
const CHUNK: usize = 64;

/// One 32-bit word per slot, 64-aligned: one 512-bit register's worth. Not `Copy`: it
/// holds subkeys, chaining values and blocks.
#[repr(C, align(64))]
struct Row([u32; SLOTS]);

/// The slots' blocks or chaining values as big-endian halves.
struct Halves {
    l: Row,
    r: Row,
}

/// A 3DES (EDE, three keys) key's 48 round subkeys in the order the rounds use them: K1's
/// 16, K2's 16 reversed (decryption), K3's 16; each as the two words of `fips`. Wiped on
/// drop; made only boxed ([`Des16::expand`]) and never moved out of the box.
pub(crate) struct Des3Keys {
    ks: [u32; HALF_ROUNDS],
}

impl Drop for Des3Keys {
    fn drop(&mut self) {
        self.ks.zeroize();
    }
}

/// One buffer to encrypt or decrypt in place: `data` (a multiple of 8 bytes) with `keys`,
/// chained from `iv`.
pub(crate) struct Lane<'a> {
    pub keys: &'a Des3Keys,
    pub iv: [u8; 8],
    pub data: &'a mut [u8],
}

/// The engine, on a CPU that has AVX-512 VBMI (holding one proves it).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Des16 {
    _checked: (),
}

impl Des16 {
    /// The engine where the CPU has AVX-512F, AVX-512BW and AVX-512 VBMI; `None` elsewhere.
    pub(crate) fn new() -> Option<Des16> {
        if is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512bw")
            && is_x86_feature_detected!("avx512vbmi")
        {
            return Some(Des16 { _checked: () });
        }
        None
    }

    /// Expands a 24-byte 3DES key `K1 || K2 || K3` (FIPS 46-3 key schedule for each; parity
    /// bits ignored), in the box the subkeys stay in.
    pub(crate) fn expand(&self, key: &[u8]) -> Result<Box<Des3Keys>, Error> {
        let Ok(key) = <&[u8; 24]>::try_from(key) else {
            return Err(Error::BadKeyLength { what: "mb: 3DES key", got: key.len(), allowed: &[24] });
        };
        let mut keys = Box::new(Des3Keys { ks: [0; HALF_ROUNDS] });
        for (des, (k, out)) in key.chunks_exact(8).zip(keys.ks.chunks_exact_mut(32)).enumerate() {
            let (Ok(k), Ok(out)) = (k.try_into(), out.try_into()) else { unreachable!("8 and 32") };
            fips::subkeys(k, out, des == 1);
        }
        Ok(keys)
    }

    /// Where calls of [`Workspace::encrypt`] keep their per-slot state: one per thread
    /// that encrypts.
    pub(crate) fn workspace(&self) -> Workspace {
        Workspace {
            chain: Halves { l: Row([0; SLOTS]), r: Row([0; SLOTS]) },
            keys: std::array::from_fn(|_| Row([0; SLOTS])),
            scratch: [[0; 8]; CHUNK],
        }
    }
}

/// The chaining values and subkeys the kernel reads, per slot, and the scratch that idle
/// slots read and write: kept between calls. Each call leaves the key copies and
/// chaining values wiped, and so does drop.
pub(crate) struct Workspace {
    chain: Halves,
    keys: [Row; HALF_ROUNDS],
    scratch: [[u8; 8]; CHUNK],
}

impl Drop for Workspace {
    fn drop(&mut self) {
        self.wipe();
    }
}

impl Workspace {
    /// Encrypts every lane in place (3DES-CBC, no padding). Any number of lanes, of any
    /// lengths and keys; a lane of length 0 is left alone. `NotBlockMultiple` when a
    /// lane's length is not a multiple of 8, before any lane is touched. More than 16
    /// lanes are reordered (longest first); their data is where it was.
    pub(crate) fn encrypt(&mut self, lanes: &mut [Lane<'_>]) -> Result<(), Error> {
        self.call::<false>(lanes)
    }

    /// Decrypts every lane in place (3DES-CBC, no padding), with `iv` the IV (the
    /// ciphertext block before the lane's first): as [`Workspace::encrypt`] otherwise.
    pub(crate) fn decrypt(&mut self, lanes: &mut [Lane<'_>]) -> Result<(), Error> {
        self.call::<true>(lanes)
    }

    fn call<const DECRYPT: bool>(&mut self, lanes: &mut [Lane<'_>]) -> Result<(), Error> {
        let mut first: Option<*const Des3Keys> = None;
        let mut one_key = true;
        for l in lanes.iter() {
            if l.data.len() % 8 != 0 {
                return Err(Error::NotBlockMultiple { len: l.data.len(), block: 8 });
            }
            if l.data.is_empty() {
                continue;
            }
            match first {
                None => first = Some(l.keys),
                Some(f) => one_key &= std::ptr::eq(f, l.keys),
            }
        }
        if first.is_none() {
            return Ok(());
        }
        if lanes.len() > SLOTS {
            // Longest first, as cbc16 (see its docs): long lanes start at once, short ones
            // fill the slots that free up.
            lanes.sort_unstable_by_key(|l| std::cmp::Reverse(l.data.len()));
        }
        let pass = lanes.iter_mut().filter(|l| !l.data.is_empty());
        let mut t = Table { ws: self, ptr: [std::ptr::null_mut(); SLOTS], left: [0; SLOTS], shared: None };
        if one_key {
            t.run::<true, DECRYPT>(pass);
        } else {
            t.run::<false, DECRYPT>(pass);
        }
        self.wipe();
        if cfg!(debug_assertions) {
            // A debug build's kernel spills every value, broadcast subkeys and blocks too;
            // a release build's wipes its blocks itself and keeps the subkeys in registers.
            ocf::scrub::below_here::<16>();
        }
        Ok(())
    }

    /// Zeroes the chaining values and the key copies.
    fn wipe(&mut self) {
        // SAFETY: a `Workspace` is made only by `Des16::workspace` (the CPU has AVX-512F).
        unsafe {
            kernel::wipe(std::slice::from_mut(&mut self.chain.l));
            kernel::wipe(std::slice::from_mut(&mut self.chain.r));
            kernel::wipe(&mut self.keys);
        }
    }
}

/// One call's slots: the workspace and where each slot's lane is.
struct Table<'w, 'k> {
    ws: &'w mut Workspace,
    ptr: [*mut u8; SLOTS],
    /// Blocks left per slot.
    left: [usize; SLOTS],
    /// With `SHARED`, the one key of every lane.
    shared: Option<&'k Des3Keys>,
}

impl<'k> Table<'_, 'k> {
    /// Puts `lane` into `slot`, its subkeys too unless `SHARED` (whose kernel broadcasts
    /// the one key).
    fn fill<const SHARED: bool>(&mut self, slot: usize, lane: &mut Lane<'k>) {
        let [hi, lo] =
            [&lane.iv[..4], &lane.iv[4..]].map(|h| u32::from_be_bytes(h.try_into().expect("4 bytes")));
        self.ws.chain.l.0[slot] = hi;
        self.ws.chain.r.0[slot] = lo;
        if SHARED {
            self.shared = Some(lane.keys);
        } else {
            for (row, k) in self.ws.keys.iter_mut().zip(&lane.keys.ks) {
                row.0[slot] = *k;
            }
        }
        self.ptr[slot] = lane.data.as_mut_ptr();
        self.left[slot] = lane.data.len() / 8;
    }

    /// Moves slot `from` into slot `to` (with `SHARED`, the one key serves every slot).
    fn shift<const SHARED: bool>(&mut self, from: usize, to: usize) {
        self.ws.chain.l.0[to] = self.ws.chain.l.0[from];
        self.ws.chain.r.0[to] = self.ws.chain.r.0[from];
        if !SHARED {
            for row in &mut self.ws.keys {
                row.0[to] = row.0[from];
            }
        }
        self.ptr[to] = self.ptr[from];
        self.left[to] = self.left[from];
    }

    /// Encrypts (or with `DECRYPT` decrypts) the lanes of `pass` (none empty; with
    /// `SHARED`, all with one key), 16 at a time, refilling slots as lanes end.
    fn run<'l, const SHARED: bool, const DECRYPT: bool>(
        &mut self,
        mut pass: impl Iterator<Item = &'l mut Lane<'k>>,
    ) where
        'k: 'l,
    {
        let mut active = 0;
        loop {
            while active < SLOTS {
                let Some(lane) = pass.next() else { break };
                self.fill::<SHARED>(active, lane);
                active += 1;
            }
            if active == 0 {
                return;
            }
            let steps = self.left[..active].iter().copied().min().unwrap_or(0).min(CHUNK);
            let scratch = self.ws.scratch.as_mut_ptr().cast::<u8>();
            for p in &mut self.ptr[active..] {
                *p = scratch;
            }
            let zero = [0; HALF_ROUNDS];
            let shared = self.shared.map_or(&zero, |k| &k.ks);
            // SAFETY: a `Workspace` comes only from a `Des16` (the CPU has the features);
            // each active slot points at its lane's `8 * left` bytes, with `steps <= left`,
            // borrowed mutably for the whole call; idle slots at the scratch (`8 * CHUNK`
            // bytes, `steps <= CHUNK`).
            unsafe {
                kernel::steps::<SHARED, DECRYPT>(&mut self.ws.chain, &self.ws.keys, shared, &self.ptr, steps)
            };
            for i in 0..active {
                self.left[i] -= steps;
                self.ptr[i] = self.ptr[i].wrapping_add(8 * steps);
            }
            active = crate::slots::retire(&mut Retiring::<SHARED>(self), active);
        }
    }
}

/// A table between kernel calls, as [`crate::slots::Slots`].
struct Retiring<'t, 'w, 'k, const SHARED: bool>(&'t mut Table<'w, 'k>);

impl<const SHARED: bool> crate::slots::Slots for Retiring<'_, '_, '_, SHARED> {
    fn left(&self, slot: usize) -> usize {
        self.0.left[slot]
    }
    fn shift(&mut self, from: usize, to: usize) {
        self.0.shift::<SHARED>(from, to);
    }
}
