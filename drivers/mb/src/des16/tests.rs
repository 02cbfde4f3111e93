//! Known answers (NIST CAVP TDES CBC: TCBCMMT1–3 and the DES known-answer sets
//! TCBCvarkey, TCBCvartext, TCBCinvperm, TCBCpermop, TCBCsubtab; the FIPS 46-3 / SP 800-67
//! examples) and equality with aws-lc (the soft driver's 3DES-CBC, an independent
//! implementation) over random mixes of lane counts, lengths and keys.
//!
//! Under AddressSanitizer (the kernel's loads and stores are checked; a read of one byte
//! past each lane, put in on purpose, was caught): `ASAN_OPTIONS=detect_odr_violation=0
//! RUSTFLAGS=-Zsanitizer=address cargo +nightly test -p ocf-mb --lib --target
//! x86_64-unknown-linux-gnu des16` (why the ODR option: cbc16's tests).

use std::mem::ManuallyDrop;

#[allow(deprecated)]
use aws_lc_rs::cipher::DES_EDE3_FOR_LEGACY_USE_ONLY;
use aws_lc_rs::cipher::{EncryptingKey, EncryptionContext, UnboundCipherKey};
use aws_lc_rs::iv::FixedLength;

use super::*;
use crate::testkit::{
    self, cavp_blocks, cavp_field, cpu_has, expected, guarded, guarded_lanes, hex, hex_of, random_lens,
    LaneEngine, Rng,
};

/// The engine, or `None` (and a note) on a CPU without VBMI: every test then checks only
/// that `new` agrees with the CPU's flags (`available_where_the_cpu_has_vbmi`). With
/// `OCF_REQUIRE_AVX512=1` a missing engine fails instead.
fn engine() -> Option<Des16> {
    testkit::engine_or_skip(Des16::new(), "des16: this CPU lacks AVX-512 VBMI")
}

/// aws-lc's 3DES-CBC encryption of `data` (no padding): the independent answer.
fn aws_lc_cbc(key: &[u8], iv: [u8; 8], data: &[u8]) -> Vec<u8> {
    #[allow(deprecated)]
    let k = EncryptingKey::cbc(UnboundCipherKey::new(&DES_EDE3_FOR_LEGACY_USE_ONLY, key).unwrap()).unwrap();
    let mut out = data.to_vec();
    k.less_safe_encrypt(&mut out, EncryptionContext::Iv64(FixedLength::from(iv))).unwrap();
    out
}

#[test]
fn available_where_the_cpu_has_vbmi() {
    let (has, flags) = cpu_has(&["avx512f", "avx512bw", "avx512vbmi"]);
    assert_eq!(Des16::new().is_some(), has, "flags: {flags:?}");
    assert!(
        has || !testkit::avx512_required(),
        "OCF_REQUIRE_AVX512=1, but the CPU's flags lack it: {flags:?}"
    );
}

/// Each row of each S-box is a permutation of 0..16 (FIPS 46-3's tables, as typed here).
#[test]
fn every_s_box_row_is_a_permutation() {
    for (j, s) in fips::S.iter().enumerate() {
        for row in s.chunks_exact(16) {
            let mut seen = [false; 16];
            row.iter().for_each(|&v| seen[usize::from(v)] = true);
            assert!(seen.iter().all(|&b| b), "S{}", j + 1);
        }
    }
}

/// One case of a CAVP TDES file: key (24 bytes), IV, input, expected output.
struct Case {
    key: Vec<u8>,
    iv: [u8; 8],
    input: Vec<u8>,
    want: Vec<u8>,
}

/// The cases of `file`'s `[ENCRYPT]` section, or with `decrypt` its `[DECRYPT]` one
/// (`KEY1..3 =`, or one `KEYs =` for all three).
fn cavp(file: &str, decrypt: bool) -> Vec<Case> {
    cavp_blocks(file, decrypt)
        .map(|block| {
            let f = |n| cavp_field(block, n).unwrap();
            let key = match cavp_field(block, "KEYs") {
                Some(k) => k.repeat(3),
                None => [f("KEY1"), f("KEY2"), f("KEY3")].concat(),
            };
            let (plain, cipher) = (f("PLAINTEXT"), f("CIPHERTEXT"));
            let (input, want) = if decrypt { (cipher, plain) } else { (plain, cipher) };
            Case { key, iv: f("IV").try_into().unwrap(), input, want }
        })
        .collect()
}

