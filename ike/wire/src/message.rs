//! A whole IKEv2 message: the IKE header and its payloads, each parsed into its `Repr`; and
//! the same for a payload chain alone (the plaintext inside an SK payload).
//!
//! ```text
//! datagram ──header::Repr::parse──▶ version, Length == datagram, ≥ 28 bytes
//!          ──payload::Walker──────▶ (type, critical, body) per payload, lengths adding up
//!          ──Payload::parse───────▶ a known type: its Repr (sa::Sa, ke::Ke, …)
//!                                   SK / SKF: the inner type and the encrypted body
//!                                   unknown, critical bit set: Error::UnsupportedCriticalPayload
//!                                   unknown, not critical: Payload::Unknown (the core skips it)
//! ```
//!
//! [`Message::to_bytes`] writes the header's Next Payload and Length and each generic
//! header's Next Payload and Payload Length from the payloads, so a `Repr` built by hand
//! needs none of them. The critical bit of a known payload is ignored on receipt and sent as
//! 0 (RFC 7296 §3.2); an unknown payload keeps its own.

use crate::auth::Auth;
use crate::cert::Cert;
use crate::cp::Cp;
use crate::delete::Delete;
use crate::encrypted::{Encrypted, Fragment, SKF_FIELDS_LEN};
use crate::error::{Error, Result};
use crate::header::{self, HEADER_LEN};
use crate::id::Id;
use crate::ids::{NotifyType, PayloadType};
use crate::ke::Ke;
use crate::nonce::Nonce;
use crate::notify::Notify;
use crate::opaque::{Eap, VendorId};
use crate::payload::{self, Body, RawPayload, Walker};
use crate::sa::Sa;
use crate::ts::Ts;

/// One payload, parsed.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Payload {
    /// Security Association.
    Sa(Sa),
    /// Key Exchange.
    Ke(Ke),
    /// Identification of the initiator.
    IdI(Id),
    /// Identification of the responder.
    IdR(Id),
    /// Certificate.
    Cert(Cert),
    /// Certificate Request.
    CertReq(Cert),
    /// Authentication.
    Auth(Auth),
    /// Nonce.
    Nonce(Nonce),
    /// Notify.
    Notify(Notify),
    /// Delete.
    Delete(Delete),
    /// Vendor ID.
    VendorId(VendorId),
    /// Traffic Selector of the initiator.
    TsI(Ts),
    /// Traffic Selector of the responder.
    TsR(Ts),
    /// Encrypted and Authenticated (last in its message).
    Sk(Encrypted),
    /// Encrypted Fragment (last in its message).
    Skf(Fragment),
    /// Configuration.
    Cp(Cp),
    /// Extensible Authentication.
    Eap(Eap),
    /// A payload of a type this codec does not know, without the critical bit (with it, the
    /// message is refused).
    Unknown(Unknown),
}

/// A payload of an unknown type, kept as it came.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Unknown {
    /// Its type.
    pub payload_type: PayloadType,
    /// Its critical bit (false when parsed: a critical unknown payload is an error).
    pub critical: bool,
    /// Its body.
    pub body: Vec<u8>,
}

impl Payload {
    /// The payload's type.
    pub fn payload_type(&self) -> PayloadType {
        match self {
            Payload::Sa(_) => PayloadType::SA,
            Payload::Ke(_) => PayloadType::KE,
            Payload::IdI(_) => PayloadType::IDI,
            Payload::IdR(_) => PayloadType::IDR,
            Payload::Cert(_) => PayloadType::CERT,
            Payload::CertReq(_) => PayloadType::CERTREQ,
            Payload::Auth(_) => PayloadType::AUTH,
            Payload::Nonce(_) => PayloadType::NONCE,
            Payload::Notify(_) => PayloadType::NOTIFY,
            Payload::Delete(_) => PayloadType::DELETE,
            Payload::VendorId(_) => PayloadType::VENDOR_ID,
            Payload::TsI(_) => PayloadType::TSI,
            Payload::TsR(_) => PayloadType::TSR,
            Payload::Sk(_) => PayloadType::SK,
            Payload::Skf(_) => PayloadType::SKF,
            Payload::Cp(_) => PayloadType::CP,
            Payload::Eap(_) => PayloadType::EAP,
            Payload::Unknown(u) => u.payload_type,
        }
    }

