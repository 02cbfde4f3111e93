//! RFC 7383 fragmentation between two engines in memory: both sides authenticate with RSA
//! certificate chains (root → intermediate → end entity, RSA-2048 keys from the openssl
//! CLI, certificates made with `rcgen`), which makes each IKE_AUTH message longer than
//! one 1280-byte datagram, so both go out as SKF fragments. The datagrams are carried by
//! hand so that fragments can be reordered, repeated, lost or forged on the way; each case
//! checks the outcome (both CHILD_SAs installed, or the counter of the drop's cause).

use std::process::Command;
use std::time::{Duration, Instant};

use ike_core::cert::{load_certificates, load_private_key, TrustStore};
use ike_core::config::{
    parse_proposals, AuthMethod, AuthRound, Child, ChildLifetimes, Connection, DpdAction, Fragmentation,
    Identity, IkeLifetimes, Mode, Protocol, StartAction, TrafficSelector,
};
use ike_core::credentials::{ConnCredentials, Credentials};
use ike_core::fragments::FragmentConfig;
use ike_core::io::{ChildSaInstall, Datagram, Output};
use ike_core::stats::Drop;
use ike_core::{Config, Ike, Settings};
use ike_wire::ids::{ExchangeType, NotifyType};
use ike_wire::Message;
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

/// An RSA-2048 key from `openssl genpkey`.
fn rsa_key() -> KeyPair {
    let out = Command::new("openssl")
        .args(["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"])
        .output()
        .expect("openssl CLI");
    assert!(out.status.success());
    KeyPair::from_pem(std::str::from_utf8(&out.stdout).unwrap()).unwrap()
}

fn dn(cn: &str) -> DistinguishedName {
    let mut d = DistinguishedName::new();
    d.push(DnType::OrganizationName, "ike-fragmentation-test");
    d.push(DnType::CommonName, cn);
    d
}

fn ca_params(cn: &str) -> CertificateParams {
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.distinguished_name = dn(cn);
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.key_usages = vec![KeyUsagePurpose::KeyCertSign];
    p
}

/// A root and an intermediate CA (RSA), and end entities issued by the intermediate.
struct Pki {
    root_pem: String,
    int_params: CertificateParams,
    int_key: KeyPair,
    int_pem: String,
}

impl Pki {
    fn new() -> Pki {
        let root_key = rsa_key();
        let root_params = ca_params("Fragment Root CA");
        let root_pem = root_params.self_signed(&root_key).unwrap().pem();
        let int_key = rsa_key();
        let int_params = ca_params("Fragment Intermediate CA");
        let int_pem =
            int_params.signed_by(&int_key, &Issuer::from_params(&root_params, &root_key)).unwrap().pem();
        Pki { root_pem, int_params, int_key, int_pem }
    }

    /// (end entity and intermediate PEM, key PEM) for `fqdn`.
    fn end_entity(&self, fqdn: &str) -> (String, String) {
        let key = rsa_key();
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.distinguished_name = dn(fqdn);
        p.subject_alt_names = vec![SanType::DnsName(fqdn.try_into().unwrap())];
        p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        let cert = p.signed_by(&key, &Issuer::from_params(&self.int_params, &self.int_key)).unwrap();
        (format!("{}{}", cert.pem(), self.int_pem), key.serialize_pem())
    }
}

fn config(addr: &str, peer: &str, id: &str, peer_id: &str, ours: &(String, String), pki: &Pki) -> Config {
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
        proposals: parse_proposals(Protocol::Ike, "aes256-sha256-modp2048").unwrap(),
        lifetimes: IkeLifetimes::default(),
        dpd_delay: Duration::ZERO,
        encap: false,
        fragmentation: Fragmentation::Yes,
        unique: ike_core::config::Unique::default(),
        children: vec![child],
    };
    let creds = ConnCredentials {
        certs: load_certificates(ours.0.as_bytes()).unwrap(),
        key: Some(load_private_key(ours.1.as_bytes()).unwrap()),
        trust: TrustStore::new(load_certificates(pki.root_pem.as_bytes()).unwrap()),
    };
    let credentials = Credentials { connections: [("gw".to_string(), creds)].into() };
    Config { connections: vec![conn], credentials, ..Default::default() }
}

