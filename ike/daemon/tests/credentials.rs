//! iked reads a `pubkey` connection's certificate, CA and private key files and hands them
//! parsed to ike-core (`iked::daemon::credentials`): files made here with the openssl CLI,
//! a configuration naming them as swanctl.conf does (`x509/`, `x509ca/`, `private/` under
//! the file's directory), the key matched to its certificate, a key of another
//! certificate refused.

use std::path::Path;
use std::process::Command;

use iked::config::Config;
use iked::daemon::credentials;

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl").current_dir(dir).args(args).output().expect("openssl CLI");
    assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// A CA and a P-256 end entity for `gw.example.org` in `dir`'s x509ca/, x509/ and
/// private/, and a second key that belongs to no certificate.
fn pki(dir: &Path) {
    for d in ["x509", "x509ca", "private"] {
        std::fs::create_dir_all(dir.join(d)).unwrap();
    }
    let ec = ["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"];
    openssl(dir, &[&["genpkey"][..], &ec, &["-out", "ca.key"]].concat());
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-new",
            "-key",
            "ca.key",
            "-subj",
            "/O=iked/CN=Test CA",
            "-days",
            "2",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=keyCertSign",
            "-out",
            "x509ca/ca.pem",
        ],
    );
    openssl(dir, &[&["genpkey"][..], &ec, &["-out", "private/gw.pem"]].concat());
    openssl(dir, &[&["genpkey"][..], &ec, &["-out", "private/other.pem"]].concat());
    openssl(
        dir,
        &["req", "-new", "-key", "private/gw.pem", "-subj", "/O=iked/CN=gw.example.org", "-out", "gw.csr"],
    );
    std::fs::write(dir.join("ext"), "subjectAltName=DNS:gw.example.org\nkeyUsage=digitalSignature\n")
        .unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "gw.csr",
            "-CA",
            "x509ca/ca.pem",
            "-CAkey",
            "ca.key",
            "-days",
            "2",
            "-extfile",
            "ext",
            "-out",
            "x509/gw.pem",
        ],
    );
}

fn config(dir: &Path, keys: &[&str]) -> Config {
    let secrets: String =
        keys.iter().enumerate().map(|(i, k)| format!("private-{i} {{ file = {k}\n }}\n")).collect();
    let text = format!(
        "connections {{ gw {{ local_addrs = 192.0.2.1\n remote_addrs = 192.0.2.2\n \
         local {{ auth = pubkey\n id = gw.example.org\n certs = gw.pem\n }} \
         remote {{ auth = pubkey\n id = peer.example.org\n cacerts = ca.pem\n }}\n \
         children {{ net {{ local_ts = 10.1.0.0/24\n remote_ts = 10.2.0.0/24\n }} }} }} }}\n\
         secrets {{ {secrets} }}\n"
    );
    let path = dir.join("iked.conf");
    std::fs::write(&path, text).unwrap();
    Config::load(&path).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn files_read_and_key_matched_to_its_certificate() {
    let dir = std::env::temp_dir().join(format!("iked-credentials-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    pki(&dir);
    let fw = ocf::Framework::new();
    ocf_soft::register(&fw).unwrap();

    // The wrong key listed first: the right one is still found.
    let c = credentials::load(&fw, &config(&dir, &["other.pem", "gw.pem"])).unwrap();
    let gw = c.get("gw").unwrap();
    assert_eq!(gw.certs.len(), 1);
    assert_eq!(gw.certs[0].subject_text(), "O=iked, CN=gw.example.org");
    assert!(gw.key.is_some());
    assert_eq!(gw.trust.cas().len(), 1);
    assert_eq!(gw.trust.cas()[0].subject_text(), "O=iked, CN=Test CA");

    let err = credentials::load(&fw, &config(&dir, &["other.pem"])).unwrap_err();
    assert!(err.contains("no private key") && err.contains("gw.example.org"), "{err}");
    let err = credentials::load(&fw, &config(&dir, &["missing.pem"])).unwrap_err();
    assert!(err.contains("missing.pem"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}
