//! CHILD_SAs: what the engine remembers of one (its SPIs, algorithms and selectors; the
//! keys themselves go to ipsecd in the [`ChildSaInstall`] and are not kept), and the
//! allocation of inbound SPIs.
//!
//! An inbound SPI comes from ocf's random source: non-zero, at least 256 (RFC 4303 §2.1
//! reserves 1–255), and not one this engine already handed out. ipsecd may still refuse
//! it (a manually keyed SA with that SPI): iked treats that as a failed CHILD_SA.

use std::collections::HashSet;
use std::time::Duration;

use ike_wire::ts::TrafficSelector;
use ocf::{Framework, Request, SessionParams};

use crate::config::Mode;
use crate::crypto::{ChildKeys, ChildSuite};
use crate::io::ChildSaInstall;

/// One established CHILD_SA.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChildSa {
    /// The configuration's child name.
    pub name: String,
    pub spi_in: u32,
    pub spi_out: u32,
    pub suite: ChildSuite,
    pub esn: bool,
    pub mode: Mode,
    pub local_ts: Vec<TrafficSelector>,
    pub remote_ts: Vec<TrafficSelector>,
}

/// The first inbound SPI allowed.
pub const MIN_SPI: u32 = 256;

/// 32 bits from ocf's random source.
pub fn random_u32(fw: &Framework) -> Result<u32, ocf::Error> {
    let s = fw.new_session(&SessionParams::random())?;
    let done = s.run(Request::random(4)).map_err(|f| f.into_parts().0)?;
    let mut b = [0u8; 4];
    done.buf.copy_out(0..4, &mut b);
    Ok(u32::from_be_bytes(b))
}

/// A fresh inbound SPI not in `taken`, which it joins.
pub fn alloc_spi(fw: &Framework, taken: &mut HashSet<u32>) -> Result<u32, ocf::Error> {
    loop {
        let spi = random_u32(fw)?;
        if spi >= MIN_SPI && taken.insert(spi) {
            return Ok(spi);
        }
    }
}

/// What the install carries beyond the CHILD_SA itself.
pub struct InstallContext {
    pub ike_sa: u64,
    pub local: std::net::SocketAddr,
    pub remote: std::net::SocketAddr,
    pub udp_encap: Option<(u16, u16)>,
    pub soft_lifetime: Duration,
    pub hard_lifetime: Duration,
}

impl ChildSa {
    /// The install for ipsecd: the keys of each direction, by who initiated the exchange
    /// that made it (KEYMAT's first half is initiator → responder, RFC 7296 §2.17).
    pub fn install(&self, keys: &ChildKeys, we_initiated: bool, ctx: InstallContext) -> ChildSaInstall {
        let (encr, bits) = self.suite.encr.id();
        let integ = self.suite.integ.map_or(ike_wire::ids::IntegId::NONE, |i| i.id());
        let (ei, ii, er, ir) = (&keys.encr_i, &keys.integ_i, &keys.encr_r, &keys.integ_r);
        let ((eo, io), (ein, iin)) = if we_initiated { ((ei, ii), (er, ir)) } else { ((er, ir), (ei, ii)) };
        ChildSaInstall {
            ike_sa: ctx.ike_sa,
            child: self.name.clone(),
            spi_in: self.spi_in,
            spi_out: self.spi_out,
            encr,
            encr_bits: bits.filter(|_| encr != ike_wire::ids::EncrId::CHACHA20_POLY1305),
            integ,
            encr_key_in: ein.clone(),
            integ_key_in: iin.clone(),
            encr_key_out: eo.clone(),
            integ_key_out: io.clone(),
            mode: self.mode,
            local: ctx.local,
            remote: ctx.remote,
            udp_encap: ctx.udp_encap,
            esn: self.esn,
            soft_lifetime: ctx.soft_lifetime,
            hard_lifetime: ctx.hard_lifetime,
            local_ts: self.local_ts.clone(),
            remote_ts: self.remote_ts.clone(),
            outbound_later: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spis_are_unique_and_not_reserved() {
        let fw = Framework::new();
        ocf_soft::register(&fw).unwrap();
        let mut taken: HashSet<u32> = (0..MIN_SPI).collect();
        let before = taken.len();
        for _ in 0..200 {
            let s = alloc_spi(&fw, &mut taken).unwrap();
            assert!(s >= MIN_SPI);
        }
        assert_eq!(taken.len(), before + 200, "every SPI new");
    }
}
