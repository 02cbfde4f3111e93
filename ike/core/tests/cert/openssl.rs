//! Certificates made with the openssl CLI: a root CA (RSA-2048), an intermediate (P-384),
//! end entities with RSA-2048 (PKCS#1 v1.5 and RSA-PSS signatures), P-256 and P-384 keys
//! and subjectAltNames of every kind; then each refusal. `openssl verify` gives the
//! independent verdict on every chain.

use ike_core::cert::{load_private_key, parse_dn, CertError, Certificate, TrustStore};
use ike_core::config::Identity;
use ike_core::crypto::{verify_signature, AuthScheme, SignatureScheme};

use crate::common::{assert_valid, fw, load, loads, now, openssl_verifies, run, TempDir};

const CNF: &str = "[req]\ndistinguished_name = dn\nprompt = no\n[dn]\nCN = unused\n";
const CA_EXT: &str = "basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\n";
const EE_EXT: &str = "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n";

/// A scratch PKI: makes keys and certificates with the openssl CLI.
struct Pki {
    dir: TempDir,
    serial: u32,
}

enum Key {
    Rsa,
    P256,
    P384,
}

impl Pki {
    fn new(name: &str) -> Pki {
        let dir = TempDir::new(name);
        std::fs::write(dir.0.join("req.cnf"), CNF).unwrap();
        Pki { dir, serial: 1 }
    }

    /// Makes `name.key` and `name.pem` with subject `subj`, issued by `issuer` (`None`:
    /// self-signed) with extensions `ext` and extra `openssl x509` options.
    fn make(&mut self, name: &str, key: Key, subj: &str, issuer: Option<&str>, ext: &str, extra: &[&str]) {
        let (k, csr, pem, extf) =
            (format!("{name}.key"), format!("{name}.csr"), format!("{name}.pem"), format!("{name}.ext"));
        let keyopts: &[&str] = match key {
            Key::Rsa => &["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"],
            Key::P256 => &["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"],
            Key::P384 => &["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-384"],
        };
        run(&self.dir, "openssl", &[&["genpkey"], keyopts, &["-out", &k]].concat());
        run(
            &self.dir,
            "openssl",
            &["req", "-new", "-config", "req.cnf", "-key", &k, "-subj", subj, "-out", &csr],
        );
        std::fs::write(self.dir.0.join(&extf), ext).unwrap();
        self.serial += 1;
        let serial = self.serial.to_string();
        let mut args =
            vec!["x509", "-req", "-in", &csr, "-days", "30", "-set_serial", &serial, "-extfile", &extf];
        let (ca, ca_key);
        match issuer {
            Some(i) => {
                (ca, ca_key) = (format!("{i}.pem"), format!("{i}.key"));
                args.extend(["-CA", &ca, "-CAkey", &ca_key]);
            }
            None => args.extend(["-signkey", &k]),
        }
        args.extend(extra);
        args.extend(["-out", &pem]);
        run(&self.dir, "openssl", &args);
    }
}

/// Signs AUTH octets with the key in `key_file` and checks them with `spki` (a validated
/// chain's public key): the certificate's key is the one AUTH is checked with.
fn auth_round_trip(pki: &Pki, key_file: &str, scheme: Option<AuthScheme>, spki: &[u8]) {
    let fw = fw();
    let key = load_private_key(&std::fs::read(pki.dir.0.join(key_file)).unwrap()).unwrap();
    let scheme = scheme.unwrap_or_else(|| key.choose_scheme(&[]).unwrap());
    let octets = b"IKE_AUTH signed octets";
    let data = key.sign(&fw, scheme, octets).unwrap();
    verify_signature(&fw, spki, scheme.method(), &data, octets).unwrap();
    assert!(verify_signature(&fw, spki, scheme.method(), &data, b"other octets").is_err());
}

fn fqdn(s: &str) -> Identity {
    Identity::Fqdn(s.into())
}

