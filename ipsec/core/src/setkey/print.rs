//! The setkey printer: a control [`Request`] written back in the language the parser reads
//! (`dump`, round-trip tests), or with its keys left out ([`format_redacted`], for messages
//! and logs).

use std::fmt::{self, Write as _};

use crate::control::{Action, KeyBytes, Level, Proto, Request, Rule, SaSpec, Selector, Upper};

/// A request in setkey syntax, one statement ending in ` ;`, such that
/// [`parse`](super::parse) gives the request back. Keys are printed in hex (the string
/// holds key material: `dump` output is as secret as the configuration file).
///
/// What the language cannot say is not printed: a lifetime of 0 or in packets, a selector
/// port of 0, and an `esp-udp` SA without ports (printed without them, read back with 4500).
pub fn format_request(r: &Request) -> String {
    let mut s = String::new();
    // Writing to a String cannot fail.
    let _ = write_request(&mut s, r, Keys::Shown);
    s
}

/// A request as [`format_request`] prints it, but with every key replaced by `(key not
/// shown)`, and without the final ` ;`: for messages and logs, which must never hold key
/// material. An SA is still named by its addresses, SPI, protocol, parameters and
/// algorithms.
pub fn format_redacted(r: &Request) -> String {
    let mut s = String::new();
    let _ = write_request(&mut s, r, Keys::Hidden);
    s.trim_end_matches(" ;").to_owned()
}

/// Whether a printed SA shows its keys.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Keys {
    Shown,
    Hidden,
}

fn write_request(s: &mut String, r: &Request, keys: Keys) -> fmt::Result {
    match r {
        Request::AddSa(sa) => write_add(s, sa, keys),
        Request::UpdateSa(sa) => {
            let mut add = String::new();
            write_add(&mut add, sa, keys)?;
            s.push_str("update");
            s.push_str(add.strip_prefix("add").unwrap_or(&add));
            Ok(())
        }
        Request::GetSpi { src, dst, proto, range: (min, max) } => {
            write!(s, "getspi {src} {dst} {} min {min:#x} max {max:#x} ;", proto.name())
        }
        Request::GetSa(id) => write!(s, "get {} {} {} {:#x} ;", id.src, id.dst, id.proto.name(), id.spi),
        Request::DeleteSa(id) => {
            write!(s, "delete {} {} {} {:#x} ;", id.src, id.dst, id.proto.name(), id.spi)
        }
        Request::MigrateSa { id, to } => {
            write!(s, "migrate {} {} {} {:#x} to ", id.src, id.dst, id.proto.name(), id.spi)?;
            let port = |p: Option<u16>| p.map(|p| format!("[{p}]")).unwrap_or_default();
            write!(s, "{}{} {}{} ;", to.src, port(to.sport), to.dst, port(to.dport))
        }
        Request::DeleteAllSa { src, dst, proto } => write!(s, "deleteall {src} {dst} {} ;", proto.name()),
        Request::FlushSa(p) => {
            write!(s, "flush{} ;", p.map(|p| format!(" {}", p.name())).unwrap_or_default())
        }
        Request::DumpSa(p) => write!(s, "dump{} ;", p.map(|p| format!(" {}", p.name())).unwrap_or_default()),
        Request::AddPolicy(p) => {
            s.push_str("spdadd ");
            write_selector(s, &p.selector)?;
            write!(s, " -P {} ", p.dir.name())?;
            match &p.action {
                Action::Bypass => s.push_str("none"),
                Action::Discard => s.push_str("discard"),
                Action::Protect(rules) => {
                    s.push_str("ipsec");
                    for r in rules {
                        s.push(' ');
                        write_rule(s, r)?;
                    }
                }
            }
            s.push_str(" ;");
            Ok(())
        }
        Request::DeletePolicy { selector, dir } => {
            s.push_str("spddelete ");
            write_selector(s, selector)?;
            write!(s, " -P {} ;", dir.name())
        }
        Request::FlushPolicies => write!(s, "spdflush ;"),
        Request::DumpPolicies => write!(s, "spddump ;"),
    }
}