    /// Parses one payload the walker found.
    pub fn parse(raw: &RawPayload<'_>) -> Result<Payload> {
        let b = raw.body;
        Ok(match raw.payload_type {
            PayloadType::SA => Payload::Sa(Sa::parse(b)?),
            PayloadType::KE => Payload::Ke(Ke::parse(b)?),
            PayloadType::IDI => Payload::IdI(Id::parse(b)?),
            PayloadType::IDR => Payload::IdR(Id::parse(b)?),
            PayloadType::CERT => Payload::Cert(Cert::parse(b)?),
            PayloadType::CERTREQ => Payload::CertReq(Cert::parse(b)?),
            PayloadType::AUTH => Payload::Auth(Auth::parse(b)?),
            PayloadType::NONCE => Payload::Nonce(Nonce::parse(b)?),
            PayloadType::NOTIFY => Payload::Notify(Notify::parse(b)?),
            PayloadType::DELETE => Payload::Delete(Delete::parse(b)?),
            PayloadType::VENDOR_ID => Payload::VendorId(VendorId::parse(b)?),
            PayloadType::TSI => Payload::TsI(Ts::parse(b)?),
            PayloadType::TSR => Payload::TsR(Ts::parse(b)?),
            PayloadType::SK => Payload::Sk(Encrypted { inner: raw.next, body: b.to_vec() }),
            PayloadType::SKF => Payload::Skf(Fragment::parse(raw.next, b)?),
            PayloadType::CP => Payload::Cp(Cp::parse(b)?),
            PayloadType::EAP => Payload::Eap(Eap::parse(b)?),
            other if raw.critical => return Err(Error::UnsupportedCriticalPayload { payload: other }),
            other => Payload::Unknown(Unknown { payload_type: other, critical: false, body: b.to_vec() }),
        })
    }

    /// The body's length (without the generic header).
    pub fn body_len(&self) -> usize {
        match self {
            Payload::Sa(p) => p.buffer_len(),
            Payload::Ke(p) => p.buffer_len(),
            Payload::IdI(p) | Payload::IdR(p) => p.buffer_len(),
            Payload::Cert(p) | Payload::CertReq(p) => p.buffer_len(),
            Payload::Auth(p) => p.buffer_len(),
            Payload::Nonce(p) => p.buffer_len(),
            Payload::Notify(p) => p.buffer_len(),
            Payload::Delete(p) => p.buffer_len(),
            Payload::VendorId(p) => p.buffer_len(),
            Payload::TsI(p) | Payload::TsR(p) => p.buffer_len(),
            Payload::Sk(p) => p.body.len(),
            Payload::Skf(p) => SKF_FIELDS_LEN + p.body.len(),
            Payload::Cp(p) => p.buffer_len(),
            Payload::Eap(p) => p.buffer_len(),
            Payload::Unknown(p) => p.body.len(),
        }
    }

    /// The payload's length with its generic header.
    pub fn buffer_len(&self) -> usize {
        payload::HEADER_LEN + self.body_len()
    }

    fn emit_body(&self, buf: &mut [u8]) -> Result<()> {
        match self {
            Payload::Sa(p) => p.emit(buf),
            Payload::Ke(p) => p.emit(buf),
            Payload::IdI(p) | Payload::IdR(p) => p.emit(buf),
            Payload::Cert(p) | Payload::CertReq(p) => p.emit(buf),
            Payload::Auth(p) => p.emit(buf),
            Payload::Nonce(p) => p.emit(buf),
            Payload::Notify(p) => p.emit(buf),
            Payload::Delete(p) => p.emit(buf),
            Payload::VendorId(p) => p.emit(buf),
            Payload::TsI(p) | Payload::TsR(p) => p.emit(buf),
            Payload::Sk(p) => crate::bytes::Writer::new(buf, "SK payload").put(&p.body),
            Payload::Skf(p) => {
                crate::encrypted::check_numbers(p.number, p.total)?;
                let mut w = crate::bytes::Writer::new(buf, "SKF payload");
                w.u16(p.number)?;
                w.u16(p.total)?;
                w.put(&p.body)
            }
            Payload::Cp(p) => p.emit(buf),
            Payload::Eap(p) => p.emit(buf),
            Payload::Unknown(p) => crate::bytes::Writer::new(buf, "unknown payload").put(&p.body),
        }
    }

    /// The generic header's Next Payload for this payload followed by `next`: SK and SKF
    /// carry their inner type instead.
    fn next_field(&self, next: PayloadType) -> PayloadType {
        match self {
            Payload::Sk(p) => p.inner,
            Payload::Skf(p) => p.inner,
            _ => next,
        }
    }
}

/// Parses a payload chain whose first payload is of type `first`: the plaintext of an SK
/// payload after decryption (with the padding and Pad Length removed), or a message's
/// payloads. Lengths must add up exactly, as in a message.
pub fn parse_chain(first: PayloadType, chain: &[u8]) -> Result<Vec<Payload>> {
    Walker::new(chain, first, 0).map(|raw| Payload::parse(&raw?)).collect()
}

/// The length [`emit_chain`] writes for these payloads.
pub fn chain_len(payloads: &[Payload]) -> usize {
    payloads.iter().map(Payload::buffer_len).sum()
}

