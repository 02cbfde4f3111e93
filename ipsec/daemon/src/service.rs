//! What the daemon does with configuration: control requests from the socket and the
//! config file at start-up, through the Fast IPsec core's one typed control protocol
//! (`ipsec_core::control`), reached from setkey text. The file's re-reading on SIGHUP is
//! [`crate::config`]'s; what `ipsecctl stats` and the metrics show is [`crate::metrics`]'s;
//! the routes the policies call for are [`crate::routing`]'s.

use std::fmt::Write as _;

use ipsec_core::changes::Change;
use ipsec_core::control::{Located, Request, SaId};
use ipsec_core::db::{Response, SaInfo};
use ipsec_core::setkey;
use ipsec_core::Ipsec;

use crate::ctl::Reply;

/// Parses setkey text; the error names the line and column (`FILE:LINE:COLUMN: …` when
/// `origin` is a file name).
pub fn parse(origin: &str, text: &str) -> Result<Vec<Located<Request>>, String> {
    setkey::parse(text).map_err(|e| format!("{origin}:{}:{}: {}", e.line, e.column, e.message))
}

/// Whether SAs that a reply prints (`get`, `dump`) show their keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Keys {
    /// As setkey(8) prints them: statements that install the SAs again (`ipsecctl --keys`).
    Shown,
    /// Each key as `(key not shown)` (`ipsecctl -D`): for output that ends up in terminals,
    /// logs and bug reports.
    Hidden,
}

/// [`apply_setkey_keys`] with the keys shown, as setkey(8) prints them (the config file, and
/// the tests that read a dump back).
pub fn apply_setkey(core: &Ipsec, origin: &str, text: &str) -> Reply {
    apply_setkey_keys(core, origin, text, Keys::Shown)
}

/// Carries out setkey text as one transaction: parsed whole first (a malformed request
/// changes nothing), then applied in order; if the databases refuse one, nothing changes
/// (its line is named). The reply holds what `get`, `dump` and `spddump` print, the SAs
/// with or without their keys as `keys` says.
///
/// Errors show a statement without its keys ([`setkey::format_redacted`]): they are logged.
pub fn apply_setkey_keys(core: &Ipsec, origin: &str, text: &str, keys: Keys) -> Reply {
    apply_setkey_noting(core, origin, text, keys).map(|(out, _)| out)
}

/// [`apply_setkey_keys`], returning also what the transaction changed (for the warnings
/// and routes that follow the databases change by change).
pub fn apply_setkey_noting(
    core: &Ipsec,
    origin: &str,
    text: &str,
    keys: Keys,
) -> Result<(String, Vec<Change>), String> {
    let reqs = parse(origin, text)?;
    core.transact_noting(|t| {
        let mut out = String::new();
        for r in &reqs {
            match t.apply(&r.item) {
                Ok(resp) => print_response(&mut out, &resp, keys, core),
                Err(e) => {
                    return Err(format!(
                        "{origin}:{}:{}: {}: {e} (nothing was changed)",
                        r.line,
                        r.column,
                        setkey::format_redacted(&r.item)
                    ))
                }
            }
        }
        Ok(out)
    })
}

/// What a response prints: SAs and policies as setkey statements that would install them
/// again (SAs only with [`Keys::Shown`]), each SA followed by a comment with its state, path
/// MTU, driver and counters, and one with its last use ([`last_used`]).
fn print_response(out: &mut String, r: &Response, keys: Keys, core: &Ipsec) {
    match r {
        Response::Done(_) => {}
        Response::Sa(info) => print_sa(out, info, keys, core),
        Response::Sas(infos) => infos.iter().for_each(|i| print_sa(out, i, keys, core)),
        Response::Policies(ps) => {
            for p in ps {
                statement(out, &Request::AddPolicy(p.clone()));
            }
        }
        // getspi: the reserved SPI, in the monitor's `key=value` form.
        Response::Larval(id) => {
            let _ = writeln!(
                out,
                "larval src={} dst={} proto={} spi={:#x}",
                id.src,
                id.dst,
                id.proto.name(),
                id.spi
            );
        }
    }
}

/// A request as a setkey statement on its own line.
fn statement(out: &mut String, r: &Request) {
    out.push_str(setkey::format_request(r).trim_end());
    out.push('\n');
}

fn print_sa(out: &mut String, info: &SaInfo, keys: Keys, core: &Ipsec) {
    let add = Request::AddSa(info.spec.clone());
    match keys {
        Keys::Shown => statement(out, &add),
        Keys::Hidden => {
            out.push_str(&setkey::format_redacted(&add));
            out.push_str(" ;\n");
        }
    }
    let s = &info.spec;
    // The path MTU learned from ICMP errors and refused sends (`pmtu`), or `-` while none is.
    let pmtu = core.path_mtu(&SaId { src: s.src, dst: s.dst, proto: s.proto, spi: s.spi });
    let _ = writeln!(
        out,
        "#\tstate {:?}, age {} s, path MTU {}, driver {}: {}",
        info.state,
        info.age.as_secs(),
        pmtu.map_or_else(|| "-".to_owned(), |m| m.to_string()),
        info.driver,
        info.stats
    );
    let _ = writeln!(out, "{}", last_used(info));
}

/// The SA's last use, for a key manager's liveness checks (RFC 7296 §2.4), one line per
/// SA in the monitor's `key=value` form behind `#` and a tab (so that a dump still reads
/// back as setkey text):
///
/// ```text
/// #<TAB>last-used src=A dst=B proto=P spi=0xN in-ms=N|never out-ms=N|never
/// ```
///
/// `in-ms`: milliseconds since the SA last accepted an inbound packet (decrypted,
/// authenticated, inside the replay window); `out-ms`: since it last sent one; `never`:
/// not yet. Late by at most ipsecd's tick (200 ms), when the core looks at the counters.
pub fn last_used(info: &SaInfo) -> String {
    let ms =
        |d: Option<std::time::Duration>| d.map_or_else(|| "never".to_owned(), |d| d.as_millis().to_string());
    let s = &info.spec;
    format!(
        "#\tlast-used src={} dst={} proto={} spi={:#x} in-ms={} out-ms={}",
        s.src,
        s.dst,
        s.proto.name(),
        s.spi,
        ms(info.idle_in),
        ms(info.idle_out)
    )
}
