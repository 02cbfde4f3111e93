//! scapy's ESP (`SecurityAssociation`, scapy 2.8.0) as an independent peer for interop tests.
//!
//! [`ScapyPeer`] runs `tests/scapy/peer.py` in the virtualenv `scripts/setup` installs at
//! `target/peers-venv` and talks JSON Lines with it; that script's header describes the
//! protocol and what scapy does on the wire (padding, IVs, ESN, IPv6 transport, NAT-T).
//! One Python process serves a whole test binary ([`ScapyPeer::for_test`]): starting one and
//! importing scapy takes about half a second, a request about a millisecond.

use std::io::{BufRead, BufReader, Write};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::{Mutex, OnceLock};

use ipsec_core::control::{Mode, Proto, SaSpec};
use serde_json::{json, Value};

/// Why scapy did not decrypt a packet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PeerError {
    /// The ICV (HMAC or AEAD tag) did not verify.
    Integrity,
    /// Anything else: a malformed packet, an SA the peer refuses, the peer gone.
    Other(String),
}

impl std::fmt::Display for PeerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PeerError::Integrity => f.write_str("integrity check failed"),
            PeerError::Other(why) => f.write_str(why),
        }
    }
}

/// A packet scapy decrypted, with the framing it found, which scapy itself does not check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decrypted {
    /// The decapsulated IP packet.
    pub packet: Vec<u8>,
    /// The 64-bit sequence number scapy authenticated (low 32 bits from the packet).
    pub seq: u64,
    pub iv: Vec<u8>,
    pub padding: Vec<u8>,
    /// The trailer's next header.
    pub next_header: u8,
}

/// A running peer. Requests are serialized: the process answers one at a time.
pub struct ScapyPeer {
    io: Mutex<Io>,
}

struct Io {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl Drop for Io {
    fn drop(&mut self) {
        // End of input is the peer's signal to exit.
        drop(self.stdin.take());
        let _ = self.child.wait();
    }
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn venv_python() -> PathBuf {
    repo_root().join("target/peers-venv/bin/python")
}

/// Whether `scripts/setup` has installed the venv for the current requirements; the error
/// says what to do.
fn venv_installed() -> Result<(), String> {
    let root = repo_root();
    let wanted = std::fs::read(root.join("ipsec/core/tests/scapy/requirements.txt"))
        .map_err(|e| format!("ipsec/core/tests/scapy/requirements.txt: {e}"))?;
    let installed = std::fs::read(root.join("target/peers-venv/requirements.txt")).ok();
    if !venv_python().exists() || installed.as_deref() != Some(&wanted[..]) {
        return Err("the scapy peer's virtualenv (target/peers-venv) is missing or out of date: \
                    run scripts/setup"
            .into());
    }
    Ok(())
}

/// Whether a missing peer fails the tests (CI must run the interop) rather than skipping them.
fn required() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0")
}

impl ScapyPeer {
    /// Starts a peer and waits until scapy is imported.
    pub fn new() -> Result<ScapyPeer, String> {
        venv_installed()?;
        let script = repo_root().join("ipsec/core/tests/scapy/peer.py");
        let mut child = Command::new(venv_python())
            .arg(&script)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            // scapy's warnings and Python tracebacks show up in the test's output.
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("starting {}: {e} (run scripts/setup)", venv_python().display()))?;
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        let mut io = Io { child, stdin, stdout };
        let hello = io.read_line().map_err(|e| format!("scapy peer did not start: {e}"))?;
        if hello["ready"] != json!(true) {
            return Err(format!("scapy peer did not start: {hello}"));
        }
        Ok(ScapyPeer { io: Mutex::new(io) })
    }

