//! ipsecd's side of the relay socket: it listens, attaches one key manager at a time,
//! hands it each IKE datagram without ever waiting for it ([`Relay::offer`]), and sends
//! what it answers through an [`Outlet`] (the network side's sockets, `crate::net::ike`).

use std::io::{ErrorKind, IoSlice};
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};

use ipsec_wire::ike_relay::{self, Datagram, Record, MAX_RECORD};
use nix::libc;
use nix::sys::socket::{recv, MsgFlags};
use socket2::{Domain, SockAddr, Socket, Type};

use super::counters::RelayCounters;

/// Where the key manager's datagrams leave: the network side's sockets.
pub trait Outlet: Send + Sync {
    /// Sends `d.bytes` from `d.local` to `d.remote`: from the NAT-T port behind the Non-ESP
    /// Marker when `d.nat_t`, else from the IKE port.
    fn send(&self, d: &Datagram) -> Result<(), OutError>;
}

/// Why a key manager's datagram was not sent.
#[derive(Debug)]
pub enum OutError {
    /// Its local port is not the port its flag names (the IKE port, or the NAT-T port).
    WrongPort,
    /// The kernel refused it.
    Io(nix::errno::Errno),
}

/// What [`Relay::offer`] did with a datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Offer {
    /// The key manager has it.
    Relayed,
    /// A key manager is attached, but the datagram did not reach it (its queue was full,
    /// it was going away): counted, dropped.
    Dropped,
    /// No key manager is attached: counted (`no_key_manager`); the caller drops it.
    Unattached,
}

/// The relay socket's send buffer towards the key manager, which bounds what waits for it
/// (a Unix socket charges queued records to the sender): about 200 full-size IKE
/// messages of 1,280 bytes with their overhead, or a dozen of the largest. Past it, datagrams are
/// dropped and counted (`key_manager_full`), never waited for.
const QUEUE_BYTES: usize = 1 << 20;

/// What a refused key manager is told.
pub const REFUSAL: &str = "another key manager is attached to ipsecd";

/// The relay: the listening socket's path, the attached key manager, the counters.
pub struct Relay {
    path: PathBuf,
    /// The attached key manager's connection. Locked once per IKE datagram (never per ESP
    /// packet) and only around a non-blocking send.
    km: Mutex<Option<Arc<Socket>>>,
    pub counters: RelayCounters,
}

impl Relay {
    /// Binds the relay socket at `path`, mode 0600 (root only). A socket file nobody
    /// answers on is left over from a crash and is replaced; one that answers belongs to
    /// another ipsecd, and start-up is refused.
    pub fn bind(path: &Path) -> Result<(Arc<Relay>, Socket), String> {
        let err = |e: std::io::Error| format!("IKE relay socket {}: {e}", path.display());
        let addr = SockAddr::unix(path).map_err(err)?;
        if let Ok(probe) = Socket::new(Domain::UNIX, Type::SEQPACKET, None) {
            if probe.connect(&addr).is_ok() {
                return Err(format!("another ipsecd is already relaying IKE on {}", path.display()));
            }
        }
        let _ = std::fs::remove_file(path);
        let l = Socket::new(Domain::UNIX, Type::SEQPACKET, None).map_err(err)?;
        l.bind(&addr).map_err(err)?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(err)?;
        l.listen(4).map_err(err)?;
        let relay =
            Relay { path: path.to_path_buf(), km: Mutex::new(None), counters: RelayCounters::default() };
        Ok((Arc::new(relay), l))
    }

    /// The relay socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether a key manager is attached.
    pub fn attached(&self) -> bool {
        self.km.lock().unwrap_or_else(PoisonError::into_inner).is_some()
    }

    /// `ipsecctl stats`'s line.
    pub fn stats(&self) -> String {
        self.counters.stats(self.attached())
    }

    /// The metrics' lines.
    pub fn prometheus(&self) -> String {
        self.counters.prometheus(self.attached())
    }

