//! ike-wire against an independent implementation: scapy's IKEv2 layers
//! (scapy.contrib.ikev2) build an IKE_SA_INIT request and response and a chain of IKE_AUTH
//! payloads (tests/scapy/sa_init.py); ike-wire parses them into the values the script used,
//! and re-emits the same bytes.
//!
//! Needs target/peers-venv (scripts/setup installs it). Without it the test says so and
//! passes, unless CI is set, where it fails.

mod common;

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::hex;
use ike_wire::ids::{
    AuthMethod, CertEncoding, DhId, EncrId, ExchangeType, HashAlgorithm, IdType, NotifyType, PayloadType,
    PrfId, ProtocolId,
};
use ike_wire::sa::Transform;
use ike_wire::{emit_chain, parse_chain, Message, Payload};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The script's three messages, or None when the venv is missing outside CI.
fn scapy_messages() -> Option<(Vec<u8>, Vec<u8>, Vec<u8>)> {
    let python = repo_root().join("target/peers-venv/bin/python");
    let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0");
    if !python.exists() {
        assert!(!ci, "target/peers-venv is missing: run scripts/setup");
        eprintln!("skipped: target/peers-venv is missing (run scripts/setup)");
        return None;
    }
    let out = Command::new(python)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/scapy/sa_init.py"))
        .output()
        .expect("run python");
    assert!(out.status.success(), "sa_init.py failed: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).expect("utf-8");
    let mut lines = text.lines().map(|l| {
        let (_, h) = l.split_once(' ').expect("NAME HEX");
        hex(h)
    });
    Some((lines.next()?, lines.next()?, lines.next()?))
}

fn transforms(dh: DhId) -> Vec<Transform> {
    vec![
        Transform::encr(EncrId::AES_GCM_16, Some(256)),
        Transform::prf(PrfId::HMAC_SHA2_512),
        Transform::prf(PrfId::HMAC_SHA2_256),
        Transform::ke(dh),
    ]
}

#[test]
fn scapy_sa_init_request() {
    let Some((request, _, _)) = scapy_messages() else { return };
    let msg = Message::parse(&request).unwrap();
    assert_eq!(msg.header.spi_i, 0x0102030405060708);
    assert_eq!(msg.header.spi_r, 0);
    assert_eq!(msg.header.exchange_type, ExchangeType::IKE_SA_INIT);
    assert!(msg.header.initiator && !msg.header.response);
    assert_eq!(msg.header.message_id, 0);
    let types: Vec<_> = msg.payloads.iter().map(Payload::payload_type).collect();
    assert_eq!(
        types,
        [
            PayloadType::SA,
            PayloadType::KE,
            PayloadType::NONCE,
            PayloadType::NOTIFY,
            PayloadType::NOTIFY,
            PayloadType::NOTIFY,
            PayloadType::VENDOR_ID
        ]
    );
    let Payload::Sa(sa) = &msg.payloads[0] else { panic!("SA first") };
    assert_eq!(sa.proposals.len(), 2);
    for (p, (num, dh)) in sa.proposals.iter().zip([(1, DhId::CURVE25519), (2, DhId::ECP_256)]) {
        assert_eq!(p.number, num);
        assert_eq!(p.protocol, ProtocolId::IKE);
        assert!(p.spi.is_empty());
        assert_eq!(p.transforms, transforms(dh));
    }
    assert_eq!(sa.proposals[0].transforms[0].key_length(), Some(256));
    let Payload::Ke(ke) = &msg.payloads[1] else { panic!("KE second") };
    assert_eq!(ke.group, DhId::CURVE25519);
    assert_eq!(ke.data, (0..32).collect::<Vec<u8>>());
    let Payload::Nonce(nonce) = &msg.payloads[2] else { panic!("Nonce third") };
    assert_eq!(nonce.0, [0x11; 32]);
    assert_eq!(
        msg.notify(NotifyType::NAT_DETECTION_SOURCE_IP).unwrap().nat_detection_hash().unwrap(),
        [0x22; 20]
    );
    assert_eq!(
        msg.notify(NotifyType::NAT_DETECTION_DESTINATION_IP).unwrap().nat_detection_hash().unwrap(),
        [0x33; 20]
    );
    assert_eq!(
        msg.notify(NotifyType::SIGNATURE_HASH_ALGORITHMS).unwrap().signature_hash_algorithms().unwrap(),
        [HashAlgorithm::SHA2_256, HashAlgorithm::SHA2_384, HashAlgorithm::SHA2_512, HashAlgorithm::IDENTITY]
    );
    let Payload::VendorId(v) = &msg.payloads[6] else { panic!("Vendor ID last") };
    assert_eq!(v.0, b"ocf test");
    assert_eq!(msg.to_bytes().unwrap(), request);
}

#[test]
fn scapy_sa_init_response() {
    let Some((_, response, _)) = scapy_messages() else { return };
    let msg = Message::parse(&response).unwrap();
    assert_eq!(msg.header.spi_r, 0xa1a2a3a4a5a6a7a8);
    assert!(!msg.header.initiator && msg.header.response);
    let Payload::Sa(sa) = &msg.payloads[0] else { panic!("SA first") };
    assert_eq!(sa.proposals.len(), 1);
    assert_eq!(sa.proposals[0].number, 2);
    assert_eq!(sa.proposals[0].transforms, transforms(DhId::ECP_256));
    let Payload::Ke(ke) = &msg.payloads[1] else { panic!("KE second") };
    assert_eq!((ke.group, ke.data.as_slice()), (DhId::ECP_256, &[0x44; 64][..]));
    let Payload::Nonce(nonce) = &msg.payloads[2] else { panic!("Nonce third") };
    assert_eq!(nonce.0, [0x55; 48]);
    let Payload::CertReq(req) = &msg.payloads[3] else { panic!("CERTREQ fourth") };
    assert_eq!(req.encoding, CertEncoding::X509_SIGNATURE);
    assert_eq!(req.ca_hashes().unwrap(), [[0x66; 20]]);
    let frag = msg.notify(NotifyType::IKEV2_FRAGMENTATION_SUPPORTED).unwrap();
    assert!(frag.data.is_empty() && frag.spi.is_empty());
    assert_eq!(msg.payloads.len(), 5);
    assert_eq!(msg.to_bytes().unwrap(), response);
}

#[test]
fn scapy_auth_chain() {
    let Some((_, _, auth)) = scapy_messages() else { return };
    let chain = parse_chain(PayloadType::IDI, &auth).unwrap();
    let Payload::IdI(id) = &chain[0] else { panic!("IDi first") };
    assert_eq!((id.id_type, id.data.as_slice()), (IdType::FQDN, &b"moon.strongswan.org"[..]));
    let Payload::Auth(a) = &chain[1] else { panic!("AUTH second") };
    assert_eq!((a.method, a.data.as_slice()), (AuthMethod::PSK, &[0x77; 32][..]));
    let Payload::Notify(n) = &chain[2] else { panic!("N third") };
    assert_eq!((n.protocol, n.rekey_sa_spi().unwrap()), (ProtocolId::ESP, 0xc0ffee01));
    let Payload::TsI(tsi) = &chain[3] else { panic!("TSi fourth") };
    let ts = tsi.selectors[0];
    assert_eq!((ts.ip_protocol, ts.start_port, ts.end_port), (6, 0, 65535));
    assert_eq!((ts.start, ts.end), ("10.1.0.0".parse::<IpAddr>().unwrap(), "10.1.255.255".parse().unwrap()));
    let Payload::TsR(tsr) = &chain[4] else { panic!("TSr fifth") };
    assert_eq!(tsr.selectors[0].start, "192.0.2.1".parse::<IpAddr>().unwrap());
    let Payload::Delete(d) = &chain[5] else { panic!("D sixth") };
    assert_eq!((d.protocol, d.spis_u32().unwrap()), (ProtocolId::ESP, vec![1, 2]));
    assert_eq!(chain.len(), 6);
    assert_eq!(emit_chain(&chain).unwrap(), (PayloadType::IDI, auth));
}
