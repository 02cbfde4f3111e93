//! A CHILD_SA as ipsecd installs it: the core's install and remove operations written as
//! setkey(8) text (the grammar is `ipsec_core::setkey`'s module doc), one request — one
//! transaction in ipsecd — per CHILD_SA, so that a refusal changes nothing.
//!
//! ```text
//!  ChildInstall ─▶ install_text ─▶ add  L[lp] R[rp] esp|esp-udp SPI_out -m M -u REQID [-f esn]
//!                                       [-ls -lh -bs -bh] -E ealg 0xKEY [-A aalg 0xKEY] ;
//!                                  add  R[rp] L[lp] … SPI_in …  ;
//!                                  spdadd l r upper -P out ipsec esp/M/L-R/unique:REQID ;  ┐ each local ×
//!                                  spdadd r l upper -P in  ipsec esp/M/R-L/unique:REQID ;  ┘ remote prefix
//!                                  (Sas::Inbound / Sas::Outbound: only that add line)
//!  ChildRemove  ─▶ remove_text  ─▶ [delete L R proto SPI_out ;] delete R L proto SPI_in ;
//!                                  [spddelete l r upper -P out ; spddelete r l upper -P in ;]
//! ```
//!
//! Policies name the CHILD_SA's reqid (`unique:N`) rather than `require`, so that two
//! CHILD_SAs between the same gateways (two children of a connection, or the old and the
//! new SA of a rekey) each carry their own traffic. A rekeyed CHILD_SA keeps its reqid and
//! is installed without policies ([`ChildInstall::policies`] false): the policies stay, and
//! the old SAs are removed without theirs.
//!
//! Traffic selectors are ranges (RFC 7296 §3.13.1); setkey's are prefixes, so a range is
//! split into the fewest prefixes that cover it exactly. A port range that is neither one
//! port nor all of them has no setkey form and is refused ([`SetkeyTextError`]), as is an
//! algorithm ipsecd does not take: iked never installs something other than what was
//! negotiated.
//!
//! The text holds keys: it is built in a [`Zeroizing`] string whose capacity is reserved
//! first, so that no reallocation leaves a copy of a key behind, and it is never logged
//! ([`redacted`] names the SAs without keys for the log).

use std::fmt::Write as _;
use std::net::IpAddr;

use ike_core::config::{TrafficSelector, TsAddr};
use ike_core::crypto::{Encr, Integ, KeyBytes};
use ipsec_core::control::{Lifetime, Mode};
use zeroize::Zeroizing;

/// One direction of a CHILD_SA: its SPI (chosen by the receiving end) and keys.
pub struct SaKeys {
    pub spi: u32,
    /// The encryption key, with the AEAD's 4-byte salt after it (setkey's form).
    pub encr: KeyBytes,
    /// The HMAC key; empty with an AEAD.
    pub integ: KeyBytes,
}

/// UDP encapsulation (RFC 3948): the ports of the IKE SA once NAT was detected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NatPorts {
    pub local: u16,
    pub remote: u16,
}

/// A negotiated CHILD_SA, everything ipsecd needs to install both of its SAs and its
/// policies.
pub struct ChildInstall {
    /// Ties the SAs to their policies (`-u`, `unique:N`); 1 to [`MAX_REQID`].
    pub reqid: u32,
    pub mode: Mode,
    /// The IKE SA's addresses: the tunnel's outer ends.
    pub local: IpAddr,
    pub remote: IpAddr,
    pub natt: Option<NatPorts>,
    pub encr: Encr,
    pub integ: Option<Integ>,
    pub esn: bool,
    /// Peer → us: the SPI we chose.
    pub inbound: SaKeys,
    /// Us → peer: the SPI the peer chose.
    pub outbound: SaKeys,
    pub soft: Lifetime,
    pub hard: Lifetime,
    /// The negotiated (narrowed) selectors; `dynamic` is the IKE SA's own address.
    pub local_ts: Vec<TrafficSelector>,
    pub remote_ts: Vec<TrafficSelector>,
    /// Whether to add the policies too (false for a rekeyed CHILD_SA, whose policies stay).
    pub policies: bool,
    /// Which of its SAs to add now ([`Sas::Both`] but on the responder of a rekey).
    pub sas: Sas,
}

/// Which SAs of a CHILD_SA a request adds. The responder of a CHILD_SA rekey adds the
/// inbound SA first and the outbound one when the old CHILD_SA goes (see
/// `ike_core::io`): ipsecd sends on the newest outbound SA, which the peer can read only
/// once it has our response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sas {
    Both,
    Inbound,
    Outbound,
}

