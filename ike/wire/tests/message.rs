//! Whole messages: every payload in one message and back, unknown payloads skipped or
//! refused by their critical bit, lengths that disagree refused with the variant naming
//! them, and the SK/SKF framing (associated data, in-place layout, fragments).

mod common;

use common::header;
use ike_wire::auth::Auth;
use ike_wire::cert::Cert;
use ike_wire::cp::{Cp, CpAttribute};
use ike_wire::delete::Delete;
use ike_wire::encrypted::{self, Encrypted, Fragment};
use ike_wire::id::Id;
use ike_wire::ids::*;
use ike_wire::ke::Ke;
use ike_wire::nonce::Nonce;
use ike_wire::notify::Notify;
use ike_wire::opaque::{Eap, VendorId};
use ike_wire::sa::{Proposal, Sa, Transform};
use ike_wire::ts::{TrafficSelector, Ts};
use ike_wire::{emit_chain, fragment, parse_chain, Error, Frame, Message, Payload, Sealing, Unknown};

fn every_cleartext_payload() -> Vec<Payload> {
    vec![
        Payload::Sa(Sa {
            proposals: vec![Proposal {
                number: 1,
                protocol: ProtocolId::ESP,
                spi: vec![0, 0, 0x10, 0],
                transforms: vec![
                    Transform::encr(EncrId::AES_CBC, Some(128)),
                    Transform::integ(IntegId::HMAC_SHA2_256_128),
                    Transform::esn(EsnId::NO),
                ],
            }],
        }),
        Payload::Ke(Ke { group: DhId::MODP_2048, data: vec![0x5a; 256] }),
        Payload::IdI(Id::new(IdType::IPV4_ADDR, vec![192, 0, 2, 1])),
        Payload::IdR(Id::new(IdType::RFC822_ADDR, &b"carol@strongswan.org"[..])),
        Payload::Cert(Cert { encoding: CertEncoding::X509_SIGNATURE, data: vec![0x30, 0x82, 0, 0] }),
        Payload::CertReq(Cert { encoding: CertEncoding::X509_SIGNATURE, data: vec![] }),
        Payload::Auth(Auth { method: AuthMethod::DIGITAL_SIGNATURE, data: vec![1; 70] }),
        Payload::Nonce(Nonce(vec![9; 16])),
        Payload::Notify(Notify::set_window_size(4)),
        Payload::Delete(Delete::ike()),
        Payload::VendorId(VendorId(vec![])),
        Payload::TsI(Ts { selectors: vec![TrafficSelector::any(false)] }),
        Payload::TsR(Ts { selectors: vec![TrafficSelector::any(true), TrafficSelector::any(false)] }),
        Payload::Cp(Cp {
            cfg_type: CfgType::REQUEST,
            attributes: vec![CpAttribute {
                attribute_type: CfgAttributeType::INTERNAL_IP6_ADDRESS,
                value: vec![],
            }],
        }),
        Payload::Eap(Eap(vec![2, 7, 0, 5, 1])),
        Payload::Unknown(Unknown { payload_type: PayloadType(200), critical: false, body: vec![1, 2, 3] }),
    ]
}

#[test]
fn every_payload_round_trips() {
    let mut payloads = every_cleartext_payload();
    payloads.push(Payload::Sk(Encrypted { inner: PayloadType::IDI, body: vec![0xee; 48] }));
    let msg = Message { header: header(ExchangeType::IKE_AUTH, true, false, 1), payloads };
    let bytes = msg.to_bytes().unwrap();
    assert_eq!(bytes.len(), msg.buffer_len());
    assert_eq!(u32::from_be_bytes(bytes[24..28].try_into().unwrap()) as usize, bytes.len());
    assert_eq!(bytes[16], PayloadType::SA.0);
    assert_eq!(Message::parse(&bytes).unwrap(), msg);
    // The chain alone, as inside an SK payload.
    let (first, chain) = emit_chain(&every_cleartext_payload()).unwrap();
    assert_eq!(first, PayloadType::SA);
    assert_eq!(parse_chain(first, &chain).unwrap(), every_cleartext_payload());
    assert_eq!(emit_chain(&[]).unwrap(), (PayloadType::NONE, vec![]));
}

