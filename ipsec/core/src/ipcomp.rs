//! The IPComp transform (RFC 3173) with DEFLATE (RFC 3174), over an ocf compression
//! session; sans-I/O: a packet in a `Vec`, the packet changed in place or a drop reason.
//!
//! ```text
//!  output   [ headers | payload ]                       payload < THRESHOLD ─▶ as is
//!              └─ ocf Compress(payload) ─▶ out room = payload - 1
//!                   Incompressible ─────────────────────────────────────────▶ as is
//!                   n bytes ─▶ [ headers | next hdr, 0, CPI | n bytes ]   ─▶ compressed
//!
//!  input    [ headers | next hdr, flags, CPI | stream ]
//!              ├─ shorter than the header ──────────────────────▶ Drop::IpCompTruncated
//!              ├─ CPI not the SA's ─────────────────────────────▶ Drop::IpCompBadCpi
//!              ├─ next header IPComp (nested) ──────────────────▶ Drop::IpCompNested
//!              └─ ocf Decompress(stream) ─▶ room = 65,535 - headers
//!                   OutputLimit ─────────────────────────────────▶ Drop::IpCompTooBig
//!                   BadCompressedData ───────────────────────────▶ Drop::IpCompCorrupt
//!                   n bytes ─▶ [ headers | n bytes ], next header returned
//! ```
//!
//! **Threshold.** RFC 3173 §2.2 leaves to the implementation when not to try; Linux uses
//! 90 bytes for DEFLATE, and this measurement agrees (`tools/deflatebench --threshold`,
//! libdeflate level 1, payloads cut from the repository's docs): 64-byte payloads came out
//! smaller by more than the 4-byte header 30% of the time and saved 1.8 bytes on average,
//! 80 bytes 65% / 4.5, 90 bytes 81% / 6.9, 128 bytes 100% / 18.8, each attempt costing
//! 5-7 µs. Under 90 bytes the attempt costs microseconds for a few bytes.
//!
//! **Limit.** A decompressed packet must still be an IP packet: the stream may produce at
//! most 65,535 bytes less the headers in front of it (RFC 3173 §3.3 leaves the checks to
//! the implementation). The room is the request's output buffer, made once per
//! [`Scratch`] and reused: a decompression bomb fills it and fails, nothing grows.
//!
//! **On the packet path** (`crate::ipcomp_path`): IPComp SAs in tunnel and transport mode,
//! alone or in a bundle (`crate::bundle`); the SPI field of an `ipcomp` SA is its CPI.
//!
//! **Requests.** Each direction runs one ocf request, blocking (`Session::run`): only CPU
//! drivers offer compression, and they finish it inside the call. A [`Scratch`] (one per
//! thread) keeps the request and its output buffer, so a packet allocates nothing but what
//! a decompressed packet's growth needs.

use std::mem;

use ocf::{Buffer, CompAlg, Error as OcfError, Framework, Op, Request, Session, SessionParams};

use crate::stats::Drop;
use ipsec_wire::{ipcomp, IpProtocol};

/// Payloads shorter than this are sent as they are (see the module docs).
pub const THRESHOLD: usize = 90;

/// The largest IP packet: what a decompressed packet, headers included, may reach.
pub const MAX_PACKET: usize = 65_535;

/// Why an IPComp SA cannot be made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IpCompError {
    /// The SPI field carries the CPI, which has 16 bits on the wire (RFC 3173 §2.2).
    CpiTooLarge(u32),
    /// ocf refused the compression session (no driver offers DEFLATE).
    Crypto(OcfError),
}

impl std::fmt::Display for IpCompError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            IpCompError::CpiTooLarge(spi) => write!(
                f,
                "IPComp CPI {spi:#x} does not fit the 16-bit CPI field (RFC 3173 §2.2): give an SPI of at most 0xffff"
            ),
            IpCompError::Crypto(e) => write!(f, "compression session: {e}"),
        }
    }
}

impl std::error::Error for IpCompError {}

/// The CPI an IPComp SA's SPI field names; an error if it does not fit 16 bits.
pub fn cpi_of(spi: u32) -> Result<u16, IpCompError> {
    u16::try_from(spi).map_err(|_| IpCompError::CpiTooLarge(spi))
}

/// The ocf session parameters of an IPComp SA (DEFLATE is the only algorithm setkey names).
pub fn session_params() -> SessionParams {
    SessionParams::compress(CompAlg::Deflate)
}

/// One IPComp SA's transform: its CPI and compression session.
pub struct IpComp {
    cpi: u16,
    session: Session,
    threshold: usize,
}

