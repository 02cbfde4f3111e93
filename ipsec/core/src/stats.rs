//! Statistics: every reason a packet is dropped has its own counter, per SA and in total
//! (the per-error statistics of Leffler's "Fast IPsec: A High-Performance IPsec
//! Implementation", `ipsecstat`/`espstat`).

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

/// Why a packet was dropped. One counter each.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(usize)]
pub enum Drop {
    /// The IP header (or an extension header) is malformed or truncated.
    Malformed,
    /// The packet was larger than the gateway's read could take whole (the socket cut it
    /// short: MSG_TRUNC), so nothing of it can be trusted.
    Truncated,
    /// The packet is an IP fragment; ESP needs whole packets (reassemble first).
    Fragment,
    /// ESP (or UDP-encapsulated ESP) too short for its header, IV and ICV.
    EspTruncated,
    /// On the ESP-in-UDP port, a datagram that is neither ESP, a NAT-keepalive nor IKE
    /// (RFC 3948 §2): empty, one byte other than 0xFF, two or three bytes, the Non-ESP
    /// Marker without a whole IKE header; or, from a socket that carries only ESP, a
    /// packet of another protocol.
    NotEsp,
    /// An IKE message (behind the Non-ESP Marker) on the ESP-in-UDP port: there is no key
    /// exchange daemon to hand it to.
    Ike,
    /// No SA for the SPI, destination and protocol.
    UnknownSpi,
    /// ESP that arrived encapsulated otherwise than its SA says: directly over IP for an
    /// ESP-in-UDP SA, or in UDP for a plain ESP one (Linux counts the same as
    /// XfrmInStateMismatch).
    EncapMismatch,
    /// The sequence number was seen before.
    Replay,
    /// The sequence number is older than the anti-replay window.
    TooOld,
    /// A sequence number of 0 without ESN (never sent by a correct peer).
    BadSequence,
    /// The ICV did not verify (tampered, wrong key, or wrong ESN guess).
    AuthFailed,
    /// The ciphertext is not a whole number of cipher blocks.
    BadLength,
    /// Padding bytes are not 1, 2, 3, … or the pad length runs past the payload.
    BadPadding,
    /// The decapsulated packet is not what the SA's mode says (tunnel: not an IP packet of
    /// the right version; transport: unknown next header).
    BadInner,
    /// Tunnel mode: the outer header arrived marked CE (congestion experienced) but the
    /// inner packet is Not-ECT, so its transport cannot hear of the congestion; RFC 6040
    /// §4.2 says drop it (a router on the path would have dropped it rather than mark it).
    CeNotEct,
    /// Inbound: the packet is not allowed by policy (clear text where ESP is required, or
    /// through an SA other than the policy's). Outbound: a policy says discard.
    Policy,
    /// Outbound: no policy covers the packet and the default policy is discard
    /// ([`crate::Ipsec::set_default_policy`]; ipsecd: only protected traffic belongs in
    /// its TUN).
    NoPolicy,
    /// Outbound: policy requires ESP but no usable SA exists (and packets are not held for
    /// one: [`crate::acquire::AcquireLimits::packets`] 0, or the policy went meanwhile).
    NoSa,
    /// Outbound: waiting for an SA (ACQUIRE), the packets held for the policy and
    /// destination are already as many as [`crate::acquire::AcquireLimits::packets`].
    HoldFull,
    /// Outbound: held for an SA (ACQUIRE) that did not come within
    /// [`crate::acquire::AcquireLimits::timeout`].
    HoldTimeout,
    /// Outbound: no SA, and no room to hold the packet: as many ACQUIREs pending, or as many
    /// bytes held, as [`crate::acquire::AcquireLimits`] allows.
    AcquireTableFull,
    /// The SA's hard lifetime ran out; the SA is gone.
    Expired,
    /// The SA's sequence number space is used up; it must be re-keyed (no nonce reuse).
    SeqExhausted,
    /// The packet would exceed the largest IP packet after encapsulation.
    TooBig,
    /// Outbound: encapsulated, the packet would exceed the SA's path MTU, and it may not be
    /// fragmented (IPv4 with DF, IPv6 over 1280 bytes); its sender is sent an ICMP error
    /// ([`crate::pmtu`]).
    PathMtu,
    /// An ICMP path MTU error (frag-needed, Packet Too Big) with a bad checksum, or whose
    /// quote is too short for the IP header and ESP SPI of the packet it is about.
    IcmpMalformed,
    /// An ICMP path MTU error about an ESP packet that none of our SAs sent.
    IcmpNoSa,
    /// An ICMP path MTU error reporting less than the protocol's minimum (576 for IPv4,
    /// 1280 for IPv6; 0 from a router older than RFC 1191), or no less than the length of
    /// the packet it quotes, which would have fitted.
    IcmpBogusMtu,
    /// AH shorter than its 12 fixed bytes, or than its Payload Len says.
    AhTruncated,
    /// AH whose length does not hold its SA's IV and ICV, or over IPv6 is not a multiple
    /// of 8 bytes (RFC 4302 §2.2, §3.3.3.2.1).
    AhBadLength,
    /// A packet with AH whose ICV input cannot be made: a malformed IPv4 option or IPv6
    /// Hop-by-Hop / Destination option, or (sending) a Routing header whose arrival order
    /// cannot be predicted (`ipsec_wire::ah_icv::zero_mutable`).
    AhMalformed,
    /// The SPI names an SA of the other protocol: AH for an ESP packet, ESP for an AH one.
    WrongProtocol,
    /// The crypto driver failed the request for a reason other than authentication.
    CryptoError,
    /// IPComp (RFC 3173): shorter than its 4-byte header.
    IpCompTruncated,
    /// IPComp: the CPI is not the SA's.
    IpCompBadCpi,
    /// IPComp: the header's next header is IPComp again (compression of compressed data;
    /// refused rather than decompressed twice).
    IpCompNested,
    /// IPComp: decompressed, the packet would exceed the largest IP packet (65,535 bytes):
    /// a decompression bomb, or garbage. Stopped at the limit ([`crate::ipcomp`]).
    IpCompTooBig,
    /// IPComp: the compressed data is not a valid DEFLATE stream (corrupt or truncated).
    IpCompCorrupt,
    /// From a raw IPComp or IP-in-IP socket ([`crate::Via::IpComp`]), a packet that is
    /// neither IPComp nor IP-in-IP between the ends of an IPComp SA: another tunnel's, or
    /// clear traffic. Never delivered.
    NotIpComp,
    /// Inbound: a packet nests more SAs in a row than a bundle holds
    /// ([`crate::bundle::MAX_SAS`]).
    BundleTooDeep,
    /// Inbound: a packet decapsulated from a tunnel-mode SA that no inbound policy covers
    /// (RFC 4301 §5.2: its inner headers must match the SA's selectors; a tunnel SA's are
    /// the inbound policy it serves). Linux counts the same as XfrmInNoPols.
    NoInboundPolicy,
    /// Inbound: a transport-mode packet whose addresses are not its SA's ends (the SA's own
    /// selector; its sender holds the key but spoofed the outer source). Linux counts a
    /// packet outside its state's selector as XfrmInStateMismatch.
    SaSelector,
    /// Inbound: ESP in UDP sent to another UDP port than its SA names for this end (the
    /// SA's destination port; the source port may float, `crate::sad::Sad::float`).
    UdpPort,
    /// Outbound: a CBC packet's IV could not be drawn from ocf's random operation (no driver
    /// serves random bytes, or the source failed its health tests): never sent with a
    /// predictable IV (`crate::ivs`).
    NoRandom,
}

