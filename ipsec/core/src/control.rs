//! The control protocol: every change to, and every question about, the security
//! databases, as typed messages.
//!
//! Fast IPsec's PF_KEY code was intertwined with its database, so that changing one broke
//! the other (the Fast IPsec paper's section 5, "Status and Future Work", asks for them to
//! be separated). Here the protocol is its own layer: the setkey parser ([`crate::setkey`])
//! turns a configuration file into [`Request`]s, the gateway's control socket carries the
//! same [`Request`]s, and the databases ([`crate::Ipsec::control`]) answer each with a
//! [`Response`](crate::db::Response). Neither side knows
//! the other's representation.

use std::fmt;
use std::net::IpAddr;

use subtle::{Choice, ConstantTimeEq};
use zeroize::Zeroizing;

/// An IPsec protocol. Only ESP is implemented; AH and IPComp are named so that a
/// configuration using them is refused with a clear error rather than misparsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Proto {
    Esp,
    /// ESP in UDP (RFC 3948): FreeBSD setkey's `esp-udp`.
    EspUdp,
    Ah,
    IpComp,
}

impl Proto {
    pub fn name(self) -> &'static str {
        match self {
            Proto::Esp => "esp",
            Proto::EspUdp => "esp-udp",
            Proto::Ah => "ah",
            Proto::IpComp => "ipcomp",
        }
    }
}

/// SA or policy mode (setkey `-m`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Mode {
    /// setkey's default for SAs: usable in either mode.
    #[default]
    Any,
    Transport,
    Tunnel,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Any => "any",
            Mode::Transport => "transport",
            Mode::Tunnel => "tunnel",
        }
    }
}

/// ESP encryption algorithms (setkey `-E`), with the RFC that defines each for ESP.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EncAlg {
    /// RFC 2410: no encryption (needs an authentication algorithm).
    Null,
    /// RFC 3602: AES-CBC, 16/24/32-byte key, explicit 16-byte IV.
    AesCbc,
    /// RFC 2451: 3DES-CBC, 24-byte key, explicit 8-byte IV.
    TdesCbc,
    /// RFC 4106: AES-GCM with a 16-byte ICV; key material is the AES key (16 or 32 bytes)
    /// followed by a 4-byte salt. setkey's `aes-gcm-16`.
    AesGcm16,
    /// RFC 7634: ChaCha20-Poly1305; key material is the 32-byte key and a 4-byte salt.
    ChaCha20Poly1305,
}

impl EncAlg {
    /// The setkey name.
    pub fn name(self) -> &'static str {
        match self {
            EncAlg::Null => "null",
            EncAlg::AesCbc => "aes-cbc",
            EncAlg::TdesCbc => "3des-cbc",
            EncAlg::AesGcm16 => "aes-gcm-16",
            EncAlg::ChaCha20Poly1305 => "chacha20-poly1305",
        }
    }

    /// Every algorithm, for parsers and listings.
    pub const ALL: [EncAlg; 5] =
        [EncAlg::Null, EncAlg::AesCbc, EncAlg::TdesCbc, EncAlg::AesGcm16, EncAlg::ChaCha20Poly1305];

    /// Looks up a setkey name (also accepts the common aliases `rijndael-cbc`, `des-ede3-cbc`,
    /// `aes-gcm`, `rfc4106-gcm-16`).
    pub fn from_name(name: &str) -> Option<EncAlg> {
        Some(match name {
            "null" => EncAlg::Null,
            "aes-cbc" | "rijndael-cbc" => EncAlg::AesCbc,
            "3des-cbc" | "des-ede3-cbc" => EncAlg::TdesCbc,
            "aes-gcm-16" | "aes-gcm" | "rfc4106-gcm-16" => EncAlg::AesGcm16,
            "chacha20-poly1305" => EncAlg::ChaCha20Poly1305,
            _ => return None,
        })
    }

    /// Whether the algorithm authenticates by itself (then no `-A` may be given).
    pub fn is_aead(self) -> bool {
        matches!(self, EncAlg::AesGcm16 | EncAlg::ChaCha20Poly1305)
    }

    /// Valid key material lengths in bytes (salt included for AEAD).
    pub fn key_lens(self) -> &'static [usize] {
        match self {
            EncAlg::Null => &[0],
            EncAlg::AesCbc => &[16, 24, 32],
            EncAlg::TdesCbc => &[24],
            EncAlg::AesGcm16 => &[20, 28, 36],
            EncAlg::ChaCha20Poly1305 => &[36],
        }
    }
}

