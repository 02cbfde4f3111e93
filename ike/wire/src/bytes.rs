//! Bounds-checked reading and writing of big-endian fields: a [`Reader`] over a body being
//! parsed and a [`Writer`] over a buffer being emitted. Every access checks its length and
//! answers [`Error::Truncated`] naming the structure, so the parsers built on them are total.

use crate::error::{Error, Result};

/// Reads fields in order from a byte slice.
#[derive(Debug, Clone)]
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    at: usize,
    what: &'static str,
}

impl<'a> Reader<'a> {
    /// A reader over `buf`, whose errors name it `what`.
    pub(crate) fn new(buf: &'a [u8], what: &'static str) -> Reader<'a> {
        Reader { buf, at: 0, what }
    }

    /// Bytes not read yet.
    pub(crate) fn remaining(&self) -> usize {
        self.buf.len() - self.at
    }

    /// Takes `n` bytes.
    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.remaining() < n {
            return Err(Error::Truncated { what: self.what, needed: self.at + n, got: self.buf.len() });
        }
        let out = &self.buf[self.at..self.at + n];
        self.at += n;
        Ok(out)
    }

    /// Takes everything left.
    pub(crate) fn rest(&mut self) -> &'a [u8] {
        let out = &self.buf[self.at..];
        self.at = self.buf.len();
        out
    }

    pub(crate) fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }

    pub(crate) fn u16(&mut self) -> Result<u16> {
        let b = self.take(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    pub(crate) fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let mut out = [0; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }
}

/// Writes fields in order into a byte slice.
#[derive(Debug)]
pub(crate) struct Writer<'a> {
    buf: &'a mut [u8],
    at: usize,
    what: &'static str,
}

impl<'a> Writer<'a> {
    /// A writer into `buf`, whose errors name the structure `what`.
    pub(crate) fn new(buf: &'a mut [u8], what: &'static str) -> Writer<'a> {
        Writer { buf, at: 0, what }
    }

    /// The next `n` bytes, for a nested emit.
    pub(crate) fn reserve(&mut self, n: usize) -> Result<&mut [u8]> {
        if self.buf.len() - self.at < n {
            return Err(Error::Truncated { what: self.what, needed: self.at + n, got: self.buf.len() });
        }
        let start = self.at;
        self.at += n;
        Ok(&mut self.buf[start..start + n])
    }

    pub(crate) fn put(&mut self, bytes: &[u8]) -> Result<()> {
        self.reserve(bytes.len())?.copy_from_slice(bytes);
        Ok(())
    }

    pub(crate) fn u8(&mut self, v: u8) -> Result<()> {
        self.put(&[v])
    }

    pub(crate) fn u16(&mut self, v: u16) -> Result<()> {
        self.put(&v.to_be_bytes())
    }
}

/// `len` as a `u16` length field, or [`Error::TooLong`] naming `what`.
pub(crate) fn len16(what: &'static str, len: usize) -> Result<u16> {
    u16::try_from(len).map_err(|_| Error::TooLong { what, max: u16::MAX as usize, got: len })
}

/// `len` as a `u8` count or size field, or [`Error::TooLong`] naming `what`.
pub(crate) fn len8(what: &'static str, len: usize) -> Result<u8> {
    u8::try_from(len).map_err(|_| Error::TooLong { what, max: u8::MAX as usize, got: len })
}
