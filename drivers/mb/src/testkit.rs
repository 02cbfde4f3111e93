//! What the 16-lane engines' tests share (`cbc16/tests.rs`, `des16/tests.rs`): hex, a
//! reproducible generator, the CPU's flags, CAVP response files, and lanes of random
//! lengths between guard bytes. Each engine's tests keep their own engine, reference
//! (aws-lc) and lanes, and share the tests that differ only in types and sizes: each
//! engine's tests call `lane_engine_tests!`, which implements [`LaneEngine`] for it and
//! runs them.

use ocf::Error;

pub(crate) fn hex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

pub(crate) fn hex_of(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Whether `OCF_REQUIRE_AVX512=1`: the machine has what the 16-lane engines need (AVX-512F
/// and VAES for `cbc16`, AVX-512BW and VBMI for `des16`), so an engine that reports itself
/// unavailable fails its tests instead of leaving them empty. `scripts/test` sets it where
/// `/proc/cpuinfo` lists those flags (as `OCF_REQUIRE_AFALG=1` is set where AF_ALG is).
pub(crate) fn avx512_required() -> bool {
    std::env::var_os("OCF_REQUIRE_AVX512").is_some_and(|v| v == "1")
}

/// `engine` where the CPU has it; `None` with a note where it does not, or a failure naming
/// `what` when [`avx512_required`].
pub(crate) fn engine_or_skip<E>(engine: Option<E>, what: &str) -> Option<E> {
    if engine.is_none() {
        assert!(!avx512_required(), "OCF_REQUIRE_AVX512=1, but {what}");
        eprintln!("{what}: nothing to run");
    }
    engine
}

/// Whether `/proc/cpuinfo` lists all of `want` (and the flags it lists, for the message).
pub(crate) fn cpu_has(want: &[&str]) -> (bool, Vec<String>) {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let flags: Vec<String> = cpuinfo
        .lines()
        .find(|l| l.starts_with("flags"))
        .map_or(vec![], |l| l.split_whitespace().map(str::to_owned).collect());
    (want.iter().all(|f| flags.iter().any(|g| g == f)), flags)
}

/// A deterministic generator (xorshift64*): reproducible cases without a dependency.
pub(crate) struct Rng(pub u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    pub(crate) fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

/// The `COUNT = ` blocks of a CAVP response file's `[ENCRYPT]` section, or with `decrypt`
/// of its `[DECRYPT]` one.
pub(crate) fn cavp_blocks(file: &str, decrypt: bool) -> impl Iterator<Item = &str> {
    let (encrypt, decrypt_part) = file.split_once("[DECRYPT]").unwrap();
    (if decrypt { decrypt_part } else { encrypt }).split("COUNT = ").skip(1)
}

/// The value of a block's field `name` (`NAME = hex`), if it has one.
pub(crate) fn cavp_field(block: &str, name: &str) -> Option<Vec<u8>> {
    block.lines().find_map(|l| l.strip_prefix(name)).map(|v| hex(v.trim_start_matches(" = ").trim()))
}

/// Guard bytes around every lane's data: nothing outside a lane may be written.
pub(crate) const GUARD: usize = 32;

/// `n` lengths in `block`-byte steps up to `block * most`: short ones often, so that lanes
/// end at different times; zero sometimes.
pub(crate) fn random_lens(rng: &mut Rng, n: usize, block: usize, most: usize) -> Vec<usize> {
    (0..n)
        .map(|_| match rng.below(4) {
            0 => 0,
            1 => block * rng.below(8),
            _ => block * rng.below(most + 1),
        })
        .collect()
}

/// A random buffer per length, with `GUARD` random bytes either side.
pub(crate) fn guarded(rng: &mut Rng, lens: &[usize]) -> Vec<Vec<u8>> {
    lens.iter().map(|&l| rng.bytes(l + 2 * GUARD)).collect()
}

/// What each buffer of `plain` must become: `body(i, data)` between its guards, which stay.
pub(crate) fn expected(plain: &[Vec<u8>], mut body: impl FnMut(usize, &[u8]) -> Vec<u8>) -> Vec<Vec<u8>> {
    plain
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let mut w = p.clone();
            let end = p.len() - GUARD;
            w[GUARD..end].copy_from_slice(&body(i, &p[GUARD..end]));
            w
        })
        .collect()
}

/// A lane per buffer, `lane(i, data)` over the data between its guards, in `bufs`' order
/// or reversed.
pub(crate) fn guarded_lanes<'a, L>(
    bufs: &'a mut [Vec<u8>],
    reversed: bool,
    mut lane: impl FnMut(usize, &'a mut [u8]) -> L,
) -> Vec<L> {
    let mut lanes: Vec<L> = bufs
        .iter_mut()
        .enumerate()
        .map(|(i, b)| {
            let end = b.len() - GUARD;
            lane(i, &mut b[GUARD..end])
        })
        .collect();
    if reversed {
        lanes.reverse();
    }
    lanes
}

/// An engine as the tests both engines share drive it (and `benchkit` builds its lanes):
/// encryption of lanes with one key.
pub(crate) trait LaneEngine: Copy {
    type Keys;
    type Lane<'a>;
    type Workspace;
    /// The key length the shared tests use, and the block size.
    const KEY: usize;
    const BLOCK: usize;
    fn expand(self, key: &[u8]) -> Result<Self::Keys, Error>;
    fn workspace(self) -> Self::Workspace;
    /// A lane over `data` with `keys`, chained from an IV of the byte `iv` repeated.
    fn lane<'a>(keys: &'a Self::Keys, iv: u8, data: &'a mut [u8]) -> Self::Lane<'a>;
    fn encrypt(ws: &mut Self::Workspace, lanes: &mut [Self::Lane<'_>]) -> Result<(), Error>;
    /// The independent answer (aws-lc): `data` encrypted with `key` from an IV of `iv`
    /// repeated.
    fn reference(key: &[u8], iv: u8, data: &[u8]) -> Vec<u8>;
}

/// More than 16 lanes of one key and one length (the refill path), and few lanes, against
/// the reference; one workspace for all the calls.
pub(crate) fn few_and_many_lanes_equal_reference<E: LaneEngine>(e: E) {
    let mut rng = Rng(7);
    let key = rng.bytes(E::KEY);
    let keys = e.expand(&key).unwrap();
    let mut ws = e.workspace();
    for n in [1, 2, 3, 15, 16, 17, 31, 32, 33, 100] {
        let plain: Vec<Vec<u8>> = (0..n).map(|_| rng.bytes(1024)).collect();
        let mut bufs = plain.clone();
        let mut lanes: Vec<E::Lane<'_>> =
            bufs.iter_mut().enumerate().map(|(i, data)| E::lane(&keys, i as u8, data)).collect();
        E::encrypt(&mut ws, &mut lanes).unwrap();
        drop(lanes);
        for i in 0..n {
            assert_eq!(bufs[i], E::reference(&key, i as u8, &plain[i]), "lane {i} of {n}");
        }
    }
}

/// A lane whose length is not a multiple of the block fails the whole call by name, and no
/// lane (before or after it) is touched.
pub(crate) fn a_partial_block_fails_the_call_before_any_lane_is_touched<E: LaneEngine>(e: E) {
    let keys = e.expand(&[9; 32][..E::KEY]).unwrap();
    let (plain, bad) = (vec![0x33; 64], 2 * E::BLOCK + E::BLOCK / 2);
    let (mut a, mut b, mut c) = (plain.clone(), vec![0x33; bad], plain.clone());
    let mut lanes = [E::lane(&keys, 0, &mut a), E::lane(&keys, 0, &mut b), E::lane(&keys, 0, &mut c)];
    let r = E::encrypt(&mut e.workspace(), &mut lanes);
    assert_eq!(r, Err(Error::NotBlockMultiple { len: bad, block: E::BLOCK }));
    drop(lanes);
    assert_eq!((a, b, c), (plain.clone(), vec![0x33; bad], plain));
}

/// No lanes, and a lane of no data, are calls that do nothing.
pub(crate) fn no_lanes_is_fine<E: LaneEngine>(e: E) {
    assert_eq!(E::encrypt(&mut e.workspace(), &mut []), Ok(()));
    let keys = e.expand(&[9; 32][..E::KEY]).unwrap();
    assert_eq!(E::encrypt(&mut e.workspace(), &mut [E::lane(&keys, 1, &mut [])]), Ok(()));
}

/// Implements [`LaneEngine`] for an engine whose tests define `engine()` (the engine, or
/// `None` on a CPU without it) and whose `Lane`, `Workspace`, `expand` and `encrypt` have
/// the shape both engines give them, with `reference(key, iv, data)` as the independent
/// answer; and runs the shared tests on it.
macro_rules! lane_engine_tests {
    ($engine:ident, $keys:ident, key: $key:literal, block: $block:literal, reference: $reference:ident) => {
        impl testkit::LaneEngine for $engine {
            type Keys = Box<$keys>;
            type Lane<'a> = Lane<'a>;
            type Workspace = Workspace;
            const KEY: usize = $key;
            const BLOCK: usize = $block;
            fn expand(self, key: &[u8]) -> Result<Box<$keys>, Error> {
                $engine::expand(&self, key)
            }
            fn workspace(self) -> Workspace {
                $engine::workspace(&self)
            }
            fn lane<'a>(keys: &'a Box<$keys>, iv: u8, data: &'a mut [u8]) -> Lane<'a> {
                Lane { keys, iv: [iv; $block], data }
            }
            fn encrypt(ws: &mut Workspace, lanes: &mut [Lane<'_>]) -> Result<(), Error> {
                ws.encrypt(lanes)
            }
            fn reference(key: &[u8], iv: u8, data: &[u8]) -> Vec<u8> {
                $reference(key, [iv; $block], data)
            }
        }

        #[test]
        fn few_and_many_lanes_equal_aws_lc() {
            let Some(e) = engine() else { return };
            testkit::few_and_many_lanes_equal_reference(e);
        }

        #[test]
        fn a_partial_block_fails_the_call_before_any_lane_is_touched() {
            let Some(e) = engine() else { return };
            testkit::a_partial_block_fails_the_call_before_any_lane_is_touched(e);
        }

        #[test]
        fn no_lanes_is_fine() {
            let Some(e) = engine() else { return };
            testkit::no_lanes_is_fine(e);
        }
    };
}
pub(crate) use lane_engine_tests;
