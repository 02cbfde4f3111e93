//! Sequence numbers: the inbound anti-replay window and the outbound counter.
//!
//! # Inbound: [`ReplayWindow`]
//!
//! RFC 4303 §3.4.3: a receiver keeps the highest sequence number it has accepted (the top)
//! and a window of the `size` numbers ending there; a packet whose number is in the window
//! and was seen before is a replay, one below the window is too old, one above it slides
//! the window. With extended sequence numbers (RFC 4303 §2.2.1) only the low 32 bits travel
//! in the packet; the receiver infers the high 32 bits from the window's position (RFC 4303
//! Appendix A.2) and the ICV, which covers them, confirms or refutes the guess.
//!
//! The order matters (RFC 4303 §3.4.3): the window is *checked* before the ICV is verified
//! (cheap rejection of replays, and the ESN guess the ICV needs), but only *updated* after
//! the ICV verified, so that forged packets cannot move it. Hence two calls,
//! [`ReplayWindow::check`] and [`ReplayWindow::update`]; the update checks again because
//! another packet with the same number may have been accepted while this one was being
//! verified.
//!
//! The bitmap follows RFC 6479: a ring of 64-bit blocks with one block more than the
//! window needs, so that sliding clears whole blocks that come into the window instead of
//! shifting the whole map. A packet costs bounded work (a slide clears each block of the
//! ring at most once, however far it jumps) and no allocation (the ring is allocated when
//! the SA is made).
//!
//! # Outbound: [`SeqCounter`]
//!
//! RFC 4303 §3.3.3: the sender's counter starts at 0 and the first packet carries 1; it must
//! never cycle (an AEAD nonce is the sequence number, so a repeat would reuse a nonce), so
//! once the last number (2^32 - 1, or 2^64 - 1 with ESN) has been used the SA must be
//! re-keyed. The counter is one atomic, usable from several threads without a lock.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::stats::Drop;

/// The window size used when an SA does not say (setkey's default).
pub const DEFAULT_WINDOW: u32 = crate::control::DEFAULT_REPLAY_WINDOW;

/// The largest window [`ReplayWindow::new`] accepts. ESN inference needs the window to be
/// at most half the 32-bit space, or "just behind the top" and "far ahead of it" overlap.
/// (The control protocol allows much less: [`crate::control::MAX_REPLAY_WINDOW`].)
pub const MAX_WINDOW: u32 = 1 << 31;

/// With the window off (size 0) the top is still tracked, to infer ESN high bits; the
/// inference then assumes that a number up to this far below the top is late rather than
/// 2^32 ahead, as if the window were half the 32-bit space.
const INFERENCE_WINDOW_OFF: u32 = 1 << 31;

const BLOCK_BITS: u64 = u64::BITS as u64;

/// Why an inbound sequence number is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReplayError {
    /// The number is in the window and was accepted before.
    Duplicate { seq: u64 },
    /// The number is below the window (`seq <= top - window`).
    TooOld { seq: u64, top: u64, window: u32 },
    /// Sequence number 0, which is never sent: the sender's first packet is 1
    /// (RFC 4303 §3.3.3). Without ESN it is the packet's number; with ESN, the
    /// inferred 64-bit number. Not raised when the window is off (size 0).
    ZeroSequence,
}

impl ReplayError {
    /// The statistics counter for a packet dropped for this reason.
    pub fn drop_reason(&self) -> Drop {
        match self {
            ReplayError::Duplicate { .. } => Drop::Replay,
            ReplayError::TooOld { .. } => Drop::TooOld,
            ReplayError::ZeroSequence => Drop::BadSequence,
        }
    }
}

impl fmt::Display for ReplayError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReplayError::Duplicate { seq } => write!(f, "sequence number {seq} already seen (replay)"),
            ReplayError::TooOld { seq, top, window } => {
                write!(f, "sequence number {seq} is older than the window (top {top}, window {window})")
            }
            ReplayError::ZeroSequence => {
                f.write_str("sequence number 0 is never sent (the first packet is 1)")
            }
        }
    }
}

impl std::error::Error for ReplayError {}

/// An inbound SA's anti-replay window (RFC 4303 §3.4.3, ESN per Appendix A, bitmap per
/// RFC 6479).
///
/// Not internally synchronized: `check` takes `&self` and `update` `&mut self`, so the
/// caller decides how the packets of one SA share it (a lock, or one thread per SA).
#[derive(Clone, Debug)]
pub struct ReplayWindow {
    /// Highest number accepted; 0 before the first packet (0 itself is never valid).
    top: u64,
    /// Acceptance window in packets; 0: checking off.
    size: u32,
    esn: bool,
    /// Bit `n % 64` of block `(n / 64) % blocks.len()` is set once `n` has been accepted,
    /// for `n` in the window. The length is a power of two (cheap ring index) and at least
    /// one block more than the window can touch, so that the block the top moves into can
    /// be cleared without losing any number still in the window.
    blocks: Box<[u64]>,
}

