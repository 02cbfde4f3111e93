//! prf, prf+ and the key schedules against NIST CAVP's IKEv2 KDF vectors, RFC 4231's
//! HMAC vectors (keys longer and shorter than the block), and Python's `hmac`.

use ike_core::crypto::{
    prf, prf_plus, rekey_skeyseed, skeyseed, ChildKeys, ChildSuite, CryptoError, Encr, IkeKeys, IkeSuite,
    Integ, KeMethod, Prf,
};

use crate::common::{fw, hex, python, to_hex};

/// NIST CAVP, SP 800-135 component test "IKEv2 KDF", HMAC-SHA-1, COUNT 0 (Ni, Nr 64 bits,
/// g^ir 256 bits, DKM 1056 bits), as quoted by libreswan's test suite
/// (lib/libswan/ike_alg_test_prf.c "CAVP: IKEv2 key derivation with HMAC-SHA1", and the
/// DKM(Child SA) values in programs/cavp). NIST's vectors are public domain.
struct Cavp {
    ni: Vec<u8>,
    nr: Vec<u8>,
    gir: Vec<u8>,
    gir_new: Vec<u8>,
    spi_i: [u8; 8],
    spi_r: [u8; 8],
    skeyseed: Vec<u8>,
    dkm: Vec<u8>,
    dkm_child: Vec<u8>,
    dkm_child_dh: Vec<u8>,
    skeyseed_rekey: Vec<u8>,
}

fn cavp_sha1() -> Cavp {
    Cavp {
        ni: hex("32b50d5f4a3763f3"),
        nr: hex("9206a04b26564cb1"),
        gir: hex("4b2c1f971981a8ad8d0abeafabf38cf75fc8349c148142465ed9c8b516b8be52"),
        gir_new: hex("863f3c9d06efd39d2b907b97f8699e5dd5251ef64a2a176f36ee40c87d4f9330"),
        spi_i: hex("34c9e7c188868785").try_into().unwrap(),
        spi_r: hex("3ff77d760d2b2199").try_into().unwrap(),
        skeyseed: hex("a9a7b222b59f8f48645f28a1db5b5f5d7479cba7"),
        dkm: hex(
            "a14293677cc80ff8f9cc0eee30d895da9d8f405666e30ef0dfcb63c634a46002a2a63080e514a062768b76606f9fa5e9
             92204fc5a670bde3f10d6b027113936a5c55b648a194ae587b0088d52204b702c979fa280870d2ed41efa9c549fd1119
             8af1670b143d384bd275c5f594cf266b05ebadca855e4249520a441a81157435a7a56cc4",
        ),
        dkm_child: hex(
            "8059e3ee8810e6c3a91bc8bcd2a7a41151b8d0e6ae239c7b38093ad85ef4c5811a8e7b5d1cdabd9560b2d5e092d1f24e
             2d4b85eccdf0ad0dc9abd94b51ee71814ca6dbc8bb51b6309f5b9545c7eb35cf5580b1e521a8fe20754a2d883ba0c2cf
             285f524aea6545b33106bc03e614296d319d41d4b50b3f510b1c0a22f3e664994d234cb4",
        ),
        dkm_child_dh: hex(
            "bb43244c1860ad65ee1e211ffe8bb3661750c8f89cb9f547df7f4fa61d37301628190e38c66232eab4b3ab14c400a519
             7dd3730ed4820a8a10394d51e1c0400052f63ebd36b0e7ef53aaed31eba4a5080d7d4b5666023a8bbb5ffb7857240f9a
             05884d1b7d2f933708450b7b3288f1fc863ab49fa901227cffc06e27899c7054d56fd74c",
        ),
        skeyseed_rekey: hex("63e81194946ebd05df7df5ebf5d8750056bf1f1d"),
    }
}