/// A CHILD_SA to remove: its two SAs and, unless a newer CHILD_SA replaced it, its
/// policies.
#[derive(Clone)]
pub struct ChildRemove {
    /// The reqid it was installed with (for iked's bookkeeping; setkey's `delete` does not
    /// name it).
    pub reqid: u32,
    pub local: IpAddr,
    pub remote: IpAddr,
    pub natt: bool,
    pub inbound_spi: u32,
    pub outbound_spi: u32,
    pub mode: Mode,
    pub local_ts: Vec<TrafficSelector>,
    pub remote_ts: Vec<TrafficSelector>,
    pub policies: bool,
    /// Whether its outbound SA was added (false while a rekey's responder holds it back,
    /// [`Sas::Inbound`]): the removal deletes only what is there.
    pub outbound: bool,
}

/// Why a CHILD_SA has no setkey form; each names the value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SetkeyTextError {
    /// A port range other than one port or all ports.
    PortRange(u16, u16),
    /// IP protocol 255 (reserved), which setkey's upperspec cannot name.
    Protocol(u8),
    /// A reqid of 0 (no tie between SAs and policies), or above [`MAX_REQID`].
    Reqid(u32),
    /// No pair of local and remote selectors of one address family.
    NoSelectors,
    /// Mode `any` (setkey's default) is not a negotiated mode.
    Mode,
    /// A key of the wrong length for its algorithm.
    KeyLength { what: &'static str, len: usize },
}

impl std::fmt::Display for SetkeyTextError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SetkeyTextError::PortRange(a, b) => {
                write!(f, "port range {a}-{b} has no setkey selector (one port, or all)")
            }
            SetkeyTextError::Protocol(p) => write!(f, "IP protocol {p} has no setkey upperspec"),
            SetkeyTextError::Reqid(r) => write!(f, "reqid {r}: a CHILD_SA's is 1 to {MAX_REQID}"),
            SetkeyTextError::NoSelectors => {
                f.write_str("no local and remote traffic selectors of the same address family")
            }
            SetkeyTextError::Mode => f.write_str("mode any is not a negotiated mode"),
            SetkeyTextError::KeyLength { what, len } => write!(f, "{what} key of {len} bytes"),
        }
    }
}

impl std::error::Error for SetkeyTextError {}

/// setkey's name of an ESP encryption algorithm (`ipsec_core::control::EncAlg::name`).
pub fn encr_name(e: Encr) -> &'static str {
    match e {
        Encr::AesGcm16 { .. } => "aes-gcm-16",
        Encr::ChaCha20Poly1305 => "chacha20-poly1305",
        Encr::AesCbc { .. } => "aes-cbc",
    }
}

/// setkey's name of an ESP integrity algorithm (`ipsec_core::control::AuthAlg::name`).
pub fn integ_name(i: Integ) -> &'static str {
    match i {
        Integ::HmacSha256_128 => "hmac-sha2-256",
        Integ::HmacSha384_192 => "hmac-sha2-384",
        Integ::HmacSha512_256 => "hmac-sha2-512",
    }
}

/// One setkey policy selector: prefixes, ports, upper protocol, as text.
struct Sel {
    src: (IpAddr, u8),
    dst: (IpAddr, u8),
    sport: Option<u16>,
    dport: Option<u16>,
    upper: u8,
}

/// The fewest prefixes that cover `start..=end` exactly (both of one family).
pub fn range_to_prefixes(start: IpAddr, end: IpAddr) -> Vec<(IpAddr, u8)> {
    let (bits, s, e) = match (start, end) {
        (IpAddr::V4(a), IpAddr::V4(b)) => (32u32, u128::from(u32::from(a)), u128::from(u32::from(b))),
        (IpAddr::V6(a), IpAddr::V6(b)) => (128, u128::from(a), u128::from(b)),
        _ => return Vec::new(),
    };
    let addr = |v: u128| -> IpAddr {
        if bits == 32 {
            IpAddr::from((v as u32).to_be_bytes())
        } else {
            IpAddr::from(v.to_be_bytes())
        }
    };
    // 2^k - 1: the last offset of a block of 2^k addresses.
    let span = |k: u32| if k >= 128 { u128::MAX } else { (1u128 << k) - 1 };
    let mut out = Vec::new();
    let mut cur = s;
    while cur <= e {
        // The largest block aligned at `cur` that stays within the range.
        let mut k = if cur == 0 { bits } else { cur.trailing_zeros().min(bits) };
        while k > 0 && span(k) > e - cur {
            k -= 1;
        }
        out.push((addr(cur), (bits - k) as u8));
        let last = cur + span(k);
        if last >= e {
            break;
        }
        cur = last + 1;
    }
    out
}

/// One end of a setkey selector: prefixes, its port (`None`: any) and protocol (0: any).
type End = (Vec<(IpAddr, u8)>, Option<u16>, u8);

