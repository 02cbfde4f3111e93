//! The setkey parser: statements read token by token from the lexer (`lex`), each word
//! split where the grammar (in `setkey`'s documentation) says and checked as it is read,
//! into control [`Request`]s.
//!
//! ```text
//!  text ─▶ lex::Lexer ─ Tok ─▶ Parser::statement ─▶ Located<Request>
//!                    a word ─▶ Piece (address, prefix, port, rule) ─▶ values
//! ```

use std::net::IpAddr;

use zeroize::Zeroizing;

use crate::control::{
    Action, AuthAlg, Dir, EncAlg, KeyBytes, Level, Lifetime, Located, Migration, Mode, NatT, PolicySpec,
    Prefix, Proto, Request, Rule, SaId, SaSpec, Selector, Upper, DEFAULT_REPLAY_WINDOW, MAX_REPLAY_WINDOW,
};

use super::lex::{decimal, is_hex_prefixed, quote, Kind, Lexer, Piece, Tok};
use super::SetkeyError;

/// The UDP port of ESP in UDP (RFC 3948 §2.1), used for `esp-udp` ends without a port.
const NATT_PORT: u16 = 4500;
/// The largest `unique:N` the setkey manual allows.
const MAX_UNIQUE: u32 = 32767;

const COMMANDS: &str = "a command (add, update, getspi, get, delete, migrate, deleteall, flush, dump, \
     spdadd, spddelete, spdflush or spddump)";
const PROTOCOLS: &str = "a protocol (esp, esp-udp, ah or ipcomp)";
const EXTENSIONS: &str = "-m, -r, -u, -f, -lh, -ls, -bh, -bs";
const UPPERS: &str =
    "an upper-layer protocol (any, tcp, udp, icmp, icmp6, ipv6-icmp, ip4, gre, esp, ah, sctp or 0 to 254)";
const KEY: &str = "a key (0x followed by hex digits, or a \"quoted string\")";

/// Parses a whole configuration. The first error stops the parse: later statements may
/// depend on the one that failed.
pub fn parse(input: &str) -> Result<Vec<Located<Request>>, SetkeyError> {
    let mut p = Parser { lex: Lexer::new(input), peeked: None };
    let mut out = Vec::new();
    while let Some(r) = p.statement()? {
        out.push(r);
    }
    Ok(out)
}

/// What `-4` / `-6` allow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Family {
    Any,
    V4,
    V6,
}

struct Parser<'a> {
    lex: Lexer<'a>,
    peeked: Option<Tok<'a>>,
}

/// One end of an SA: the address (and where it was written) and the port, if any.
struct End<'a> {
    addr: IpAddr,
    at: Piece<'a>,
    port: Option<(u16, Piece<'a>)>,
}

type Auth = (AuthAlg, KeyBytes);

