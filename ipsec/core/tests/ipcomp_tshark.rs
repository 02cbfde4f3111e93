//! IPComp packets made by `ipcomp::IpComp::output`, dissected by an independent
//! implementation: tshark (Wireshark's IPComp dissector) reads them from a pcap, names the
//! next header, flags and CPI we wrote, inflates the payload itself and dissects the inner
//! packet, and finds nothing malformed. Python's zlib (raw DEFLATE, wbits=-15) inflates the
//! payloads back to the inner packets byte for byte.

use std::io::Write;
use std::process::{Command, Stdio};

use ipsec_core::ipcomp::{IpComp, Scratch, Sent};
use ipsec_wire::{checksum, IpProtocol};

fn have(tool: &str) -> bool {
    Command::new(tool).arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok()
}

/// An IPv4 header (20 bytes) from 192.0.2.1 to 192.0.2.2 carrying `proto`, `len` bytes long.
fn ipv4(proto: u8, len: usize) -> Vec<u8> {
    let mut h = vec![0x45, 0, 0, 0, 0, 1, 0x40, 0, 64, proto, 0, 0, 192, 0, 2, 1, 192, 0, 2, 2];
    h[2..4].copy_from_slice(&(len as u16).to_be_bytes());
    let c = checksum::checksum(&h);
    h[10..12].copy_from_slice(&c.to_be_bytes());
    h
}

fn inner(n: usize) -> Vec<u8> {
    let words = ["GET ", "/index.html ", "HTTP/1.1\r\n", "Host: example.org\r\n", "Accept: */*\r\n"];
    let mut body = Vec::new();
    let mut i = 0;
    while body.len() < n - 28 {
        body.extend_from_slice(words[i % words.len()].as_bytes());
        i = (i * 7 + 3) % 1009;
    }
    body.truncate(n - 28);
    let mut p = ipv4(17, n);
    p[12..20].copy_from_slice(&[10, 1, 0, 1, 10, 2, 0, 1]);
    p[10..12].fill(0);
    let c = checksum::checksum(&p[..20]);
    p[10..12].copy_from_slice(&c.to_be_bytes());
    p.extend_from_slice(&[0x30, 0x39, 0x00, 0x50, 0, 0, 0, 0]);
    p[24..26].copy_from_slice(&((n - 20) as u16).to_be_bytes());
    p.extend_from_slice(&body);
    p
}

/// A pcap file (LINKTYPE_RAW: each record an IP packet).
fn pcap(packets: &[Vec<u8>]) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    f.extend_from_slice(&2u16.to_le_bytes());
    f.extend_from_slice(&4u16.to_le_bytes());
    f.extend_from_slice(&[0; 8]);
    f.extend_from_slice(&65_535u32.to_le_bytes());
    f.extend_from_slice(&101u32.to_le_bytes());
    for (i, p) in packets.iter().enumerate() {
        f.extend_from_slice(&(i as u32).to_le_bytes());
        f.extend_from_slice(&0u32.to_le_bytes());
        f.extend_from_slice(&(p.len() as u32).to_le_bytes());
        f.extend_from_slice(&(p.len() as u32).to_le_bytes());
        f.extend_from_slice(p);
    }
    f
}

#[test]
fn tshark_dissects_our_ipcomp_packets_and_python_inflates_them() {
    if !have("tshark") || !have("python3") {
        eprintln!("skipped: tshark and python3 are needed (scripts/setup installs them)");
        return;
    }
    let fw = ocf::Framework::new();
    ocf_soft::register(&fw).unwrap();
    let c = IpComp::new(&fw, 0x4321).unwrap();
    let mut scratch = Scratch::default();
    let (mut packets, mut inners) = (Vec::new(), Vec::new());
    for n in [120, 576, 1400, 9000] {
        let inner = inner(n);
        let mut p = ipv4(0, 0);
        p.extend_from_slice(&inner);
        let sent = c.output(&mut scratch, &mut p, 20, IpProtocol::IPV4).unwrap();
        assert!(matches!(sent, Sent::Compressed { .. }), "{n}: {sent:?}");
        // The caller's part: the outer header names IPComp and has the new length.
        let outer = ipv4(IpProtocol::IPCOMP.0, p.len());
        p[..20].copy_from_slice(&outer);
        packets.push(p);
        inners.push(inner);
    }
    let dir = std::env::temp_dir().join(format!("ipcomp-tshark-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("ipcomp.pcap");
    std::fs::write(&file, pcap(&packets)).unwrap();
    let out = Command::new("tshark")
        .args(["-r", file.to_str().unwrap(), "-T", "fields", "-e", "ip.proto", "-e", "ipcomp.next_header"])
        .args(["-e", "ipcomp.flags", "-e", "ipcomp.cpi", "-e", "_ws.malformed", "-e", "_ws.expert"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), packets.len(), "{text}");
    for l in &lines {
        let f: Vec<&str> = l.split('\t').collect();
        // "108,17": tshark inflated the payload itself and found the inner UDP packet.
        assert_eq!(&f[..4], &["108,17", "0x04", "0x00", "0x4321"], "{l}");
        assert!(f[4..].iter().all(|x| x.is_empty()), "malformed or expert info: {l}");
    }
    // Python's zlib inflates each compressed payload to the inner packet.
    let hex: String = packets
        .iter()
        .map(|p| p[24..].iter().map(|b| format!("{b:02x}")).collect::<String>() + "\n")
        .collect();
    let mut py = Command::new("python3")
        .args(["-c", "import sys, zlib\nfor l in sys.stdin:\n d = zlib.decompressobj(-15)\n print((d.decompress(bytes.fromhex(l.strip())) + d.flush()).hex())"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = py.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(hex.as_bytes()));
    let out = py.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    let got: Vec<String> = String::from_utf8(out.stdout).unwrap().lines().map(str::to_owned).collect();
    let want: Vec<String> = inners.iter().map(|p| p.iter().map(|b| format!("{b:02x}")).collect()).collect();
    assert_eq!(got, want);
    let _ = std::fs::remove_dir_all(&dir);
}
