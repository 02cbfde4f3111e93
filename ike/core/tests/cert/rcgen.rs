//! Certificates made with a Rust implementation, the `rcgen` crate (signing with
//! aws-lc-rs, not ocf): a P-384 CA, an intermediate with pathLenConstraint 0, P-256 and
//! Ed25519 end entities with every kind of subjectAltName and a DN; and CERTREQ hashes.

use std::net::IpAddr;

use ike_core::cert::{
    certreq_data, certreq_match, load_certificates, load_private_key, parse_dn, CertError, TrustStore,
};
use ike_core::config::Identity;
use ike_core::crypto::verify_signature;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose,
    SanType,
};

use crate::common::{assert_valid, fw, now, openssl_verifies, run, TempDir};

fn ca_params(cn: &str, path_len: Option<u8>) -> CertificateParams {
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.distinguished_name = DistinguishedName::new();
    p.distinguished_name.push(DnType::CountryName, "CH");
    p.distinguished_name.push(DnType::OrganizationName, "rcgen");
    p.distinguished_name.push(DnType::CommonName, cn);
    p.is_ca = IsCa::Ca(path_len.map_or(BasicConstraints::Unconstrained, BasicConstraints::Constrained));
    p.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    p
}

fn ee_params(cn: &str) -> CertificateParams {
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.distinguished_name = DistinguishedName::new();
    p.distinguished_name.push(DnType::CountryName, "CH");
    p.distinguished_name.push(DnType::OrganizationName, "rcgen");
    p.distinguished_name.push(DnType::CommonName, cn);
    p.subject_alt_names = vec![
        SanType::DnsName(cn.try_into().unwrap()),
        SanType::IpAddress(IpAddr::from([198, 51, 100, 9])),
        SanType::IpAddress("2001:db8::9".parse().unwrap()),
        SanType::Rfc822Name(format!("admin@{cn}").as_str().try_into().unwrap()),
    ];
    p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    p
}

