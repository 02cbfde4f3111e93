//! What the daemon does with configuration: control requests from the socket and the
//! config file at start-up, through the Fast IPsec core's one typed control protocol
//! (`ipsec_core::control`), reached from setkey text. The file's re-reading on SIGHUP is
//! [`crate::config`]'s; what `ipsecctl stats` and the metrics show is [`crate::metrics`]'s;
//! the routes the policies call for are [`crate::routing`]'s.

use std::fmt::Write as _;

use ipsec_core::control::{Located, Request};
use ipsec_core::db::{Response, SaInfo};
use ipsec_core::setkey;
use ipsec_core::Ipsec;

use crate::ctl::Reply;

/// Parses setkey text; the error names the line and column (`FILE:LINE:COLUMN: …` when
/// `origin` is a file name).
pub fn parse(origin: &str, text: &str) -> Result<Vec<Located<Request>>, String> {
    setkey::parse(text).map_err(|e| format!("{origin}:{}:{}: {}", e.line, e.column, e.message))
}

/// Carries out setkey text as one transaction: parsed whole first (a malformed request
/// changes nothing), then applied in order; if the databases refuse one, nothing changes
/// (its line is named). The reply holds what `get`, `dump` and `spddump` print.
///
/// Errors show a statement without its keys ([`setkey::format_redacted`]): they are logged.
pub fn apply_setkey(core: &Ipsec, origin: &str, text: &str) -> Reply {
    let reqs = parse(origin, text)?;
    core.transact(|t| {
        let mut out = String::new();
        for r in &reqs {
            match t.apply(&r.item) {
                Ok(resp) => print_response(&mut out, &resp),
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
/// again, each SA followed by a comment with its state and counters.
fn print_response(out: &mut String, r: &Response) {
    match r {
        Response::Done(_) => {}
        Response::Sa(info) => print_sa(out, info),
        Response::Sas(infos) => infos.iter().for_each(|i| print_sa(out, i)),
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

fn print_sa(out: &mut String, info: &SaInfo) {
    statement(out, &Request::AddSa(info.spec.clone()));
    let _ = writeln!(
        out,
        "#\tstate {:?}, age {} s, driver {}: {}",
        info.state,
        info.age.as_secs(),
        info.driver,
        info.stats
    );
}
