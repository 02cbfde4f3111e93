//! Stateless cookies (RFC 7296 §2.6): under load, the responder answers IKE_SA_INIT with a
//! COOKIE notify and keeps no state; the initiator repeats its request with the cookie
//! first, proving it receives at the address it claims.
//!
//! ```text
//!  cookie = version (1 byte) ‖ SHA-256(Ni ‖ IPi ‖ SPIi ‖ secret[version])
//!
//!  rotate(now): every `rotate_every`, a new random secret with version + 1; the previous
//!               one still verifies (a cookie sent just before the rotation stays good)
//!  verify:      the version names the current or the previous secret, and the hash
//!               matches (constant time)
//! ```
//!
//! The hash and the secrets go through ocf (its digest and its health-tested random
//! source). The secrets are wiped on drop. Whether a cookie is required is
//! [`crate::half_open`]'s decision.

use std::net::IpAddr;
use std::time::{Duration, Instant};

use ocf::{DigestAlg, Framework, Op, Request, SessionParams};
use subtle::ConstantTimeEq;
use zeroize::Zeroizing;

/// A cookie's length: the version byte and a SHA-256.
pub const COOKIE_LEN: usize = 1 + 32;

/// How often the secret changes unless configured otherwise.
pub const DEFAULT_ROTATE: Duration = Duration::from_secs(120);

/// The cookie secrets.
pub struct CookieJar {
    version: u8,
    current: Zeroizing<[u8; 32]>,
    previous: Option<Zeroizing<[u8; 32]>>,
    rotated_at: Instant,
    rotate_every: Duration,
}

fn random_secret(fw: &Framework) -> Result<Zeroizing<[u8; 32]>, ocf::Error> {
    let s = fw.new_session(&SessionParams::random())?;
    let done = s.run(Request::random(32)).map_err(|f| f.into_parts().0)?;
    let mut out = Zeroizing::new([0u8; 32]);
    done.buf.copy_out(0..32, &mut out[..]);
    Ok(out)
}

fn hash(
    fw: &Framework,
    version: u8,
    secret: &[u8; 32],
    ni: &[u8],
    ip: IpAddr,
    spi_i: u64,
) -> Result<[u8; COOKIE_LEN], ocf::Error> {
    let mut data = Zeroizing::new(Vec::with_capacity(ni.len() + 16 + 8 + 32));
    data.extend_from_slice(ni);
    match ip {
        IpAddr::V4(a) => data.extend_from_slice(&a.octets()),
        IpAddr::V6(a) => data.extend_from_slice(&a.octets()),
    }
    data.extend_from_slice(&spi_i.to_be_bytes());
    data.extend_from_slice(secret);
    let s = fw.new_session(&SessionParams::digest(DigestAlg::Sha256))?;
    let done = s.run(Request::new(Op::ComputeDigest, data.to_vec())).map_err(|f| f.into_parts().0)?;
    let mut out = [0u8; COOKIE_LEN];
    out[0] = version;
    let tag = done.tag();
    if tag.len() != 32 {
        return Err(ocf::Error::DriverFailure("SHA-256 of the wrong length"));
    }
    out[1..].copy_from_slice(tag);
    Ok(out)
}

impl CookieJar {
    /// A jar with a fresh secret (version 0) made at `now`.
    pub fn new(fw: &Framework, now: Instant, rotate_every: Duration) -> Result<CookieJar, ocf::Error> {
        Ok(CookieJar {
            version: 0,
            current: random_secret(fw)?,
            previous: None,
            rotated_at: now,
            rotate_every,
        })
    }

    /// The current secret's version.
    pub fn version(&self) -> u8 {
        self.version
    }

    /// Replaces the secret when it is older than the rotation period.
    pub fn rotate(&mut self, fw: &Framework, now: Instant) -> Result<(), ocf::Error> {
        if now.duration_since(self.rotated_at) < self.rotate_every {
            return Ok(());
        }
        let next = random_secret(fw)?;
        self.previous = Some(std::mem::replace(&mut self.current, next));
        self.version = self.version.wrapping_add(1);
        self.rotated_at = now;
        Ok(())
    }

    /// The cookie for an initiator's request: its nonce, address and SPI.
    pub fn make(
        &self,
        fw: &Framework,
        ni: &[u8],
        ip: IpAddr,
        spi_i: u64,
    ) -> Result<[u8; COOKIE_LEN], ocf::Error> {
        hash(fw, self.version, &self.current, ni, ip, spi_i)
    }

