//! Data buffers of a request: one contiguous vector, a scatter-gather list (a packet in
//! several segments, like an mbuf chain), or the caller's own memory lent for one call.
//!
//! Buffers are owned by the request and handed back with it on completion, so a caller that
//! reuses its requests allocates nothing per operation. A caller whose bytes live elsewhere
//! — the OpenSSL provider, working on the application's buffer — lends them to one
//! [`crate::Session::run_in`] call instead of copying them in and out (FreeBSD's
//! `CRYPTO_BUF_CONTIG` over a caller's pointer; cryptodev-linux's zero-copy mapping of user
//! pages): at 8 KiB the two copies were 14% of an AES-GCM message through the provider.

use std::fmt;
use std::ops::Range;
use std::ptr::NonNull;

/// The data a request works on.
#[derive(Debug, PartialEq, Eq)]
pub enum Buffer {
    /// One contiguous vector.
    Contiguous(Vec<u8>),
    /// A scatter-gather list: the logical buffer is the concatenation of the segments.
    Segments(Vec<Vec<u8>>),
    /// The caller's memory, lent for the duration of one [`crate::Session::run_in`] call
    /// (only ocf makes one). Read and written like [`Buffer::Contiguous`].
    Borrowed(Borrowed),
}

/// Contiguous memory lent to a request by [`crate::Session::run_in`], which takes it as a
/// `&mut [u8]` and takes it out of the request again before returning: the pointer never
/// outlives the borrow it came from.
///
/// Not `Clone`: a clone of a [`Buffer`] that holds one is an owned copy of the bytes, so no
/// second pointer to the lent memory can exist.
pub struct Borrowed {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: a `Borrowed` stands for a `&mut [u8]` held by the thread blocked in `run_in` until
// the request comes back; the request (and with it this pointer) moves to at most one other
// thread at a time (a driver's), which is what `&mut [u8]: Send` allows.
unsafe impl Send for Borrowed {}

impl Borrowed {
    /// Lends `data` to a request. Only `Session::run_in` calls this, and it removes the
    /// buffer from the request before the borrow of `data` ends.
    pub(crate) fn new(data: &mut [u8]) -> Borrowed {
        let len = data.len();
        Borrowed { ptr: NonNull::from(data).cast(), len }
    }