/// A selector's end; `own` is the address `dynamic` stands for.
fn ts_parts(ts: &TrafficSelector, own: IpAddr) -> Result<End, SetkeyTextError> {
    let prefixes = match ts.addr {
        TsAddr::Dynamic => vec![(own, if own.is_ipv4() { 32 } else { 128 })],
        TsAddr::Range { start, end } => range_to_prefixes(start, end),
    };
    let port = match ts.ports {
        (0, 65535) => None,
        (a, b) if a == b => Some(a),
        (a, b) => return Err(SetkeyTextError::PortRange(a, b)),
    };
    if ts.proto == 255 {
        return Err(SetkeyTextError::Protocol(255));
    }
    Ok((prefixes, port, ts.proto))
}

/// Every (out) selector of a CHILD_SA: local × remote prefixes of one family.
fn selectors(
    local: IpAddr,
    remote: IpAddr,
    local_ts: &[TrafficSelector],
    remote_ts: &[TrafficSelector],
) -> Result<Vec<Sel>, SetkeyTextError> {
    let mut out = Vec::new();
    for l in local_ts {
        let (lp, lport, lproto) = ts_parts(l, local)?;
        for r in remote_ts {
            let (rp, rport, rproto) = ts_parts(r, remote)?;
            // The protocols must agree (0 is any): the narrower one applies.
            let upper = match (lproto, rproto) {
                (0, p) | (p, 0) => p,
                (a, b) if a == b => a,
                _ => continue,
            };
            for &src in &lp {
                for &dst in &rp {
                    if src.0.is_ipv4() == dst.0.is_ipv4() {
                        out.push(Sel { src, dst, sport: lport, dport: rport, upper });
                    }
                }
            }
        }
    }
    if out.is_empty() {
        return Err(SetkeyTextError::NoSelectors);
    }
    Ok(out)
}

fn upper_name(p: u8) -> String {
    match p {
        0 => "any".to_owned(),
        6 => "tcp".to_owned(),
        17 => "udp".to_owned(),
        1 => "icmp".to_owned(),
        58 => "icmp6".to_owned(),
        n => n.to_string(),
    }
}

fn write_sel(
    s: &mut String,
    src: (IpAddr, u8),
    sport: Option<u16>,
    dst: (IpAddr, u8),
    dport: Option<u16>,
    upper: u8,
) {
    let port = |p: Option<u16>| p.map_or_else(|| "[any]".to_owned(), |p| format!("[{p}]"));
    let _ = write!(
        s,
        "{}/{}{} {}/{}{} {}",
        src.0,
        src.1,
        port(sport),
        dst.0,
        dst.1,
        port(dport),
        upper_name(upper)
    );
}

fn mode_name(m: Mode) -> Result<&'static str, SetkeyTextError> {
    match m {
        Mode::Tunnel => Ok("tunnel"),
        Mode::Transport => Ok("transport"),
        Mode::Any => Err(SetkeyTextError::Mode),
    }
}

fn write_hex(s: &mut String, bytes: &[u8]) {
    s.push_str("0x");
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
}

/// The largest reqid a policy can name (setkey's `unique:N`, as ipsecd's parser and
/// KAME's take it): the engine allocates reqids from 1 to this.
pub const MAX_REQID: u32 = 32767;

/// Room for one `add` line, keys included (the longest is about 480 bytes).
const SA_ROOM: usize = 1024;

/// The setkey request that installs `c`: its SAs ([`ChildInstall::sas`]: both, or one),
/// then (with [`ChildInstall::policies`]) an out and an in policy per pair of selectors.
pub fn install_text(c: &ChildInstall) -> Result<Zeroizing<String>, SetkeyTextError> {
    if !(1..=MAX_REQID).contains(&c.reqid) {
        return Err(SetkeyTextError::Reqid(c.reqid));
    }
    let mode = mode_name(c.mode)?;
    for (what, k, want) in [
        ("encryption", &c.inbound.encr, c.encr.keymat_len()),
        ("encryption", &c.outbound.encr, c.encr.keymat_len()),
        ("integrity", &c.inbound.integ, c.integ.map_or(0, Integ::key_len)),
        ("integrity", &c.outbound.integ, c.integ.map_or(0, Integ::key_len)),
    ] {
        if k.len() != want {
            return Err(SetkeyTextError::KeyLength { what, len: k.len() });
        }
    }
    let sels = if c.policies { selectors(c.local, c.remote, &c.local_ts, &c.remote_ts)? } else { Vec::new() };
    // The policies hold no key: written first, on their own.
    let mut policies = String::new();
    for p in &sels {
        write_policy(&mut policies, "spdadd", p, true, mode, c.local, c.remote, c.reqid);
        write_policy(&mut policies, "spdadd", p, false, mode, c.local, c.remote, c.reqid);
    }
    // Room for everything, so that the string never moves (and never leaves a key behind).
    let room = 2 * SA_ROOM + policies.len();
    let mut s = Zeroizing::new(String::with_capacity(room));
    let proto = if c.natt.is_some() { "esp-udp" } else { "esp" };
    let ends = [
        (c.local, c.remote, c.natt.map(|n| (n.local, n.remote)), &c.outbound, c.sas != Sas::Inbound),
        (c.remote, c.local, c.natt.map(|n| (n.remote, n.local)), &c.inbound, c.sas != Sas::Outbound),
    ];
    for (src, dst, ports, keys, _) in ends.into_iter().filter(|e| e.4) {
        let (sp, dp) =
            ports.map_or((String::new(), String::new()), |(a, b)| (format!("[{a}]"), format!("[{b}]")));
        let _ = write!(s, "add {src}{sp} {dst}{dp} {proto} {:#x} -m {mode} -u {}", keys.spi, c.reqid);
        if c.esn {
            s.push_str(" -f esn");
        }
        for (flag, v) in
            [("-ls", c.soft.seconds), ("-lh", c.hard.seconds), ("-bs", c.soft.bytes), ("-bh", c.hard.bytes)]
        {
            if let Some(v) = v.filter(|&v| v != 0) {
                let _ = write!(s, " {flag} {v}");
            }
        }
        let _ = write!(s, " -E {} ", encr_name(c.encr));
        write_hex(&mut s, keys.encr.as_slice());
        if let Some(i) = c.integ {
            let _ = write!(s, " -A {} ", integ_name(i));
            write_hex(&mut s, keys.integ.as_slice());
        }
        s.push_str(" ;\n");
    }
    // The longest SA line (IPv6, every option, HMAC-SHA2-512) is about 480 bytes: checked
    // by the tests, in which this holds or panics.
    debug_assert!(s.len() <= 2 * SA_ROOM, "an SA line longer than SA_ROOM");
    s.push_str(&policies);
    debug_assert!(s.capacity() >= room && s.len() <= room);
    Ok(s)
}