/// Both sides' configurations, made once (RSA keys take a moment) and cloned per case.
struct Fixture {
    i: Config,
    r: Config,
}

fn fixture() -> &'static Fixture {
    static F: std::sync::OnceLock<Fixture> = std::sync::OnceLock::new();
    F.get_or_init(|| {
        let pki = Pki::new();
        let moon = pki.end_entity("moon.example");
        let sun = pki.end_entity("sun.example");
        Fixture {
            i: config("192.0.2.1", "192.0.2.2", "moon.example", "sun.example", &moon, &pki),
            r: config("192.0.2.2", "192.0.2.1", "sun.example", "moon.example", &sun, &pki),
        }
    })
}

fn received(d: Datagram) -> Datagram {
    Datagram { local: d.remote, remote: d.local, bytes: d.bytes }
}

fn sends(out: &[Output]) -> Vec<Datagram> {
    out.iter().filter_map(|o| if let Output::Send(d) = o { Some(d.clone()) } else { None }).collect()
}

fn installs(out: &[Output]) -> Vec<&ChildSaInstall> {
    out.iter().filter_map(|o| if let Output::Install(i) = o { Some(&**i) } else { None }).collect()
}

fn parse(d: &Datagram) -> Message {
    Message::parse(&d.bytes).unwrap()
}

/// (number, total) of an SKF datagram.
fn fragment_of(d: &Datagram) -> Option<(u16, u16)> {
    parse(d).fragment().map(|f| (f.number, f.total))
}

struct Two {
    i: Ike,
    r: Ike,
    now: Instant,
    i_out: Vec<Output>,
    r_out: Vec<Output>,
}

impl Two {
    fn new(i: Config, r: Config, settings: Settings) -> Two {
        let now = Instant::now();
        let mut i = Ike::new(fw(), i, settings, now).unwrap();
        let mut r = Ike::new(fw(), r, settings, now).unwrap();
        i.set_unix_time(unix_now());
        r.set_unix_time(unix_now());
        Two { i, r, now, i_out: vec![], r_out: vec![] }
    }

    fn deliver_r(&mut self, ds: Vec<Datagram>) -> Vec<Datagram> {
        let mut out = vec![];
        for d in ds {
            self.r.datagram(self.now, received(d), &mut out);
        }
        let s = sends(&out);
        self.r_out.extend(out);
        s
    }

    fn deliver_i(&mut self, ds: Vec<Datagram>) -> Vec<Datagram> {
        let mut out = vec![];
        for d in ds {
            self.i.datagram(self.now, received(d), &mut out);
        }
        let s = sends(&out);
        self.i_out.extend(out);
        s
    }

    /// IKE_SA_INIT both ways: the initiator's IKE_AUTH request, as it sends it.
    fn through_sa_init(&mut self) -> (Vec<Datagram>, Vec<Datagram>) {
        let mut out = vec![];
        self.i.initiate(self.now, "gw", "net", &mut out).unwrap();
        let init = sends(&out);
        self.i_out.extend(out);
        let init_resp = self.deliver_r(init.clone());
        assert_eq!(init_resp.len(), 1);
        let auth = self.deliver_i(init_resp.clone());
        (vec![init[0].clone(), init_resp[0].clone()], auth)
    }

    fn tick_i(&mut self, after: Duration) -> Vec<Datagram> {
        self.now += after;
        let mut out = vec![];
        self.i.tick(self.now, &mut out);
        let s = sends(&out);
        self.i_out.extend(out);
        s
    }

    fn assert_up(&self) {
        let (a, b) = (installs(&self.i_out), installs(&self.r_out));
        assert_eq!((a.len(), b.len()), (1, 1), "one CHILD_SA installed on each side");
        assert_eq!(a[0].spi_in, b[0].spi_out);
        assert_eq!(a[0].spi_out, b[0].spi_in);
        assert_eq!(*a[0].encr_key_in, *b[0].encr_key_out);
        assert_eq!(*a[0].encr_key_out, *b[0].encr_key_in);
    }
}

fn settings(size: usize) -> Settings {
    Settings { fragments: FragmentConfig { size, ..FragmentConfig::default() }, ..Settings::default() }
}

fn announces(d: &Datagram) -> bool {
    parse(d).notify(NotifyType::IKEV2_FRAGMENTATION_SUPPORTED).is_some()
}

