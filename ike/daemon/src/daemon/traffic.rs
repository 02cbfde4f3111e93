//! When each CHILD_SA last carried inbound traffic, read from ipsecd's `dump`: what lets
//! iked put off a liveness check (dpd_delay) while ESP from the peer still arrives.
//!
//! ```text
//!  IkeEngine::wants_traffic (an IKE SA's check is near) ─▶ loop: `dump ;` to ipsecd ctl
//!   ─▶ reply text ─▶ last_inbound ─▶ [(SPI, idle)] ─▶ IkeEngine::traffic
//!   ─▶ Ike::child_traffic(now − idle, SPI) for each
//! ```
//!
//! ipsecd prints, after each SA (docs/gateway.md "Liveness and migrate"):
//! `#<TAB>last-used src=A dst=B proto=P spi=0xN in-ms=N|never out-ms=N|never`. The SPI of
//! an inbound SA is ours, the one the state machine knows the CHILD_SA by. Parsing is
//! total: a line that is not a `last-used` line is skipped; a malformed one is an error
//! naming the field.

use std::time::Duration;

/// The setkey request whose reply holds every SA's `last-used` line.
pub const DUMP: &str = "dump ;\n";

/// What is wrong with a `last-used` line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LastUsedError {
    /// A field is not there.
    Missing(&'static str),
    /// A field's value does not read.
    Bad { field: &'static str, value: String },
}

impl std::fmt::Display for LastUsedError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LastUsedError::Missing(field) => write!(f, "last-used without {field}="),
            LastUsedError::Bad { field, value } => write!(f, "last-used {field}={value:?} does not read"),
        }
    }
}

/// One `last-used` line: the SA's SPI and how long ago it last accepted an inbound packet
/// (`None`: never). `Ok(None)`: not a `last-used` line.
pub fn parse_last_used(line: &str) -> Result<Option<(u32, Option<Duration>)>, LastUsedError> {
    let Some(rest) = line.trim_start_matches('#').trim_start().strip_prefix("last-used ") else {
        return Ok(None);
    };
    let field = |name: &'static str| {
        rest.split_ascii_whitespace()
            .filter_map(|w| w.split_once('='))
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v)
            .ok_or(LastUsedError::Missing(name))
    };
    let bad = |field: &'static str, value: &str| LastUsedError::Bad { field, value: value.to_owned() };
    let spi = field("spi")?;
    let spi = spi
        .strip_prefix("0x")
        .and_then(|h| u32::from_str_radix(h, 16).ok())
        .ok_or_else(|| bad("spi", spi))?;
    let in_ms = field("in-ms")?;
    let idle = match in_ms {
        "never" => None,
        n => Some(Duration::from_millis(n.parse().map_err(|_| bad("in-ms", n))?)),
    };
    Ok(Some((spi, idle)))
}

/// The SAs of a `dump` reply that carried inbound traffic, each with how long ago; the
/// malformed `last-used` lines' errors beside (logged by the loop).
pub fn last_inbound(dump: &str) -> (Vec<(u32, Duration)>, Vec<LastUsedError>) {
    let (mut seen, mut errors) = (Vec::new(), Vec::new());
    for line in dump.lines() {
        match parse_last_used(line) {
            Ok(Some((spi, Some(idle)))) => seen.push((spi, idle)),
            Ok(_) => {}
            Err(e) => errors.push(e),
        }
    }
    (seen, errors)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The docs' example of `ipsecctl -D` (docs/gateway.md, "4. Check"), one SA made
    /// ESP-in-UDP.
    #[test]
    fn reads_the_docs_dump() {
        let dump = "add 10.99.0.1 10.99.0.2 esp 0x1001 -m tunnel -r 64 -E aes-gcm-16 (key not shown) ;\n\
                    #\tstate Mature, age 5 s, path MTU -, driver soft: out 6 packets 504 bytes, in 0 packets 0 bytes\n\
                    #\tlast-used src=10.99.0.1 dst=10.99.0.2 proto=esp spi=0x1001 in-ms=never out-ms=840\n\
                    add 10.99.0.2 10.99.0.1 esp 0x1002 -m tunnel -r 64 -E aes-gcm-16 (key not shown) ;\n\
                    #\tlast-used src=10.99.0.2 dst=10.99.0.1 proto=esp-udp spi=0x1002 in-ms=840 out-ms=never\n";
        let (seen, errors) = last_inbound(dump);
        assert_eq!(seen, vec![(0x1002, Duration::from_millis(840))]);
        assert!(errors.is_empty());
    }

    /// ipsecd's own setkey parser reads the request as one `dump` of every protocol.
    #[test]
    fn the_request_is_a_dump() {
        let reqs = ipsec_core::setkey::parse(DUMP).unwrap();
        assert_eq!(reqs.len(), 1);
        assert!(format!("{:?}", reqs[0].item).starts_with("Dump"), "{:?}", reqs[0].item);
    }

    #[test]
    fn malformed_lines_name_the_field() {
        let cases = [
            ("#\tlast-used src=A dst=B proto=esp in-ms=1", LastUsedError::Missing("spi")),
            ("#\tlast-used spi=0x10", LastUsedError::Missing("in-ms")),
            ("#\tlast-used spi=10 in-ms=1", LastUsedError::Bad { field: "spi", value: "10".into() }),
            ("#\tlast-used spi=0x10 in-ms=-1", LastUsedError::Bad { field: "in-ms", value: "-1".into() }),
            (
                "#\tlast-used spi=0x1ffffffff in-ms=1",
                LastUsedError::Bad { field: "spi", value: "0x1ffffffff".into() },
            ),
        ];
        for (line, want) in cases {
            assert_eq!(parse_last_used(line), Err(want), "{line}");
        }
        for junk in ["", "#", "last-used", "#\tstate Mature", "\u{0}\u{ffff} a=b"] {
            assert_eq!(parse_last_used(junk), Ok(None), "{junk:?}");
        }
    }
}
