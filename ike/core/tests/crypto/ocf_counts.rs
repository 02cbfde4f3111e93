//! Every operation is an ocf request: the soft driver's counters grow by exactly the
//! requests each call makes, so ocf's statistics, profile and cost model see IKE.

use ike_core::crypto::{
    encapsulate, natd_hash, prf, prf_plus, psk_auth, Encr, Integ, KeMethod, KeyShare, Prf, SkCipher,
};

use crate::common::fw;

fn ops(fw: &ocf::Framework) -> u64 {
    fw.driver_stats(ocf_soft::NAME).unwrap().ops
}

/// Runs `f` and returns how many requests the driver served meanwhile.
fn count(fw: &ocf::Framework, f: impl FnOnce()) -> u64 {
    let before = ops(fw);
    f();
    ops(fw) - before
}

#[test]
fn each_call_is_counted_by_ocf() {
    let fw = fw();
    assert_eq!(count(&fw, || drop(prf(&fw, Prf::HmacSha256, b"key", b"data").unwrap())), 1);
    assert_eq!(
        count(&fw, || drop(prf_plus(&fw, Prf::HmacSha256, b"key", b"seed", 65).unwrap())),
        3,
        "3 blocks"
    );
    // Two HMACs: the padded key, then the AUTH value.
    assert_eq!(count(&fw, || drop(psk_auth(&fw, Prf::HmacSha256, &[1; 16], b"octets").unwrap())), 2);
    let mut share = None;
    // X25519: the random private key, and PublicKey.
    assert_eq!(count(&fw, || share = Some(KeyShare::generate(&fw, KeMethod::X25519).unwrap())), 2);
    // The others: GenerateKey and PublicKey.
    assert_eq!(count(&fw, || drop(KeyShare::generate(&fw, KeMethod::Ecp256).unwrap())), 2);
    let share = share.unwrap();
    let mut reply = None;
    assert_eq!(
        count(&fw, || reply = Some(encapsulate(&fw, KeMethod::X25519, share.public_value()).unwrap())),
        3
    );
    let (ke_r, _) = reply.unwrap();
    assert_eq!(count(&fw, || drop(share.decapsulate(&ke_r).unwrap())), 1, "Derive");
    assert_eq!(count(&fw, || drop(natd_hash(&fw, &[1; 8], &[0; 8], "192.0.2.1:500".parse().unwrap()))), 1);

    let gcm = SkCipher::new(&fw, Encr::AesGcm16 { key_len: 16 }, None, &[3; 20], &[]).unwrap();
    let mut body = Vec::new();
    assert_eq!(count(&fw, || body = gcm.seal(&[0; 32], b"payloads").unwrap()), 1, "AEAD: the counter IV");
    assert_eq!(count(&fw, || drop(gcm.open(&[0; 32], &body).unwrap())), 1);
    let cbc =
        SkCipher::new(&fw, Encr::AesCbc { key_len: 16 }, Some(Integ::HmacSha256_128), &[3; 16], &[4; 32])
            .unwrap();
    assert_eq!(
        count(&fw, || drop(cbc.seal(&[0; 32], b"payloads").unwrap())),
        2,
        "CBC: a random IV, then seal"
    );
}
