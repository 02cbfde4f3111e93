//! AES-CBC encryption of a run on the VAES engine ([`crate::cbc16`]), before the rest of
//! the run goes to IPsec-MB as jobs.
//!
//! ```text
//!  process_run(run) ─ AES-CBC session on a CPU with VAES-512?
//!    ├ yes: encrypt requests, contiguous, in place, with a payload ─► one engine call
//!    │      (up to 64 lanes: 16 in flight, refilled as lanes end) ─► Done
//!    └ the others (decrypt, out of place, scatter-gather) ─► IPsec-MB jobs, as before
//! ```
//!
//! Why: IPsec-MB's job API peaks at ~8 GB/s for 16 × 1 KiB here, the engine at ~18 GB/s
//! (its module docs). A run is in hand whole, so the engine needs no job ring and no
//! flush: one call encrypts every lane. The lanes are built on the stack (no allocation
//! per run, nothing initialised beyond the lanes used), from the session's round keys (expanded once per session, wiped on drop) and
//! each request's payload and IV; the thread keeps its engine workspace between runs (its
//! key copies are wiped after every call).

#[cfg(target_arch = "x86_64")]
mod on_x86 {
    use std::cell::RefCell;

    use ocf::{CipherAlg, Mode, Op, Request, SessionParams};
    use smallvec::SmallVec;

    use crate::cbc16::{Cbc16, Lane, RoundKeys, Workspace};
    use crate::lane::RUN_MAX;

    thread_local! {
        /// This thread's engine workspace, kept between runs, used where it lies (it is
        /// 5 KiB: taking it out and putting it back cost 11% of a 16 x 1 KiB run).
        static WORKSPACE: RefCell<Option<Workspace>> = const { RefCell::new(None) };
    }

    /// An AES-CBC session's keys for the engine, where the CPU has it.
    pub(crate) struct CbcRuns {
        engine: Cbc16,
        keys: RoundKeys,
    }

    impl CbcRuns {
        /// For an AES-CBC cipher session on a CPU with VAES-512; `None` otherwise.
        pub(crate) fn new(params: &SessionParams) -> Option<CbcRuns> {
            let Mode::Cipher { alg: CipherAlg::AesCbc, key } = &params.mode else { return None };
            let engine = Cbc16::new()?;
            let keys = engine.expand(key.as_bytes()).ok()?;
            Some(CbcRuns { engine, keys })
        }

        /// Encrypts the requests of `reqs` (at most [`RUN_MAX`]) the engine takes —
        /// encryption, a contiguous buffer, in place, a payload — and marks each in `taken`.
        pub(crate) fn encrypt(&self, reqs: &mut [Request], taken: &mut [bool; RUN_MAX]) -> usize {
            let keys = &self.keys;
            let mut lanes: SmallVec<[Lane<'_>; RUN_MAX]> = SmallVec::new();
            for (i, req) in reqs.iter_mut().enumerate().take(RUN_MAX) {
                if req.op != Op::Encrypt || req.out.is_some() {
                    continue;
                }
                let (Ok(iv), payload) = (<[u8; 16]>::try_from(req.iv()), req.payload_range()) else {
                    continue;
                };
                let Some(data) = req.buf.as_contiguous_mut().and_then(|b| b.get_mut(payload)) else {
                    continue;
                };
                if data.is_empty() {
                    continue;
                }
                lanes.push(Lane { keys, iv, data });
                taken[i] = true;
            }
            if lanes.is_empty() {
                return 0;
            }
            // The session's rules let only whole blocks through; should a lane not be, the
            // engine refuses the call before touching any lane, and the requests go on to
            // IPsec-MB, which names the error.
            let ok = WORKSPACE.with_borrow_mut(|ws| {
                ws.get_or_insert_with(|| self.engine.workspace()).encrypt(&mut lanes).is_ok()
            });
            if !ok {
                taken.fill(false);
                return 0;
            }
            lanes.len()
        }
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

    pub(crate) fn encrypt(&self, _: &mut [ocf::Request], _: &mut [bool; crate::lane::RUN_MAX]) -> usize {
        0
    }
}
