//! `--debug-keys DIR` (off unless asked): the negotiated keys written where Wireshark reads
//! them, so that a capture of iked's IKE and ESP traffic can be decrypted — for debugging
//! only: anyone who reads these files can read the traffic.
//!
//! ```text
//!  IKE SA up ──▶ ike_line ──▶ DIR/ikev2_decryption_table   (Wireshark's ISAKMP UAT)
//!  CHILD_SA  ──▶ esp_lines ─▶ DIR/esp_sa                   (Wireshark's ESP UAT; two lines,
//!  installed                                                one per direction)
//!  each write ──▶ warn!("… keys written to …")
//! ```
//!
//! The formats are Wireshark's user access tables (`epan/dissectors/packet-isakmp.c`'s
//! `ikev2_uat_flds`: initiator's SPI, responder's SPI, SK_ei, SK_er, encryption algorithm,
//! SK_ai, SK_ar, integrity algorithm; `packet-esp.c`'s `esp_uat_flds`: protocol, source,
//! destination, SPI, encryption, encryption key, authentication, authentication key), one
//! record a line, the algorithms by the names in Wireshark's value strings — the same
//! files strongSwan's `save-keys` plugin writes. SPIs and IKE keys are hex; ESP keys
//! `0x` hex; an AEAD's keys carry their salt, as Wireshark expects. The tests give every
//! line to tshark (`-o uat:…`), which refuses an unknown algorithm name or a key of the
//! wrong length.
//!
//! Wireshark 4.0 (Debian 12) has no ChaCha20-Poly1305 in either table: such an SA's keys
//! are not written, and the log says so.

use std::fmt::Write as _;
use std::fs::OpenOptions;
use std::io::Write as _;
use std::net::IpAddr;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use ike_core::crypto::{Encr, Integ};
use zeroize::Zeroizing;

use super::setkey::ChildInstall;

/// The IKEv2 table's file name in a Wireshark profile.
pub const IKE_FILE: &str = "ikev2_decryption_table";
/// The ESP table's file name in a Wireshark profile.
pub const ESP_FILE: &str = "esp_sa";

/// Wireshark's name of an IKE SA's encryption algorithm (`packet-isakmp.c`), `None` where
/// it has none.
pub fn ike_encr_name(e: Encr) -> Option<&'static str> {
    Some(match e {
        Encr::AesCbc { key_len: 16 } => "AES-CBC-128 [RFC3602]",
        Encr::AesCbc { key_len: 24 } => "AES-CBC-192 [RFC3602]",
        Encr::AesCbc { key_len: 32 } => "AES-CBC-256 [RFC3602]",
        Encr::AesGcm16 { key_len: 16 } => "AES-GCM-128 with 16 octet ICV [RFC5282]",
        Encr::AesGcm16 { key_len: 24 } => "AES-GCM-192 with 16 octet ICV [RFC5282]",
        Encr::AesGcm16 { key_len: 32 } => "AES-GCM-256 with 16 octet ICV [RFC5282]",
        _ => return None,
    })
}

/// Wireshark's name of an IKE SA's integrity algorithm; an AEAD's is `NONE`.
pub fn ike_integ_name(i: Option<Integ>) -> &'static str {
    match i {
        None => "NONE [RFC4306]",
        Some(Integ::HmacSha256_128) => "HMAC_SHA2_256_128 [RFC4868]",
        Some(Integ::HmacSha384_192) => "HMAC_SHA2_384_192 [RFC4868]",
        Some(Integ::HmacSha512_256) => "HMAC_SHA2_512_256 [RFC4868]",
    }
}

/// Wireshark's name of an ESP encryption algorithm (`packet-esp.c`), `None` where it has
/// none.
pub fn esp_encr_name(e: Encr) -> Option<&'static str> {
    match e {
        Encr::AesCbc { .. } => Some("AES-CBC [RFC3602]"),
        Encr::AesGcm16 { .. } => Some("AES-GCM with 16 octet ICV [RFC4106]"),
        Encr::ChaCha20Poly1305 => None,
    }
}