    /// Hands an IKE message that arrived at `local` from `remote` (on the NAT-T port, its
    /// marker already off: `nat_t`) to the key manager, without waiting: one non-blocking
    /// send of the header and the message as they are (no copy). What does not fit is
    /// counted and dropped.
    pub fn offer(&self, local: SocketAddr, remote: SocketAddr, nat_t: bool, message: &[u8]) -> Offer {
        let c = &self.counters;
        let km = self.km.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(km) = km.as_ref() else {
            c.no_key_manager.fetch_add(1, Ordering::Relaxed);
            return Offer::Unattached;
        };
        let header = match ike_relay::header_of(local, remote, nat_t, message.len()) {
            Ok(h) => h,
            Err(e) => {
                // A datagram the format cannot carry (longer than its largest message).
                c.refuse(e);
                return Offer::Dropped;
            }
        };
        let flags = libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL;
        match km.send_vectored_with_flags(&[IoSlice::new(&header), IoSlice::new(message)], flags) {
            Ok(_) => {
                c.relayed_in.fetch_add(1, Ordering::Relaxed);
                Offer::Relayed
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                c.key_manager_full.fetch_add(1, Ordering::Relaxed);
                Offer::Dropped
            }
            Err(e) => {
                c.key_manager_errors.fetch_add(1, Ordering::Relaxed);
                tracing::debug!("relaying {} bytes from {remote} to the key manager: {e}", message.len());
                Offer::Dropped
            }
        }
    }

    /// Accepts key managers on `listener` for ever: the first is attached (told so with an
    /// `attached` record, and read by a thread of its own until it goes); while it is, any
    /// other is told why it is refused and closed.
    pub fn serve(self: &Arc<Self>, listener: &Socket, out: Arc<dyn Outlet>) {
        loop {
            let sock = match listener.accept() {
                Ok((s, _)) => s,
                Err(e) => {
                    tracing::warn!("IKE relay socket: accept: {e}");
                    std::thread::sleep(std::time::Duration::from_millis(100));
                    continue;
                }
            };
            let mut km = self.km.lock().unwrap_or_else(PoisonError::into_inner);
            if km.is_some() {
                drop(km);
                self.counters.second_clients.fetch_add(1, Ordering::Relaxed);
                tracing::warn!("IKE relay: a second key manager refused: {REFUSAL}");
                send_status(&sock, &Record::Refused(REFUSAL.into()));
                continue;
            }
            let _ = sock.set_send_buffer_size(QUEUE_BYTES);
            // `attached` first: the key manager's first record, before any datagram.
            if !send_status(&sock, &Record::Attached) {
                continue;
            }
            let sock = Arc::new(sock);
            *km = Some(sock.clone());
            drop(km);
            self.counters.attaches.fetch_add(1, Ordering::Relaxed);
            tracing::info!("IKE relay: a key manager attached");
            let (relay, out) = (self.clone(), out.clone());
            let spawned = std::thread::Builder::new()
                .name("ipsecd-ike-km".into())
                .spawn(move || relay.read_key_manager(&sock, &*out));
            if let Err(e) = spawned {
                tracing::error!("IKE relay: no thread for the key manager: {e}");
                self.detach();
            }
        }
    }

