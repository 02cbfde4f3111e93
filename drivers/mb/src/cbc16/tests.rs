//! Known answers (FIPS-197 appendix A, NIST SP 800-38A F.2, CAVP CBCMMT) and equality with
//! aws-lc (an independent CBC) over random mixes of lane counts, lengths and keys.
//!
//! Under AddressSanitizer (the kernel's loads and stores are checked; an over-read of one
//! block past a lane, put in on purpose, was caught):
//! `ASAN_OPTIONS=detect_odr_violation=0 RUSTFLAGS=-Zsanitizer=address cargo +nightly test
//! -p ocf-mb --lib --target x86_64-unknown-linux-gnu cbc16` (the ODR check trips on
//! libdeflate's C, linked in twice through ocf-soft). Valgrind (3.19) cannot run them: it
//! hides AVX-512 from the program, and the engine then reports itself unavailable.

use std::mem::ManuallyDrop;

use aws_lc_rs::cipher::{EncryptingKey, EncryptionContext, UnboundCipherKey, AES_128, AES_192, AES_256};
use aws_lc_rs::iv::FixedLength;

use super::*;
use crate::testkit::{
    self, cavp_blocks, cavp_field, cpu_has, expected, guarded, guarded_lanes, hex, random_lens, LaneEngine,
    Rng,
};

/// The engine, or `None` (and a note) on a CPU without VAES-512: every test then checks only
/// that `new` agrees with the CPU's flags (`available_where_the_cpu_has_vaes_512`). With
/// `OCF_REQUIRE_AVX512=1` a missing engine fails instead.
fn engine() -> Option<Cbc16> {
    testkit::engine_or_skip(Cbc16::new(), "cbc16: this CPU lacks AVX-512F/VAES")
}

/// aws-lc's AES-CBC encryption of `data` (no padding): the independent answer.
fn aws_lc_cbc(key: &[u8], iv: [u8; 16], data: &[u8]) -> Vec<u8> {
    let alg = match key.len() {
        16 => &AES_128,
        24 => &AES_192,
        _ => &AES_256,
    };
    let k = EncryptingKey::cbc(UnboundCipherKey::new(alg, key).unwrap()).unwrap();
    let mut out = data.to_vec();
    k.less_safe_encrypt(&mut out, EncryptionContext::Iv128(FixedLength::from(iv))).unwrap();
    out
}

#[test]
fn available_where_the_cpu_has_vaes_512() {
    let (has, flags) = cpu_has(&["avx512f", "vaes", "aes"]);
    assert_eq!(Cbc16::new().is_some(), has, "flags: {flags:?}");
    assert!(
        has || !testkit::avx512_required(),
        "OCF_REQUIRE_AVX512=1, but the CPU's flags lack it: {flags:?}"
    );
}

/// FIPS-197 appendix A.1–A.3: the first derived word, and the last round key.
#[test]
fn key_expansion_is_fips_197_appendix_a() {
    let Some(e) = engine() else { return };
    for (key, rounds, first_derived, last) in [
        ("2b7e151628aed2a6abf7158809cf4f3c", 10, "a0fafe17", "d014f9a8c9ee2589e13f0cc8b6630ca6"),
        (
            "8e73b0f7da0e6452c810f32b809079e562f8ead2522c6b7b",
            12,
            "fe0c91f7",
            "e98ba06f448c773c8ecc720401002202",
        ),
        (
            "603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4",
            14,
            "9ba35411",
            "fe4890d1e6188d0b046df344706c631e",
        ),
    ] {
        let key = hex(key);
        let k = e.expand(&key).unwrap();
        assert_eq!(k.rounds(), rounds);
        let words: Vec<u8> = k.rk.iter().flatten().copied().collect();
        assert_eq!(&words[..key.len()], &key[..], "the key is the first Nk words");
        assert_eq!(&words[key.len()..key.len() + 4], &hex(first_derived)[..]);
        assert_eq!(&k.rk[rounds][..], &hex(last)[..]);
    }
}