/// Extensions of `add`, before they are checked against each other.
#[derive(Default)]
struct Extensions<'a> {
    mode: Option<Mode>,
    replay: Option<u32>,
    reqid: Option<u32>,
    esn: bool,
    seen: Vec<&'a str>,
    /// The value and the position of `-lh`, `-ls`, `-bh`, `-bs`.
    lifetimes: [Option<(u64, Tok<'a>)>; 4],
}

const LIFETIME_FLAGS: [&str; 4] = ["-lh", "-ls", "-bh", "-bs"];

impl<'a> Parser<'a> {
    fn peek(&mut self) -> Result<Tok<'a>, SetkeyError> {
        match self.peeked {
            Some(t) => Ok(t),
            None => {
                let t = self.lex.next()?;
                self.peeked = Some(t);
                Ok(t)
            }
        }
    }

    fn next(&mut self) -> Result<Tok<'a>, SetkeyError> {
        match self.peeked.take() {
            Some(t) => Ok(t),
            None => self.lex.next(),
        }
    }

    /// The next token as a word, or an error saying `what` was expected.
    fn word(&mut self, what: &str) -> Result<(Tok<'a>, &'a str), SetkeyError> {
        let t = self.next()?;
        match t.word() {
            Some(w) => Ok((t, w)),
            None => Err(t.expected(what)),
        }
    }

    fn end(&mut self) -> Result<(), SetkeyError> {
        let t = self.next()?;
        if t.kind == Kind::Semi {
            Ok(())
        } else {
            Err(t.expected("`;`"))
        }
    }

    fn statement(&mut self) -> Result<Option<Located<Request>>, SetkeyError> {
        let t = self.next()?;
        let command = match t.kind {
            Kind::Eof => return Ok(None),
            Kind::Word(w) => w,
            _ => return Err(t.expected(COMMANDS)),
        };
        let item = match command {
            "add" => Request::AddSa(self.add()?),
            "update" => Request::UpdateSa(self.add()?),
            "getspi" => {
                let family = self.family()?;
                let (src, dst) = self.sa_addresses(family)?;
                let proto = self.proto()?;
                let range = self.spi_range()?;
                self.end()?;
                Request::GetSpi { src, dst, proto, range }
            }
            "get" | "delete" => {
                let family = self.family()?;
                let (src, dst) = self.sa_addresses(family)?;
                let proto = self.proto()?;
                let spi = self.spi()?;
                self.end()?;
                let id = SaId { src, dst, proto, spi };
                if command == "get" {
                    Request::GetSa(id)
                } else {
                    Request::DeleteSa(id)
                }
            }
            "migrate" => {
                let family = self.family()?;
                let (src, dst) = self.sa_addresses(family)?;
                let proto = self.proto()?;
                let spi = self.spi()?;
                let t = self.peek()?;
                if !t.is_word("to") {
                    return Err(t.expected("`to` and the SA's new source and destination"));
                }
                self.next()?;
                let (nsrc, ndst) = self.sa_ends(family)?;
                if nsrc.addr.is_ipv4() != src.is_ipv4() {
                    let what =
                        format!("an {} address: migrate keeps the SA's address family", family_name(src));
                    return Err(nsrc.at.expected(&what));
                }
                if !matches!(proto, Proto::Esp | Proto::EspUdp) {
                    if let Some((_, p)) = nsrc.port.or(ndst.port) {
                        return Err(p.err(format!(
                            "ports (UDP encapsulation) are only for esp and esp-udp, not {}",
                            proto.name()
                        )));
                    }
                }
                self.end()?;
                let to = Migration {
                    src: nsrc.addr,
                    dst: ndst.addr,
                    sport: nsrc.port.map(|p| p.0),
                    dport: ndst.port.map(|p| p.0),
                };
                Request::MigrateSa { id: SaId { src, dst, proto, spi }, to }
            }
            "deleteall" => {
                let family = self.family()?;
                let (src, dst) = self.sa_addresses(family)?;
                let proto = self.proto()?;
                self.end()?;
                Request::DeleteAllSa { src, dst, proto }
            }
            "flush" | "dump" => {
                let p = self.peek()?;
                let proto = match p.kind {
                    Kind::Semi => None,
                    _ => {
                        self.next()?;
                        let what = format!("`;` or {PROTOCOLS}");
                        Some(p.word().and_then(proto_name).ok_or_else(|| p.expected(&what))?)
                    }
                };
                self.end()?;
                if command == "flush" {
                    Request::FlushSa(proto)
                } else {
                    Request::DumpSa(proto)
                }
            }
            "spdadd" => {
                let (selector, dir) = self.selector_and_dir()?;
                let action = self.action()?;
                self.end()?;
                Request::AddPolicy(PolicySpec { selector, dir, action })
            }
            "spddelete" => {
                let (selector, dir) = self.selector_and_dir()?;
                // setkey sends the whole policy, but the kernel looks only at the selector
                // and the direction: an action after them is checked and then not needed.
                if self.peek()?.kind != Kind::Semi {
                    self.action()?;
                }
                self.end()?;
                Request::DeletePolicy { selector, dir }
            }
            "spdflush" => {
                self.end()?;
                Request::FlushPolicies
            }
            "spddump" => {
                self.end()?;
                Request::DumpPolicies
            }
            _ => return Err(t.expected(COMMANDS)),
        };
        Ok(Some(Located { line: t.line, column: t.col, item }))
    }

    /// getspi's optional `min SPI max SPI` (as `ip xfrm state allocspi` writes it); without
    /// it, [`crate::larval::SPI_RANGE`].
    fn spi_range(&mut self) -> Result<(u32, u32), SetkeyError> {
        if !self.peek()?.is_word("min") {
            return Ok(crate::larval::SPI_RANGE);
        }
        self.next()?;
        let min = self.spi()?;
        let t = self.peek()?;
        if !t.is_word("max") {
            return Err(t.expected("`max` and the highest SPI of the range"));
        }
        self.next()?;
        let at = self.peek()?;
        let max = self.spi()?;
        if max < min {
            return Err(at.err(format!("the range is empty: max {max:#x} is below min {min:#x}")));
        }
        Ok((min, max))
    }

    /// `-4`, `-6`, `-n`, in any number and combination (the last of `-4`/`-6` wins, as in
    /// setkey).
    fn family(&mut self) -> Result<Family, SetkeyError> {
        let mut family = Family::Any;
        loop {
            let t = self.peek()?;
            let Some(flags) = t.word().and_then(|w| w.strip_prefix('-')) else { break };
            if flags.is_empty() || !flags.chars().all(|c| matches!(c, '4' | '6' | 'n')) {
                break;
            }
            self.next()?;
            for c in flags.chars() {
                match c {
                    '4' => family = Family::V4,
                    '6' => family = Family::V6,
                    _ => {} // -n: addresses are always numeric here
                }
            }
        }
        Ok(family)
    }

    /// The source and destination of `get`, `delete`, `deleteall`: no ports.
    fn sa_addresses(&mut self, family: Family) -> Result<(IpAddr, IpAddr), SetkeyError> {
        let (src, dst) = self.sa_ends(family)?;
        if let Some((_, p)) = src.port.or(dst.port) {
            return Err(p.err(
                "a port is not part of an SA's identity: only `add` takes ports (for UDP encapsulation)",
            ));
        }
        Ok((src.addr, dst.addr))
    }

    /// The two ends of an SA, of one family.
    fn sa_ends(&mut self, family: Family) -> Result<(End<'a>, End<'a>), SetkeyError> {
        let src = self.end_point(family, "a source address")?;
        let dst = self.end_point(family, "a destination address")?;
        if src.addr.is_ipv4() != dst.addr.is_ipv4() {
            let what = format!("an {} destination address to match the source", family_name(src.addr));
            return Err(dst.at.expected(&what));
        }
        Ok((src, dst))
    }

    /// `addr` or `addr[port]` (an SA's end).
    fn end_point(&mut self, family: Family, what: &str) -> Result<End<'a>, SetkeyError> {
        let t = self.next()?;
        let Some(p) = t.piece() else { return Err(t.expected(what)) };
        let (at, port) = match p.split_once('[') {
            Some((addr, rest)) => (addr, Some(bracketed(rest)?)),
            None => (p, None),
        };
        let addr = address(at, family, what)?;
        let port = match port {
            Some(pp) => match decimal::<u16>(pp.text) {
                Some(n) if n != 0 => Some((n, pp)),
                _ => return Err(pp.expected("a UDP port from 1 to 65535")),
            },
            None => None,
        };
        Ok(End { addr, at, port })
    }

    fn proto(&mut self) -> Result<Proto, SetkeyError> {
        let (t, w) = self.word(PROTOCOLS)?;
        proto_name(w).ok_or_else(|| t.expected(PROTOCOLS))
    }

    fn spi(&mut self) -> Result<u32, SetkeyError> {
        const WHAT: &str = "an SPI (a decimal number, or hex after 0x)";
        let (t, w) = self.word(WHAT)?;
        let spi = match w.strip_prefix("0x").or_else(|| w.strip_prefix("0X")) {
            Some(hex) if !hex.is_empty() && hex.bytes().all(|b| b.is_ascii_hexdigit()) => {
                u32::from_str_radix(hex, 16).ok()
            }
            Some(_) => None,
            None => decimal(w),
        };
        match spi {
            Some(spi) if spi >= 256 => Ok(spi),
            Some(_) => Err(t.err(format!(
                "SPI {w} is reserved: SPIs 0 to 255 cannot be used (RFC 4303 §2.1); expected 256 or more"
            ))),
            None => Err(t.expected(&format!("{WHAT} that fits in 32 bits"))),
        }
    }

    fn add(&mut self) -> Result<SaSpec, SetkeyError> {
        let family = self.family()?;
        let (src, dst) = self.sa_ends(family)?;
        let proto = self.proto()?;
        let (sport, dport) = (src.port, dst.port);
        let natt = match proto {
            // esp-udp always has ports; esp has them when they are given (an end without one
            // uses the IANA port, as ESP in UDP always does).
            Proto::Esp | Proto::EspUdp => (proto == Proto::EspUdp || sport.is_some() || dport.is_some())
                .then(|| NatT {
                    sport: sport.map_or(NATT_PORT, |p| p.0),
                    dport: dport.map_or(NATT_PORT, |p| p.0),
                }),
            Proto::Ah | Proto::IpComp => {
                if let Some((_, p)) = sport.or(dport) {
                    return Err(p.err(format!(
                        "ports (UDP encapsulation) are only for esp and esp-udp, not {}",
                        proto.name()
                    )));
                }
                None
            }
        };
        let spi_at = self.peek()?;
        let spi = self.spi()?;
        if proto == Proto::IpComp {
            // The SPI is the CPI, 16 bits on the wire (RFC 3173 §2.2).
            crate::ipcomp::cpi_of(spi).map_err(|e| spi_at.err(e.to_string()))?;
        }
        let ext = self.extensions()?;
        let (enc, enc_key, auth) = self.algorithms(proto)?;
        // setkey's grammar has the extensions first; one after the algorithms is most likely
        // meant, so say where it belongs rather than just "expected `;`".
        let t = self.peek()?;
        if t.word().is_some_and(is_extension) {
            return Err(t.err(format!(
                "expected `;`, found {}: extensions ({EXTENSIONS}) come before the algorithms",
                t.describe()
            )));
        }
        self.end()?;

        let lifetime = |i: usize| ext.lifetimes[i].map(|(v, _)| v).filter(|&v| v != 0);
        let hard = Lifetime { seconds: lifetime(0), bytes: lifetime(2), packets: None };
        let soft = Lifetime { seconds: lifetime(1), bytes: lifetime(3), packets: None };
        for (h, s, what) in [(0, 1, "seconds"), (2, 3, "bytes")] {
            if let (Some(hv), Some(sv), Some((_, st))) = (lifetime(h), lifetime(s), ext.lifetimes[s]) {
                if sv > hv {
                    return Err(st.err(format!(
                        "the soft lifetime ({sv} {what}) is longer than the hard one ({hv} {what}); \
                         the soft limit must come first"
                    )));
                }
            }
        }
        Ok(SaSpec {
            src: src.addr,
            dst: dst.addr,
            proto,
            spi,
            mode: ext.mode.unwrap_or_default(),
            reqid: ext.reqid.unwrap_or(0),
            enc,
            enc_key,
            auth,
            replay_window: ext.replay.unwrap_or(DEFAULT_REPLAY_WINDOW),
            esn: ext.esn,
            natt,
            hard,
            soft,
        })
    }

    fn extensions(&mut self) -> Result<Extensions<'a>, SetkeyError> {
        let mut ext = Extensions::default();
        loop {
            let t = self.peek()?;
            let Some(flag) = t.word().filter(|w| is_extension(w)) else { break };
            self.next()?;
            let once = |ext: &mut Extensions<'a>, name: &'a str| {
                if ext.seen.contains(&name) {
                    Err(t.err(format!("`{name}` is given twice")))
                } else {
                    ext.seen.push(name);
                    Ok(())
                }
            };
            match flag {
                "-m" => {
                    once(&mut ext, "-m")?;
                    const WHAT: &str = "a mode (transport, tunnel or any)";
                    let (m, w) = self.word(WHAT)?;
                    ext.mode = Some(match w {
                        "transport" => Mode::Transport,
                        "tunnel" => Mode::Tunnel,
                        "any" => Mode::Any,
                        _ => return Err(m.expected(WHAT)),
                    });
                }
                "-r" => {
                    once(&mut ext, "-r")?;
                    let what = format!("a replay window in packets (0 to {MAX_REPLAY_WINDOW})");
                    let (r, w) = self.word(&what)?;
                    match decimal::<u64>(w) {
                        Some(n) if n <= u64::from(MAX_REPLAY_WINDOW) => ext.replay = Some(n as u32),
                        Some(n) => {
                            return Err(r.err(format!(
                                "replay window {n} is larger than the largest supported, \
                                 {MAX_REPLAY_WINDOW} packets"
                            )))
                        }
                        None => return Err(r.expected(&what)),
                    }
                }
                "-u" => {
                    once(&mut ext, "-u")?;
                    const WHAT: &str = "a reqid (a decimal number that fits in 32 bits)";
                    let (u, w) = self.word(WHAT)?;
                    ext.reqid = Some(decimal(w).ok_or_else(|| u.expected(WHAT))?);
                }
                "-f" => {
                    const WHAT: &str = "esn or seq-pad";
                    let (f, w) = self.word(WHAT)?;
                    match w {
                        "esn" => {
                            once(&mut ext, "-f esn")?;
                            ext.esn = true;
                        }
                        // RFC 4303 §2.4's padding, the only one this implementation sends.
                        "seq-pad" => once(&mut ext, "-f seq-pad")?,
                        "zero-pad" | "random-pad" => {
                            return Err(f.err(format!(
                                "-f {w} is not supported: ESP padding is always 1, 2, 3, … as RFC 4303 \
                                 §2.4 specifies (seq-pad), and received padding is checked against it"
                            )))
                        }
                        "nocyclic-seq" => {
                            return Err(f.err(
                                "-f nocyclic-seq is not supported: sequence numbers never cycle here \
                                 (an SA stops when its sequence numbers run out and must be re-keyed); \
                                 remove it",
                            ))
                        }
                        _ => return Err(f.expected(WHAT)),
                    }
                }
                _ => {
                    let Some(i) = LIFETIME_FLAGS.iter().position(|&l| l == flag) else { break };
                    once(&mut ext, LIFETIME_FLAGS[i])?;
                    let what = if i < 2 { "a lifetime in seconds" } else { "a lifetime in bytes" };
                    let (v, w) = self.word(what)?;
                    let n = decimal::<u64>(w).ok_or_else(|| v.expected(what))?;
                    ext.lifetimes[i] = Some((n, t));
                }
            }
        }
        Ok(ext)
    }

    /// The algorithms of `add`, checked against the protocol and each other.
    fn algorithms(&mut self, proto: Proto) -> Result<(EncAlg, KeyBytes, Option<Auth>), SetkeyError> {
        let t = self.next()?;
        match proto {
            Proto::Esp | Proto::EspUdp => {
                if !t.is_word("-E") {
                    let hint = if t.is_word("-A") {
                        ": ESP always names its encryption (-E null -A … to authenticate only)"
                    } else {
                        ""
                    };
                    return Err(t.err(format!(
                        "expected an extension ({EXTENSIONS}) or -E ealgo key, found {}{hint}",
                        t.describe()
                    )));
                }
                let (enc, enc_key) = self.enc()?;
                let a = self.peek()?;
                let auth = if a.is_word("-A") {
                    self.next()?;
                    if enc.is_aead() {
                        return Err(a.err(format!(
                            "{} authenticates by itself: remove -A (an AEAD takes no separate authentication)",
                            enc.name()
                        )));
                    }
                    Some(self.auth()?)
                } else {
                    None
                };
                if auth.is_none() && !enc.is_aead() {
                    let why = if enc == EncAlg::Null {
                        "null encryption needs -A aalgo key".to_string()
                    } else {
                        format!(
                            "ESP without authentication is not supported: {} needs -A aalgo key \
                             (or use an AEAD such as aes-gcm-16)",
                            enc.name()
                        )
                    };
                    return Err(a.err(format!("expected -A, found {}: {why}", a.describe())));
                }
                Ok((enc, enc_key, auth))
            }
            Proto::Ah => {
                if !t.is_word("-A") {
                    return Err(t.err(format!(
                        "expected an extension ({EXTENSIONS}) or -A aalgo key, found {}{}",
                        t.describe(),
                        if t.is_word("-E") { ": AH only authenticates, it takes -A and no -E" } else { "" }
                    )));
                }
                let auth = self.auth()?;
                Ok((EncAlg::Null, KeyBytes::default(), Some(auth)))
            }
            Proto::IpComp => {
                if !t.is_word("-C") {
                    return Err(t.expected(&format!("an extension ({EXTENSIONS}) or -C calgo")));
                }
                const WHAT: &str = "a compression algorithm (deflate)";
                let (c, w) = self.word(WHAT)?;
                if w != "deflate" {
                    return Err(c.expected(WHAT));
                }
                // `-R`: the SPI is the CPI on the wire — what this implementation always does.
                if self.peek()?.is_word("-R") {
                    self.next()?;
                }
                Ok((EncAlg::Null, KeyBytes::default(), None))
            }
        }
    }

    /// After `-E`: the algorithm and its key (none, or `""`, for null).
    fn enc(&mut self) -> Result<(EncAlg, KeyBytes), SetkeyError> {
        let names = EncAlg::ALL.map(EncAlg::name).join(", ");
        let what = format!("an encryption algorithm ({names})");
        let (t, w) = self.word(&what)?;
        let enc = EncAlg::from_name(w).ok_or_else(|| t.expected(&what))?;
        let k = self.peek()?;
        let key = if is_key(&k) {
            self.next()?;
            key(&k)?
        } else if enc == EncAlg::Null {
            KeyBytes::default()
        } else {
            return Err(k.expected_key(&format!("{KEY} for {}", enc.name())));
        };
        let len = key.as_bytes().len();
        if !enc.key_lens().contains(&len) {
            let message = if enc == EncAlg::Null {
                format!("null takes no key (write `-E null` or `-E null \"\"`), this one is {len} bytes")
            } else {
                format!("{} takes a {} key, this one is {len} bytes", enc.name(), byte_lens(enc.key_lens()))
            };
            return Err(k.err(message));
        }
        Ok((enc, key))
    }

    /// After `-A`: the algorithm and its key.
    fn auth(&mut self) -> Result<Auth, SetkeyError> {
        let names = AuthAlg::AH.map(AuthAlg::name).join(", ");
        let what = format!("an authentication algorithm ({names})");
        let (t, w) = self.word(&what)?;
        let auth = AuthAlg::from_name(w).ok_or_else(|| t.expected(&what))?;
        let k = self.next()?;
        if !is_key(&k) {
            return Err(k.expected_key(&format!("{KEY} for {}", auth.name())));
        }
        let key = key(&k)?;
        let len = key.as_bytes().len();
        if !auth.key_lens().contains(&len) {
            return Err(k.err(format!(
                "{} takes a {} key, this one is {len} bytes",
                auth.name(),
                byte_lens(auth.key_lens())
            )));
        }
        Ok((auth, key))
    }

    /// What `spdadd` and `spddelete` share: the selector and `-P dir`.
    fn selector_and_dir(&mut self) -> Result<(Selector, Dir), SetkeyError> {
        let family = self.family()?;
        let (src, sport, _) = self.range(family, "a source address range")?;
        let (dst, dport, dp) = self.range(family, "a destination address range")?;
        if src.addr.is_ipv4() != dst.addr.is_ipv4() {
            return Err(dp.expected(&format!("an {} destination to match the source", family_name(src.addr))));
        }
        let (ut, uw) = self.word(UPPERS)?;
        let upper = upper(uw).ok_or_else(|| ut.expected(UPPERS))?;
        let t = self.next()?;
        if !t.is_word("-P") {
            if matches!(upper, Upper::Icmp | Upper::Icmp6) && t.word().is_some_and(|w| w.contains(',')) {
                return Err(t.err("ICMP type and code selectors (`type,code`) are not supported"));
            }
            return Err(t.expected("-P and the policy"));
        }
        const DIR: &str = "a direction (in, out or fwd)";
        let (d, w) = self.word(DIR)?;
        let dir = match w {
            "in" => Dir::In,
            "out" => Dir::Out,
            "fwd" => Dir::Fwd,
            _ => return Err(d.expected(DIR)),
        };
        Ok((Selector { src, dst, sport, dport, upper }, dir))
    }

    /// `addr[/plen][[port|any]]`.
    fn range(&mut self, family: Family, what: &str) -> Result<(Prefix, Option<u16>, Piece<'a>), SetkeyError> {
        let t = self.next()?;
        let Some(p) = t.piece() else { return Err(t.expected(what)) };
        let (main, port) = match p.split_once('[') {
            Some((main, rest)) => (main, Some(bracketed(rest)?)),
            None => (p, None),
        };
        let (addr_p, plen) = match main.split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (main, None),
        };
        let addr = address(addr_p, family, what)?;
        let max: u8 = if addr.is_ipv4() { 32 } else { 128 };
        let len = match plen {
            None => max,
            Some(l) => match decimal::<u8>(l.text) {
                Some(n) if n <= max => n,
                _ => {
                    return Err(l.expected(&format!(
                        "a prefix length from 0 to {max} for an {} address",
                        family_name(addr)
                    )))
                }
            },
        };
        let port = match port {
            None => None,
            Some(pp) if pp.text == "any" => None,
            Some(pp) => match decimal::<u16>(pp.text) {
                // setkey writes "any" as port 0.
                Some(n) => Some(n).filter(|&n| n != 0),
                None => return Err(pp.expected("a port from 0 to 65535, or any")),
            },
        };
        Ok((Prefix { addr, len }, port, p))
    }

    fn action(&mut self) -> Result<Action, SetkeyError> {
        const WHAT: &str = "an action (none, discard or ipsec)";
        let (t, w) = self.word(WHAT)?;
        match w {
            "none" => Ok(Action::Bypass),
            "discard" => Ok(Action::Discard),
            "ipsec" => {
                let mut rules = Vec::new();
                while let Some(p) = self.peek()?.piece() {
                    self.next()?;
                    rules.push(rule(p)?);
                }
                if rules.is_empty() {
                    return Err(self.peek()?.expected("a rule (protocol/mode/src-dst/level)"));
                }
                Ok(Action::Protect(rules))
            }
            "prio" | "priority" => Err(t.err("policy priorities are not supported")),
            "bypass" | "entrust" => Err(
                t.err(format!("`{w}` (a socket policy) is not supported; expected none, discard or ipsec"))
            ),
            _ => Err(t.expected(WHAT)),
        }
    }
}