#[test]
fn openssl_end_entities_validate_bind_and_sign() {
    let mut pki = Pki::new("openssl-ok");
    pki.make("ca", Key::Rsa, "/C=CH/O=ocf/CN=ocf Root CA", None, CA_EXT, &[]);
    pki.make("int", Key::P384, "/C=CH/O=ocf/CN=ocf Intermediate", Some("ca"), CA_EXT, &[]);
    let san = "subjectAltName=DNS:moon.example.org,IP:192.0.2.1,IP:2001:db8::1,email:moon@example.org\n";
    let ee_ext = format!("{EE_EXT}{san}");
    pki.make("rsa", Key::Rsa, "/C=CH/O=ocf/CN=moon.example.org", Some("int"), &ee_ext, &["-sha384"]);
    let pss = &["-sha256", "-sigopt", "rsa_padding_mode:pss", "-sigopt", "rsa_pss_saltlen:digest"];
    pki.make("pss", Key::Rsa, "/C=CH/O=ocf/CN=pss.example.org", Some("ca"), &ee_ext, pss);
    pki.make("p256", Key::P256, "/C=CH/O=ocf/CN=p256.example.org", Some("int"), &ee_ext, &["-sha256"]);
    pki.make("p384", Key::P384, "/C=CH/O=ocf/CN=p384.example.org", Some("int"), &ee_ext, &["-sha384"]);
    // No subjectAltName: the CN is not an FQDN identity (strongSwan's has_subject).
    pki.make("nosan", Key::P256, "/C=CH/O=ocf/CN=nosan.example.org", Some("ca"), EE_EXT, &[]);

    let store = TrustStore::new(vec![load(&pki.dir, "ca.pem")]);
    let ints = loads(&pki.dir, &["int.pem"]);
    let yes_sans = [
        fqdn("moon.example.org"),
        fqdn("MOON.Example.ORG"),
        Identity::Ipv4([192, 0, 2, 1].into()),
        Identity::Ipv6([0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1].into()),
        Identity::Email("moon@example.org".into()),
    ];
    let no = [
        fqdn("sun.example.org"),
        fqdn("example.org"),
        Identity::Ipv4([192, 0, 2, 2].into()),
        Identity::Ipv6([0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2].into()),
        Identity::Email("sun@example.org".into()),
        // The IPv4 address as an FQDN and the e-mail as an FQDN: types do not cross.
        fqdn("192.0.2.1"),
        fqdn("moon@example.org"),
        Identity::Dn(parse_dn("C=CH, O=ocf, CN=sun.example.org").unwrap()),
    ];
    for (name, ints, scheme) in [
        ("rsa", &ints[..], Some(AuthScheme::Digital(SignatureScheme::RsaPkcs1Sha256))),
        ("pss", &[][..], Some(AuthScheme::Digital(SignatureScheme::RsaPssSha256))),
        ("p256", &ints[..], None),
        ("p384", &ints[..], Some(AuthScheme::Digital(SignatureScheme::EcdsaSha384))),
    ] {
        let ee = load(&pki.dir, &format!("{name}.pem"));
        let cn = format!("C=CH, O=ocf, CN={name}.example.org").replace("CN=rsa.", "CN=moon.");
        let mut yes = vec![Identity::Dn(parse_dn(&cn).unwrap())];
        yes.extend(yes_sans.iter().cloned());
        let spki = assert_valid(&store, &ee, ints, &yes, &no);
        let untrusted: Vec<&str> = if ints.is_empty() { vec![] } else { vec!["int.pem"] };
        assert!(openssl_verifies(&pki.dir, "ca.pem", &untrusted, &format!("{name}.pem"), &[]), "{name}");
        auth_round_trip(&pki, &format!("{name}.key"), scheme, &spki);
    }
    // The PSS end entity's certificate is signed with RSASSA-PSS.
    let pss = load(&pki.dir, "pss.pem");
    assert_eq!(&pss.signature_algorithm()[4..13], &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0a]);

    let nosan = load(&pki.dir, "nosan.pem");
    assert_valid(
        &store,
        &nosan,
        &[],
        &[Identity::Dn(parse_dn("C=CH, O=ocf, CN=nosan.example.org").unwrap())],
        &[fqdn("nosan.example.org")],
    );

    // The same keys as SEC1 "EC PRIVATE KEY" and PKCS#1 "RSA PRIVATE KEY" load and sign.
    run(&pki.dir, "openssl", &["ec", "-in", "p256.key", "-out", "p256-sec1.key"]);
    run(&pki.dir, "openssl", &["rsa", "-in", "rsa.key", "-traditional", "-out", "rsa-pkcs1.key"]);
    run(
        &pki.dir,
        "openssl",
        &["rsa", "-in", "rsa.key", "-traditional", "-outform", "DER", "-out", "rsa-pkcs1.der"],
    );
    run(
        &pki.dir,
        "openssl",
        &["pkcs8", "-topk8", "-nocrypt", "-in", "p384.key", "-outform", "DER", "-out", "p384.der"],
    );
    assert!(std::fs::read_to_string(pki.dir.0.join("p256-sec1.key")).unwrap().contains("EC PRIVATE KEY"));
    let p256 = assert_valid(&store, &load(&pki.dir, "p256.pem"), &ints, &[], &[]);
    auth_round_trip(&pki, "p256-sec1.key", None, &p256);
    let rsa = assert_valid(&store, &load(&pki.dir, "rsa.pem"), &ints, &[], &[]);
    auth_round_trip(&pki, "rsa-pkcs1.key", Some(AuthScheme::Digital(SignatureScheme::RsaPkcs1Sha512)), &rsa);
    auth_round_trip(&pki, "rsa-pkcs1.der", Some(AuthScheme::Digital(SignatureScheme::RsaPkcs1Sha384)), &rsa);
    let p384 = assert_valid(&store, &load(&pki.dir, "p384.pem"), &ints, &[], &[]);
    auth_round_trip(&pki, "p384.der", None, &p384);
    // An encrypted PKCS#8 key is refused, naming the form to use.
    run(
        &pki.dir,
        "openssl",
        &["pkcs8", "-topk8", "-in", "p256.key", "-passout", "pass:x", "-out", "enc.key"],
    );
    let err = load_private_key(&std::fs::read(pki.dir.0.join("enc.key")).unwrap()).unwrap_err();
    assert!(matches!(err, CertError::KeyForm { .. }), "{err}");
    assert!(err.to_string().contains("PKCS#8"), "{err}");
}