#[test]
fn a_key_of_another_length_is_refused_by_name() {
    let Some(e) = engine() else { return };
    for len in [0, 8, 15, 17, 31, 33, 64] {
        let r = e.expand(&vec![1; len]);
        assert_eq!(
            r.err(),
            Some(Error::BadKeyLength { what: "mb: AES key", got: len, allowed: &[16, 24, 32] })
        );
    }
}

const SP800_38A_PLAIN: &str = "6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e51\
     30c81c46a35ce411e5fbc1191a0a52eff69f2445df4f9b17ad2b417be66c3710";

/// NIST SP 800-38A F.2.1, F.2.3, F.2.5 (CBC-AES128/192/256.Encrypt): key, ciphertext.
const SP800_38A: [(&str, &str); 3] = [
    (
        "2b7e151628aed2a6abf7158809cf4f3c",
        "7649abac8119b246cee98e9b12e9197d5086cb9b507219ee95db113a917678b2\
         73bed6b8e3c1743b7116e69e222295163ff1caa1681fac09120eca307586e1a7",
    ),
    (
        "8e73b0f7da0e6452c810f32b809079e562f8ead2522c6b7b",
        "4f021db243bc633d7178183a9fa071e8b4d9ada9ad7dedf4e5e738763f69145a\
         571b242012fb7ae07fa9baac3df102e008b0e27988598881d920a9e64f5615cd",
    ),
    (
        "603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4",
        "f58c4c04d6e5f1ba779eabfb5f7bfbd69cfc4e967edb808d679f777bc6702c7d\
         39f23369a9d9bacfa530e26304231461b2eb05e2c39be9fcda6c19078c6a9d1b",
    ),
];

/// Each SP 800-38A vector in each of the 16 slot positions, beside 15 other lanes with
/// other keys (of the vector's length: one pass; and of another length: two passes), and
/// alone with 15 lanes of the same key (the shared-key kernel).
#[test]
fn sp800_38a_in_every_lane_position() {
    let Some(e) = engine() else { return };
    let iv: [u8; 16] = std::array::from_fn(|i| i as u8);
    let mut rng = Rng(38);
    for (key, want) in SP800_38A {
        let key = hex(key);
        let keys = e.expand(&key).unwrap();
        let others: Vec<Box<RoundKeys>> = [key.len(), if key.len() == 32 { 16 } else { key.len() + 8 }]
            .iter()
            .map(|&n| e.expand(&rng.bytes(n)).unwrap())
            .collect();
        for pos in 0..SLOTS {
            for other in others.iter().chain([&keys]) {
                let mut bufs: Vec<Vec<u8>> = (0..SLOTS).map(|_| rng.bytes(64)).collect();
                bufs[pos] = hex(SP800_38A_PLAIN);
                let mut lanes: Vec<Lane<'_>> = bufs
                    .iter_mut()
                    .enumerate()
                    .map(|(i, data)| Lane { keys: if i == pos { &keys } else { other }, iv, data })
                    .collect();
                e.workspace().encrypt(&mut lanes).unwrap();
                assert_eq!(bufs[pos], hex(want), "{}-bit key in slot {pos}", key.len() * 8);
            }
        }
    }
}

/// Every ENCRYPT case of CAVP's CBCMMT128/192/256 (1 to 10 blocks) in one call: 30 lanes
/// of three key lengths and ten lengths, more than the 16 slots.
#[test]
fn cavp_cbcmmt_all_in_one_call() {
    let Some(e) = engine() else { return };
    let mut cases = Vec::new();
    for file in [
        include_str!("../../../../conformance/vectors/nist/aes-cbc/CBCMMT128.rsp"),
        include_str!("../../../../conformance/vectors/nist/aes-cbc/CBCMMT192.rsp"),
        include_str!("../../../../conformance/vectors/nist/aes-cbc/CBCMMT256.rsp"),
    ] {
        for block in cavp_blocks(file, false) {
            let f = |n| cavp_field(block, n).unwrap();
            cases.push((f("KEY"), f("IV"), f("PLAINTEXT"), f("CIPHERTEXT")));
        }
    }
    assert_eq!(cases.len(), 30);
    let keys: Vec<Box<RoundKeys>> = cases.iter().map(|c| e.expand(&c.0).unwrap()).collect();
    let mut bufs: Vec<Vec<u8>> = cases.iter().map(|c| c.2.clone()).collect();
    let mut lanes: Vec<Lane<'_>> = bufs
        .iter_mut()
        .zip(&keys)
        .zip(&cases)
        .map(|((data, keys), c)| Lane { keys, iv: c.1.clone().try_into().unwrap(), data })
        .collect();
    e.workspace().encrypt(&mut lanes).unwrap();
    for (i, (buf, c)) in bufs.iter().zip(&cases).enumerate() {
        assert_eq!(buf, &c.3, "case {i}");
    }
}

