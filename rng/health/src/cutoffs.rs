//! The cutoffs of the two continuous tests, from the claimed min-entropy per sample `H`,
//! at the false-positive probability α = 2^-20 that SP 800-90B §4.4 recommends:
//!
//! ```text
//! Repetition Count (§4.4.1):    C = 1 + ⌈-log2(α) / H⌉ = 1 + ⌈20 / H⌉
//! Adaptive Proportion (§4.4.2): C = 1 + CRITBINOM(W, 2^-H, 1 - α)
//!     CRITBINOM(n, p, q): the least k with P(Binomial(n, p) ≤ k) ≥ q (Excel's function)
//!     W = 1024 for non-binary samples, 512 for binary ones
//! ```
//!
//! CRITBINOM is computed, not looked up: the upper tail P(X ≥ k) is summed from k = n
//! downwards in log space (each term exp(ln C(n,k) + k ln p + (n-k) ln(1-p))), smallest
//! terms first, so nothing underflows where the lower tail would (P(X = 0) = 2^-1024 for
//! H = 1, W = 1024) and the sum near α = 2^-20 is accurate to f64's precision. The unit
//! tests hold it against published values.

/// α = 2^-ALPHA_LOG2, the probability that a test trips on a source whose entropy is as
/// claimed (per sample for the repetition count test, per window for the adaptive
/// proportion test).
pub const ALPHA_LOG2: u32 = 20;

/// α as a number.
pub fn alpha() -> f64 {
    (-(ALPHA_LOG2 as f64)).exp2()
}

/// The repetition count test's cutoff for `h` bits of min-entropy per sample (`h > 0`):
/// `1 + ⌈20 / h⌉`. A quotient that is an integer up to rounding (20 / 0.1) is not rounded
/// up past it.
pub fn rct_cutoff(h: f64) -> u32 {
    let q = ALPHA_LOG2 as f64 / h;
    let steps = if (q - q.round()).abs() < 1e-9 { q.round() } else { q.ceil() };
    1 + steps as u32
}

/// The adaptive proportion test's cutoff for `h` bits of min-entropy per sample over a
/// window of `window` samples: `1 + CRITBINOM(window, 2^-h, 1 - α)`. Can exceed `window`
/// when `h` is tiny (then no window can trip it).
pub fn apt_cutoff(h: f64, window: u32) -> u32 {
    1 + critbinom(window, (-h).exp2(), alpha())
}

/// Excel's CRITBINOM(n, p, 1 - `alpha`): the least `k` with P(Binomial(n, p) ≤ k) ≥ 1 - α,
/// which is the least `k` with P(X ≥ k + 1) ≤ α.
pub fn critbinom(n: u32, p: f64, alpha: f64) -> u32 {
    if p <= 0.0 {
        return 0;
    }
    if p >= 1.0 {
        return n;
    }
    // From the top: the first k whose tail P(X ≥ k) exceeds α is the answer (the tail
    // from k + 1 was still ≤ α). P(X ≥ 0) = 1 > α, so the loop always returns.
    let mut tail = 0.0;
    for (k, term) in pmf_from_top(n, p) {
        tail += term;
        if tail > alpha {
            return k;
        }
    }
    0
}

/// P(Binomial(n, p) ≥ k), summed from the top as [`critbinom`] does. For the expected
/// number of false alarms on a source better than claimed (the clean-source test).
pub fn binomial_upper_tail(n: u32, p: f64, k: u32) -> f64 {
    pmf_from_top(n, p).take_while(|&(j, _)| j >= k).map(|(_, t)| t).sum()
}