fn nonce_message() -> Vec<u8> {
    Message {
        header: header(ExchangeType::INFORMATIONAL, true, false, 2),
        payloads: vec![Payload::Nonce(Nonce(vec![1; 16]))],
    }
    .to_bytes()
    .unwrap()
}

#[test]
fn unknown_payloads_by_critical_bit() {
    // Nonce, then an unknown type 250 with an empty body.
    let mut b = nonce_message();
    b[28] = 250;
    b.extend_from_slice(&[0, 0, 0, 4]);
    let len = b.len() as u32;
    b[24..28].copy_from_slice(&len.to_be_bytes());
    let msg = Message::parse(&b).unwrap();
    assert_eq!(
        msg.payloads[1],
        Payload::Unknown(Unknown { payload_type: PayloadType(250), critical: false, body: vec![] })
    );
    assert_eq!(msg.to_bytes().unwrap(), b);
    // The same with the critical bit: refused, naming the type.
    let n = b.len();
    b[n - 3] = 0x80;
    assert_eq!(Message::parse(&b), Err(Error::UnsupportedCriticalPayload { payload: PayloadType(250) }));
    // A known type's critical bit is ignored (RFC 7296 §3.2).
    let mut b = nonce_message();
    b[29] = 0x80;
    assert!(Message::parse(&b).is_ok());
}

#[test]
fn lengths_that_disagree() {
    let good = nonce_message();
    // Header length one past the datagram.
    let mut b = good.clone();
    b[27] += 1;
    assert_eq!(
        Message::parse(&b),
        Err(Error::LengthMismatch { length: good.len() as u32 + 1, datagram: good.len() })
    );
    // Payload length one past the end of the message.
    let mut b = good.clone();
    b[31] += 1;
    assert_eq!(
        Message::parse(&b),
        Err(Error::PayloadOverrun { payload: PayloadType::NONCE, length: 21, remaining: 20 })
    );
    // Zero-length payload.
    let mut b = good.clone();
    b[31] = 0;
    assert_eq!(Message::parse(&b), Err(Error::PayloadTooShort { payload: PayloadType::NONCE, length: 0 }));
    // A payload length shorter than its body leaves bytes behind the last payload.
    let mut b = good.clone();
    b[31] -= 1;
    assert_eq!(Message::parse(&b), Err(Error::NonceLength(15)));
    // The last payload names a next one, and no bytes are left for it.
    let mut b = good.clone();
    b[28] = PayloadType::NOTIFY.0;
    assert_eq!(Message::parse(&b), Err(Error::Truncated { what: "payload header", needed: 4, got: 0 }));
    // An SA payload whose proposal claims more than the payload holds (nested lengths).
    let sa = Message {
        header: header(ExchangeType::IKE_SA_INIT, true, false, 0),
        payloads: vec![Payload::Sa(Sa {
            proposals: vec![Proposal {
                number: 1,
                protocol: ProtocolId::IKE,
                spi: vec![],
                transforms: vec![Transform::ke(DhId::ECP_256)],
            }],
        })],
    };
    let mut b = sa.to_bytes().unwrap();
    b[35] += 4;
    assert_eq!(
        Message::parse(&b),
        Err(Error::SubstructureLength { what: "proposal", length: 20, remaining: 16 })
    );
    // Header only, Next Payload NONE: a valid empty message (an INFORMATIONAL liveness check
    // is SK-protected, but the codec takes an empty one).
    let empty = Message { header: header(ExchangeType::INFORMATIONAL, true, false, 3), payloads: vec![] };
    let b = empty.to_bytes().unwrap();
    assert_eq!(b.len(), 28);
    assert_eq!(Message::parse(&b).unwrap(), empty);
    assert_eq!(Message::parse(&b[..20]), Err(Error::Truncated { what: "IKE header", needed: 28, got: 20 }));
}