const CAVP: [(&str, &str, usize); 8] = [
    ("TCBCMMT1", include_str!("../../../../conformance/vectors/nist/tdes-cbc/TCBCMMT1.rsp"), 10),
    ("TCBCMMT2", include_str!("../../../../conformance/vectors/nist/tdes-cbc/TCBCMMT2.rsp"), 10),
    ("TCBCMMT3", include_str!("../../../../conformance/vectors/nist/tdes-cbc/TCBCMMT3.rsp"), 10),
    ("TCBCvarkey", include_str!("../../../../conformance/vectors/nist/tdes-cbc/TCBCvarkey.rsp"), 56),
    ("TCBCvartext", include_str!("../../../../conformance/vectors/nist/tdes-cbc/TCBCvartext.rsp"), 64),
    ("TCBCinvperm", include_str!("../../../../conformance/vectors/nist/tdes-cbc/TCBCinvperm.rsp"), 64),
    ("TCBCpermop", include_str!("../../../../conformance/vectors/nist/tdes-cbc/TCBCpermop.rsp"), 32),
    ("TCBCsubtab", include_str!("../../../../conformance/vectors/nist/tdes-cbc/TCBCsubtab.rsp"), 19),
];

/// Every case of the eight CAVP TDES CBC files, both directions, each file and direction
/// in one call (10 to 64 lanes of different keys, and for MMT of 1 to 10 blocks: more
/// than the 16 slots).
#[test]
fn cavp_tdes_cbc_each_file_in_one_call() {
    let Some(e) = engine() else { return };
    for (name, file, count) in CAVP {
        for decrypt in [false, true] {
            let cases = cavp(file, decrypt);
            assert_eq!(cases.len(), count, "{name}");
            let keys: Vec<Box<Des3Keys>> = cases.iter().map(|c| e.expand(&c.key).unwrap()).collect();
            let mut bufs: Vec<Vec<u8>> = cases.iter().map(|c| c.input.clone()).collect();
            let mut lanes: Vec<Lane<'_>> = bufs
                .iter_mut()
                .zip(&keys)
                .zip(&cases)
                .map(|((data, keys), c)| Lane { keys, iv: c.iv, data })
                .collect();
            let mut ws = e.workspace();
            if decrypt { ws.decrypt(&mut lanes) } else { ws.encrypt(&mut lanes) }.unwrap();
            for (i, (buf, c)) in bufs.iter().zip(&cases).enumerate() {
                assert_eq!(hex_of(buf), hex_of(&c.want), "{name} case {i}, decrypt {decrypt}");
            }
        }
    }
}

/// TCBCMMT3 (three independent keys) case by case, each in each of the 16 slot positions
/// beside 15 lanes of other keys, and with 15 lanes of its own key (the shared-key kernel).
#[test]
fn tcbcmmt3_in_every_lane_position() {
    let Some(e) = engine() else { return };
    let mut rng = Rng(46);
    let other = e.expand(&rng.bytes(24)).unwrap();
    for c in cavp(CAVP[2].1, false) {
        let keys = e.expand(&c.key).unwrap();
        for pos in 0..SLOTS {
            for o in [&other, &keys] {
                let mut bufs: Vec<Vec<u8>> = (0..SLOTS).map(|_| rng.bytes(c.input.len())).collect();
                bufs[pos] = c.input.clone();
                let mut lanes: Vec<Lane<'_>> = bufs
                    .iter_mut()
                    .enumerate()
                    .map(|(i, data)| Lane { keys: if i == pos { &keys } else { o }, iv: c.iv, data })
                    .collect();
                e.workspace().encrypt(&mut lanes).unwrap();
                assert_eq!(bufs[pos], c.want, "slot {pos}");
            }
        }
    }
}

