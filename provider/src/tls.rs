//! TLS record modes, as libssl drives OpenSSL's own providers: TLS 1.2's AEAD records and
//! the CBC records of TLS 1.0-1.2.
//!
//! TLS 1.3 uses the ordinary AEAD calls (a nonce per record, the AAD, the payload, the
//! tag). TLS 1.2 instead hands a cipher context whole records:
//! - once per key, `tlsivfixed`: AES-GCM's 4-byte implicit nonce part (RFC 5288; the
//!   8-byte explicit part starts random on the sending side and counts up, one per
//!   record), or ChaCha20-Poly1305's 12-byte nonce (RFC 7905);
//! - per record, `tlsaad`: the 13-byte additional data (sequence number, type, version,
//!   length), then one update over the record in place. The length field counts what is
//!   on the wire, so the cipher corrects it to the payload's length first; the caller
//!   reads `tlsaadpad` (the tag's 16 bytes) to know how much room the record needs.
//!
//! On the wire, an AES-GCM record is explicit nonce ‖ ciphertext ‖ tag, a
//! ChaCha20-Poly1305 record ciphertext ‖ tag (its nonce is the fixed one XORed with the
//! sequence number). What an update returns is what OpenSSL's providers return: the whole
//! record when sealing, the payload's length when opening.
//!
//! This module holds the record arithmetic; `cipher/records.rs` sends each record's payload
//! through ocf as one whole AEAD message. CBC records are described further down.

/// The length of TLS 1.2's AEAD additional data (`EVP_AEAD_TLS1_AAD_LEN`).
pub const AAD_LEN: usize = 13;
/// The AEAD tag on every record.
pub const TAG_LEN: usize = 16;
/// AES-GCM's explicit nonce, in front of each record (RFC 5288).
pub const GCM_EXPLICIT_LEN: usize = 8;
/// AES-GCM's implicit (fixed) nonce part, from the key block.
pub const GCM_FIXED_LEN: usize = 4;

/// Which AEAD's record layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    Gcm,
    ChaCha,
}

impl Layout {
    /// Bytes on the wire around the payload.
    pub fn overhead(self) -> usize {
        match self {
            Layout::Gcm => GCM_EXPLICIT_LEN + TAG_LEN,
            Layout::ChaCha => TAG_LEN,
        }
    }
}

/// The next record's additional data, its length field corrected to the payload's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordAad {
    pub aad: [u8; AAD_LEN],
    pub payload_len: usize,
}

/// Reads `tlsaad`: the length field of the 13 bytes counts what the record will hold on the
/// wire when opening, and the plaintext (plus GCM's explicit nonce) when sealing.
pub fn record_aad(given: &[u8], layout: Layout, sealing: bool) -> Result<RecordAad, &'static str> {
    let mut aad: [u8; AAD_LEN] = given.try_into().map_err(|_| "tlsaad: TLS AAD is 13 bytes")?;
    let mut len = usize::from(u16::from_be_bytes([aad[AAD_LEN - 2], aad[AAD_LEN - 1]]));
    if layout == Layout::Gcm {
        len = len.checked_sub(GCM_EXPLICIT_LEN).ok_or("tlsaad: record shorter than the explicit nonce")?;
    }
    if !sealing {
        len = len.checked_sub(TAG_LEN).ok_or("tlsaad: record shorter than its tag")?;
    }
    aad[AAD_LEN - 2..].copy_from_slice(&(len as u16).to_be_bytes());
    Ok(RecordAad { aad, payload_len: len })
}

/// ChaCha20-Poly1305's per-record nonce (RFC 7905 §2): the fixed 12 bytes XORed with the
/// 64-bit sequence number (the AAD's first 8 bytes), left-padded with zeros.
pub fn chacha_nonce(fixed: &[u8; 12], aad: &[u8; AAD_LEN]) -> [u8; 12] {
    let mut nonce = *fixed;
    for (n, s) in nonce[4..].iter_mut().zip(&aad[..8]) {
        *n ^= s;
    }
    nonce
}