    /// One peer for the whole test binary, started on first use.
    pub fn shared() -> Result<&'static ScapyPeer, String> {
        static PEER: OnceLock<Result<ScapyPeer, String>> = OnceLock::new();
        PEER.get_or_init(ScapyPeer::new).as_ref().map_err(Clone::clone)
    }

    /// The shared peer for a test, or `None` (the test should return) when the venv is not
    /// installed and `CI` is not set. Panics when the venv is missing under CI, or installed
    /// but the peer does not start.
    pub fn for_test() -> Option<&'static ScapyPeer> {
        if let Err(why) = venv_installed() {
            if required() {
                panic!("{why} (CI is set, so the scapy interop tests cannot be skipped)");
            }
            eprintln!("skipping the scapy interop test: {why}");
            return None;
        }
        Some(ScapyPeer::shared().unwrap_or_else(|e| panic!("{e}")))
    }

    /// Encrypts the IP packet `plain` as the `seq`th packet of the SA (a random IV, as scapy
    /// chooses), and returns the packet as it goes on the wire: outer IP header, UDP header
    /// with NAT-T, ESP. `tunnel` holds the outer source and destination in tunnel mode.
    pub fn encrypt(
        &self,
        spec: &SaSpec,
        tunnel: Option<(IpAddr, IpAddr)>,
        seq: u64,
        plain: &[u8],
    ) -> Result<Vec<u8>, String> {
        self.encrypt_request(spec, tunnel, seq, None, plain)
    }

    /// [`Self::encrypt`] with the explicit IV given (8 bytes for AEAD and 3DES, 16 for AES-CBC,
    /// none for NULL), so that the ESP can be compared byte for byte with another sender's.
    pub fn encrypt_with_iv(
        &self,
        spec: &SaSpec,
        tunnel: Option<(IpAddr, IpAddr)>,
        seq: u64,
        iv: &[u8],
        plain: &[u8],
    ) -> Result<Vec<u8>, String> {
        self.encrypt_request(spec, tunnel, seq, Some(iv), plain)
    }

    fn encrypt_request(
        &self,
        spec: &SaSpec,
        tunnel: Option<(IpAddr, IpAddr)>,
        seq: u64,
        iv: Option<&[u8]>,
        plain: &[u8],
    ) -> Result<Vec<u8>, String> {
        let mut req = json!({"op": "encrypt", "sa": sa_json(spec, tunnel, seq)?, "packet": hex(plain)});
        if let Some(iv) = iv {
            req["iv"] = json!(hex(iv));
        }
        let reply = self.call(&req).map_err(|e| e.to_string())?;
        packet_field(&reply, "packet").map_err(|e| e.to_string())
    }

    /// Decrypts and decapsulates a packet as it came off the wire (outer IP header, UDP
    /// header with NAT-T, ESP). With ESN the high 32 bits of the sequence number are taken
    /// as 0; see [`Self::decrypt_near`].
    pub fn decrypt(
        &self,
        spec: &SaSpec,
        tunnel: Option<(IpAddr, IpAddr)>,
        packet: &[u8],
    ) -> Result<Vec<u8>, PeerError> {
        self.decrypt_near(spec, tunnel, 0, packet).map(|d| d.packet)
    }

    /// [`Self::decrypt`], taking the packet's 64-bit sequence number (with ESN) as the one
    /// nearest `near` whose low 32 bits the packet carries, and returning the framing too.
    pub fn decrypt_near(
        &self,
        spec: &SaSpec,
        tunnel: Option<(IpAddr, IpAddr)>,
        near: u64,
        packet: &[u8],
    ) -> Result<Decrypted, PeerError> {
        let sa = sa_json(spec, tunnel, near).map_err(PeerError::Other)?;
        let reply = self.call(&json!({"op": "decrypt", "sa": sa, "packet": hex(packet)}))?;
        let field =
            |name: &str| reply[name].as_u64().ok_or_else(|| PeerError::Other(format!("bad reply: {reply}")));
        Ok(Decrypted {
            packet: packet_field(&reply, "packet")?,
            seq: field("seq")?,
            iv: packet_field(&reply, "iv")?,
            padding: packet_field(&reply, "padding")?,
            next_header: field("nh")? as u8,
        })
    }

    /// Sends one request and reads its reply; `ok: false` becomes an error.
    fn call(&self, req: &Value) -> Result<Value, PeerError> {
        // Poisoning cannot leave a request half-answered (nothing here panics between the
        // write and the read), so a test that panicked elsewhere need not fail the others.
        let mut io = self.io.lock().unwrap_or_else(|p| p.into_inner());
        let reply = io.exchange(req).map_err(|e| PeerError::Other(format!("scapy peer: {e}")))?;
        match reply["ok"].as_bool() {
            Some(true) => Ok(reply),
            Some(false) => match reply["error"].as_str() {
                Some("integrity") => Err(PeerError::Integrity),
                Some(why) => Err(PeerError::Other(format!("scapy: {why}"))),
                None => Err(PeerError::Other(format!("bad reply: {reply}"))),
            },
            None => Err(PeerError::Other(format!("bad reply: {reply}"))),
        }
    }
}

impl Io {
    fn exchange(&mut self, req: &Value) -> Result<Value, String> {
        let stdin = self.stdin.as_mut().ok_or("closed")?;
        let mut line = req.to_string();
        line.push('\n');
        stdin.write_all(line.as_bytes()).and_then(|()| stdin.flush()).map_err(|e| e.to_string())?;
        self.read_line()
    }

    fn read_line(&mut self) -> Result<Value, String> {
        let mut line = String::new();
        match self.stdout.read_line(&mut line) {
            Ok(0) => Err("exited (its stderr is above)".into()),
            Ok(_) => serde_json::from_str(&line).map_err(|e| format!("{e} in {line:?}")),
            Err(e) => Err(e.to_string()),
        }
    }
}

/// The peer's SA object for `spec`. The mode comes from the SA, or, for setkey's default
/// `any`, from whether tunnel endpoints are given.
fn sa_json(spec: &SaSpec, tunnel: Option<(IpAddr, IpAddr)>, seq: u64) -> Result<Value, String> {
    if !matches!(spec.proto, Proto::Esp | Proto::EspUdp | Proto::Ah) {
        return Err(format!("the scapy peer does ESP and AH only, not {}", spec.proto.name()));
    }
    let mode = match (spec.mode, tunnel) {
        (Mode::Tunnel | Mode::Any, Some(_)) => "tunnel",
        (Mode::Transport | Mode::Any, None) => "transport",
        (Mode::Tunnel, None) => return Err("a tunnel-mode SA needs tunnel endpoints".into()),
        (Mode::Transport, Some(_)) => return Err("a transport-mode SA takes no tunnel endpoints".into()),
    };
    Ok(json!({
        "proto": if spec.proto == Proto::Ah { "ah" } else { "esp" },
        "spi": spec.spi,
        "enc": spec.enc.name(),
        "enc_key": hex(spec.enc_key.as_bytes()),
        "auth": spec.auth.as_ref().map(|(alg, _)| alg.name()),
        "auth_key": spec.auth.as_ref().map_or(String::new(), |(_, key)| hex(key.as_bytes())),
        "mode": mode,
        "tunnel_src": tunnel.map(|(src, _)| src.to_string()),
        "tunnel_dst": tunnel.map(|(_, dst)| dst.to_string()),
        "esn": spec.esn,
        "seq": seq,
        "natt": spec.natt.map(|n| json!({"sport": n.sport, "dport": n.dport})),
    }))
}

fn packet_field(reply: &Value, name: &str) -> Result<Vec<u8>, PeerError> {
    reply[name].as_str().and_then(unhex).ok_or_else(|| PeerError::Other(format!("bad reply: {reply}")))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 {
        return None;
    }
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok()).collect()
}