/// Authentication algorithms (setkey `-A`): ESP's and AH's HMACs, and AH's AES-GMAC.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AuthAlg {
    /// RFC 2404: HMAC-SHA1-96, 20-byte key.
    HmacSha1,
    /// RFC 4868: HMAC-SHA-256-128, 32-byte key.
    HmacSha256,
    /// RFC 4868: HMAC-SHA-384-192, 48-byte key.
    HmacSha384,
    /// RFC 4868: HMAC-SHA-512-256, 64-byte key.
    HmacSha512,
    /// RFC 4543: AES-GMAC for AH, a 16-, 24- or 32-byte AES key and a 4-byte salt; an
    /// 8-byte IV in each packet and a 16-byte ICV. AH only: ESP's use of GMAC (RFC 4543
    /// §3, ENCR_NULL_AUTH_AES_GMAC) is an encryption algorithm, not this.
    AesGmac,
}

impl AuthAlg {
    pub fn name(self) -> &'static str {
        match self {
            AuthAlg::HmacSha1 => "hmac-sha1",
            AuthAlg::HmacSha256 => "hmac-sha2-256",
            AuthAlg::HmacSha384 => "hmac-sha2-384",
            AuthAlg::HmacSha512 => "hmac-sha2-512",
            AuthAlg::AesGmac => "aes-gmac",
        }
    }

    /// The HMACs: what ESP and AH both take.
    pub const ALL: [AuthAlg; 4] =
        [AuthAlg::HmacSha1, AuthAlg::HmacSha256, AuthAlg::HmacSha384, AuthAlg::HmacSha512];

    /// Every algorithm AH takes: the HMACs and AES-GMAC.
    pub const AH: [AuthAlg; 5] =
        [AuthAlg::HmacSha1, AuthAlg::HmacSha256, AuthAlg::HmacSha384, AuthAlg::HmacSha512, AuthAlg::AesGmac];

    pub fn from_name(name: &str) -> Option<AuthAlg> {
        AuthAlg::AH.into_iter().find(|a| a.name() == name)
    }

    /// The key length RFC 2404 / RFC 4868 require; AES-GMAC's shortest (AES-128 and salt).
    pub fn key_len(self) -> usize {
        self.key_lens()[0]
    }

    /// Every key length the algorithm takes, in bytes (AES-GMAC: AES key and 4-byte salt).
    pub fn key_lens(self) -> &'static [usize] {
        match self {
            AuthAlg::HmacSha1 => &[20],
            AuthAlg::HmacSha256 => &[32],
            AuthAlg::HmacSha384 => &[48],
            AuthAlg::HmacSha512 => &[64],
            AuthAlg::AesGmac => &[20, 28, 36],
        }
    }

    /// The truncated ICV length on the wire (AES-GMAC's tag, its IV not counted).
    pub fn icv_len(self) -> usize {
        match self {
            AuthAlg::HmacSha1 => 12,
            AuthAlg::HmacSha256 => 16,
            AuthAlg::HmacSha384 => 24,
            AuthAlg::HmacSha512 => 32,
            AuthAlg::AesGmac => 16,
        }
    }
}

/// Key bytes, wiped when dropped. They compare in constant time only
/// ([`ConstantTimeEq`]): there is no `PartialEq`, so a variable-time `==` on key bytes
/// cannot be written by accident (a type holding keys compares them with `ct_eq`, as
/// [`SaSpec`]'s `PartialEq` does).
///
/// ```
/// use ipsec_core::control::KeyBytes;
/// use subtle::ConstantTimeEq;
/// assert!(bool::from(KeyBytes::new(&[1; 16]).ct_eq(&KeyBytes::new(&[1; 16]))));
/// ```
///
/// ```compile_fail
/// use ipsec_core::control::KeyBytes;
/// assert!(KeyBytes::new(&[1; 16]) == KeyBytes::new(&[1; 16]));
/// ```
#[derive(Clone, Default)]
pub struct KeyBytes(pub Zeroizing<Vec<u8>>);

/// In time that depends on the lengths only (a length is not secret).
impl ConstantTimeEq for KeyBytes {
    fn ct_eq(&self, other: &KeyBytes) -> Choice {
        self.0.as_slice().ct_eq(other.0.as_slice())
    }
}

impl KeyBytes {
    pub fn new(bytes: &[u8]) -> KeyBytes {
        KeyBytes(Zeroizing::new(bytes.to_vec()))
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

/// Never prints key material.
impl fmt::Debug for KeyBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "KeyBytes({} bytes)", self.0.len())
    }
}

/// SA lifetime limits: whichever is reached first (`None`: no limit of that kind).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Lifetime {
    pub seconds: Option<u64>,
    pub bytes: Option<u64>,
    pub packets: Option<u64>,
}

