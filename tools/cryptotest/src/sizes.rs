//! Operand sizes as `-s` gives them: a fixed size (`1024`, `8k`), the simple IMIX (`imix`:
//! 40, 576 and 1500 bytes weighted 7:4:1), or a log-uniform range (`16..16384`).
//!
//! A distribution is measured from a precomputed, deterministic sequence of sizes
//! ([`SizeSpec::sequence`]): each measuring thread gets its own (seeded with the thread's
//! index, the same for every driver), and a request with its own buffer for every entry, made
//! before the clock starts. The measured loop only steps an index, so a distribution costs
//! no random numbers and no allocation per request.
//!
//! Block ciphers need whole blocks: each size of a distribution is rounded up to the
//! algorithm's block (as ESP's padding does), or down where rounding up would leave the
//! range (`A..B`). Fixed sizes are never rounded: a size that is not whole blocks is skipped
//! with a note, as before.

use std::fmt;

/// Entries in a distribution's sequence (per thread).
pub const SEQUENCE_LEN: usize = 4096;

/// The largest operand cryptotest allows.
pub const MAX_SIZE: usize = 64 << 20;

/// The simple IMIX: (bytes, weight).
pub const IMIX: [(usize, usize); 3] = [(40, 7), (576, 4), (1500, 1)];

/// One `-s` value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SizeSpec {
    /// Every request this many bytes.
    Fixed(usize),
    /// The simple IMIX ([`IMIX`]).
    Imix,
    /// Log-uniform between the two sizes, both included.
    LogUniform(usize, usize),
}

impl fmt::Display for SizeSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SizeSpec::Fixed(n) => write!(f, "{n}"),
            SizeSpec::Imix => f.write_str("imix"),
            SizeSpec::LogUniform(a, b) => write!(f, "{a}..{b}"),
        }
    }
}

/// A deterministic generator for the sequences (SplitMix64: tiny, well mixed, seedable;
/// nothing here needs more).
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in 0..n.
    fn below(&mut self, n: usize) -> usize {
        (self.unit() * n as f64) as usize % n.max(1)
    }
}

/// Seed of the sequences; thread `t` uses `SEED + t`.
const SEED: u64 = 0x0cf1_8000;

impl SizeSpec {
    /// Parses one `-s` value. The error says what is wrong with it.
    pub fn parse(s: &str) -> Result<SizeSpec, String> {
        let s = s.trim();
        if s.eq_ignore_ascii_case("imix") {
            return Ok(SizeSpec::Imix);
        }
        if let Some((a, b)) = s.split_once("..") {
            let (a, b) = (parse_bytes(a)?, parse_bytes(b)?);
            if a >= b {
                return Err(format!("`{s}`: a range A..B needs A smaller than B"));
            }
            return Ok(SizeSpec::LogUniform(a, b));
        }
        parse_bytes(s).map(SizeSpec::Fixed)
    }

    /// For sentences: `1024 bytes`, `imix sizes`, `16..16384 sizes`.
    pub fn phrase(self) -> String {
        match self {
            SizeSpec::Fixed(n) => format!("{n} bytes"),
            d => format!("{d} sizes"),
        }
    }

    /// The fixed size, if this is one.
    pub fn fixed(self) -> Option<usize> {
        match self {
            SizeSpec::Fixed(n) => Some(n),
            _ => None,
        }
    }

    /// The smallest and largest size it can give (before rounding to a block).
    pub fn range(self) -> (usize, usize) {
        match self {
            SizeSpec::Fixed(n) => (n, n),
            SizeSpec::Imix => (IMIX[0].0, IMIX[2].0),
            SizeSpec::LogUniform(a, b) => (a, b),
        }
    }

    /// The mean size of the distribution itself (before rounding): IMIX's is
    /// (40·7 + 576·4 + 1500)/12.
    pub fn mean(self) -> f64 {
        match self {
            SizeSpec::Fixed(n) => n as f64,
            SizeSpec::Imix => {
                let total: usize = IMIX.iter().map(|(s, w)| s * w).sum();
                let weights: usize = IMIX.iter().map(|(_, w)| w).sum();
                total as f64 / weights as f64
            }
            // A log-uniform variable on [a, b]: (b − a) / ln(b / a).
            SizeSpec::LogUniform(a, b) => (b - a) as f64 / (b as f64 / a as f64).ln(),
        }
    }

    /// The sizes thread `thread` submits, in order (cycled), each a multiple of `block`.
    /// A fixed size gives one entry; a distribution [`SEQUENCE_LEN`] or so (IMIX: the
    /// largest multiple of its 12 weights, so every weight is exact, in shuffled order).
    pub fn sequence(self, thread: usize, block: usize) -> Vec<usize> {
        let mut rng = SplitMix(SEED.wrapping_add(thread as u64));
        let mut seq = match self {
            SizeSpec::Fixed(n) => return vec![n],
            SizeSpec::Imix => {
                let weights: usize = IMIX.iter().map(|(_, w)| w).sum();
                let rounds = SEQUENCE_LEN / weights;
                let mut v: Vec<usize> =
                    IMIX.iter().flat_map(|&(s, w)| std::iter::repeat_n(s, w * rounds)).collect();
                // Fisher–Yates.
                for i in (1..v.len()).rev() {
                    v.swap(i, rng.below(i + 1));
                }
                v
            }
            SizeSpec::LogUniform(a, b) => {
                let (la, lb) = ((a as f64).ln(), (b as f64 + 1.0).ln());
                (0..SEQUENCE_LEN)
                    .map(|_| ((la + rng.unit() * (lb - la)).exp() as usize).clamp(a, b))
                    .collect()
            }
        };
        // A range stays inside itself; IMIX's sizes are not bounds, so they round up.
        let max = match self {
            SizeSpec::LogUniform(_, b) => b,
            _ => usize::MAX,
        };
        for s in &mut seq {
            *s = round_to_block(*s, block, max);
        }
        seq
    }
}

