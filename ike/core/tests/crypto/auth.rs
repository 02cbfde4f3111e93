//! AUTH octets and PSK authentication against Python's `hmac` (no public IKEv2 PSK AUTH
//! example with all its inputs was found; the formula of RFC 7296 §2.15 is written out
//! again in Python), NAT detection hashes against Python's `hashlib`, nonces and SPIs.

use std::net::SocketAddr;

use ike_core::crypto::{
    ike_spi, natd_hash, nonce, psk_auth, signed_octets, verify_psk_auth, CryptoError, Prf, DEFAULT_NONCE_LEN,
    MIN_PSK_LEN,
};
use ike_wire::ids::AuthMethod;

use crate::common::{fw, python, to_hex};

const PY_PSK: &str = r#"
import sys, hmac, hashlib
h = getattr(hashlib, sys.argv[1])
msg, nonce, skp, idr, psk = (bytes.fromhex(a) for a in sys.argv[2:7])
prf = lambda k, s: hmac.new(k, s, h).digest()
octets = msg + nonce + prf(skp, idr)
print(octets.hex(), prf(prf(psk, b"Key Pad for IKEv2"), octets).hex())
"#;

#[test]
fn psk_auth_matches_python_hmac() {
    let fw = fw();
    let msg: Vec<u8> = (0..300u32).map(|i| (i * 5) as u8).collect();
    let nonce_r = [0x42; 32];
    // An FQDN ID payload's body: ID type 2, three reserved bytes, the name.
    let id_rest = [&[2u8, 0, 0, 0][..], b"left.example.org"].concat();
    let psk = b"a pre-shared key that is long enough";
    for (p, name) in [(Prf::HmacSha256, "sha256"), (Prf::HmacSha384, "sha384"), (Prf::HmacSha512, "sha512")] {
        let sk_pi: Vec<u8> = (0..p.output_len() as u8).collect();
        let octets = signed_octets(&fw, p, &msg, &nonce_r, &sk_pi, &id_rest).unwrap();
        let auth = psk_auth(&fw, p, psk, &octets).unwrap();
        let args =
            [name.to_string(), to_hex(&msg), to_hex(&nonce_r), to_hex(&sk_pi), to_hex(&id_rest), to_hex(psk)];
        let Some(out) = python(PY_PSK, &args) else { return };
        let (want_octets, want_auth) = out.split_once(' ').unwrap();
        assert_eq!(to_hex(&octets), want_octets, "{name}: signed octets");
        assert_eq!(to_hex(&auth), want_auth, "{name}: AUTH");
        verify_psk_auth(&fw, p, psk, AuthMethod::PSK, &auth, &octets).unwrap();
    }
}

#[test]
fn psk_auth_refuses_what_it_should() {
    let fw = fw();
    let p = Prf::HmacSha256;
    let psk = [7u8; MIN_PSK_LEN];
    let auth = psk_auth(&fw, p, &psk, b"octets").unwrap();
    verify_psk_auth(&fw, p, &psk, AuthMethod::PSK, &auth, b"octets").unwrap();
    let mut bad = auth.to_vec();
    bad[0] ^= 1;
    assert_eq!(
        verify_psk_auth(&fw, p, &psk, AuthMethod::PSK, &bad, b"octets"),
        Err(CryptoError::PskMismatch)
    );
    assert_eq!(
        verify_psk_auth(&fw, p, &psk, AuthMethod::PSK, &auth[..31], b"octets"),
        Err(CryptoError::PskMismatch)
    );
    assert_eq!(
        verify_psk_auth(&fw, p, &psk, AuthMethod::PSK, &auth, b"octetz"),
        Err(CryptoError::PskMismatch)
    );
    let mut other = psk;
    other[15] = 8;
    assert_eq!(
        verify_psk_auth(&fw, p, &other, AuthMethod::PSK, &auth, b"octets"),
        Err(CryptoError::PskMismatch)
    );
    assert_eq!(
        verify_psk_auth(&fw, p, &psk, AuthMethod::DIGITAL_SIGNATURE, &auth, b"octets"),
        Err(CryptoError::UnsupportedAuthMethod(AuthMethod::DIGITAL_SIGNATURE))
    );
    assert_eq!(
        psk_auth(&fw, p, &psk[..MIN_PSK_LEN - 1], b"octets").unwrap_err(),
        CryptoError::PskTooShort { len: MIN_PSK_LEN - 1, min: MIN_PSK_LEN }
    );
}

/// RFC 7296 §2.23's hash, SHA-1(SPIi | SPIr | IP | port), for IPv4 and IPv6.
#[test]
fn natd_hash_matches_python_hashlib() {
    let fw = fw();
    let (spi_i, spi_r) = ([0x11; 8], [0u8; 8]);
    let script = r#"
import sys, hashlib, ipaddress
spi, ip, port = bytes.fromhex(sys.argv[1]), ipaddress.ip_address(sys.argv[2]), int(sys.argv[3])
print(hashlib.sha1(spi + ip.packed + port.to_bytes(2, "big")).hexdigest())
"#;
    for addr in ["192.0.2.1:500", "[2001:db8::1]:4500"] {
        let a: SocketAddr = addr.parse().unwrap();
        let h = natd_hash(&fw, &spi_i, &spi_r, a).unwrap();
        let args = [to_hex(&[spi_i, spi_r].concat()), a.ip().to_string(), a.port().to_string()];
        let Some(want) = python(script, &args) else { return };
        assert_eq!(to_hex(&h), want, "{addr}");
    }
    let a = natd_hash(&fw, &spi_i, &spi_r, "192.0.2.1:500".parse().unwrap()).unwrap();
    let b = natd_hash(&fw, &spi_i, &spi_r, "192.0.2.1:4500".parse().unwrap()).unwrap();
    assert_ne!(a, b, "the port is hashed");
}

#[test]
fn nonces_and_spis() {
    let fw = fw();
    let a = nonce(&fw, Prf::HmacSha256, DEFAULT_NONCE_LEN).unwrap();
    let b = nonce(&fw, Prf::HmacSha256, DEFAULT_NONCE_LEN).unwrap();
    assert_eq!(a.len(), 32);
    assert_ne!(a, b);
    // HMAC-SHA-512's key is 64 bytes: a nonce of at least 32 (RFC 7296 §2.10).
    assert_eq!(
        nonce(&fw, Prf::HmacSha512, 31).unwrap_err(),
        CryptoError::NonceLength { got: 31, min: 32, max: 256 }
    );
    assert_eq!(
        nonce(&fw, Prf::HmacSha256, 15).unwrap_err(),
        CryptoError::NonceLength { got: 15, min: 16, max: 256 }
    );
    assert_eq!(
        nonce(&fw, Prf::HmacSha256, 257).unwrap_err(),
        CryptoError::NonceLength { got: 257, min: 16, max: 256 }
    );
    let spis: Vec<[u8; 8]> = (0..8).map(|_| ike_spi(&fw).unwrap()).collect();
    assert!(spis.iter().all(|s| *s != [0; 8]));
    assert!(spis.windows(2).all(|w| w[0] != w[1]));
}