/// Everything needed to install an SA (setkey `add`). Its `PartialEq` compares the keys in
/// constant time.
#[derive(Clone, Debug)]
pub struct SaSpec {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub proto: Proto,
    pub spi: u32,
    /// setkey `-m` (default any).
    pub mode: Mode,
    /// setkey `-u`: ties the SA to policies with `unique:N` (0: none).
    pub reqid: u32,
    pub enc: EncAlg,
    pub enc_key: KeyBytes,
    /// Required unless `enc` is an AEAD; not allowed with one.
    pub auth: Option<(AuthAlg, KeyBytes)>,
    /// Anti-replay window in packets (setkey `-r`); 0 turns replay checking off.
    /// Default 64; at most [`MAX_REPLAY_WINDOW`].
    pub replay_window: u32,
    /// 64-bit extended sequence numbers (RFC 4303 §2.2.1; setkey `-f esn`).
    pub esn: bool,
    /// UDP encapsulation ports (RFC 3948), from `esp-udp` or `src[port] dst[port]`.
    pub natt: Option<NatT>,
    /// setkey `-lh` / `-ls` (and `-bh` / `-bs` for bytes).
    pub hard: Lifetime,
    pub soft: Lifetime,
}

/// Field by field, the keys with `ct_eq` (every key compared, whatever the other fields
/// are); the pattern names every field, so a new one does not compile until it is
/// compared here.
impl PartialEq for SaSpec {
    fn eq(&self, o: &SaSpec) -> bool {
        let SaSpec {
            src,
            dst,
            proto,
            spi,
            mode,
            reqid,
            enc,
            enc_key,
            auth,
            replay_window,
            esn,
            natt,
            hard,
            soft,
        } = self;
        let keys = enc_key.ct_eq(&o.enc_key)
            & match (auth, &o.auth) {
                (None, None) => Choice::from(1),
                (Some((a, k)), Some((b, l))) => Choice::from(u8::from(a == b)) & k.ct_eq(l),
                _ => Choice::from(0),
            };
        bool::from(keys)
            && (*src, *dst, *proto, *spi, *mode, *reqid, *enc)
                == (o.src, o.dst, o.proto, o.spi, o.mode, o.reqid, o.enc)
            && (*replay_window, *esn, *natt, *hard, *soft) == (o.replay_window, o.esn, o.natt, o.hard, o.soft)
    }
}

impl Eq for SaSpec {}

/// The largest anti-replay window accepted, in packets.
pub const MAX_REPLAY_WINDOW: u32 = 4096;
/// The default anti-replay window, in packets.
pub const DEFAULT_REPLAY_WINDOW: u32 = 64;

/// UDP encapsulation: the UDP ports of the SA's outer header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct NatT {
    pub sport: u16,
    pub dport: u16,
}

/// Which SA: setkey `get` and `delete` name one by its addresses, protocol and SPI.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SaId {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub proto: Proto,
    pub spi: u32,
}

/// An address prefix (`addr/plen`; a plain address is a full-length prefix).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Prefix {
    pub addr: IpAddr,
    pub len: u8,
}

/// The upper-layer protocol a policy selects (setkey's `upperspec`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Upper {
    Any,
    Tcp,
    Udp,
    Icmp,
    Icmp6,
    /// Any other protocol number.
    Number(u8),
}

/// Policy direction (setkey `-P in|out|fwd`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dir {
    In,
    Out,
    Fwd,
}

impl Dir {
    pub fn name(self) -> &'static str {
        match self {
            Dir::In => "in",
            Dir::Out => "out",
            Dir::Fwd => "fwd",
        }
    }
}

/// What a policy selects: source and destination prefixes, ports (`None`: any, setkey
/// `[any]` or no brackets), the upper-layer protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Selector {
    pub src: Prefix,
    pub dst: Prefix,
    pub sport: Option<u16>,
    pub dport: Option<u16>,
    pub upper: Upper,
}

/// How strongly a policy asks for an SA (setkey's `level`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Level {
    /// Use an SA if there is one, else send in the clear.
    Use,
    /// An SA is required; without one the packet is dropped.
    Require,
    /// Required, and only the SA with this reqid (`unique:N`; 0: one made for this policy).
    Unique(u32),
}

/// One protection a policy requires (setkey `esp/tunnel/SRC-DST/require`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Rule {
    pub proto: Proto,
    pub mode: Mode,
    /// Tunnel endpoints (source, destination); `None` in transport mode.
    pub tunnel: Option<(IpAddr, IpAddr)>,
    pub level: Level,
}