/// Asserts that our validation refuses with `expected` and that `openssl verify` (with
/// `extra`) refuses too.
#[allow(clippy::too_many_arguments)]
fn refused(
    pki: &Pki,
    ca: &str,
    ints: &[&str],
    ee: &str,
    now: u64,
    max_intermediates: Option<usize>,
    extra: &[&str],
    expected: impl Fn(&CertError) -> bool,
) {
    let mut store = TrustStore::new(vec![load(&pki.dir, ca)]);
    if let Some(n) = max_intermediates {
        store = store.with_max_intermediates(n);
    }
    let err = store.validate(&fw(), &load(&pki.dir, ee), &loads(&pki.dir, ints), now).unwrap_err();
    assert!(expected(&err), "{ee}: unexpected refusal: {err:?}");
    assert!(!openssl_verifies(&pki.dir, ca, ints, ee, extra), "openssl verify accepts {ee}");
}

#[test]
fn openssl_refusals_each_with_its_variant() {
    let mut pki = Pki::new("openssl-bad");
    pki.make("ca", Key::P256, "/C=CH/O=ocf/CN=ocf Root CA", None, CA_EXT, &[]);
    let ee_ext = format!("{EE_EXT}subjectAltName=DNS:ee.example.org\n");
    pki.make("ee", Key::P256, "/C=CH/O=ocf/CN=ee.example.org", Some("ca"), &ee_ext, &[]);
    let t = now();
    let ok = |pki: &Pki, ee: &str, ints: &[&str], extra: &[&str]| {
        let store = TrustStore::new(vec![load(&pki.dir, "ca.pem")]);
        store.validate(&fw(), &load(&pki.dir, ee), &loads(&pki.dir, ints), now()).unwrap();
        assert!(openssl_verifies(&pki.dir, "ca.pem", ints, ee, extra), "{ee}");
    };
    ok(&pki, "ee.pem", &[], &["-purpose", "sslclient"]);

    // Expired and not yet valid: checked at a time after notAfter (31 days on) and before
    // notBefore (a day back); openssl verify at the same times.
    let later = (t + 31 * 86400).to_string();
    refused(
        &pki,
        "ca.pem",
        &[],
        "ee.pem",
        t + 31 * 86400,
        None,
        &["-attime", &later],
        |e| matches!(e, CertError::Expired { subject, .. } if subject == "C=CH, O=ocf, CN=ee.example.org"),
    );
    let earlier = (t - 86400).to_string();
    refused(
        &pki,
        "ca.pem",
        &[],
        "ee.pem",
        t - 86400,
        None,
        &["-attime", &earlier],
        |e| matches!(e, CertError::NotYetValid { subject, .. } if subject.ends_with("CN=ee.example.org")),
    );

    // A CA we do not trust, and one with the same name and another key.
    pki.make("other", Key::P256, "/C=CH/O=ocf/CN=Other CA", None, CA_EXT, &[]);
    refused(
        &pki,
        "other.pem",
        &[],
        "ee.pem",
        t,
        None,
        &[],
        |e| matches!(e, CertError::UnknownIssuer { issuer, .. } if issuer == "C=CH, O=ocf, CN=ocf Root CA"),
    );
    pki.make("impostor", Key::P256, "/C=CH/O=ocf/CN=ocf Root CA", None, CA_EXT, &[]);
    refused(&pki, "impostor.pem", &[], "ee.pem", t, None, &[], |e| {
        matches!(e, CertError::BadSignature { .. })
    });

    // One flipped byte in the TBS (a letter of the subject's CN).
    let der = load(&pki.dir, "ee.pem").der().to_vec();
    let at = der.windows(14).position(|w| w == b"ee.example.org").unwrap();
    let mut tampered = der.clone();
    tampered[at] ^= 0x01;
    std::fs::write(pki.dir.0.join("tampered.der"), &tampered).unwrap();
    run(&pki.dir, "openssl", &["x509", "-inform", "DER", "-in", "tampered.der", "-out", "tampered.pem"]);
    refused(
        &pki,
        "ca.pem",
        &[],
        "tampered.pem",
        t,
        None,
        &[],
        |e| matches!(e, CertError::BadSignature { subject } if subject == "C=CH, O=ocf, CN=de.example.org"),
    );

    // An issuer without CA:TRUE.
    let not_ca = "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyCertSign\n";
    pki.make("notca", Key::P256, "/C=CH/O=ocf/CN=Not a CA", Some("ca"), not_ca, &[]);
    pki.make("ee-notca", Key::P256, "/C=CH/O=ocf/CN=under-notca", Some("notca"), &ee_ext, &[]);
    refused(
        &pki,
        "ca.pem",
        &["notca.pem"],
        "ee-notca.pem",
        t,
        None,
        &[],
        |e| matches!(e, CertError::IssuerNotCa { subject } if subject == "C=CH, O=ocf, CN=Not a CA"),
    );

    // A CA whose keyUsage lacks keyCertSign.
    let no_certsign = "basicConstraints=critical,CA:TRUE\nkeyUsage=critical,digitalSignature,cRLSign\n";
    pki.make("nocertsign", Key::P256, "/C=CH/O=ocf/CN=No certSign", Some("ca"), no_certsign, &[]);
    pki.make("ee-ncs", Key::P256, "/C=CH/O=ocf/CN=under-ncs", Some("nocertsign"), &ee_ext, &[]);
    refused(
        &pki,
        "ca.pem",
        &["nocertsign.pem"],
        "ee-ncs.pem",
        t,
        None,
        &[],
        |e| matches!(e, CertError::IssuerKeyUsage { subject } if subject.ends_with("CN=No certSign")),
    );

    // An end entity whose keyUsage forbids signing (openssl checks it for a purpose).
    let enc_only = "basicConstraints=CA:FALSE\nkeyUsage=critical,keyEncipherment\nsubjectAltName=DNS:enc\n";
    pki.make("enc", Key::P256, "/C=CH/O=ocf/CN=encipher only", Some("ca"), enc_only, &[]);
    refused(
        &pki,
        "ca.pem",
        &[],
        "enc.pem",
        t,
        None,
        &["-purpose", "sslclient"],
        |e| matches!(e, CertError::EndEntityKeyUsage { subject } if subject.ends_with("CN=encipher only")),
    );

    // A chain of three intermediates: valid with room for three, too long for two (as
    // openssl's -verify_depth counts).
    pki.make("i1", Key::P256, "/C=CH/O=ocf/CN=I1", Some("ca"), CA_EXT, &[]);
    pki.make("i2", Key::P256, "/C=CH/O=ocf/CN=I2", Some("i1"), CA_EXT, &[]);
    pki.make("i3", Key::P256, "/C=CH/O=ocf/CN=I3", Some("i2"), CA_EXT, &[]);
    pki.make("deep", Key::P256, "/C=CH/O=ocf/CN=deep", Some("i3"), &ee_ext, &[]);
    let deep_ints = ["i3.pem", "i1.pem", "i2.pem"];
    ok(&pki, "deep.pem", &deep_ints, &["-verify_depth", "3"]);
    let store3 = TrustStore::new(vec![load(&pki.dir, "ca.pem")]).with_max_intermediates(3);
    let chain = store3.validate(&fw(), &load(&pki.dir, "deep.pem"), &loads(&pki.dir, &deep_ints), t).unwrap();
    let names: Vec<&str> = chain.certificates().iter().map(|c| c.subject_text()).collect();
    assert_eq!(
        names,
        [
            "C=CH, O=ocf, CN=deep",
            "C=CH, O=ocf, CN=I3",
            "C=CH, O=ocf, CN=I2",
            "C=CH, O=ocf, CN=I1",
            "C=CH, O=ocf, CN=ocf Root CA"
        ]
    );
    refused(&pki, "ca.pem", &deep_ints, "deep.pem", t, Some(2), &["-verify_depth", "2"], |e| {
        matches!(e, CertError::ChainTooLong { max_intermediates: 2, .. })
    });
    // Without the middle intermediate the chain stops at an unknown issuer.
    refused(
        &pki,
        "ca.pem",
        &["i3.pem", "i1.pem"],
        "deep.pem",
        t,
        None,
        &[],
        |e| matches!(e, CertError::UnknownIssuer { subject, .. } if subject.ends_with("CN=I3")),
    );

    // pathLenConstraint 0 on the first intermediate, two CAs below it.
    let len0 = "basicConstraints=critical,CA:TRUE,pathlen:0\nkeyUsage=critical,keyCertSign\n";
    pki.make("p0", Key::P256, "/C=CH/O=ocf/CN=P0", Some("ca"), len0, &[]);
    pki.make("p0sub", Key::P256, "/C=CH/O=ocf/CN=P0 sub", Some("p0"), CA_EXT, &[]);
    pki.make("ee-p0", Key::P256, "/C=CH/O=ocf/CN=under-p0sub", Some("p0sub"), &ee_ext, &[]);
    pki.make("ee-p0ok", Key::P256, "/C=CH/O=ocf/CN=under-p0", Some("p0"), &ee_ext, &[]);
    ok(&pki, "ee-p0ok.pem", &["p0.pem"], &[]);
    refused(
        &pki,
        "ca.pem",
        &["p0.pem", "p0sub.pem"],
        "ee-p0.pem",
        t,
        None,
        &[],
        |e| matches!(e, CertError::PathLenExceeded { subject, path_len: 0, below: 1 } if subject.ends_with("CN=P0")),
    );

    // An unknown critical extension on the end entity.
    let crit = format!("{ee_ext}1.3.6.1.4.1.55555.1=critical,ASN1:NULL\n");
    pki.make("crit", Key::P256, "/C=CH/O=ocf/CN=critical", Some("ca"), &crit, &[]);
    refused(
        &pki,
        "ca.pem",
        &[],
        "crit.pem",
        t,
        None,
        &[],
        |e| matches!(e, CertError::UnknownCriticalExtension { extension, .. } if extension == "1.3.6.1.4.1.55555.1"),
    );
}

