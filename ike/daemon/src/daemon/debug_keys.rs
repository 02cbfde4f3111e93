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