/// Wireshark's name of an ESP authentication algorithm; an AEAD's is `NULL`.
pub fn esp_integ_name(i: Option<Integ>) -> &'static str {
    match i {
        None => "NULL",
        Some(Integ::HmacSha256_128) => "HMAC-SHA-256-128 [RFC4868]",
        Some(Integ::HmacSha384_192) => "HMAC-SHA-384-192 [RFC4868]",
        Some(Integ::HmacSha512_256) => "HMAC-SHA-512-256 [RFC4868]",
    }
}

fn hex(s: &mut String, bytes: &[u8]) {
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
}

/// An IKE SA's keys as they are used.
pub struct IkeSaKeys<'a> {
    pub spi_i: [u8; 8],
    pub spi_r: [u8; 8],
    pub encr: Encr,
    pub integ: Option<Integ>,
    pub sk_ei: &'a [u8],
    pub sk_er: &'a [u8],
    pub sk_ai: &'a [u8],
    pub sk_ar: &'a [u8],
}

/// The `ikev2_decryption_table` record of an IKE SA (with its newline), `None` where
/// Wireshark has no name for its encryption algorithm.
pub fn ike_line(k: &IkeSaKeys<'_>) -> Option<Zeroizing<String>> {
    let encr = ike_encr_name(k.encr)?;
    let mut s = Zeroizing::new(String::with_capacity(512));
    hex(&mut s, &k.spi_i);
    s.push(',');
    hex(&mut s, &k.spi_r);
    s.push(',');
    hex(&mut s, k.sk_ei);
    s.push(',');
    hex(&mut s, k.sk_er);
    let _ = write!(s, ",\"{encr}\",");
    hex(&mut s, k.sk_ai);
    s.push(',');
    hex(&mut s, k.sk_ar);
    let _ = writeln!(s, ",\"{}\"", ike_integ_name(k.integ));
    Some(s)
}

fn esp_record(
    s: &mut String,
    src: IpAddr,
    dst: IpAddr,
    spi: u32,
    c: &ChildInstall,
    encr: &str,
    keys: (&[u8], &[u8]),
) {
    let family = if src.is_ipv4() { "IPv4" } else { "IPv6" };
    let _ = write!(s, "\"{family}\",\"{src}\",\"{dst}\",\"{spi:#010x}\",\"{encr}\",\"0x");
    hex(s, keys.0);
    let _ = write!(s, "\",\"{}\",\"", esp_integ_name(c.integ));
    if !keys.1.is_empty() {
        s.push_str("0x");
        hex(s, keys.1);
    }
    s.push_str("\"\n");
}

/// The two `esp_sa` records of a CHILD_SA (outbound, then inbound), `None` where
/// Wireshark has no name for its encryption algorithm.
pub fn esp_lines(c: &ChildInstall) -> Option<Zeroizing<String>> {
    let encr = esp_encr_name(c.encr)?;
    let mut s = Zeroizing::new(String::with_capacity(1024));
    let o = &c.outbound;
    esp_record(&mut s, c.local, c.remote, o.spi, c, encr, (&o.encr, &o.integ));
    let i = &c.inbound;
    esp_record(&mut s, c.remote, c.local, i.spi, c, encr, (&i.encr, &i.integ));
    Some(s)
}

/// Where the keys go: a directory holding the two tables.
pub struct DebugKeys {
    dir: PathBuf,
}

impl DebugKeys {
    /// Keys will be written under `dir` (created if missing, mode 0700), with a warning in
    /// the log now.
    pub fn open(dir: &Path) -> std::io::Result<DebugKeys> {
        std::fs::create_dir_all(dir)?;
        std::fs::set_permissions(dir, std::os::unix::fs::PermissionsExt::from_mode(0o700))?;
        tracing::warn!(
            "--debug-keys: every negotiated IKE and ESP key will be written under {} \
             (Wireshark's {IKE_FILE} and {ESP_FILE}); anyone who reads them can decrypt the traffic",
            dir.display()
        );
        Ok(DebugKeys { dir: dir.to_path_buf() })
    }

