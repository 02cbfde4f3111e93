//! The configuration file end to end: every example in `docs/iked.md` (its ```swanctl
//! blocks) parses to the values the page describes; each kind of bad file is refused with
//! its own error at the right line and column; and `Config::diff` sorts connections for a
//! reload.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ike_core::config::{
    AuthMethod, DpdAction, Fragmentation, Identity, IdentityError, Invalid, LifetimeError, Mode,
    ProposalError, PskError, StartAction, TsError,
};
use iked::config::settings::SyntaxError;
use iked::config::{Config, ConfigError, ErrorKind};

fn doc_examples() -> Vec<String> {
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/iked.md"))
        .expect("docs/iked.md");
    let mut out = Vec::new();
    let mut cur: Option<String> = None;
    for line in doc.lines() {
        match (&mut cur, line.trim_end()) {
            (None, "```swanctl") => cur = Some(String::new()),
            (Some(_), "```") => out.push(cur.take().unwrap()),
            (Some(text), l) => {
                text.push_str(l);
                text.push('\n');
            }
            (None, _) => {}
        }
    }
    out
}

const ORIGIN: &str = "/etc/iked/iked.conf";

fn parse(text: &str) -> Result<Config, ConfigError> {
    Config::parse(text, Path::new(ORIGIN))
}

fn proposals(ps: &[ike_core::config::Proposal]) -> Vec<String> {
    ps.iter().map(|p| p.to_string()).collect()
}