#[allow(clippy::too_many_arguments)]
fn write_policy(
    s: &mut String,
    verb: &str,
    p: &Sel,
    out: bool,
    mode: &str,
    local: IpAddr,
    remote: IpAddr,
    reqid: u32,
) {
    let _ = write!(s, "{verb} ");
    if out {
        write_sel(s, p.src, p.sport, p.dst, p.dport, p.upper);
    } else {
        write_sel(s, p.dst, p.dport, p.src, p.sport, p.upper);
    }
    let _ = write!(s, " -P {}", if out { "out" } else { "in" });
    if verb == "spdadd" {
        let (a, b) = if out { (local, remote) } else { (remote, local) };
        let ends = if mode == "tunnel" { format!("{a}-{b}") } else { String::new() };
        let _ = write!(s, " ipsec esp/{mode}/{ends}/unique:{reqid}");
    }
    s.push_str(" ;\n");
}

/// A child's policies without SAs (`start_action = trap`): traffic they select makes
/// ipsecd send an ACQUIRE with their reqid, and iked negotiates the CHILD_SA, which is then
/// installed under that reqid without policies of its own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Trap {
    pub reqid: u32,
    pub mode: Mode,
    pub local: IpAddr,
    pub remote: IpAddr,
    /// The configured selectors (`dynamic`: the connection's own addresses).
    pub local_ts: Vec<TrafficSelector>,
    pub remote_ts: Vec<TrafficSelector>,
}

/// The setkey request that installs a trap: an out and an in policy per pair of
/// selectors, as [`install_text`] writes them.
pub fn trap_text(t: &Trap) -> Result<String, SetkeyTextError> {
    if !(1..=MAX_REQID).contains(&t.reqid) {
        return Err(SetkeyTextError::Reqid(t.reqid));
    }
    let mode = mode_name(t.mode)?;
    let mut s = String::new();
    for p in &selectors(t.local, t.remote, &t.local_ts, &t.remote_ts)? {
        write_policy(&mut s, "spdadd", p, true, mode, t.local, t.remote, t.reqid);
        write_policy(&mut s, "spdadd", p, false, mode, t.local, t.remote, t.reqid);
    }
    Ok(s)
}

/// The setkey request that removes a trap's policies.
pub fn untrap_text(t: &Trap) -> Result<String, SetkeyTextError> {
    let mode = mode_name(t.mode)?;
    let mut s = String::new();
    for p in &selectors(t.local, t.remote, &t.local_ts, &t.remote_ts)? {
        write_policy(&mut s, "spddelete", p, true, mode, t.local, t.remote, 0);
        write_policy(&mut s, "spddelete", p, false, mode, t.local, t.remote, 0);
    }
    Ok(s)
}