/// FIPS 46-3's worked example as reprinted in SP 800-67 and the classic DES test
/// (key 133457799BBCDFF1, plaintext 0123456789ABCDEF -> 85E813540F0AB405), as one-key
/// 3DES (K1 = K2 = K3), one block with a zero IV; and SP 800-67 Rev. 1 appendix B's
/// three-key TDEA example (ECB: each block with a zero IV in its own lane).
#[test]
fn fips_46_3_and_sp_800_67_examples() {
    let Some(e) = engine() else { return };
    let keys = e.expand(&hex("133457799bbcdff1").repeat(3)).unwrap();
    let mut block = hex("0123456789abcdef");
    e.workspace().encrypt(&mut [Lane { keys: &keys, iv: [0; 8], data: &mut block }]).unwrap();
    assert_eq!(hex_of(&block), "85e813540f0ab405");

    let keys = e.expand(&hex("0123456789abcdef23456789abcdef01456789abcdef0123")).unwrap();
    let plain = ["5468652071756663", "6b2062726f776e20", "666f78206a756d70"];
    let want = ["a826fd8ce53b855f", "cce21c8112256fe6", "68d5c05dd9b6b900"];
    let mut bufs: Vec<Vec<u8>> = plain.iter().map(|p| hex(p)).collect();
    let mut lanes: Vec<Lane<'_>> =
        bufs.iter_mut().map(|data| Lane { keys: &keys, iv: [0; 8], data }).collect();
    e.workspace().encrypt(&mut lanes).unwrap();
    assert_eq!(bufs.iter().map(|b| hex_of(b)).collect::<Vec<_>>(), want);
}

/// The key schedule of key 133457799BBCDFF1 gives the 16 subkeys "The DES Algorithm
/// Illustrated" (J. Orlin Grabbe) lists, in the `[k0, k1]` layout, in order or reversed
/// (K2's); `tests/key_wipe.rs` looks for the same subkeys in memory.
#[test]
fn the_key_schedule_gives_the_textbook_subkeys() {
    let textbook = [
        "000110 110000 001011 101111 111111 000111 000001 110010",
        "011110 011010 111011 011001 110110 111100 100111 100101",
        "010101 011111 110010 001010 010000 101100 111110 011001",
        "011100 101010 110111 010110 110110 110011 010100 011101",
        "011111 001110 110000 000111 111010 110101 001110 101000",
        "011000 111010 010100 111110 010100 000111 101100 101111",
        "111011 001000 010010 110111 111101 100001 100010 111100",
        "111101 111000 101000 111010 110000 010011 101111 111011",
        "111000 001101 101111 101011 111011 011110 011110 000001",
        "101100 011111 001101 000111 101110 100100 011001 001111",
        "001000 010101 111111 010011 110111 101101 001110 000110",
        "011101 010111 000111 110101 100101 000110 011111 101001",
        "100101 111100 010111 010001 111110 101011 101001 000001",
        "010111 110100 001110 110111 111100 101110 011100 111010",
        "101111 111001 000110 001101 001111 010011 111100 001010",
        "110010 110011 110110 001011 000011 100001 011111 110101",
    ];
    let want: Vec<[u32; 2]> = textbook
        .iter()
        .map(|k| {
            let g: Vec<u32> = k.split(' ').map(|b| u32::from_str_radix(b, 2).unwrap()).collect();
            [g[7] | g[5] << 8 | g[3] << 16 | g[1] << 24, g[6] | g[4] << 8 | g[2] << 16 | g[0] << 24]
        })
        .collect();
    let key: [u8; 8] = hex("133457799bbcdff1").try_into().unwrap();
    for reversed in [false, true] {
        let mut out = [0u32; 32];
        fips::subkeys(&key, &mut out, reversed);
        let mut got: Vec<[u32; 2]> = out.chunks_exact(2).map(|w| [w[0], w[1]]).collect();
        if reversed {
            got.reverse();
        }
        assert_eq!(got, want, "reversed: {reversed}");
    }
}

#[test]
fn a_key_of_another_length_is_refused_by_name() {
    let Some(e) = engine() else { return };
    for len in [0, 8, 16, 23, 25, 32] {
        assert_eq!(
            e.expand(&vec![1; len]).err(),
            Some(Error::BadKeyLength { what: "mb: 3DES key", got: len, allowed: &[24] })
        );
    }
}