    fn append(&self, file: &str, text: &str) -> std::io::Result<()> {
        let path = self.dir.join(file);
        let mut f = OpenOptions::new().create(true).append(true).mode(0o600).open(&path)?;
        f.write_all(text.as_bytes())?;
        tracing::warn!("--debug-keys: keys written to {}", path.display());
        Ok(())
    }

    /// Appends an IKE SA's record (or says in the log why there is none).
    pub fn ike_sa(&self, k: &IkeSaKeys<'_>) {
        match ike_line(k) {
            Some(l) => {
                if let Err(e) = self.append(IKE_FILE, &l) {
                    tracing::error!("--debug-keys: writing {IKE_FILE}: {e}");
                }
            }
            None => {
                tracing::warn!("--debug-keys: Wireshark cannot decrypt {:?}: IKE keys not written", k.encr)
            }
        }
    }

    /// Appends a CHILD_SA's two records (or says in the log why there are none).
    pub fn child_sa(&self, c: &ChildInstall) {
        match esp_lines(c) {
            Some(l) => {
                if let Err(e) = self.append(ESP_FILE, &l) {
                    tracing::error!("--debug-keys: writing {ESP_FILE}: {e}");
                }
            }
            None => {
                tracing::warn!("--debug-keys: Wireshark cannot decrypt {:?}: ESP keys not written", c.encr)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    //! Every record is given to tshark (Wireshark's dissectors, Debian 12's 4.0), which
    //! checks each field of its user access tables: an unknown algorithm name, or a key
    //! whose length does not fit the algorithm, is an "Invalid -o flag".

    use std::process::Command;

    use ipsec_core::control::{Lifetime, Mode};

    use super::*;
    use crate::daemon::setkey::{NatPorts, SaKeys, Sas};

    /// An empty pcap file (the global header only) for tshark to read.
    fn empty_pcap() -> PathBuf {
        let p = std::env::temp_dir().join(format!("iked-debug-keys-{}.pcap", std::process::id()));
        let mut h = Vec::new();
        h.extend_from_slice(&0xa1b2c3d4u32.to_le_bytes());
        h.extend_from_slice(&2u16.to_le_bytes());
        h.extend_from_slice(&4u16.to_le_bytes());
        h.extend_from_slice(&[0; 8]);
        h.extend_from_slice(&65535u32.to_le_bytes());
        h.extend_from_slice(&1u32.to_le_bytes());
        std::fs::write(&p, h).unwrap();
        p
    }

    /// tshark's verdict on one UAT record: `Ok` or its complaint. `None` without tshark.
    fn tshark(table: &str, record: &str) -> Option<Result<(), String>> {
        let pcap = empty_pcap();
        let o = Command::new("tshark")
            .args(["-r", pcap.to_str().unwrap(), "-o", &format!("uat:{table}:{}", record.trim_end())])
            .output()
            .ok()?;
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        Some(if o.status.success() && !err.contains("Invalid -o flag") { Ok(()) } else { Err(err) })
    }

    fn suites() -> [(Encr, Option<Integ>); 5] {
        [
            (Encr::AesGcm16 { key_len: 16 }, None),
            (Encr::AesGcm16 { key_len: 32 }, None),
            (Encr::AesCbc { key_len: 16 }, Some(Integ::HmacSha256_128)),
            (Encr::AesCbc { key_len: 32 }, Some(Integ::HmacSha384_192)),
            (Encr::AesCbc { key_len: 24 }, Some(Integ::HmacSha512_256)),
        ]
    }

    #[test]
    fn ike_records_are_what_wireshark_reads() {
        for (encr, integ) in suites() {
            let (e, a) = (vec![0x5a; encr.keymat_len()], vec![0xa5; integ.map_or(0, Integ::key_len)]);
            let k = IkeSaKeys {
                spi_i: [1, 2, 3, 4, 5, 6, 7, 8],
                spi_r: [0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18],
                encr,
                integ,
                sk_ei: &e,
                sk_er: &e,
                sk_ai: &a,
                sk_ar: &a,
            };
            let l = ike_line(&k).unwrap();
            assert!(l.starts_with("0102030405060708,1112131415161718,5a5a"), "{}", *l);
            match tshark("ikev2_decryption_table", &l) {
                Some(r) => r.unwrap_or_else(|e| panic!("{encr:?}: {}: {e}", *l)),
                None => eprintln!("tshark is not installed: format not checked against Wireshark"),
            }
            // A key one byte short is refused by Wireshark, so the check can fail.
            let short = &e[1..];
            let bad = ike_line(&IkeSaKeys { sk_ei: short, ..k }).unwrap();
            if let Some(r) = tshark("ikev2_decryption_table", &bad) {
                assert!(r.unwrap_err().contains("does not match the key length"), "{encr:?}");
            }
        }
        let c = IkeSaKeys {
            spi_i: [0; 8],
            spi_r: [0; 8],
            encr: Encr::ChaCha20Poly1305,
            integ: None,
            sk_ei: &[],
            sk_er: &[],
            sk_ai: &[],
            sk_ar: &[],
        };
        assert!(ike_line(&c).is_none(), "Wireshark 4.0 has no ChaCha20-Poly1305 for IKE");
    }

    #[test]
    fn esp_records_are_what_wireshark_reads() {
        for (encr, integ) in suites() {
            let (e, a) = (encr.keymat_len(), integ.map_or(0, Integ::key_len));
            let c = ChildInstall {
                reqid: 1,
                mode: Mode::Tunnel,
                local: "192.0.2.1".parse().unwrap(),
                remote: "192.0.2.2".parse().unwrap(),
                natt: Some(NatPorts { local: 4500, remote: 4500 }),
                encr,
                integ,
                esn: false,
                inbound: SaKeys {
                    spi: 0x1001,
                    encr: Zeroizing::new(vec![1; e]),
                    integ: Zeroizing::new(vec![2; a]),
                },
                outbound: SaKeys {
                    spi: 0xc001,
                    encr: Zeroizing::new(vec![3; e]),
                    integ: Zeroizing::new(vec![4; a]),
                },
                soft: Lifetime::default(),
                hard: Lifetime::default(),
                local_ts: Vec::new(),
                remote_ts: Vec::new(),
                policies: false,
                sas: Sas::Both,
            };
            let text = esp_lines(&c).unwrap();
            let lines: Vec<&str> = text.lines().collect();
            assert_eq!(lines.len(), 2);
            assert!(
                lines[0].starts_with("\"IPv4\",\"192.0.2.1\",\"192.0.2.2\",\"0x0000c001\","),
                "{}",
                lines[0]
            );
            assert!(
                lines[1].starts_with("\"IPv4\",\"192.0.2.2\",\"192.0.2.1\",\"0x00001001\","),
                "{}",
                lines[1]
            );
            assert!(lines[0].contains(&format!("\"0x{}\"", "03".repeat(e))));
            for l in lines {
                if let Some(r) = tshark("esp_sa", l) {
                    r.unwrap_or_else(|err| panic!("{encr:?}: {l}: {err}"));
                }
            }
        }
    }

    /// The files land in the directory, one record appended per SA, private to root.
    #[test]
    fn records_are_appended_to_private_files() {
        let dir = std::env::temp_dir().join(format!("iked-keys-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let d = DebugKeys::open(&dir).unwrap();
        let e = [7u8; 20];
        let k = IkeSaKeys {
            spi_i: [1; 8],
            spi_r: [2; 8],
            encr: Encr::AesGcm16 { key_len: 16 },
            integ: None,
            sk_ei: &e,
            sk_er: &e,
            sk_ai: &[],
            sk_ar: &[],
        };
        d.ike_sa(&k);
        d.ike_sa(&k);
        let text = std::fs::read_to_string(dir.join(IKE_FILE)).unwrap();
        assert_eq!(text.lines().count(), 2);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.join(IKE_FILE)).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777, 0o700);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
