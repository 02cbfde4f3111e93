//! One IKE SA: its SPIs and role, where it is in its life, its peer's addresses and ports
//! and whether a NAT sits between, the message-ID windows, the outstanding request's
//! retransmission, what IKE_SA_INIT left for IKE_AUTH (nonces, both messages, the key
//! exchange), the keys and SK ciphers, and its CHILD_SAs.
//!
//! ```text
//!  initiator:  InitSent ──SA_INIT resp──▶ AuthSent ──AUTH resp──▶ Established
//!                 ▲ └─COOKIE / INVALID_KE: resend SA_INIT (same SPI, ID 0)
//!  responder:  (SA_INIT req) ──▶ HalfOpen ──AUTH req──▶ Established
//!  Established ──terminate: Delete sent──▶ Deleting ──response / no response──▶ removed
//!  Established: CREATE_CHILD_SA and INFORMATIONAL both ways; our requests one at a time
//!               (window 1), the rest queued (`queued`), a CHILD_SA rekey in `child_rekey`,
//!               a new CHILD_SA in `child_create`,
//!               the IKE SA's in `ike_rekey` (its successor replaces it: exchange::ike_rekey)
//!  Established: nothing heard for dpd_delay ──▶ an empty INFORMATIONAL (Queued::Liveness)
//!  any state ──peer dead, refused, the peer's Delete──▶ removed from the table
//! ```
//!
//! The SK payload's protection lives here ([`IkeSa::seal`], [`IkeSa::open`]): a message
//! is laid out by ike-wire's [`Sealing`] with its final lengths, and its body (IV,
//! ciphertext, ICV) comes from the crypto module's [`SkCipher`]. A message longer than
//! the fragment size, to a peer that reassembles (RFC 7383), goes out as SKF fragments
//! ([`IkeSa::seal_fragmented`]); fragments received are reassembled by the engine
//! ([`crate::fragments`], each authenticated as it comes) and [`IkeSa::open`] hands out
//! the whole message's payloads.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Instant;

use ike_wire::encrypted::SKF_FIELDS_LEN;
use ike_wire::header::HEADER_LEN;
use ike_wire::ids::{DhId, ExchangeType, HashAlgorithm, PayloadType};
use ike_wire::{emit_chain, header, parse_chain, Frame, Message, Payload, Sealing};

use crate::child_sa::ChildSa;
use crate::config::Identity;
use crate::crypto::{IkeKeys, IkeSuite, KeyShare, SkCipher};
use crate::fragments::Reassembly;
use crate::retransmit::Retransmit;
use crate::stats::Drop;
use crate::window::{RequestWindow, ResponseWindow};

/// Where an IKE SA is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// Initiator: IKE_SA_INIT sent.
    InitSent,
    /// Initiator: IKE_AUTH sent.
    AuthSent,
    /// Responder: IKE_SA_INIT answered, IKE_AUTH awaited.
    HalfOpen,
    /// IKE_AUTH done.
    Established,
    /// Our Delete of the IKE SA sent; its CHILD_SAs are gone.
    Deleting,
}

/// What IKE_SA_INIT leaves for IKE_AUTH.
#[derive(Default)]
pub struct InitData {
    pub ni: Vec<u8>,
    pub nr: Vec<u8>,
    /// The initiator's key share, until the response comes.
    pub key_share: Option<KeyShare>,
    /// The group the initiator's KE uses (the first proposal's, or one asked for by
    /// INVALID_KE_PAYLOAD).
    pub ke_group: Option<DhId>,
    /// The responder's cookie, repeated first in the next IKE_SA_INIT.
    pub cookie: Option<Vec<u8>>,
    /// The IKE_SA_INIT messages as sent (initiator's, responder's): AUTH covers them.
    pub msg_i: Vec<u8>,
    pub msg_r: Vec<u8>,
    /// An (unauthenticated) error notify the responder answered with: the reason the IKE
    /// SA goes down when the retransmissions run out.
    pub refused: Option<crate::io::DownReason>,
}

/// The first CHILD_SA, negotiated in IKE_AUTH.
#[derive(Clone, Debug)]
pub struct PendingChild {
    /// Index into the connection's children.
    pub child: usize,
    pub spi_in: u32,
}