impl Drop {
    pub const COUNT: usize = Drop::NoRandom as usize + 1;

    pub const ALL: [Drop; Drop::COUNT] = [
        Drop::Malformed,
        Drop::Truncated,
        Drop::Fragment,
        Drop::EspTruncated,
        Drop::NotEsp,
        Drop::Ike,
        Drop::UnknownSpi,
        Drop::EncapMismatch,
        Drop::Replay,
        Drop::TooOld,
        Drop::BadSequence,
        Drop::AuthFailed,
        Drop::BadLength,
        Drop::BadPadding,
        Drop::BadInner,
        Drop::CeNotEct,
        Drop::Policy,
        Drop::NoPolicy,
        Drop::NoSa,
        Drop::HoldFull,
        Drop::HoldTimeout,
        Drop::AcquireTableFull,
        Drop::Expired,
        Drop::SeqExhausted,
        Drop::TooBig,
        Drop::PathMtu,
        Drop::IcmpMalformed,
        Drop::IcmpNoSa,
        Drop::IcmpBogusMtu,
        Drop::AhTruncated,
        Drop::AhBadLength,
        Drop::AhMalformed,
        Drop::WrongProtocol,
        Drop::CryptoError,
        Drop::IpCompTruncated,
        Drop::IpCompBadCpi,
        Drop::IpCompNested,
        Drop::IpCompTooBig,
        Drop::IpCompCorrupt,
        Drop::NotIpComp,
        Drop::BundleTooDeep,
        Drop::NoInboundPolicy,
        Drop::SaSelector,
        Drop::UdpPort,
        Drop::NoRandom,
    ];