/// Asserts `ds` are fragments 1..=N of N of one IKE_AUTH message, each within `max`
/// bytes; N.
fn assert_fragments(ds: &[Datagram], max: usize) -> usize {
    assert_exchange_fragments(ds, ExchangeType::IKE_AUTH, max)
}

/// As `assert_fragments`, for a message of exchange `t`.
fn assert_exchange_fragments(ds: &[Datagram], t: ExchangeType, max: usize) -> usize {
    assert!(ds.len() > 1, "fragmented: {} datagram(s)", ds.len());
    for (k, d) in ds.iter().enumerate() {
        assert_eq!(fragment_of(d), Some((k as u16 + 1, ds.len() as u16)));
        assert_eq!(parse(d).header.exchange_type, t);
        assert!(d.bytes.len() <= max, "fragment {} is {} bytes, more than {max}", k + 1, d.bytes.len());
    }
    ds.len()
}

#[test]
fn rsa_chains_go_fragmented_both_ways() {
    let f = fixture();
    for size in [1280, 576] {
        let mut t = Two::new(f.i.clone(), f.r.clone(), settings(size));
        let (init, auth) = t.through_sa_init();
        assert!(announces(&init[0]) && announces(&init[1]), "IKEV2_FRAGMENTATION_SUPPORTED both ways");
        // IPv4 and UDP headers off the datagram size (port 500: no NAT here).
        let n_req = assert_fragments(&auth, size - 28);
        let resp = t.deliver_r(auth);
        let n_resp = assert_fragments(&resp, size - 28);
        assert!(t.deliver_i(resp).is_empty());
        t.assert_up();
        let (si, sr) = (t.i.stats(), t.r.stats());
        assert_eq!((si.fragments_sent, sr.fragments_received), (n_req as u64, n_req as u64));
        assert_eq!((sr.fragments_sent, si.fragments_received), (n_resp as u64, n_resp as u64));
        assert_eq!((si.messages_reassembled, sr.messages_reassembled), (1, 1));
        assert_eq!((si.drops_total(), sr.drops_total()), (0, 0));
        if size == 576 {
            assert!(n_req >= 5, "576-byte datagrams: {n_req} fragments");
        }
    }
}

#[test]
fn reordered_and_duplicated_fragments_are_reassembled() {
    let f = fixture();
    let mut t = Two::new(f.i.clone(), f.r.clone(), settings(576));
    let (_, auth) = t.through_sa_init();
    let n = auth.len();
    // Backwards, each fragment twice, the last one (fragment 1) once.
    let mut shuffled: Vec<Datagram> = auth.iter().rev().flat_map(|d| [d.clone(), d.clone()]).collect();
    shuffled.pop();
    let resp = t.deliver_r(shuffled);
    assert_eq!(t.r.stats().drops(Drop::FragmentDuplicate), n as u64 - 1);
    assert_eq!(t.r.stats().fragments_received, n as u64, "duplicates are not decrypted twice");
    // The response in reverse too, and a duplicate of its first fragment after completion:
    // the message is done then, so that copy is a response to nothing outstanding.
    let mut back: Vec<Datagram> = resp.iter().rev().cloned().collect();
    back.push(resp[0].clone());
    assert!(t.deliver_i(back).is_empty());
    t.assert_up();
    assert_eq!(t.i.stats().drops(Drop::UnexpectedResponse), 1);
}

