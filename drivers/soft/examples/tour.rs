//! A tour of ocf: every algorithm of the soft driver through the framework.
//!
//! For each algorithm it makes a session (the framework picks the driver), encrypts or
//! digests a known-answer input, checks the answer (from the public source named beside it),
//! decrypts or verifies it back, then times the same request reused for a short while and
//! prints throughput at 1 KiB. Then DEFLATE (raw, RFC 1951): a stream made by Python's zlib
//! decompressed, a round trip, compression throughput on 1 KiB of text, and random bytes
//! answered "not smaller". It ends with the framework's statistics, errors included.
//!
//! Run: `cargo run --release -p ocf-soft --example tour`.

use std::time::{Duration, Instant};

use ocf::{CipherAlg, CompAlg, DigestAlg, Framework, MacAlg, Op, Request, Session, SessionParams};

struct Case {
    name: &'static str,
    params: SessionParams,
    iv: Vec<u8>,
    aad: Vec<u8>,
    input: Vec<u8>,
    /// Expected payload result (empty for digests) and tag/digest (empty for ciphers).
    want_out: Vec<u8>,
    want_tag: Vec<u8>,
    source: &'static str,
}

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex")).collect()
}

fn to_hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn cases() -> Vec<Case> {
    let sha1 = MacAlg::Hmac(DigestAlg::Sha1);
    let sha256 = MacAlg::Hmac(DigestAlg::Sha256);
    let abc = b"abc".to_vec();
    let hi = b"Hi There".to_vec();
    let k0b20 = [0x0bu8; 20];
    // SP 800-38A F.2.1 / F.5.1 key and first plaintext block.
    let sp_key = hex("2b7e151628aed2a6abf7158809cf4f3c");
    let sp_pt = hex("6bc1bee22e409f96e93d7e117393172a");
    let rfc8439_key = hex("808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f");
    let rfc8439_pt = b"Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the future, sunscreen would be it.".to_vec();
    vec![
        Case {
            name: "aes-128-cbc",
            params: SessionParams::cipher(CipherAlg::AesCbc, &sp_key[..]),
            iv: hex("000102030405060708090a0b0c0d0e0f"),
            aad: vec![],
            input: sp_pt.clone(),
            want_out: hex("7649abac8119b246cee98e9b12e9197d"),
            want_tag: vec![],
            source: "NIST SP 800-38A F.2.1",
        },
        Case {
            name: "aes-128-ctr",
            params: SessionParams::cipher(CipherAlg::AesCtr, &sp_key[..]),
            iv: hex("f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff"),
            aad: vec![],
            input: sp_pt.clone(),
            want_out: hex("874d6191b620e3261bef6864990db6ce"),
            want_tag: vec![],
            source: "NIST SP 800-38A F.5.1",
        },
        Case {
            name: "aes-128-gcm",
            params: SessionParams::aead(CipherAlg::AesGcm, &[0u8; 16]),
            iv: vec![0u8; 12],
            aad: vec![],
            input: vec![0u8; 16],
            want_out: hex("0388dace60b6a392f328c2b971b2fe78"),
            want_tag: hex("ab6e47d42cec13bdf53a67b21257bddf"),
            source: "GCM spec (McGrew-Viega) test case 2",
        },
        Case {
            name: "chacha20-poly1305",
            params: SessionParams::aead(CipherAlg::ChaCha20Poly1305, &rfc8439_key[..]),
            iv: hex("070000004041424344454647"),
            aad: hex("50515253c0c1c2c3c4c5c6c7"),
            input: rfc8439_pt,
            want_out: hex(
                "d31a8d34648e60db7b86afbc53ef7ec2a4aded51296e08fea9e2b5a736ee62d63dbea45e8ca9671282fafb69da92728b
                 1a71de0a9e060b2905d6a5b67ecd3b3692ddbd7f2d778b8c9803aee328091b58fab324e4fad675945585808b4831d7bc
                 3ff4def08e4b7a9de576d26586cec64b6116",
            ),
            want_tag: hex("1ae10b594f09e26a7e902ecbd0600691"),
            source: "RFC 8439 2.8.2",
        },
        Case {
            name: "des-ede3-cbc",
            params: SessionParams::cipher(
                CipherAlg::TdesCbc,
                &hex("0123456789abcdef23456789abcdef01456789abcdef0123")[..],
            ),
            iv: hex("f69f2445df4f9b17"),
            aad: vec![],
            input: hex("6bc1bee22e409f96e93d7e117393172a"),
            want_out: hex("2079c3d53aa763e193b79e2569ab5262"),
            want_tag: vec![],
            source: "NIST CSRC modes examples, TDES-CBC",
        },
        Case {
            name: "null",
            params: SessionParams::cipher(CipherAlg::Null, ocf::Key::empty()),
            iv: vec![],
            aad: vec![],
            input: abc.clone(),
            want_out: abc.clone(),
            want_tag: vec![],
            source: "RFC 2410 (identity)",
        },
        Case {
            name: "md5",
            params: SessionParams::digest(DigestAlg::Md5),
            iv: vec![],
            aad: vec![],
            input: abc.clone(),
            want_out: vec![],
            want_tag: hex("900150983cd24fb0d6963f7d28e17f72"),
            source: "RFC 1321 A.5",
        },
        Case {
            name: "sha1",
            params: SessionParams::digest(DigestAlg::Sha1),
            iv: vec![],
            aad: vec![],
            input: abc.clone(),
            want_out: vec![],
            want_tag: hex("a9993e364706816aba3e25717850c26c9cd0d89d"),
            source: "FIPS 180 example",
        },
        Case {
            name: "sha256",
            params: SessionParams::digest(DigestAlg::Sha256),
            iv: vec![],
            aad: vec![],
            input: abc.clone(),
            want_out: vec![],
            want_tag: hex("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
            source: "FIPS 180 example",
        },
        Case {
            name: "sha384",
            params: SessionParams::digest(DigestAlg::Sha384),
            iv: vec![],
            aad: vec![],
            input: abc.clone(),
            want_out: vec![],
            want_tag: hex(
                "cb00753f45a35e8bb5a03d699ac65007272c32ab0eded1631a8b605a43ff5bed8086072ba1e7cc2358baeca134c825a7",
            ),
            source: "FIPS 180 example",
        },
        Case {
            name: "sha512",
            params: SessionParams::digest(DigestAlg::Sha512),
            iv: vec![],
            aad: vec![],
            input: abc,
            want_out: vec![],
            want_tag: hex(
                "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a2192992a274fc1a836ba3c23a3feebbd
                 454d4423643ce80e2a9ac94fa54ca49f",
            ),
            source: "FIPS 180 example",
        },
        Case {
            name: "hmac-md5",
            params: SessionParams::hmac(DigestAlg::Md5, &[0x0bu8; 16]),
            iv: vec![],
            aad: vec![],
            input: hi.clone(),
            want_out: vec![],
            want_tag: hex("9294727a3638bb1c13f48ef8158bfc9d"),
            source: "RFC 2202 test case 1",
        },
        Case {
            name: "hmac-sha1",
            params: SessionParams::hmac(DigestAlg::Sha1, &k0b20),
            iv: vec![],
            aad: vec![],
            input: hi.clone(),
            want_out: vec![],
            want_tag: hex("b617318655057264e28bc0b6fb378c8ef146be00"),
            source: "RFC 2202 test case 1",
        },
        Case {
            name: "hmac-sha256",
            params: SessionParams::hmac(DigestAlg::Sha256, &k0b20),
            iv: vec![],
            aad: vec![],
            input: hi.clone(),
            want_out: vec![],
            want_tag: hex("b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"),
            source: "RFC 4231 test case 1",
        },
        Case {
            name: "hmac-sha384",
            params: SessionParams::hmac(DigestAlg::Sha384, &k0b20),
            iv: vec![],
            aad: vec![],
            input: hi.clone(),
            want_out: vec![],
            want_tag: hex(
                "afd03944d84895626b0825f4ab46907f15f9dadbe4101ec682aa034c7cebc59cfaea9ea9076ede7f4af152e8b2fa9cb6",
            ),
            source: "RFC 4231 test case 1",
        },
        Case {
            name: "hmac-sha512",
            params: SessionParams::hmac(DigestAlg::Sha512, &k0b20),
            iv: vec![],
            aad: vec![],
            input: hi,
            want_out: vec![],
            want_tag: hex(
                "87aa7cdea5ef619d4ff0b4241a1d6cb02379f4e2ce4ec2787ad0b30545e17cdedaa833b7d6b8a702038b274eaea3f4e4
                 be9d914eeb61f1702e696c203a126854",
            ),
            source: "RFC 4231 test case 1",
        },
        // The combined modes have no single published vector; their halves are the known
        // answers above (the KAT suite checks the composition against the openssl CLI).
        Case {
            name: "aes-128-cbc-hmac-sha1",
            params: SessionParams::cipher_then_mac(CipherAlg::AesCbc, &sp_key[..], sha1, &k0b20).with_tag_len(12),
            iv: hex("000102030405060708090a0b0c0d0e0f"),
            aad: vec![],
            input: sp_pt.clone(),
            want_out: hex("7649abac8119b246cee98e9b12e9197d"),
            want_tag: vec![],
            source: "SP 800-38A F.2.1 ciphertext; tag checked by decrypt",
        },
        Case {
            name: "aes-128-cbc-hmac-sha256",
            params: SessionParams::cipher_then_mac(CipherAlg::AesCbc, &sp_key[..], sha256, &[0x0bu8; 32])
                .with_tag_len(16),
            iv: hex("000102030405060708090a0b0c0d0e0f"),
            aad: vec![],
            input: sp_pt,
            want_out: hex("7649abac8119b246cee98e9b12e9197d"),
            want_tag: vec![],
            source: "SP 800-38A F.2.1 ciphertext; tag checked by decrypt",
        },
        Case {
            name: "des-ede3-cbc-hmac-sha1",
            params: SessionParams::cipher_then_mac(
                CipherAlg::TdesCbc,
                &hex("0123456789abcdef23456789abcdef01456789abcdef0123")[..],
                sha1,
                &k0b20,
            )
            .with_tag_len(12),
            iv: hex("f69f2445df4f9b17"),
            aad: vec![],
            input: hex("6bc1bee22e409f96e93d7e117393172a"),
            want_out: hex("2079c3d53aa763e193b79e2569ab5262"),
            want_tag: vec![],
            source: "NIST TDES-CBC example ciphertext; tag checked by decrypt",
        },
    ]
}

/// Checks the known answer and the round trip; returns what to print.
fn check(s: &Session, c: &Case) -> Result<&'static str, String> {
    let digest = c.params.cipher_alg().is_none();
    let op = if digest { Op::ComputeDigest } else { Op::Encrypt };
    let mut req = Request::new(op, c.input.clone()).with_iv(&c.iv);
    if !c.aad.is_empty() {
        req = req.with_aad(&c.aad);
    }
    let done = s.run(req).map_err(|f| f.to_string())?;
    let (out, tag) = (done.buf.to_vec(), done.tag().to_vec());
    if !digest && out != c.want_out {
        return Err(format!("output {} != expected {}", to_hex(&out), to_hex(&c.want_out)));
    }
    if !c.want_tag.is_empty() && tag != c.want_tag {
        return Err(format!("tag {} != expected {}", to_hex(&tag), to_hex(&c.want_tag)));
    }
    // And back: decrypt, or verify the digest/MAC.
    let back_op = if digest { Op::VerifyDigest } else { Op::Decrypt };
    let back_input = if digest { c.input.clone() } else { out };
    let mut back = Request::new(back_op, back_input).with_iv(&c.iv).with_tag(&tag);
    if !c.aad.is_empty() {
        back = back.with_aad(&c.aad);
    }
    let back = s.run(back).map_err(|f| format!("round trip: {f}"))?;
    if !digest && back.buf.to_vec() != c.input {
        return Err("decryption did not give the plaintext back".into());
    }
    Ok(if digest { "verified" } else { "decrypted" })
}

