//! Retransmission of our outstanding request (RFC 7296 §2.1), driven by `Ike::tick`.
//!
//! ```text
//!  sent at t0 ─ timeout·base⁰ ─▶ resend ─ timeout·base¹ ─▶ resend … after `tries`
//!  resends, one more wait of timeout·base^tries ─▶ GiveUp: the IKE SA is dead
//! ```
//!
//! strongSwan's defaults (Debian 5.9.8's `/etc/strongswan.d/charon.conf`:
//! `retransmit_timeout = 4.0`, `retransmit_base = 1.8`, `retransmit_tries = 5`; the wait
//! before the nth resend is timeout · base^(n-1), strongswan.conf(5) "IKEv2
//! RETRANSMISSION"): resends at 4, 11.2, 24.2, 47.5 and 89.5 s, dead at 165 s.
//! A resend is the stored datagrams, byte for byte: a request is never sealed twice (an
//! AEAD would draw a new IV, and the peer must see the same message to answer it from its
//! cache).

use std::time::{Duration, Instant};

/// The backoff's parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RetransmitConfig {
    /// The first wait.
    pub timeout: Duration,
    /// Each next wait is the previous one times this.
    pub base: f64,
    /// Resends before giving up.
    pub tries: u32,
    /// The longest single wait (strongSwan's `retransmit_limit`, off by default: `None`).
    pub limit: Option<Duration>,
}

impl Default for RetransmitConfig {
    fn default() -> RetransmitConfig {
        RetransmitConfig { timeout: Duration::from_secs(4), base: 1.8, tries: 5, limit: None }
    }
}

impl RetransmitConfig {
    /// The wait after the `n`th transmission (0: after the first send).
    pub fn wait(&self, n: u32) -> Duration {
        let w = self.timeout.mul_f64(self.base.powi(n as i32));
        match self.limit {
            Some(l) => w.min(l),
            None => w,
        }
    }
}

/// What [`Retransmit::poll`] says.
#[derive(Debug, PartialEq, Eq)]
pub enum Due<'a> {
    /// Nothing to do before [`Retransmit::deadline`].
    NotYet,
    /// Send these datagrams again.
    Resend(&'a [Vec<u8>]),
    /// Every try is spent: the peer is dead.
    GiveUp,
}

/// One outstanding request's datagrams and timer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Retransmit {
    bytes: Vec<Vec<u8>>,
    resends: u32,
    deadline: Instant,
}

impl Retransmit {
    /// A request first sent at `now`.
    pub fn new(now: Instant, bytes: Vec<Vec<u8>>, cfg: &RetransmitConfig) -> Retransmit {
        Retransmit { bytes, resends: 0, deadline: now + cfg.wait(0) }
    }

    /// When the next resend (or the give-up) is due.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Resends so far.
    pub fn resends(&self) -> u32 {
        self.resends
    }

    /// The datagrams as first sent.
    pub fn bytes(&self) -> &[Vec<u8>] {
        &self.bytes
    }

    /// Advances the timer to `now`.
    pub fn poll(&mut self, now: Instant, cfg: &RetransmitConfig) -> Due<'_> {
        if now < self.deadline {
            return Due::NotYet;
        }
        if self.resends >= cfg.tries {
            return Due::GiveUp;
        }
        self.resends += 1;
        self.deadline = now + cfg.wait(self.resends);
        Due::Resend(&self.bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strongswan_schedule() {
        // The schedule strongswan.conf(5)'s formula gives for the defaults:
        // 4, 11.2, 24.16, 47.49, 89.48 s; gives up at 89.48 + 4 · 1.8⁵ = 165.06 s.
        let cfg = RetransmitConfig::default();
        let t0 = Instant::now();
        let mut r = Retransmit::new(t0, vec![b"req".to_vec()], &cfg);
        let mut resends = Vec::new();
        let mut t = t0;
        let gave_up = loop {
            t += Duration::from_millis(100);
            match r.poll(t, &cfg) {
                Due::NotYet => {}
                Due::Resend(b) => {
                    assert_eq!(b, &[b"req".to_vec()]);
                    resends.push((t - t0).as_secs_f64());
                }
                Due::GiveUp => break (t - t0).as_secs_f64(),
            }
        };
        let want = [4.0, 11.2, 24.16, 47.49, 89.48];
        assert_eq!(resends.len(), 5);
        for (got, want) in resends.iter().zip(want) {
            assert!((got - want).abs() < 0.6, "resend at {got}, want {want}");
        }
        assert!((gave_up - 165.1).abs() < 1.0, "gave up at {gave_up}");
    }

    #[test]
    fn not_due_before_deadline() {
        let cfg = RetransmitConfig { timeout: Duration::from_secs(1), base: 2.0, tries: 1, limit: None };
        let t0 = Instant::now();
        let mut r = Retransmit::new(t0, vec![vec![7]], &cfg);
        assert_eq!(r.poll(t0 + Duration::from_millis(999), &cfg), Due::NotYet);
        assert_eq!(r.poll(t0 + Duration::from_secs(1), &cfg), Due::Resend(&[vec![7]]));
        assert_eq!(r.deadline(), t0 + Duration::from_secs(3));
        assert_eq!(r.poll(t0 + Duration::from_secs(2), &cfg), Due::NotYet);
        assert_eq!(r.poll(t0 + Duration::from_secs(3), &cfg), Due::GiveUp);
        assert_eq!(r.resends(), 1);
    }

    #[test]
    fn limit_caps_a_wait() {
        let cfg = RetransmitConfig { limit: Some(Duration::from_secs(10)), ..Default::default() };
        assert_eq!(cfg.wait(4), Duration::from_secs(10));
        assert_eq!(cfg.wait(0), Duration::from_secs(4));
    }
}
