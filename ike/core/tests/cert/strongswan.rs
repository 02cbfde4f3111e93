//! Certificates made with strongSwan's `pki` (Debian's strongswan-pki): an RSA CA, an
//! ECDSA P-256 and an RSA end entity (the latter signed with RSA-PSS, `--rsa-padding pss`),
//! keys as `pki --gen` writes them (PKCS#1 and SEC1 PEM). Skipped when `pki` is missing,
//! outside CI.

use ike_core::cert::{load_private_key, parse_dn, TrustStore};
use ike_core::config::Identity;

use crate::common::{assert_valid, fw, load, openssl_verifies, required, run, TempDir};

fn pki_installed() -> bool {
    std::process::Command::new("pki")
        .arg("--help")
        .output()
        .is_ok_and(|o| !o.stdout.is_empty() || !o.stderr.is_empty())
}

/// `pki args`, its output written to `out`.
fn pki(dir: &TempDir, args: &[&str], out: &str) {
    let bytes = run(dir, "pki", args);
    std::fs::write(dir.0.join(out), bytes).unwrap();
}

#[test]
fn strongswan_pki_certificates_validate_and_bind() {
    if !pki_installed() {
        assert!(!required(), "strongSwan's pki is missing: apt-get install strongswan-pki");
        eprintln!("skipped: strongSwan's pki is missing");
        return;
    }
    let dir = TempDir::new("pki");
    pki(&dir, &["--gen", "--type", "rsa", "--size", "2048", "--outform", "pem"], "ca.key");
    let ca_dn = "C=CH, O=strongSwan, CN=strongSwan Root CA";
    pki(
        &dir,
        &["--self", "--ca", "--lifetime", "30", "--in", "ca.key", "--dn", ca_dn, "--outform", "pem"],
        "ca.pem",
    );
    for (name, kind, padding) in [("moon", "ecdsa", "pkcs1"), ("sun", "rsa", "pss")] {
        let key = format!("{name}.key");
        let size = if kind == "rsa" { "2048" } else { "256" };
        pki(&dir, &["--gen", "--type", kind, "--size", size, "--outform", "pem"], &key);
        pki(&dir, &["--pub", "--in", &key, "--outform", "pem"], &format!("{name}.pub"));
        let dn = format!("C=CH, O=strongSwan, CN={name}.strongswan.org");
        let fqdn = format!("{name}.strongswan.org");
        let email = format!("{name}@strongswan.org");
        let pub_file = format!("{name}.pub");
        let args = [
            "--issue",
            "--cacert",
            "ca.pem",
            "--cakey",
            "ca.key",
            "--in",
            &pub_file,
            "--dn",
            &dn,
            "--san",
            &fqdn,
            "--san",
            "192.0.2.7",
            "--san",
            &email,
            "--lifetime",
            "30",
            "--rsa-padding",
            padding,
            "--outform",
            "pem",
        ];
        pki(&dir, &args, &format!("{name}.pem"));

        let store = TrustStore::new(vec![load(&dir, "ca.pem")]);
        let ee = load(&dir, &format!("{name}.pem"));
        let yes = [
            Identity::Dn(parse_dn(&dn).unwrap()),
            Identity::Fqdn(fqdn.clone()),
            Identity::Ipv4([192, 0, 2, 7].into()),
            Identity::Email(email.clone()),
        ];
        let no = [
            Identity::Dn(parse_dn(ca_dn).unwrap()),
            Identity::Fqdn("strongswan.org".into()),
            Identity::Ipv4([192, 0, 2, 8].into()),
            Identity::Email(format!("x{email}")),
        ];
        let spki = assert_valid(&store, &ee, &[], &yes, &no);
        assert!(openssl_verifies(&dir, "ca.pem", &[], &format!("{name}.pem"), &[]), "{name}");
        assert_eq!(ee.subject_text(), dn);
        // strongSwan turns the text into DER as parse_dn does: byte for byte the same.
        assert_eq!(ee.subject(), &parse_dn(&dn).unwrap()[..]);
        assert_eq!(ee.issuer(), &parse_dn(ca_dn).unwrap()[..]);

        // pki --gen writes PKCS#1 / SEC1 PEM; it loads, and its AUTH signature checks with
        // the certificate's key.
        let pem = std::fs::read(dir.0.join(&key)).unwrap();
        let label = if kind == "rsa" { "RSA PRIVATE KEY" } else { "EC PRIVATE KEY" };
        assert!(String::from_utf8_lossy(&pem).contains(label));
        let key = load_private_key(&pem).unwrap();
        let fw = fw();
        let scheme = key.choose_scheme(&[ike_wire::ids::HashAlgorithm::SHA2_256]).unwrap();
        let sig = key.sign(&fw, scheme, b"octets").unwrap();
        ike_core::crypto::verify_signature(&fw, &spki, scheme.method(), &sig, b"octets").unwrap();
    }
}