#[test]
fn rcgen_certificates_validate_bind_and_answer_certreq() {
    let fw = fw();
    let dir = TempDir::new("rcgen");
    let ca_key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P384_SHA384).unwrap();
    let ca_p = ca_params("rcgen Root CA", None);
    let ca = ca_p.self_signed(&ca_key).unwrap();
    let ca_issuer = Issuer::from_params(&ca_p, &ca_key);
    let int_key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let int_p = ca_params("rcgen Intermediate", Some(0));
    let int = int_p.signed_by(&int_key, &ca_issuer).unwrap();
    let int_issuer = Issuer::from_params(&int_p, &int_key);
    std::fs::write(dir.0.join("ca.pem"), ca.pem()).unwrap();
    std::fs::write(dir.0.join("int.pem"), int.pem()).unwrap();

    let store = TrustStore::new(load_certificates(ca.pem().as_bytes()).unwrap());
    let ints = load_certificates(int.der()).unwrap();
    for (cn, alg) in
        [("p256.rcgen.test", &rcgen::PKCS_ECDSA_P256_SHA256), ("ed.rcgen.test", &rcgen::PKCS_ED25519)]
    {
        let key = KeyPair::generate_for(alg).unwrap();
        let ee = ee_params(cn).signed_by(&key, &int_issuer).unwrap();
        let file = format!("{cn}.pem");
        std::fs::write(dir.0.join(&file), ee.pem()).unwrap();
        let ee = load_certificates(ee.pem().as_bytes()).unwrap().remove(0);
        let yes = [
            Identity::Fqdn(cn.to_uppercase()),
            Identity::Ipv4([198, 51, 100, 9].into()),
            Identity::Ipv6([0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9].into()),
            Identity::Email(format!("admin@{cn}")),
            Identity::Dn(parse_dn(&format!("C=CH, O=rcgen, CN={cn}")).unwrap()),
        ];
        let no = [
            Identity::Fqdn(format!("x.{cn}")),
            Identity::Ipv4([198, 51, 100, 10].into()),
            Identity::Email(format!("root@{cn}")),
            Identity::Dn(parse_dn(&format!("C=DE, O=rcgen, CN={cn}")).unwrap()),
        ];
        let spki = assert_valid(&store, &ee, &ints, &yes, &no);
        assert!(openssl_verifies(&dir, "ca.pem", &["int.pem"], &file, &[]), "{cn}");

        // rcgen's key (PKCS#8 PEM) signs AUTH through ocf; the certificate's key checks it.
        let key = load_private_key(key.serialize_pem().as_bytes()).unwrap();
        let scheme = key
            .choose_scheme(&[ike_wire::ids::HashAlgorithm::SHA2_256, ike_wire::ids::HashAlgorithm::IDENTITY])
            .unwrap();
        let sig = key.sign(&fw, scheme, b"octets").unwrap();
        verify_signature(&fw, &spki, scheme.method(), &sig, b"octets").unwrap();
    }

    // pathLenConstraint 0 on the intermediate: a CA below it is refused.
    let sub_key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let sub_p = ca_params("rcgen Sub", None);
    let sub = sub_p.signed_by(&sub_key, &int_issuer).unwrap();
    let leaf_key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let leaf =
        ee_params("leaf.rcgen.test").signed_by(&leaf_key, &Issuer::from_params(&sub_p, &sub_key)).unwrap();
    std::fs::write(dir.0.join("sub.pem"), sub.pem()).unwrap();
    std::fs::write(dir.0.join("leaf.pem"), leaf.pem()).unwrap();
    let mut both = ints.clone();
    both.extend(load_certificates(sub.der()).unwrap());
    let err = store.validate(&fw, &load_certificates(leaf.der()).unwrap()[0], &both, now()).unwrap_err();
    assert!(
        matches!(&err, CertError::PathLenExceeded { subject, .. } if subject.ends_with("CN=rcgen Intermediate")),
        "{err:?}"
    );
    assert!(!openssl_verifies(&dir, "ca.pem", &["int.pem", "sub.pem"], "leaf.pem", &[]));

    // Every signature and hash is an ocf request, counted by the driver: two links, two
    // verifications; one CA, one SHA-1.
    let ops = |fw: &ocf::Framework| fw.driver_stats(ocf_soft::NAME).unwrap().ops;
    let leaf_p256 = ee_params("count.rcgen.test").signed_by(&leaf_key, &int_issuer).unwrap();
    let leaf_p256 = load_certificates(leaf_p256.der()).unwrap().remove(0);
    let before = ops(&fw);
    store.validate(&fw, &leaf_p256, &ints, now()).unwrap();
    assert_eq!(ops(&fw) - before, 2);
    let before = ops(&fw);
    certreq_data(&fw, &store).unwrap();
    assert_eq!(ops(&fw) - before, 1);

    // CERTREQ: our hash of the CA is SHA-1 of its SubjectPublicKeyInfo, as openssl
    // computes it; a peer's CERTREQ naming our CA selects it in our chain.
    let data = certreq_data(&fw, &store).unwrap();
    let spki_der = run(&dir, "openssl", &["x509", "-in", "ca.pem", "-pubkey", "-noout"]);
    std::fs::write(dir.0.join("ca.spki.pem"), spki_der).unwrap();
    let der = run(&dir, "openssl", &["pkey", "-pubin", "-in", "ca.spki.pem", "-outform", "DER"]);
    std::fs::write(dir.0.join("ca.spki.der"), der).unwrap();
    let sha1 = run(&dir, "openssl", &["dgst", "-sha1", "-binary", "ca.spki.der"]);
    assert_eq!(data, sha1);
    let our_chain = [&load_certificates(leaf.der()).unwrap()[..], &ints, store.cas()].concat();
    assert_eq!(certreq_match(&fw, &data, &our_chain).unwrap(), Some(2));
    let mut other = data.clone();
    other[0] ^= 1;
    assert_eq!(certreq_match(&fw, &other, &our_chain).unwrap(), None);
    let int_hash = ike_core::crypto::spki_sha1(&fw, ints[0].spki()).unwrap();
    assert_eq!(certreq_match(&fw, &[other, int_hash.to_vec()].concat(), &our_chain).unwrap(), Some(1));
    assert_eq!(certreq_match(&fw, &data[..19], &our_chain), Err(CertError::CertReqLength(19)));
}
