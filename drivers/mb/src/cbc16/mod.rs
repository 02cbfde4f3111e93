//! # cbc16 — AES-CBC encryption of up to 16 buffers at once with VAES on 512-bit registers
//!
//! CBC encryption is serial within a buffer (each block's input is the previous block's
//! output), so one buffer keeps one AES unit waiting on its latency. Sixteen independent
//! buffers fill four 512-bit registers of four 128-bit lanes each; one `vaesenc` advances
//! four chains, and four registers in flight hide the latency:
//!
//! ```text
//!  Cbc16::new() (CPU checked once) ─ expand(key) → Box<RoundKeys> (per session, expanded
//!                                  │   where it stays; wiped on drop)
//!                                  └ workspace() → Workspace (per thread / CPU lane)
//!  Workspace::encrypt(lanes: [Lane { keys, iv, data }; any number])
//!    for each key length present (10, 12, 14 rounds; a call may mix them):
//!    slots 0..16 ◄── lanes of that length (longest first when more than 16), 0-length
//!                    ones skipped
//!    loop:  steps = min(blocks left in the active slots, CHUNK)
//!           kernel: NZ = ceil(active / 4) registers, `steps` times:
//!                   NR-1 × vaesenc; vaesenclast with key k_NR ^ P_next ^ k0 (its
//!                   result is the next state: no XOR on the chain); out: result ^ P_next ^ k0
//!           slots whose lane ended leave, the last live slot fills each hole; the
//!           next waiting lane (a call may pass more than 16) takes the freed slot
//!    wipe the workspace's key copies and chaining values
//! ```
//!
//! Choices, and why. Figures: AES-128, GB/s, one thread, best of 21 alternating rounds,
//! on this 2-core Zen 5 (`taskset -c 1 cargo test --release -p ocf-mb --lib -- --ignored
//! --nocapture cbc16_throughput`, see `bench.rs`); aws-lc is aws-lc-rs, the soft driver's
//! AES-CBC; job is IPsec-MB's job API through the driver's `ffi::Manager` (submit each,
//! then flush):
//!
//! | case | aws-lc | job | cbc16 | cbc16/aws-lc | cbc16/job |
//! |---|---:|---:|---:|---:|---:|
//! | 16 x 1 KiB, one key | 1.39 | 8.08 | 18.29 | 13.2x | 2.3x |
//! | 16 x 1 KiB, 16 keys | 1.39 | 8.07 | 14.73 | 10.6x | 1.8x |
//! | 16 x 64..1500 B, one key | 1.38 | 3.86 | 8.50 | 6.2x | 2.2x |
//! | 16 x 64..1500 B, 16 keys | 1.37 | 3.86 | 7.35 | 5.4x | 1.9x |
//! | 64 x 64..1500 B longest first, 16 keys | 1.38 | 7.42 | 12.27 | 8.9x | 1.7x |
//! | 1 x 1 KiB | 1.39 | 0.90 | 1.36 | 0.98x | 1.5x |
//! | 3 x 1 KiB | 1.39 | 2.40 | 4.06 | 2.9x | 1.7x |
//! | 64 x 1 KiB, one key | 1.39 | 8.71 | 18.66 | 13.4x | 2.1x |
//!
//! - **Per-slot round keys** are copied into the workspace's table `keys[round][slot]`, so
//!   one aligned 64-byte load gives four slots' round key `r`: lanes of one call may have
//!   different keys. When every lane of a pass has the same [`RoundKeys`], the kernel
//!   broadcasts them into registers once instead (the `SHARED` variant: 18.3 against 14.7
//!   GB/s at 16 x 1 KiB).
//! - **Lanes of different lengths**: all active slots run to the shortest, then finished
//!   lanes retire, the slots are compacted (the last live slot fills each hole), and
//!   waiting lanes fill free slots, so more than 16 lanes overlap and the register count
//!   shrinks as lanes end (16 x 64..1500 B, 16 keys: 7.3 GB/s, against 5.6 with all four
//!   registers to the end; moving every later slot down instead of the last one, 5.3).
//!   Slots above the active count in the last register read and write a scratch run
//!   (their results are never used). A call is as long as its longest lane: 16 mixed
//!   sizes run at half the rate of 16 equal ones. More than 16 lanes run longest first
//!   (64 x 64..1500 B in random order: 7.6 -> 9.9 GB/s, the sort included).
//! - **Few lanes**: one lane runs at aws-lc's speed (the same latency chain: 0.98x at
//!   1 KiB); a call costs about 65 ns besides (1 x 16 B), aws-lc about 33 ns.
//! - **Data path**: blocks come in with `vinserti32x4` and go out through a 64-byte store
//!   and 16-byte copies (extracting to memory cost 10% more: the extracts compete with
//!   the AES instructions for the vector pipes). Folding the next block and round key 0
//!   into the last round key took one XOR off the chain: 1 x 1 KiB 1.11 -> 1.35 GB/s,
//!   16 x 1 KiB 17.1 -> 18.2.
//! - **Key expansion** is FIPS-197's, word by word, with `aeskeygenassist` for SubWord (no
//!   S-box table indexed by key bytes), tested against FIPS-197 appendix A.
//! - **Wiping**: [`RoundKeys`] are expanded in their box, where they stay (never moved or
//!   copied: a value returned or moved leaves its old bytes behind), and zeroize on drop;
//!   the [`Workspace`]'s key copies and chaining values are wiped at the end of every call
//!   and on drop (64-byte volatile stores: `zeroize`'s byte writes cost 1 µs per call). The
//!   kernel's own frame: with one key per pass (the driver's only kind of call) a release
//!   build keeps the broadcast round keys in registers (none stored, per the disassembly);
//!   after a call with several keys (the kernel copies the table's rows into its frame), and
//!   after every call in a debug build (which spills every value), the call zeroes
//!   [`SCRUB_KIB`] of the stack below it (`ocf::scrub`). No type that holds key or data
//!   bytes is `Copy`. The workspace is kept between calls because making its 5 KiB zeroed
//!   per call cost 55 ns. `tests/key_wipe.rs` looks for a known key's round keys in the
//!   whole process's memory after a session's drop.
//! - **Chosen once**: [`Cbc16::new`] checks the CPU (AVX-512F, VAES, AES-NI) and is the
//!   only way to get the handle that expands keys and makes workspaces; `None` elsewhere
//!   (the driver then keeps IPsec-MB). The AVX-512 intrinsics need Rust 1.89.