/// The setkey request that removes `c`: its SAs (the outbound one only if it was added,
/// [`ChildRemove::outbound`]) and (with [`ChildRemove::policies`]) its policies. It
/// holds no key.
pub fn remove_text(c: &ChildRemove) -> Result<String, SetkeyTextError> {
    let mode = mode_name(c.mode)?;
    let proto = if c.natt { "esp-udp" } else { "esp" };
    let mut s = String::new();
    if c.outbound {
        s = format!("delete {} {} {proto} {:#x} ;\n", c.local, c.remote, c.outbound_spi);
    }
    let _ = writeln!(s, "delete {} {} {proto} {:#x} ;", c.remote, c.local, c.inbound_spi);
    if c.policies {
        for p in &selectors(c.local, c.remote, &c.local_ts, &c.remote_ts)? {
            write_policy(&mut s, "spddelete", p, true, mode, c.local, c.remote, 0);
            write_policy(&mut s, "spddelete", p, false, mode, c.local, c.remote, 0);
        }
    }
    Ok(s)
}

/// A CHILD_SA whose peer moved behind its NAT: its two ESP-in-UDP SAs' outer addresses
/// and ports now (the addresses stay; the peer's port changed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChildMigrate {
    pub local: std::net::SocketAddr,
    pub remote: std::net::SocketAddr,
    pub inbound_spi: u32,
    pub outbound_spi: u32,
    /// Whether the outbound SA was added (see [`ChildRemove::outbound`]): only what is
    /// there moves.
    pub outbound: bool,
}

/// The setkey request that moves both SAs of `c` (the inbound one alone without
/// [`ChildMigrate::outbound`]) to its ports (`migrate`, ipsec-core's setkey grammar:
/// `migrate src dst proto spi to src[port] dst[port] ;`).
pub fn migrate_text(c: &ChildMigrate) -> String {
    let (l, r) = (c.local.ip(), c.remote.ip());
    let (lp, rp) = (c.local.port(), c.remote.port());
    let mut s = String::new();
    if c.outbound {
        let _ = writeln!(s, "migrate {l} {r} esp-udp {:#x} to {l}[{lp}] {r}[{rp}] ;", c.outbound_spi);
    }
    let _ = writeln!(s, "migrate {r} {l} esp-udp {:#x} to {r}[{rp}] {l}[{lp}] ;", c.inbound_spi);
    s
}

/// What the log says of an install: the SAs by addresses, SPIs and algorithms, no key.
pub fn redacted(c: &ChildInstall) -> String {
    format!(
        "{} {}→{} SPI {:#010x}, {}→{} SPI {:#010x}, reqid {}, {}{}{}{}{}",
        mode_name(c.mode).unwrap_or("any"),
        c.local,
        c.remote,
        c.outbound.spi,
        c.remote,
        c.local,
        c.inbound.spi,
        c.reqid,
        encr_name(c.encr),
        c.integ.map(|i| format!("/{}", integ_name(i))).unwrap_or_default(),
        if c.esn { ", esn" } else { "" },
        c.natt.map(|n| format!(", udp {}→{}", n.local, n.remote)).unwrap_or_default(),
        match c.sas {
            Sas::Both => "",
            Sas::Inbound => ", inbound only",
            Sas::Outbound => ", outbound only",
        },
    )
}

#[cfg(test)]
mod tests {
    //! What iked writes is read back by ipsecd's own setkey parser, and must give the SAs
    //! and policies meant, built here field by field.

    use ipsec_core::control::{
        Action, AuthAlg, Dir, EncAlg, KeyBytes as SpecKey, Level, NatT, PolicySpec, Prefix, Proto, Request,
        Rule, SaId, SaSpec, Selector, Upper, DEFAULT_REPLAY_WINDOW,
    };

    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn ts(s: &str) -> Vec<TrafficSelector> {
        TrafficSelector::parse_list(s).unwrap()
    }

    fn parsed(text: &str) -> Vec<Request> {
        ipsec_core::setkey::parse(text)
            .unwrap_or_else(|e| panic!("{e}"))
            .into_iter()
            .map(|l| l.item)
            .collect()
    }

    fn keys(spi: u32, encr: u8, len: usize, integ: usize) -> SaKeys {
        SaKeys { spi, encr: Zeroizing::new(vec![encr; len]), integ: Zeroizing::new(vec![encr ^ 0xff; integ]) }
    }

    /// AES-GCM-16-128 in a tunnel behind a NAT: esp-udp with the IKE SA's ports.
    fn gcm_tunnel() -> ChildInstall {
        ChildInstall {
            reqid: 7,
            mode: Mode::Tunnel,
            local: ip("192.0.2.1"),
            remote: ip("198.51.100.2"),
            natt: Some(NatPorts { local: 4500, remote: 31000 }),
            encr: Encr::AesGcm16 { key_len: 16 },
            integ: None,
            esn: false,
            inbound: keys(0x1001, 0x11, 20, 0),
            outbound: keys(0xc0ffee, 0x22, 20, 0),
            soft: Lifetime { seconds: Some(3240), bytes: None, packets: None },
            hard: Lifetime { seconds: Some(3600), bytes: None, packets: None },
            local_ts: ts("10.1.0.0/16"),
            remote_ts: ts("10.2.0.0/24"),
            policies: true,
            sas: Sas::Both,
        }
    }

