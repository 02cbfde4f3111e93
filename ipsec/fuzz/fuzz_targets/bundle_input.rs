//! Bundle processing on arbitrary bytes (`ipsec_core::bundle`): the input is what an outer
//! ESP SA in transport mode carries, sealed by a real sender, so every packet gets past the
//! outer ICV into the bundle's next stage: IPComp (decompression, then the inner packet),
//! IP-in-IP between an IPComp SA's ends, AH, ESP, or anything else, as the first byte
//! chooses. The receiver holds the bundles' SAs and policies (IPComp tunnel under ESP,
//! ESP with AH). Every packet is delivered or dropped and counted exactly once, never a
//! panic; a nested ESP or AH packet the fuzzer made is never delivered (it cannot forge
//! their ICVs).
#![no_main]

use std::sync::{Arc, OnceLock};

use ipsec_core::{setkey, Ipsec, Packet, Results, Sink, Via};
use libfuzzer_sys::fuzz_target;

struct Nowhere;

impl Sink for Nowhere {
    fn transmit(&self, _: Packet) {}
    fn deliver(&self, _: Packet) {}
}

const ESP: &str = "add 192.0.2.1 192.0.2.2 esp 0x1001 -m transport -r 0 -E aes-gcm-16 \
                   0x0102030405060708090a0b0c0d0e0f1011121314;\n";

const SENDER: &str = "spdadd 192.0.2.1/32 192.0.2.2/32 any -P out ipsec esp/transport//require;\n";

const RECEIVER: &str = r#"
add 192.0.2.1 192.0.2.2 ipcomp 0x4001 -m tunnel -C deflate;
add 192.0.2.1 192.0.2.2 ah 0x2001 -m transport -A hmac-sha2-256 0x0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20;
spdadd 10.1.0.0/16 10.2.0.0/16 any -P in ipsec ipcomp/tunnel/192.0.2.1-192.0.2.2/use esp/transport//require;
spdadd 192.0.2.1/32 192.0.2.2/32 any -P in ipsec esp/transport//require ah/transport//use;
"#;

fn core(config: &str) -> Ipsec {
    let fw = ocf::Framework::new();
    ocf_soft::register(&fw).expect("soft driver");
    let g = Ipsec::new(fw, Arc::new(Nowhere));
    for r in setkey::parse(config).expect("fuzz configuration parses") {
        g.control(&r.item).expect("fuzz configuration applies");
    }
    g
}

fn sender() -> &'static Ipsec {
    static CORE: OnceLock<Ipsec> = OnceLock::new();
    CORE.get_or_init(|| core(&format!("{ESP}{SENDER}")))
}

fn receiver() -> &'static Ipsec {
    static CORE: OnceLock<Ipsec> = OnceLock::new();
    CORE.get_or_init(|| core(&format!("{ESP}{RECEIVER}")))
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, payload)) = data.split_first() else { return };
    // ESP, AH, IPComp, IPv4, IPv6, or TCP under the outer ESP.
    let proto = [50u8, 51, 108, 4, 41, 6][usize::from(pick % 6)];
    let Ok(len) = u16::try_from(20 + payload.len()) else { return };
    let mut packet = vec![0x45, 0, 0, 0, 0, 1, 0x40, 0, 64, proto, 0, 0, 192, 0, 2, 1, 192, 0, 2, 2];
    packet[2..4].copy_from_slice(&len.to_be_bytes());
    let sum = ipsec_wire::checksum::checksum(&packet);
    packet[10..12].copy_from_slice(&sum.to_be_bytes());
    packet.extend_from_slice(payload);

    let mut out = Results::default();
    if sender().output_one(Packet::with_headroom(&packet), &mut out).is_err() {
        return;
    }
    let Some(wire) = out.transmit.pop() else { return };
    let before = receiver().stats().total_drops();
    let mut got = Results::default();
    let r = receiver().input_one(wire, Via::Ip, &mut got);
    let after = receiver().stats().total_drops();
    match r {
        Ok(()) => {
            assert_eq!(after, before, "a packet that passed was counted as a drop");
            assert!(got.deliver.len() <= 1);
            if matches!(proto, 50 | 51) {
                assert!(got.deliver.is_empty(), "a nested {proto} packet without a valid ICV was delivered");
            }
        }
        Err(why) => {
            assert_eq!(after, before + 1, "{why}: counted once");
            assert!(got.deliver.is_empty());
        }
    }
    assert!(got.transmit.is_empty());
});