    /// Whether `cookie` is one we made (with the current or previous secret) for this
    /// nonce, address and SPI.
    pub fn verify(&self, fw: &Framework, cookie: &[u8], ni: &[u8], ip: IpAddr, spi_i: u64) -> bool {
        if cookie.len() != COOKIE_LEN {
            return false;
        }
        let secret = if cookie[0] == self.version {
            &self.current
        } else {
            match &self.previous {
                Some(p) if cookie[0] == self.version.wrapping_sub(1) => p,
                _ => return false,
            }
        };
        match hash(fw, cookie[0], secret, ni, ip, spi_i) {
            Ok(want) => bool::from(want[..].ct_eq(cookie)),
            Err(_) => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fw() -> Framework {
        let fw = Framework::new();
        ocf_soft::register(&fw).unwrap();
        fw
    }

    #[test]
    fn a_cookie_binds_nonce_address_and_spi() {
        let fw = fw();
        let t0 = Instant::now();
        let jar = CookieJar::new(&fw, t0, DEFAULT_ROTATE).unwrap();
        let ip: IpAddr = "192.0.2.1".parse().unwrap();
        let c = jar.make(&fw, b"nonce-0123456789", ip, 7).unwrap();
        assert_eq!(c[0], 0);
        assert!(jar.verify(&fw, &c, b"nonce-0123456789", ip, 7));
        assert!(!jar.verify(&fw, &c, b"nonce-0123456780", ip, 7));
        assert!(!jar.verify(&fw, &c, b"nonce-0123456789", "192.0.2.2".parse().unwrap(), 7));
        assert!(!jar.verify(&fw, &c, b"nonce-0123456789", ip, 8));
        assert!(!jar.verify(&fw, &c[..32], b"nonce-0123456789", ip, 7));
        let mut bad = c;
        bad[20] ^= 1;
        assert!(!jar.verify(&fw, &bad, b"nonce-0123456789", ip, 7));
    }

    #[test]
    fn the_hash_is_sha256_of_the_fields() {
        // An independent SHA-256 of the same bytes: Python's hashlib computed
        // sha256(b"N"*16 + bytes([10,0,0,1]) + (1).to_bytes(8,"big") + secret).
        let fw = fw();
        let secret = [0x5a; 32];
        let h = hash(&fw, 3, &secret, &[b'N'; 16], "10.0.0.1".parse().unwrap(), 1).unwrap();
        let mut data = vec![b'N'; 16];
        data.extend_from_slice(&[10, 0, 0, 1]);
        data.extend_from_slice(&1u64.to_be_bytes());
        data.extend_from_slice(&secret);
        let out = std::process::Command::new("python3")
            .args(["-c", "import hashlib,sys; print(hashlib.sha256(bytes.fromhex(sys.argv[1])).hexdigest())"])
            .arg(data.iter().map(|b| format!("{b:02x}")).collect::<String>())
            .output()
            .expect("python3 runs");
        let want = String::from_utf8(out.stdout).unwrap();
        let got: String = h[1..].iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(got, want.trim());
        assert_eq!(h[0], 3);
    }

    #[test]
    fn rotation_keeps_the_previous_secret_only() {
        let fw = fw();
        let t0 = Instant::now();
        let every = Duration::from_secs(10);
        let mut jar = CookieJar::new(&fw, t0, every).unwrap();
        let ip: IpAddr = "2001:db8::1".parse().unwrap();
        let c0 = jar.make(&fw, b"nonce-nonce-nonce", ip, 1).unwrap();
        jar.rotate(&fw, t0 + Duration::from_secs(5)).unwrap();
        assert_eq!(jar.version(), 0, "not yet due");
        jar.rotate(&fw, t0 + every).unwrap();
        assert_eq!(jar.version(), 1);
        assert!(jar.verify(&fw, &c0, b"nonce-nonce-nonce", ip, 1), "the previous secret verifies");
        let c1 = jar.make(&fw, b"nonce-nonce-nonce", ip, 1).unwrap();
        assert_ne!(c0, c1);
        jar.rotate(&fw, t0 + 2 * every).unwrap();
        assert!(!jar.verify(&fw, &c0, b"nonce-nonce-nonce", ip, 1), "two rotations: gone");
        assert!(jar.verify(&fw, &c1, b"nonce-nonce-nonce", ip, 1));
    }
}
