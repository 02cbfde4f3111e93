//! No expanded key survives a session's drop. Sessions of the mb driver (AES-CBC and
//! 3DES-CBC, whose runs go to the 16-lane engines where the CPU has them, and whose other
//! requests go to IPsec-MB's jobs and the soft driver) are made, used and dropped with
//! known keys; then every writable mapping of the process (`/proc/self/maps`: heaps,
//! thread stacks, thread-locals, the libraries' data), read through `/proc/self/mem`, is
//! searched for those keys' round keys:
//!
//! ```text
//!  1. framework + mb ─ sessions made (FIPS-197 A.1's AES key, a 3DES key whose K1 is the
//!     textbook one) ─ dropped ─ scan: none found (what set-up left: a library's moves)
//!  2. framework + mb ─ sessions made and used: runs on the engines, held and lone
//!     requests, both directions
//!       └ scan: every round key found (the control: scan and patterns work)
//!     dropped ─ scan: none found anywhere (freed heap, dead stack frames, live memory)
//! ```
//!
//! Two rounds because the engines' own wiping after a call would also wipe what set-up
//! left in the stack below.
//!
//! The expected round keys are public: FIPS-197 appendix A.1 (AES-128 key expansion of
//! 2b7e1516 28aed2a6 abf71588 09cf4f3c, `w[4..44]`) and the 16 subkeys of DES key
//! 133457799bbcdff1 in "The DES Algorithm Illustrated" (J. Orlin Grabbe), laid out as
//! `des16` stores them. The test never holds them as they are (a copy of its own would be
//! found): they are inverted at compile time and compared inverted.
//!
//! One test in this file, so that no other test of the process uses these keys meanwhile.
#![cfg(ocf_mb)]

use ocf::{CipherAlg, Framework, Op, Request, Session, SessionParams};
use ocf_memscan::{lines, scan};

/// A hex digit's value, at compile time.
const fn nibble(c: u8) -> u8 {
    match c {
        b'0'..=b'9' => c - b'0',
        b'a'..=b'f' => c - b'a' + 10,
        _ => panic!("not a hex digit"),
    }
}

/// The bitwise inverse of the bytes `hex` spells, at compile time.
const fn inverted_hex(hex: &str) -> [u8; 16] {
    let h = hex.as_bytes();
    assert!(h.len() == 32);
    let mut out = [0u8; 16];
    let mut i = 0;
    while i < 16 {
        out[i] = !(nibble(h[2 * i]) << 4 | nibble(h[2 * i + 1]));
        i += 1;
    }
    out
}

/// A DES round subkey given as the textbook writes it (48 bits, in eight groups of six,
/// S-box 1's first), as `des16` keeps it in memory (`fips::subkeys`: the words
/// `k0 = g7 | g5 << 8 | g3 << 16 | g1 << 24` and `k1 = g6 | g4 << 8 | g2 << 16 | g0 << 24`,
/// little-endian), inverted, at compile time.
const fn inverted_subkey(bits: &str) -> [u8; 8] {
    let b = bits.as_bytes();
    let mut g = [0u8; 8];
    let (mut i, mut n) = (0, 0);
    while i < b.len() {
        if b[i] != b' ' {
            assert!(b[i] == b'0' || b[i] == b'1');
            g[n / 6] = g[n / 6] << 1 | (b[i] - b'0');
            n += 1;
        }
        i += 1;
    }
    assert!(n == 48);
    let order = [7, 5, 3, 1, 6, 4, 2, 0];
    let mut out = [0u8; 8];
    let mut j = 0;
    while j < 8 {
        out[j] = !g[order[j]];
        j += 1;
    }
    out
}

/// FIPS-197 A.1: the key, and its round keys 1 to 10 (inverted).
const AES_KEY: &str = "2b7e151628aed2a6abf7158809cf4f3c";
const AES_ROUND_KEYS: [[u8; 16]; 10] = [
    inverted_hex("a0fafe1788542cb123a339392a6c7605"),
    inverted_hex("f2c295f27a96b9435935807a7359f67f"),
    inverted_hex("3d80477d4716fe3e1e237e446d7a883b"),
    inverted_hex("ef44a541a8525b7fb671253bdb0bad00"),
    inverted_hex("d4d1c6f87c839d87caf2b8bc11f915bc"),
    inverted_hex("6d88a37a110b3efddbf98641ca0093fd"),
    inverted_hex("4e54f70e5f5fc9f384a64fb24ea6dc4f"),
    inverted_hex("ead27321b58dbad2312bf5607f8d292f"),
    inverted_hex("ac7766f319fadc2128d12941575c006e"),
    inverted_hex("d014f9a8c9ee2589e13f0cc8b6630ca6"),
];

/// "The DES Algorithm Illustrated": K1's 16 subkeys (inverted). K2 and K3 are SP 800-67's
/// example's second and third keys.
const DES3_KEY: &str = "133457799bbcdff123456789abcdef01456789abcdef0123";
const DES_SUBKEYS: [[u8; 8]; 16] = [
    inverted_subkey("000110 110000 001011 101111 111111 000111 000001 110010"),
    inverted_subkey("011110 011010 111011 011001 110110 111100 100111 100101"),
    inverted_subkey("010101 011111 110010 001010 010000 101100 111110 011001"),
    inverted_subkey("011100 101010 110111 010110 110110 110011 010100 011101"),
    inverted_subkey("011111 001110 110000 000111 111010 110101 001110 101000"),
    inverted_subkey("011000 111010 010100 111110 010100 000111 101100 101111"),
    inverted_subkey("111011 001000 010010 110111 111101 100001 100010 111100"),
    inverted_subkey("111101 111000 101000 111010 110000 010011 101111 111011"),
    inverted_subkey("111000 001101 101111 101011 111011 011110 011110 000001"),
    inverted_subkey("101100 011111 001101 000111 101110 100100 011001 001111"),
    inverted_subkey("001000 010101 111111 010011 110111 101101 001110 000110"),
    inverted_subkey("011101 010111 000111 110101 100101 000110 011111 101001"),
    inverted_subkey("100101 111100 010111 010001 111110 101011 101001 000001"),
    inverted_subkey("010111 110100 001110 110111 111100 101110 011100 111010"),
    inverted_subkey("101111 111001 000110 001101 001111 010011 111100 001010"),
    inverted_subkey("110010 110011 110110 001011 000011 100001 011111 110101"),
];

