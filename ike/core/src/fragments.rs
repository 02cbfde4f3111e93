//! IKE fragmentation (RFC 7383): reassembling a message that came as SKF fragments, and the
//! sizes that decide when ours go out fragmented.
//!
//! ```text
//!  SKF fragment (message ID in the window, our SA's keys)
//!   │ Total > max_fragments ─────────────────────────────────────▶ drop(FragmentTooLarge)
//!   │ another message ID than the one being reassembled ─▶ the old reassembly forgotten
//!   │ Total < the stored Total ──────────────────────────────────▶ drop(FragmentStale)
//!   │ Total = stored, number already held ───────────────────────▶ drop(FragmentDuplicate)
//!   │ ICV (SkCipher::open, by the caller) ── bad ────────────────▶ drop(Unauthenticated)
//!   │ Total > stored: the stored fragments thrown away (§2.6.2: the sender
//!   │                 retransmitted with smaller fragments)
//!   │ the bytes held would pass max_message ─────────────────────▶ drop(FragmentTooLarge)
//!   ▼ kept; all Total present ─▶ Complete(Whole: inner type of fragment 1, the pieces in
//!                                  order, fragment 1's datagram)
//! ```
//!
//! Fragment 1's datagram is kept with the message: a retransmitted request is recognised
//! by it (RFC 7383 §2.6.1: only fragment 1 of a request already answered brings the
//! response again; the engine ignores and counts the others).
//!
//! Only authenticated fragments are kept (§2.6.2: the ICV of each is checked before it is
//! stored), and no more than `max_message` plaintext bytes nor `max_fragments` pieces per
//! reassembly, one reassembly per IKE SA and direction (request or response): an attacker
//! without the keys can make us spend a decryption, never memory. The checks that cost no
//! cryptography (Total, duplicates) come first.
//!
//! Sending: [`FragmentConfig::size`] is strongSwan's `charon.fragment_size`, the whole IP
//! datagram; [`max_message_len`] takes the IP and UDP headers (and the non-ESP marker on
//! port 4500) off to give the longest IKE message that goes in one piece.

use std::net::SocketAddr;

use ike_wire::ids::PayloadType;
use zeroize::Zeroizing;

use crate::stats::Drop;

/// Fragmentation's sizes and bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FragmentConfig {
    /// The largest IP datagram we send an IKE message or fragment in (strongSwan's
    /// `charon.fragment_size`, 1280 by default: IPv6's minimum MTU).
    pub size: usize,
    /// The most plaintext bytes a reassembled message may hold (32 KiB: a chain of a few
    /// RSA-4096 certificates is under 8 KiB; strongSwan's `max_packet` is 10,000 bytes).
    /// Each IKE SA holds at most one message being reassembled per direction, so the
    /// worst case is this times two times the IKE SAs, half-open ones included (the
    /// half-open bound, 1000, caps those).
    pub max_message: usize,
    /// The most fragments a message may come in.
    pub max_fragments: u16,
}

impl Default for FragmentConfig {
    fn default() -> FragmentConfig {
        FragmentConfig { size: 1280, max_message: 32_768, max_fragments: 128 }
    }
}

/// The longest IKE message (from the IKE header) that fits one datagram of `size` bytes
/// sent from `local`: the IP header (20 bytes for IPv4, 40 for IPv6), UDP's 8, and on port
/// 4500 the non-ESP marker's 4 taken off.
pub fn max_message_len(size: usize, local: SocketAddr) -> usize {
    let ip = if local.is_ipv4() { 20 } else { 40 };
    let marker = if local.port() == 500 { 0 } else { 4 };
    size.saturating_sub(ip + 8 + marker)
}

/// One message being reassembled.
pub struct Reassembly {
    /// Its message ID.
    pub message_id: u32,
    total: u16,
    /// Fragment 1's Next Payload: the first inner payload's type.
    inner: PayloadType,
    /// Fragment 1's datagram.
    first: Vec<u8>,
    pieces: Vec<Option<Zeroizing<Vec<u8>>>>,
    /// Plaintext bytes held.
    held: usize,
}