/// Random calls against aws-lc: 1..=40 lanes, 0..=4096 bytes each in 8-byte steps, one
/// shared key or a key per lane; distinct IVs; each lane's data between guard bytes,
/// which must stay as they were (and so must a lane of length 0). Then decrypted in one
/// call (the lanes in another order): the plaintext again.
#[test]
fn random_lanes_equal_aws_lc() {
    let Some(e) = engine() else { return };
    let mut rng = Rng(0xde5);
    for case in 0..200 {
        let n = 1 + case % 40;
        let one_key = case % 2 == 0;
        let raw: Vec<Vec<u8>> = (0..n).map(|_| rng.bytes(24)).collect();
        let raw: Vec<&[u8]> = raw.iter().map(|k| if one_key { &raw[0][..] } else { &k[..] }).collect();
        let expanded: Vec<Box<Des3Keys>> = raw.iter().map(|k| e.expand(k).unwrap()).collect();
        let lens = random_lens(&mut rng, n, 8, 512);
        let ivs: Vec<[u8; 8]> =
            (0..n).map(|i| std::array::from_fn(|j| (i * 8 + j) as u8 ^ case as u8)).collect();
        let plain = guarded(&mut rng, &lens);
        let want = expected(&plain, |i, body| aws_lc_cbc(raw[i], ivs[i], body));
        let mut bufs = plain.clone();
        let keys = |i: usize| if one_key { &expanded[0] } else { &expanded[i] };
        let mut lanes = guarded_lanes(&mut bufs, false, |i, data| Lane { keys: keys(i), iv: ivs[i], data });
        e.workspace().encrypt(&mut lanes).unwrap();
        for i in 0..n {
            assert!(bufs[i] == want[i], "case {case}: lane {i} of {n}, {} bytes, one key {one_key}", lens[i]);
        }
        let mut lanes = guarded_lanes(&mut bufs, true, |i, data| Lane { keys: keys(i), iv: ivs[i], data });
        e.workspace().decrypt(&mut lanes).unwrap();
        for i in 0..n {
            assert!(bufs[i] == plain[i], "case {case}: decrypting lane {i} of {n}, {} bytes", lens[i]);
        }
    }
}

// The tests both engines share (`testkit`), on this one with aws-lc as the reference.
testkit::lane_engine_tests!(Des16, Des3Keys, key: 24, block: 8, reference: aws_lc_cbc);

/// Subkeys are zero once dropped; a workspace is after each call and once dropped.
#[test]
fn key_material_is_wiped_on_drop() {
    let Some(e) = engine() else { return };
    let mut keys = ManuallyDrop::new(e.expand(&[0xa5; 24]).unwrap());
    assert!(keys.ks.iter().any(|&w| w != 0));
    // SAFETY: the keys are dropped once, in their box, and only their plain array is read
    // afterwards (no destructor-owned resource is touched).
    unsafe { std::ptr::drop_in_place::<Des3Keys>(&mut **keys) };
    assert!(keys.ks.iter().all(|&w| w == 0));
    // SAFETY: the box came from `Box::new`; freed as uninitialised memory, it is not
    // dropped twice.
    drop(unsafe {
        Box::from_raw(Box::into_raw(ManuallyDrop::into_inner(keys)).cast::<std::mem::MaybeUninit<Des3Keys>>())
    });

    let zero = |ws: &Workspace| {
        ws.chain.l.0.iter().chain(&ws.chain.r.0).all(|&w| w == 0)
            && ws.keys.iter().flat_map(|r| r.0.iter()).all(|&w| w == 0)
    };
    // After a call with mixed keys (the per-slot key copies) and with one key.
    let mut ws = e.workspace();
    let (k1, k2) = (e.expand(&[0x5a; 24]).unwrap(), e.expand(&[0x3c; 24]).unwrap());
    let (mut a, mut b) = ([1u8; 48], [2u8; 16]);
    ws.encrypt(&mut [
        Lane { keys: &k1, iv: [7; 8], data: &mut a },
        Lane { keys: &k2, iv: [7; 8], data: &mut b },
    ])
    .unwrap();
    assert!(zero(&ws));
    ws.encrypt(&mut [Lane { keys: &k1, iv: [7; 8], data: &mut a }]).unwrap();
    assert!(zero(&ws));
    // And once dropped, what a fill leaves there until the call ends.
    let mut ws = ManuallyDrop::new(e.workspace());
    let mut data = [1u8; 8];
    let mut t = Table { ws: &mut ws, ptr: [std::ptr::null_mut(); SLOTS], left: [0; SLOTS], shared: None };
    t.fill::<false>(3, &mut Lane { keys: &k1, iv: [0x77; 8], data: &mut data });
    assert!(!zero(&ws));
    // SAFETY: as above.
    unsafe { ManuallyDrop::drop(&mut ws) };
    assert!(zero(&ws));
}