    /// A stable snake_case name for statistics output.
    pub fn name(self) -> &'static str {
        match self {
            Drop::Malformed => "malformed",
            Drop::Truncated => "truncated",
            Drop::Fragment => "fragment",
            Drop::EspTruncated => "esp_truncated",
            Drop::NotEsp => "not_esp",
            Drop::Ike => "ike",
            Drop::UnknownSpi => "unknown_spi",
            Drop::EncapMismatch => "encap_mismatch",
            Drop::Replay => "replay",
            Drop::TooOld => "too_old",
            Drop::BadSequence => "bad_sequence",
            Drop::AuthFailed => "auth_failed",
            Drop::BadLength => "bad_length",
            Drop::BadPadding => "bad_padding",
            Drop::BadInner => "bad_inner",
            Drop::CeNotEct => "ce_not_ect",
            Drop::Policy => "policy",
            Drop::NoPolicy => "no_policy",
            Drop::NoSa => "no_sa",
            Drop::HoldFull => "acquire_hold_full",
            Drop::HoldTimeout => "acquire_timeout",
            Drop::AcquireTableFull => "acquire_table_full",
            Drop::Expired => "expired",
            Drop::SeqExhausted => "seq_exhausted",
            Drop::TooBig => "too_big",
            Drop::PathMtu => "too_big_for_path",
            Drop::IcmpMalformed => "icmp_malformed",
            Drop::IcmpNoSa => "icmp_no_sa",
            Drop::IcmpBogusMtu => "icmp_bogus_mtu",
            Drop::AhTruncated => "ah_truncated",
            Drop::AhBadLength => "ah_bad_length",
            Drop::AhMalformed => "ah_malformed",
            Drop::WrongProtocol => "wrong_protocol",
            Drop::CryptoError => "crypto_error",
            Drop::IpCompTruncated => "ipcomp_truncated",
            Drop::IpCompBadCpi => "ipcomp_bad_cpi",
            Drop::IpCompNested => "ipcomp_nested",
            Drop::IpCompTooBig => "ipcomp_too_big",
            Drop::IpCompCorrupt => "ipcomp_corrupt",
            Drop::NotIpComp => "not_ipcomp",
            Drop::BundleTooDeep => "bundle_too_deep",
            Drop::NoInboundPolicy => "no_inbound_policy",
            Drop::SaSelector => "sa_selector",
            Drop::UdpPort => "udp_port",
            Drop::NoRandom => "no_random",
        }
    }
}

