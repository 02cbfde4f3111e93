//! FIPS 46-3's tables, the DES key schedule (§ "Key Schedule Calculation") and the
//! combined S-box + P tables the kernel looks up with `vpermb`, built at compile time.
//!
//! Bit numbering is the standard's: bit 1 is the most significant. A 32-bit half `R` is
//! kept rotated left by one (`R' = rotl(R, 1)`, as in classic software DES), so that the
//! eight 6-bit groups of `E(R)` lie in whole bytes: group `j` (0-based, S-box `j + 1`) is
//! `rotr(R', 28 - 4j) & 63`. Groups 7, 5, 3, 1 are bytes 0–3 of `R'`; groups 6, 4, 2, 0
//! bytes 0–3 of `rotr(R', 4)`. A round's 48-bit subkey is stored as two words laid out the
//! same way ([`subkeys`]), so `R' ^ k0` and `rotr(R', 4) ^ k1` are the S-box inputs.

/// Permuted choice 1: the 56 key bits kept, in order (C then D).
const PC1: [u8; 56] = [
    57, 49, 41, 33, 25, 17, 9, 1, 58, 50, 42, 34, 26, 18, 10, 2, 59, 51, 43, 35, 27, 19, 11, 3, 60, 52, 44,
    36, 63, 55, 47, 39, 31, 23, 15, 7, 62, 54, 46, 38, 30, 22, 14, 6, 61, 53, 45, 37, 29, 21, 13, 5, 28, 20,
    12, 4,
];

/// Permuted choice 2: the 48 bits of `C || D` that form a round's subkey.
const PC2: [u8; 48] = [
    14, 17, 11, 24, 1, 5, 3, 28, 15, 6, 21, 10, 23, 19, 12, 4, 26, 8, 16, 7, 27, 20, 13, 2, 41, 52, 31, 37,
    47, 55, 30, 40, 51, 45, 33, 48, 44, 49, 39, 56, 34, 53, 46, 42, 50, 36, 29, 32,
];

/// Left rotations of `C` and `D` before each round.
const SHIFTS: [u32; 16] = [1, 1, 2, 2, 2, 2, 2, 2, 1, 2, 2, 2, 2, 2, 2, 1];

/// The permutation P: output bit `i + 1` is input bit `P[i]`.
const P: [u8; 32] = [
    16, 7, 20, 21, 29, 12, 28, 17, 1, 15, 23, 26, 5, 18, 31, 10, 2, 8, 24, 14, 32, 27, 3, 9, 19, 13, 30, 6,
    22, 11, 4, 25,
];

