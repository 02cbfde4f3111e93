//! The setkey(8) parser: the manual's examples, every option and algorithm, error positions,
//! printing and reading back, and inputs that must fail without a panic.

use std::net::IpAddr;

use ipsec_core::control::{
    Action, AuthAlg, Dir, EncAlg, KeyBytes, Level, Lifetime, Located, Mode, NatT, PolicySpec, Prefix, Proto,
    Request, Rule, SaId, SaSpec, Selector, Upper, DEFAULT_REPLAY_WINDOW, MAX_REPLAY_WINDOW,
};
use ipsec_core::setkey::{format_request, parse, SetkeyError};

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn hex(s: &str) -> Vec<u8> {
    let s = s.strip_prefix("0x").unwrap();
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

fn key(s: &str) -> KeyBytes {
    KeyBytes::new(&hex(s))
}

/// The only request of `text`.
fn one(text: &str) -> Request {
    let mut v = parse(text).unwrap_or_else(|e| panic!("{e}\n in: {text}"));
    assert_eq!(v.len(), 1, "{text}");
    v.remove(0).item
}

fn add(text: &str) -> SaSpec {
    match one(text) {
        Request::AddSa(sa) => sa,
        r => panic!("not an add: {r:?}"),
    }
}

fn policy(text: &str) -> PolicySpec {
    match one(text) {
        Request::AddPolicy(p) => p,
        r => panic!("not an spdadd: {r:?}"),
    }
}

fn err(text: &str) -> SetkeyError {
    match parse(text) {
        Ok(v) => panic!("parsed, expected an error: {text}\n{v:?}"),
        Err(e) => e,
    }
}

/// Asserts the error's position and that its message contains each of `parts`.
#[track_caller]
fn err_at(text: &str, line: usize, column: usize, parts: &[&str]) {
    let e = err(text);
    assert_eq!((e.line, e.column), (line, column), "{e}\n in: {text}");
    for p in parts {
        assert!(e.message.contains(p), "message {:?} lacks {p:?}\n in: {text}", e.message);
    }
}

const GCM_KEY: &str = "0x3ffe050148193ffe050148193ffe050148193ffe";

/// An SA as `add` makes it with no extensions.
fn sa(src: &str, dst: &str, proto: Proto, spi: u32, enc: EncAlg, enc_key: &str) -> SaSpec {
    SaSpec {
        src: ip(src),
        dst: ip(dst),
        proto,
        spi,
        mode: Mode::Any,
        reqid: 0,
        enc,
        enc_key: if enc_key.is_empty() { KeyBytes::default() } else { key(enc_key) },
        auth: None,
        replay_window: DEFAULT_REPLAY_WINDOW,
        esn: false,
        natt: None,
        hard: Lifetime::default(),
        soft: Lifetime::default(),
    }
}

fn prefix(s: &str) -> Prefix {
    let (a, l) = s.split_once('/').unwrap();
    Prefix { addr: ip(a), len: l.parse().unwrap() }
}

fn selector(src: &str, dst: &str, upper: Upper) -> Selector {
    Selector { src: prefix(src), dst: prefix(dst), sport: None, dport: None, upper }
}

fn located(line: usize, column: usize, item: Request) -> Located<Request> {
    Located { line, column, item }
}

// ---------------------------------------------------------------------------------------
// The manuals' examples.

/// FreeBSD setkey(8), EXAMPLES (sbin/setkey/setkey.8), those that use what this implementation
/// has; the others follow, as errors.
#[test]
fn freebsd_manual_examples() {
    let text = "\
# FreeBSD setkey(8) EXAMPLES
add 3ffe:501:4819::1 3ffe:501:481d::1 esp 123457
\t-E aes-gcm-16 0x3ffe050148193ffe050148193ffe050148193ffe ;

get 3ffe:501:4819::1 3ffe:501:481d::1 ah 123456 ;
flush ;
dump esp ;
spdadd 10.0.11.41/32[21] 10.0.11.33/32[any] any
\t-P out ipsec esp/tunnel/192.168.0.1-192.168.1.2/require ;
";
    let want = vec![
        located(
            2,
            1,
            Request::AddSa(sa(
                "3ffe:501:4819::1",
                "3ffe:501:481d::1",
                Proto::Esp,
                123457,
                EncAlg::AesGcm16,
                GCM_KEY,
            )),
        ),
        located(
            5,
            1,
            Request::GetSa(SaId {
                src: ip("3ffe:501:4819::1"),
                dst: ip("3ffe:501:481d::1"),
                proto: Proto::Ah,
                spi: 123456,
            }),
        ),
        located(6, 1, Request::FlushSa(None)),
        located(7, 1, Request::DumpSa(Some(Proto::Esp))),
        located(
            8,
            1,
            Request::AddPolicy(PolicySpec {
                selector: Selector {
                    sport: Some(21),
                    ..selector("10.0.11.41/32", "10.0.11.33/32", Upper::Any)
                },
                dir: Dir::Out,
                action: Action::Protect(vec![Rule {
                    proto: Proto::Esp,
                    mode: Mode::Tunnel,
                    tunnel: Some((ip("192.168.0.1"), ip("192.168.1.2"))),
                    level: Level::Require,
                }]),
            }),
        ),
    ];
    assert_eq!(parse(text).unwrap(), want);
}

/// The FreeBSD examples this implementation refuses, each with the reason.
#[test]
fn freebsd_manual_examples_that_are_refused() {
    // Host names: the core does no I/O, so no resolution.
    err_at(
        "add -6 myhost.example.com yourhost.example.com ah 123456\n\t-A hmac-sha2-256 \"AH SA configuration!\" ;",
        1,
        8,
        &["host names are not resolved", "`myhost.example.com`"],
    );
    // The same with numbers: the manual's key is 20 bytes, HMAC-SHA-256 needs 32 (RFC 4868).
    err_at(
        "add -6 3ffe:501:4819::1 3ffe:501:481d::1 ah 123456\n\t-A hmac-sha2-256 \"AH SA configuration!\" ;",
        2,
        19,
        &["hmac-sha2-256 takes a 32-byte key, this one is 20 bytes"],
    );
    // TCP-MD5 is not IPsec.
    err_at(
        "add 10.1.10.34 10.1.10.36 tcp 0x1000 -A tcp-md5 \"TCP-MD5 BGP secret\" ;",
        1,
        27,
        &["expected a protocol (esp, esp-udp, ah or ipcomp), found `tcp`"],
    );
}

/// NetBSD ipsec-tools setkey(8), EXAMPLES (crypto/dist/ipsec-tools/src/setkey/setkey.8),
/// with the algorithms this implementation has where the manual uses DES and MD5.
#[test]
fn netbsd_manual_examples() {
    let text = "\
# NetBSD ipsec-tools setkey(8) EXAMPLES, des-cbc/hmac-md5 replaced by aes-cbc/hmac-sha1
add -6 3ffe:501:4819::1 3ffe:501:481d::1 ah 123456
\t-A hmac-sha1 \"AH SA configuration!\" ;

add 10.0.11.41 10.0.11.33 esp 0x10001
\t-E aes-cbc 0x3ffe05014819ffff3ffe05014819ffff
\t-A hmac-sha1 \"authentication!!!!!!\" ;

spdadd 10.0.11.41 10.0.11.33 any
\t-P out ipsec esp/transport//require ;
";
    let got = parse(text).unwrap();
    let mut ah = sa("3ffe:501:4819::1", "3ffe:501:481d::1", Proto::Ah, 123456, EncAlg::Null, "");
    ah.auth = Some((AuthAlg::HmacSha1, KeyBytes::new(b"AH SA configuration!")));
    let mut esp = sa(
        "10.0.11.41",
        "10.0.11.33",
        Proto::Esp,
        0x10001,
        EncAlg::AesCbc,
        "0x3ffe05014819ffff3ffe05014819ffff",
    );
    esp.auth = Some((AuthAlg::HmacSha1, KeyBytes::new(b"authentication!!!!!!")));
    let pol = PolicySpec {
        selector: selector("10.0.11.41/32", "10.0.11.33/32", Upper::Any),
        dir: Dir::Out,
        action: Action::Protect(vec![Rule {
            proto: Proto::Esp,
            mode: Mode::Transport,
            tunnel: None,
            level: Level::Require,
        }]),
    };
    assert_eq!(
        got,
        vec![
            located(2, 1, Request::AddSa(ah)),
            located(5, 1, Request::AddSa(esp)),
            located(9, 1, Request::AddPolicy(pol))
        ]
    );
}

#[test]
fn netbsd_manual_examples_that_are_refused() {
    err_at(
        "add 10.0.11.41 10.0.11.33 esp 0x10001\n\t-E des-cbc 0x3ffe05014819ffff\n\t-A hmac-md5 \"authentication!!\" ;",
        2,
        5,
        &["expected an encryption algorithm (null, aes-cbc, 3des-cbc, aes-gcm-16, chacha20-poly1305), found `des-cbc`"],
    );
    err_at("spdadd ::/0 ::/0 icmp6 135,0 -P in none ;", 1, 24, &["ICMP type and code"]);
    err_at(
        "spdadd 10.0.11.0/24[any] 10.0.11.33/32[any] any -P out ipsec\n    \
         esp/tunnel/192.168.0.1[4500]-192.168.1.2[30000]/require ;",
        2,
        16,
        &["ports on tunnel endpoints"],
    );
    err_at(
        "add 10.0.11.41 10.0.11.33 esp 0x10001\n\t-ctx 1 1 \"system_u:system_r:unconfined_t:SystemLow-SystemHigh\"\n\t\
         -E des-cbc 0x3ffe05014819ffff;",
        2,
        2,
        &["found `-ctx`", "-E ealgo key"],
    );
}

// ---------------------------------------------------------------------------------------
// SAs.

#[test]
fn sa_with_every_extension() {
    let got = add("add -4n 192.0.2.1 198.51.100.7 esp 0xdeadbeef -m tunnel -r 128 -u 7 -f esn -f seq-pad \
                   -lh 3600 -ls 3000 -bh 1000000 -bs 900000 \
                   -E aes-cbc 0x000102030405060708090a0b0c0d0e0f -A hmac-sha2-256 \
                   0x000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f ;");
    let mut want = sa(
        "192.0.2.1",
        "198.51.100.7",
        Proto::Esp,
        0xdeadbeef,
        EncAlg::AesCbc,
        "0x000102030405060708090a0b0c0d0e0f",
    );
    want.mode = Mode::Tunnel;
    want.replay_window = 128;
    want.reqid = 7;
    want.esn = true;
    want.hard = Lifetime { seconds: Some(3600), bytes: Some(1_000_000), packets: None };
    want.soft = Lifetime { seconds: Some(3000), bytes: Some(900_000), packets: None };
    want.auth = Some((
        AuthAlg::HmacSha256,
        key("0x000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"),
    ));
    assert_eq!(got, want);
}

#[test]
fn modes() {
    for (m, want) in [("transport", Mode::Transport), ("tunnel", Mode::Tunnel), ("any", Mode::Any)] {
        let got = add(&format!("add 10.0.0.1 10.0.0.2 esp 1000 -m {m} -E aes-gcm-16 {GCM_KEY} ;"));
        assert_eq!(got.mode, want);
    }
    assert_eq!(add(&format!("add 10.0.0.1 10.0.0.2 esp 1000 -E aes-gcm-16 {GCM_KEY} ;")).mode, Mode::Any);
    err_at(
        &format!("add 10.0.0.1 10.0.0.2 esp 1000 -m beet -E aes-gcm-16 {GCM_KEY} ;"),
        1,
        35,
        &["expected a mode (transport, tunnel or any), found `beet`"],
    );
}

#[test]
fn ipv6_sa_tunnel_mode() {
    let got =
        add(&format!("add -6 2001:db8::1 2001:db8:ffff::2 esp 0x100 -m tunnel -E aes-gcm-16 {GCM_KEY} ;"));
    let mut want = sa("2001:db8::1", "2001:db8:ffff::2", Proto::Esp, 0x100, EncAlg::AesGcm16, GCM_KEY);
    want.mode = Mode::Tunnel;
    assert_eq!(got, want);
}

#[test]
fn replay_window_edges() {
    let with = |r: &str| format!("add 10.0.0.1 10.0.0.2 esp 1000 {r} -E aes-gcm-16 {GCM_KEY} ;");
    assert_eq!(add(&with("")).replay_window, DEFAULT_REPLAY_WINDOW);
    assert_eq!(add(&with("-r 0")).replay_window, 0, "0 turns replay checking off");
    assert_eq!(add(&with("-r 64")).replay_window, 64);
    assert_eq!(add(&with("-r 4096")).replay_window, MAX_REPLAY_WINDOW);
    err_at(
        &with("-r 4097"),
        1,
        35,
        &["replay window 4097 is larger than the largest supported, 4096 packets"],
    );
    err_at(&with("-r 99999999999999999999999"), 1, 35, &["expected a replay window in packets (0 to 4096)"]);
    err_at(&with("-r -1"), 1, 35, &["expected a replay window", "found `-1`"]);
    err_at(&with("-r 64 -r 32"), 1, 38, &["`-r` is given twice"]);
}

#[test]
fn esn_and_padding_flags() {
    let with = |f: &str| format!("add 10.0.0.1 10.0.0.2 esp 1000 {f} -E aes-gcm-16 {GCM_KEY} ;");
    assert!(add(&with("-f esn")).esn);
    assert!(!add(&with("-f seq-pad")).esn);
    assert!(add(&with("-f seq-pad -f esn")).esn);
    err_at(&with("-f zero-pad"), 1, 35, &["-f zero-pad is not supported", "RFC 4303"]);
    err_at(&with("-f random-pad"), 1, 35, &["-f random-pad is not supported"]);
    err_at(&with("-f nocyclic-seq"), 1, 35, &["-f nocyclic-seq is not supported", "never cycle"]);
    err_at(&with("-f turbo"), 1, 35, &["expected esn or seq-pad, found `turbo`"]);
    err_at(&with("-f esn -f esn"), 1, 39, &["`-f esn` is given twice"]);
}

#[test]
fn lifetimes() {
    let with = |f: &str| format!("add 10.0.0.1 10.0.0.2 esp 1000 {f} -E aes-gcm-16 {GCM_KEY} ;");
    let got = add(&with("-lh 100 -ls 80"));
    assert_eq!(got.hard, Lifetime { seconds: Some(100), bytes: None, packets: None });
    assert_eq!(got.soft, Lifetime { seconds: Some(80), bytes: None, packets: None });
    let got = add(&with("-bh 18446744073709551615 -bs 1"));
    assert_eq!(got.hard.bytes, Some(u64::MAX));
    assert_eq!(got.soft.bytes, Some(1));
    // 0 is PF_KEY's "no limit".
    assert_eq!(add(&with("-lh 0 -bs 0")).hard, Lifetime::default());
    err_at(
        &with("-lh 10 -ls 20"),
        1,
        39,
        &["soft lifetime (20 seconds) is longer than the hard one (10 seconds)"],
    );
    err_at(&with("-bs 20 -bh 10"), 1, 32, &["soft lifetime (20 bytes)"]);
    err_at(&with("-lh 1h"), 1, 36, &["expected a lifetime in seconds, found `1h`"]);
    err_at(&with("-bh"), 1, 36, &["expected a lifetime in bytes, found `-E`"]);
}

#[test]
fn reqid() {
    let with = |f: &str| format!("add 10.0.0.1 10.0.0.2 esp 1000 {f} -E aes-gcm-16 {GCM_KEY} ;");
    assert_eq!(add(&with("-u 4294967295")).reqid, u32::MAX);
    err_at(&with("-u 4294967296"), 1, 35, &["expected a reqid"]);
}

#[test]
fn spi_forms_and_reserved_values() {
    let with = |spi: &str| format!("get 10.0.0.1 10.0.0.2 esp {spi} ;");
    let spi = |s: &str| match one(&with(s)) {
        Request::GetSa(id) => id.spi,
        r => panic!("{r:?}"),
    };
    assert_eq!(spi("256"), 256);
    assert_eq!(spi("0x100"), 256);
    assert_eq!(spi("0XFFFFFFFF"), u32::MAX);
    assert_eq!(spi("4294967295"), u32::MAX);
    err_at(&with("255"), 1, 27, &["SPI 255 is reserved"]);
    err_at(&with("0"), 1, 27, &["reserved"]);
    err_at(&with("0x100000000"), 1, 27, &["expected an SPI", "32 bits"]);
    err_at(&with("4294967296"), 1, 27, &["expected an SPI"]);
    err_at(&with("0x"), 1, 27, &["expected an SPI"]);
    err_at(&with("0x+1"), 1, 27, &["expected an SPI"]);
    err_at(&with("+300"), 1, 27, &["expected an SPI"]);
    err_at(&with("spi"), 1, 27, &["expected an SPI", "found `spi`"]);
}

#[test]
fn udp_encapsulation_ports() {
    let tail = format!("-E aes-gcm-16 {GCM_KEY} ;");
    let natt = |text: &str| add(&format!("{text} {tail}")).natt;
    assert_eq!(natt("add 192.0.2.1 198.51.100.7 esp-udp 1000"), Some(NatT { sport: 4500, dport: 4500 }));
    assert_eq!(
        natt("add 192.0.2.1[4500] 198.51.100.7[31000] esp-udp 1000"),
        Some(NatT { sport: 4500, dport: 31000 })
    );
    assert_eq!(
        natt("add 192.0.2.1 198.51.100.7[31000] esp-udp 1000"),
        Some(NatT { sport: 4500, dport: 31000 })
    );
    assert_eq!(natt("add 192.0.2.1[1] 198.51.100.7 esp 1000"), Some(NatT { sport: 1, dport: 4500 }));
    assert_eq!(
        natt("add 192.0.2.1[4501] 198.51.100.7[4502] esp 1000"),
        Some(NatT { sport: 4501, dport: 4502 })
    );
    assert_eq!(natt("add 192.0.2.1 198.51.100.7 esp 1000"), None);
    assert_eq!(
        natt("add 2001:db8::1[4500] 2001:db8::2[65535] esp-udp 1000"),
        Some(NatT { sport: 4500, dport: 65535 })
    );
    assert_eq!(add(&format!("add 192.0.2.1 198.51.100.7 esp-udp 1000 {tail}")).proto, Proto::EspUdp);

    err_at(
        &format!("add 192.0.2.1[0] 198.51.100.7 esp 1000 {tail}"),
        1,
        15,
        &["expected a UDP port from 1 to 65535"],
    );
    err_at(&format!("add 192.0.2.1[65536] 198.51.100.7 esp 1000 {tail}"), 1, 15, &["found `65536`"]);
    err_at(&format!("add 192.0.2.1[any] 198.51.100.7 esp 1000 {tail}"), 1, 15, &["found `any`"]);
    err_at(
        &format!("add 192.0.2.1[4500 198.51.100.7 esp 1000 {tail}"),
        1,
        19,
        &["expected `]` after the port"],
    );
    err_at(
        &format!("add 192.0.2.1[4500]x 198.51.100.7 esp 1000 {tail}"),
        1,
        20,
        &["expected nothing after `]`"],
    );
    err_at(
        "add 192.0.2.1 198.51.100.7[4500] ah 1000 -A hmac-sha1 0x0102030405060708090a0b0c0d0e0f1011121314 ;",
        1,
        28,
        &["ports (UDP encapsulation) are only for esp and esp-udp, not ah"],
    );
    err_at("get 192.0.2.1[4500] 198.51.100.7 esp 1000 ;", 1, 15, &["a port is not part of an SA's identity"]);
}

#[test]
fn every_encryption_algorithm_and_key_form() {
    let auth = "-A hmac-sha1 0x000102030405060708090a0b0c0d0e0f10111213";
    for enc in EncAlg::ALL {
        for &len in enc.key_lens() {
            let bytes: Vec<u8> = (0..len as u8).collect();
            let hexkey: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            let a = if enc.is_aead() { "" } else { auth };
            let forms = if len == 0 {
                vec![String::new(), "\"\"".to_string()]
            } else {
                vec![format!("0x{hexkey}"), format!("0X{}", hexkey.to_uppercase())]
            };
            for k in forms {
                let text = format!("add 10.0.0.1 10.0.0.2 esp 1000 -E {} {k} {a} ;", enc.name());
                let got = add(&text);
                assert_eq!((got.enc, got.enc_key.as_bytes()), (enc, &bytes[..]), "{text}");
                assert_eq!(got.auth.is_some(), !enc.is_aead());
            }
            // A quoted key of the same length.
            if len > 0 {
                let quoted: String = (0..len).map(|i| char::from(b'a' + (i % 26) as u8)).collect();
                let text = format!("add 10.0.0.1 10.0.0.2 esp 1000 -E {} \"{quoted}\" {a} ;", enc.name());
                assert_eq!(add(&text).enc_key.as_bytes(), quoted.as_bytes());
            }
        }
        // One byte too many is refused with the lengths that would do.
        let len = enc.key_lens().last().unwrap() + 1;
        let k: String = "ab".repeat(len);
        let a = if enc.is_aead() { "" } else { auth };
        let text = format!("add 10.0.0.1 10.0.0.2 esp 1000 -E {} 0x{k} {a} ;", enc.name());
        let e = err(&text);
        assert_eq!((e.line, e.column), (1, 36 + enc.name().len()), "{e}");
        assert!(e.message.contains(&format!("this one is {len} bytes")), "{e}");
    }
    // Aliases.
    for (alias, enc) in [
        ("rijndael-cbc", EncAlg::AesCbc),
        ("des-ede3-cbc", EncAlg::TdesCbc),
        ("aes-gcm", EncAlg::AesGcm16),
        ("rfc4106-gcm-16", EncAlg::AesGcm16),
    ] {
        let k = "ab".repeat(enc.key_lens()[0]);
        let a = if enc.is_aead() { "" } else { auth };
        assert_eq!(add(&format!("add 10.0.0.1 10.0.0.2 esp 1000 -E {alias} 0x{k} {a} ;")).enc, enc);
    }
}

#[test]
fn key_length_messages_list_the_lengths() {
    let e = err("add 10.0.0.1 10.0.0.2 esp 1000 -E aes-cbc 0x0011 -A hmac-sha1 0x00 ;");
    assert_eq!(e.message, "aes-cbc takes a 16-, 24- or 32-byte key, this one is 2 bytes");
    let e = err("add 10.0.0.1 10.0.0.2 esp 1000 -E aes-gcm-16 0x0011 ;");
    assert_eq!(e.message, "aes-gcm-16 takes a 20-, 28- or 36-byte key, this one is 2 bytes");
    let e = err("add 10.0.0.1 10.0.0.2 esp 1000 -E 3des-cbc 0x0011 -A hmac-sha1 0x00 ;");
    assert_eq!(e.message, "3des-cbc takes a 24-byte key, this one is 2 bytes");
    let e = err("add 10.0.0.1 10.0.0.2 esp 1000 -E null 0x00 -A hmac-sha1 0x00 ;");
    assert!(e.message.starts_with("null takes no key"), "{e}");
}

#[test]
fn every_authentication_algorithm() {
    for auth in AuthAlg::ALL {
        let bytes: Vec<u8> = (0..auth.key_len()).map(|i| i as u8 ^ 0x5a).collect();
        let hexkey: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        for proto in ["esp", "esp-udp"] {
            let text = format!(
                "add 10.0.0.1 10.0.0.2 {proto} 1000 -E aes-cbc 0x000102030405060708090a0b0c0d0e0f -A {} 0x{hexkey} ;",
                auth.name()
            );
            let got = add(&text);
            assert_eq!(got.auth.as_ref().map(|(a, k)| (*a, k.as_bytes())), Some((auth, &bytes[..])));
        }
        // AH, with a quoted key.
        let quoted = "k".repeat(auth.key_len());
        let got = add(&format!("add 10.0.0.1 10.0.0.2 ah 1000 -A {} \"{quoted}\" ;", auth.name()));
        assert_eq!(got.proto, Proto::Ah);
        assert_eq!((got.enc, got.enc_key.as_bytes()), (EncAlg::Null, &[][..]));
        assert_eq!(got.auth.map(|(a, k)| (a, k.as_bytes().to_vec())), Some((auth, quoted.into_bytes())));
        // One byte short.
        let short = "k".repeat(auth.key_len() - 1);
        let e = err(&format!("add 10.0.0.1 10.0.0.2 ah 1000 -A {} \"{short}\" ;", auth.name()));
        assert_eq!(
            e.message,
            format!(
                "{} takes a {}-byte key, this one is {} bytes",
                auth.name(),
                auth.key_len(),
                auth.key_len() - 1
            )
        );
        assert_eq!(e.column, 35 + auth.name().len());
    }
    err_at(
        "add 10.0.0.1 10.0.0.2 ah 1000 -A hmac-md5 0x00 ;",
        1,
        34,
        &["expected an authentication algorithm (hmac-sha1, hmac-sha2-256, hmac-sha2-384, hmac-sha2-512, aes-gmac), found `hmac-md5`"],
    );
    err_at("add 10.0.0.1 10.0.0.2 ah 1000 -A null ;", 1, 34, &["found `null`"]);
}

/// AH's AES-GMAC (RFC 4543): AES-128, -192 or -256 key and a 4-byte salt, printed back as
/// given; any other length is refused with the three that would do.
#[test]
fn aes_gmac_for_ah() {
    for len in [20, 28, 36] {
        let hexkey: String = (0..len).map(|i| format!("{:02x}", i as u8 ^ 0x33)).collect();
        let text = format!("add 10.0.0.1 10.0.0.2 ah 1000 -A aes-gmac 0x{hexkey} ;");
        let got = add(&text);
        assert_eq!(got.auth.as_ref().map(|(a, k)| (*a, k.as_bytes().len())), Some((AuthAlg::AesGmac, len)));
        assert_eq!(AuthAlg::AesGmac.icv_len(), 16);
    }
    let e = err("add 10.0.0.1 10.0.0.2 ah 1000 -A aes-gmac 0x00112233445566778899aabbccddeeff ;");
    assert_eq!(e.message, "aes-gmac takes a 20-, 28- or 36-byte key, this one is 16 bytes");
}

#[test]
fn null_encryption() {
    let sha = "-A hmac-sha1 0x000102030405060708090a0b0c0d0e0f10111213";
    for k in ["", "\"\""] {
        let got = add(&format!("add 10.0.0.1 10.0.0.2 esp 1000 -E null {k} {sha} ;"));
        assert_eq!((got.enc, got.enc_key.as_bytes().len()), (EncAlg::Null, 0));
        assert!(got.auth.is_some());
    }
    err_at(
        "add 10.0.0.1 10.0.0.2 esp 1000 -E null ;",
        1,
        40,
        &["expected -A, found `;`: null encryption needs -A"],
    );
    err_at("add 10.0.0.1 10.0.0.2 esp 1000 -E null \"\" ;", 1, 43, &["null encryption needs -A"]);
    err_at("add 10.0.0.1 10.0.0.2 esp 1000 -E null 0x ;", 1, 40, &["expected hex digits after 0x"]);
}

#[test]
fn authentication_rules() {
    // ESP without authentication.
    err_at(
        "add 10.0.0.1 10.0.0.2 esp 1000 -E aes-cbc 0x000102030405060708090a0b0c0d0e0f ;",
        1,
        78,
        &["expected -A, found `;`", "ESP without authentication is not supported", "aes-cbc"],
    );
    // An AEAD with -A.
    err_at(
        &format!("add 10.0.0.1 10.0.0.2 esp 1000 -E aes-gcm-16 {GCM_KEY} -A hmac-sha1 0x00 ;"),
        1,
        89,
        &["aes-gcm-16 authenticates by itself: remove -A"],
    );
    // ESP with only -A.
    err_at(
        "add 10.0.0.1 10.0.0.2 esp 1000 -A hmac-sha1 0x000102030405060708090a0b0c0d0e0f10111213 ;",
        1,
        32,
        &["-E ealgo key, found `-A`", "-E null -A"],
    );
    // AH with -E.
    err_at(
        &format!("add 10.0.0.1 10.0.0.2 ah 1000 -E aes-gcm-16 {GCM_KEY} ;"),
        1,
        31,
        &["AH only authenticates"],
    );
    // A missing key, and a word where the key should be (not quoted back: it may be a key).
    err_at(
        "add 10.0.0.1 10.0.0.2 esp 1000 -E aes-cbc -A hmac-sha1 0x00 ;",
        1,
        43,
        &["expected a key", "found `-A`"],
    );
    let e = err("add 10.0.0.1 10.0.0.2 esp 1000 -E aes-cbc supersecretkey1 -A hmac-sha1 0x00 ;");
    assert_eq!((e.line, e.column), (1, 43));
    assert!(!e.message.contains("supersecret"), "{e}");
    let e = err("add 10.0.0.1 10.0.0.2 ah 1000 -A hmac-sha1 topsecret ;");
    assert_eq!((e.line, e.column), (1, 44));
    assert!(!e.message.contains("topsecret"), "{e}");
}

#[test]
fn ipcomp() {
    let got = add("add 10.0.0.1 10.0.0.2 ipcomp 0x4000 -m transport -C deflate ;");
    let mut want = sa("10.0.0.1", "10.0.0.2", Proto::IpComp, 0x4000, EncAlg::Null, "");
    want.mode = Mode::Transport;
    assert_eq!(got, want);
    // -R (the SPI is the CPI on the wire) is what happens anyway.
    assert_eq!(add("add 10.0.0.1 10.0.0.2 ipcomp 0x4000 -m transport -C deflate -R ;"), want);
    err_at(
        "add 10.0.0.1 10.0.0.2 ipcomp 0x10000 -C deflate ;",
        1,
        30,
        &["CPI 0x10000 does not fit the 16-bit CPI field"],
    );
    // ESP SPIs have 32 bits.
    add("add 10.0.0.1 10.0.0.2 esp 0x10000 -E aes-gcm-16 0x00112233445566778899aabbccddeeff00112233 ;");
    err_at(
        "add 10.0.0.1 10.0.0.2 ipcomp 0x4000 -C lzs ;",
        1,
        40,
        &["expected a compression algorithm (deflate)"],
    );
    err_at("add 10.0.0.1 10.0.0.2 ipcomp 0x4000 -E null ;", 1, 37, &["-C calgo", "found `-E`"]);
}

#[test]
fn hex_key_errors() {
    let pre = "add 10.0.0.1 10.0.0.2 esp 1000 -E aes-gcm-16 ";
    err_at(
        &format!("{pre}0x3ffe0501481g3ffe050148193ffe050148193ffe ;"),
        1,
        59,
        &["expected a hex digit in the key, found `g`"],
    );
    err_at(
        &format!("{pre}0x3ffe050148193ffe050148193ffe050148193ff ;"),
        1,
        46,
        &["odd number (39) of digits"],
    );
    err_at(&format!("{pre}0xé0 ;"), 1, 48, &["found `é`"]);
    err_at(&format!("{pre}\"unterminated ;\nflush ;"), 1, 46, &["unterminated string"]);
    err_at(&format!("{pre}\"unterminated"), 1, 46, &["unterminated string"]);
}

#[test]
fn addresses() {
    let e = |text: &str| err(text);
    err_at(
        "get 10.0.0.256 10.0.0.1 esp 1000 ;",
        1,
        5,
        &["expected a source address (an IPv4 or IPv6 address), found `10.0.0.256`"],
    );
    err_at(
        "get 10.0.0.1 2001:db8::1 esp 1000 ;",
        1,
        14,
        &["expected an IPv4 destination address to match the source"],
    );
    err_at("get -4 2001:db8::1 2001:db8::2 esp 1000 ;", 1, 8, &["of IPv4 (-4 was given)"]);
    err_at("get -6 10.0.0.1 10.0.0.2 esp 1000 ;", 1, 8, &["of IPv6 (-6 was given)"]);
    err_at("get fe80::1%em0 fe80::2 esp 1000 ;", 1, 13, &["scoped addresses"]);
    err_at("get 2001:db8:::1 2001:db8::2 esp 1000 ;", 1, 5, &["found `2001:db8:::1`"]);
    err_at("get 10.0.0.1/32 10.0.0.2 esp 1000 ;", 1, 5, &["expected a source address"]);
    // -4 then -6: the last one counts, as in setkey.
    assert!(matches!(one("get -4 -6n ::1 ::2 esp 1000 ;"), Request::GetSa(_)));
    assert_eq!(e("get -x 10.0.0.1 10.0.0.2 esp 1000 ;").column, 5);
}

#[test]
fn get_delete_deleteall_flush_dump() {
    let id = SaId { src: ip("2001:db8::1"), dst: ip("2001:db8::2"), proto: Proto::EspUdp, spi: 0x1234 };
    assert_eq!(one("get 2001:db8::1 2001:db8::2 esp-udp 0x1234 ;"), Request::GetSa(id));
    assert_eq!(one("delete 2001:db8::1 2001:db8::2 esp-udp 4660;"), Request::DeleteSa(id));
    assert_eq!(
        one("deleteall 10.0.0.1 10.0.0.2 ah ;"),
        Request::DeleteAllSa { src: ip("10.0.0.1"), dst: ip("10.0.0.2"), proto: Proto::Ah }
    );
    for (p, proto) in
        [("esp", Proto::Esp), ("esp-udp", Proto::EspUdp), ("ah", Proto::Ah), ("ipcomp", Proto::IpComp)]
    {
        assert_eq!(one(&format!("flush {p};")), Request::FlushSa(Some(proto)));
        assert_eq!(one(&format!("dump {p} ;")), Request::DumpSa(Some(proto)));
    }
    assert_eq!(one("flush;"), Request::FlushSa(None));
    assert_eq!(one("dump ;"), Request::DumpSa(None));
    assert_eq!(one("spdflush ;"), Request::FlushPolicies);
    assert_eq!(one("spddump;"), Request::DumpPolicies);
    err_at("flush esp-old ;", 1, 7, &["a protocol (esp, esp-udp, ah or ipcomp), found `esp-old`"]);
    err_at("dump esp esp ;", 1, 10, &["expected `;`, found `esp`"]);
    err_at("delete 10.0.0.1 10.0.0.2 esp 1000 -m tunnel ;", 1, 35, &["expected `;`, found `-m`"]);
}

// ---------------------------------------------------------------------------------------
// Policies.

fn esp(mode: Mode, tunnel: Option<(&str, &str)>, level: Level) -> Rule {
    Rule { proto: Proto::Esp, mode, tunnel: tunnel.map(|(a, b)| (ip(a), ip(b))), level }
}

#[test]
fn policy_rules() {
    let rules =
        |r: &str| match policy(&format!("spdadd 10.0.0.0/8 10.1.0.0/16 any -P out ipsec {r} ;")).action {
            Action::Protect(rules) => rules,
            a => panic!("{a:?}"),
        };
    let t = Some(("192.0.2.1", "192.0.2.2"));
    assert_eq!(rules("esp/transport//require"), vec![esp(Mode::Transport, None, Level::Require)]);
    assert_eq!(rules("esp/transport//use"), vec![esp(Mode::Transport, None, Level::Use)]);
    assert_eq!(rules("esp/transport//default"), vec![esp(Mode::Transport, None, Level::Require)]);
    assert_eq!(rules("esp/transport//unique"), vec![esp(Mode::Transport, None, Level::Unique(0))]);
    assert_eq!(rules("esp/transport//unique:1"), vec![esp(Mode::Transport, None, Level::Unique(1))]);
    assert_eq!(rules("esp/transport//unique:32767"), vec![esp(Mode::Transport, None, Level::Unique(32767))]);
    // libipsec's shorter forms: level default.
    assert_eq!(rules("esp/transport"), vec![esp(Mode::Transport, None, Level::Require)]);
    assert_eq!(rules("esp/transport/"), vec![esp(Mode::Transport, None, Level::Require)]);
    assert_eq!(rules("esp/transport//"), vec![esp(Mode::Transport, None, Level::Require)]);
    assert_eq!(rules("esp/tunnel/192.0.2.1-192.0.2.2"), vec![esp(Mode::Tunnel, t, Level::Require)]);
    assert_eq!(rules("esp/tunnel/192.0.2.1-192.0.2.2/"), vec![esp(Mode::Tunnel, t, Level::Require)]);
    assert_eq!(
        rules("esp/tunnel/192.0.2.1-192.0.2.2/unique:7"),
        vec![esp(Mode::Tunnel, t, Level::Unique(7))]
    );
    assert_eq!(
        rules("esp/tunnel/2001:db8::1-2001:db8::2/require"),
        vec![esp(Mode::Tunnel, Some(("2001:db8::1", "2001:db8::2")), Level::Require)]
    );
    // A bundle (the databases refuse more than one rule; the parser reads them).
    assert_eq!(
        rules("esp/transport//require ah/transport//require"),
        vec![
            esp(Mode::Transport, None, Level::Require),
            Rule { proto: Proto::Ah, mode: Mode::Transport, tunnel: None, level: Level::Require }
        ]
    );
    assert_eq!(
        rules("ipcomp/tunnel/::1-::2/use"),
        vec![Rule {
            proto: Proto::IpComp,
            mode: Mode::Tunnel,
            tunnel: Some((ip("::1"), ip("::2"))),
            level: Level::Use
        }]
    );
}

#[test]
fn policy_rule_errors() {
    let pre = "spdadd 10.0.0.0/8 10.1.0.0/16 any -P out ipsec ";
    let at = |r: &str, col: usize, parts: &[&str]| err_at(&format!("{pre}{r} ;"), 1, col, parts);
    at("esp", 48, &["expected a rule protocol/mode/src-dst/level, found `esp`"]);
    at("esp-udp/transport//require", 48, &["expected a rule protocol (esp, ah or ipcomp)"]);
    at("esp/beet//require", 52, &["expected a mode (transport or tunnel), found `beet`"]);
    at("esp/any//require", 52, &["expected a mode"]);
    at("esp/tunnel//require", 59, &["tunnel endpoints src-dst (tunnel mode needs them), found nothing"]);
    at("esp/tunnel", 58, &["tunnel mode needs them"]);
    at("esp/transport/192.0.2.1-192.0.2.2/require", 62, &["endpoints are only for tunnel mode"]);
    at("esp/tunnel/192.0.2.1/require", 59, &["expected tunnel endpoints src-dst, found `192.0.2.1`"]);
    at("esp/tunnel/192.0.2.1-192.0.2.300/require", 69, &["found `192.0.2.300`"]);
    at("esp/tunnel/192.0.2.1-::1/require", 69, &["an IPv4 tunnel endpoint to match the first"]);
    at("esp/tunnel/me-any/require", 59, &["`me` as a tunnel endpoint is not supported"]);
    at("esp/tunnel/192.0.2.1-192.0.2.2/required", 79, &["expected a level", "found `required`"]);
    at("esp/tunnel/192.0.2.1-192.0.2.2/unique:0", 79, &["unique:N with N from 1 to 32767"]);
    at("esp/tunnel/192.0.2.1-192.0.2.2/unique:32768", 79, &["unique:N"]);
    at("esp/tunnel/192.0.2.1-192.0.2.2/unique:x", 79, &["unique:N"]);
    at("esp/tunnel/192.0.2.1-192.0.2.2/require/x", 79, &["expected a level", "found `require/x`"]);
    err_at(&format!("{pre};"), 1, 48, &["expected a rule (protocol/mode/src-dst/level), found `;`"]);
    err_at(
        "spdadd 10.0.0.0/8 10.1.0.0/16 any -P out none esp/transport//require ;",
        1,
        47,
        &["expected `;`"],
    );
    err_at(
        "spdadd 10.0.0.0/8 10.1.0.0/16 any -P out prio 10 none ;",
        1,
        42,
        &["priorities are not supported"],
    );
    err_at("spdadd 10.0.0.0/8 10.1.0.0/16 any -P out entrust ;", 1, 42, &["`entrust`", "not supported"]);
    err_at(
        "spdadd 10.0.0.0/8 10.1.0.0/16 any -P out ;",
        1,
        42,
        &["expected an action (none, discard or ipsec), found `;`"],
    );
    err_at(
        "spdadd 10.0.0.0/8 10.1.0.0/16 any -P up none ;",
        1,
        38,
        &["expected a direction (in, out or fwd), found `up`"],
    );
    err_at(
        "spdadd 10.0.0.0/8 10.1.0.0/16 any out none ;",
        1,
        35,
        &["expected -P and the policy, found `out`"],
    );
    err_at("spdadd tagged \"foo\" -P out none ;", 1, 8, &["found `tagged`"]);
}

#[test]
fn policy_selectors() {
    let p = policy("spdadd -6 2001:db8::/32[any] 2001:db8:1::5[443] tcp -P fwd discard ;");
    assert_eq!(
        p,
        PolicySpec {
            selector: Selector {
                dport: Some(443),
                ..selector("2001:db8::/32", "2001:db8:1::5/128", Upper::Tcp)
            },
            dir: Dir::Fwd,
            action: Action::Discard,
        }
    );
    let p = policy("spdadd 0.0.0.0/0[0] 10.0.0.1[65535] udp -P in none ;");
    assert_eq!(p.selector.sport, None, "port 0 is any");
    assert_eq!(p.selector.dport, Some(65535));
    assert_eq!(p.selector.src, prefix("0.0.0.0/0"));
    assert_eq!(p.selector.dst, prefix("10.0.0.1/32"));
    assert_eq!(p.action, Action::Bypass);
    // Host bits are kept as written (matching masks them).
    assert_eq!(
        policy("spdadd 10.1.2.3/8 10.0.0.0/8 any -P in none ;").selector.src,
        Prefix { addr: ip("10.1.2.3"), len: 8 }
    );
    for (u, want) in [
        ("any", Upper::Any),
        ("tcp", Upper::Tcp),
        ("udp", Upper::Udp),
        ("icmp", Upper::Icmp),
        ("icmp6", Upper::Icmp6),
        ("ipv6-icmp", Upper::Icmp6),
        ("ip4", Upper::Number(4)),
        ("gre", Upper::Number(47)),
        ("esp", Upper::Number(50)),
        ("ah", Upper::Number(51)),
        ("sctp", Upper::Number(132)),
        ("0", Upper::Number(0)),
        ("6", Upper::Number(6)),
        ("254", Upper::Number(254)),
    ] {
        assert_eq!(policy(&format!("spdadd ::/0 ::/0 {u} -P out none ;")).selector.upper, want, "{u}");
    }
    err_at("spdadd ::/0 ::/0 255 -P out none ;", 1, 18, &["expected an upper-layer protocol"]);
    err_at("spdadd ::/0 ::/0 256 -P out none ;", 1, 18, &["found `256`"]);
    err_at("spdadd ::/0 ::/0 tpc -P out none ;", 1, 18, &["found `tpc`"]);
    err_at(
        "spdadd 10.0.0.0/33 ::/0 any -P out none ;",
        1,
        17,
        &["a prefix length from 0 to 32 for an IPv4 address, found `33`"],
    );
    err_at(
        "spdadd ::/129 ::/0 any -P out none ;",
        1,
        11,
        &["from 0 to 128 for an IPv6 address, found `129`"],
    );
    err_at("spdadd ::/ ::/0 any -P out none ;", 1, 11, &["found nothing"]);
    err_at(
        "spdadd ::/0 10.0.0.0/8 any -P out none ;",
        1,
        13,
        &["expected an IPv6 destination to match the source"],
    );
    err_at("spdadd ::/0[65536] ::/0 any -P out none ;", 1, 13, &["expected a port from 0 to 65535, or any"]);
    err_at("spdadd ::/0[80 ::/0 any -P out none ;", 1, 15, &["expected `]` after the port"]);
    err_at("spdadd host.example/24 ::/0 any -P out none ;", 1, 8, &["host names are not resolved"]);
}

#[test]
fn spddelete() {
    let sel = selector("10.0.0.0/8", "10.1.0.0/16", Upper::Any);
    let want = Request::DeletePolicy { selector: sel, dir: Dir::Out };
    assert_eq!(one("spddelete 10.0.0.0/8 10.1.0.0/16 any -P out ;"), want);
    // A policy copied from the spdadd is checked and not needed.
    assert_eq!(one("spddelete 10.0.0.0/8 10.1.0.0/16 any -P out ipsec esp/transport//require ;"), want);
    err_at(
        "spddelete 10.0.0.0/8 10.1.0.0/16 any -P out ipsec esp/bad//require ;",
        1,
        55,
        &["expected a mode"],
    );
    err_at("spddelete 10.0.0.0/8 10.1.0.0/16 any ;", 1, 38, &["expected -P"]);
}

// ---------------------------------------------------------------------------------------
// Layout and error positions.

#[test]
fn statements_span_lines_and_comments_run_to_the_end_of_the_line() {
    let text = "# comment;add\n\n  flush   # ; not the end\n  esp\n;spdflush;spddump; # done\n   \t\r\n";
    let got = parse(text).unwrap();
    assert_eq!(
        got,
        vec![
            located(3, 3, Request::FlushSa(Some(Proto::Esp))),
            located(5, 2, Request::FlushPolicies),
            located(5, 11, Request::DumpPolicies)
        ]
    );
    assert_eq!(parse("").unwrap(), vec![]);
    assert_eq!(parse("# only a comment").unwrap(), vec![]);
    // Windows line ends.
    assert_eq!(parse("flush ;\r\ndump ;\r\n").unwrap().len(), 2);
}

#[test]
fn error_positions() {
    // Line 3, column 17: the prefix length.
    err_at("flush ;\nspdflush ;\nspdadd 10.0.0.0/40 10.1.0.0/16 any -P out none ;", 3, 17, &["found `40`"]);
    // A missing `;` is found at the next statement.
    err_at(
        "flush\nspdflush ;",
        2,
        1,
        &["expected `;` or a protocol (esp, esp-udp, ah or ipcomp), found `spdflush`"],
    );
    err_at("flush esp\n\n  dump ;", 3, 3, &["expected `;`, found `dump`"]);
    // ... or at the end of the input.
    err_at("spdflush ;\nflush esp", 2, 10, &["expected `;`, found the end of the input"]);
    err_at(
        &format!("add 10.0.0.1 10.0.0.2 esp 1000\n  -E aes-gcm-16 {GCM_KEY}"),
        2,
        59,
        &["expected `;`, found the end of the input"],
    );
    err_at(
        "add 10.0.0.1 10.0.0.2 esp 1000\n  -E aes-cbc 0x000102030405060708090a0b0c0d0e0f\nadd",
        3,
        1,
        &["expected -A, found `add`"],
    );
    // Unknown commands list the valid ones.
    err_at(
        "flush ;\n\treplace 10.0.0.1 10.0.0.2 esp 1000 ;",
        2,
        2,
        &["expected a command (add, update, getspi, get, delete", "found `replace`"],
    );
    err_at(";", 1, 1, &["expected a command", "found `;`"]);
    err_at("\"flush\" ;", 1, 1, &["expected a command", "found a quoted string"]);
    // An extension after the algorithms.
    err_at(
        &format!("add 10.0.0.1 10.0.0.2 esp 1000 -E aes-gcm-16 {GCM_KEY} -m tunnel ;"),
        1,
        89,
        &["come before the algorithms"],
    );
    // Column counts characters, not bytes.
    err_at("# ünïcödé\nflush ü ;", 2, 7, &["found `ü`"]);
    // Long words are shortened in messages.
    let long = "x".repeat(100);
    let e = err(&format!("flush {long} ;"));
    assert!(e.message.len() < 120, "{e}");
    // Display.
    let e = err("flush ;\n\nget ::1 ::2 esp spi ;");
    assert_eq!(
        e.to_string(),
        "line 3, column 17: expected an SPI (a decimal number, or hex after 0x) that fits in 32 bits, found `spi`"
    );
}

// ---------------------------------------------------------------------------------------
// Printing and reading back.

fn full_sa() -> SaSpec {
    let mut s = sa(
        "2001:db8::1",
        "2001:db8::2",
        Proto::EspUdp,
        0xc0ffee,
        EncAlg::AesCbc,
        "0x00112233445566778899aabbccddeeff",
    );
    s.mode = Mode::Tunnel;
    s.reqid = 42;
    s.replay_window = 0;
    s.esn = true;
    s.natt = Some(NatT { sport: 4500, dport: 61000 });
    s.hard = Lifetime { seconds: Some(86400), bytes: Some(1 << 40), packets: None };
    s.soft = Lifetime { seconds: Some(80000), bytes: Some(1 << 39), packets: None };
    s.auth = Some((AuthAlg::HmacSha512, KeyBytes::new(&[0xa5; 64])));
    s
}

fn requests() -> Vec<Request> {
    let mut v = vec![Request::AddSa(full_sa())];
    for enc in EncAlg::ALL {
        for &len in enc.key_lens() {
            let mut s = sa("192.0.2.1", "192.0.2.2", Proto::Esp, 256 + len as u32, enc, "");
            s.enc_key = KeyBytes::new(&vec![0x3c; len]);
            if !enc.is_aead() {
                s.auth = Some((AuthAlg::HmacSha1, KeyBytes::new(&[7; 20])));
            }
            v.push(Request::AddSa(s));
        }
    }
    let mut natt = sa("192.0.2.1", "192.0.2.2", Proto::Esp, 999, EncAlg::ChaCha20Poly1305, "");
    natt.enc_key = KeyBytes::new(&[1; 36]);
    natt.natt = Some(NatT { sport: 1, dport: 65535 });
    natt.replay_window = MAX_REPLAY_WINDOW;
    v.push(Request::AddSa(natt));
    let mut ah = sa("::1", "::2", Proto::Ah, u32::MAX, EncAlg::Null, "");
    ah.auth = Some((AuthAlg::HmacSha384, KeyBytes::new(&[9; 48])));
    ah.mode = Mode::Transport;
    v.push(Request::AddSa(ah));
    v.push(Request::AddSa(sa("10.0.0.1", "10.0.0.2", Proto::IpComp, 0x4000, EncAlg::Null, "")));
    let id = SaId { src: ip("2001:db8::1"), dst: ip("2001:db8::2"), proto: Proto::Esp, spi: 0xffff_ffff };
    v.push(Request::GetSa(id));
    v.push(Request::DeleteSa(SaId { proto: Proto::EspUdp, spi: 256, ..id }));
    v.push(Request::DeleteAllSa { src: ip("10.0.0.1"), dst: ip("10.0.0.2"), proto: Proto::Ah });
    for p in [None, Some(Proto::Esp), Some(Proto::EspUdp), Some(Proto::Ah), Some(Proto::IpComp)] {
        v.push(Request::FlushSa(p));
        v.push(Request::DumpSa(p));
    }
    let uppers =
        [Upper::Any, Upper::Tcp, Upper::Udp, Upper::Icmp, Upper::Icmp6, Upper::Number(0), Upper::Number(254)];
    let levels = [Level::Use, Level::Require, Level::Unique(0), Level::Unique(1), Level::Unique(32767)];
    for (i, upper) in uppers.into_iter().enumerate() {
        let sel = Selector {
            src: prefix("2001:db8::/48"),
            dst: prefix("::/0"),
            sport: Some(80).filter(|_| i % 2 == 0),
            dport: Some(65535).filter(|_| i % 3 == 0),
            upper,
        };
        let level = levels[i % levels.len()];
        v.push(Request::AddPolicy(PolicySpec {
            selector: sel,
            dir: [Dir::In, Dir::Out, Dir::Fwd][i % 3],
            action: Action::Protect(vec![
                Rule {
                    proto: Proto::Esp,
                    mode: Mode::Tunnel,
                    tunnel: Some((ip("2001:db8::a"), ip("2001:db8::b"))),
                    level,
                },
                Rule { proto: Proto::Ah, mode: Mode::Transport, tunnel: None, level },
            ]),
        }));
        v.push(Request::DeletePolicy { selector: sel, dir: Dir::Fwd });
    }
    let sel = Selector { sport: Some(1), ..selector("10.0.0.0/8", "10.1.2.3/32", Upper::Udp) };
    v.push(Request::AddPolicy(PolicySpec { selector: sel, dir: Dir::Out, action: Action::Bypass }));
    v.push(Request::AddPolicy(PolicySpec { selector: sel, dir: Dir::In, action: Action::Discard }));
    v.push(Request::AddPolicy(PolicySpec {
        selector: sel,
        dir: Dir::Out,
        action: Action::Protect(vec![esp(Mode::Tunnel, Some(("192.0.2.1", "192.0.2.2")), Level::Unique(9))]),
    }));
    v.push(Request::FlushPolicies);
    v.push(Request::DumpPolicies);
    v
}

#[test]
fn format_then_parse_gives_the_request_back() {
    let reqs = requests();
    assert!(reqs.len() > 40);
    for r in &reqs {
        let text = format_request(r);
        assert_eq!(
            parse(&text).unwrap_or_else(|e| panic!("{e}\n in: {text}")),
            vec![located(1, 1, r.clone())],
            "{text}"
        );
    }
    // All of them in one file, one per line.
    let file: String = reqs.iter().map(|r| format_request(r) + "\n").collect();
    let got = parse(&file).unwrap();
    assert_eq!(got.into_iter().map(|l| l.item).collect::<Vec<_>>(), reqs);
}

#[test]
fn format_looks_like_setkey() {
    assert_eq!(
        format_request(&Request::AddSa(full_sa())),
        format!(
            "add 2001:db8::1[4500] 2001:db8::2[61000] esp-udp 0xc0ffee -m tunnel -r 0 -u 42 -f esn \
             -lh 86400 -ls 80000 -bh 1099511627776 -bs 549755813888 \
             -E aes-cbc 0x00112233445566778899aabbccddeeff -A hmac-sha2-512 0x{} ;",
            "a5".repeat(64)
        )
    );
    assert_eq!(
        format_request(&Request::AddPolicy(PolicySpec {
            selector: Selector { sport: Some(21), ..selector("10.0.11.41/32", "10.0.11.33/32", Upper::Any) },
            dir: Dir::Out,
            action: Action::Protect(vec![esp(Mode::Tunnel, Some(("192.168.0.1", "192.168.1.2")), Level::Require)]),
        })),
        "spdadd 10.0.11.41/32[21] 10.0.11.33/32 any -P out ipsec esp/tunnel/192.168.0.1-192.168.1.2/require ;"
    );
    let mut null = sa("10.0.0.1", "10.0.0.2", Proto::Esp, 0x1000, EncAlg::Null, "");
    null.auth = Some((AuthAlg::HmacSha1, KeyBytes::new(&[0; 20])));
    assert_eq!(
        format_request(&Request::AddSa(null)),
        format!("add 10.0.0.1 10.0.0.2 esp 0x1000 -m any -r 64 -E null -A hmac-sha1 0x{} ;", "00".repeat(20))
    );
    assert_eq!(format_request(&Request::FlushSa(None)), "flush ;");
    assert_eq!(format_request(&Request::DumpSa(Some(Proto::Esp))), "dump esp ;");
}

#[test]
fn parse_then_format_then_parse_is_stable() {
    let text = "\
add 192.0.2.1 192.0.2.2 esp 0x1000 -m transport -u 3 -E 3des-cbc \"0123456789abcdefghijklmn\" -A hmac-sha2-384 \
\"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKL\" ;
add 192.0.2.1[4500] 192.0.2.2[4500] esp-udp 0x1001 -E rfc4106-gcm-16 0x3ffe050148193ffe050148193ffe050148193ffe ;
spdadd 192.0.2.0/24[any] 198.51.100.0/24[any] any -P out ipsec esp/tunnel/192.0.2.1-192.0.2.2/default ;
spddelete 192.0.2.0/24 198.51.100.0/24 any -P out ipsec esp/tunnel/192.0.2.1-192.0.2.2 ;
";
    let first: Vec<Request> = parse(text).unwrap().into_iter().map(|l| l.item).collect();
    let printed: String = first.iter().map(|r| format_request(r) + "\n").collect();
    let second: Vec<Request> = parse(&printed).unwrap().into_iter().map(|l| l.item).collect();
    assert_eq!(first, second);
}

// ---------------------------------------------------------------------------------------
// Robustness: never a panic.

fn configs() -> Vec<String> {
    let mut v = vec![
        "\
# a gateway
flush ;
spdflush ;
add -4n 192.0.2.1[4500] 198.51.100.7[31000] esp-udp 0x1000 -m tunnel -r 4096 -u 5 -f esn -f seq-pad
    -lh 3600 -ls 3000 -bh 1000 -bs 900
    -E aes-cbc 0x000102030405060708090a0b0c0d0e0f -A hmac-sha2-256 \"0123456789abcdef0123456789abcdef\" ;
add 2001:db8::1 2001:db8::2 esp 4096 -E chacha20-poly1305 \"0123456789abcdef0123456789abcdef0123\" ;
add 10.0.0.1 10.0.0.2 ah 0x300 -A hmac-sha1 \"01234567890123456789\" ;
add 10.0.0.1 10.0.0.2 ipcomp 0x4000 -C deflate ;
spdadd 10.0.0.0/8[any] 10.1.0.0/16[443] tcp -P out ipsec esp/tunnel/192.0.2.1-198.51.100.7/unique:5 ;
spdadd 2001:db8::/32 ::/0 icmp6 -P fwd ipsec esp/transport//use ah/transport/ ;
spddelete 10.0.0.0/8 10.1.0.0/16 tcp -P out ;
get 10.0.0.1 10.0.0.2 esp 0x1000 ; delete 10.0.0.1 10.0.0.2 esp 4096 ;
deleteall 10.0.0.1 10.0.0.2 esp ; dump ; spddump ;
"
        .to_string(),
        "spdadd 10.0.11.41/32[21] 10.0.11.33/32[any] any\n\t-P out ipsec esp/tunnel/192.168.0.1-192.168.1.2/require ;\n"
            .to_string(),
    ];
    v.extend(requests().iter().map(format_request));
    v
}

#[test]
fn every_prefix_parses_without_panic() {
    for c in configs() {
        assert!(parse(&c).is_ok(), "{c}");
        for (i, _) in c.char_indices() {
            let _ = parse(&c[..i]);
        }
    }
}

#[test]
fn mutated_inputs_parse_without_panic() {
    // xorshift64: deterministic, no dependency.
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut rand = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    // Bytes that matter to the grammar are more likely than random ones.
    const INTERESTING: &[u8] = b";#\"[]/-:.0x9 \n\t-P-E-Aaf";
    let configs = configs();
    let mut parsed = 0;
    for round in 0..20_000 {
        let base = configs[round % configs.len()].as_bytes();
        let mut bytes = base.to_vec();
        for _ in 0..1 + rand() % 4 {
            if bytes.is_empty() {
                break;
            }
            let i = (rand() % bytes.len() as u64) as usize;
            let r = rand();
            match r % 4 {
                0 => bytes[i] = INTERESTING[(r >> 8) as usize % INTERESTING.len()],
                1 => bytes[i] = (r >> 8) as u8,
                2 => {
                    bytes.remove(i);
                }
                _ => bytes.insert(i, INTERESTING[(r >> 8) as usize % INTERESTING.len()]),
            }
        }
        let text = String::from_utf8_lossy(&bytes);
        if let Ok(v) = parse(&text) {
            parsed += 1;
            // Whatever parses prints and reads back the same.
            for l in v {
                let again = format_request(&l.item);
                let back = parse(&again).unwrap_or_else(|e| panic!("{e}: {again} (from {text})"));
                assert_eq!(back, vec![located(1, 1, l.item)], "{again}");
            }
        } else if let Err(e) = parse(&text) {
            assert!(e.line >= 1 && e.column >= 1, "{e}");
            assert!(e.line <= text.lines().count() + 1, "{e}");
        }
    }
    assert!(parsed > 100, "mutations should sometimes still parse ({parsed})");
}
