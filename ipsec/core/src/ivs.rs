//! CBC IVs from ocf's random operation.
//!
//! RFC 3602 §3 (and RFC 2451 for 3DES): an ESP CBC IV must be unpredictable. They come from
//! ocf's random-bytes operation (`ocf::Op::Random`), so that the driver serving it — the
//! kernel's getrandom on the CPU, or a device source checked by the SP 800-90B health
//! tests — is the one source of every IV and nonce, counted and routed like every other
//! request.
//!
//! ```text
//!  seal (outbound.rs) ─ take(iv_len) ─▶ this thread's shard: a pool of POOL bytes
//!                                          │ used up
//!                                          ▼
//!                           one ocf Random request refills it (POOL / 16 IVs a request)
//! ```
//!
//! Cost (`cargo bench -p ipsec-core --bench ivs`): see the bench's header. A request per
//! IV would cost a framework round trip and a system call per packet; a pool
//! of [`POOL`] bytes costs one per 256 AES IVs. Pools are sharded by thread ([`SHARDS`]), so
//! that two threads sending through the core rarely meet on a lock. The random session is
//! made at the first CBC packet: a core whose SAs are all AEAD needs no random driver. If
//! none can serve it, or the source fails (its health tests took it out), the packet is
//! dropped as `Drop::NoRandom`: a CBC packet is never sent with a predictable IV.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};

use ocf::{Framework, Request, Session, SessionParams};

/// Bytes drawn per random request: 256 AES-CBC IVs.
pub const POOL: usize = 4096;
/// Pools, chosen by thread.
pub const SHARDS: usize = 8;

/// Where outbound CBC packets take their IVs.
pub struct IvSource {
    fw: Framework,
    session: OnceLock<Result<Session, ocf::Error>>,
    shards: [Mutex<Pool>; SHARDS],
}

/// Random bytes drawn and not yet used: `req.buf[used..]`. The request is reused for every
/// refill (no allocation per refill).
#[derive(Default)]
struct Pool {
    req: Option<Request>,
    used: usize,
}

thread_local! {
    /// This thread's shard (assigned round-robin at its first IV).
    static SHARD: usize = {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        NEXT.fetch_add(1, Ordering::Relaxed) % SHARDS
    };
}

impl IvSource {
    pub fn new(fw: Framework) -> IvSource {
        IvSource { fw, session: OnceLock::new(), shards: Default::default() }
    }

    /// Fills `iv` with fresh random bytes.
    pub fn fill(&self, iv: &mut [u8]) -> Result<(), ocf::Error> {
        let shard = SHARD.with(|s| *s);
        let mut pool = self.shards[shard].lock().unwrap_or_else(PoisonError::into_inner);
        let n = iv.len();
        let have = pool.req.as_ref().map_or(0, |r| r.buf.len()).saturating_sub(pool.used);
        if have < n {
            self.refill(&mut pool)?;
        }
        let Pool { req, used } = &mut *pool;
        let Some(req) = req.as_ref() else { return Err(ocf::Error::NoDriver) };
        req.buf.copy_out(*used..*used + n, iv);
        *used += n;
        Ok(())
    }

    fn refill(&self, pool: &mut Pool) -> Result<(), ocf::Error> {
        let session = self.session.get_or_init(|| self.fw.new_session(&SessionParams::random()));
        let session = session.as_ref().map_err(Clone::clone)?;
        let req = match pool.req.take() {
            Some(mut r) => {
                let buf = r.buf.take();
                r.reset(ocf::Op::Random, buf);
                r
            }
            None => Request::random(POOL),
        };
        pool.used = 0;
        match session.run(req) {
            Ok(r) => {
                pool.req = Some(r);
                Ok(())
            }
            Err(failed) => {
                let (e, r) = failed.into_parts();
                // Nothing drawn: the pool is empty until a refill succeeds.
                pool.used = r.buf.len();
                pool.req = Some(r);
                Err(e)
            }
        }
    }
}