/// Every truncation of a certificate, and every one-byte change, is refused — by the
/// parser or by validation — and none panics.
#[test]
fn every_truncation_and_flipped_byte_is_refused() {
    let mut pki = Pki::new("openssl-flip");
    pki.make("ca", Key::P256, "/C=CH/O=ocf/CN=ocf Root CA", None, CA_EXT, &[]);
    let ee_ext = format!("{EE_EXT}subjectAltName=DNS:ee.example.org,IP:192.0.2.1,email:a@example.org\n");
    pki.make("ee", Key::P256, "/C=CH/O=ocf/CN=ee.example.org", Some("ca"), &ee_ext, &[]);
    let store = TrustStore::new(vec![load(&pki.dir, "ca.pem")]);
    let fw = fw();
    let der = load(&pki.dir, "ee.pem").der().to_vec();
    store.validate(&fw, &Certificate::from_der(&der).unwrap(), &[], now()).unwrap();
    for n in 0..der.len() {
        assert!(Certificate::from_der(&der[..n]).is_err(), "truncated to {n}");
    }
    let mut parsed = 0;
    for i in 0..der.len() {
        let mut bad = der.clone();
        bad[i] ^= 0x01;
        if let Ok(cert) = Certificate::from_der(&bad) {
            parsed += 1;
            assert!(store.validate(&fw, &cert, &[], now()).is_err(), "byte {i} flipped still validates");
        }
    }
    // Most flips land in names, keys and the signature, which parse: validation sees them.
    assert!(parsed > der.len() / 2, "{parsed} of {}", der.len());
}