    #[inline]
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `ptr`/`len` come from a `&mut [u8]` that outlives this value (see `new`),
        // and this value is the only way to it while it exists.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    #[inline]
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_slice`; `&mut self` makes this the only reference.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl PartialEq for Borrowed {
    fn eq(&self, other: &Borrowed) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for Borrowed {}

impl fmt::Debug for Borrowed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Borrowed({} bytes)", self.len)
    }
}

impl Clone for Buffer {
    /// A borrowed buffer clones into an owned copy of its bytes.
    fn clone(&self) -> Buffer {
        match self {
            Buffer::Contiguous(v) => Buffer::Contiguous(v.clone()),
            Buffer::Segments(s) => Buffer::Segments(s.clone()),
            Buffer::Borrowed(b) => Buffer::Contiguous(b.as_slice().to_vec()),
        }
    }
}

impl Default for Buffer {
    fn default() -> Buffer {
        Buffer::Contiguous(Vec::new())
    }
}

impl From<Vec<u8>> for Buffer {
    fn from(v: Vec<u8>) -> Buffer {
        Buffer::Contiguous(v)
    }
}

impl From<&[u8]> for Buffer {
    fn from(v: &[u8]) -> Buffer {
        Buffer::Contiguous(v.to_vec())
    }
}

impl Buffer {
    /// Logical length in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        match self {
            Buffer::Contiguous(v) => v.len(),
            Buffer::Segments(s) => s.iter().map(Vec::len).sum(),
            Buffer::Borrowed(b) => b.len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The contiguous bytes, if the buffer is one vector.
    #[inline]
    pub fn as_contiguous(&self) -> Option<&[u8]> {
        match self {
            Buffer::Contiguous(v) => Some(v),
            Buffer::Borrowed(b) => Some(b.as_slice()),
            Buffer::Segments(_) => None,
        }
    }

    #[inline]
    pub fn as_contiguous_mut(&mut self) -> Option<&mut [u8]> {
        match self {
            Buffer::Contiguous(v) => Some(v),
            Buffer::Borrowed(b) => Some(b.as_mut_slice()),
            Buffer::Segments(_) => None,
        }
    }

    /// Whether the buffer is memory lent by the caller (see [`Buffer::Borrowed`]).
    #[inline]
    pub fn is_borrowed(&self) -> bool {
        matches!(self, Buffer::Borrowed(_))
    }

    /// Overwrites every byte with zeros (a request's `out` after it carried a key or a
    /// secret); the zeroing is not optimised away.
    pub fn wipe(&mut self) {
        use zeroize::Zeroize;
        match self {
            Buffer::Contiguous(v) => v.as_mut_slice().zeroize(),
            Buffer::Segments(segs) => segs.iter_mut().for_each(|s| s.as_mut_slice().zeroize()),
            Buffer::Borrowed(b) => b.as_mut_slice().zeroize(),
        }
    }

    /// Copies the logical bytes `range` into `out` (`out.len() == range.len()`).
    /// The caller has checked that `range` lies inside the buffer.
    pub fn copy_out(&self, range: Range<usize>, out: &mut [u8]) {
        debug_assert_eq!(out.len(), range.len());
        match self {
            Buffer::Contiguous(v) => out.copy_from_slice(&v[range]),
            Buffer::Borrowed(b) => out.copy_from_slice(&b.as_slice()[range]),
            Buffer::Segments(segs) => {
                let mut done = 0;
                for (seg, seg_range) in segments_overlapping(segs, range) {
                    let n = seg_range.len();
                    out[done..done + n].copy_from_slice(&seg[seg_range]);
                    done += n;
                }
            }
        }
    }

    /// Copies `data` into the logical bytes starting at `offset`.
    /// The caller has checked that the range lies inside the buffer.
    pub fn copy_in(&mut self, offset: usize, data: &[u8]) {
        let range = offset..offset + data.len();
        match self {
            Buffer::Contiguous(v) => v[range].copy_from_slice(data),
            Buffer::Borrowed(b) => b.as_mut_slice()[range].copy_from_slice(data),
            Buffer::Segments(segs) => {
                let mut done = 0;
                for (seg, seg_range) in segments_overlapping_mut(segs, range) {
                    let n = seg_range.len();
                    seg[seg_range].copy_from_slice(&data[done..done + n]);
                    done += n;
                }
            }
        }
    }

    /// The pieces of the logical `range`, in order, as slices (for digests, which can
    /// consume segments without gathering them).
    pub fn slices(&self, range: Range<usize>) -> impl Iterator<Item = &[u8]> {
        let (one, many) = match self {
            Buffer::Contiguous(v) => (Some(&v[range]), None),
            Buffer::Borrowed(b) => (Some(&b.as_slice()[range]), None),
            Buffer::Segments(segs) => (None, Some(segments_overlapping(segs, range))),
        };
        one.into_iter().chain(many.into_iter().flatten().map(|(seg, r)| &seg[r]))
    }

    /// Takes the bytes out, leaving an empty buffer (to hand them back to a caller).
    pub fn take(&mut self) -> Buffer {
        std::mem::take(self)
    }

    /// The logical contents as one vector (allocates for segments; for tests and tools).
    pub fn to_vec(&self) -> Vec<u8> {
        match self {
            Buffer::Contiguous(v) => v.clone(),
            Buffer::Borrowed(b) => b.as_slice().to_vec(),
            Buffer::Segments(s) => s.concat(),
        }
    }
}

/// Yields `(segment, range within segment)` for each segment overlapping logical `range`.
fn segments_overlapping(
    segs: &[Vec<u8>],
    range: Range<usize>,
) -> impl Iterator<Item = (&Vec<u8>, Range<usize>)> {
    let mut base = 0;
    segs.iter().filter_map(move |seg| {
        let (start, end) = (base, base + seg.len());
        base = end;
        let lo = range.start.max(start);
        let hi = range.end.min(end);
        (lo < hi).then(|| (seg, lo - start..hi - start))
    })
}

fn segments_overlapping_mut(
    segs: &mut [Vec<u8>],
    range: Range<usize>,
) -> impl Iterator<Item = (&mut Vec<u8>, Range<usize>)> {
    let mut base = 0;
    segs.iter_mut().filter_map(move |seg| {
        let (start, end) = (base, base + seg.len());
        base = end;
        let lo = range.start.max(start);
        let hi = range.end.min(end);
        (lo < hi).then(|| (seg, lo - start..hi - start))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_read_and_write_across_boundaries() {
        let mut b = Buffer::Segments(vec![vec![0, 1, 2], vec![], vec![3, 4], vec![5, 6, 7, 8]]);
        assert_eq!(b.len(), 9);
        let mut out = [0u8; 5];
        b.copy_out(2..7, &mut out);
        assert_eq!(out, [2, 3, 4, 5, 6]);
        b.copy_in(1, &[9, 9, 9, 9]);
        assert_eq!(b.to_vec(), vec![0, 9, 9, 9, 9, 5, 6, 7, 8]);
        let pieces: Vec<&[u8]> = b.slices(2..6).collect();
        assert_eq!(pieces, vec![&[9u8][..], &[9, 9][..], &[5][..]]);
    }

    #[test]
    fn a_borrowed_buffer_works_on_the_lenders_bytes_and_clones_into_a_copy() {
        let mut mine = vec![1u8, 2, 3, 4];
        let mut b = Buffer::Borrowed(Borrowed::new(&mut mine));
        assert_eq!((b.len(), b.is_borrowed()), (4, true));
        b.copy_in(1, &[8, 9]);
        b.as_contiguous_mut().unwrap()[3] = 7;
        let copy = b.clone();
        assert!(!copy.is_borrowed(), "a clone owns its bytes");
        assert_eq!(copy, Buffer::Contiguous(vec![1, 8, 9, 7]));
        assert_eq!(b.slices(0..4).collect::<Vec<_>>(), vec![&[1u8, 8, 9, 7][..]]);
        drop(b);
        assert_eq!(mine, [1, 8, 9, 7], "writes went to the lender's memory");
    }

    #[test]
    fn contiguous_behaves_like_one_segment() {
        let mut b = Buffer::from(vec![1u8, 2, 3, 4]);
        b.copy_in(2, &[7, 8]);
        assert_eq!(b.as_contiguous().unwrap(), &[1, 2, 7, 8]);
        assert_eq!(b.slices(1..3).collect::<Vec<_>>(), vec![&[2u8, 7][..]]);
    }
}