fn ts(list: &[ike_core::config::TrafficSelector]) -> Vec<String> {
    list.iter().map(|t| t.to_string()).collect()
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

#[test]
fn doc_examples_parse_to_what_the_doc_says() {
    let ex = doc_examples();
    assert_eq!(ex.len(), 3, "the page's ```swanctl examples");

    // Gateway A: initiates.
    let a = parse(&ex[0]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(a.connections.len(), 1);
    let c = &a.connections[0];
    assert_eq!(c.name, "site-b");
    assert_eq!(
        (c.local_addrs.clone(), c.remote_addrs.clone()),
        (vec![ip("192.0.2.1")], vec![ip("192.0.2.2")])
    );
    assert_eq!(proposals(&c.proposals), ["IKE:AES_GCM_16_128/PRF_HMAC_SHA2_256/CURVE_25519"]);
    assert_eq!(c.dpd_delay, secs(30));
    assert_eq!(
        (c.lifetimes.rekey_time, c.lifetimes.over_time, c.lifetimes.rand_time),
        (secs(14400), secs(1440), secs(1440))
    );
    assert!(!c.encap);
    assert_eq!(c.fragmentation, Fragmentation::Yes);
    assert_eq!((c.local.method, &c.local.id), (AuthMethod::Psk, &Identity::Fqdn("gw-a.example.org".into())));
    assert_eq!(
        (c.remote.method, &c.remote.id),
        (AuthMethod::Psk, &Identity::Fqdn("gw-b.example.org".into()))
    );
    assert_eq!(c.children.len(), 1);
    let net = &c.children[0];
    assert_eq!(net.name, "net");
    assert_eq!(
        (ts(&net.local_ts), ts(&net.remote_ts)),
        (vec!["10.1.0.0/24".into()], vec!["10.2.0.0/24".into()])
    );
    assert_eq!(net.mode, Mode::Tunnel);
    assert_eq!(proposals(&net.esp_proposals), ["ESP:AES_GCM_16_128/NO_EXT_SEQ"]);
    assert_eq!(
        (net.lifetimes.rekey_time, net.lifetimes.life_time, net.lifetimes.rand_time),
        (secs(3600), secs(3960), secs(360))
    );
    assert_eq!((net.start_action, net.dpd_action), (StartAction::Start, DpdAction::Restart));
    assert_eq!(a.secrets.shared.len(), 1);
    let key = a.secrets.psk_for(&c.local.id, &c.remote.id).expect("the site key");
    assert_eq!(key.as_bytes().len(), 32);
    assert_eq!(&key.as_bytes()[..4], &[0x5e, 0x1c, 0x9f, 0x0a]);

    // Gateway B: the mirror image, waits.
    let b = parse(&ex[1]).unwrap_or_else(|e| panic!("{e}"));
    let c = &b.connections[0];
    assert_eq!(c.name, "site-a");
    assert_eq!(c.remote_addrs, vec![ip("192.0.2.1")]);
    assert_eq!(c.local.id, Identity::Fqdn("gw-b.example.org".into()));
    assert_eq!(c.children[0].start_action, StartAction::None);
    assert_eq!(c.children[0].dpd_action, DpdAction::None);
    assert_eq!(
        b.secrets.psk_for(&c.local.id, &c.remote.id).unwrap(),
        a.secrets.psk_for(&a.connections[0].local.id, &a.connections[0].remote.id).unwrap()
    );

    // The road-warrior responder with certificates.
    let rw = parse(&ex[2]).unwrap_or_else(|e| panic!("{e}"));
    let c = &rw.connections[0];
    assert_eq!(c.name, "rw");
    assert!(c.remote_addrs.is_empty(), "%any");
    assert_eq!(
        proposals(&c.proposals),
        [
            "IKE:AES_GCM_16_256/PRF_HMAC_SHA2_384/ECP_384",
            "IKE:AES_CBC_256/HMAC_SHA2_384_192/PRF_HMAC_SHA2_384/ECP_384"
        ]
    );
    assert_eq!(
        (c.lifetimes.rekey_time, c.lifetimes.over_time, c.lifetimes.rand_time),
        (secs(28800), secs(2880), secs(2880))
    );
    assert!(c.encap);
    assert_eq!(c.fragmentation, Fragmentation::Force);
    assert_eq!(c.local.method, AuthMethod::Pubkey);
    assert_eq!(c.local.id, Identity::parse("C=CH, O=Example, CN=gw.example.org").unwrap());
    assert_eq!(c.local.certs, vec![PathBuf::from("/etc/iked/x509/gw.pem")]);
    assert_eq!((c.remote.method, &c.remote.id), (AuthMethod::Pubkey, &Identity::Any));
    assert_eq!(c.remote.cacerts, vec![PathBuf::from("/etc/iked/x509ca/ca.pem")]);
    let lan = &c.children[0];
    assert_eq!(ts(&lan.local_ts), ["10.1.0.0/16", "10.9.0.0/24[tcp/443]"]);
    assert_eq!(ts(&lan.remote_ts), ["dynamic"]);
    assert_eq!(
        proposals(&lan.esp_proposals),
        ["ESP:AES_GCM_16_256/ECP_384/NO_EXT_SEQ", "ESP:CHACHA20_POLY1305/CURVE_25519/EXT_SEQ"]
    );
    assert!(lan.esp_proposals.iter().all(|p| p.pfs()));
    assert_eq!(
        (lan.lifetimes.rekey_time, lan.lifetimes.life_time, lan.lifetimes.rand_time),
        (secs(1800), secs(2400), secs(600))
    );
    assert_eq!(rw.secrets.private_keys.len(), 1);
    assert_eq!(rw.secrets.private_keys[0].file, PathBuf::from("/etc/iked/private/gw.key"));
    assert!(rw.secrets.private_keys[0].passphrase.is_none());
}

/// A valid file with markers where each bad case puts its line. Marker positions:
/// CONN line 4 column 9, LOCAL 8:13, CHILD 17:17, SECRET 26:9, TOP 29:1.
const BASE: &str = "connections {
    gw {
        remote_addrs = 10.0.0.2
        #CONN
        local {
            auth = psk
            id = a.example
            #LOCAL
        }
        remote {
            auth = psk
            id = b.example
        }
        children {
            net {
                local_ts = 10.1.0.0/24
                #CHILD
            }
        }
    }
}
secrets {
    ike-gw {
        id = b.example
        secret = 0123456789abcdef0123
        #SECRET
    }
}
#TOP
";

#[test]
fn base_and_its_valid_variants_parse() {
    let c = parse(BASE).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.connections[0].children[0].name, "net");
    for (marker, line) in [
        ("#CONN", "mobike = no"),
        ("#CONN", "version = 2"),
        ("#CONN", "encap = true"),
        ("#CHILD", "start_action = start"),
        ("#CHILD", "remote_ts = 10.2.0.0/24, 10.3.0.0/24[udp/500]"),
        ("#LOCAL", "# only a comment"),
        ("#TOP", "# the end"),
    ] {
        let text = BASE.replace(marker, line);
        parse(&text).unwrap_or_else(|e| panic!("{line}: {e}"));
    }
    assert_eq!(parse(BASE).unwrap().connections[0].unique, ike_core::config::Unique::Replace);
    let never = parse(&BASE.replace("#CONN", "unique = never")).unwrap();
    assert_eq!(never.connections[0].unique, ike_core::config::Unique::Never);
    let remote_any = BASE.replace("remote_addrs = 10.0.0.2", "remote_addrs = %any");
    assert!(parse(&remote_any).unwrap().connections[0].remote_addrs.is_empty(), "a responder for any peer");
}

fn bad(marker: &str, line: &str) -> ConfigError {
    let text = BASE.replace(marker, line);
    assert_ne!(text, BASE, "{marker} not in the base");
    parse(&text).expect_err(line)
}

fn bad_replace(from: &str, to: &str) -> ConfigError {
    let text = BASE.replace(from, to);
    assert_ne!(text, BASE, "{from} not in the base");
    parse(&text).expect_err(to)
}