#[cfg(test)]
mod bench;
mod kernel;
#[cfg(test)]
mod tests;

use ocf::Error;
use zeroize::Zeroize;

/// Most rounds (AES-256).
const MAX_ROUNDS: usize = 14;
/// Slots (buffers in flight): four 128-bit lanes in each of four 512-bit registers.
pub(crate) const SLOTS: usize = 16;
/// Most block steps per kernel call: bounds the scratch that idle slots read and write.
const CHUNK: usize = 64;
/// KiB of stack zeroed after a call whose kernel frames hold key material: the release
/// kernel's frame is 2.5 KiB (its table copy); a debug build's frames are larger.
const SCRUB_KIB: usize = if cfg!(debug_assertions) { 16 } else { 4 };

/// Sixteen blocks (one per slot), 64-aligned: four 512-bit registers' worth. Not `Copy`:
/// it holds round keys and chaining values.
#[repr(C, align(64))]
struct Blocks([[u8; 16]; SLOTS]);

/// An AES key's encryption round keys (FIPS-197 §5.2), wiped on drop; made only boxed
/// ([`Cbc16::expand`]) and never moved out of the box.
pub(crate) struct RoundKeys {
    rk: [[u8; 16]; MAX_ROUNDS + 1],
    rounds: usize,
}

impl Drop for RoundKeys {
    fn drop(&mut self) {
        self.rk.zeroize();
    }
}

impl RoundKeys {
    /// Rounds: 10, 12 or 14 for a 16-, 24- or 32-byte key.
    #[cfg(test)]
    pub(crate) fn rounds(&self) -> usize {
        self.rounds
    }
}

/// One buffer to encrypt in place: `data` (a multiple of 16 bytes) with `keys`, chained
/// from `iv`.
pub(crate) struct Lane<'a> {
    pub keys: &'a RoundKeys,
    pub iv: [u8; 16],
    pub data: &'a mut [u8],
}

/// The engine, on a CPU that has VAES on 512-bit registers (holding one proves it).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Cbc16 {
    _checked: (),
}

impl Cbc16 {
    /// The engine where the CPU has AVX-512F, VAES and AES-NI; `None` elsewhere.
    pub(crate) fn new() -> Option<Cbc16> {
        if is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("vaes")
            && is_x86_feature_detected!("aes")
        {
            return Some(Cbc16 { _checked: () });
        }
        None
    }