/// Writes a payload chain into the first [`chain_len`] bytes of `buf` and answers the first
/// payload's type (what the IKE header or the SK payload names; NONE for no payloads).
/// An SK or SKF payload anywhere but last is [`Error::EncryptedNotLast`].
pub fn emit_chain_into(payloads: &[Payload], buf: &mut [u8]) -> Result<PayloadType> {
    let need = chain_len(payloads);
    if buf.len() < need {
        return Err(Error::Truncated { what: "payload chain", needed: need, got: buf.len() });
    }
    let mut at = 0;
    for (i, p) in payloads.iter().enumerate() {
        let last = i + 1 == payloads.len();
        if !last && matches!(p, Payload::Sk(_) | Payload::Skf(_)) {
            return Err(Error::EncryptedNotLast);
        }
        let next = payloads.get(i + 1).map_or(PayloadType::NONE, Payload::payload_type);
        let len = p.buffer_len();
        let length = crate::bytes::len16("payload length", len)?;
        let critical = matches!(p, Payload::Unknown(u) if u.critical);
        let slot = &mut buf[at..at + len];
        payload::Packet::new_unchecked(&mut slot[..]).set_header(p.next_field(next), critical, length);
        p.emit_body(&mut slot[payload::HEADER_LEN..])?;
        at += len;
    }
    Ok(payloads.first().map_or(PayloadType::NONE, Payload::payload_type))
}

/// A payload chain as bytes, with its first payload's type: the plaintext to put in an SK
/// payload (before padding and encryption).
pub fn emit_chain(payloads: &[Payload]) -> Result<(PayloadType, Vec<u8>)> {
    let mut out = vec![0; chain_len(payloads)];
    let first = emit_chain_into(payloads, &mut out)?;
    Ok((first, out))
}

/// An IKEv2 message: header and payloads.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Message {
    /// The header (less Next Payload and Length, which follow from the payloads).
    pub header: header::Repr,
    /// The payloads in order; an SK or SKF payload is last.
    pub payloads: Vec<Payload>,
}

impl Message {
    /// Parses a datagram (the UDP payload, after the non-ESP marker on port 4500).
    pub fn parse(datagram: &[u8]) -> Result<Message> {
        let packet = header::Packet::new_checked(datagram)?;
        let header = header::Repr::parse(&packet)?;
        let payloads = Walker::new(&datagram[HEADER_LEN..], packet.next_payload(), HEADER_LEN)
            .map(|raw| Payload::parse(&raw?))
            .collect::<Result<Vec<_>>>()?;
        Ok(Message { header, payloads })
    }

    /// The message's length.
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN + chain_len(&self.payloads)
    }

    /// Writes the message into the first [`buffer_len`](Message::buffer_len) bytes of `buf`
    /// and answers that length.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let len = self.buffer_len();
        if buf.len() < len {
            return Err(Error::Truncated { what: "IKE message", needed: len, got: buf.len() });
        }
        let length = u32::try_from(len).map_err(|_| Error::TooLong {
            what: "IKE message",
            max: u32::MAX as usize,
            got: len,
        })?;
        let first = emit_chain_into(&self.payloads, &mut buf[HEADER_LEN..len])?;
        self.header.emit(&mut header::Packet::new_unchecked(&mut buf[..HEADER_LEN]), first, length)?;
        Ok(len)
    }

    /// The message as a new vector.
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let mut out = vec![0; self.buffer_len()];
        self.emit(&mut out)?;
        Ok(out)
    }

    /// When the last payload is SK or SKF: the length of what precedes its encrypted body
    /// (IKE header through the SK header, or through SKF's Fragment Number and Total
    /// Fragments), which is the AEAD's associated data (RFC 5282 §5.1, RFC 7383 §2.5). The
    /// body is the rest of the datagram: `datagram[aad_len..]` is IV || ciphertext || ICV,
    /// and an integrity algorithm's input is `datagram[..len - icv_len]`.
    pub fn aad_len(&self) -> Option<usize> {
        match self.payloads.last()? {
            Payload::Sk(sk) => Some(self.buffer_len() - sk.body.len()),
            Payload::Skf(skf) => Some(self.buffer_len() - skf.body.len()),
            _ => None,
        }
    }

    /// The SK payload, when the message has one.
    pub fn encrypted(&self) -> Option<&Encrypted> {
        self.payloads.iter().find_map(|p| match p {
            Payload::Sk(sk) => Some(sk),
            _ => None,
        })
    }

    /// The SKF payload, when the message is a fragment.
    pub fn fragment(&self) -> Option<&Fragment> {
        self.payloads.iter().find_map(|p| match p {
            Payload::Skf(f) => Some(f),
            _ => None,
        })
    }

    /// The Notify payloads.
    pub fn notifies(&self) -> impl Iterator<Item = &Notify> {
        notifies(&self.payloads)
    }

    /// The first Notify payload of this type.
    pub fn notify(&self, notify_type: NotifyType) -> Option<&Notify> {
        self.notifies().find(|n| n.notify_type == notify_type)
    }
}

/// The Notify payloads of a chain (a message's, or an SK payload's decrypted one).
pub fn notifies(payloads: &[Payload]) -> impl Iterator<Item = &Notify> {
    payloads.iter().filter_map(|p| match p {
        Payload::Notify(n) => Some(n),
        _ => None,
    })
}