/// What [`IpComp::output`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sent {
    /// The payload became an IPComp header and `len` compressed bytes.
    Compressed { len: usize },
    /// The payload is shorter than the threshold: sent as it is.
    BelowThreshold,
    /// Compression would not have made it smaller: sent as it is (RFC 3173 §2.2).
    NotSmaller,
}

/// A thread's reusable request and output buffer (see the module docs).
#[derive(Default)]
pub struct Scratch {
    req: Option<Request>,
    out: Vec<u8>,
}

impl Scratch {
    /// A request for `op` on `packet`, output into the scratch buffer of `room` bytes from
    /// offset 0; the packet moves into the request (no copy).
    fn request(&mut self, op: Op, packet: Vec<u8>, payload: std::ops::Range<usize>, room: usize) -> Request {
        let mut out = mem::take(&mut self.out);
        out.resize(room, 0);
        let mut req = match self.req.take() {
            Some(mut r) => {
                r.reset(op, Buffer::Contiguous(packet));
                r
            }
            None => Request::new(op, packet),
        };
        req.payload = Some(payload);
        req.out = Some(Buffer::Contiguous(out));
        req
    }

    /// Takes the packet and the output buffer back out of a finished request.
    fn finish(&mut self, mut req: Request) -> (Vec<u8>, usize) {
        let n = req.result_len();
        let packet = contiguous(req.buf.take());
        self.out = req.out.take().map(contiguous).unwrap_or_default();
        self.req = Some(req);
        (packet, n)
    }
}

fn contiguous(b: Buffer) -> Vec<u8> {
    match b {
        Buffer::Contiguous(v) => v,
        other => other.to_vec(),
    }
}

impl IpComp {
    /// The transform of an SA whose SPI field is `spi` (the CPI), with a session on `fw`.
    pub fn new(fw: &Framework, spi: u32) -> Result<IpComp, IpCompError> {
        let cpi = cpi_of(spi)?;
        let session = fw.new_session(&session_params()).map_err(IpCompError::Crypto)?;
        Ok(IpComp { cpi, session, threshold: THRESHOLD })
    }

    /// The CPI on the wire.
    pub fn cpi(&self) -> u16 {
        self.cpi
    }

    /// The name of the ocf driver doing the compression.
    pub fn driver(&self) -> String {
        self.session.driver_name()
    }

    /// Compresses `packet[at..]`, whose protocol is `next`: on success the packet is
    /// `packet[..at]`, the IPComp header and the compressed bytes (the caller then sets the
    /// IP header's protocol to IPComp and fixes its lengths). Otherwise the packet is as it
    /// was and the answer says why. `Err` only if the driver failed.
    pub fn output(
        &self,
        scratch: &mut Scratch,
        packet: &mut Vec<u8>,
        at: usize,
        next: IpProtocol,
    ) -> Result<Sent, Drop> {
        compress(&self.session, self.cpi, self.threshold, scratch, packet, at, next)
    }

    /// Decompresses the IPComp packet at `packet[at..]`: on success the packet is
    /// `packet[..at]` and the decompressed payload, and the payload's protocol is returned
    /// (the caller sets it in the IP header and fixes the lengths). On a drop the packet
    /// is left as it came.
    pub fn input(&self, scratch: &mut Scratch, packet: &mut Vec<u8>, at: usize) -> Result<IpProtocol, Drop> {
        decompress(&self.session, self.cpi, scratch, packet, at)
    }
}

/// [`IpComp::output`] over an SA's `session` and `cpi`, trying from `threshold` bytes.
pub(crate) fn compress(
    session: &Session,
    cpi: u16,
    threshold: usize,
    scratch: &mut Scratch,
    packet: &mut Vec<u8>,
    at: usize,
    next: IpProtocol,
) -> Result<Sent, Drop> {
    let len = packet.len().saturating_sub(at);
    if len < threshold.max(ipcomp::HEADER_LEN + 2) {
        return Ok(Sent::BelowThreshold);
    }
    // Room for a result that, with the header, is smaller than the payload.
    let room = len - ipcomp::HEADER_LEN - 1;
    match run(session, scratch, Op::Compress, packet, at..at + len, room) {
        Ok(n) => {
            let body = at + ipcomp::HEADER_LEN;
            packet.truncate(body + n);
            packet[body..].copy_from_slice(&scratch.out[..n]);
            let header = ipcomp::Repr { next_header: next, cpi };
            header
                .emit(&mut ipcomp::Packet::new_unchecked(&mut packet[at..]))
                .map_err(|_| Drop::CryptoError)?;
            Ok(Sent::Compressed { len: n })
        }
        Err(OcfError::Incompressible { .. }) => Ok(Sent::NotSmaller),
        Err(_) => Err(Drop::CryptoError),
    }
}