/// S-boxes S1–S8, row by row (row: the outer two input bits; column: the middle four).
pub(super) const S: [[u8; 64]; 8] = [
    [
        14, 4, 13, 1, 2, 15, 11, 8, 3, 10, 6, 12, 5, 9, 0, 7, 0, 15, 7, 4, 14, 2, 13, 1, 10, 6, 12, 11, 9, 5,
        3, 8, 4, 1, 14, 8, 13, 6, 2, 11, 15, 12, 9, 7, 3, 10, 5, 0, 15, 12, 8, 2, 4, 9, 1, 7, 5, 11, 3, 14,
        10, 0, 6, 13,
    ],
    [
        15, 1, 8, 14, 6, 11, 3, 4, 9, 7, 2, 13, 12, 0, 5, 10, 3, 13, 4, 7, 15, 2, 8, 14, 12, 0, 1, 10, 6, 9,
        11, 5, 0, 14, 7, 11, 10, 4, 13, 1, 5, 8, 12, 6, 9, 3, 2, 15, 13, 8, 10, 1, 3, 15, 4, 2, 11, 6, 7, 12,
        0, 5, 14, 9,
    ],
    [
        10, 0, 9, 14, 6, 3, 15, 5, 1, 13, 12, 7, 11, 4, 2, 8, 13, 7, 0, 9, 3, 4, 6, 10, 2, 8, 5, 14, 12, 11,
        15, 1, 13, 6, 4, 9, 8, 15, 3, 0, 11, 1, 2, 12, 5, 10, 14, 7, 1, 10, 13, 0, 6, 9, 8, 7, 4, 15, 14, 3,
        11, 5, 2, 12,
    ],
    [
        7, 13, 14, 3, 0, 6, 9, 10, 1, 2, 8, 5, 11, 12, 4, 15, 13, 8, 11, 5, 6, 15, 0, 3, 4, 7, 2, 12, 1, 10,
        14, 9, 10, 6, 9, 0, 12, 11, 7, 13, 15, 1, 3, 14, 5, 2, 8, 4, 3, 15, 0, 6, 10, 1, 13, 8, 9, 4, 5, 11,
        12, 7, 2, 14,
    ],
    [
        2, 12, 4, 1, 7, 10, 11, 6, 8, 5, 3, 15, 13, 0, 14, 9, 14, 11, 2, 12, 4, 7, 13, 1, 5, 0, 15, 10, 3, 9,
        8, 6, 4, 2, 1, 11, 10, 13, 7, 8, 15, 9, 12, 5, 6, 3, 0, 14, 11, 8, 12, 7, 1, 14, 2, 13, 6, 15, 0, 9,
        10, 4, 5, 3,
    ],
    [
        12, 1, 10, 15, 9, 2, 6, 8, 0, 13, 3, 4, 14, 7, 5, 11, 10, 15, 4, 2, 7, 12, 9, 5, 6, 1, 13, 14, 0, 11,
        3, 8, 9, 14, 15, 5, 2, 8, 12, 3, 7, 0, 4, 10, 1, 13, 11, 6, 4, 3, 2, 12, 9, 5, 15, 10, 11, 14, 1, 7,
        6, 0, 8, 13,
    ],
    [
        4, 11, 2, 14, 15, 0, 8, 13, 3, 12, 9, 7, 5, 10, 6, 1, 13, 0, 11, 7, 4, 9, 1, 10, 14, 3, 5, 12, 2, 15,
        8, 6, 1, 4, 11, 13, 12, 3, 7, 14, 10, 15, 6, 8, 0, 5, 9, 2, 6, 11, 13, 8, 1, 4, 10, 7, 9, 5, 0, 15,
        14, 2, 3, 12,
    ],
    [
        13, 2, 8, 4, 6, 15, 11, 1, 10, 9, 3, 14, 5, 0, 12, 7, 1, 15, 13, 8, 10, 3, 7, 4, 12, 5, 6, 11, 0, 14,
        9, 2, 7, 11, 4, 1, 9, 12, 14, 2, 0, 6, 10, 13, 15, 3, 5, 8, 2, 1, 14, 7, 4, 10, 8, 13, 15, 12, 9, 0,
        3, 5, 6, 11,
    ],
];

/// The 16 round subkeys of one DES key (its parity bits ignored), written into `out` (32
/// words: round `i`'s at `2i`, or at `2 * (15 - i)` when `reversed`), each as the two
/// words `[k0, k1]` of the module docs: `k0` holds groups 7, 5, 3, 1 in bytes 0–3, `k1`
/// groups 6, 4, 2, 0. Written where they stay: no copy is left on the stack.
pub(super) fn subkeys(key: &[u8; 8], out: &mut [u32; 32], reversed: bool) {
    let mut k = u64::from_be_bytes(*key);
    let mut cd = PC1.iter().fold(0u64, |acc, &p| (acc << 1) | ((k >> (64 - p)) & 1));
    let rotl28 = |v: u64, n: u32| ((v << n) | (v >> (28 - n))) & 0x0fff_ffff;
    for (i, shift) in SHIFTS.into_iter().enumerate() {
        cd = (rotl28(cd >> 28, shift) << 28) | rotl28(cd & 0x0fff_ffff, shift);
        let mut k48 = PC2.iter().fold(0u64, |acc, &p| (acc << 1) | ((cd >> (56 - p)) & 1));
        let g = |j: u32| ((k48 >> (42 - 6 * j)) & 63) as u32;
        let at = 2 * if reversed { 15 - i } else { i };
        out[at] = g(7) | g(5) << 8 | g(3) << 16 | g(1) << 24;
        out[at + 1] = g(6) | g(4) << 8 | g(2) << 16 | g(0) << 24;
        zeroize::Zeroize::zeroize(&mut k48);
    }
    zeroize::Zeroize::zeroize(&mut k);
    zeroize::Zeroize::zeroize(&mut cd);
}