/// Rounds `size` up to a multiple of `block`, or down if that passes `max`; never below one
/// block.
pub fn round_to_block(size: usize, block: usize, max: usize) -> usize {
    if block <= 1 {
        return size;
    }
    let up = size.div_ceil(block) * block;
    if up <= max {
        up
    } else {
        (size / block * block).max(block)
    }
}

fn parse_bytes(s: &str) -> Result<usize, String> {
    let s = s.trim();
    let (digits, mult) = match s.strip_suffix(['k', 'K']) {
        Some(d) => (d, 1024),
        None => (s, 1),
    };
    let n: usize = digits
        .parse()
        .map_err(|_| format!("`{s}` is not a size: give bytes (64, 8k), a range (16..16384) or imix"))?;
    match n.checked_mul(mult) {
        Some(0) => Err("a size must be at least 1 byte".into()),
        Some(n) if n <= MAX_SIZE => Ok(n),
        _ => Err(format!("`{s}` is larger than the 64 MiB cryptotest allows")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_fixed_sizes_imix_and_ranges() {
        assert_eq!(SizeSpec::parse("64"), Ok(SizeSpec::Fixed(64)));
        assert_eq!(SizeSpec::parse(" 8k"), Ok(SizeSpec::Fixed(8192)));
        assert_eq!(SizeSpec::parse("IMIX"), Ok(SizeSpec::Imix));
        assert_eq!(SizeSpec::parse("16..16384"), Ok(SizeSpec::LogUniform(16, 16384)));
        assert_eq!(SizeSpec::parse("1k..16k"), Ok(SizeSpec::LogUniform(1024, 16384)));
        for (bad, says) in [
            ("0", "at least 1 byte"),
            ("x", "`x` is not a size"),
            ("16..", "`` is not a size"),
            ("..16", "`` is not a size"),
            ("100..10", "A smaller than B"),
            ("16..16", "A smaller than B"),
            ("1..65M", "not a size"),
            ("1..70000k", "larger than the 64 MiB"),
            ("imix2", "`imix2` is not a size"),
        ] {
            let e = SizeSpec::parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
        for s in ["64", "imix", "16..16384"] {
            assert_eq!(SizeSpec::parse(s).unwrap().to_string(), s);
        }
    }

    #[test]
    fn the_imix_mean_is_the_weighted_mean_and_the_sequence_has_it_exactly() {
        let want = (40.0 * 7.0 + 576.0 * 4.0 + 1500.0) / 12.0;
        assert!((SizeSpec::Imix.mean() - want).abs() < 1e-12);
        let seq = SizeSpec::Imix.sequence(0, 1);
        assert_eq!(seq.len(), SEQUENCE_LEN / 12 * 12);
        let mean = seq.iter().sum::<usize>() as f64 / seq.len() as f64;
        assert!((mean - want).abs() < 1e-9, "{mean}");
        // Shuffled: not three runs.
        assert!(seq.windows(2).filter(|w| w[0] != w[1]).count() > 1000);
    }

    #[test]
    fn sequences_are_deterministic_per_thread_and_differ_between_threads() {
        let d = SizeSpec::LogUniform(16, 16384);
        assert_eq!(d.sequence(0, 1), d.sequence(0, 1));
        assert_ne!(d.sequence(0, 1), d.sequence(1, 1));
        let seq = d.sequence(3, 1);
        assert_eq!(seq.len(), SEQUENCE_LEN);
        assert!(seq.iter().all(|&s| (16..=16384).contains(&s)));
        // Log-uniform: as many below the geometric middle (512) as above it, roughly.
        let below = seq.iter().filter(|&&s| s < 512).count();
        assert!((1800..2300).contains(&below), "{below}");
        let mean = seq.iter().sum::<usize>() as f64 / seq.len() as f64;
        assert!((mean / d.mean() - 1.0).abs() < 0.08, "{mean} vs {}", d.mean());
        assert_eq!(SizeSpec::Fixed(100).sequence(5, 16), [100], "fixed sizes are not rounded");
    }

    #[test]
    fn distributions_round_to_whole_blocks_within_their_range() {
        let imix = SizeSpec::Imix.sequence(0, 16);
        assert!(imix.iter().all(|s| [48, 576, 1504].contains(s)), "up, as ESP pads");
        let r = SizeSpec::LogUniform(20, 100).sequence(0, 16);
        assert!(r.iter().all(|&s| s % 16 == 0 && (32..=96).contains(&s)), "{r:?}");
        assert_eq!(round_to_block(1500, 8, 1500), 1496, "down where up leaves the range");
        assert_eq!(round_to_block(3, 8, 5), 8, "never below one block");
    }
}
