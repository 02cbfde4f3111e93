//! Key exchange through ocf: RFC 5903 §8 (ECP-256, ECP-384) and RFC 7748 §6.1 (X25519)
//! known answers with fixed private keys, MODP-2048 against Python's `pow`, and the peer
//! values every method must refuse.

use ike_core::crypto::{encapsulate, CryptoError, KeMethod, KeyShare};
use ocf::PrivateKey;

use crate::common::{fw, hex, python, to_hex};

/// RFC 5903 §8.1, the 256-bit random ECP group: i, g^i, r, g^r and g^ir's x coordinate.
/// The KE data is x ‖ y (§7).
#[test]
fn rfc5903_ecp256() {
    let fw = fw();
    let i = hex("C88F01F5 10D9AC3F 70A292DA A2316DE5 44E9AAB8 AFE84049 C62A9C57 862D1433");
    let gi = hex("DAD0B653 94221CF9 B051E1FE CA5787D0 98DFE637 FC90B9EF 945D0C37 72581180
         5271A046 1CDB8252 D61F1C45 6FA3E59A B1F45B33 ACCF5F58 389E0577 B8990BB3");
    let r = hex("C6EF9C5D 78AE012A 011164AC B397CE20 88685D8F 06BF9BE0 B283AB46 476BEE53");
    let gr = hex("D12DFB52 89C8D4F8 1208B702 70398C34 2296970A 0BCCB74C 736FC755 4494BF63
         56FBF3CA 366CC23E 8157854C 13C58D6A AC23F046 ADA30F83 53E74F33 039872AB");
    let gir = hex("D6840F6B 42F6EDAF D13116E0 E1256520 2FEF8E9E CE7DCE03 812464D0 4B9442DE");
    let initiator = KeyShare::from_private_key(&fw, KeMethod::Ecp256, PrivateKey::raw(&i)).unwrap();
    assert_eq!(to_hex(initiator.public_value()), to_hex(&gi), "KEi = g^i as x ‖ y");
    let responder = KeyShare::from_private_key(&fw, KeMethod::Ecp256, PrivateKey::raw(&r)).unwrap();
    assert_eq!(to_hex(responder.public_value()), to_hex(&gr));
    assert_eq!(to_hex(&initiator.decapsulate(&gr).unwrap()), to_hex(&gir));
    assert_eq!(to_hex(&responder.decapsulate(&gi).unwrap()), to_hex(&gir));
}

/// RFC 5903 §8.2, the 384-bit random ECP group (the initiator's side: i, g^i, g^r, g^ir).
#[test]
fn rfc5903_ecp384() {
    let fw = fw();
    let i = hex("099F3C70 34D4A2C6 99884D73 A375A67F 7624EF7C 6B3C0F16 0647B674 14DCE655
         E35B5380 41E649EE 3FAEF896 783AB194");
    let gi = hex("667842D7 D180AC2C DE6F74F3 7551F557 55C7645C 20EF73E3 1634FE72 B4C55EE6
         DE3AC808 ACB4BDB4 C88732AE E95F41AA
         9482ED1F C0EEB9CA FC498462 5CCFC23F 65032149 E0E144AD A0241815 35A0F38E
         EB9FCFF3 C2C947DA E69B4C63 4573A81C");
    let gr = hex("E558DBEF 53EECDE3 D3FCCFC1 AEA08A89 A987475D 12FD950D 83CFA417 32BC509D
         0D1AC43A 0336DEF9 6FDA41D0 774A3571
         DCFBEC7A ACF31964 72169E83 8430367F 66EEBE3C 6E70C416 DD5F0C68 759DD1FF
         F83FA401 42209DFF 5EAAD96D B9E6386C");
    let gir = hex("11187331 C279962D 93D60424 3FD592CB 9D0A926F 422E4718 7521287E 7156C5C4
         D6031355 69B9E9D0 9CF5D4A2 70F59746");
    let initiator = KeyShare::from_private_key(&fw, KeMethod::Ecp384, PrivateKey::raw(&i)).unwrap();
    assert_eq!(to_hex(initiator.public_value()), to_hex(&gi));
    assert_eq!(to_hex(&initiator.decapsulate(&gr).unwrap()), to_hex(&gir));
}

/// RFC 7748 §6.1: Alice's and Bob's keys and their shared secret.
#[test]
fn rfc7748_x25519() {
    let fw = fw();
    let a = hex("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a");
    let a_pub = "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a";
    let b = hex("5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb");
    let b_pub = "de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f";
    let k = "4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742";
    let alice = KeyShare::from_private_key(&fw, KeMethod::X25519, PrivateKey::raw(&a)).unwrap();
    let bob = KeyShare::from_private_key(&fw, KeMethod::X25519, PrivateKey::raw(&b)).unwrap();
    assert_eq!(to_hex(alice.public_value()), a_pub);
    assert_eq!(to_hex(bob.public_value()), b_pub);
    assert_eq!(to_hex(&alice.decapsulate(&hex(b_pub)).unwrap()), k);
    assert_eq!(to_hex(&bob.decapsulate(&hex(a_pub)).unwrap()), k);
}

/// generate → encapsulate → decapsulate gives both sides one secret, of the method's
/// length, for every method; two exchanges give two secrets.
#[test]
fn generate_encapsulate_decapsulate_agree() {
    let fw = fw();
    for m in [KeMethod::X25519, KeMethod::Ecp256, KeMethod::Ecp384, KeMethod::Modp2048] {
        let share = KeyShare::generate(&fw, m).unwrap();
        assert_eq!(share.public_value().len(), m.public_len(), "{m:?}");
        let (ke_r, secret_r) = encapsulate(&fw, m, share.public_value()).unwrap();
        assert_eq!(ke_r.len(), m.public_len());
        let secret_i = share.decapsulate(&ke_r).unwrap();
        assert_eq!(secret_i.len(), m.secret_len(), "{m:?}");
        assert_eq!(&secret_i[..], &secret_r[..], "{m:?}");
        let (_, other) = encapsulate(&fw, m, share.public_value()).unwrap();
        assert_ne!(&other[..], &secret_r[..], "{m:?}: a fresh key pair per exchange");
    }
}

/// MODP-2048 against Python's `pow` over RFC 3526's prime: the public value and g^ir are
/// big-endian, zero-padded to 256 bytes (x = 1 makes g^x = 2, nearly all padding).
#[test]
fn modp2048_matches_python_pow() {
    let fw = fw();
    let script = r#"
import sys
p = int("FFFFFFFFFFFFFFFFC90FDAA22168C234C4C6628B80DC1CD129024E088A67CC74020BBEA63B139B22514A08798E3404DDEF9519B3CD3A431B302B0A6DF25F14374FE1356D6D51C245E485B576625E7EC6F44C42E9A637ED6B0BFF5CB6F406B7EDEE386BFB5A899FA5AE9F24117C4B1FE649286651ECE45B3DC2007CB8A163BF0598DA48361C55D39A69163FA8FD24CF5F83655D23DCA3AD961C62F356208552BB9ED529077096966D670C354E4ABC9804F1746C08CA18217C32905E462E36CE3BE39E772C180E86039B2783A2EC07A28FB5C55DF06F4C52C9DE2BCBF6955817183995497CEA956AE515D2261898FA051015728E5A8AACAA68FFFFFFFFFFFFFFFF", 16)
x, y = int(sys.argv[1], 16), int(sys.argv[2], 16)
print(pow(2, x, p).to_bytes(256, "big").hex(), pow(y, x, p).to_bytes(256, "big").hex())
"#;
    let peer = KeyShare::generate(&fw, KeMethod::Modp2048).unwrap();
    for x in [hex("01"), hex("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789")] {
        let share = KeyShare::from_private_key(&fw, KeMethod::Modp2048, PrivateKey::raw(&x)).unwrap();
        let Some(out) = python(script, &[to_hex(&x), to_hex(peer.public_value())]) else { return };
        let (want_pub, want_secret) = out.split_once(' ').unwrap();
        assert_eq!(to_hex(share.public_value()), want_pub);
        assert_eq!(to_hex(&share.decapsulate(peer.public_value()).unwrap()), want_secret);
    }
}

#[test]
fn bad_peer_values_are_refused() {
    let fw = fw();
    // Lengths: ocf's SEC 1 form (65 bytes) is not IKE's (64), nor is anything else.
    let p256 = KeyShare::generate(&fw, KeMethod::Ecp256).unwrap();
    let mut sec1 = vec![0x04];
    sec1.extend_from_slice(p256.public_value());
    for bad in [&sec1[..], &sec1[..63], &[]] {
        assert_eq!(
            p256.decapsulate(bad).unwrap_err(),
            CryptoError::KeDataLength { method: KeMethod::Ecp256.id(), got: bad.len(), expected: 64 }
        );
    }
    // A point off the curve (y changed).
    let mut off = p256.public_value().to_vec();
    off[63] ^= 1;
    assert_eq!(p256.decapsulate(&off).unwrap_err(), CryptoError::KePointNotOnCurve);
    assert_eq!(encapsulate(&fw, KeMethod::Ecp256, &off).unwrap_err(), CryptoError::KePointNotOnCurve);
    let p384 = KeyShare::generate(&fw, KeMethod::Ecp384).unwrap();
    assert_eq!(p384.decapsulate(&[0xaa; 96]).unwrap_err(), CryptoError::KePointNotOnCurve);

    // X25519: u = 0 and u = 1 have small order: the secret would be zero (RFC 7748 §6.1).
    let x = KeyShare::generate(&fw, KeMethod::X25519).unwrap();
    let mut one = [0u8; 32];
    one[0] = 1;
    for small in [[0u8; 32], one] {
        assert_eq!(x.decapsulate(&small).unwrap_err(), CryptoError::KeZeroSharedSecret);
    }

    // MODP: 0, 1 and p-1 give secrets an attacker knows; p and above are not group values.
    let m = KeyShare::generate(&fw, KeMethod::Modp2048).unwrap();
    let p = ocf::ModpGroup::Modp2048.prime();
    let mut p_minus_1 = p.to_vec();
    p_minus_1[255] -= 1;
    let mut v1 = vec![0u8; 256];
    v1[255] = 1;
    for bad in [vec![0u8; 256], v1, p_minus_1, p.to_vec(), vec![0xff; 256]] {
        assert_eq!(m.decapsulate(&bad).unwrap_err(), CryptoError::KeValueOutOfRange);
    }
    assert!(matches!(m.decapsulate(&[2; 255]), Err(CryptoError::KeDataLength { got: 255, .. })));
}
