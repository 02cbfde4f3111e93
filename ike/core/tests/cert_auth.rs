//! IKE_AUTH with certificates between two engines in memory: certificates made at test
//! time with `rcgen` (ECDSA P-256 and P-384 keys) and an RSA-2048 key from the openssl CLI;
//! both sides install the CHILD_SA, and a certificate from an unknown CA is refused on
//! either side with AUTHENTICATION_FAILED, an `AuthFailed` event saying why and the
//! `untrusted_certs` counter.

use std::process::Command;
use std::time::{Duration, Instant};

use ike_core::cert::{load_certificates, load_private_key, TrustStore};
use ike_core::config::{
    parse_proposals, AuthMethod, AuthRound, Child, ChildLifetimes, Connection, DpdAction, Fragmentation,
    Identity, IkeLifetimes, Mode, Protocol, StartAction, TrafficSelector,
};
use ike_core::credentials::{ConnCredentials, Credentials};
use ike_core::io::{Datagram, DownReason, Event, Output};
use ike_core::{Config, Ike, Settings};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose,
    SanType,
};

fn fw() -> ocf::Framework {
    let fw = ocf::Framework::new();
    ocf_soft::register(&fw).unwrap();
    fw
}

fn unix_now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs()
}

struct Ca {
    params: CertificateParams,
    key: KeyPair,
    pem: String,
}

fn ca(cn: &str) -> Ca {
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.distinguished_name = DistinguishedName::new();
    p.distinguished_name.push(DnType::OrganizationName, "ike-test");
    p.distinguished_name.push(DnType::CommonName, cn);
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.key_usages = vec![KeyUsagePurpose::KeyCertSign];
    let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let pem = p.self_signed(&key).unwrap().pem();
    Ca { params: p, key, pem }
}

/// An RSA-2048 key from `openssl genpkey`, PEM PKCS#8.
fn rsa_key() -> KeyPair {
    let out = Command::new("openssl")
        .args(["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"])
        .output()
        .expect("openssl CLI");
    assert!(out.status.success());
    KeyPair::from_pem(std::str::from_utf8(&out.stdout).unwrap()).unwrap()
}

/// An end-entity certificate for `fqdn` issued by `ca`, and its key: (cert PEM, key PEM).
fn end_entity(ca: &Ca, fqdn: &str, key: KeyPair) -> (String, String) {
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.distinguished_name = DistinguishedName::new();
    p.distinguished_name.push(DnType::OrganizationName, "ike-test");
    p.distinguished_name.push(DnType::CommonName, fqdn);
    p.subject_alt_names = vec![SanType::DnsName(fqdn.try_into().unwrap())];
    p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    let issuer = Issuer::from_params(&ca.params, &ca.key);
    let cert = p.signed_by(&key, &issuer).unwrap();
    (cert.pem(), key.serialize_pem())
}

fn config(
    addr: &str,
    peer: &str,
    id: &str,
    peer_id: &str,
    ours: &(String, String),
    trusted: &[&Ca],
) -> Config {
    let child = Child {
        name: "net".into(),
        local_ts: TrafficSelector::parse_list("10.1.0.0/16").unwrap(),
        remote_ts: TrafficSelector::parse_list("10.1.0.0/16").unwrap(),
        mode: Mode::Tunnel,
        esp_proposals: parse_proposals(Protocol::Esp, "aes128gcm16").unwrap(),
        lifetimes: ChildLifetimes::default(),
        start_action: StartAction::default(),
        dpd_action: DpdAction::default(),
    };
    let conn = Connection {
        name: "gw".into(),
        local_addrs: vec![addr.parse().unwrap()],
        remote_addrs: vec![peer.parse().unwrap()],
        local: AuthRound::new(AuthMethod::Pubkey, Identity::parse(id).unwrap()),
        remote: AuthRound::new(AuthMethod::Pubkey, Identity::parse(peer_id).unwrap()),
        proposals: parse_proposals(Protocol::Ike, "aes128gcm16-prfsha256-x25519").unwrap(),
        lifetimes: IkeLifetimes::default(),
        dpd_delay: Duration::ZERO,
        encap: false,
        fragmentation: Fragmentation::default(),
        unique: ike_core::config::Unique::default(),
        children: vec![child],
    };
    let creds = ConnCredentials {
        certs: load_certificates(ours.0.as_bytes()).unwrap(),
        key: Some(load_private_key(ours.1.as_bytes()).unwrap()),
        trust: TrustStore::new(
            trusted.iter().flat_map(|c| load_certificates(c.pem.as_bytes()).unwrap()).collect(),
        ),
    };
    let credentials = Credentials { connections: [("gw".to_string(), creds)].into() };
    Config { connections: vec![conn], credentials, ..Default::default() }
}

fn received(d: Datagram) -> Datagram {
    Datagram { local: d.remote, remote: d.local, bytes: d.bytes }
}

fn sends(out: &[Output]) -> Vec<Datagram> {
    out.iter().filter_map(|o| if let Output::Send(d) = o { Some(d.clone()) } else { None }).collect()
}