fn bytes(hex: &str) -> Vec<u8> {
    hex.as_bytes().chunks_exact(2).map(|p| nibble(p[0]) << 4 | nibble(p[1])).collect()
}

fn has(feature: &[&str]) -> bool {
    feature.iter().all(|f| match *f {
        "avx512f" => std::arch::is_x86_feature_detected!("avx512f"),
        "avx512bw" => std::arch::is_x86_feature_detected!("avx512bw"),
        "avx512vbmi" => std::arch::is_x86_feature_detected!("avx512vbmi"),
        "vaes" => std::arch::is_x86_feature_detected!("vaes"),
        "aes" => std::arch::is_x86_feature_detected!("aes"),
        _ => false,
    })
}

/// A session of the mb driver, used every way the driver takes requests: runs of 16
/// encryptions and of 16 decryptions (engine or jobs), a lone request (soft's session), and
/// a batch submitted with the hint (held jobs).
fn exercised(fw: &Framework, alg: CipherAlg, key: &[u8], iv_len: usize) -> Session {
    let s = fw.new_session_on(ocf_mb::NAME, &SessionParams::cipher(alg, key)).unwrap();
    for op in [Op::Encrypt, Op::Decrypt] {
        let mut run: Vec<Request> =
            (0..16).map(|i| Request::new(op, vec![i as u8; 1024]).with_iv(&vec![7; iv_len])).collect();
        let mut out = Vec::new();
        s.run_batch(&mut run, &mut out);
        assert_eq!(out.len(), 16);
        assert!(out.iter().all(|o| o.is_ok()), "{alg:?} {op:?}");
        let lone = s.run(Request::new(op, vec![3; 64]).with_iv(&vec![9; iv_len]));
        assert!(lone.is_ok(), "{alg:?} {op:?}");
    }
    let (tx, rx) = std::sync::mpsc::channel();
    let tx = std::sync::Mutex::new(tx);
    let cb: ocf::Callback =
        std::sync::Arc::new(move |o: ocf::Outcome| tx.lock().unwrap().send(o.is_ok()).unwrap());
    s.submit_batch((0..8).map(|i| Request::new(Op::Encrypt, vec![i; 256]).with_iv(&vec![5; iv_len])), &cb);
    for _ in 0..8 {
        assert!(rx.recv_timeout(std::time::Duration::from_secs(60)).expect("a held request came back"));
    }
    s
}

/// After every session and the framework are dropped, none of the known keys' round keys
/// is anywhere in the process's writable memory; while they live, every one is found.
/// First sessions only made (what their set-up left: a library's key moves), then sessions
/// used every way (what the engines and jobs left; their own wiping would hide what set-up
/// left, hence two rounds).
#[test]
fn no_expanded_key_survives_a_session_drop() {
    let engines = has(&["avx512f", "vaes", "aes"]) && has(&["avx512f", "avx512bw", "avx512vbmi"]);
    let mut patterns: Vec<(String, &[u8])> = AES_ROUND_KEYS
        .iter()
        .enumerate()
        .map(|(i, k)| (format!("AES round key {}", i + 1), &k[..]))
        .collect();
    patterns
        .extend(DES_SUBKEYS.iter().enumerate().map(|(i, k)| (format!("DES K1 subkey {}", i + 1), &k[..])));
    let patterns: Vec<(&str, &[u8])> = patterns.iter().map(|(name, p)| (name.as_str(), *p)).collect();
    let framework = || {
        let fw = Framework::new();
        ocf_soft::register(&fw).unwrap();
        ocf_mb::register(&fw).expect("built with IPsec-MB, which must run here");
        fw
    };

    // Made and dropped.
    let fw = framework();
    let made = [(CipherAlg::AesCbc, AES_KEY), (CipherAlg::TdesCbc, DES3_KEY)].map(|(alg, key)| {
        fw.new_session_on(ocf_mb::NAME, &SessionParams::cipher(alg, bytes(key).as_slice())).unwrap()
    });
    drop(made);
    drop(fw);
    let left = scan(&patterns);
    assert!(left.is_empty(), "round keys left after sessions were made and dropped:\n{}", lines(&left));

    // Used and dropped.
    let fw = framework();
    let aes = exercised(&fw, CipherAlg::AesCbc, &bytes(AES_KEY), 16);
    let des = exercised(&fw, CipherAlg::TdesCbc, &bytes(DES3_KEY), 8);
    // The control, with both sessions alive: every pattern is found (the round keys are
    // right, and the scan sees the heap). The 3DES subkeys in this layout are the 3DES
    // engine's, there only where the CPU has it.
    let alive = scan(&patterns);
    for (name, _) in &patterns {
        if engines || name.starts_with("AES") {
            assert!(alive.iter().any(|h| h.pattern == *name), "{name} not found while its session lives");
        }
    }
    drop((aes, des));
    drop(fw);
    let left = scan(&patterns);
    assert!(left.is_empty(), "round keys left after sessions were used and dropped:\n{}", lines(&left));
}