fn is_extension(w: &str) -> bool {
    matches!(w, "-m" | "-r" | "-u" | "-f") || LIFETIME_FLAGS.contains(&w)
}

fn proto_name(w: &str) -> Option<Proto> {
    Some(match w {
        "esp" => Proto::Esp,
        "esp-udp" => Proto::EspUdp,
        "ah" => Proto::Ah,
        "ipcomp" => Proto::IpComp,
        _ => return None,
    })
}

fn family_name(a: IpAddr) -> &'static str {
    if a.is_ipv4() {
        "IPv4"
    } else {
        "IPv6"
    }
}

/// The text after `[` up to its `]`, which must end the word.
fn bracketed(rest: Piece<'_>) -> Result<Piece<'_>, SetkeyError> {
    let Some((inside, after)) = rest.split_once(']') else {
        let end = Piece { text: "", line: rest.line, col: rest.col + rest.text.chars().count() };
        return Err(end.expected("`]` after the port"));
    };
    if !after.text.is_empty() {
        return Err(after.expected("nothing after `]`"));
    }
    Ok(inside)
}

/// A numeric address, of the family `-4`/`-6` ask for.
fn address(p: Piece<'_>, family: Family, what: &str) -> Result<IpAddr, SetkeyError> {
    if let Some((_, zone)) = p.split_once('%') {
        return Err(zone.err("scoped addresses (`%zone`) are not supported"));
    }
    let addr: IpAddr = match p.text.parse() {
        Ok(a) => a,
        Err(_) => {
            let hostname = p.text.chars().any(|c| c.is_ascii_alphabetic())
                && !p.text.contains(':')
                && p.text.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-'));
            return Err(if hostname {
                p.expected(&format!("{what} as a numeric address (host names are not resolved)"))
            } else {
                p.expected(&format!("{what} (an IPv4 or IPv6 address)"))
            });
        }
    };
    match (family, addr) {
        (Family::V4, IpAddr::V6(_)) => Err(p.expected(&format!("{what} of IPv4 (-4 was given)"))),
        (Family::V6, IpAddr::V4(_)) => Err(p.expected(&format!("{what} of IPv6 (-6 was given)"))),
        _ => Ok(addr),
    }
}

fn upper(w: &str) -> Option<Upper> {
    Some(match w {
        "any" => Upper::Any,
        "tcp" => Upper::Tcp,
        "udp" => Upper::Udp,
        "icmp" => Upper::Icmp,
        "icmp6" | "ipv6-icmp" => Upper::Icmp6,
        // A few more names of /etc/protocols that make sense in a policy.
        "ip4" | "ipencap" => Upper::Number(4),
        "gre" => Upper::Number(47),
        "esp" => Upper::Number(50),
        "ah" => Upper::Number(51),
        "sctp" => Upper::Number(132),
        // 255 is how PF_KEY writes "any": refused rather than read two ways.
        _ => Upper::Number(decimal::<u8>(w).filter(|&n| n != 255)?),
    })
}

/// One `protocol/mode/src-dst/level` rule (libipsec's forms, level and endpoints optional).
fn rule(p: Piece<'_>) -> Result<Rule, SetkeyError> {
    const PROTOS: &str = "a rule protocol (esp, ah or ipcomp)";
    const MODES: &str = "a mode (transport or tunnel)";
    let Some((proto_p, rest)) = p.split_once('/') else {
        return Err(p.expected("a rule protocol/mode/src-dst/level"));
    };
    let proto = match proto_p.text {
        "esp" => Proto::Esp,
        "ah" => Proto::Ah,
        "ipcomp" => Proto::IpComp,
        _ => return Err(proto_p.expected(PROTOS)),
    };
    let (mode_p, rest) = match rest.split_once('/') {
        Some((m, r)) => (m, Some(r)),
        None => (rest, None),
    };
    let mode = match mode_p.text {
        "transport" => Mode::Transport,
        "tunnel" => Mode::Tunnel,
        _ => return Err(mode_p.expected(MODES)),
    };
    let (ends_p, level_p) = match rest {
        Some(r) => match r.split_once('/') {
            Some((e, l)) => (Some(e), Some(l)),
            None => (Some(r), None),
        },
        None => (None, None),
    };
    let tunnel = match ends_p.filter(|e| !e.text.is_empty()) {
        None => None,
        Some(e) => {
            let Some((a, b)) = e.split_once('-') else {
                return Err(e.expected("tunnel endpoints src-dst"));
            };
            let ends = [a, b].map(|x| {
                if x.text.contains('[') {
                    Err(x.err("ports on tunnel endpoints (NAT-T in the policy) are not supported"))
                } else if matches!(x.text, "me" | "any") {
                    Err(x.err(format!("`{}` as a tunnel endpoint is not supported; give an address", x.text)))
                } else {
                    address(x, Family::Any, "a tunnel endpoint")
                }
            });
            let [src, dst] = ends;
            let (src, dst) = (src?, dst?);
            if src.is_ipv4() != dst.is_ipv4() {
                return Err(
                    b.expected(&format!("an {} tunnel endpoint to match the first", family_name(src)))
                );
            }
            Some((src, dst))
        }
    };
    match (mode, tunnel) {
        (Mode::Tunnel, None) => {
            let at = ends_p.unwrap_or(Piece { text: "", line: p.line, col: p.col + p.text.chars().count() });
            return Err(at.expected("tunnel endpoints src-dst (tunnel mode needs them)"));
        }
        (Mode::Transport, Some(_)) => {
            return Err(ends_p
                .unwrap_or(p)
                .err("endpoints are only for tunnel mode; write esp/transport//level"));
        }
        _ => {}
    }
    let level = match level_p {
        None => Level::Require,
        Some(l) => match l.text {
            // No system-wide default to consult: the safe reading of "default".
            "" | "default" | "require" => Level::Require,
            "use" => Level::Use,
            "unique" => Level::Unique(0),
            text => match text.strip_prefix("unique:").map(decimal::<u32>) {
                Some(Some(n)) if (1..=MAX_UNIQUE).contains(&n) => Level::Unique(n),
                Some(_) => {
                    return Err(l.expected(&format!("unique:N with N from 1 to {MAX_UNIQUE}")));
                }
                None => return Err(l.expected("a level (default, use, require, unique or unique:N)")),
            },
        },
    };
    Ok(Rule { proto, mode, tunnel, level })
}

fn is_key(t: &Tok<'_>) -> bool {
    match t.kind {
        Kind::Quoted(_) => true,
        Kind::Word(w) => is_hex_prefixed(w),
        _ => false,
    }
}

/// A key token's bytes, decoded straight into zeroizing memory.
fn key(t: &Tok<'_>) -> Result<KeyBytes, SetkeyError> {
    let hex = match t.kind {
        Kind::Quoted(s) => return Ok(KeyBytes::new(s.as_bytes())),
        Kind::Word(w) => w.get(2..).unwrap_or(""),
        _ => return Err(t.expected(KEY)),
    };
    if hex.is_empty() {
        return Err(t.err("expected hex digits after 0x, found nothing"));
    }
    if let Some((i, c)) = hex.chars().enumerate().find(|(_, c)| !c.is_ascii_hexdigit()) {
        return Err(SetkeyError {
            line: t.line,
            column: t.col + 2 + i,
            message: format!("expected a hex digit in the key, found {}", quote(&c.to_string())),
        });
    }
    if hex.len() % 2 != 0 {
        return Err(
            t.err(format!("a hex key is whole bytes, but it has an odd number ({}) of digits", hex.len()))
        );
    }
    let mut bytes = Zeroizing::new(Vec::with_capacity(hex.len() / 2));
    let nibble = |b: u8| (b as char).to_digit(16).unwrap_or(0) as u8;
    for pair in hex.as_bytes().chunks_exact(2) {
        bytes.push(nibble(pair[0]) << 4 | nibble(pair[1]));
    }
    Ok(KeyBytes(bytes))
}

/// "16-, 24- or 32-byte" for a message.
fn byte_lens(lens: &[usize]) -> String {
    match lens {
        [] => "0-byte".to_string(),
        [one] => format!("{one}-byte"),
        [rest @ .., last] => {
            let rest: Vec<String> = rest.iter().map(usize::to_string).collect();
            format!("{}- or {last}-byte", rest.join("-, "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_helpers() {
        assert_eq!(byte_lens(&[16, 24, 32]), "16-, 24- or 32-byte");
        assert_eq!(byte_lens(&[20, 28]), "20- or 28-byte");
        assert_eq!(byte_lens(&[24]), "24-byte");
    }
}