/// Throughput of the same request, reused, for about `time` (MB/s, 10^6 bytes).
fn speed(s: &Session, c: &Case, size: usize, time: Duration) -> f64 {
    let digest = c.params.cipher_alg().is_none();
    let op = if digest { Op::ComputeDigest } else { Op::Encrypt };
    let mut slot = Some(Request::new(op, vec![0x5a; size]).with_iv(&c.iv));
    let start = Instant::now();
    let mut ops = 0u64;
    while start.elapsed() < time {
        for _ in 0..64 {
            let r = slot.take().expect("request");
            slot = Some(s.run(r).expect("benchmark request"));
        }
        ops += 64;
    }
    (ops as f64 * size as f64) / start.elapsed().as_secs_f64() / 1e6
}

/// DEFLATE: a known answer, a round trip, MB/s compressing 1 KiB of text.
fn deflate(fw: &Framework) -> Result<String, String> {
    let s = fw.new_session(&SessionParams::compress(CompAlg::Deflate)).map_err(|e| e.to_string())?;
    let run = |op, input: Vec<u8>, room| {
        s.run(Request::new(op, input).with_output(vec![0u8; room])).map(|r| r.result_payload())
    };
    // python3 -c "import zlib; c = zlib.compressobj(9, zlib.DEFLATED, -15);
    //             print((c.compress(b'ocf ' * 64) + c.flush()).hex())"
    let known = run(Op::Decompress, hex("cb4f4e53c81fc11800"), 1024).map_err(|f| f.to_string())?;
    if known != b"ocf ".repeat(64) {
        return Err(format!("known answer gave {}", to_hex(&known)));
    }
    let text: Vec<u8> =
        b"the packet of the session and the driver compress ".iter().copied().cycle().take(1024).collect();
    let packed = run(Op::Compress, text.clone(), 1024).map_err(|f| f.to_string())?;
    if run(Op::Decompress, packed.clone(), 1024).map_err(|f| f.to_string())? != text {
        return Err("round trip did not give the text back".into());
    }
    let mut x = 0x9E37_79B9u32;
    let random: Vec<u8> = (0..1024)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect();
    let refused = run(Op::Compress, random, 1024).expect_err("random bytes do not shrink");
    let mut slot = Some(Request::new(Op::Compress, text).with_output(vec![0u8; 1024]));
    let (start, mut ops) = (Instant::now(), 0u64);
    while start.elapsed() < Duration::from_millis(150) {
        let r = slot.take().expect("request");
        slot = Some(s.run(r).expect("benchmark request"));
        ops += 1;
    }
    let mbs = ops as f64 * 1024.0 / start.elapsed().as_secs_f64() / 1e6;
    Ok(format!(
        "{:<24} {:<6} {:<11} {:>10.0}  Python zlib (wbits=-15) stream; 1 KiB text -> {} B; random: {}",
        "deflate",
        s.driver_name(),
        "ok, inflated",
        mbs,
        packed.len(),
        refused.error()
    ))
}