    fn spec(src: &str, dst: &str, spi: u32, c: &ChildInstall, k: &SaKeys, natt: Option<NatT>) -> SaSpec {
        SaSpec {
            src: ip(src),
            dst: ip(dst),
            proto: if natt.is_some() { Proto::EspUdp } else { Proto::Esp },
            spi,
            mode: c.mode,
            reqid: c.reqid,
            enc: match c.encr {
                Encr::AesGcm16 { .. } => EncAlg::AesGcm16,
                Encr::AesCbc { .. } => EncAlg::AesCbc,
                Encr::ChaCha20Poly1305 => EncAlg::ChaCha20Poly1305,
            },
            enc_key: SpecKey::new(&k.encr),
            auth: c.integ.map(|_| (AuthAlg::HmacSha256, SpecKey::new(&k.integ))),
            replay_window: DEFAULT_REPLAY_WINDOW,
            esn: c.esn,
            natt,
            hard: c.hard,
            soft: c.soft,
        }
    }

    #[test]
    fn a_natted_gcm_tunnel_reads_back_as_meant() {
        let c = gcm_tunnel();
        let text = install_text(&c).unwrap();
        let sel = |src: (&str, u8), dst: (&str, u8)| Selector {
            src: Prefix { addr: ip(src.0), len: src.1 },
            dst: Prefix { addr: ip(dst.0), len: dst.1 },
            sport: None,
            dport: None,
            upper: Upper::Any,
        };
        let rule = |a: &str, b: &str| Rule {
            proto: Proto::Esp,
            mode: Mode::Tunnel,
            tunnel: Some((ip(a), ip(b))),
            level: Level::Unique(7),
        };
        let want = vec![
            Request::AddSa(spec(
                "192.0.2.1",
                "198.51.100.2",
                0xc0ffee,
                &c,
                &c.outbound,
                Some(NatT { sport: 4500, dport: 31000 }),
            )),
            Request::AddSa(spec(
                "198.51.100.2",
                "192.0.2.1",
                0x1001,
                &c,
                &c.inbound,
                Some(NatT { sport: 31000, dport: 4500 }),
            )),
            Request::AddPolicy(PolicySpec {
                selector: sel(("10.1.0.0", 16), ("10.2.0.0", 24)),
                dir: Dir::Out,
                action: Action::Protect(vec![rule("192.0.2.1", "198.51.100.2")]),
            }),
            Request::AddPolicy(PolicySpec {
                selector: sel(("10.2.0.0", 24), ("10.1.0.0", 16)),
                dir: Dir::In,
                action: Action::Protect(vec![rule("198.51.100.2", "192.0.2.1")]),
            }),
        ];
        assert_eq!(parsed(&text), want);

        // Removal names the same SAs and policies.
        let r = ChildRemove {
            reqid: c.reqid,
            local: c.local,
            remote: c.remote,
            natt: true,
            inbound_spi: 0x1001,
            outbound_spi: 0xc0ffee,
            mode: c.mode,
            local_ts: c.local_ts.clone(),
            remote_ts: c.remote_ts.clone(),
            policies: true,
            outbound: true,
        };
        let id = |src: &str, dst: &str, spi| SaId { src: ip(src), dst: ip(dst), proto: Proto::EspUdp, spi };
        assert_eq!(
            parsed(&remove_text(&r).unwrap()),
            vec![
                Request::DeleteSa(id("192.0.2.1", "198.51.100.2", 0xc0ffee)),
                Request::DeleteSa(id("198.51.100.2", "192.0.2.1", 0x1001)),
                Request::DeletePolicy { selector: sel(("10.1.0.0", 16), ("10.2.0.0", 24)), dir: Dir::Out },
                Request::DeletePolicy { selector: sel(("10.2.0.0", 24), ("10.1.0.0", 16)), dir: Dir::In },
            ]
        );
        // A rekeyed CHILD_SA: SAs only, the policies stay.
        let rekeyed = ChildInstall { policies: false, ..gcm_tunnel() };
        assert_eq!(parsed(&install_text(&rekeyed).unwrap()).len(), 2);
        assert_eq!(parsed(&remove_text(&ChildRemove { policies: false, ..r.clone() }).unwrap()).len(), 2);

        // A rekey's responder: the inbound SA first, the outbound one later, each the
        // same SA as above; the removal of one whose outbound SA never came deletes the
        // inbound SA alone.
        let inbound = ChildInstall { policies: false, sas: Sas::Inbound, ..gcm_tunnel() };
        assert_eq!(parsed(&install_text(&inbound).unwrap()), want[1..2]);
        let outbound = ChildInstall { policies: false, sas: Sas::Outbound, ..gcm_tunnel() };
        assert_eq!(parsed(&install_text(&outbound).unwrap()), want[0..1]);
        assert!(redacted(&inbound).ends_with("inbound only"), "{}", redacted(&inbound));
        let held = ChildRemove { policies: false, outbound: false, ..r };
        assert_eq!(
            parsed(&remove_text(&held).unwrap()),
            vec![Request::DeleteSa(id("198.51.100.2", "192.0.2.1", 0x1001))]
        );
    }