/// `(k, P(X = k))` for k = n, n-1, …, 0, each term from logarithms (ln C(n, k) kept as a
/// running sum: C(n, k) = C(n, k+1) · (k+1) / (n-k)).
fn pmf_from_top(n: u32, p: f64) -> impl Iterator<Item = (u32, f64)> {
    let (ln_p, ln_q) = (p.ln(), (-p).ln_1p());
    let mut ln_choose = 0.0;
    (0..=n).rev().map(move |k| {
        if k < n {
            ln_choose += f64::from(k + 1).ln() - f64::from(n - k).ln();
        }
        (k, (ln_choose + f64::from(k) * ln_p + f64::from(n - k) * ln_q).exp())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Published cutoffs at α = 2^-20, each with its source.
    #[test]
    fn cutoffs_match_published_values() {
        // SP 800-90B §4.4.2, W = 1024 (non-binary): H = 1 → 589 (the value the standard's
        // cutoff table gives, quoted in issue 32's brief).
        assert_eq!(apt_cutoff(1.0, 1024), 589);
        // Go's crypto/internal/entropy (FIPS 140-3 module) docs: "C = 410 or more times in
        // the last W = 512 samples … h = 0.5 bits … using the formula in SP 800-90B
        // Section 4.4.2"; and its repetition count test: "C = 41 or more times in a row".
        assert_eq!(apt_cutoff(0.5, 512), 410);
        assert_eq!(rct_cutoff(0.5), 41);
        // Nordic nRF54LS05 datasheet, TRNG adaptive proportion test: "W = 512 …
        // α = 2^-20 … H=8.0 … C = 1+CRITBINOM(W, 2^-H, 1-α) = 13".
        assert_eq!(apt_cutoff(8.0, 512), 13);
        // Nordic nRF54L15 CRACEN: the 1024-sample window's cutoff register resets to
        // 0x319 = 793, which is H = 0.5 at W = 1024.
        assert_eq!(apt_cutoff(0.5, 1024), 0x319);
    }

    /// Values computed independently of this code with exact rational arithmetic (Python
    /// `fractions.Fraction` and `math.comb`, summing the upper tail exactly for p = 2^-H):
    /// a regression table for the integer claims, W = 1024 and W = 512.
    #[test]
    fn cutoffs_match_exact_rational_computation() {
        let table: [(f64, u32, u32); 8] = [
            (1.0, 589, 311),
            (2.0, 325, 177),
            (3.0, 182, 103),
            (4.0, 105, 62),
            (5.0, 63, 39),
            (6.0, 39, 25),
            (7.0, 26, 18),
            (8.0, 18, 13),
        ];
        for (h, w1024, w512) in table {
            assert_eq!(apt_cutoff(h, 1024), w1024, "H = {h}, W = 1024");
            assert_eq!(apt_cutoff(h, 512), w512, "H = {h}, W = 512");
        }
    }

    #[test]
    fn repetition_cutoffs_follow_the_formula() {
        // 1 + ⌈20/H⌉
        assert_eq!(rct_cutoff(8.0), 4);
        assert_eq!(rct_cutoff(4.0), 6);
        assert_eq!(rct_cutoff(1.0), 21);
        assert_eq!(rct_cutoff(3.0), 8); // ⌈6.67⌉ = 7
        assert_eq!(rct_cutoff(0.1), 201); // 20 / 0.1 is 200 up to rounding, not 201
    }

    #[test]
    fn critbinom_is_the_least_k_whose_cdf_reaches_one_minus_alpha() {
        // Small cases by hand: Binomial(2, 1/2) has CDF 1/4, 3/4, 1.
        assert_eq!(critbinom(2, 0.5, 0.5), 1); // CDF(0) = 0.25 < 0.5 ≤ CDF(1)
        assert_eq!(critbinom(2, 0.5, 0.25), 1); // CDF(1) = 0.75 ≥ 0.75
        assert_eq!(critbinom(2, 0.5, 0.2), 2);
        assert_eq!(critbinom(10, 0.0, 0.1), 0);
        assert_eq!(critbinom(10, 1.0, 0.1), 10);
        // And against the tail it is defined by, for a real window.
        let k = critbinom(1024, 0.5, alpha());
        assert!(binomial_upper_tail(1024, 0.5, k + 1) <= alpha());
        assert!(binomial_upper_tail(1024, 0.5, k) > alpha());
    }

    #[test]
    fn the_upper_tail_sums_to_one_from_zero() {
        assert!((binomial_upper_tail(1024, 1.0 / 256.0, 0) - 1.0).abs() < 1e-12);
        assert!((binomial_upper_tail(2, 0.5, 2) - 0.25).abs() < 1e-15);
    }
}