/// One authenticated fragment, for [`Reassembly::add`].
pub struct Piece<'a> {
    pub message_id: u32,
    pub number: u16,
    pub total: u16,
    /// The SKF header's Next Payload (meaningful on fragment 1 only).
    pub inner: PayloadType,
    /// Its inner bytes, decrypted, padding removed.
    pub plain: Zeroizing<Vec<u8>>,
    /// The datagram it came in.
    pub datagram: &'a [u8],
}

/// A reassembled message.
pub struct Whole {
    /// The first inner payload's type.
    pub inner: PayloadType,
    /// The inner payloads' bytes.
    pub bytes: Zeroizing<Vec<u8>>,
    /// Fragment 1's datagram.
    pub first: Vec<u8>,
}

/// What adding a fragment gave.
pub enum Added {
    /// More fragments are needed.
    Incomplete,
    /// The whole message.
    Complete(Whole),
}

impl Reassembly {
    /// The cheap checks of a fragment `number` of `total` for message `message_id`, against
    /// what `slot` holds (a reassembly of another message ID counts as nothing). Ok: worth
    /// authenticating, and whether the stored fragments go once it is authentic (restart).
    pub fn precheck(
        slot: &Option<Reassembly>,
        message_id: u32,
        number: u16,
        total: u16,
        cfg: &FragmentConfig,
    ) -> Result<bool, Drop> {
        if total > cfg.max_fragments {
            return Err(Drop::FragmentTooLarge);
        }
        match slot.as_ref().filter(|r| r.message_id == message_id) {
            None => Ok(true),
            Some(r) if total < r.total => Err(Drop::FragmentStale),
            Some(r) if total > r.total => Ok(true),
            Some(r) if r.pieces[usize::from(number - 1)].is_some() => Err(Drop::FragmentDuplicate),
            Some(_) => Ok(false),
        }
    }

    /// Adds an authenticated fragment that passed [`Reassembly::precheck`] with `restart`.
    /// On completion the slot is emptied.
    pub fn add(
        slot: &mut Option<Reassembly>,
        restart: bool,
        piece: Piece<'_>,
        cfg: &FragmentConfig,
    ) -> Result<Added, Drop> {
        let Piece { message_id, number, total, inner, plain, datagram } = piece;
        if restart || slot.is_none() {
            *slot = Some(Reassembly {
                message_id,
                total,
                inner: PayloadType::NONE,
                first: Vec::new(),
                pieces: vec![None; usize::from(total)],
                held: 0,
            });
        }
        let r = slot.as_mut().expect("set above");
        if r.held + plain.len() > cfg.max_message {
            *slot = None;
            return Err(Drop::FragmentTooLarge);
        }
        if number == 1 {
            r.inner = inner;
            r.first = datagram.to_vec();
        }
        r.held += plain.len();
        r.pieces[usize::from(number - 1)] = Some(plain);
        if r.pieces.iter().any(Option::is_none) {
            return Ok(Added::Incomplete);
        }
        let r = slot.take().expect("set above");
        let mut whole = Zeroizing::new(Vec::with_capacity(r.held));
        for p in r.pieces.into_iter().flatten() {
            whole.extend_from_slice(&p);
        }
        Ok(Added::Complete(Whole { inner: r.inner, bytes: whole, first: r.first }))
    }