    /// AES-CBC with HMAC-SHA2-256 in transport mode, plain ESP, ESN, byte lifetimes, a
    /// host selector with a protocol and a port.
    #[test]
    fn cbc_hmac_transport_with_esn_reads_back_as_meant() {
        let c = ChildInstall {
            reqid: 3,
            mode: Mode::Transport,
            local: ip("2001:db8::1"),
            remote: ip("2001:db8::2"),
            natt: None,
            encr: Encr::AesCbc { key_len: 32 },
            integ: Some(Integ::HmacSha256_128),
            esn: true,
            inbound: keys(0x300, 0x33, 32, 32),
            outbound: keys(0x400, 0x44, 32, 32),
            soft: Lifetime { seconds: Some(900), bytes: Some(1 << 30), packets: None },
            hard: Lifetime { seconds: Some(1000), bytes: Some(2 << 30), packets: None },
            local_ts: ts("dynamic[tcp/443]"),
            remote_ts: ts("dynamic[tcp]"),
            policies: true,
            sas: Sas::Both,
        };
        let text = install_text(&c).unwrap();
        let rule = Rule { proto: Proto::Esp, mode: Mode::Transport, tunnel: None, level: Level::Unique(3) };
        let host = |a| Prefix { addr: ip(a), len: 128 };
        assert_eq!(
            parsed(&text),
            vec![
                Request::AddSa(spec("2001:db8::1", "2001:db8::2", 0x400, &c, &c.outbound, None)),
                Request::AddSa(spec("2001:db8::2", "2001:db8::1", 0x300, &c, &c.inbound, None)),
                Request::AddPolicy(PolicySpec {
                    selector: Selector {
                        src: host("2001:db8::1"),
                        dst: host("2001:db8::2"),
                        sport: Some(443),
                        dport: None,
                        upper: Upper::Tcp,
                    },
                    dir: Dir::Out,
                    action: Action::Protect(vec![rule]),
                }),
                Request::AddPolicy(PolicySpec {
                    selector: Selector {
                        src: host("2001:db8::2"),
                        dst: host("2001:db8::1"),
                        sport: None,
                        dport: Some(443),
                        upper: Upper::Tcp,
                    },
                    dir: Dir::In,
                    action: Action::Protect(vec![rule]),
                }),
            ]
        );
    }

    /// Every ESP suite of the issue is a key ipsecd's parser takes.
    #[test]
    fn every_suite_is_accepted_by_ipsecds_parser() {
        for (encr, integ) in [
            (Encr::AesGcm16 { key_len: 16 }, None),
            (Encr::AesGcm16 { key_len: 32 }, None),
            (Encr::ChaCha20Poly1305, None),
            (Encr::AesCbc { key_len: 16 }, Some(Integ::HmacSha256_128)),
            (Encr::AesCbc { key_len: 32 }, Some(Integ::HmacSha384_192)),
            (Encr::AesCbc { key_len: 32 }, Some(Integ::HmacSha512_256)),
        ] {
            let (e, a) = (encr.keymat_len(), integ.map_or(0, Integ::key_len));
            let c = ChildInstall {
                encr,
                integ,
                inbound: keys(0x1001, 1, e, a),
                outbound: keys(0x1002, 2, e, a),
                ..gcm_tunnel()
            };
            let reqs = parsed(&install_text(&c).unwrap());
            let Request::AddSa(sa) = &reqs[0] else { panic!("{reqs:?}") };
            assert_eq!(sa.enc.name(), encr_name(encr));
            assert_eq!(sa.auth.as_ref().map(|(a, _)| a.name()), integ.map(integ_name));
            assert_eq!(sa.enc_key.as_bytes(), &c.outbound.encr[..]);
        }
    }

    /// A trap's policies are the CHILD_SA's, and its SAs later come without policies.
    #[test]
    fn a_trap_is_the_policies_alone() {
        let c = gcm_tunnel();
        let t = Trap {
            reqid: c.reqid,
            mode: c.mode,
            local: c.local,
            remote: c.remote,
            local_ts: c.local_ts.clone(),
            remote_ts: c.remote_ts.clone(),
        };
        let all = parsed(&install_text(&c).unwrap());
        assert_eq!(parsed(&trap_text(&t).unwrap()), all[2..]);
        let sas = parsed(&install_text(&ChildInstall { policies: false, ..gcm_tunnel() }).unwrap());
        assert_eq!(sas, all[..2]);
        let untrap = parsed(&untrap_text(&t).unwrap());
        assert!(matches!(
            untrap.as_slice(),
            [Request::DeletePolicy { dir: Dir::Out, .. }, Request::DeletePolicy { dir: Dir::In, .. }]
        ));
        assert_eq!(trap_text(&Trap { reqid: 0, ..t }).unwrap_err(), SetkeyTextError::Reqid(0));
    }