/// AES-GCM sealing: the explicit part of `iv` for this record, after which the counter in
/// `iv[4..12]` moves on by one. `None` once the 64-bit counter has come back to where it
/// started (`used` records): a nonce must never repeat under one key.
pub fn gcm_next_explicit(iv: &mut [u8; 12], used: &mut u64) -> Option<[u8; GCM_EXPLICIT_LEN]> {
    if *used == u64::MAX {
        return None;
    }
    *used += 1;
    let explicit: [u8; 8] = iv[GCM_FIXED_LEN..].try_into().expect("8 bytes");
    let next = u64::from_be_bytes(explicit).wrapping_add(1);
    iv[GCM_FIXED_LEN..].copy_from_slice(&next.to_be_bytes());
    Some(explicit)
}

// ---- CBC records (TLS 1.0-1.2, DTLS), MAC-then-encrypt or encrypt-then-MAC.
//
// libssl sets `tls-version` and `tls-mac-size` on a block cipher; each update is then one
// record, in place. Sealing appends TLS's padding (n + 1 bytes of value n). Opening drops
// the explicit IV block (TLS 1.1 and later), then the padding and the MAC — and must do so
// without a branch or a memory index that depends on the padding's bytes, or the time it
// takes tells an attacker whether the padding was good (Vaudenay's padding oracle; Lucky
// Thirteen, AlFardan and Paterson 2013). Bad padding is not reported: the MAC handed back
// is random, so libssl's own constant-time MAC check fails the record as any forgery.

/// The TLS and DTLS versions whose CBC records this handles (SSL 3.0 is refused: its
/// padding is not checked and OpenSSL 3 disables it).
pub fn cbc_version_ok(version: u64) -> bool {
    matches!(version, 0x0301..=0x0303 | 0xfeff | 0xfefd | 0x0100)
}

/// Whether records of this version carry an explicit IV block in front (TLS 1.1+, DTLS).
pub fn cbc_explicit_iv(version: u64) -> bool {
    version != 0x0301
}

/// How many padding bytes sealing adds to `len` bytes with blocks of `block`: 1 to `block`.
pub fn cbc_pad_len(len: usize, block: usize) -> usize {
    block - len % block
}

/// The largest MAC (SHA-512).
pub const MAX_MAC: usize = 64;

/// All ones if `a < b`, else zero; no branch on either.
fn ct_lt(a: usize, b: usize) -> usize {
    let lt = (a ^ ((a ^ b) | (a.wrapping_sub(b) ^ b))) >> (usize::BITS - 1);
    std::hint::black_box(0usize.wrapping_sub(lt))
}

/// All ones if `a >= b`.
fn ct_ge(a: usize, b: usize) -> usize {
    !ct_lt(a, b)
}

/// All ones if `a == b`.
fn ct_eq(a: usize, b: usize) -> usize {
    let x = a ^ b;
    let zero = (!x & x.wrapping_sub(1)) >> (usize::BITS - 1);
    std::hint::black_box(0usize.wrapping_sub(zero))
}

/// A decrypted CBC record, taken apart.
pub struct CbcRecord {
    /// Where the payload starts in the record (after an explicit IV).
    pub start: usize,
    /// The payload's length (secret when the padding was bad: then it is what the last byte
    /// claimed, and the MAC is random).
    pub len: usize,
    /// The MAC that followed the payload (random if the padding was bad).
    pub mac: [u8; MAX_MAC],
}