impl ReplayWindow {
    /// A window of `size` packets (0: replay checking off; every number is accepted, as
    /// FreeBSD's and Linux's windows do when disabled, but the top is still tracked so that
    /// ESN high bits can be inferred). `esn`: the SA uses 64-bit sequence numbers.
    ///
    /// # Panics
    ///
    /// If `size` exceeds [`MAX_WINDOW`].
    pub fn new(size: u32, esn: bool) -> ReplayWindow {
        assert!(size <= MAX_WINDOW, "anti-replay window of {size} packets exceeds {MAX_WINDOW}");
        // A window of `size` numbers ending anywhere touches at most ceil(size / 64) + 1
        // blocks (it can start mid-block); the block being cleared by a slide must not be
        // one of them, hence + 1 more, rounded up to a power of two.
        let blocks = if size == 0 { 0 } else { (size.div_ceil(64) as usize + 1).next_power_of_two() };
        ReplayWindow { top: 0, size, esn, blocks: vec![0; blocks].into_boxed_slice() }
    }

    /// The highest sequence number accepted so far (0: none yet).
    pub fn top(&self) -> u64 {
        self.top
    }

    /// The window size in packets (0: checking off).
    pub fn size(&self) -> u32 {
        self.size
    }

    /// Whether the SA uses extended (64-bit) sequence numbers.
    pub fn esn(&self) -> bool {
        self.esn
    }

    /// Before the ICV is verified: the full sequence number of a packet carrying `seq_lo`,
    /// or why it is to be dropped without verifying it.
    ///
    /// Without ESN the number is `seq_lo`. With ESN the high 32 bits are inferred as
    /// RFC 4303 Appendix A.2 says: the number is taken to be the one with these low bits in
    /// the 2^32 numbers starting at the bottom of the window, so anything below the window
    /// reads as far ahead and fails the ICV. The ICV must be computed with the returned
    /// number; [`ReplayWindow::update`] takes it once the ICV verified.
    pub fn check(&self, seq_lo: u32) -> Result<u64, ReplayError> {
        let seq = if self.esn { self.infer(seq_lo) } else { u64::from(seq_lo) };
        self.check_full(seq)?;
        Ok(seq)
    }

    /// After the ICV verified: accepts `seq` (the number [`ReplayWindow::check`] returned),
    /// sliding the window if it is above the top. Checks again first: another packet with
    /// the same number may have been accepted since, or the window may have moved past it.
    pub fn update(&mut self, seq: u64) -> Result<(), ReplayError> {
        debug_assert!(self.esn || seq <= u64::from(u32::MAX), "sequence number {seq} needs ESN");
        if self.size == 0 {
            self.top = self.top.max(seq);
            return Ok(());
        }
        self.check_full(seq)?;
        if seq > self.top {
            self.slide(seq);
        }
        let (block, bit) = self.position(seq);
        self.blocks[block] |= bit;
        Ok(())
    }

    /// This window with room for `size` packets (an SA whose `-r` changed while its key
    /// stayed): the top stays, and so does every number the new window covers — accepted
    /// or not as before, and counted as seen if the old window had already left it behind
    /// (growing the window must not let an old packet be replayed).
    ///
    /// # Panics
    ///
    /// If `size` exceeds [`MAX_WINDOW`].
    pub fn resized(&self, size: u32) -> ReplayWindow {
        let mut w = ReplayWindow::new(size, self.esn);
        w.top = self.top;
        if size == 0 {
            return w;
        }
        let low = self.top.saturating_sub(u64::from(size) - 1).max(1);
        for seq in low..=self.top {
            let seen = self.top - seq >= u64::from(self.size) || {
                let (block, bit) = self.position(seq);
                self.blocks[block] & bit != 0
            };
            if seen {
                let (block, bit) = w.position(seq);
                w.blocks[block] |= bit;
            }
        }
        w
    }

    /// RFC 4303 Appendix A.2.2, with the window `W` and top `T = Th:Tl`.
    fn infer(&self, seq_lo: u32) -> u64 {
        let w = if self.size == 0 { INFERENCE_WINDOW_OFF } else { self.size };
        let th = (self.top >> 32) as u32;
        let tl = self.top as u32;
        // Bl, the low 32 bits of the window's bottom (wrapping in case B).
        let bottom_lo = tl.wrapping_sub(w - 1);
        let seq_hi = if tl >= w - 1 {
            // Case A: the window lies within one 2^32 subspace. Below it means the next
            // subspace; at Th = 2^32 - 1 there is none, so the number stays in this one,
            // below the window, and is refused as too old.
            if seq_lo >= bottom_lo {
                th
            } else {
                th.checked_add(1).unwrap_or(th)
            }
        } else if seq_lo >= bottom_lo {
            // Case B: the window spans the end of the previous subspace and the start of
            // this one; from Bl up it is the previous one. At Th = 0 there is none (numbers
            // start at 1), so the number is in this one, ahead of the top.
            th.checked_sub(1).unwrap_or(th)
        } else {
            th
        };
        u64::from(seq_hi) << 32 | u64::from(seq_lo)
    }