/// Random calls against aws-lc: 1..=40 lanes, 0..=4096 bytes each in 16-byte steps, one
/// shared key, or mixed keys of one length, or of all three lengths; distinct IVs; each
/// lane's data between guard bytes, which must stay as they were (and so must a lane of
/// length 0).
#[test]
fn random_lanes_equal_aws_lc() {
    let Some(e) = engine() else { return };
    let mut rng = Rng(0xcf22);
    for case in 0..400 {
        let n = 1 + case % 40;
        let key_mix = case % 3; // 0: one key, 1: one length, many keys, 2: all lengths
        let key_len = [16, 24, 32][rng.below(3)];
        let raw: Vec<Vec<u8>> = (0..n)
            .map(|_| match key_mix {
                1 => rng.bytes(key_len),
                2 => {
                    let len = [16, 24, 32][rng.below(3)];
                    rng.bytes(len)
                }
                _ => Vec::new(),
            })
            .collect();
        let shared = rng.bytes(key_len);
        let raw: Vec<&[u8]> = raw.iter().map(|k| if key_mix == 0 { &shared[..] } else { &k[..] }).collect();
        let one = e.expand(&shared).unwrap();
        let expanded: Vec<Box<RoundKeys>> = raw.iter().map(|k| e.expand(k).unwrap()).collect();
        let lens = random_lens(&mut rng, n, 16, 256);
        let ivs: Vec<[u8; 16]> =
            (0..n).map(|i| std::array::from_fn(|j| (i * 16 + j) as u8 ^ case as u8)).collect();
        let plain = guarded(&mut rng, &lens);
        let want = expected(&plain, |i, body| aws_lc_cbc(raw[i], ivs[i], body));
        let mut bufs = plain.clone();
        let mut lanes = guarded_lanes(&mut bufs, false, |i, data| Lane {
            keys: if key_mix == 0 { &one } else { &expanded[i] },
            iv: ivs[i],
            data,
        });
        e.workspace().encrypt(&mut lanes).unwrap();
        for i in 0..n {
            assert!(bufs[i] == want[i], "case {case}: lane {i} of {n}, {} bytes, keys {key_mix}", lens[i]);
        }
    }
}

// The tests both engines share (`testkit`), on this one with aws-lc as the reference.
testkit::lane_engine_tests!(Cbc16, RoundKeys, key: 16, block: 16, reference: aws_lc_cbc);

