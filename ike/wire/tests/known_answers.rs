//! Known answers: real IKE_SA_INIT requests, decoded field by field and re-emitted to the
//! same bytes.
//!
//! Source of both messages: the rusticata ipsec-parser crate's tests (MIT or Apache-2.0,
//! github.com/rusticata/ipsec-parser): `tests/ikev2.rs`'s `IKEV2_MSG` (captured with the
//! 4-byte non-ESP marker of port 4500 in front, dropped here) and `assets/ike-sa-init-req.bin`.

mod common;

use common::hex;
use ike_wire::ids::{DhId, EncrId, ExchangeType, IntegId, PayloadType, PrfId, ProtocolId, TransformType};
use ike_wire::sa::Transform;
use ike_wire::{Message, Payload};

/// ipsec-parser's `IKEV2_MSG`, without its leading 4 zero bytes (the non-ESP marker).
const FOUR_PROPOSALS: &str = "
    bca1937a7c2ff5b9 0000000000000000 21202208 00000000 0000012c
    220000a4 02000024 01010003 0300000c 01000014 800e0080 03000008 02000005 00000008 0400001c
             02000024 02010003 0300000c 01000014 800e0080 03000008 02000005 00000008 04000013
             0200002c 03010004 0300000c 0100000d 800e0080 03000008 0300000c 03000008 02000005
                      00000008 0400001c
             0000002c 04010004 0300000c 0100000d 800e0080 03000008 0300000c 03000008 02000005
                      00000008 04000013
    28000048 001c0000 4d23b8f22c03ae3ab40af9fa76c23c7ba6c56981e13c32fbc36954c87a96cbfa
                      34637c6f31b650ce5d8717005ce793c2eeaff1c566280811d942d1b8e80268bb
    00000024 99e2a373cc44ad10fb78dda25206a4a9b7558e0d8269799c6800362c46a0bf7b";

/// ipsec-parser's `assets/ike-sa-init-req.bin`.
const MODP1024: &str = "
    54c184961bc3fd77 0000000000000000 21202208 00000000 00000100
    22000038 00000034 01010005 0300000c 0100000c 800e0080 03000008 01000003 03000008 02000002
                      03000008 03000002 00000008 04000002
    28000088 00020000 c72c1cfdccbb5b0dc0f654861d4aa3987293bd41e9d2dc9b2b806c26c1dcf880
                      908f6a8a3c7065b40bf458c86787c135c570c8df48b740f0ed283d73056272ba
                      f68491a3443e159c5cd14c15a15cf2fc86459dc80b6e76ca01fa458fc8828c05
                      d03dbb37bbbeb882d51b3412dd87cf68322ff4bb40b6c4b66191bc580d9fe1a8
    00000024 4b98c2d7d3d81e9f52b0ca4e054581 7d94560249583970190d97e44002ce1752";

fn aes128(encr: EncrId) -> Transform {
    Transform::encr(encr, Some(128))
}

#[test]
fn sa_init_with_four_proposals() {
    let bytes = hex(FOUR_PROPOSALS);
    assert_eq!(bytes.len(), 300);
    let msg = Message::parse(&bytes).unwrap();
    assert_eq!(msg.header.spi_i, 0xbca1937a7c2ff5b9);
    assert_eq!(msg.header.spi_r, 0);
    assert_eq!(msg.header.exchange_type, ExchangeType::IKE_SA_INIT);
    assert!(msg.header.initiator && !msg.header.response);
    assert_eq!(msg.header.message_id, 0);
    let Payload::Sa(sa) = &msg.payloads[0] else { panic!("SA first") };
    let brainpool256 = DhId(28);
    let expect = [
        (
            1,
            vec![
                aes128(EncrId::AES_GCM_16),
                Transform::prf(PrfId::HMAC_SHA2_256),
                Transform::ke(brainpool256),
            ],
        ),
        (
            2,
            vec![
                aes128(EncrId::AES_GCM_16),
                Transform::prf(PrfId::HMAC_SHA2_256),
                Transform::ke(DhId::ECP_256),
            ],
        ),
        (
            3,
            vec![
                aes128(EncrId::AES_CTR),
                Transform::integ(IntegId::HMAC_SHA2_256_128),
                Transform::prf(PrfId::HMAC_SHA2_256),
                Transform::ke(brainpool256),
            ],
        ),
        (
            4,
            vec![
                aes128(EncrId::AES_CTR),
                Transform::integ(IntegId::HMAC_SHA2_256_128),
                Transform::prf(PrfId::HMAC_SHA2_256),
                Transform::ke(DhId::ECP_256),
            ],
        ),
    ];
    assert_eq!(sa.proposals.len(), 4);
    for (p, (num, transforms)) in sa.proposals.iter().zip(expect) {
        assert_eq!(p.number, num);
        assert_eq!(p.protocol, ProtocolId::IKE);
        assert!(p.spi.is_empty());
        assert_eq!(p.transforms, transforms);
    }
    let Payload::Ke(ke) = &msg.payloads[1] else { panic!("KE second") };
    assert_eq!(ke.group, brainpool256);
    assert_eq!(ke.data.len(), 64);
    assert_eq!(&ke.data[..4], &[0x4d, 0x23, 0xb8, 0xf2]);
    let Payload::Nonce(nonce) = &msg.payloads[2] else { panic!("Nonce third") };
    assert_eq!(nonce.0.len(), 32);
    assert_eq!(&nonce.0[..4], &[0x99, 0xe2, 0xa3, 0x73]);
    assert_eq!(msg.payloads.len(), 3);
    assert_eq!(msg.to_bytes().unwrap(), bytes);
}

#[test]
fn sa_init_modp1024() {
    let bytes = hex(MODP1024);
    assert_eq!(bytes.len(), 256);
    let msg = Message::parse(&bytes).unwrap();
    assert_eq!(msg.header.spi_i, 0x54c184961bc3fd77);
    assert_eq!(msg.header.exchange_type, ExchangeType::IKE_SA_INIT);
    assert!(msg.header.initiator);
    let types: Vec<_> = msg.payloads.iter().map(Payload::payload_type).collect();
    assert_eq!(types, [PayloadType::SA, PayloadType::KE, PayloadType::NONCE]);
    let Payload::Sa(sa) = &msg.payloads[0] else { panic!("SA first") };
    assert_eq!(sa.proposals.len(), 1);
    let p = &sa.proposals[0];
    assert_eq!((p.number, p.protocol), (1, ProtocolId::IKE));
    assert_eq!(
        p.transforms,
        [
            aes128(EncrId::AES_CBC),
            Transform::encr(EncrId::TRIPLE_DES, None),
            Transform::prf(PrfId::HMAC_SHA1),
            Transform::integ(IntegId::HMAC_SHA1_96),
            Transform::ke(DhId::MODP_1024),
        ]
    );
    assert_eq!(p.transforms[2].transform_type, TransformType::PRF);
    let Payload::Ke(ke) = &msg.payloads[1] else { panic!("KE second") };
    assert_eq!((ke.group, ke.data.len()), (DhId::MODP_1024, 128));
    let Payload::Nonce(nonce) = &msg.payloads[2] else { panic!("Nonce third") };
    assert_eq!(&nonce.0[..4], &[0x4b, 0x98, 0xc2, 0xd7]);
    assert_eq!(nonce.0.len(), 32);
    assert_eq!(msg.to_bytes().unwrap(), bytes);
}
