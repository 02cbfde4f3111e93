//! Transport mode's header surgery, shared by ESP, AH and IPComp: where the protocol's
//! header goes into a packet (`transport_split`), the packet's own header naming it on the
//! way out (`fix_transport_header`), and naming what it carried on the way in
//! (`restore_transport_header`). Every header is read and written through ipsec-wire.

use ipsec_wire::{ipv4, ipv6, IpProtocol, Summary};

/// What of a packet stays in front of ESP (AH, IPComp).
#[derive(Clone, Copy)]
pub(crate) struct Split {
    /// Bytes of IP header (IPv4 with options; IPv6 with the headers before ESP's place).
    pub(crate) keep: usize,
    /// The protocol ESP's trailer will name.
    pub(crate) next: u8,
    /// The byte that named it, which will name ESP (IPv6: in the header chain).
    pub(crate) field: usize,
}

/// Where ESP (AH, IPComp) goes into the packet `b` that `s` summarises: after IPv4's
/// header, or after IPv6's headers that precede it (RFC 4303 §3.1.1).
pub(crate) fn transport_split(b: &[u8], s: &Summary) -> Option<Split> {
    if s.src.is_ipv4() {
        Some(Split { keep: s.offset, next: s.protocol.0, field: 9 })
    } else {
        let chain = ipv6::Packet::new_checked(b).ok()?.walk_extension_headers().ok()?;
        let p = chain.esp_insert;
        Some(Split { keep: p.offset, next: p.next_header.0, field: p.next_header_field })
    }
}

/// Outbound: the original IP header, now in front of ESP (AH, IPComp), names `proto` (IPv6: in
/// the header just before ESP's place) and gets the whole `packet`'s length.
pub(crate) fn fix_transport_header(packet: &mut [u8], sp: &Split, proto: IpProtocol) {
    let total = packet.len();
    if packet[0] >> 4 == 4 {
        let mut p = ipv4::Packet::new_unchecked(packet);
        p.set_protocol(proto);
        p.set_total_len(total as u16);
        p.fill_checksum();
    } else {
        let mut p = ipv6::Packet::new_unchecked(packet);
        p.set_payload_len((total - ipv6::HEADER_LEN) as u16);
        // The split came from walking this header chain: the field is inside it.
        let _ = p.set_chain_next_header(sp.field, proto);
    }
}

/// Inbound, with the header left in the buffer: it names the protocol ESP (AH, IPComp)
/// carried and gets the new length (IPv6: in the header that named ESP). `hdr` is the
/// header's length, chain included.
pub(crate) fn restore_transport_header(packet: &mut [u8], hdr: usize, next: u8) -> Result<(), ()> {
    let total = packet.len();
    match packet.first().map(|v| v >> 4) {
        Some(4) if hdr >= ipv4::MIN_HEADER_LEN => {
            let mut p = ipv4::Packet::new_unchecked(packet);
            p.set_protocol(IpProtocol(next));
            p.set_total_len(total as u16);
            p.fill_checksum();
            Ok(())
        }
        Some(6) if hdr >= ipv6::HEADER_LEN => {
            let mut p = ipv6::Packet::new_unchecked(packet);
            p.set_payload_len((total - ipv6::HEADER_LEN) as u16);
            // The header that named ESP (or UDP, for ESP in UDP): the chain must end
            // exactly where that was.
            let chain = p.walk_extension_headers().map_err(|_| ())?;
            if chain.offset != hdr {
                return Err(());
            }
            p.set_chain_next_header(chain.next_header_field, IpProtocol(next)).map_err(|_| ())
        }
        _ => Err(()),
    }
}