/// Round keys are zero once dropped; a workspace is after each call and once dropped.
#[test]
fn key_material_is_wiped_on_drop() {
    let Some(e) = engine() else { return };
    let mut keys = ManuallyDrop::new(e.expand(&[0xa5; 32]).unwrap());
    assert!(keys.rk.iter().flatten().any(|&b| b != 0));
    // SAFETY: the keys are dropped once, in their box, and only their plain array is read
    // afterwards (no destructor-owned resource is touched).
    unsafe { std::ptr::drop_in_place::<RoundKeys>(&mut **keys) };
    assert!(keys.rk.iter().flatten().all(|&b| b == 0));
    // SAFETY: the box came from `Box::new`; freed as uninitialised memory, it is not
    // dropped twice.
    drop(unsafe {
        Box::from_raw(
            Box::into_raw(ManuallyDrop::into_inner(keys)).cast::<std::mem::MaybeUninit<RoundKeys>>(),
        )
    });

    // The workspace after a call of each key length: no key copy or chaining value left.
    let mut ws = e.workspace();
    for key_len in [16, 24, 32] {
        let k = e.expand(&vec![0x5a; key_len]).unwrap();
        let mut data = [1u8; 48];
        ws.encrypt(&mut [Lane { keys: &k, iv: [0x77; 16], data: &mut data }]).unwrap();
        assert!(ws.chain.0.iter().flatten().all(|&b| b == 0), "{key_len}");
        assert!(ws.keys.iter().flat_map(|r| r.0.iter().flatten()).all(|&b| b == 0), "{key_len}");
    }
    // And once dropped, what a pass leaves there until the call ends.
    let mut ws = ManuallyDrop::new(e.workspace());
    let k = e.expand(&[0x5a; 16]).unwrap();
    let mut data = [1u8; 16];
    let mut t = Table { ws: &mut ws, ptr: [std::ptr::null_mut(); SLOTS], left: [0; SLOTS] };
    t.fill::<false>(3, &mut Lane { keys: &k, iv: [0x77; 16], data: &mut data });
    assert!(ws.keys[10].0[3] != [0; 16]);
    // SAFETY: as above.
    unsafe { ManuallyDrop::drop(&mut ws) };
    assert!(ws.chain.0.iter().flatten().all(|&b| b == 0));
    assert!(ws.keys.iter().flat_map(|r| r.0.iter().flatten()).all(|&b| b == 0));
}

/// A call with lanes of several keys (the kernel copies the table's key rows into its
/// frame) leaves none of FIPS-197 A.1's round keys on this thread's stack: the call zeroes
/// it after the kernel (without that, a release build left rows 2 KiB below the caller).
#[test]
fn a_call_with_several_keys_leaves_no_round_key_on_the_stack() {
    use std::os::unix::fs::FileExt;
    let Some(e) = engine() else { return };
    let (k1, k2) = (e.expand(&hex("2b7e151628aed2a6abf7158809cf4f3c")).unwrap(), e.expand(&[9; 16]).unwrap());
    let mut bufs: Vec<Vec<u8>> = (0..16).map(|i| vec![i as u8; 1024]).collect();
    let mut lanes: Vec<Lane<'_>> = bufs
        .iter_mut()
        .enumerate()
        .map(|(i, data)| Lane { keys: if i % 2 == 0 { &k1 } else { &k2 }, iv: [0; 16], data })
        .collect();
    e.workspace().encrypt(&mut lanes).unwrap();
    drop(lanes);
    drop((k1, k2));
    // Round keys 5 and 10, inverted (so that the patterns themselves are never found).
    let inverted = |h: &str| hex(h).iter().map(|b| !b).collect::<Vec<u8>>();
    let patterns =
        [inverted("d4d1c6f87c839d87caf2b8bc11f915bc"), inverted("d014f9a8c9ee2589e13f0cc8b6630ca6")];
    // This thread's stack: the mapping that holds one of this frame's locals.
    let here = &bufs as *const _ as u64;
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let (start, end) = maps
        .lines()
        .filter_map(|l| l.split_whitespace().next()?.split_once('-'))
        .map(|(s, e)| (u64::from_str_radix(s, 16).unwrap(), u64::from_str_radix(e, 16).unwrap()))
        .find(|(s, e)| (*s..*e).contains(&here))
        .expect("the stack's mapping");
    let mut stack = vec![0u8; (end - start) as usize];
    let n = std::fs::File::open("/proc/self/mem").unwrap().read_at(&mut stack, start).unwrap();
    let hits: Vec<u64> = (0..n.saturating_sub(16))
        .filter(|&i| patterns.iter().any(|p| stack[i..i + 16].iter().zip(p).all(|(x, y)| !x == *y)))
        .map(|i| here - (start + i as u64))
        .collect();
    assert!(hits.is_empty(), "round keys at these distances below this frame: {hits:?}");
}