    /// The longest SA lines fit the room reserved for them (the debug assertions in
    /// install_text would panic otherwise), with many selectors after them.
    #[test]
    fn the_longest_request_fits_its_room() {
        let c = ChildInstall {
            reqid: MAX_REQID,
            mode: Mode::Transport,
            local: ip("ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe"),
            remote: ip("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"),
            natt: Some(NatPorts { local: 65535, remote: 65534 }),
            encr: Encr::AesCbc { key_len: 32 },
            integ: Some(Integ::HmacSha512_256),
            esn: true,
            inbound: keys(u32::MAX, 1, 32, 64),
            outbound: keys(u32::MAX - 1, 2, 32, 64),
            soft: Lifetime { seconds: Some(u64::MAX - 1), bytes: Some(u64::MAX - 1), packets: None },
            hard: Lifetime { seconds: Some(u64::MAX), bytes: Some(u64::MAX), packets: None },
            local_ts: ts("::1-::ffff[udp/65535]"),
            remote_ts: ts("dynamic[udp/65534]"),
            policies: true,
            sas: Sas::Both,
        };
        let text = install_text(&c).unwrap();
        let sa_len: usize = text.lines().take(2).map(|l| l.len() + 1).sum();
        assert!(sa_len > 900 && sa_len <= 2 * SA_ROOM, "{sa_len}");
        assert_eq!(parsed(&text).len(), 2 + 2 * 16);
    }

    #[test]
    fn ranges_become_the_fewest_prefixes() {
        let p = |a: &str, b: &str| {
            range_to_prefixes(ip(a), ip(b)).into_iter().map(|(a, l)| format!("{a}/{l}")).collect::<Vec<_>>()
        };
        assert_eq!(p("10.0.0.0", "10.0.0.255"), ["10.0.0.0/24"]);
        assert_eq!(p("10.0.0.1", "10.0.0.6"), ["10.0.0.1/32", "10.0.0.2/31", "10.0.0.4/31", "10.0.0.6/32"]);
        assert_eq!(p("0.0.0.0", "255.255.255.255"), ["0.0.0.0/0"]);
        assert_eq!(p("::", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"), ["::/0"]);
        assert_eq!(p("2001:db8::", "2001:db8::1"), ["2001:db8::/127"]);
        assert_eq!(p("255.255.255.255", "255.255.255.255"), ["255.255.255.255/32"]);
        assert!(p("10.0.0.1", "::1").is_empty());
        // A range from the config parser: 10.0.0.1..10.0.0.9 (its form `a-b`).
        let t = ts("10.0.0.1-10.0.0.9");
        let c = ChildInstall { local_ts: t, ..gcm_tunnel() };
        let n = parsed(&install_text(&c).unwrap()).len();
        assert_eq!(n, 2 + 2 * 4, "10.0.0.1/32, .2/31, .4/30, .8/31: four prefixes, two policies each");
    }

    #[test]
    fn what_setkey_cannot_say_is_refused() {
        let c = ChildInstall { local_ts: ts("10.1.0.0/16[tcp/1000-2000]"), ..gcm_tunnel() };
        assert_eq!(install_text(&c).unwrap_err(), SetkeyTextError::PortRange(1000, 2000));
        let c = ChildInstall { reqid: 0, ..gcm_tunnel() };
        assert_eq!(install_text(&c).unwrap_err(), SetkeyTextError::Reqid(0));
        let c = ChildInstall { reqid: MAX_REQID + 1, ..gcm_tunnel() };
        assert_eq!(install_text(&c).unwrap_err(), SetkeyTextError::Reqid(32768));
        let c = ChildInstall { remote_ts: ts("2001:db8::/64"), ..gcm_tunnel() };
        assert_eq!(install_text(&c).unwrap_err(), SetkeyTextError::NoSelectors);
        let c = ChildInstall { inbound: keys(0x1001, 1, 16, 0), ..gcm_tunnel() };
        assert_eq!(install_text(&c).unwrap_err(), SetkeyTextError::KeyLength { what: "encryption", len: 16 });
    }

    /// The log line names the SAs and never a key byte.
    #[test]
    fn the_log_line_holds_no_key() {
        let c = gcm_tunnel();
        let line = redacted(&c);
        assert_eq!(
            line,
            "tunnel 192.0.2.1→198.51.100.2 SPI 0x00c0ffee, 198.51.100.2→192.0.2.1 SPI 0x00001001, reqid 7, \
             aes-gcm-16, udp 4500→31000"
        );
        assert!(install_text(&c).unwrap().contains(&"22".repeat(20)), "the request itself has the key");
    }
}