impl fmt::Display for Drop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One `T` per [`Drop`] reason, indexed by `why as usize`. (A newtype because the standard
/// library's `Default` for arrays stops at 32 elements.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PerDrop<T>([T; Drop::COUNT]);

impl<T: Default> Default for PerDrop<T> {
    fn default() -> Self {
        PerDrop(std::array::from_fn(|_| T::default()))
    }
}

impl<T> std::ops::Deref for PerDrop<T> {
    type Target = [T; Drop::COUNT];
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl<T> std::ops::DerefMut for PerDrop<T> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

/// Live counters (relaxed atomics: each is exact, a snapshot is not one instant).
#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) packets_out: AtomicU64,
    pub(crate) bytes_out: AtomicU64,
    pub(crate) packets_in: AtomicU64,
    pub(crate) bytes_in: AtomicU64,
    pub(crate) keepalives: AtomicU64,
    pub(crate) peer_moved: AtomicU64,
    pub(crate) pmtu_learned: AtomicU64,
    pub(crate) icmp_sent: AtomicU64,
    pub(crate) icmp_rate_limited: AtomicU64,
    drops: PerDrop<AtomicU64>,
}

impl Counters {
    #[inline]
    pub(crate) fn drop(&self, why: Drop) {
        self.drops[why as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// A NAT-keepalive received (RFC 3948 §2.3): not an error, so not a drop.
    #[inline]
    pub(crate) fn keepalive(&self) {
        self.keepalives.fetch_add(1, Ordering::Relaxed);
    }

    /// An ESP-in-UDP peer moved to another UDP port (port floating, [`crate::sad::Sad::float`]).
    pub(crate) fn peer_moved(&self) {
        self.peer_moved.fetch_add(1, Ordering::Relaxed);
    }

    /// Path MTU events ([`crate::pmtu`]): not drops.
    pub(crate) fn count(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }

    #[inline]
    pub(crate) fn sent(&self, packets: u64, bytes: u64) {
        self.packets_out.fetch_add(packets, Ordering::Relaxed);
        self.bytes_out.fetch_add(bytes, Ordering::Relaxed);
    }

    #[inline]
    pub(crate) fn received(&self, packets: u64, bytes: u64) {
        self.packets_in.fetch_add(packets, Ordering::Relaxed);
        self.bytes_in.fetch_add(bytes, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> Stats {
        let mut drops = PerDrop::<u64>::default();
        for (d, c) in drops.iter_mut().zip(self.drops.iter()) {
            *d = c.load(Ordering::Relaxed);
        }
        Stats {
            packets_out: self.packets_out.load(Ordering::Relaxed),
            bytes_out: self.bytes_out.load(Ordering::Relaxed),
            packets_in: self.packets_in.load(Ordering::Relaxed),
            bytes_in: self.bytes_in.load(Ordering::Relaxed),
            keepalives: self.keepalives.load(Ordering::Relaxed),
            peer_moved: self.peer_moved.load(Ordering::Relaxed),
            pmtu_learned: self.pmtu_learned.load(Ordering::Relaxed),
            icmp_sent: self.icmp_sent.load(Ordering::Relaxed),
            icmp_rate_limited: self.icmp_rate_limited.load(Ordering::Relaxed),
            drops,
        }
    }
}

/// A snapshot of counters: packets and payload bytes protected (out) and accepted (in),
/// NAT-keepalives received, and drops by reason.
///
/// Keepalives are counted apart from the drops: a peer behind a NAT sends one every 20 s
/// or so (RFC 3948 §2.3) to keep its mapping open, doing what it should; counted as drops
/// they would read as an attack or a fault and turn every "no drops" check red.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub packets_out: u64,
    pub bytes_out: u64,
    pub packets_in: u64,
    pub bytes_in: u64,
    pub keepalives: u64,
    /// ESP-in-UDP peers that moved to another UDP port (port floating): not drops either.
    pub peer_moved: u64,
    /// Path MTUs lowered by an ICMP error from the path ([`crate::pmtu`]).
    pub pmtu_learned: u64,
    /// ICMP errors (frag-needed, Packet Too Big) sent to inner senders whose packets no
    /// longer fit the path, and those the rate limit held back.
    pub icmp_sent: u64,
    pub icmp_rate_limited: u64,
    drops: PerDrop<u64>,
}

impl Stats {
    pub fn drops(&self, why: Drop) -> u64 {
        self.drops[why as usize]
    }

    pub fn total_drops(&self) -> u64 {
        self.drops.iter().sum()
    }

    /// The reasons with a non-zero count.
    pub fn nonzero_drops(&self) -> impl Iterator<Item = (Drop, u64)> + '_ {
        Drop::ALL.into_iter().map(|d| (d, self.drops(d))).filter(|&(_, n)| n > 0)
    }
}

impl fmt::Display for Stats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "out {} packets {} bytes, in {} packets {} bytes",
            self.packets_out, self.bytes_out, self.packets_in, self.bytes_in
        )?;
        if self.keepalives > 0 {
            write!(f, ", keepalives {}", self.keepalives)?;
        }
        if self.peer_moved > 0 {
            write!(f, ", peer moved {}", self.peer_moved)?;
        }
        if self.pmtu_learned + self.icmp_sent + self.icmp_rate_limited > 0 {
            let (l, s, r) = (self.pmtu_learned, self.icmp_sent, self.icmp_rate_limited);
            write!(f, ", pmtu learned {l}, icmp sent {s} (rate-limited {r})")?;
        }
        for (d, n) in self.nonzero_drops() {
            write!(f, ", {d} {n}")?;
        }
        Ok(())
    }
}