#[test]
fn sk_framing_and_sealing() {
    let hdr = header(ExchangeType::IKE_AUTH, true, false, 1);
    let (inner, plaintext) = emit_chain(&every_cleartext_payload()[2..4]).unwrap();
    assert_eq!(inner, PayloadType::IDI);
    // A stand-in cipher with an 8-byte IV and a 16-byte ICV whose "encryption" is the
    // identity: only the framing is under test.
    let padded = encrypted::pad(&plaintext, 16);
    assert_eq!(padded.len() % 16, 0);
    let body_len = 8 + padded.len() + 16;
    let mut s = Sealing::new(&hdr, &[], Frame::Sk { inner }, body_len).unwrap();
    assert_eq!(s.aad().len(), 28 + 4);
    assert_eq!(s.body_offset(), 32);
    let (aad, body) = s.split_mut();
    assert_eq!(aad[28], inner.0);
    assert_eq!(u32::from_be_bytes(aad[24..28].try_into().unwrap()) as usize, 32 + body_len);
    body[..8].fill(0x11);
    body[8..8 + padded.len()].copy_from_slice(&padded);
    body[8 + padded.len()..].fill(0x22);
    let bytes = s.into_bytes();
    let msg = Message::parse(&bytes).unwrap();
    assert_eq!(msg.aad_len(), Some(32));
    let sk = msg.encrypted().unwrap();
    assert_eq!(sk.inner, PayloadType::IDI);
    assert_eq!(&bytes[msg.aad_len().unwrap()..], &sk.body[..]);
    let decrypted = &sk.body[8..sk.body.len() - 16];
    let chain = encrypted::unpad(decrypted).unwrap();
    assert_eq!(parse_chain(sk.inner, chain).unwrap(), every_cleartext_payload()[2..4]);
    // SK anywhere but last is refused on emit, and by the walker on parse.
    let bad = Message {
        header: hdr,
        payloads: vec![Payload::Sk(Encrypted { inner, body: vec![] }), Payload::Nonce(Nonce(vec![0; 16]))],
    };
    assert_eq!(bad.to_bytes(), Err(Error::EncryptedNotLast));
    // With clear payloads before SK (RFC 7296 allows them), the AAD covers them too.
    let clear = [Payload::VendorId(VendorId(vec![1, 2, 3, 4]))];
    let s = Sealing::new(&hdr, &clear, Frame::Sk { inner }, 32).unwrap();
    assert_eq!(s.aad().len(), 28 + 8 + 4);
    assert_eq!(Message::parse(s.bytes()).unwrap().aad_len(), Some(40));
}

#[test]
fn skf_fragments() {
    let hdr = header(ExchangeType::IKE_AUTH, true, false, 1);
    let (inner, plaintext) = emit_chain(&every_cleartext_payload()).unwrap();
    let pieces = fragment::split(&plaintext, 200).unwrap();
    let total = pieces.len() as u16;
    assert_eq!(total as usize, plaintext.len().div_ceil(200));
    let mut reassembled = Vec::new();
    for (i, piece) in pieces.iter().enumerate() {
        let number = i as u16 + 1;
        let first = if number == 1 { inner } else { PayloadType::NONE };
        // "Encrypt" as the identity with no IV or ICV: framing only.
        let mut s = Sealing::new(&hdr, &[], Frame::Skf { inner: first, number, total }, piece.len()).unwrap();
        assert_eq!(s.aad().len(), 28 + 4 + 4);
        s.body_mut().copy_from_slice(piece);
        let msg = Message::parse(s.bytes()).unwrap();
        assert_eq!(msg.aad_len(), Some(36));
        let f = msg.fragment().unwrap();
        assert_eq!((f.number, f.total, f.inner), (number, total, first));
        reassembled.extend_from_slice(&f.body);
    }
    assert_eq!(parse_chain(inner, &reassembled).unwrap(), every_cleartext_payload());
    // Fragment numbers out of range, on emit and on parse.
    let bad = Message {
        header: hdr,
        payloads: vec![Payload::Skf(Fragment { number: 3, total: 2, inner, body: vec![] })],
    };
    assert_eq!(bad.to_bytes(), Err(Error::FragmentNumber { number: 3, total: 2 }));
    let mut b = Sealing::new(&hdr, &[], Frame::Skf { inner, number: 1, total: 1 }, 0).unwrap().into_bytes();
    b[33] = 0;
    assert_eq!(Message::parse(&b), Err(Error::FragmentNumber { number: 0, total: 1 }));
}