/// Opens a decrypted CBC record: drops the explicit IV (per `version`), checks the padding
/// and copies out the `mac_size`-byte MAC, in constant time with respect to the padding.
/// `random` gives the MAC to hand back when the padding is bad. `Err` only when the
/// record's public length cannot hold what it must.
pub fn cbc_open(
    record: &[u8],
    version: u64,
    block: usize,
    mac_size: usize,
    random: &[u8; MAX_MAC],
) -> Result<CbcRecord, &'static str> {
    let start = if cbc_explicit_iv(version) { block } else { 0 };
    if mac_size > MAX_MAC {
        return Err("tls-mac-size: larger than any MAC");
    }
    if record.len() % block != 0 || record.len() < start + block {
        return Err("a TLS CBC record shorter than its IV and one block, or not whole blocks");
    }
    let data = &record[start..];
    let len = data.len();
    // Public: the last byte (the padding length) and the MAC must fit.
    if 1 + mac_size > len {
        return Err("a TLS CBC record too short for its padding and MAC");
    }

    // The padding: the last byte says n, and the n + 1 last bytes must all be n. Check the
    // most there could be (256 bytes, or the record), masking by whether each is in the
    // padding, so the work does not depend on n.
    let pad = usize::from(data[len - 1]);
    let mut good = ct_ge(len, 1 + mac_size + pad);
    for i in 0..len.min(256) {
        let in_padding = ct_ge(pad, i);
        let b = usize::from(data[len - 1 - i]);
        good &= !(in_padding & (pad ^ b));
    }
    // Any bad byte cleared some of the low 8 bits.
    good = ct_eq(good & 0xff, 0xff);
    let mac_end = len - (good & (pad + 1));
    let mac_start = mac_end - mac_size;

    // The MAC: its position depends on n, so read every byte where it could start (the
    // last mac_size + 256 bytes) into a buffer indexed modulo mac_size, noting the offset
    // it started at; then rotate it into place, again touching every byte.
    let mut mac = [0u8; MAX_MAC];
    if mac_size > 0 {
        let scan_start = len.saturating_sub(mac_size + 256);
        let mut rotated = [0u8; MAX_MAC];
        let mut in_mac = 0usize;
        let mut offset = 0usize;
        let mut j = 0usize;
        for (i, &b) in data.iter().enumerate().skip(scan_start) {
            let started = ct_eq(i, mac_start);
            in_mac = (in_mac | started) & ct_lt(i, mac_end);
            offset |= j & started;
            rotated[j] |= b & (in_mac as u8);
            j += 1;
            j &= ct_lt(j, mac_size);
        }
        // mac[k] = rotated[(offset + k) % mac_size], without indexing by `offset`.
        for (k, out) in mac[..mac_size].iter_mut().enumerate() {
            let mut v = 0u8;
            let want = {
                let w = offset + k;
                w - (ct_ge(w, mac_size) & mac_size)
            };
            for (idx, &r) in rotated[..mac_size].iter().enumerate() {
                v |= r & (ct_eq(idx, want) as u8);
            }
            // Bad padding: the random MAC, chosen without a branch.
            *out = (v & good as u8) | (random[k] & !(good as u8));
        }
        rotated.fill(0);
    } else if good == 0 {
        // No MAC (encrypt-then-MAC: libssl checked it before decrypting), so the padding
        // alone decides, and there is nothing left to hide.
        return Err("a TLS CBC record with bad padding");
    }
    Ok(CbcRecord { start, len: mac_start, mac })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record as a TLS 1.2 sender builds it: explicit IV block, payload, MAC, padding.
    fn cbc_record(payload: &[u8], mac: &[u8], pad: usize, block: usize) -> Vec<u8> {
        let mut r = vec![0xaa; block];
        r.extend_from_slice(payload);
        r.extend_from_slice(mac);
        r.extend(std::iter::repeat_n(pad as u8, pad + 1));
        r
    }

    #[test]
    fn cbc_records_open_with_every_padding_length() {
        let random = [0x5a; MAX_MAC];
        let mac: Vec<u8> = (0..20u8).collect();
        for payload_len in [0usize, 1, 15, 16, 100] {
            let payload = vec![7u8; payload_len];
            for pad in 0..=255usize {
                if (16 + payload_len + 20 + pad + 1) % 16 != 0 {
                    continue;
                }
                let r = cbc_record(&payload, &mac, pad, 16);
                let o = cbc_open(&r, 0x0303, 16, 20, &random).unwrap();
                assert_eq!((o.start, o.len), (16, payload_len), "payload {payload_len}, padding {pad}");
                assert_eq!(&o.mac[..20], &mac[..], "payload {payload_len}, padding {pad}");
            }
        }
        // TLS 1.0: no explicit IV block.
        let r = cbc_record(&[1, 2, 3], &mac, 8, 16);
        let o = cbc_open(&r[16..], 0x0301, 16, 20, &random).unwrap();
        assert_eq!((o.start, o.len, &o.mac[..20]), (0, 3, &mac[..]));
    }

    #[test]
    fn bad_padding_hands_back_the_random_mac_not_an_error() {
        let random = [0x5a; MAX_MAC];
        let mac: Vec<u8> = (0..32u8).collect();
        let mut r = cbc_record(&[9; 13], &mac, 2, 16);
        let n = r.len();
        r[n - 2] ^= 1; // a padding byte that disagrees with the length byte
        let o = cbc_open(&r, 0x0303, 16, 32, &random).unwrap();
        assert_eq!(&o.mac[..32], &random[..32]);
        // The length byte claims more than the record holds: also just a random MAC.
        let mut r = cbc_record(&[9; 13], &mac, 2, 16);
        let n = r.len();
        r[n - 1] = 200;
        let o = cbc_open(&r, 0x0303, 16, 32, &random).unwrap();
        assert_eq!(&o.mac[..32], &random[..32]);
        // Encrypt-then-MAC (no MAC here): bad padding is an error, nothing left to hide.
        let mut r = cbc_record(&[9; 13], &[], 2, 16);
        let n = r.len();
        r[n - 2] ^= 1;
        assert!(cbc_open(&r, 0x0303, 16, 0, &random).is_err());
    }

    #[test]
    fn publicly_short_records_are_refused() {
        let random = [0; MAX_MAC];
        assert!(cbc_open(&[0; 16], 0x0303, 16, 20, &random).is_err(), "only the IV");
        assert!(cbc_open(&[0; 31], 0x0303, 16, 20, &random).is_err(), "not whole blocks");
        assert!(cbc_open(&[0; 32], 0x0303, 16, 20, &random).is_err(), "16 bytes cannot hold a 20-byte MAC");
        assert!(cbc_open(&[0; 48], 0x0303, 16, 65, &random).is_err(), "no MAC is that long");
    }

    #[test]
    fn constant_time_helpers_compare_like_the_operators() {
        for a in [0usize, 1, 2, 255, 256, usize::MAX - 1, usize::MAX] {
            for b in [0usize, 1, 2, 255, 256, usize::MAX - 1, usize::MAX] {
                assert_eq!(ct_lt(a, b) == usize::MAX, a < b, "{a} < {b}");
                assert_eq!(ct_ge(a, b) == usize::MAX, a >= b, "{a} >= {b}");
                assert_eq!(ct_eq(a, b) == usize::MAX, a == b, "{a} == {b}");
                for m in [ct_lt(a, b), ct_eq(a, b)] {
                    assert!(m == 0 || m == usize::MAX);
                }
            }
        }
    }

    #[test]
    fn the_length_field_becomes_the_payloads() {
        // Sequence 7, application data, TLS 1.2, 100 bytes.
        let mut aad = [0, 0, 0, 0, 0, 0, 0, 7, 23, 3, 3, 0, 100];
        let sealing = record_aad(&aad, Layout::Gcm, true).unwrap();
        assert_eq!(sealing.payload_len, 92, "GCM sealing: the length counts the explicit nonce");
        assert_eq!(&sealing.aad[11..], &[0, 92]);
        let opening = record_aad(&aad, Layout::Gcm, false).unwrap();
        assert_eq!(opening.payload_len, 76, "GCM opening: nonce and tag");
        assert_eq!(record_aad(&aad, Layout::ChaCha, true).unwrap().payload_len, 100);
        assert_eq!(record_aad(&aad, Layout::ChaCha, false).unwrap().payload_len, 84);
        aad[12] = 15;
        assert!(record_aad(&aad, Layout::ChaCha, false).is_err(), "shorter than a tag");
        assert!(record_aad(&aad, Layout::Gcm, false).is_err());
        assert!(record_aad(&aad[..12], Layout::Gcm, true).is_err(), "12 bytes");
    }

    #[test]
    fn chacha_nonces_follow_rfc_7905() {
        // RFC 7905 §2: the 64-bit sequence number, big-endian, left-padded to 96 bits and
        // XORed with the client_write_IV.
        let fixed = [0x11; 12];
        let aad = [0, 0, 0, 0, 0, 0, 1, 2, 23, 3, 3, 0, 5];
        let n = chacha_nonce(&fixed, &aad);
        assert_eq!(n, [0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x10, 0x13]);
    }

    #[test]
    fn gcm_explicit_nonces_count_up_and_never_repeat() {
        let mut iv = [1, 2, 3, 4, 0, 0, 0, 0, 0, 0, 0, 0xff];
        let mut used = 0;
        assert_eq!(gcm_next_explicit(&mut iv, &mut used), Some([0, 0, 0, 0, 0, 0, 0, 0xff]));
        assert_eq!(gcm_next_explicit(&mut iv, &mut used), Some([0, 0, 0, 0, 0, 0, 1, 0]));
        assert_eq!(&iv[..4], &[1, 2, 3, 4], "the fixed part stays");
        used = u64::MAX - 1;
        assert!(gcm_next_explicit(&mut iv, &mut used).is_some(), "the last of 2^64 - 1");
        assert_eq!(gcm_next_explicit(&mut iv, &mut used), None, "then no more under this key");
    }
}