fn write_add(s: &mut String, sa: &SaSpec, keys: Keys) -> fmt::Result {
    let key = |s: &mut String, k: &KeyBytes| match keys {
        Keys::Shown => write_hex(s, k.as_bytes()),
        Keys::Hidden => {
            s.push_str("(key not shown)");
            Ok(())
        }
    };
    let udp = matches!(sa.proto, Proto::Esp | Proto::EspUdp);
    let port = |p: u16| match sa.natt {
        Some(_) if udp => format!("[{p}]"),
        _ => String::new(),
    };
    let (sp, dp) = sa.natt.map_or((0, 0), |n| (n.sport, n.dport));
    write!(s, "add {}{} {}{} {} {:#x}", sa.src, port(sp), sa.dst, port(dp), sa.proto.name(), sa.spi)?;
    write!(s, " -m {} -r {}", sa.mode.name(), sa.replay_window)?;
    if sa.reqid != 0 {
        write!(s, " -u {}", sa.reqid)?;
    }
    if sa.esn {
        s.push_str(" -f esn");
    }
    for (flag, v) in
        [("-lh", sa.hard.seconds), ("-ls", sa.soft.seconds), ("-bh", sa.hard.bytes), ("-bs", sa.soft.bytes)]
    {
        if let Some(v) = v {
            write!(s, " {flag} {v}")?;
        }
    }
    match sa.proto {
        Proto::Esp | Proto::EspUdp => {
            write!(s, " -E {}", sa.enc.name())?;
            if !sa.enc_key.as_bytes().is_empty() {
                s.push(' ');
                key(s, &sa.enc_key)?;
            }
            if let Some((a, k)) = &sa.auth {
                write!(s, " -A {} ", a.name())?;
                key(s, k)?;
            }
        }
        Proto::Ah => {
            if let Some((a, k)) = &sa.auth {
                write!(s, " -A {} ", a.name())?;
                key(s, k)?;
            }
        }
        Proto::IpComp => s.push_str(" -C deflate"),
    }
    s.push_str(" ;");
    Ok(())
}

fn write_hex(s: &mut String, bytes: &[u8]) -> fmt::Result {
    s.push_str("0x");
    for b in bytes {
        write!(s, "{b:02x}")?;
    }
    Ok(())
}

fn write_selector(s: &mut String, sel: &Selector) -> fmt::Result {
    for (p, port) in [(sel.src, sel.sport), (sel.dst, sel.dport)] {
        write!(s, "{}/{}", p.addr, p.len)?;
        if let Some(port) = port {
            write!(s, "[{port}]")?;
        }
        s.push(' ');
    }
    match sel.upper {
        Upper::Any => s.push_str("any"),
        Upper::Tcp => s.push_str("tcp"),
        Upper::Udp => s.push_str("udp"),
        Upper::Icmp => s.push_str("icmp"),
        Upper::Icmp6 => s.push_str("icmp6"),
        Upper::Number(n) => write!(s, "{n}")?,
    }
    Ok(())
}

fn write_rule(s: &mut String, r: &Rule) -> fmt::Result {
    write!(s, "{}/{}/", r.proto.name(), r.mode.name())?;
    if let Some((a, b)) = r.tunnel {
        write!(s, "{a}-{b}")?;
    }
    match r.level {
        Level::Use => s.push_str("/use"),
        Level::Require => s.push_str("/require"),
        Level::Unique(0) => s.push_str("/unique"),
        Level::Unique(n) => write!(s, "/unique:{n}")?,
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::setkey::parse;

    #[test]
    fn redacted_requests_name_the_sa_but_never_a_key() {
        let text = "add 10.99.0.1 10.99.0.2 esp 0x1001 -m tunnel -r 128 -E aes-cbc 0x00112233445566778899aabbccddeeff \
                    -A hmac-sha2-256 0xffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100;";
        let r = parse(text).unwrap().remove(0).item;
        let shown = format_request(&r);
        assert!(shown.contains("0x00112233445566778899aabbccddeeff"), "{shown}");
        let hidden = format_redacted(&r);
        assert_eq!(
            hidden,
            "add 10.99.0.1 10.99.0.2 esp 0x1001 -m tunnel -r 128 -E aes-cbc (key not shown) \
             -A hmac-sha2-256 (key not shown)"
        );
        for key in ["00112233", "ffeeddcc", "0x0011", "0xffee"] {
            assert!(!hidden.contains(key), "{hidden}");
        }
        let gcm =
            parse("add ::1 ::2 esp-udp 0x2000 -E aes-gcm-16 0x0102030405060708090a0b0c0d0e0f1011121314;")
                .unwrap()
                .remove(0)
                .item;
        assert!(
            format_redacted(&gcm).ends_with("-E aes-gcm-16 (key not shown)"),
            "{}",
            format_redacted(&gcm)
        );
        // Requests without keys print as they are.
        let del = parse("delete 10.99.0.1 10.99.0.2 esp 0x1001;").unwrap().remove(0).item;
        assert_eq!(format_redacted(&del), "delete 10.99.0.1 10.99.0.2 esp 0x1001");
    }
}
