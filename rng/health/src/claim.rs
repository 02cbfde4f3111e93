//! What the noise source claims: the width of one sample and its min-entropy, and the
//! cutoffs and window that follow from them.

use std::fmt;

use crate::cutoffs::{apt_cutoff, rct_cutoff};

/// How a noise source's raw bytes divide into samples.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SampleWidth {
    /// Every byte is one sample (256 values): the adaptive proportion test's window is
    /// 1024 samples (SP 800-90B §4.4.2, non-binary).
    Byte,
    /// Every bit is one sample, most significant first (a binary source): the window is
    /// 512 samples.
    Bit,
}

impl SampleWidth {
    /// Bits per sample: the most min-entropy a sample can have.
    pub fn bits(self) -> u32 {
        match self {
            SampleWidth::Byte => 8,
            SampleWidth::Bit => 1,
        }
    }

    /// The adaptive proportion test's window, in samples.
    pub fn window(self) -> u32 {
        match self {
            SampleWidth::Byte => 1024,
            SampleWidth::Bit => 512,
        }
    }

    /// Samples in one raw byte.
    pub fn per_byte(self) -> usize {
        8 / self.bits() as usize
    }
}

/// The source's claim: `entropy` bits of min-entropy per sample of `width` (SP 800-90B's
/// H). The cutoffs follow from it; a lower claim makes the tests slower to trip and
/// rarer to trip falsely on a good source.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Claim {
    pub entropy: f64,
    pub width: SampleWidth,
}

impl Claim {
    /// `entropy` bits per byte sample.
    pub fn bytes(entropy: f64) -> Claim {
        Claim { entropy, width: SampleWidth::Byte }
    }

    /// `entropy` bits per bit sample.
    pub fn bits(entropy: f64) -> Claim {
        Claim { entropy, width: SampleWidth::Bit }
    }

    /// The cutoffs for this claim, or why the claim is impossible.
    pub fn cutoffs(&self) -> Result<Cutoffs, ClaimError> {
        let h = self.entropy;
        if !(h.is_finite() && h > 0.0) {
            return Err(ClaimError::NotPositive(h));
        }
        if h > f64::from(self.width.bits()) {
            return Err(ClaimError::AboveWidth { entropy: h, bits: self.width.bits() });
        }
        let window = self.width.window();
        Ok(Cutoffs { rct: rct_cutoff(h), apt: apt_cutoff(h, window), window })
    }
}

/// The two tests' parameters for one claim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cutoffs {
    /// A run of this many equal samples trips the repetition count test.
    pub rct: u32,
    /// This many occurrences of a window's first sample in the window trip the adaptive
    /// proportion test.
    pub apt: u32,
    /// The adaptive proportion test's window, in samples.
    pub window: u32,
}

/// A claim no source can make.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ClaimError {
    /// Min-entropy must be a positive number of bits.
    NotPositive(f64),
    /// A sample of `bits` bits cannot hold more than `bits` bits of entropy.
    AboveWidth { entropy: f64, bits: u32 },
}

impl fmt::Display for ClaimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClaimError::NotPositive(h) => {
                write!(f, "claimed min-entropy {h} per sample: it must be a positive number of bits")
            }
            ClaimError::AboveWidth { entropy, bits } => write!(
                f,
                "claimed min-entropy {entropy} per sample exceeds the sample's width of {bits} bit(s)"
            ),
        }
    }
}

impl std::error::Error for ClaimError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn impossible_claims_are_refused_naming_why() {
        for h in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(matches!(Claim::bytes(h).cutoffs(), Err(ClaimError::NotPositive(_))), "{h}");
        }
        let e = Claim::bytes(8.5).cutoffs().unwrap_err();
        assert_eq!(e, ClaimError::AboveWidth { entropy: 8.5, bits: 8 });
        assert!(e.to_string().contains("exceeds the sample's width of 8"), "{e}");
        assert!(matches!(Claim::bits(1.5).cutoffs(), Err(ClaimError::AboveWidth { bits: 1, .. })));
    }

    #[test]
    fn the_width_sets_the_window() {
        assert_eq!(Claim::bytes(8.0).cutoffs().unwrap(), Cutoffs { rct: 4, apt: 18, window: 1024 });
        assert_eq!(Claim::bits(0.5).cutoffs().unwrap(), Cutoffs { rct: 41, apt: 410, window: 512 });
    }
}
