//! The bound on half-open IKE SAs (RFC 7296 §2.6): a responder's IKE SAs that answered
//! IKE_SA_INIT and wait for IKE_AUTH hold a key exchange's work and memory for whoever
//! sent one datagram, possibly from a forged address.
//!
//! ```text
//!  half-open count <  cookie_threshold          ─▶ Admit
//!  half-open count >= cookie_threshold, no/bad cookie ─▶ RequireCookie (stateless COOKIE reply)
//!                                       valid cookie  ─▶ Admit
//!  half-open count >= limit                     ─▶ Refuse (dropped, counted)
//! ```
//!
//! strongSwan 5.9.8's defaults (Debian's `/etc/strongswan.d/charon.conf`):
//! `cookie_threshold = 30`, `block_threshold = 5` and `cookie_threshold_ip = 3` per peer
//! address (not modelled yet), `init_limit_half_open = 0` (off); ours: threshold 30, limit
//! 1000. A half-open SA not completed within `timeout` (`half_open_timeout`, 30 s) is
//! deleted by `Ike::tick`.

use std::time::Duration;

/// The half-open limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HalfOpenConfig {
    /// From this many half-open SAs on, IKE_SA_INIT needs a cookie.
    pub cookie_threshold: usize,
    /// At this many, new IKE_SA_INIT requests are dropped even with a cookie.
    pub limit: usize,
    /// A half-open SA older than this is deleted.
    pub timeout: Duration,
}

impl Default for HalfOpenConfig {
    fn default() -> HalfOpenConfig {
        HalfOpenConfig { cookie_threshold: 30, limit: 1000, timeout: Duration::from_secs(30) }
    }
}

/// What to do with an IKE_SA_INIT request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    Admit,
    RequireCookie,
    Refuse,
}

impl HalfOpenConfig {
    /// The decision for a request when `count` SAs are half-open and the request carries
    /// a valid cookie or not.
    pub fn admit(&self, count: usize, valid_cookie: bool) -> Admission {
        if count >= self.limit {
            Admission::Refuse
        } else if count >= self.cookie_threshold && !valid_cookie {
            Admission::RequireCookie
        } else {
            Admission::Admit
        }
    }

    /// Whether cookies are required at `count`.
    pub fn cookies_on(&self, count: usize) -> bool {
        count >= self.cookie_threshold
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds() {
        let c = HalfOpenConfig { cookie_threshold: 2, limit: 4, timeout: Duration::from_secs(1) };
        assert_eq!(c.admit(0, false), Admission::Admit);
        assert_eq!(c.admit(1, false), Admission::Admit);
        assert_eq!(c.admit(2, false), Admission::RequireCookie);
        assert_eq!(c.admit(2, true), Admission::Admit);
        assert_eq!(c.admit(3, true), Admission::Admit);
        assert_eq!(c.admit(4, true), Admission::Refuse);
        assert!(!c.cookies_on(1) && c.cookies_on(2));
    }
}
