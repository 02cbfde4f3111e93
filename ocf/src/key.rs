//! Key material ([`Key`]): wiped when dropped, compared in constant time only. A leaf:
//! session parameters and the public-key handles (`crate::asym`) both hold keys.

use std::fmt;

use subtle::{Choice, ConstantTimeEq};
use zeroize::{Zeroize, ZeroizeOnDrop};

/// Key material. Zeroized when dropped; `Debug` never prints it.
///
/// Sessions own copies of their keys (so that a session can move to another driver), and
/// every copy is a `Key`, so freeing a session wipes them.
///
/// Keys compare in constant time only ([`ConstantTimeEq`], or [`Key::matches`] against
/// bytes): there is no `PartialEq`, so a variable-time `==` on key bytes cannot be
/// written by accident.
///
/// ```
/// use subtle::ConstantTimeEq;
/// let (a, b) = (ocf::Key::new(&[1; 16]), ocf::Key::new(&[1; 16]));
/// assert!(bool::from(a.ct_eq(&b)));
/// assert!(a.matches(&[1; 16]) && !a.matches(&[2; 16]) && !a.matches(&[1; 15]));
/// ```
///
/// ```compile_fail
/// let (a, b) = (ocf::Key::new(&[1; 16]), ocf::Key::new(&[1; 16]));
/// assert!(a == b);
/// ```
#[derive(Clone, Default, Zeroize, ZeroizeOnDrop)]
pub struct Key(Vec<u8>);

/// In time that depends on the lengths only (a length is not secret).
impl ConstantTimeEq for Key {
    fn ct_eq(&self, other: &Key) -> Choice {
        self.0.as_slice().ct_eq(other.0.as_slice())
    }
}

impl Key {
    pub fn new(bytes: &[u8]) -> Key {
        Key(bytes.to_vec())
    }

    pub fn empty() -> Key {
        Key(Vec::new())
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// Whether `bytes` are this key, in time that depends on the lengths only.
    pub fn matches(&self, bytes: &[u8]) -> bool {
        self.0.as_slice().ct_eq(bytes).into()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl From<&[u8]> for Key {
    fn from(b: &[u8]) -> Key {
        Key::new(b)
    }
}

impl<const N: usize> From<&[u8; N]> for Key {
    fn from(b: &[u8; N]) -> Key {
        Key::new(b)
    }
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Key({} bytes)", self.0.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `zeroize` wipes the key's own memory, not only its length: a `Vec`'s bytes stay in
    /// its allocation after `clear()`, so the test reads that memory itself. (Checking
    /// `as_bytes()` proved nothing: it is empty after any `clear()`, wiped or not.) The wipe
    /// on drop is observed where the memory is freed, by an inspecting allocator
    /// (`ocf/tests/key_wipe.rs`).
    #[test]
    fn key_zeroizes_and_hides_itself() {
        let mut k = Key::new(&[0xAA; 16]);
        assert_eq!(format!("{k:?}"), "Key(16 bytes)");
        let before = k.as_bytes().as_ptr();
        k.zeroize();
        let after = k.as_bytes().as_ptr();
        assert_eq!(after, before, "the same allocation, kept");
        // SAFETY: `after` points at `k`'s live allocation (the same one, checked above), at
        // least 16 bytes long, all 16 written when the key was copied in (and by `zeroize`
        // since); `k` is not used while the slice lives.
        let memory = unsafe { std::slice::from_raw_parts(after, 16) };
        assert_eq!(memory, &[0u8; 16], "the key's bytes are still in its memory");
        fn is_zeroize_on_drop<T: ZeroizeOnDrop>() {}
        is_zeroize_on_drop::<Key>();
    }
}
