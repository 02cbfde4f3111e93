//! IPComp decompression on arbitrary bytes (RFC 3173, DEFLATE through ocf's soft driver):
//! the input as an IPComp packet behind headers of a length the first byte chooses, and as
//! a bare DEFLATE stream with a limit the first two bytes choose. Every packet is
//! decompressed or dropped by name, never a panic, never more than the limit; whatever
//! decompresses compresses and decompresses back to itself.
#![no_main]

use std::sync::OnceLock;

use ipsec_core::ipcomp::{IpComp, Scratch, MAX_PACKET};
use ipsec_core::stats::Drop;
use libfuzzer_sys::fuzz_target;
use ocf::{Op, Request};

const CPI: u32 = 0x4321;

fn fw() -> &'static ocf::Framework {
    static FW: OnceLock<ocf::Framework> = OnceLock::new();
    FW.get_or_init(|| {
        let fw = ocf::Framework::new();
        ocf_soft::register(&fw).expect("soft driver");
        fw
    })
}

fn ipcomp() -> &'static IpComp {
    static C: OnceLock<IpComp> = OnceLock::new();
    C.get_or_init(|| IpComp::new(fw(), CPI).expect("an IPComp SA"))
}

fn session() -> &'static ocf::Session {
    static S: OnceLock<ocf::Session> = OnceLock::new();
    S.get_or_init(|| fw().new_session(&ipsec_core::ipcomp::session_params()).expect("deflate"))
}

fuzz_target!(|data: &[u8]| {
    let Some((&first, rest)) = data.split_first() else { return };
    let mut scratch = Scratch::default();

    // As a packet: `at` bytes of headers, then (mostly) our CPI's header and the stream.
    let at = usize::from(first % 64).min(rest.len());
    let mut packet = rest.to_vec();
    if first & 0x80 != 0 && packet.len() >= at + 4 {
        packet[at + 2..at + 4].copy_from_slice(&(CPI as u16).to_be_bytes());
    }
    let before = packet.clone();
    match ipcomp().input(&mut scratch, &mut packet, at) {
        Ok(next) => {
            assert!(packet.len() <= MAX_PACKET.max(at));
            assert_eq!(packet[..at], before[..at], "headers untouched");
            // Back and forth again gives the same bytes.
            let plain = packet.clone();
            if let Ok(ipsec_core::ipcomp::Sent::Compressed { .. }) =
                ipcomp().output(&mut scratch, &mut packet, at, next)
            {
                assert_eq!(ipcomp().input(&mut scratch, &mut packet, at), Ok(next));
            }
            assert_eq!(packet, plain);
        }
        Err(why) => {
            assert!(matches!(
                why,
                Drop::IpCompTruncated
                    | Drop::IpCompBadCpi
                    | Drop::IpCompNested
                    | Drop::IpCompTooBig
                    | Drop::IpCompCorrupt
            ));
            assert_eq!(packet, before, "a dropped packet is left as it came");
        }
    }

    // As a bare stream, with a small limit.
    let limit = rest.first().map_or(0, |&b| usize::from(b) * 16);
    let req = Request::new(Op::Decompress, rest.to_vec()).with_output(vec![0u8; limit]);
    match session().run(req) {
        Ok(r) => assert!(r.result_len() <= limit),
        Err(f) => assert!(matches!(
            f.error(),
            ocf::Error::OutputLimit { .. } | ocf::Error::BadCompressedData
        )),
    }
});