    /// RFC 4303 §3.4.3's test on a full sequence number, without changing anything.
    fn check_full(&self, seq: u64) -> Result<(), ReplayError> {
        if self.size == 0 {
            return Ok(());
        }
        if seq == 0 {
            return Err(ReplayError::ZeroSequence);
        }
        if seq > self.top {
            return Ok(());
        }
        if self.top - seq >= u64::from(self.size) {
            return Err(ReplayError::TooOld { seq, top: self.top, window: self.size });
        }
        let (block, bit) = self.position(seq);
        if self.blocks[block] & bit != 0 {
            return Err(ReplayError::Duplicate { seq });
        }
        Ok(())
    }

    /// Moves the top up to `seq`, clearing the blocks the window moves into (RFC 6479):
    /// they hold numbers a whole ring below, long out of the window. A jump of a ring or
    /// more clears every block.
    fn slide(&mut self, seq: u64) {
        let from = self.top / BLOCK_BITS;
        let to = seq / BLOCK_BITS;
        let ring = self.blocks.len() as u64;
        for block in from + 1..=to.min(from + ring) {
            self.blocks[(block & (ring - 1)) as usize] = 0;
        }
        self.top = seq;
    }

    /// The ring block and the bit in it for `seq`.
    fn position(&self, seq: u64) -> (usize, u64) {
        let block = (seq / BLOCK_BITS) & (self.blocks.len() as u64 - 1);
        (block as usize, 1 << (seq % BLOCK_BITS))
    }
}

/// The outbound sequence number space is used up: the SA must be re-keyed
/// (RFC 4303 §3.3.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SeqExhausted {
    /// Whether the exhausted space is ESN's 64 bits (else 32).
    pub esn: bool,
}

impl SeqExhausted {
    /// The statistics counter for a packet dropped for this reason.
    pub fn drop_reason(&self) -> Drop {
        Drop::SeqExhausted
    }
}

impl fmt::Display for SeqExhausted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bits = if self.esn { 64 } else { 32 };
        write!(f, "{bits}-bit sequence number space exhausted; the SA must be re-keyed")
    }
}

impl std::error::Error for SeqExhausted {}

/// An outbound SA's sequence counter (RFC 4303 §3.3.3): hands out 1, 2, 3, … up to
/// 2^32 - 1 (2^64 - 1 with ESN), each once, then refuses. Lock-free and shareable between
/// threads.
///
/// A cache line of its own: every packet of the SA writes it, from whichever thread
/// encrypts it, and the SA's fields beside it are read for every packet. Sharing a line
/// with the SA's spec, the mode read in the SA lookup missed the cache on every packet when
/// two threads sent through one SA (a quarter of `Shared::output`'s samples, perf annotate
/// of `benches/threads.rs` "output, 2 threads, 1 SA").
#[derive(Debug)]
#[repr(align(64))]
pub struct SeqCounter {
    /// The last number handed out (0: none yet).
    last: AtomicU64,
    esn: bool,
}

impl SeqCounter {
    /// A fresh counter: the first [`SeqCounter::next`] returns 1.
    pub fn new(esn: bool) -> SeqCounter {
        SeqCounter::starting_after(0, esn)
    }

    /// A counter whose last handed-out number is `last` (the next is `last + 1`); for
    /// tests, and for restoring an SA's state.
    pub fn starting_after(last: u64, esn: bool) -> SeqCounter {
        SeqCounter { last: AtomicU64::new(last), esn }
    }

    /// The next sequence number, or [`SeqExhausted`] once the last one has been used (and
    /// forever after: the counter never cycles).
    pub fn next(&self) -> Result<u64, SeqExhausted> {
        let limit = self.limit();
        // Relaxed: uniqueness needs only the atomicity of the read-modify-write, and the
        // number orders nothing else in memory.
        self.last
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |last| (last < limit).then(|| last + 1))
            .map(|last| last + 1)
            .map_err(|_| SeqExhausted { esn: self.esn })
    }

    /// Moves the counter forward so that the next number is after `last` (restoring a
    /// saved counter after a restart). Never moves it back: no number is handed out twice.
    pub fn skip_to(&self, last: u64) {
        self.last.fetch_max(last.min(self.limit()), Ordering::Relaxed);
    }

    /// The last number handed out (0: none yet).
    pub fn last(&self) -> u64 {
        self.last.load(Ordering::Relaxed)
    }

    /// Whether every number has been used.
    pub fn exhausted(&self) -> bool {
        self.last() >= self.limit()
    }

    /// Whether the counter is ESN's 64 bits.
    pub fn esn(&self) -> bool {
        self.esn
    }

    fn limit(&self) -> u64 {
        if self.esn {
            u64::MAX
        } else {
            u64::from(u32::MAX)
        }
    }
}