    /// Reads the key manager's records until it goes, sending each datagram; a malformed
    /// record is counted under its cause and skipped.
    fn read_key_manager(&self, sock: &Socket, out: &dyn Outlet) {
        let mut buf = vec![0u8; MAX_RECORD + 1];
        let c = &self.counters;
        loop {
            // MSG_TRUNC: the record's whole length, even where it did not fit the buffer.
            let n = match recv(sock.as_raw_fd(), &mut buf, MsgFlags::MSG_TRUNC) {
                Ok(0) => break,
                Ok(n) => n,
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => {
                    tracing::info!("IKE relay: reading the key manager: {e}");
                    break;
                }
            };
            let record =
                if n > buf.len() { Err(ike_relay::Error::TooLong(n)) } else { ike_relay::decode(&buf[..n]) };
            match record {
                Ok(Record::Datagram(d)) => match out.send(&d) {
                    Ok(()) => {
                        c.relayed_out.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(OutError::WrongPort) => {
                        c.wrong_port.fetch_add(1, Ordering::Relaxed);
                        tracing::debug!(
                            "IKE relay: a datagram from port {} (nat_t {}): not ours",
                            d.local.port(),
                            d.nat_t
                        );
                    }
                    Err(OutError::Io(e)) => {
                        c.send_errors.fetch_add(1, Ordering::Relaxed);
                        tracing::debug!(
                            "IKE relay: sending {} bytes from {} to {}: {e}",
                            d.bytes.len(),
                            d.local,
                            d.remote
                        );
                    }
                },
                Ok(_) => {
                    c.unexpected.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) => {
                    c.refuse(e);
                    tracing::debug!("IKE relay: a record refused: {e}");
                }
            }
        }
        self.detach();
        tracing::info!("IKE relay: the key manager detached");
    }

    fn detach(&self) {
        *self.km.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }
}

/// Sends a status record to a fresh connection; false if it could not be sent.
fn send_status(sock: &Socket, r: &Record) -> bool {
    let Ok(b) = ike_relay::encode(r) else { return false };
    sock.send_with_flags(&b, libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL).is_ok()
}

/// The relay socket's path unless `--ike-socket` says otherwise: beside the control
/// socket, its name with `-ike` before `.sock` (`/run/ipsecd.sock`:
/// [`crate::ike_relay::DEFAULT_SOCKET`]), so that daemons with their own control sockets
/// get their own relay sockets too.
pub fn default_path(control: &Path) -> PathBuf {
    let name = control.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let name = match name.strip_suffix(".sock") {
        Some(stem) => format!("{stem}-ike.sock"),
        None => format!("{name}-ike"),
    };
    control.with_file_name(name)
}

#[cfg(test)]
mod tests {
    use std::io::ErrorKind;
    use std::sync::mpsc;
    use std::time::{Duration, Instant};

    use super::super::Client;
    use super::*;

    /// Where the key manager's datagrams would leave: kept, for the test to read (the
    /// network side's own is exercised end to end, tests/ike_relay.rs).
    struct Kept(Mutex<mpsc::Sender<Datagram>>);

    impl Outlet for Kept {
        fn send(&self, d: &Datagram) -> Result<(), OutError> {
            if d.local.port() == 1 {
                return Err(OutError::WrongPort);
            }
            let _ = self.0.lock().unwrap().send(d.clone());
            Ok(())
        }
    }

    fn relay(name: &str) -> (Arc<Relay>, PathBuf, mpsc::Receiver<Datagram>) {
        let path = std::env::temp_dir().join(format!("ipsecd-relay-{}-{name}.sock", std::process::id()));
        let (relay, listener) = Relay::bind(&path).unwrap();
        let (tx, rx) = mpsc::channel();
        let out: Arc<dyn Outlet> = Arc::new(Kept(Mutex::new(tx)));
        let r = relay.clone();
        std::thread::spawn(move || r.serve(&listener, out));
        (relay, path, rx)
    }

