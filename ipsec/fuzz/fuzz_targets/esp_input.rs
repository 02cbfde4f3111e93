//! The inbound packet path on arbitrary bytes, with real SAs installed (AES-GCM tunnel,
//! AES-CBC+HMAC transport with ESN, over IPv4 and IPv6, with and without UDP
//! encapsulation; AH with HMAC-SHA1 in tunnel mode over IPv4 and AES-GMAC in transport
//! mode with ESN over IPv6), as an IP stack and each of the gateway's sockets hand it over (whole, or
//! as a socket's payload with the headers taken off, raw and over UDP, as one packet and
//! as a batch of the input cut in pieces): every packet is delivered or dropped and
//! counted, never a panic.
#![no_main]

use std::sync::{Arc, OnceLock};

use ipsec_core::{setkey, Ipsec, Packet, Payload, Results, Sink, Via};
use libfuzzer_sys::fuzz_target;

struct Nowhere;

impl Sink for Nowhere {
    fn transmit(&self, _: Packet) {}
    fn deliver(&self, _: Packet) {}
}

const CONFIG: &str = r#"
add 192.0.2.1 192.0.2.2 esp 0x1000 -m tunnel -E aes-gcm-16 0x0102030405060708090a0b0c0d0e0f1011121314;
add 192.0.2.1[4500] 192.0.2.2[4500] esp-udp 0x1001 -m tunnel -E chacha20-poly1305 0x000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20212223;
add 2001:db8::1 2001:db8::2 esp 0x1002 -m transport -f esn -E aes-cbc 0x000102030405060708090a0b0c0d0e0f -A hmac-sha2-256 0x000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f;
add 192.0.2.1 192.0.2.2 ah 0x2000 -m tunnel -A hmac-sha1 0x0102030405060708090a0b0c0d0e0f1011121314;
add 2001:db8::1 2001:db8::2 ah 0x2001 -m transport -f esn -A aes-gmac 0x0102030405060708090a0b0c0d0e0f1011121314;
spdadd 10.0.0.0/8 10.0.0.0/8 any -P in ipsec esp/tunnel/192.0.2.1-192.0.2.2/require;
spdadd 2001:db8::1 2001:db8::2 any -P in ipsec esp/transport//require;
"#;

fn core() -> &'static Ipsec {
    static CORE: OnceLock<Ipsec> = OnceLock::new();
    CORE.get_or_init(|| {
        let fw = ocf::Framework::new();
        ocf_soft::register(&fw).expect("soft driver");
        let g = Ipsec::new(fw, Arc::new(Nowhere));
        for r in setkey::parse(CONFIG).expect("fuzz configuration parses") {
            g.control(&r.item).expect("fuzz configuration applies");
        }
        g
    })
}

fuzz_target!(|data: &[u8]| {
    let mut out = Results::default();
    for via in [Via::Ip, Via::Esp, Via::IpComp] {
        let _ = core().input_one(Packet::new(data.to_vec()), via, &mut out);
    }
    let src = "192.0.2.1:4500".parse().expect("an address");
    for udp in [false, true] {
        let packet = Packet::new(data.to_vec());
        let _ = core().input_payload(
            Payload {
                packet,
                src,
                dst: "192.0.2.2".parse().expect("an address"),
                dport: if udp { 4500 } else { 0 },
                udp,
                ecn: data.len() as u8 & 3,
            },
            &mut out,
        );
    }
    // A batch: the input cut where its first byte says, each piece as its own packet.
    let cut = usize::from(data.first().copied().unwrap_or(1).max(1));
    core().input(data.chunks(cut).map(|c| Packet::new(c.to_vec())), Via::Ip, &mut out);
});
