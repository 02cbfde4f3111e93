//! This host's addresses (in ipsecd's network namespace), read again only when they
//! change: [`crate::lint`]'s rules ask for them at every control request, and reading them
//! whole (a netlink dump, `getifaddrs`) at each of a key manager's 1,000 installs was a
//! cost that grew with nothing the request did.
//!
//! ```text
//!  HostAddrs::new ── netlink socket joined to the address groups (IPv4, IPv6), non-blocking
//!  get() ── any message waiting (RTM_NEWADDR, RTM_DELADDR), or the socket overflowed? ─ yes ─ getifaddrs() again
//!        └─ no: the addresses read last time (one recv that finds nothing)
//! ```
//!
//! The socket joins the groups before the first read, so no change is missed between
//! the two. Without the socket (netlink refused), every call reads the addresses, as
//! before.

use std::collections::HashSet;
use std::net::IpAddr;

use netlink_sys::{constants::NETLINK_ROUTE, Socket, SocketAddr};

/// `RTMGRP_IPV4_IFADDR` and `RTMGRP_IPV6_IFADDR` (linux/rtnetlink.h): address changes.
const ADDRESS_GROUPS: u32 = 0x10 | 0x100;

/// This host's addresses, kept up to date by the kernel's address events.
pub struct HostAddrs {
    events: Option<Socket>,
    /// The last read; `None` before the first or after a change.
    known: Option<Result<HashSet<IpAddr>, String>>,
}

impl Default for HostAddrs {
    fn default() -> HostAddrs {
        HostAddrs::new()
    }
}

impl HostAddrs {
    /// Subscribes to the address events; reads nothing yet.
    pub fn new() -> HostAddrs {
        let events = Socket::new(NETLINK_ROUTE)
            .and_then(|mut s| {
                s.bind(&SocketAddr::new(0, ADDRESS_GROUPS))?;
                s.set_non_blocking(true)?;
                Ok(s)
            })
            .inspect_err(|e| tracing::info!("address events: {e} (addresses read at every request)"))
            .ok();
        HostAddrs { events, known: None }
    }

    /// The addresses now; an error says why they could not be read.
    pub fn get(&mut self) -> &Result<HashSet<IpAddr>, String> {
        if self.changed() {
            self.known = None;
        }
        self.known.get_or_insert_with(|| crate::keepalive::local_addresses().map_err(|e| e.to_string()))
    }

    /// Whether an address event came since the last call (every waiting one is read), or
    /// there is no way to know.
    fn changed(&mut self) -> bool {
        let Some(s) = &self.events else { return true };
        let mut buf = vec![0u8; 16 << 10];
        let mut any = false;
        loop {
            match s.recv(&mut &mut buf[..], 0) {
                Ok(_) => any = true,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return any,
                // ENOBUFS: events were lost; anything else: no way to know.
                Err(_) => return true,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cached addresses are the host's (loopback is always one), and a second call with
    /// no change in between reads the same.
    #[test]
    fn the_cached_addresses_are_the_hosts() {
        let mut h = HostAddrs::new();
        let first = h.get().clone().unwrap();
        assert!(first.contains(&"127.0.0.1".parse::<IpAddr>().unwrap()), "{first:?}");
        assert_eq!(h.get().as_ref().unwrap(), &first);
        assert_eq!(first, crate::keepalive::local_addresses().unwrap());
    }
}
