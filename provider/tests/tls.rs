//! TLS through the provider: unmodified applications (Python's `ssl`, over Debian's libssl 3)
//! with ocf preferred in their openssl.cnf, talking to peers that use OpenSSL's default
//! provider — so that a mistake cannot cancel itself out on both ends.
//!
//! For TLS 1.3 (AES-GCM, ChaCha20-Poly1305: the ordinary AEAD calls) and TLS 1.2 (AES-GCM
//! and ChaCha20-Poly1305 records, `tlsaad`/`tlsivfixed`; AES-CBC records with and without
//! encrypt-then-MAC, `tls-version`/`tls-mac-size`/`tls-mac`), with ocf on the server and
//! then on the client: 100,000 bytes go up in writes of uneven sizes and come back reversed
//! with their SHA-256 (`tls_peer.py`). With a simulated card that corrupts its results
//! (`sim:…,corrupt=1`) the connection must fail: the records really went through ocf.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

mod common;
use common::module_dir;

struct Setup {
    _dir: tempfile::TempDir,
    dir: PathBuf,
    cert: PathBuf,
    key: PathBuf,
}

fn setup() -> Setup {
    let modules = module_dir();
    let dir = modules.path().to_path_buf();
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let out = Command::new("openssl")
        .args(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .env("OPENSSL_CONF", "/dev/null")
        .output()
        .expect("openssl runs");
    assert!(out.status.success(), "openssl req: {}", String::from_utf8_lossy(&out.stderr));
    Setup { _dir: modules, dir, cert, key }
}

/// An openssl.cnf: ocf preferred over the default provider (or the default alone), and the
/// TLS 1.3 cipher suites to offer.
fn config(s: &Setup, ocf: bool, suites: &str) -> PathBuf {
    let name = format!("{}-{}.cnf", if ocf { "ocf" } else { "default" }, suites);
    let path = s.dir.join(name);
    let providers = if ocf {
        format!(
            "providers = provs\nalg_section = algs\n\n[provs]\nocf = ocf_sect\ndefault = default_sect\n\n\
             [ocf_sect]\nmodule = {}\nactivate = 1\n\n[default_sect]\nactivate = 1\n\n\
             [algs]\ndefault_properties = ?provider=ocf\n",
            s.dir.join("ocf.so").display()
        )
    } else {
        String::new()
    };
    let text = format!(
        "openssl_conf = init\n\n[init]\nssl_conf = ssl_sect\n{providers}\n[ssl_sect]\nsystem_default = tls_sect\n\n\
         [tls_sect]\nCiphersuites = {suites}\n"
    );
    std::fs::write(&path, text).expect("write openssl.cnf");
    path
}

fn peer(role: &str, conf: &Path, driver: Option<&str>, args: &[&str]) -> Command {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tls_peer.py");
    let mut c = Command::new("python3");
    c.arg(script).arg(role).args(args).env("OPENSSL_CONF", conf).env_remove("OCF_DRIVER");
    if let Some(d) = driver {
        c.env("OCF_DRIVER", d);
    }
    c
}

/// One connection; returns (server's output, client's output, both succeeded).
fn connect(
    s: &Setup,
    server_conf: &Path,
    client_conf: &Path,
    driver: Option<&str>,
    args: &[&str],
) -> (String, String, bool) {
    let mut server: Child = peer("server", server_conf, driver, args)
        .arg("--cert")
        .arg(&s.cert)
        .arg("--key")
        .arg(&s.key)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 runs");
    let mut lines = BufReader::new(server.stdout.take().expect("stdout")).lines();
    let first = lines.next().and_then(Result::ok).unwrap_or_default();
    let port = first.strip_prefix("PORT ").unwrap_or_else(|| panic!("server said {first:?}")).to_owned();
    let client =
        peer("client", client_conf, driver, args).args(["--port", &port]).output().expect("python3 runs");
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let status = server.wait().expect("server exits");
    let mut err = String::new();
    if let Some(mut e) = server.stderr.take() {
        std::io::Read::read_to_string(&mut e, &mut err).ok();
    }
    let client_text =
        String::from_utf8_lossy(&client.stdout).into_owned() + &String::from_utf8_lossy(&client.stderr);
    (rest.join("\n") + &err, client_text, status.success() && client.status.success())
}

/// (TLS version, TLS 1.3 suite or TLS 1.2 cipher, extra arguments, the cipher name the
/// connection must report).
const CASES: [(&str, &str, &[&str], &str); 7] = [
    ("1.3", "TLS_AES_128_GCM_SHA256", &[], "TLS_AES_128_GCM_SHA256"),
    ("1.3", "TLS_CHACHA20_POLY1305_SHA256", &[], "TLS_CHACHA20_POLY1305_SHA256"),
    ("1.2", "ECDHE-RSA-AES256-GCM-SHA384", &[], "ECDHE-RSA-AES256-GCM-SHA384"),
    ("1.2", "ECDHE-RSA-CHACHA20-POLY1305", &[], "ECDHE-RSA-CHACHA20-POLY1305"),
    // Encrypt-then-MAC (OpenSSL's default when both ends offer it): the MAC is checked
    // before decryption, so the provider strips only the padding.
    ("1.2", "ECDHE-RSA-AES128-SHA256", &[], "ECDHE-RSA-AES128-SHA256"),
    // MAC-then-encrypt: the provider strips padding and MAC in constant time.
    ("1.2", "ECDHE-RSA-AES256-SHA384", &["--no-etm"], "ECDHE-RSA-AES256-SHA384"),
    ("1.2", "ECDHE-RSA-AES128-SHA", &["--no-etm"], "ECDHE-RSA-AES128-SHA"),
];

#[test]
fn tls_through_ocf_talks_to_tls_through_the_default_provider() {
    let s = setup();
    for (version, suite, extra, want) in CASES {
        let suites = if version == "1.3" { suite } else { "TLS_AES_128_GCM_SHA256" };
        let (ocf, default) = (config(&s, true, suites), config(&s, false, suites));
        let mut args = vec!["--version", version];
        if version == "1.2" {
            args.extend(["--cipher", suite]);
        }
        args.extend_from_slice(extra);
        for (server, client, which) in [(&ocf, &default, "ocf server"), (&default, &ocf, "ocf client")] {
            let (srv, cli, ok) = connect(&s, server, client, None, &args);
            let case = format!("TLS {version} {suite} {extra:?}, {which}");
            assert!(ok, "{case}:\nserver: {srv}\nclient: {cli}");
            assert!(cli.contains(want) && srv.contains(want), "{case}: negotiated\n{srv}\n{cli}");
        }
    }
}

#[test]
fn a_card_that_corrupts_its_results_breaks_the_connection() {
    let s = setup();
    let ocf = config(&s, true, "TLS_AES_128_GCM_SHA256");
    let default = config(&s, false, "TLS_AES_128_GCM_SHA256");
    for args in [&["--version", "1.3"][..], &["--version", "1.2", "--cipher", "ECDHE-RSA-AES128-GCM-SHA256"]]
    {
        let (srv, cli, ok) = connect(&s, &ocf, &default, Some("sim:bcm5822,corrupt=1"), args);
        assert!(!ok, "{args:?}: the connection survived a corrupting card:\n{srv}\n{cli}");
        // The same through the card without the fault works.
        let (srv, cli, ok) = connect(&s, &ocf, &default, Some("sim:bcm5822"), args);
        assert!(ok, "{args:?} on the simulated card:\n{srv}\n{cli}");
    }
}