#[test]
fn lost_fragments_come_again_with_the_retransmission() {
    let f = fixture();
    let mut t = Two::new(f.i.clone(), f.r.clone(), settings(576));
    let (_, auth) = t.through_sa_init();
    // A request fragment lost: the responder waits; the initiator resends every fragment.
    let mut partial = auth.clone();
    partial.remove(1);
    assert!(t.deliver_r(partial).is_empty(), "no answer to an incomplete message");
    let again = t.tick_i(Duration::from_secs(5));
    assert_eq!(
        again.iter().map(|d| &d.bytes).collect::<Vec<_>>(),
        auth.iter().map(|d| &d.bytes).collect::<Vec<_>>()
    );
    let resp = t.deliver_r(again);
    assert!(resp.len() > 1);
    // Fragment 1 was held already; fragment 2 completed the message, which was answered,
    // so the fragments after it belong to an answered request: ignored (RFC 7383 §2.6.1).
    let n = auth.len() as u64;
    assert_eq!(t.r.stats().drops(Drop::FragmentDuplicate), 1);
    assert_eq!(t.r.stats().drops(Drop::FragmentOfAnswered), n - 2);
    assert_eq!(t.r.stats().responses_resent, 0);
    // A response fragment lost: the initiator retransmits its request, the responder
    // answers from its cache when fragment 1 comes (it ignores the others), and the
    // missing piece arrives.
    let mut partial = resp.clone();
    partial.remove(0);
    assert!(t.deliver_i(partial).is_empty());
    assert!(installs(&t.i_out).is_empty());
    // The second retransmission: 4 s × 1.8 after the first.
    let again = t.tick_i(Duration::from_secs(8));
    assert_eq!(again.len(), auth.len());
    let resent = t.deliver_r(again);
    assert_eq!(
        resent.iter().map(|d| &d.bytes).collect::<Vec<_>>(),
        resp.iter().map(|d| &d.bytes).collect::<Vec<_>>()
    );
    assert_eq!(t.r.stats().responses_resent, 1);
    assert_eq!(t.r.stats().drops(Drop::FragmentOfAnswered), (n - 2) + (n - 1));
    assert_eq!(t.r.stats().drops(Drop::OutOfWindow), 0);
    assert!(t.deliver_i(resent).is_empty());
    t.assert_up();
    // Fragment 1, first in the resent answer, completed it: the copies after it answer a
    // request no longer outstanding.
    assert_eq!(t.i.stats().drops(Drop::UnexpectedResponse), resp.len() as u64 - 1);
    assert_eq!(t.i.stats().messages_reassembled, 1);
}

#[test]
fn a_forged_fragment_is_dropped_and_counted() {
    let f = fixture();
    let mut t = Two::new(f.i.clone(), f.r.clone(), settings(576));
    let (_, auth) = t.through_sa_init();
    // A copy of fragment 2 with one ciphertext byte changed, ahead of the real one.
    let mut forged = auth[1].clone();
    let at = forged.bytes.len() - 40;
    forged.bytes[at] ^= 0x01;
    let mut ds = vec![forged.clone()];
    ds.extend(auth.iter().cloned());
    let resp = t.deliver_r(ds);
    assert_eq!(t.r.stats().drops(Drop::Unauthenticated), 1);
    assert_eq!(t.r.stats().drops(Drop::FragmentDuplicate), 0, "the forged copy was not kept");
    assert_eq!(t.r.stats().fragments_received, auth.len() as u64);
    t.deliver_i(resp);
    t.assert_up();
}

#[test]
fn a_forged_larger_total_does_not_discard_what_is_held() {
    let f = fixture();
    let mut t = Two::new(f.i.clone(), f.r.clone(), settings(576));
    let (_, auth) = t.through_sa_init();
    let n = auth.len();
    assert!(t.deliver_r(auth[..n - 1].to_vec()).is_empty());
    // Fragment 1 again with Total Fragments raised: its AAD changed, so it fails its ICV
    // and the fragments held stay.
    let mut bigger = auth[0].clone();
    let skf_fields = bigger.bytes.len() - parse(&auth[0]).fragment().unwrap().body.len() - 4;
    bigger.bytes[skf_fields + 2] = 0;
    bigger.bytes[skf_fields + 3] = (n + 1) as u8;
    assert_eq!(fragment_of(&bigger), Some((1, n as u16 + 1)));
    assert!(t.deliver_r(vec![bigger]).is_empty());
    assert_eq!(t.r.stats().drops(Drop::Unauthenticated), 1);
    let resp = t.deliver_r(vec![auth[n - 1].clone()]);
    assert!(!resp.is_empty(), "the held fragments and the last one complete the message");
    t.deliver_i(resp);
    t.assert_up();
}

#[test]
fn fragment_bounds_are_enforced_before_any_decryption() {
    let f = fixture();
    let tight = Settings {
        fragments: FragmentConfig { size: 576, max_fragments: 2, ..FragmentConfig::default() },
        ..Settings::default()
    };
    let mut t = Two::new(f.i.clone(), f.r.clone(), tight);
    let (_, auth) = t.through_sa_init();
    assert!(auth.len() > 2);
    assert!(t.deliver_r(auth.clone()).is_empty());
    assert_eq!(t.r.stats().drops(Drop::FragmentTooLarge), auth.len() as u64);
    assert_eq!(t.r.stats().fragments_received, 0);
}