#[track_caller]
fn check(e: ConfigError, line: usize, column: usize, kind: ErrorKind) {
    assert_eq!((e.line, e.column, &e.kind), (line, column, &kind), "{e}");
    assert_eq!(e.file, PathBuf::from(ORIGIN));
    assert!(e.to_string().starts_with(&format!("{ORIGIN}:{line}:{column}: ")), "{e}");
}

#[test]
fn each_bad_case_names_line_and_column() {
    let child = "child 'net' of connection 'gw'".to_string();
    check(
        bad("#CHILD", "esp_proposal = aes128gcm16"),
        17,
        17,
        ErrorKind::UnknownKey { key: "esp_proposal".into(), section: child },
    );
    check(bad("#CHILD", "local_ts = 10.2.0.0/24"), 17, 17, ErrorKind::DuplicateKey("local_ts".into()));
    check(
        bad("#CHILD", "esp_proposals = aes128gcm16, aes128-sha265"),
        17,
        33,
        ErrorKind::Proposal(ProposalError::Unknown {
            keyword: "sha265".into(),
            proposal: "aes128-sha265".into(),
        }),
    );
    check(
        bad("#CONN", "proposals = aes128-sha1-modp2048"),
        4,
        21,
        ErrorKind::Proposal(ProposalError::Unsupported {
            keyword: "sha1".into(),
            proposal: "aes128-sha1-modp2048".into(),
        }),
    );
    check(
        bad_replace("secret = 0123456789abcdef0123", "secret = tooshort"),
        25,
        18,
        ErrorKind::Psk(PskError::TooShort { len: 8 }),
    );
    check(
        bad("#CONN", "version = 1"),
        4,
        19,
        ErrorKind::Unsupported {
            key: "version".into(),
            value: "1".into(),
            why: "iked speaks IKEv2 only: version = 2",
        },
    );
    check(
        bad("#CONN", "mobike = yes"),
        4,
        18,
        ErrorKind::Unsupported {
            key: "mobike".into(),
            value: "yes".into(),
            why: "iked does not do MOBIKE (RFC 4555): mobike = no",
        },
    );
    check(
        bad("#CONN", "unique = keep"),
        4,
        18,
        ErrorKind::Unsupported {
            key: "unique".into(),
            value: "keep".into(),
            why: "iked replaces a peer's older IKE SAs or keeps them all: unique = replace or never",
        },
    );
    check(
        bad("#CHILD", "remote_ts = 10.2.0.0/24[tcp/http]"),
        17,
        29,
        ErrorKind::TrafficSelector(TsError::BadPort("http".into())),
    );
    check(
        bad("#CHILD", "rekey_time = 1 hour"),
        17,
        30,
        ErrorKind::Duration(ike_core::config::DurationError::Bad("1 hour".into())),
    );
    check(bad("#CHILD", "life_time = 1h"), 17, 17, ErrorKind::Lifetime(LifetimeError::LifeNotAfterRekey));
    check(bad("#CONN", "rekey_time = 0"), 4, 9, ErrorKind::Lifetime(LifetimeError::NoRekey));
    check(
        bad("#CHILD", "mode = beet"),
        17,
        24,
        ErrorKind::Unsupported {
            key: "mode".into(),
            value: "beet".into(),
            why: "iked negotiates tunnel and transport mode SAs only",
        },
    );
    check(
        bad("#CHILD", "start_action = always"),
        17,
        32,
        ErrorKind::BadChoice {
            key: "start_action".into(),
            value: "always".into(),
            allowed: "none, trap, start",
        },
    );
    check(
        bad("#CONN", "fragmentation = maybe"),
        4,
        25,
        ErrorKind::BadChoice {
            key: "fragmentation".into(),
            value: "maybe".into(),
            allowed: "yes, no, accept, force",
        },
    );
    check(
        bad("#CONN", "local_addrs = gw.example.org"),
        4,
        23,
        ErrorKind::BadAddress("gw.example.org".into()),
    );
    check(
        bad("#LOCAL", "cacerts = ca.pem"),
        2,
        5,
        ErrorKind::Invalid(ike_core::config::ValidationError {
            connection: "gw".into(),
            child: None,
            field: "local.cacerts",
            invalid: Invalid::CertificateWithPsk,
        }),
    );
    check(
        bad_replace("id = a.example", "id = C=CH, XX=y"),
        7,
        18,
        ErrorKind::Identity(IdentityError::UnknownAttribute("XX".into())),
    );
    check(bad("#CONN", "children = net"), 4, 9, ErrorKind::ExpectedSection("children".into()));
    check(
        bad_replace("        children {", "        local-2 { auth = psk }\n        children {"),
        14,
        9,
        ErrorKind::SecondRound("local-2".into()),
    );
    check(
        bad_replace("        remote {\n            auth = psk\n            id = b.example\n        }\n", ""),
        2,
        5,
        ErrorKind::MissingRound("remote"),
    );
    let text = BASE
        .replace("remote_addrs = 10.0.0.2", "remote_addrs = %any")
        .replace("#CHILD", "start_action = trap");
    check(
        parse(&text).unwrap_err(),
        2,
        5,
        ErrorKind::Invalid(ike_core::config::ValidationError {
            connection: "gw".into(),
            child: Some("net".into()),
            field: "start_action",
            invalid: Invalid::InitiateToAny,
        }),
    );
    check(
        bad_replace("id = b.example\n        secret", "id = c.example\n        secret"),
        2,
        5,
        ErrorKind::Invalid(ike_core::config::ValidationError {
            connection: "gw".into(),
            child: None,
            field: "secrets",
            invalid: Invalid::NoSecret,
        }),
    );
    check(
        bad("#TOP", "pools { }"),
        29,
        1,
        ErrorKind::UnknownSection { name: "pools".into(), section: "the file's top level".into() },
    );
    check(bad("#TOP", "secrets { }"), 29, 1, ErrorKind::DuplicateSection("secrets".into()));
    check(bad_replace("ike-gw {", "eap-gw {"), 23, 5, ErrorKind::UnsupportedSecret("eap-gw".into()));
    check(bad("#SECRET", "id-x = @"), 26, 16, ErrorKind::Identity(IdentityError::TypedPrefix("@".into())));
    let in_secret = || "secret 'ike-gw'".to_owned();
    check(
        bad("#SECRET", "x { }"),
        26,
        9,
        ErrorKind::UnknownSection { name: "x".into(), section: in_secret() },
    );
    check(
        bad("#SECRET", "frob = 1"),
        26,
        9,
        ErrorKind::UnknownKey { key: "frob".into(), section: in_secret() },
    );
    check(bad("#TOP", "include /etc/other.conf"), 29, 1, ErrorKind::Syntax(SyntaxError::Include));
    check(bad("#CHILD", "}"), 21, 1, ErrorKind::Syntax(SyntaxError::UnmatchedBrace));
    check(
        bad_replace("    gw {", "    gw {\n    gw2"),
        3,
        5,
        ErrorKind::Syntax(SyntaxError::ExpectedEqualsOrBrace("gw2".into())),
    );
    check(
        bad("#TOP", "connections {"),
        29,
        1,
        ErrorKind::Syntax(SyntaxError::UnclosedSection("connections".into())),
    );
}