    /// Expands an AES-128/192/256 key into its encryption round keys, in the box they
    /// stay in (the zeroed box is made first; no copy of the keys is left elsewhere).
    pub(crate) fn expand(&self, key: &[u8]) -> Result<Box<RoundKeys>, Error> {
        if !matches!(key.len(), 16 | 24 | 32) {
            return Err(Error::BadKeyLength { what: "mb: AES key", got: key.len(), allowed: &[16, 24, 32] });
        }
        let mut keys = Box::new(RoundKeys { rk: [[0; 16]; MAX_ROUNDS + 1], rounds: 0 });
        // SAFETY: `self` exists only where `new` found AES-NI; the key length is checked.
        keys.rounds = unsafe { kernel::expand(key, &mut keys.rk) };
        Ok(keys)
    }

    /// Where calls of [`Workspace::encrypt`] keep their per-slot state: one per thread
    /// that encrypts (the driver's per-CPU lane would keep one).
    pub(crate) fn workspace(&self) -> Workspace {
        Workspace {
            chain: Blocks([[0; 16]; SLOTS]),
            keys: std::array::from_fn(|_| Blocks([[0; 16]; SLOTS])),
            scratch: [[0; 16]; CHUNK],
        }
    }
}

/// The chaining values and round keys the kernel reads, per slot, and the scratch that
/// idle slots read and write: kept between calls (made zero once; a table made per call
/// cost about 55 ns of memset, a third of the cost of a 16-byte call). Each call leaves
/// it wiped (key copies and chaining values), and so does drop.
pub(crate) struct Workspace {
    chain: Blocks,
    keys: [Blocks; MAX_ROUNDS + 1],
    scratch: [[u8; 16]; CHUNK],
}

impl Drop for Workspace {
    fn drop(&mut self) {
        self.wipe(MAX_ROUNDS);
    }
}

impl Workspace {
    /// Encrypts every lane in place (AES-CBC, no padding). Any number of lanes, of any
    /// lengths and key lengths; a lane of length 0 is left alone. `NotBlockMultiple` when
    /// a lane's length is not a multiple of 16, before any lane is touched. More than 16
    /// lanes are reordered (longest first); their data is where it was.
    pub(crate) fn encrypt(&mut self, lanes: &mut [Lane<'_>]) -> Result<(), Error> {
        // One look at every lane: lengths checked, and per key length whether it occurs
        // and whether all its lanes share one key.
        let mut passes: [Option<(*const RoundKeys, bool)>; 3] = [None; 3];
        for l in lanes.iter() {
            if l.data.len() % 16 != 0 {
                return Err(Error::NotBlockMultiple { len: l.data.len(), block: 16 });
            }
            if l.data.is_empty() {
                continue;
            }
            let p = &mut passes[(l.keys.rounds - 10) / 2];
            match p {
                None => *p = Some((l.keys, true)),
                Some((first, one)) => *one &= std::ptr::eq(*first, l.keys),
            }
        }
        if lanes.len() > SLOTS {
            // Longest first: the long lanes start at once and short ones fill the slots
            // that free up, so no long lane runs alone at the end. 64 x 64..1500 B, 16
            // keys, in a new random order per call: 7.6 GB/s as given, 8.5 with only the
            // 16 longest first (`select_nth_unstable`), 9.9 sorted (the sort costs about
            // 1 µs of it: 12.3 when the lanes come sorted). Up to 16 lanes all start
            // together: no sort.
            lanes.sort_unstable_by_key(|l| std::cmp::Reverse(l.data.len()));
        }
        let mut used = 0;
        for (rounds, pass) in [10, 12, 14].into_iter().zip(passes) {
            let Some((_, one_key)) = pass else { continue };
            used = rounds;
            let pass = lanes.iter_mut().filter(|l| l.keys.rounds == rounds && !l.data.is_empty());
            let mut t = Table { ws: self, ptr: [std::ptr::null_mut(); SLOTS], left: [0; SLOTS] };
            match (rounds, one_key) {
                (10, false) => t.run::<10, false>(pass),
                (10, true) => t.run::<10, true>(pass),
                (12, false) => t.run::<12, false>(pass),
                (12, true) => t.run::<12, true>(pass),
                (14, false) => t.run::<14, false>(pass),
                _ => t.run::<14, true>(pass),
            }
        }
        if used > 0 {
            self.wipe(used);
            if cfg!(debug_assertions) || passes.iter().flatten().any(|&(_, one_key)| !one_key) {
                // What the kernel left in its frame: the table's key rows it copied there
                // (lanes of several keys), or, in a debug build, every value (a lane's
                // plaintext, broadcast round keys). A call of one key per pass, the driver's
                // only kind, leaves none in a release build: nothing to zero.
                ocf::scrub::below_here::<SCRUB_KIB>();
            }
        }
        Ok(())
    }

    /// Zeroes the chaining values and round key rows `0..=rounds`.
    fn wipe(&mut self, rounds: usize) {
        // SAFETY: a `Workspace` is made only by `Cbc16::workspace` (the CPU has
        // AVX-512F). `zeroize` wrote the table byte by byte, about 1 µs per call (as much
        // as the work on 16 x 1 KiB), then as 256-byte volatile copies, about 100 ns.
        unsafe {
            kernel::wipe(std::slice::from_mut(&mut self.chain));
            kernel::wipe(&mut self.keys[..=rounds]);
        }
    }
}

/// One pass of a call: the workspace and where each slot's lane is.
struct Table<'w> {
    ws: &'w mut Workspace,
    ptr: [*mut u8; SLOTS],
    /// Blocks left per slot.
    left: [usize; SLOTS],
}