/// Runs initiator `i` against responder `r` to the end; every output of each.
fn run(i: Config, r: Config) -> (Ike, Ike, Vec<Output>, Vec<Output>) {
    let now = Instant::now();
    let mut i = Ike::new(fw(), i, Settings::default(), now).unwrap();
    let mut r = Ike::new(fw(), r, Settings::default(), now).unwrap();
    i.set_unix_time(unix_now());
    r.set_unix_time(unix_now());
    let (mut i_out, mut r_out) = (vec![], vec![]);
    i.initiate(now, "gw", "net", &mut i_out).unwrap();
    let mut to_r = sends(&i_out);
    for _ in 0..8 {
        if to_r.is_empty() {
            break;
        }
        let mut out = vec![];
        for d in to_r {
            r.datagram(now, received(d), &mut out);
        }
        let back = sends(&out);
        r_out.extend(out);
        let mut out = vec![];
        for d in back {
            i.datagram(now, received(d), &mut out);
        }
        to_r = sends(&out);
        i_out.extend(out);
    }
    (i, r, i_out, r_out)
}

fn installs(out: &[Output]) -> usize {
    out.iter().filter(|o| matches!(o, Output::Install(_))).count()
}

fn auth_failed_reason(out: &[Output]) -> Option<String> {
    out.iter().find_map(|o| match o {
        Output::Event(Event::AuthFailed { reason, .. }) => Some(reason.clone()),
        _ => None,
    })
}

const MOON: (&str, &str) = ("192.0.2.1", "moon.example");
const SUN: (&str, &str) = ("192.0.2.2", "sun.example");

#[test]
fn rsa_and_ecdsa_certificates_install_both_ways() {
    let ca = ca("Test CA");
    // Initiator RSA (method 14 with SHA-256), responder ECDSA P-256 and P-384.
    for sun_key in [&rcgen::PKCS_ECDSA_P256_SHA256, &rcgen::PKCS_ECDSA_P384_SHA384] {
        let moon = end_entity(&ca, MOON.1, rsa_key());
        let sun = end_entity(&ca, SUN.1, KeyPair::generate_for(sun_key).unwrap());
        let (i, r, i_out, r_out) = run(
            config(MOON.0, SUN.0, MOON.1, SUN.1, &moon, &[&ca]),
            config(SUN.0, MOON.0, SUN.1, MOON.1, &sun, &[&ca]),
        );
        assert_eq!(installs(&i_out), 1, "initiator: {:?}", auth_failed_reason(&i_out));
        assert_eq!(installs(&r_out), 1, "responder: {:?}", auth_failed_reason(&r_out));
        assert_eq!(i.stats().auth_failures + r.stats().auth_failures, 0);
        // The certificate and CERTREQ went on the wire (CERT payloads make the IKE_AUTH large).
        let auth_req = &sends(&i_out)[1];
        assert!(auth_req.bytes.len() > 600, "IKE_AUTH request of {} bytes", auth_req.bytes.len());
    }
}

#[test]
fn untrusted_certificate_refused_by_the_responder() {
    let (ca, rogue) = (ca("Test CA"), ca("Rogue CA"));
    let moon = end_entity(&rogue, MOON.1, KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap());
    let sun = end_entity(&ca, SUN.1, KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap());
    let (i, r, i_out, r_out) = run(
        config(MOON.0, SUN.0, MOON.1, SUN.1, &moon, &[&ca]),
        config(SUN.0, MOON.0, SUN.1, MOON.1, &sun, &[&ca]),
    );
    assert_eq!(installs(&i_out) + installs(&r_out), 0);
    assert_eq!(r.stats().untrusted_certs, 1);
    assert_eq!(r.stats().auth_failures, 1);
    let why = auth_failed_reason(&r_out).unwrap();
    assert!(why.contains("not trusted"), "{why}");
    assert_eq!(i.stats().auth_refused_by_peer, 1, "the responder's AUTHENTICATION_FAILED");
    assert!(i_out
        .iter()
        .any(|o| matches!(o, Output::Event(Event::IkeSaDown { reason: DownReason::AuthFailed, .. }))));
}

#[test]
fn untrusted_certificate_refused_by_the_initiator() {
    let (ca, rogue) = (ca("Test CA"), ca("Rogue CA"));
    let moon = end_entity(&ca, MOON.1, KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap());
    let sun = end_entity(&rogue, SUN.1, KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap());
    let (i, _r, i_out, _) = run(
        config(MOON.0, SUN.0, MOON.1, SUN.1, &moon, &[&ca]),
        // The responder trusts both: only the initiator refuses.
        config(SUN.0, MOON.0, SUN.1, MOON.1, &sun, &[&ca, &rogue]),
    );
    assert_eq!(installs(&i_out), 0);
    assert_eq!(i.stats().untrusted_certs, 1);
    assert!(auth_failed_reason(&i_out).unwrap().contains("not trusted"));
}

