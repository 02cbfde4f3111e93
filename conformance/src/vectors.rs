//! The vector files, embedded in the library so that any crate (a driver's own tests, a
//! tool) can run the suite without knowing where the files lie. See `vectors/README.md`
//! for where each file comes from and its licence.

/// One embedded vector file: its path under `vectors/` (used as the case source name) and
/// its text.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Source {
    pub name: &'static str,
    pub text: &'static str,
}

macro_rules! source {
    ($path:literal) => {
        Source { name: $path, text: include_str!(concat!("../vectors/", $path)) }
    };
}

/// NIST CAVP AESAVS, CBC mode: GFSbox, KeySbox, VarKey, VarTxt and MMT for 128/192/256.
pub(crate) const NIST_AES_CBC: &[Source] = &[
    source!("nist/aes-cbc/CBCGFSbox128.rsp"),
    source!("nist/aes-cbc/CBCGFSbox192.rsp"),
    source!("nist/aes-cbc/CBCGFSbox256.rsp"),
    source!("nist/aes-cbc/CBCKeySbox128.rsp"),
    source!("nist/aes-cbc/CBCKeySbox192.rsp"),
    source!("nist/aes-cbc/CBCKeySbox256.rsp"),
    source!("nist/aes-cbc/CBCMMT128.rsp"),
    source!("nist/aes-cbc/CBCMMT192.rsp"),
    source!("nist/aes-cbc/CBCMMT256.rsp"),
    source!("nist/aes-cbc/CBCVarKey128.rsp"),
    source!("nist/aes-cbc/CBCVarKey192.rsp"),
    source!("nist/aes-cbc/CBCVarKey256.rsp"),
    source!("nist/aes-cbc/CBCVarTxt128.rsp"),
    source!("nist/aes-cbc/CBCVarTxt192.rsp"),
    source!("nist/aes-cbc/CBCVarTxt256.rsp"),
];

/// NIST CAVP GCMVS, trimmed (see `vectors/tools/trim_gcm.py`).
pub(crate) const NIST_AES_GCM: &[Source] = &[
    source!("nist/aes-gcm/gcmDecrypt128.rsp"),
    source!("nist/aes-gcm/gcmDecrypt192.rsp"),
    source!("nist/aes-gcm/gcmDecrypt256.rsp"),
    source!("nist/aes-gcm/gcmEncryptExtIV128.rsp"),
    source!("nist/aes-gcm/gcmEncryptExtIV192.rsp"),
    source!("nist/aes-gcm/gcmEncryptExtIV256.rsp"),
];

/// NIST CAVP TDES, CBC mode: KAT (invperm, permop, subtab, varkey, vartext) and MMT1/2/3.
pub(crate) const NIST_TDES_CBC: &[Source] = &[
    source!("nist/tdes-cbc/TCBCMMT1.rsp"),
    source!("nist/tdes-cbc/TCBCMMT2.rsp"),
    source!("nist/tdes-cbc/TCBCMMT3.rsp"),
    source!("nist/tdes-cbc/TCBCinvperm.rsp"),
    source!("nist/tdes-cbc/TCBCpermop.rsp"),
    source!("nist/tdes-cbc/TCBCsubtab.rsp"),
    source!("nist/tdes-cbc/TCBCvarkey.rsp"),
    source!("nist/tdes-cbc/TCBCvartext.rsp"),
];

/// NIST CAVP TDES, ECB mode, three-key MMT: run block by block as CBC with a zero IV
/// (for one block, CBC with IV 0 is ECB), for more three-key coverage than TCBCMMT3 alone.
pub(crate) const NIST_TDES_ECB_AS_CBC: Source = source!("nist/tdes-ecb/TECBMMT3.rsp");

/// NIST CAVP SHAVS, byte-oriented ShortMsg (SHA-1/256/384/512) and LongMsg (SHA-1/256).
pub(crate) const NIST_SHA: &[Source] = &[
    source!("nist/sha/SHA1LongMsg.rsp"),
    source!("nist/sha/SHA1ShortMsg.rsp"),
    source!("nist/sha/SHA256LongMsg.rsp"),
    source!("nist/sha/SHA256ShortMsg.rsp"),
    source!("nist/sha/SHA384ShortMsg.rsp"),
    source!("nist/sha/SHA512ShortMsg.rsp"),
];

/// RFC 3602 section 4.
pub(crate) const RFC3602_AES_CBC: Source = source!("rfc/rfc3602-aes-cbc.txt");
/// NIST SP 800-38A F.5.1/F.5.3/F.5.5.
pub(crate) const SP800_38A_AES_CTR: Source = source!("rfc/sp800-38a-aes-ctr.txt");
/// RFC 3686 section 6.
pub(crate) const RFC3686_AES_CTR: Source = source!("rfc/rfc3686-aes-ctr.txt");
/// RFC 2410 (the definition; the RFC has no vectors).
pub(crate) const RFC2410_NULL: Source = source!("rfc/rfc2410-null.txt");
/// RFC 8439 section 2.8.2 and appendix A.5.
pub(crate) const RFC8439_CHACHA20_POLY1305: Source = source!("rfc/rfc8439-chacha20-poly1305.txt");
/// RFC 1321 appendix A.5.
pub(crate) const RFC1321_MD5: Source = source!("rfc/rfc1321-md5.txt");
/// RFC 2202 (HMAC-MD5, HMAC-SHA-1).
pub(crate) const RFC2202_HMAC: Source = source!("rfc/rfc2202-hmac.txt");
/// RFC 4231 (HMAC-SHA-256/384/512).
pub(crate) const RFC4231_HMAC_SHA2: Source = source!("rfc/rfc4231-hmac-sha2.txt");
/// RFC 7748 sections 5.2 and 6.1 (X25519).
pub(crate) const RFC7748_X25519: Source = source!("rfc/rfc7748-x25519.txt");
/// RFC 8032 section 7.1, TEST 1 to 3 (Ed25519).
pub(crate) const RFC8032_ED25519: Source = source!("rfc/rfc8032-ed25519.txt");
/// NIST CAVP SigGen15 (RSA PKCS#1 v1.5 signature generation), trimmed to 2048–4096-bit keys
/// and SHA-256/384/512 (see `vectors/tools/trim_siggen15.py`).
pub(crate) const NIST_RSA_SIGGEN15: Source = source!("nist/rsa/SigGen15_186-2.txt");
