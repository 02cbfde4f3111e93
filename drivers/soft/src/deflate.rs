//! Raw DEFLATE (RFC 1951) for compression sessions, through libdeflate (`libdeflater`).
//!
//! ```text
//!  Compress:   payload ──libdeflate_deflate_compress──▶ out[off .. off + min(room, len-1)]
//!              did not fit ──▶ Error::Incompressible (RFC 3173 §2.2: send the original)
//!  Decompress: payload ──libdeflate_deflate_decompress──▶ out[off ..]   (room = the limit)
//!              would exceed the room ──▶ Error::OutputLimit; corrupt/truncated ──▶ BadCompressedData
//! ```
//!
//! Why libdeflate: `tools/deflatebench` (1400-byte packets, pinned, alternating rounds) timed
//! it against miniz_oxide (flate2's default backend) and flate2 over zlib-rs. At level 1 it
//! compressed text to 0.557 of its size (zlib-rs 0.735, miniz_oxide 0.583), gave up on random
//! packets fastest, and decompressed 2.2-2.6x faster than miniz_oxide (zlib-rs was 1.1-1.5x
//! faster on text both ways, for 32% more bytes); at level 6 it was fastest in every column.
//! zlib-rs 0.6.8 also panicked in that bench when a stream that had run out of room was
//! reset and reused — the case of every incompressible packet. libdeflate works on whole buffers only (no streaming), which is
//! what a packet is, and never allocates while it runs: decompression writes into the
//! caller's bounded buffer and stops at its end, so a decompression bomb costs at most the
//! limit's bytes of the caller's memory and no more time than filling them.
//!
//! Level 1: on the same packets level 6 compressed text only 0.6% smaller (0.554 against
//! 0.557) for 1.5x the time, and random packets cost 1.3-1.6x more to give up on.
//!
//! Compressor and decompressor states are per thread (libdeflate's are not reentrant, and a
//! compressor holds its match finder's tables: one per session would cost that memory per
//! SA, a shared one a lock per packet). They hold no key; the data they saw is not secret beyond the
//! packet itself.

use std::cell::RefCell;

use libdeflater::{CompressionError, CompressionLvl, Compressor, DecompressionError, Decompressor};
use ocf::Error;

/// The compression level used for every session (see the module docs).
pub(crate) const LEVEL: i32 = 1;

thread_local! {
    static COMPRESSOR: RefCell<Option<Compressor>> = const { RefCell::new(None) };
    static DECOMPRESSOR: RefCell<Option<Decompressor>> = const { RefCell::new(None) };
}

/// Compresses `input` into `out`; the result must be shorter than the input.
pub(crate) fn compress(input: &[u8], out: &mut [u8]) -> Result<usize, Error> {
    let room = out.len().min(input.len().saturating_sub(1));
    COMPRESSOR.with(|c| {
        let mut c = c.borrow_mut();
        let c = c.get_or_insert_with(|| {
            Compressor::new(CompressionLvl::new(LEVEL).unwrap_or_else(|_| CompressionLvl::fastest()))
        });
        match c.deflate_compress(input, &mut out[..room]) {
            Ok(n) => Ok(n),
            Err(CompressionError::InsufficientSpace) => Err(Error::Incompressible { len: input.len() }),
        }
    })
}

/// Decompresses `input` into `out`, never writing past its end.
pub(crate) fn decompress(input: &[u8], out: &mut [u8]) -> Result<usize, Error> {
    DECOMPRESSOR.with(|d| {
        let mut d = d.borrow_mut();
        let d = d.get_or_insert_with(Decompressor::new);
        match d.deflate_decompress(input, out) {
            Ok(n) => Ok(n),
            Err(DecompressionError::InsufficientSpace) => Err(Error::OutputLimit { limit: out.len() }),
            Err(DecompressionError::BadData) => Err(Error::BadCompressedData),
        }
    })
}
