//! How traffic reaches the TUN, and how ipsecd's own traffic stays out of it.
//!
//! ipsecd routes the destination prefix of every outbound `ipsec` policy into its TUN, in
//! a routing table of its own (`--table`, default [`DEFAULT_TABLE`]), and adds one rule per
//! address family: `not fwmark M lookup T`. Every socket ipsecd sends ESP through carries
//! the mark M (`SO_MARK`, `--fwmark`, default [`DEFAULT_MARK`]), so the gateway's own ESP
//! skips the table and follows the main one, while everything else the host sends looks
//! in ipsecd's table first. That is what lets a policy protect traffic to the peer
//! gateway's own address (transport mode: `A B any -P out ipsec esp/transport//require`)
//! or to everything (`0.0.0.0/0`): without the mark, the ESP to the peer would be routed
//! back into the TUN. wg-quick keeps WireGuard's own UDP out of its tunnel the same way.
//!
//! A route also gets `src ADDR` when its policy's source is one host (a transport-mode
//! policy names the local address), so that the kernel picks that address for connections
//! it opens; if ADDR is not local, the route is installed without it.
//!
//! Routes and rules are installed with iproute2 (`ip`), at start-up and after every
//! configuration change, and removed when the policies go or the daemon stops.

use ipsec_core::Ipsec;

use crate::service::{self, Route};

/// The default mark on ipsecd's sockets ("OC").
pub const DEFAULT_MARK: u32 = 0x4f43;
/// The default routing table of the routes into the TUN.
pub const DEFAULT_TABLE: u32 = 0x4f43;

/// The routes and rules ipsecd installed; inert when routing is left to the user.
pub struct Routing {
    tun: String,
    table: u32,
    mark: u32,
    enabled: bool,
    installed: Vec<Route>,
}

impl Routing {
    /// Installs the two rules (`enabled`; otherwise does nothing now or later). A rule left
    /// behind by a daemon that was killed is replaced, not duplicated.
    pub fn start(tun: &str, table: u32, mark: u32, enabled: bool) -> Routing {
        let r = Routing { tun: tun.into(), table, mark, enabled, installed: Vec::new() };
        if enabled {
            for family in ["-4", "-6"] {
                // `ip rule add` would add a second copy of a stale rule.
                while ip(&r.rule(family, "del")).is_ok() {}
                if let Err(e) = ip(&r.rule(family, "add")) {
                    tracing::warn!("{e}");
                }
            }
        }
        r
    }

    fn rule(&self, family: &str, verb: &str) -> Vec<String> {
        [family, "rule", verb, "not", "fwmark", &self.mark.to_string(), "table", &self.table.to_string()]
            .map(String::from)
            .to_vec()
    }

    /// Brings the installed routes in line with the outbound policies.
    pub fn sync(&mut self, core: &Ipsec) {
        if !self.enabled {
            return;
        }
        let want = service::protected_routes(core);
        let old = std::mem::take(&mut self.installed);
        for r in &old {
            if !want.contains(r) {
                self.route("del", r);
            }
        }
        for r in want {
            if old.contains(&r) || self.route("replace", &r) {
                self.installed.push(r);
            }
        }
    }

    /// Removes every route and the rules.
    pub fn stop(&mut self) {
        if !self.enabled {
            return;
        }
        for r in std::mem::take(&mut self.installed) {
            self.route("del", &r);
        }
        for family in ["-4", "-6"] {
            let _ = ip(&self.rule(family, "del"));
        }
    }

    /// `ip route VERB DST dev TUN table T [src S]`; with `src` refused (not a local
    /// address), again without it. Whether it worked.
    fn route(&self, verb: &str, r: &Route) -> bool {
        let dst = format!("{}/{}", r.dst.addr, r.dst.len);
        let table = self.table.to_string();
        let mut args: Vec<String> =
            ["route", verb, &dst, "dev", &self.tun, "table", &table].map(String::from).to_vec();
        let plain = args.clone();
        if let (Some(src), "replace") = (r.src, verb) {
            args.extend(["src".into(), src.to_string()]);
        }
        let mut result = ip(&args);
        if let (Err(e), true) = (&result, args.len() > plain.len()) {
            tracing::info!("{e} (installing it without src)");
            args = plain;
            result = ip(&args);
        }
        match result {
            Ok(()) => {
                tracing::info!("ip {}", args.join(" "));
                true
            }
            Err(e) => {
                tracing::warn!("{e}");
                false
            }
        }
    }
}

/// Runs `ip ARGS`; its complaint as the error.
pub(crate) fn ip<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Result<(), String> {
    let shown = || args.iter().map(|a| a.as_ref().to_string_lossy()).collect::<Vec<_>>().join(" ");
    match std::process::Command::new("ip").args(args).output() {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(format!("ip {}: {}", shown(), String::from_utf8_lossy(&o.stderr).trim())),
        Err(e) => Err(format!("ip {}: {e}", shown())),
    }
}