fn main() {
    let fw = Framework::new();
    ocf_soft::register(&fw).expect("register the soft driver");
    println!(
        "ocf tour: every algorithm through the framework (drivers: {:?})\n",
        fw.drivers().iter().map(|d| d.name.clone()).collect::<Vec<_>>()
    );
    println!("{:<24} {:<6} {:<11} {:>10}  known answer from", "algorithm", "driver", "check", "MB/s@1KiB");
    let mut failures = 0;
    for c in cases() {
        let s = match fw.new_session(&c.params) {
            Ok(s) => s,
            Err(e) => {
                println!("{:<24} session failed: {e}", c.name);
                failures += 1;
                continue;
            }
        };
        match check(&s, &c) {
            Ok(what) => {
                let mbs = speed(&s, &c, 1024, Duration::from_millis(150));
                println!(
                    "{:<24} {:<6} {:<11} {:>10.0}  {}",
                    c.name,
                    s.driver_name(),
                    format!("ok, {what}"),
                    mbs,
                    c.source
                );
            }
            Err(e) => {
                failures += 1;
                println!("{:<24} {:<6} FAILED: {e}", c.name, s.driver_name());
            }
        }
    }
    match deflate(&fw) {
        Ok(line) => println!("{line}"),
        Err(e) => {
            failures += 1;
            println!("{:<24} FAILED: {e}", "deflate");
        }
    }
    // One deliberate bad input, to show that errors are named and counted.
    let s = fw.new_session(&SessionParams::aead(CipherAlg::AesGcm, &[0u8; 16])).expect("session");
    let bad = Request::new(Op::Decrypt, vec![0u8; 32]).with_iv(&[0u8; 12]).with_tag(&[0u8; 16]);
    let f = s.run(bad).expect_err("a forged tag must fail");
    println!("\na forged AES-GCM tag is refused: {f}");
    let stats = fw.stats();
    for d in &stats.drivers {
        let errors: Vec<String> = d.errors.nonzero().map(|(k, n)| format!("{}={n}", k.name())).collect();
        println!(
            "driver {}: {} sessions created, {} ops, {} bytes, errors: {}",
            d.name,
            d.sessions_created,
            d.ops,
            d.bytes,
            if errors.is_empty() { "none".into() } else { errors.join(" ") }
        );
    }
    if failures > 0 {
        eprintln!("{failures} algorithm(s) failed");
        std::process::exit(1);
    }
}