impl Table<'_> {
    /// Puts `lane` into `slot`, its round keys too unless `SHARED` (whose kernel reads
    /// slot 0's alone) and `slot` is not 0.
    fn fill<const SHARED: bool>(&mut self, slot: usize, lane: &mut Lane<'_>) {
        self.ws.chain.0[slot] = lane.iv;
        if !SHARED || slot == 0 {
            for (row, k) in self.ws.keys.iter_mut().zip(&lane.keys.rk[..=lane.keys.rounds]) {
                row.0[slot] = *k;
            }
        }
        self.ptr[slot] = lane.data.as_mut_ptr();
        self.left[slot] = lane.data.len() / 16;
    }

    /// Moves slot `from` into slot `to` (with `SHARED`, slot 0's keys serve every slot).
    fn shift<const NR: usize, const SHARED: bool>(&mut self, from: usize, to: usize) {
        self.ws.chain.0[to] = self.ws.chain.0[from];
        if !SHARED {
            for row in &mut self.ws.keys[..=NR] {
                row.0[to] = row.0[from];
            }
        }
        self.ptr[to] = self.ptr[from];
        self.left[to] = self.left[from];
    }

    /// Encrypts the lanes of `pass` (all with `NR` rounds, none empty; with `SHARED`, all
    /// with one key), 16 at a time, refilling slots as lanes end.
    fn run<'l, 'a: 'l, const NR: usize, const SHARED: bool>(
        &mut self,
        mut pass: impl Iterator<Item = &'l mut Lane<'a>>,
    ) {
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
            let nz = active.div_ceil(4);
            let scratch = self.ws.scratch.as_mut_ptr().cast::<u8>();
            for p in &mut self.ptr[active..4 * nz] {
                *p = scratch;
            }
            let (chain, keys, ptr) = (&mut self.ws.chain, &self.ws.keys, &self.ptr);
            // SAFETY: a `Workspace` comes only from a `Cbc16` (the CPU has the
            // features); each active slot points at its lane's `16 * left` bytes, with
            // `steps <= left`, borrowed mutably for the whole call; idle slots at the
            // scratch (`16 * CHUNK` bytes, `steps <= CHUNK`).
            unsafe {
                match nz {
                    1 => kernel::steps::<1, NR, SHARED>(chain, keys, ptr, steps),
                    2 => kernel::steps::<2, NR, SHARED>(chain, keys, ptr, steps),
                    3 => kernel::steps::<3, NR, SHARED>(chain, keys, ptr, steps),
                    _ => kernel::steps::<4, NR, SHARED>(chain, keys, ptr, steps),
                }
            }
            for i in 0..active {
                self.left[i] -= steps;
                self.ptr[i] = self.ptr[i].wrapping_add(16 * steps);
            }
            // Lanes that ended leave; the last live slot fills each hole.
            active = crate::slots::retire(&mut Retiring::<NR, SHARED>(self), active);
        }
    }
}

/// A table between kernel calls, as [`crate::slots::Slots`].
struct Retiring<'t, 'w, const NR: usize, const SHARED: bool>(&'t mut Table<'w>);

impl<const NR: usize, const SHARED: bool> crate::slots::Slots for Retiring<'_, '_, NR, SHARED> {
    fn left(&self, slot: usize) -> usize {
        self.0.left[slot]
    }
    fn shift(&mut self, from: usize, to: usize) {
        self.0.shift::<NR, SHARED>(from, to);
    }
}