/// [`IpComp::input`] over an SA's `session` and `cpi`.
pub(crate) fn decompress(
    session: &Session,
    cpi: u16,
    scratch: &mut Scratch,
    packet: &mut Vec<u8>,
    at: usize,
) -> Result<IpProtocol, Drop> {
    let rest = packet.get(at..).unwrap_or(&[]);
    let view = ipcomp::Packet::new_checked(rest).map_err(|_| Drop::IpCompTruncated)?;
    let repr = ipcomp::Repr::parse(&view).map_err(|_| Drop::IpCompTruncated)?;
    if repr.cpi != cpi {
        return Err(Drop::IpCompBadCpi);
    }
    if repr.next_header == IpProtocol::IPCOMP {
        return Err(Drop::IpCompNested);
    }
    let room = MAX_PACKET.saturating_sub(at);
    let stream = at + ipcomp::HEADER_LEN..packet.len();
    match run(session, scratch, Op::Decompress, packet, stream, room) {
        Ok(n) => {
            packet.truncate(at);
            packet.extend_from_slice(&scratch.out[..n]);
            Ok(repr.next_header)
        }
        Err(OcfError::OutputLimit { .. }) => Err(Drop::IpCompTooBig),
        Err(OcfError::BadCompressedData) => Err(Drop::IpCompCorrupt),
        Err(_) => Err(Drop::CryptoError),
    }
}