    fn wait_for(what: &str, f: impl Fn() -> bool) {
        let until = Instant::now() + Duration::from_secs(10);
        while !f() {
            assert!(Instant::now() < until, "waited 10 s for {what}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn addrs() -> (SocketAddr, SocketAddr) {
        ("192.0.2.1:4500".parse().unwrap(), "198.51.100.9:61001".parse().unwrap())
    }

    #[test]
    fn the_socket_is_root_only() {
        let (_relay, path, _) = relay("mode");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let _ = std::fs::remove_file(path);
    }

    #[test]
    fn datagrams_go_both_ways_with_their_addresses() {
        let (relay, path, out) = relay("both");
        let (local, remote) = addrs();
        assert_eq!(relay.offer(local, remote, true, b"before"), Offer::Unattached);
        assert_eq!(relay.counters.no_key_manager.load(Ordering::Relaxed), 1);
        let mut km = Client::connect(&path).unwrap();
        wait_for("the key manager attached", || relay.attached());
        assert_eq!(relay.offer(local, remote, true, b"ike message"), Offer::Relayed);
        let d = km.recv().unwrap();
        assert_eq!((d.local, d.remote, d.nat_t, &d.bytes[..]), (local, remote, true, &b"ike message"[..]));
        km.send(&Datagram { bytes: b"answer".to_vec(), ..d.clone() }).unwrap();
        let sent = out.recv_timeout(Duration::from_secs(10)).unwrap();
        assert_eq!(
            (sent.local, sent.remote, sent.nat_t, &sent.bytes[..]),
            (local, remote, true, &b"answer"[..])
        );
        // From a port that is not ours: not sent, counted.
        km.send(&Datagram { local: "192.0.2.1:1".parse().unwrap(), ..d }).unwrap();
        wait_for("wrong_port", || relay.counters.wrong_port.load(Ordering::Relaxed) == 1);
        assert_eq!(relay.counters.relayed_in.load(Ordering::Relaxed), 1);
        assert_eq!(relay.counters.relayed_out.load(Ordering::Relaxed), 1);
        let _ = std::fs::remove_file(path);
    }

    #[test]
    fn a_second_key_manager_is_refused_with_the_reason_until_the_first_goes() {
        let (relay, path, _) = relay("second");
        let first = Client::connect(&path).unwrap();
        let e = Client::connect(&path).err().expect("a second key manager is refused");
        assert_eq!(e.kind(), ErrorKind::ConnectionRefused);
        assert!(e.to_string().contains(REFUSAL), "{e}");
        assert_eq!(relay.counters.second_clients.load(Ordering::Relaxed), 1);
        drop(first);
        wait_for("the first key manager detached", || !relay.attached());
        let _again = Client::connect(&path).unwrap();
        wait_for("two attaches", || relay.counters.attaches.load(Ordering::Relaxed) == 2);
        let _ = std::fs::remove_file(path);
    }

    #[test]
    fn malformed_records_are_counted_by_cause_and_the_connection_goes_on() {
        let (relay, path, out) = relay("malformed");
        let km = Client::connect(&path).unwrap();
        let fd = km.as_raw_fd();
        let send = |b: &[u8]| nix::sys::socket::send(fd, b, MsgFlags::empty()).unwrap();
        send(&[1, 4, 0]);
        send(&[9; 40]);
        let (local, remote) = addrs();
        let mut good = ike_relay::encode(&Record::Datagram(Datagram {
            local,
            remote,
            nat_t: true,
            bytes: b"x".to_vec(),
        }))
        .unwrap();
        good[2] = 0x80;
        send(&good);
        send(&ike_relay::encode(&Record::Attached).unwrap());
        good[2] = 1;
        send(&good);
        assert_eq!(out.recv_timeout(Duration::from_secs(10)).unwrap().bytes, b"x");
        let c = &relay.counters;
        assert_eq!(c.refused(ike_relay::Error::Truncated(0)), 1);
        assert_eq!(c.refused(ike_relay::Error::Version(0)), 1);
        assert_eq!(c.refused(ike_relay::Error::Flags(0)), 1);
        assert_eq!(c.unexpected.load(Ordering::Relaxed), 1);
        assert!(relay.attached());
        let _ = std::fs::remove_file(path);
    }

    /// A key manager that never reads: the relay's queue fills, and every offer after that
    /// returns at once, dropped and counted.
    #[test]
    fn a_stuck_key_manager_never_blocks_the_offer() {
        let (relay, path, _) = relay("stuck");
        let _km = Client::connect(&path).unwrap();
        wait_for("the key manager attached", || relay.attached());
        let (local, remote) = addrs();
        let message = vec![0x5a; 1280];
        let t = Instant::now();
        let mut outcomes = [0usize; 2];
        for _ in 0..5000 {
            match relay.offer(local, remote, true, &message) {
                Offer::Relayed => outcomes[0] += 1,
                Offer::Dropped => outcomes[1] += 1,
                Offer::Unattached => panic!("attached"),
            }
        }
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
        assert!(outcomes[0] > 0 && outcomes[1] > 0, "{outcomes:?}");
        assert_eq!(relay.counters.key_manager_full.load(Ordering::Relaxed), outcomes[1] as u64);
        let _ = std::fs::remove_file(path);
    }

    #[test]
    fn the_default_path_sits_beside_the_control_socket() {
        assert_eq!(
            default_path(Path::new(crate::ctl::DEFAULT_SOCKET)),
            Path::new(super::super::DEFAULT_SOCKET)
        );
        assert_eq!(default_path(Path::new("/tmp/t/ctl")), Path::new("/tmp/t/ctl-ike"));
    }
}
