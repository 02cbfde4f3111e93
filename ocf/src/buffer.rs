//! Data buffers of a request: one contiguous vector, or a scatter-gather list (a packet in
//! several segments, like an mbuf chain).
//!
//! Buffers are owned by the request and handed back with it on completion, so a caller that
//! reuses its requests allocates nothing per operation.

use std::ops::Range;

/// The data a request works on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Buffer {
    /// One contiguous vector.
    Contiguous(Vec<u8>),
    /// A scatter-gather list: the logical buffer is the concatenation of the segments.
    Segments(Vec<Vec<u8>>),
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
            Buffer::Segments(_) => None,
        }
    }

    #[inline]
    pub fn as_contiguous_mut(&mut self) -> Option<&mut [u8]> {
        match self {
            Buffer::Contiguous(v) => Some(v),
            Buffer::Segments(_) => None,
        }
    }

    /// Copies the logical bytes `range` into `out` (`out.len() == range.len()`).
    /// The caller has checked that `range` lies inside the buffer.
    pub fn copy_out(&self, range: Range<usize>, out: &mut [u8]) {
        debug_assert_eq!(out.len(), range.len());
        match self {
            Buffer::Contiguous(v) => out.copy_from_slice(&v[range]),
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
    fn contiguous_behaves_like_one_segment() {
        let mut b = Buffer::from(vec![1u8, 2, 3, 4]);
        b.copy_in(2, &[7, 8]);
        assert_eq!(b.as_contiguous().unwrap(), &[1, 2, 7, 8]);
        assert_eq!(b.slices(1..3).collect::<Vec<_>>(), vec![&[2u8, 7][..]]);
    }
}
