//! The setkey(8) language: a KAME/FreeBSD configuration file parsed into control
//! [`Request`](crate::control::Request)s ([`parse`]), and a request printed back in the
//! same language ([`format_request`], used by `dump` and by round-trip tests).
//!
//! Existing setkey files should keep working, so the grammar is setkey's (FreeBSD
//! `sbin/setkey/parse.y` and `lib/libipsec/policy_parse.y`, the setkey(8) manual of FreeBSD and
//! of NetBSD's ipsec-tools); what this implementation cannot honour is refused with an error
//! that says so, never silently dropped.
//!
//! ```text
//! add [-46n] src[port] dst[port] proto spi [extensions] algorithms ;
//! update [-46n] src[port] dst[port] proto spi [extensions] algorithms ;
//! getspi [-46n] src dst proto [min spi max spi] ;
//! get | delete [-46n] src dst proto spi ;
//! migrate [-46n] src dst proto spi to src[port] dst[port] ;
//! deleteall [-46n] src dst proto ;
//! flush [proto] ;      dump [proto] ;
//! spdadd [-46n] src_range dst_range upperspec -P dir action ;
//! spddelete [-46n] src_range dst_range upperspec -P dir [action] ;
//! spdflush ;           spddump ;
//!
//! proto       esp | esp-udp | ah | ipcomp
//! spi         decimal or 0x hex, 256 and up (0–255 are reserved, RFC 4303 §2.1)
//! extensions  -m transport|tunnel|any   -r window   -u reqid   -f esn   -f seq-pad
//!             -lh seconds  -ls seconds  -bh bytes  -bs bytes
//! algorithms  esp, esp-udp: -E ealgo [key] [-A aalgo key]    ah: -A aalgo key
//!             ipcomp: -C deflate
//! key         0x followed by an even number of hex digits, or "a quoted string"
//! src_range   addr[/prefixlen][[port|any]]
//! upperspec   any | tcp | udp | icmp | icmp6 | ipv6-icmp | ip4 | gre | esp | ah | sctp | 0–254
//! dir         in | out | fwd
//! action      none | discard | ipsec rule...
//! rule        proto/mode/[src-dst]/[level]  (also proto/mode, proto/mode/, proto/mode/src-dst)
//! level       default | use | require | unique | unique:N (1 ≤ N ≤ 32767)
//! ```
//!
//! Statements end with `;` and may span lines; `#` starts a comment that runs to the end of
//! the line. An address, its prefix length and its port are written without spaces between
//! them, as in every setkey example.
//!
//! `migrate` is the key manager's too (PF_KEY's SADB_X_MIGRATE, `ip xfrm state migrate`,
//! which setkey does not offer): it moves an installed SA to new outer addresses of its
//! family and, for ESP in UDP, new ports (a port not given stays as it was), keeping its
//! keys, sequence number, replay window and counters (RFC 7296 §2.23: a peer behind a NAT
//! moved; RFC 4555). It is refused when another SA (or a larval SPI) already holds the new
//! addresses and SPI. Policies that name the old tunnel endpoints are not changed: the
//! key manager replaces them in the same request (`spddelete`, `spdadd`), which applies
//! whole or not at all.
//!
//! `getspi` and `update` are the key manager's (PF_KEY's SADB_GETSPI and SADB_UPDATE, which
//! FreeBSD's setkey does not offer as commands; [`crate::larval`]): `getspi` reserves an
//! unused SPI, in the range `min`/`max` as `ip xfrm state allocspi` writes it, and answers
//! with it; `update` is written as `add` and gives that larval SA its keys (or replaces an
//! installed SA with the same addresses, protocol and SPI).
//!
//! Where this parser differs from setkey, and why:
//! - `-r` counts packets (as Linux's PF_KEY does; FreeBSD's counts octets of bitmap), and an SA
//!   without `-r` gets [`DEFAULT_REPLAY_WINDOW`](crate::control::DEFAULT_REPLAY_WINDOW)
//!   rather than no replay protection. `-r 0` turns the check off; more than
//!   [`MAX_REPLAY_WINDOW`](crate::control::MAX_REPLAY_WINDOW) is an error.
//! - Host names are not resolved (the core does no I/O): addresses are numeric, so `-n` is
//!   implied, and `-4`/`-6` only check the family of the addresses given.
//! - ESP without authentication is refused: this implementation does not do encryption-only
//!   ESP (RFC 4303 §3.2 and RFC 8221 advise against it). `-E null` needs `-A`; an AEAD
//!   (`aes-gcm-16`, `chacha20-poly1305`) must not have one.
//! - `-f` takes `esn` and `seq-pad` (the RFC 4303 padding this implementation always sends and
//!   checks); `zero-pad`, `random-pad` and `nocyclic-seq` are errors that say why.
//! - The policy level `default` (the kernel's system-wide default in setkey) is `require`
//!   here: there is no sysctl to consult, and requiring protection is the safe reading.
//! - A lifetime of 0 means no limit (PF_KEY's meaning), so `-lh 0` is the same as no `-lh`.
//! - A selector port of 0 means any port (setkey's meaning), the same as `[any]`.
//! - An extension given twice is an error (setkey keeps the last one silently).
//! - AH SAs are parsed with `enc` [`EncAlg::Null`](crate::control::EncAlg::Null) and an
//!   empty `enc_key`, IPComp SAs also without `auth`; the databases refuse both, but a file
//!   using them is read correctly.
//! - Not supported, each with its own error: TCP-MD5 (`tcp`), `esp-old`/`ah-old`, ICMP
//!   type/code selectors (`icmp6 135,0`), ports on tunnel endpoints (ipsec-tools NAT-T),
//!   `me`/`any` endpoints, policy priorities, `spdadd tagged`.
//! - An IPComp SA's SPI is its CPI on the wire, with or without `-R` (KAME without `-R`
//!   sends the algorithm's well-known CPI, 2 for DEFLATE); it must fit 16 bits
//!   ([`crate::ipcomp::IpCompError::CpiTooLarge`]'s message).
//!
//! Errors ([`SetkeyError`]) give the 1-based line and column (in characters) of the offending
//! text and say what was expected there. Error messages never quote key material.
//!
//! One concern per file:
//!
//! ```text
//!  text ─▶ lex (tokens, positions) ─▶ parse (statements, checked) ─▶ [Request]
//!  Request ─▶ print ─▶ text (keys shown, or redacted for logs)
//! ```

use std::fmt;

mod lex;
mod parse;
mod print;

pub use parse::parse;
pub use print::{format_redacted, format_request};

/// A configuration error: where (1-based line and column, in characters) and what.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SetkeyError {
    pub line: usize,
    pub column: usize,
    /// What was expected and what was found, or why the text cannot be used.
    pub message: String,
}

impl fmt::Display for SetkeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}, column {}: {}", self.line, self.column, self.message)
    }
}

impl std::error::Error for SetkeyError {}