/// Our outstanding CHILD_SA rekey: the CREATE_CHILD_SA request is sent, its response
/// awaited.
pub struct ChildRekey {
    /// The CHILD_SA being replaced (its inbound SPI).
    pub old_spi_in: u32,
    /// The new CHILD_SA's inbound SPI, offered in the request.
    pub spi_in: u32,
    pub ni: Vec<u8>,
    /// Our half of the PFS key exchange, when the ESP proposal has a group.
    pub key_share: Option<KeyShare>,
    /// A rekey of the same CHILD_SA by the peer, answered while ours was outstanding
    /// (RFC 7296 §2.8.1): its Ni, our Nr, and the inbound SPI of the CHILD_SA it made.
    pub collision: Option<(Vec<u8>, Vec<u8>, u32)>,
}

/// Our outstanding request for a new CHILD_SA (CREATE_CHILD_SA without REKEY_SA).
pub struct ChildCreate {
    /// The configuration's child name.
    pub child: String,
    /// Its inbound SPI, offered in the request.
    pub spi_in: u32,
    pub ni: Vec<u8>,
    /// Our half of the PFS key exchange, when the ESP proposal has a group.
    pub key_share: Option<KeyShare>,
}

/// Our outstanding rekey of this IKE SA (§2.18).
pub struct IkeRekey {
    /// Our SPI in the new IKE SA (its SPIi: we are its initiator).
    pub spi: u64,
    pub ni: Vec<u8>,
    pub key_share: KeyShare,
    /// The peer's rekey of this IKE SA answered meanwhile (§2.8.2): its Ni, our Nr, and
    /// our SPI in the IKE SA it made.
    pub collision: Option<(Vec<u8>, Vec<u8>, u64)>,
}

/// A message reassembled from fragments.
pub struct Reassembled {
    pub message_id: u32,
    pub response: bool,
    pub payloads: Vec<Payload>,
    /// Fragment 1's datagram: a request's retransmission is recognised by it.
    pub first: Vec<u8>,
}

/// A request waiting for the window (one outstanding request at a time).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Queued {
    /// A new CHILD_SA of this configured child, its KE of this group if the peer asked
    /// for one (INVALID_KE_PAYLOAD).
    NewChild(String, Option<DhId>),
    /// Rekey the CHILD_SA with this inbound SPI.
    RekeyChild(u32),
    /// Rekey it again with the KE group the peer asked for (INVALID_KE_PAYLOAD).
    RekeyChildWith(u32, DhId),
    /// Tell the peer that the CHILD_SA with this inbound SPI is gone (already removed here).
    DeleteChild(u32),
    /// Rekey the IKE SA.
    RekeyIke,
    /// An empty INFORMATIONAL request: is the peer alive? (dpd_delay)
    Liveness,
}

/// An IKE SA.
pub struct IkeSa {
    pub spi_i: u64,
    pub spi_r: u64,
    pub initiator: bool,
    pub state: State,
    /// Index into the configuration's connections.
    pub conn: usize,
    pub local: SocketAddr,
    pub remote: SocketAddr,
    /// We are behind a NAT; the peer is.
    pub nat_local: bool,
    pub nat_remote: bool,
    pub requests: RequestWindow,
    pub responses: ResponseWindow,
    pub retransmit: Option<Retransmit>,
    pub created: Instant,
    pub init: InitData,
    pub suite: Option<IkeSuite>,
    pub keys: Option<IkeKeys>,
    /// (outbound, inbound)
    pub sk: Option<(SkCipher, SkCipher)>,
    /// The peer announced RFC 7383 fragmentation / RFC 7427 hash algorithms.
    pub peer_fragmentation: bool,
    /// The peer's fragmented request, and the fragmented response to ours, being
    /// reassembled (one message each).
    pub reassembly: [Option<Reassembly>; 2],
    /// The message just reassembled, until its exchange has run ([`IkeSa::open`] hands
    /// its payloads out).
    pub reassembled: Option<Reassembled>,
    pub peer_hashes: Vec<HashAlgorithm>,
    pub pending_child: Option<PendingChild>,
    pub children: Vec<ChildSa>,
    pub peer_id: Option<Identity>,
    /// Our outstanding CHILD_SA rekey.
    pub child_rekey: Option<ChildRekey>,
    /// Our outstanding request for a new CHILD_SA.
    pub child_create: Option<ChildCreate>,
    /// Our outstanding Delete of a CHILD_SA (its inbound SPI): sent again on the new IKE
    /// SA should this one be rekeyed before the answer comes.
    pub deleting_child: Option<u32>,
    /// CHILD_SAs replaced by a rekey, gone from `children`, whose SAs stay in ipsecd until
    /// the peer answered our Delete of them (or this IKE SA goes): the peer may send on
    /// the old SA until it has read that Delete (make-before-break, RFC 7296 §2.8).
    pub retiring: Vec<crate::io::ChildSaRemove>,
    /// CHILD_SAs we made as the responder of a rekey whose outbound SA is not installed
    /// yet: (its inbound SPI, the inbound SPI of the CHILD_SA it replaces). The outbound SA
    /// is installed when that one leaves `children` (see `crate::io`).
    pub outbound_later: Vec<(u32, u32)>,
    /// Requests to send when the window frees, in order.
    pub queued: VecDeque<Queued>,
    /// Our outstanding rekey of this IKE SA.
    pub ike_rekey: Option<IkeRekey>,
    /// When this IKE SA is rekeyed (set once established: rekey_time less a random part
    /// of rand_time).
    pub rekey_at: Option<Instant>,
    /// When we delete this IKE SA ourselves should the peer not have by then: set on the
    /// redundant IKE SA of a crossing rekey that we won (we made it answering the peer's
    /// request; the peer deletes it once it has our answer, §2.8.2, and never does if that
    /// answer is lost and the old IKE SA is gone before the peer's retransmission).
    pub delete_at: Option<Instant>,
    /// A rekey (either side's) moved its CHILD_SAs to a successor: nothing new starts on
    /// it (no rekey of it, no new CHILD_SA); it only waits for its Delete.
    pub superseded: bool,
    /// When we last heard from the peer: an authenticated IKE message, or inbound traffic
    /// on one of its CHILD_SAs (`Ike::child_traffic`, `Ike::peer_moved`). A liveness
    /// check goes when this is dpd_delay old.
    pub last_heard: Instant,
}