/// `P(S_j(x))` placed at S-box `j`'s output bits, rotated left by one (the `R'` domain):
/// what group `j` with input `x` XORs into the other half.
pub(super) const fn sp(j: usize, x: usize) -> u32 {
    let row = ((x >> 4) & 2) | (x & 1);
    let col = (x >> 1) & 15;
    let pre = (S[j][row * 16 + col] as u32) << (28 - 4 * j);
    let mut out = 0u32;
    let mut i = 0;
    while i < 32 {
        out |= ((pre >> (32 - P[i] as u32)) & 1) << (31 - i);
        i += 1;
    }
    out.rotate_left(1)
}

/// Group `j` of [`ORDER`]`[n]` has its input in byte `n % 4` of `R' ^ k0` (`n < 4`) or of
/// `rotr(R', 4) ^ k1` (`n >= 4`).
pub(super) const ORDER: [usize; 8] = [7, 5, 3, 1, 6, 4, 2, 0];

/// How the kernel gets `sp(j, x)` for all 16 lanes with three instructions per group:
/// `vpermb` looks `x` (byte `k` of the input word) up in `table`, a byte holding the four
/// output bits of S-box `j` (after P) at bits of our choosing; `vpmultishiftqb` with
/// `control` copies, into each byte of the lane, the 8-bit window of the lane that puts
/// those bits where `sp(j, x)` has them; `mask` keeps only them. All 64-byte aligned.
#[repr(C, align(64))]
pub(super) struct Spread {
    /// Per group (in [`ORDER`]), the 64-entry byte table.
    pub table: [[u8; 64]; 8],
    /// Per group, the `vpmultishiftqb` control: bit offsets for the 8 bytes of a qword
    /// (two lanes), repeated over the register.
    pub control: [[u64; 8]; 8],
    /// Per group, the bits `sp(j, _)` can set, in every lane.
    pub mask: [[u32; 16]; 8],
}

const fn spread() -> Spread {
    let mut out = Spread { table: [[0; 64]; 8], control: [[0; 8]; 8], mask: [[0; 16]; 8] };
    let mut n = 0;
    while n < 8 {
        let j = ORDER[n];
        let k = (n % 4) as u32;
        let mut mask = 0u32;
        let mut x = 0;
        while x < 64 {
            mask |= sp(j, x);
            x += 1;
        }
        assert!(mask.count_ones() == 4);
        // The bit `s[q]` of the table byte that carries target bit `pos[q]` (0..32): a
        // byte of the lane holding two target bits gets them at their own positions (one
        // window serves both), the others the lowest free bits.
        let mut pos = [0u32; 4];
        let mut s = [u32::MAX; 4];
        let (mut q, mut bit) = (0, 0);
        while bit < 32 {
            if mask & (1 << bit) != 0 {
                pos[q] = bit;
                q += 1;
            }
            bit += 1;
        }
        let mut used = 0u32;
        let mut a = 0;
        while a < 4 {
            let mut b = 0;
            while b < 4 {
                if a != b && pos[a] / 8 == pos[b] / 8 {
                    s[a] = pos[a] % 8;
                    used |= 1 << s[a];
                }
                b += 1;
            }
            a += 1;
        }
        let mut a = 0;
        while a < 4 {
            if s[a] == u32::MAX {
                let mut free = 0;
                while used & (1 << free) != 0 {
                    free += 1;
                }
                s[a] = free;
                used |= 1 << free;
            }
            a += 1;
        }
        let mut x = 0;
        while x < 64 {
            let v = sp(j, x);
            let mut byte = 0u8;
            let mut a = 0;
            while a < 4 {
                if v & (1 << pos[a]) != 0 {
                    byte |= 1 << s[a];
                }
                a += 1;
            }
            out.table[n][x] = byte;
            x += 1;
        }
        // Destination bit `pos % 8` of lane byte `pos / 8` takes source bit
        // `window + pos % 8` of the qword: that must be table bit `s` in lane byte `k`.
        let mut control = 0u64;
        let mut half = 0;
        while half < 2 {
            let mut a = 0;
            while a < 4 {
                let window = (32 * half + 8 * k + s[a] + 64 - pos[a] % 8) % 64;
                control |= (window as u64) << (8 * (4 * half + pos[a] / 8));
                a += 1;
            }
            half += 1;
        }
        out.control[n] = [control; 8];
        out.mask[n] = [mask; 16];
        n += 1;
    }
    out
}

/// The tables, controls and masks of every group.
pub(super) static SPREAD: Spread = spread();