#[test]
fn cavp_ikev2_kdf_sha1() {
    let fw = fw();
    let v = cavp_sha1();
    let seed = skeyseed(&fw, Prf::HmacSha1, &v.ni, &v.nr, &v.gir).unwrap();
    assert_eq!(to_hex(&seed), to_hex(&v.skeyseed), "SKEYSEED");
    let stream = [&v.ni[..], &v.nr, &v.spi_i, &v.spi_r].concat();
    let dkm = prf_plus(&fw, Prf::HmacSha1, &seed, &stream, v.dkm.len()).unwrap();
    assert_eq!(to_hex(&dkm), to_hex(&v.dkm), "DKM");
    let sk_d = &v.dkm[..20];
    let ninr = [&v.ni[..], &v.nr].concat();
    let child = prf_plus(&fw, Prf::HmacSha1, sk_d, &ninr, v.dkm_child.len()).unwrap();
    assert_eq!(to_hex(&child), to_hex(&v.dkm_child), "DKM(Child SA)");
    let child_dh =
        prf_plus(&fw, Prf::HmacSha1, sk_d, &[&v.gir_new[..], &ninr].concat(), v.dkm_child.len()).unwrap();
    assert_eq!(to_hex(&child_dh), to_hex(&v.dkm_child_dh), "DKM(Child SA D-H)");
    let rekey = rekey_skeyseed(&fw, Prf::HmacSha1, sk_d, &v.gir_new, &v.ni, &v.nr).unwrap();
    assert_eq!(to_hex(&rekey), to_hex(&v.skeyseed_rekey), "SKEYSEED(Rekey)");
}

/// The same vector through the key schedule's types: the seven keys are DKM's pieces in
/// RFC 7296 §2.14's order, the CHILD_SA keys KEYMAT's in §2.17's.
#[test]
fn cavp_vector_split_into_sa_keys() {
    let fw = fw();
    let v = cavp_sha1();
    let gcm = Encr::AesGcm16 { key_len: 16 };
    let suite = IkeSuite::new(gcm, None, Prf::HmacSha1, KeMethod::X25519).unwrap();
    // 3 × 20 (SK_d, SK_pi, SK_pr) + 2 × (16 + 4 salt): within the vector's 132 bytes.
    assert_eq!(IkeKeys::dkm_len(&suite), 100);
    let keys = IkeKeys::new_sa(&fw, &suite, &v.gir, &v.ni, &v.nr, &v.spi_i, &v.spi_r).unwrap();
    let d = &v.dkm;
    assert_eq!(&keys.sk_d[..], &d[..20]);
    assert!(keys.sk_ai.is_empty() && keys.sk_ar.is_empty(), "no SK_a with an AEAD");
    assert_eq!(&keys.sk_ei[..], &d[20..40]);
    assert_eq!(&keys.sk_er[..], &d[40..60]);
    assert_eq!(&keys.sk_pi[..], &d[60..80]);
    assert_eq!(&keys.sk_pr[..], &d[80..100]);

    let cbc = ChildSuite::new(Encr::AesCbc { key_len: 16 }, Some(Integ::HmacSha256_128)).unwrap();
    let c = ChildKeys::derive(&fw, Prf::HmacSha1, &keys.sk_d, &cbc, None, &v.ni, &v.nr).unwrap();
    let k = &v.dkm_child;
    assert_eq!((&c.encr_i[..], &c.integ_i[..]), (&k[..16], &k[16..48]), "initiator's direction first");
    assert_eq!((&c.encr_r[..], &c.integ_r[..]), (&k[48..64], &k[64..96]));
    let gcm_child = ChildSuite::new(gcm, None).unwrap();
    let c = ChildKeys::derive(&fw, Prf::HmacSha1, &keys.sk_d, &gcm_child, Some(&v.gir_new), &v.ni, &v.nr)
        .unwrap();
    let k = &v.dkm_child_dh;
    assert_eq!((&c.encr_i[..], &c.encr_r[..]), (&k[..20], &k[20..40]), "key ‖ salt, PFS");
    assert!(c.integ_i.is_empty() && c.integ_r.is_empty());

    // The rekeyed IKE SA: SKEYSEED from the old SK_d, then the split with the new SPIs.
    let new = keys.rekeyed(&fw, Prf::HmacSha1, &suite, &v.gir_new, &v.ni, &v.nr, &v.spi_i, &v.spi_r).unwrap();
    let stream = [&v.ni[..], &v.nr, &v.spi_i, &v.spi_r].concat();
    let want = prf_plus(&fw, Prf::HmacSha1, &v.skeyseed_rekey, &stream, 20).unwrap();
    assert_eq!(&new.sk_d[..], &want[..]);
}

