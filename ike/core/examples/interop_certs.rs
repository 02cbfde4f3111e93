//! Certificates made with a Rust crate (rcgen, on aws-lc-rs) for the IKE interop tests
//! (scripts/ike-interop's `rcgen` and `untrusted` rows): a CA and end-entity certificates
//! it issues, written as PEM files that strongSwan's charon and iked both load, so that
//! each reads certificates that neither strongSwan's `pki` nor ike-core made.
//!
//! ```text
//!  interop_certs DIR CA_CN NAME=FQDN...
//!    ──▶ DIR/ca.crt            the CA (ECDSA P-384, "O=ocf interop, CN=CA_CN"), self-signed
//!    ──▶ DIR/NAME.crt, .key    per NAME: ECDSA P-256, "O=ocf interop, CN=FQDN",
//!                              subjectAltName dNSName FQDN, digitalSignature, serverAuth;
//!                              the key as PEM PKCS#8
//! ```
//!
//! `cargo run -p ike-core --example interop_certs -- /tmp/x "ocf rcgen CA" a=a.test b=b.test`

use std::path::Path;
use std::process::ExitCode;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
    KeyPair, KeyUsagePurpose, SanType,
};

fn dn(cn: &str) -> DistinguishedName {
    let mut d = DistinguishedName::new();
    d.push(DnType::OrganizationName, "ocf interop");
    d.push(DnType::CommonName, cn);
    d
}

fn write(dir: &Path, name: &str, text: &str) -> Result<(), String> {
    std::fs::write(dir.join(name), text).map_err(|e| format!("{}: {e}", dir.join(name).display()))
}

fn run(args: &[String]) -> Result<(), String> {
    let [dir, ca_cn, names @ ..] = args else {
        return Err("usage: interop_certs DIR CA_CN NAME=FQDN...".into());
    };
    let dir = Path::new(dir);
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(|e| e.to_string())?;
    ca.distinguished_name = dn(ca_cn);
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca_key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P384_SHA384).map_err(|e| e.to_string())?;
    write(dir, "ca.crt", &ca.self_signed(&ca_key).map_err(|e| e.to_string())?.pem())?;
    let issuer = Issuer::from_params(&ca, &ca_key);
    for n in names {
        let (name, fqdn) = n.split_once('=').ok_or_else(|| format!("{n:?}: not NAME=FQDN"))?;
        let mut p = CertificateParams::new(Vec::<String>::new()).map_err(|e| e.to_string())?;
        p.distinguished_name = dn(fqdn);
        p.subject_alt_names = vec![SanType::DnsName(fqdn.try_into().map_err(|e| format!("{fqdn:?}: {e}"))?)];
        p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).map_err(|e| e.to_string())?;
        let cert = p.signed_by(&key, &issuer).map_err(|e| e.to_string())?;
        write(dir, &format!("{name}.crt"), &cert.pem())?;
        write(dir, &format!("{name}.key"), &key.serialize_pem())?;
    }
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("interop_certs: {e}");
            ExitCode::FAILURE
        }
    }
}