impl IkeSa {
    /// The CHILD_SA `spi_in` left `children` (deleted by either side, expired, replaced):
    /// the outbound SAs held for it (`outbound_later`) are installed now, before its
    /// Remove, so that its traffic always has an outbound SA; one held for `spi_in`
    /// itself is dropped (its Remove takes only what was installed).
    pub(crate) fn child_gone(&mut self, ike_sa: u64, spi_in: u32, out: &mut Vec<crate::io::Output>) {
        self.outbound_later.retain(|&(new, _)| new != spi_in);
        self.outbound_later.retain(|&(new, old)| {
            if old == spi_in {
                out.push(crate::io::Output::InstallOutbound { ike_sa, spi_in: new });
            }
            old != spi_in
        });
    }

    /// A new IKE SA in `state` with no keys yet and no responder SPI (the responder sets
    /// its own after).
    pub fn new(
        spi_i: u64,
        initiator: bool,
        state: State,
        conn: usize,
        local: SocketAddr,
        remote: SocketAddr,
        now: Instant,
    ) -> IkeSa {
        IkeSa {
            spi_i,
            spi_r: 0,
            initiator,
            state,
            conn,
            local,
            remote,
            nat_local: false,
            nat_remote: false,
            requests: RequestWindow::starting_at(0),
            responses: ResponseWindow::default(),
            retransmit: None,
            created: now,
            init: InitData::default(),
            suite: None,
            keys: None,
            sk: None,
            peer_fragmentation: false,
            reassembly: [None, None],
            reassembled: None,
            peer_hashes: Vec::new(),
            pending_child: None,
            children: Vec::new(),
            peer_id: None,
            child_rekey: None,
            child_create: None,
            deleting_child: None,
            retiring: Vec::new(),
            outbound_later: Vec::new(),
            queued: VecDeque::new(),
            ike_rekey: None,
            rekey_at: None,
            delete_at: None,
            superseded: false,
            last_heard: now,
        }
    }

    /// Our SPI: the table's key.
    pub fn our_spi(&self) -> u64 {
        if self.initiator {
            self.spi_i
        } else {
            self.spi_r
        }
    }

    /// Whether a NAT was detected on either side.
    pub fn behind_nat(&self) -> bool {
        self.nat_local || self.nat_remote
    }

    /// The header of a message of ours.
    pub fn header(&self, exchange_type: ExchangeType, response: bool, message_id: u32) -> header::Repr {
        header::Repr {
            spi_i: self.spi_i,
            spi_r: self.spi_r,
            exchange_type,
            initiator: self.initiator,
            response,
            higher_version: false,
            other_flags: 0,
            minor_version: 0,
            message_id,
        }
    }