#[test]
fn no_and_accept_send_no_fragments() {
    let f = fixture();
    let with = |c: &Config, frag: Fragmentation| {
        let mut c = c.clone();
        c.connections[0].fragmentation = frag;
        c
    };
    // `no` on the responder: it does not announce support, so the initiator sends IKE_AUTH
    // whole however long it is.
    let mut t = Two::new(f.i.clone(), with(&f.r, Fragmentation::No), settings(576));
    let (init, auth) = t.through_sa_init();
    assert!(announces(&init[0]) && !announces(&init[1]));
    assert_eq!(auth.len(), 1);
    assert!(auth[0].bytes.len() > 576);
    let resp = t.deliver_r(auth);
    assert_eq!(resp.len(), 1);
    t.deliver_i(resp);
    t.assert_up();
    // `accept` on the initiator: it announces and reassembles, but sends whole messages;
    // the responder (`yes`) fragments its answer.
    let mut t = Two::new(with(&f.i, Fragmentation::Accept), f.r.clone(), settings(576));
    let (init, auth) = t.through_sa_init();
    assert!(announces(&init[0]) && announces(&init[1]));
    assert_eq!(auth.len(), 1);
    let resp = t.deliver_r(auth);
    assert_fragments(&resp, 576 - 28);
    t.deliver_i(resp);
    t.assert_up();
    // `force` toward a `no` peer: fragments it does not reassemble are dropped and counted.
    let mut t = Two::new(with(&f.i, Fragmentation::Force), with(&f.r, Fragmentation::No), settings(576));
    let (_, auth) = t.through_sa_init();
    assert!(auth.len() > 1);
    assert!(t.deliver_r(auth.clone()).is_empty());
    assert_eq!(t.r.stats().drops(Drop::FragmentUnexpected), auth.len() as u64);
}

/// CREATE_CHILD_SA goes in fragments too: an IKE SA rekey (SA, Ni, a MODP-2048 KE) at a
/// 400-byte fragment size; both sides end with the new IKE SA, the same keys.
#[test]
fn an_ike_sa_rekey_goes_in_fragments() {
    let f = fixture();
    let mut t = Two::new(f.i.clone(), f.r.clone(), settings(400));
    let (_, auth) = t.through_sa_init();
    let resp = t.deliver_r(auth);
    t.deliver_i(resp);
    t.assert_up();
    let old = t.i.ike_sas().next().unwrap().our_spi();
    let mut out = vec![];
    assert!(t.i.rekey_ike(t.now, old, &mut out));
    let req = sends(&out);
    t.i_out.extend(out);
    let n = assert_exchange_fragments(&req, ExchangeType::CREATE_CHILD_SA, 400 - 28);
    let resp = t.deliver_r(req);
    assert_exchange_fragments(&resp, ExchangeType::CREATE_CHILD_SA, 400 - 28);
    // The initiator takes the answer and deletes the old IKE SA; the responder answers.
    let mut to_r = t.deliver_i(resp);
    while !to_r.is_empty() {
        let back = t.deliver_r(to_r);
        to_r = t.deliver_i(back);
    }
    let new_i = t
        .i_out
        .iter()
        .find_map(|o| match o {
            Output::Event(ike_core::io::Event::IkeSaRekeyed { old: o, new }) if *o == old => Some(*new),
            _ => None,
        })
        .expect("the IKE SA was rekeyed");
    assert_eq!(t.i.ike_sas().count(), 1);
    assert_eq!(t.r.ike_sas().count(), 1);
    let (ki, kr) = (
        t.i.ike_sa(new_i).unwrap().keys.as_ref().unwrap(),
        t.r.ike_sas().next().unwrap().keys.as_ref().unwrap(),
    );
    assert_eq!(*ki.sk_d, *kr.sk_d);
    assert!(t.r.stats().fragments_received >= n as u64);
    assert_eq!((t.i.stats().drops_total(), t.r.stats().drops_total()), (0, 0));
}