    /// Fragments held now.
    pub fn held(&self) -> usize {
        self.pieces.iter().filter(|p| p.is_some()).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn add(slot: &mut Option<Reassembly>, id: u32, n: u16, t: u16, data: &[u8]) -> Result<Added, Drop> {
        let cfg = FragmentConfig::default();
        let restart = Reassembly::precheck(slot, id, n, t, &cfg)?;
        let inner = if n == 1 { PayloadType::IDI } else { PayloadType::NONE };
        let datagram = [n as u8; 3];
        let piece = Piece {
            message_id: id,
            number: n,
            total: t,
            inner,
            plain: Zeroizing::new(data.to_vec()),
            datagram: &datagram,
        };
        Reassembly::add(slot, restart, piece, &cfg)
    }

    fn complete(a: Result<Added, Drop>) -> (PayloadType, Vec<u8>) {
        match a {
            Ok(Added::Complete(w)) => {
                assert_eq!(w.first, [1, 1, 1], "fragment 1's datagram");
                (w.inner, w.bytes.to_vec())
            }
            Ok(Added::Incomplete) => panic!("incomplete"),
            Err(e) => panic!("{e:?}"),
        }
    }

    #[test]
    fn out_of_order_with_a_duplicate() {
        let mut s = None;
        assert!(matches!(add(&mut s, 1, 3, 3, b"ef"), Ok(Added::Incomplete)));
        assert!(matches!(add(&mut s, 1, 1, 3, b"ab"), Ok(Added::Incomplete)));
        assert_eq!(add(&mut s, 1, 1, 3, b"ab").err(), Some(Drop::FragmentDuplicate));
        assert_eq!(s.as_ref().unwrap().held(), 2);
        assert_eq!(complete(add(&mut s, 1, 2, 3, b"cd")), (PayloadType::IDI, b"abcdef".to_vec()));
        assert!(s.is_none(), "the slot is freed on completion");
    }

    #[test]
    fn a_larger_total_restarts_a_smaller_one_is_stale() {
        let mut s = None;
        assert!(matches!(add(&mut s, 1, 1, 2, b"abc"), Ok(Added::Incomplete)));
        assert!(matches!(add(&mut s, 1, 2, 3, b"cd"), Ok(Added::Incomplete)));
        assert_eq!(s.as_ref().unwrap().held(), 1, "the 2-fragment piece was thrown away");
        assert_eq!(add(&mut s, 1, 2, 2, b"zz").err(), Some(Drop::FragmentStale));
        assert!(matches!(add(&mut s, 1, 1, 3, b"ab"), Ok(Added::Incomplete)));
        assert_eq!(complete(add(&mut s, 1, 3, 3, b"ef")).1, b"abcdef");
    }

    #[test]
    fn another_message_id_starts_over() {
        let mut s = None;
        assert!(matches!(add(&mut s, 1, 1, 2, b"ab"), Ok(Added::Incomplete)));
        assert!(matches!(add(&mut s, 2, 2, 2, b"cd"), Ok(Added::Incomplete)));
        assert_eq!(s.as_ref().unwrap().message_id, 2);
        assert_eq!(complete(add(&mut s, 2, 1, 2, b"ab")).1, b"abcd");
    }

    #[test]
    fn bounds() {
        let cfg = FragmentConfig { size: 1280, max_message: 4, max_fragments: 3 };
        assert_eq!(Reassembly::precheck(&None, 1, 1, 4, &cfg), Err(Drop::FragmentTooLarge));
        let mut s = None;
        let piece = |number, plain: &[u8]| Piece {
            message_id: 1,
            number,
            total: 3,
            inner: PayloadType::NONE,
            plain: Zeroizing::new(plain.to_vec()),
            datagram: &[],
        };
        assert!(matches!(Reassembly::add(&mut s, true, piece(1, b"abc"), &cfg), Ok(Added::Incomplete)));
        assert_eq!(Reassembly::add(&mut s, false, piece(2, b"de"), &cfg).err(), Some(Drop::FragmentTooLarge));
        assert!(s.is_none(), "an oversized message is forgotten");
    }

    #[test]
    fn datagram_room() {
        assert_eq!(max_message_len(1280, "192.0.2.1:500".parse().unwrap()), 1252);
        assert_eq!(max_message_len(1280, "192.0.2.1:4500".parse().unwrap()), 1248);
        assert_eq!(max_message_len(1280, "[2001:db8::1]:500".parse().unwrap()), 1232);
        assert_eq!(max_message_len(10, "192.0.2.1:500".parse().unwrap()), 0);
    }
}