    /// A message with `payloads` inside an SK payload, sealed with our outbound key.
    pub fn seal(&self, hdr: &header::Repr, payloads: &[Payload]) -> Result<Vec<u8>, SealError> {
        let (inner, plain) = emit_chain(payloads).map_err(SealError::Wire)?;
        self.seal_chain(hdr, inner, &zeroize::Zeroizing::new(plain))
    }

    /// A message with `payloads` inside an SK payload, or, when `max_len` is given and
    /// the message would be longer, as SKF fragments of at most `max_len` bytes each
    /// (RFC 7383 §2.5: the inner payloads' bytes cut in order, each piece padded and
    /// sealed on its own, fragment 1 naming the first inner type).
    pub fn seal_fragmented(
        &self,
        hdr: &header::Repr,
        payloads: &[Payload],
        max_len: Option<usize>,
    ) -> Result<Vec<Vec<u8>>, SealError> {
        let (out, _) = self.sk.as_ref().ok_or(SealError::NoKeys)?;
        let (inner, plain) = emit_chain(payloads).map_err(SealError::Wire)?;
        let plain = zeroize::Zeroizing::new(plain);
        let overhead = HEADER_LEN + ike_wire::payload::HEADER_LEN;
        let max = match max_len {
            Some(m) if overhead + out.body_len(plain.len()) > m => m,
            _ => return Ok(vec![self.seal_chain(hdr, inner, &plain)?]),
        };
        let room = out.max_plaintext_len(max.saturating_sub(overhead + SKF_FIELDS_LEN));
        if room == 0 {
            return Err(SealError::FragmentTooSmall);
        }
        let pieces = ike_wire::fragment::split(&plain, room).map_err(SealError::Wire)?;
        let total = pieces.len() as u16;
        let mut sealed = Vec::with_capacity(pieces.len());
        for (i, piece) in pieces.into_iter().enumerate() {
            let number = i as u16 + 1;
            let inner = if number == 1 { inner } else { PayloadType::NONE };
            let frame = Frame::Skf { inner, number, total };
            let mut s = Sealing::new(hdr, &[], frame, out.body_len(piece.len())).map_err(SealError::Wire)?;
            let body = out.seal(s.aad(), piece).map_err(SealError::Crypto)?;
            s.body_mut().copy_from_slice(&body);
            sealed.push(s.into_bytes());
        }
        Ok(sealed)
    }

    fn seal_chain(&self, hdr: &header::Repr, inner: PayloadType, plain: &[u8]) -> Result<Vec<u8>, SealError> {
        let (out, _) = self.sk.as_ref().ok_or(SealError::NoKeys)?;
        let mut s = Sealing::new(hdr, &[], Frame::Sk { inner }, out.body_len(plain.len()))
            .map_err(SealError::Wire)?;
        let body = out.seal(s.aad(), plain).map_err(SealError::Crypto)?;
        s.body_mut().copy_from_slice(&body);
        Ok(s.into_bytes())
    }

    /// The inner payloads of a received SK message, after its ICV verified; for a
    /// fragment (SKF), those of the message the engine has just reassembled from it
    /// (each fragment authenticated on arrival), [`Drop::MissingPayload`] if none.
    pub fn open(&self, bytes: &[u8], msg: &Message) -> Result<Vec<Payload>, Drop> {
        if msg.fragment().is_some() {
            let h = msg.header;
            return match &self.reassembled {
                Some(r) if r.message_id == h.message_id && r.response == h.response => Ok(r.payloads.clone()),
                _ => Err(Drop::MissingPayload),
            };
        }
        let (_, inb) = self.sk.as_ref().ok_or(Drop::UnexpectedExchange)?;
        let sk = msg.encrypted().ok_or(Drop::MissingPayload)?;
        let aad_len = msg.aad_len().ok_or(Drop::MissingPayload)?;
        let plain = inb.open_message(bytes, aad_len).map_err(|_| Drop::Unauthenticated)?;
        let inner: PayloadType = sk.inner;
        parse_chain(inner, &plain).map_err(|_| Drop::Malformed)
    }
}

/// Why a message of ours could not be built.
#[derive(Debug)]
pub enum SealError {
    NoKeys,
    /// The fragment size leaves no room for any inner byte.
    FragmentTooSmall,
    Wire(ike_wire::Error),
    Crypto(crate::crypto::CryptoError),
}