#[test]
fn certificate_not_binding_the_id_is_refused() {
    let ca = ca("Test CA");
    // moon's certificate names moon.example, but moon claims to be other.example.
    let moon = end_entity(&ca, MOON.1, KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap());
    let sun = end_entity(&ca, SUN.1, KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap());
    let (_i, r, _, r_out) = run(
        config(MOON.0, SUN.0, "other.example", SUN.1, &moon, &[&ca]),
        config(SUN.0, MOON.0, SUN.1, "%any", &sun, &[&ca]),
    );
    assert_eq!(installs(&r_out), 0);
    assert_eq!(r.stats().untrusted_certs, 1);
    assert!(auth_failed_reason(&r_out).unwrap().contains("does not bind"));
}

#[test]
fn any_as_our_id_sends_the_certificate_subject_as_a_dn() {
    let ca = ca("Test CA");
    let moon = end_entity(&ca, MOON.1, KeyPair::generate_for(&rcgen::PKCS_ECDSA_P384_SHA384).unwrap());
    let sun = end_entity(&ca, SUN.1, KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap());
    let (_i, r, i_out, r_out) = run(
        config(MOON.0, SUN.0, "%any", SUN.1, &moon, &[&ca]),
        config(SUN.0, MOON.0, SUN.1, "O=ike-test, CN=moon.example", &sun, &[&ca]),
    );
    assert_eq!(installs(&i_out), 1, "initiator: {:?}", auth_failed_reason(&i_out));
    assert_eq!(installs(&r_out), 1, "responder: {:?}", auth_failed_reason(&r_out));
    let sa = r.ike_sas().next().unwrap();
    // rcgen wrote UTF8Strings, our parser PrintableStrings: equal as DNs, not as bytes.
    let peer = sa.peer_id.as_ref().unwrap();
    assert!(Identity::parse("O=ike-test, CN=moon.example").unwrap().matches(peer), "{peer}");
    assert_eq!(peer.to_string(), "O=ike-test, CN=moon.example");

    // Another DN configured for the peer: refused, though the certificate is trusted.
    let (_i, r, _, r_out) = run(
        config(MOON.0, SUN.0, "%any", SUN.1, &moon, &[&ca]),
        config(SUN.0, MOON.0, SUN.1, "O=ike-test, CN=mars.example", &sun, &[&ca]),
    );
    assert_eq!(installs(&r_out), 0);
    assert_eq!(r.stats().untrusted_certs, 0);
    assert!(auth_failed_reason(&r_out).unwrap().contains("is not the configured"));
}

/// moon proves itself with its certificate, sun with a PSK: sun's IKE_SA_INIT response
/// then has no SIGNATURE_HASH_ALGORITHMS (sun does not sign), so an ECDSA key signs with
/// method 9 or 10 (RFC 7296 §3.8) and an RSA key is refused before IKE_AUTH is sent
/// (method 1 would be SHA-1), saying why.
#[test]
fn without_the_peers_hash_algorithms_ecdsa_uses_its_own_method_and_rsa_is_refused() {
    use ike_core::config::{Psk, Secrets, SharedSecret};
    let ca = ca("Test CA");
    let secrets = Secrets {
        shared: vec![SharedSecret {
            name: "psk".into(),
            ids: vec![],
            secret: Psk::parse("a pre-shared key of some length").unwrap(),
        }],
        private_keys: vec![],
    };
    let sun = end_entity(&ca, SUN.1, KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap());
    let pair = |moon_key: KeyPair| {
        let moon = end_entity(&ca, MOON.1, moon_key);
        let mut i = config(MOON.0, SUN.0, MOON.1, SUN.1, &moon, &[&ca]);
        i.connections[0].remote.method = AuthMethod::Psk;
        i.secrets = secrets.clone();
        let mut r = config(SUN.0, MOON.0, SUN.1, MOON.1, &sun, &[&ca]);
        r.connections[0].local.method = AuthMethod::Psk;
        r.secrets = secrets.clone();
        run(i, r)
    };
    // The IKE_AUTH request is encrypted; that sun verified it with moon's key, which without
    // the peer's hashes can make only method 9 (P-256) or 10 (P-384), is the check.
    for alg in [&rcgen::PKCS_ECDSA_P256_SHA256, &rcgen::PKCS_ECDSA_P384_SHA384] {
        let (_i, _r, i_out, r_out) = pair(KeyPair::generate_for(alg).unwrap());
        assert_eq!(installs(&i_out), 1, "initiator: {:?}", auth_failed_reason(&i_out));
        assert_eq!(installs(&r_out), 1, "responder: {:?}", auth_failed_reason(&r_out));
    }
    let (i, _r, i_out, r_out) = pair(rsa_key());
    assert_eq!(installs(&i_out) + installs(&r_out), 0);
    assert_eq!(sends(&i_out).len(), 1, "only the IKE_SA_INIT request went out");
    assert_eq!(i.stats().auth_local_failures, 1);
    let why = auth_failed_reason(&i_out).unwrap();
    assert!(why.contains("SIGNATURE_HASH_ALGORITHMS"), "{why}");
}