/// RFC 4231: HMAC-SHA-256 and -512 with a 4-byte key (test case 2) and a 131-byte key,
/// longer than the block (test case 6): ocf takes HMAC keys of any length, as IKE needs.
#[test]
fn prf_takes_keys_of_any_length() {
    let fw = fw();
    let jefe = prf(&fw, Prf::HmacSha256, b"Jefe", b"what do ya want for nothing?").unwrap();
    assert_eq!(to_hex(&jefe), "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    let long_key = [0xaa; 131];
    let msg = b"Test Using Larger Than Block-Size Key - Hash Key First";
    let h = prf(&fw, Prf::HmacSha256, &long_key, msg).unwrap();
    assert_eq!(to_hex(&h), "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
    let h = prf(&fw, Prf::HmacSha512, &long_key, msg).unwrap();
    assert_eq!(
        to_hex(&h),
        "80b24263c7c1a3ebb71493c1dd7be8b49b46d1f41b4aeec1121b013783f8f352\
         6b56d037e05f2598bd0fd2215d6a1e5295e64f73f63f0aec8b915a985d786598"
    );
}

#[test]
fn prf_plus_stops_at_255_blocks() {
    let fw = fw();
    assert_eq!(prf_plus(&fw, Prf::HmacSha256, b"k", b"s", 255 * 32).unwrap().len(), 255 * 32);
    assert_eq!(
        prf_plus(&fw, Prf::HmacSha256, b"k", b"s", 255 * 32 + 1).unwrap_err(),
        CryptoError::PrfPlusTooLong { asked: 255 * 32 + 1, max: 255 * 32 }
    );
}

/// The SHA-2 key schedules against Python's `hmac` (an independent HMAC and our reading of
/// RFC 7296 §2.13-2.18 written out again), for every PRF, with IKE's real sizes: 32-byte
/// nonces, a 256-byte MODP g^ir, AES-CBC-256 with HMAC-SHA2-512-256 (the longest keys).
#[test]
fn sha2_key_schedules_match_python_hmac() {
    let fw = fw();
    let ni: Vec<u8> = (0..32).collect();
    let nr: Vec<u8> = (100..132).collect();
    let gir: Vec<u8> = (0..256u32).map(|i| (i * 7 + 3) as u8).collect();
    let gir_new: Vec<u8> = (0..32u32).map(|i| (i * 13 + 1) as u8).collect();
    let (spi_i, spi_r) = ([1, 2, 3, 4, 5, 6, 7, 8], [9, 10, 11, 12, 13, 14, 15, 16]);
    let script = r#"
import hmac, hashlib, sys
h = getattr(hashlib, sys.argv[1])
ni, nr, gir, girn, spii, spir = (bytes.fromhex(a) for a in sys.argv[2:8])
ike_len, child_len, plen = int(sys.argv[8]), int(sys.argv[9]), int(sys.argv[10])
prf = lambda k, s: hmac.new(k, s, h).digest()
def plus(k, s, n):
    out, t, i = b"", b"", 1
    while len(out) < n:
        t = prf(k, t + s + bytes([i])); out += t; i += 1
    return out[:n]
seed = prf(ni + nr, gir)
dkm = plus(seed, ni + nr + spii + spir, ike_len)
skd = dkm[:plen]
child = plus(skd, girn + ni + nr, child_len)
rekey = prf(skd, girn + ni + nr)
print(" ".join(x.hex() for x in (dkm, child, rekey)))
"#;
    for (prf_alg, name) in
        [(Prf::HmacSha256, "sha256"), (Prf::HmacSha384, "sha384"), (Prf::HmacSha512, "sha512")]
    {
        let encr = Encr::AesCbc { key_len: 32 };
        let integ = Some(Integ::HmacSha512_256);
        let suite = IkeSuite::new(encr, integ, prf_alg, KeMethod::Modp2048).unwrap();
        let child_suite = ChildSuite::new(encr, integ).unwrap();
        let args: Vec<String> = [name.to_string()]
            .into_iter()
            .chain([&ni, &nr, &gir, &gir_new].map(|b| to_hex(b)))
            .chain([to_hex(&spi_i), to_hex(&spi_r)])
            .chain([IkeKeys::dkm_len(&suite), 2 * (32 + 64), prf_alg.output_len()].map(|n| n.to_string()))
            .collect();
        let Some(out) = python(script, &args) else { return };
        let want: Vec<&str> = out.split(' ').collect();
        let keys = IkeKeys::new_sa(&fw, &suite, &gir, &ni, &nr, &spi_i, &spi_r).unwrap();
        let got = [&keys.sk_d, &keys.sk_ai, &keys.sk_ar, &keys.sk_ei, &keys.sk_er, &keys.sk_pi, &keys.sk_pr]
            .map(|k| to_hex(k))
            .concat();
        assert_eq!(got, want[0], "{name}: IKE SA keys");
        assert_eq!((keys.sk_ai.len(), keys.sk_ei.len(), keys.sk_pi.len()), (64, 32, prf_alg.output_len()));
        let c = ChildKeys::derive(&fw, prf_alg, &keys.sk_d, &child_suite, Some(&gir_new), &ni, &nr).unwrap();
        let got = [&c.encr_i, &c.integ_i, &c.encr_r, &c.integ_r].map(|k| to_hex(k)).concat();
        assert_eq!(got, want[1], "{name}: CHILD_SA KEYMAT with PFS");
        let rekey = rekey_skeyseed(&fw, prf_alg, &keys.sk_d, &gir_new, &ni, &nr).unwrap();
        assert_eq!(to_hex(&rekey), want[2], "{name}: rekeyed SKEYSEED");
    }
}

/// CHILD_SA keys come out with the lengths ipsecd's setkey takes (`EncAlg::key_lens`,
/// `AuthAlg::key_lens` in ipsec-core's control protocol).
#[test]
fn child_keys_have_ipsecd_lengths() {
    use ipsec_core::control::{AuthAlg, EncAlg};
    let fw = fw();
    let cases = [
        (Encr::AesGcm16 { key_len: 16 }, None, EncAlg::AesGcm16, None),
        (Encr::AesGcm16 { key_len: 32 }, None, EncAlg::AesGcm16, None),
        (Encr::ChaCha20Poly1305, None, EncAlg::ChaCha20Poly1305, None),
        (
            Encr::AesCbc { key_len: 16 },
            Some(Integ::HmacSha256_128),
            EncAlg::AesCbc,
            Some(AuthAlg::HmacSha256),
        ),
        (
            Encr::AesCbc { key_len: 32 },
            Some(Integ::HmacSha384_192),
            EncAlg::AesCbc,
            Some(AuthAlg::HmacSha384),
        ),
        (
            Encr::AesCbc { key_len: 32 },
            Some(Integ::HmacSha512_256),
            EncAlg::AesCbc,
            Some(AuthAlg::HmacSha512),
        ),
    ];
    for (encr, integ, enc_alg, auth_alg) in cases {
        let suite = ChildSuite::new(encr, integ).unwrap();
        let c = ChildKeys::derive(&fw, Prf::HmacSha256, &[7; 32], &suite, None, &[1; 32], &[2; 32]).unwrap();
        for k in [&c.encr_i, &c.encr_r] {
            assert!(enc_alg.key_lens().contains(&k.len()), "{encr:?}: {} bytes", k.len());
        }
        for k in [&c.integ_i, &c.integ_r] {
            match auth_alg {
                Some(a) => assert_eq!(k.len(), a.key_len(), "{integ:?}"),
                None => assert!(k.is_empty()),
            }
        }
        assert_ne!(&c.encr_i[..], &c.encr_r[..], "each direction its own key");
    }
}