/// Runs `op` on `packet[payload]` into the scratch buffer (`room` bytes); the packet comes
/// back unchanged, the result's length or the error with it.
fn run(
    session: &Session,
    scratch: &mut Scratch,
    op: Op,
    packet: &mut Vec<u8>,
    payload: std::ops::Range<usize>,
    room: usize,
) -> Result<usize, OcfError> {
    let req = scratch.request(op, mem::take(packet), payload, room);
    let (outcome, req) = match session.run(req) {
        Ok(req) => (Ok(()), req),
        Err(f) => {
            let (e, req) = f.into_parts();
            (Err(e), req)
        }
    };
    let (p, n) = scratch.finish(req);
    *packet = p;
    outcome.map(|()| n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ipcomp(spi: u32) -> IpComp {
        let fw = Framework::new();
        ocf_soft::register(&fw).unwrap();
        IpComp::new(&fw, spi).unwrap()
    }

    fn text(len: usize) -> Vec<u8> {
        let words = ["the ", "packet ", "tunnel ", "gateway ", "of ", "and ", "IPComp ", "\n"];
        let mut x = 0x2545_f491u32;
        let mut v = Vec::new();
        while v.len() < len {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            v.extend_from_slice(words[(x % 8) as usize].as_bytes());
        }
        v.truncate(len);
        v
    }

    fn random(len: usize) -> Vec<u8> {
        let mut x = 0x9E37_79B9u32;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                x as u8
            })
            .collect()
    }

    const HEADERS: usize = 20;

    fn packet(payload: &[u8]) -> Vec<u8> {
        let mut p = vec![0x45; HEADERS];
        p.extend_from_slice(payload);
        p
    }

    #[test]
    fn compressible_payloads_round_trip_through_the_header() {
        let c = ipcomp(0x4321);
        let mut s = Scratch::default();
        for len in [THRESHOLD, 100, 576, 1400, 9000, MAX_PACKET - HEADERS] {
            let payload = text(len);
            let mut p = packet(&payload);
            let sent = c.output(&mut s, &mut p, HEADERS, IpProtocol::IPV4).unwrap();
            let Sent::Compressed { len: n } = sent else { panic!("{len}: {sent:?}") };
            assert_eq!(p.len(), HEADERS + ipcomp::HEADER_LEN + n);
            assert!(p.len() < HEADERS + len, "smaller with the header");
            assert_eq!(&p[HEADERS..HEADERS + 4], &[4, 0, 0x43, 0x21], "next header, flags 0, CPI");
            assert_eq!(&p[..HEADERS], &[0x45; HEADERS][..], "headers untouched");
            assert_eq!(c.input(&mut s, &mut p, HEADERS), Ok(IpProtocol::IPV4));
            assert_eq!(p, packet(&payload));
        }
    }

    #[test]
    fn short_and_incompressible_payloads_are_sent_as_they_are() {
        let c = ipcomp(0x300);
        let mut s = Scratch::default();
        for (payload, why) in [
            (text(THRESHOLD - 1), Sent::BelowThreshold),
            (Vec::new(), Sent::BelowThreshold),
            (random(1400), Sent::NotSmaller),
            (random(THRESHOLD), Sent::NotSmaller),
        ] {
            let mut p = packet(&payload);
            assert_eq!(c.output(&mut s, &mut p, HEADERS, IpProtocol::TCP), Ok(why));
            assert_eq!(p, packet(&payload), "unchanged");
        }
    }

    #[test]
    fn the_cpi_is_the_spi_and_fits_16_bits() {
        assert_eq!(cpi_of(0xffff), Ok(0xffff));
        assert_eq!(cpi_of(0x10000), Err(IpCompError::CpiTooLarge(0x10000)));
        let fw = Framework::new();
        ocf_soft::register(&fw).unwrap();
        let e = IpComp::new(&fw, 0x1_0000).err().unwrap();
        assert!(e.to_string().contains("16-bit"), "{e}");
        // A framework without a driver that compresses.
        let e = IpComp::new(&Framework::new(), 0x1000).err().unwrap();
        assert!(matches!(e, IpCompError::Crypto(_)), "{e}");
    }

    /// Every way an inbound IPComp packet is wrong is its own drop, and leaves the packet
    /// as it came.
    #[test]
    fn bad_inbound_packets_are_dropped_by_name() {
        let c = ipcomp(0x4321);
        let mut s = Scratch::default();
        let mut good = packet(&text(1400));
        c.output(&mut s, &mut good, HEADERS, IpProtocol::IPV6).unwrap();
        let bomb = {
            // 1 MiB of zeros, raw DEFLATE level 9 (about 1 KiB).
            let fw = Framework::new();
            ocf_soft::register(&fw).unwrap();
            let zeros = vec![0u8; 1 << 20];
            let mut comp = ocf::Request::new(Op::Compress, zeros).with_output(vec![0u8; 1 << 20]);
            comp = fw.new_session(&session_params()).unwrap().run(comp).unwrap();
            let stream = comp.result_payload();
            assert!(stream.len() < 2048, "{}", stream.len());
            let mut p = packet(&[4, 0, 0x43, 0x21]);
            p.extend_from_slice(&stream);
            p
        };
        let mut cases: Vec<(Vec<u8>, Drop)> = vec![
            (good[..HEADERS + 3].to_vec(), Drop::IpCompTruncated),
            (good[..HEADERS].to_vec(), Drop::IpCompTruncated),
            (bomb, Drop::IpCompTooBig),
            (good[..good.len() - 3].to_vec(), Drop::IpCompCorrupt),
            (packet(&[4, 0, 0x43, 0x21, 0x07, 0xff]), Drop::IpCompCorrupt),
        ];
        let mut other_cpi = good.clone();
        other_cpi[HEADERS + 3] = 0x22;
        cases.push((other_cpi, Drop::IpCompBadCpi));
        let mut nested = good.clone();
        nested[HEADERS] = IpProtocol::IPCOMP.0;
        cases.push((nested, Drop::IpCompNested));
        for (p, why) in cases {
            let mut q = p.clone();
            assert_eq!(c.input(&mut s, &mut q, HEADERS), Err(why));
            assert_eq!(q, p, "{why:?}: left as it came");
        }
        // The flags are ignored on receipt.
        let mut flagged = good.clone();
        flagged[HEADERS + 1] = 0xff;
        assert_eq!(c.input(&mut s, &mut flagged, HEADERS), Ok(IpProtocol::IPV6));
    }

    /// The decompression limit counts the headers in front: the packet stays an IP packet.
    #[test]
    fn a_payload_that_would_make_the_packet_too_big_is_dropped() {
        let c = ipcomp(0x4321);
        let mut s = Scratch::default();
        let payload = text(MAX_PACKET - HEADERS);
        let mut p = packet(&payload);
        c.output(&mut s, &mut p, HEADERS, IpProtocol::IPV4).unwrap();
        // Twenty more bytes of headers in front: the same stream no longer fits.
        let mut longer = vec![0x45; HEADERS];
        longer.extend_from_slice(&p);
        assert_eq!(c.input(&mut s, &mut longer, 2 * HEADERS), Err(Drop::IpCompTooBig));
        assert_eq!(c.input(&mut s, &mut p, HEADERS), Ok(IpProtocol::IPV4));
        assert_eq!(p.len(), MAX_PACKET);
    }
}