/// What a policy does with the packets it selects.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// setkey `none`: pass in the clear.
    Bypass,
    /// setkey `discard`.
    Discard,
    /// setkey `ipsec`: protect with these rules (ESP, AH or IPComp), applied in order, the
    /// first innermost: more than one is an SA bundle (`crate::bundle`).
    Protect(Vec<Rule>),
}

/// A security policy (setkey `spdadd`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PolicySpec {
    pub selector: Selector,
    pub dir: Dir,
    pub action: Action,
}

/// A request to the databases.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// `add`: install an SA (an existing one with the same id is an error).
    AddSa(SaSpec),
    /// `get`: one SA's state.
    GetSa(SaId),
    /// `delete`.
    DeleteSa(SaId),
    /// `deleteall src dst proto`: every SA between two addresses.
    DeleteAllSa { src: IpAddr, dst: IpAddr, proto: Proto },
    /// `flush [proto]`: every SA (of the protocol).
    FlushSa(Option<Proto>),
    /// `dump [proto]`.
    DumpSa(Option<Proto>),
    /// `spdadd`.
    AddPolicy(PolicySpec),
    /// `spddelete selector -P dir`.
    DeletePolicy { selector: Selector, dir: Dir },
    /// `spdflush`.
    FlushPolicies,
    /// `spddump`.
    DumpPolicies,
    /// `getspi src dst proto [min A max B]` (RFC 2367 SADB_GETSPI): reserve an unused SPI
    /// in `[min, max]` as a larval SA ([`crate::larval`]).
    GetSpi { src: IpAddr, dst: IpAddr, proto: Proto, range: (u32, u32) },
    /// `update` (RFC 2367 SADB_UPDATE): give a larval SA its keys, or replace an installed
    /// SA with the same id.
    UpdateSa(SaSpec),
    /// `migrate src dst proto spi to src[port] dst[port]` (PF_KEY's SADB_X_MIGRATE, Linux's
    /// XFRM_MSG_MIGRATE): move an SA's outer addresses (and, ESP in UDP, its ports) in
    /// place, keeping its keys, sequence number, replay window and counters — a peer
    /// behind a NAT that moved (RFC 7296 §2.23), a MOBIKE address update (RFC 4555).
    MigrateSa { id: SaId, to: Migration },
}

/// Where `migrate` moves an SA: its new outer addresses (of the SA's family) and, for an
/// ESP-in-UDP SA, its new ports (`None`: the port stays).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Migration {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub sport: Option<u16>,
    pub dport: Option<u16>,
}

/// A request and where it came from (a configuration file's line and column), so an error
/// found when it is carried out can still point at the text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Located<T> {
    pub line: usize,
    pub column: usize,
    pub item: T,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> SaSpec {
        SaSpec {
            src: "10.0.0.1".parse().unwrap(),
            dst: "10.0.0.2".parse().unwrap(),
            proto: Proto::Esp,
            spi: 0x1001,
            mode: Mode::Tunnel,
            reqid: 0,
            enc: EncAlg::AesCbc,
            enc_key: KeyBytes::new(&[4; 16]),
            auth: Some((AuthAlg::HmacSha256, KeyBytes::new(&[5; 32]))),
            replay_window: DEFAULT_REPLAY_WINDOW,
            esn: false,
            natt: None,
            hard: Lifetime::default(),
            soft: Lifetime::default(),
        }
    }

    /// `SaSpec`'s hand-written `==`: equal with equal keys; a different key byte or length,
    /// an authentication key missing or of another algorithm, or another field, is not.
    #[test]
    fn sa_specs_compare_keys_and_every_field() {
        assert_eq!(spec(), spec());
        let mut last_byte = spec();
        last_byte.enc_key = KeyBytes::new(&[[4; 15].as_slice(), &[5]].concat());
        let shorter = SaSpec { enc_key: KeyBytes::new(&[4; 15]), ..spec() };
        let auth_key = SaSpec { auth: Some((AuthAlg::HmacSha256, KeyBytes::new(&[6; 32]))), ..spec() };
        let auth_alg = SaSpec { auth: Some((AuthAlg::HmacSha1, KeyBytes::new(&[5; 32]))), ..spec() };
        let no_auth = SaSpec { auth: None, ..spec() };
        let spi = SaSpec { spi: 0x1002, ..spec() };
        let lifetime = SaSpec { soft: Lifetime { packets: Some(1), ..Lifetime::default() }, ..spec() };
        for (what, other) in [
            ("last key byte", last_byte),
            ("key length", shorter),
            ("auth key", auth_key),
            ("auth alg", auth_alg),
            ("no auth", no_auth),
            ("spi", spi),
            ("lifetime", lifetime),
        ] {
            assert_ne!(spec(), other, "{what}");
            assert_ne!(other, spec(), "{what}");
        }
    }
}