#[test]
fn load_reads_a_file_and_reports_unreadable_ones() {
    let dir = std::env::temp_dir().join(format!("iked-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("iked.conf");
    std::fs::write(&path, BASE).unwrap();
    let c = Config::load(&path).unwrap();
    assert_eq!(c, parse(BASE).unwrap());
    let missing = dir.join("missing.conf");
    let e = Config::load(&missing).unwrap_err();
    assert!(matches!(e.kind, ErrorKind::Io(_)) && e.line == 0, "{e}");
    assert!(e.to_string().starts_with(&format!("{}: cannot read: ", missing.display())), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn diff_sorts_connections_for_a_reload() {
    let two = BASE.replace("#TOP", "connections {\n}\n");
    // Two `connections` sections are refused; build the second connection inside the first.
    assert!(parse(&two).is_err());
    let second = "    other {\n        local { auth = psk\n id = a.example }\n        remote { auth = psk\n id = b.example }\n        children { c { } }\n    }\n}\nsecrets {";
    let old = parse(&BASE.replacen("}\nsecrets {", second, 1)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(old.connections.len(), 2);

    let same = Config::diff(&old, &old.clone());
    assert!(same.is_empty());
    assert_eq!(same.unchanged, ["gw", "other"]);

    // gw's child rekeys sooner; other is gone; third is new.
    let third = second.replace("other", "third");
    let new_text = BASE.replace("#CHILD", "rekey_time = 30m").replacen("}\nsecrets {", &third, 1);
    let new = parse(&new_text).unwrap_or_else(|e| panic!("{e}"));
    let d = Config::diff(&old, &new);
    assert_eq!(d.changed, ["gw"]);
    assert_eq!(d.removed, ["other"]);
    assert_eq!(d.added, ["third"]);
    assert!(d.unchanged.is_empty() && !d.secrets_changed);

    // Only the secret changes: no connection does.
    let rekeyed = parse(&BASE.replace("0123456789abcdef0123", "a-new-secret-of-20-oct")).unwrap();
    let d = Config::diff(&parse(BASE).unwrap(), &rekeyed);
    assert!(d.secrets_changed && d.changed.is_empty() && d.unchanged == ["gw"]);
}
