//! CBC on the 16-lane engines for a run — AES-CBC encryption on VAES-512
//! ([`crate::cbc16`]), 3DES-CBC encryption and decryption on AVX-512 VBMI
//! ([`crate::des16`]) — before the rest of the run goes to IPsec-MB as jobs.
//!
//! ```text
//!  process_run(run) ─ AES-CBC session on a CPU with VAES-512, or 3DES-CBC with VBMI?
//!    ├ yes: requests contiguous, in place, with a payload: AES encrypt ─► one engine call;
//!    │      3DES encrypt ─► one call, 3DES decrypt ─► one call (each up to 64 lanes: 16 in
//!    │      flight, refilled as lanes end) ─► Done
//!    └ the others (AES decrypt, out of place, scatter-gather) ─► IPsec-MB jobs, as before
//! ```
//!
//! Why: for 16 × 1 KiB, IPsec-MB's job API peaks here at ~8 GB/s for AES-CBC encryption
//! and the engine at ~18 GB/s; for 3DES-CBC at ~107 MB/s either way, the engine at ~300
//! (their module docs). AES-CBC decryption is parallel within a buffer, and IPsec-MB's
//! is fast: it stays there. A run is in hand whole, so the engine needs no job ring and
//! no flush: one call does every lane. The lanes are built on the stack (no allocation
//! per run, nothing initialised beyond the lanes used), from the session's keys
//! (expanded once per session into the box they stay in, wiped on drop) and each
//! request's payload and IV; the thread keeps one workspace per engine between runs (its
//! key copies are wiped after every call).

#[cfg(target_arch = "x86_64")]
mod on_x86 {
    use std::cell::RefCell;
    use std::thread::LocalKey;

    use ocf::{CipherAlg, Mode, Op, Request, SessionParams};
    use smallvec::SmallVec;

    use crate::lane::RUN_MAX;
    use crate::{cbc16, des16};

    thread_local! {
        /// This thread's engine workspaces, kept between runs, used where they lie (the
        /// AES one is 5 KiB: taking it out and putting it back cost 11% of a 16 x 1 KiB run).
        static AES: RefCell<Option<cbc16::Workspace>> = const { RefCell::new(None) };
        static DES: RefCell<Option<des16::Workspace>> = const { RefCell::new(None) };
    }

    /// A CBC session's keys for its engine, where the CPU has it: expanded in their box,
    /// so that moving this value (into the session, and the session into its box) moves
    /// a pointer and leaves no copy of them behind.
    pub(crate) enum CbcRuns {
        Aes(cbc16::Cbc16, Box<cbc16::RoundKeys>),
        Des3(des16::Des16, Box<des16::Des3Keys>),
    }

    impl CbcRuns {
        /// For an AES-CBC cipher session on a CPU with VAES-512, or a 3DES-CBC one on a CPU
        /// with AVX-512 VBMI; `None` otherwise.
        pub(crate) fn new(params: &SessionParams) -> Option<CbcRuns> {
            match &params.mode {
                Mode::Cipher { alg: CipherAlg::AesCbc, key } => {
                    let engine = cbc16::Cbc16::new()?;
                    Some(CbcRuns::Aes(engine, engine.expand(key.as_bytes()).ok()?))
                }
                Mode::Cipher { alg: CipherAlg::TdesCbc, key } => {
                    let engine = des16::Des16::new()?;
                    Some(CbcRuns::Des3(engine, engine.expand(key.as_bytes()).ok()?))
                }
                _ => None,
            }
        }

        /// Runs the requests of `reqs` (at most [`RUN_MAX`]) the engine takes — AES-CBC
        /// encryption, 3DES-CBC encryption and decryption; a contiguous buffer, in place,
        /// a payload — and marks each in `taken`; returns how many.
        pub(crate) fn run(&self, reqs: &mut [Request], taken: &mut [bool; RUN_MAX]) -> usize {
            match self {
                CbcRuns::Aes(engine, keys) => call(
                    &AES,
                    reqs,
                    Op::Encrypt,
                    taken,
                    |iv, data| cbc16::Lane { keys, iv, data },
                    || engine.workspace(),
                    |ws, lanes| ws.encrypt(lanes).is_ok(),
                ),
                // Its encryptions in one call, then its decryptions in another.
                CbcRuns::Des3(engine, keys) => [Op::Encrypt, Op::Decrypt]
                    .into_iter()
                    .map(|op| {
                        call(
                            &DES,
                            reqs,
                            op,
                            taken,
                            |iv, data| des16::Lane { keys, iv, data },
                            || engine.workspace(),
                            |ws, lanes| {
                                match op {
                                    Op::Encrypt => ws.encrypt(lanes),
                                    _ => ws.decrypt(lanes),
                                }
                                .is_ok()
                            },
                        )
                    })
                    .sum(),
            }
        }
    }

    /// One engine call on the requests of `reqs` for `op` (contiguous, in place, with a
    /// payload), as lanes made by `lane` from the request's IV (of the engine's length
    /// `IV`) and payload, with this thread's workspace in `slot` (made by `make` on first
    /// use). Marks the requests it did in `taken`; returns how many.
    fn call<'r, L, W: 'static, const IV: usize>(
        slot: &'static LocalKey<RefCell<Option<W>>>,
        reqs: &'r mut [Request],
        op: Op,
        taken: &mut [bool; RUN_MAX],
        lane: impl Fn([u8; IV], &'r mut [u8]) -> L,
        make: impl FnOnce() -> W,
        run: impl FnOnce(&mut W, &mut [L]) -> bool,
    ) -> usize {
        let mut mine = [false; RUN_MAX];
        let mut lanes: SmallVec<[L; RUN_MAX]> = SmallVec::new();
        for (i, req) in reqs.iter_mut().enumerate().take(RUN_MAX) {
            if req.op != op || req.out.is_some() {
                continue;
            }
            let (Ok(iv), payload) = (<[u8; IV]>::try_from(req.iv()), req.payload_range()) else {
                continue;
            };
            let Some(data) = req.buf.as_contiguous_mut().and_then(|b| b.get_mut(payload)) else {
                continue;
            };
            if data.is_empty() {
                continue;
            }
            lanes.push(lane(iv, data));
            mine[i] = true;
        }
        if lanes.is_empty() {
            return 0;
        }
        // The session's rules let only whole blocks through; should a lane not be, the
        // engine refuses the call before touching any lane, and the requests go on to
        // IPsec-MB, which names the error.
        if !slot.with_borrow_mut(|ws| run(ws.get_or_insert_with(make), &mut lanes)) {
            return 0;
        }
        for (t, m) in taken.iter_mut().zip(mine) {
            *t |= m;
        }
        lanes.len()
    }
}

#[cfg(target_arch = "x86_64")]
pub(crate) use on_x86::CbcRuns;

/// Elsewhere there is no engine: every request of a run goes to IPsec-MB.
#[cfg(not(target_arch = "x86_64"))]
pub(crate) struct CbcRuns;

#[cfg(not(target_arch = "x86_64"))]
impl CbcRuns {
    pub(crate) fn new(_: &ocf::SessionParams) -> Option<CbcRuns> {
        None
    }

    pub(crate) fn run(&self, _: &mut [ocf::Request], _: &mut [bool; crate::lane::RUN_MAX]) -> usize {
        0
    }
}
