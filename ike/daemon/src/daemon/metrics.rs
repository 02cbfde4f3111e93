//! iked's counters as the operator reads them: `ipsecctl ike stats` (one text block) and
//! the metrics endpoint (`iked --metrics ADDR`, Prometheus' text format, the same format
//! and conventions as ipsecd's `--metrics`, each name prefixed `iked_`).
//!
//! ```text
//!  ike_core::stats::Stats + the SA table's sizes ─▶ text()        ─▶ ipsecctl ike stats
//!                                                 ─▶ prometheus() ─▶ Endpoint::publish
//!  Endpoint: the loop publishes a snapshot at most every PUBLISH_EVERY; a thread per
//!  scraper (ipsecd::serve, bounded) answers any request with the latest one
//! ```
//!
//! The loop owns the state machine and is one thread; the endpoint never touches the
//! engine, so a slow scraper holds nothing up, and what it reads is at most
//! [`PUBLISH_EVERY`] plus one tick old.

use std::fmt::Write as _;
use std::net::{SocketAddr, TcpListener};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ike_core::stats::{Drop, ExchangeCounts, Stats};
use ipsecd::serve::{self, Counters};

/// How often the loop renders a new snapshot for the endpoint.
pub const PUBLISH_EVERY: Duration = Duration::from_millis(250);

/// Scrapers served at once, and how long each has to send its request and take the reply.
const CLIENTS: usize = 4;
const REQUEST_WAIT: Duration = Duration::from_secs(2);
const REPLY_WAIT: Duration = Duration::from_secs(10);
const MAX_HEAD: usize = 16 << 10;

/// What is counted besides the core's [`Stats`]: the SA table now.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Gauges {
    pub ike_sas: usize,
    pub child_sas: usize,
}

fn exchanges(st: &Stats) -> [(&'static str, &ExchangeCounts); 5] {
    [
        ("IKE_SA_INIT", &st.sa_init),
        ("IKE_AUTH", &st.auth),
        ("CREATE_CHILD_SA", &st.create_child_sa),
        ("INFORMATIONAL", &st.informational),
        ("other", &st.other),
    ]
}

/// `ipsecctl ike stats`: every counter, zeros too (the list is the same every time).
pub fn text(st: &Stats, g: Gauges) -> String {
    let mut s = String::new();
    for (name, e) in exchanges(st) {
        let _ = writeln!(
            s,
            "{name}: requests sent {}, received {}; responses sent {}, received {}; \
             errors sent {}, received {}; dropped {}",
            e.requests_sent,
            e.requests_received,
            e.responses_sent,
            e.responses_received,
            e.errors_sent,
            e.errors_received,
            e.dropped
        );
    }
    let _ = writeln!(
        s,
        "IKE SAs {}, CHILD_SAs {}; IKE SAs up {}, down {}, CHILD_SAs installed {}",
        g.ike_sas, g.child_sas, st.ike_sas_up, st.ike_sas_down, st.child_sas_installed
    );
    let _ = writeln!(
        s,
        "half-open {}, expired {}; cookies {}, sent {}, accepted {}",
        st.half_open,
        st.half_open_expired,
        if st.cookies_on == 1 { "on" } else { "off" },
        st.cookies_sent,
        st.cookies_accepted
    );
    let _ = writeln!(
        s,
        "retransmissions {}, responses resent {}, timeouts {}; liveness checks {}, peer moves {}",
        st.retransmissions, st.responses_resent, st.retransmit_timeouts, st.liveness_checks, st.peer_moves
    );
    let _ = writeln!(
        s,
        "authentication failures {}, refused by the peer {}, local {}, untrusted certificates {}",
        st.auth_failures, st.auth_refused_by_peer, st.auth_local_failures, st.untrusted_certs
    );
    let _ = writeln!(
        s,
        "fragments sent {}, received {}, messages reassembled {}",
        st.fragments_sent, st.fragments_received, st.messages_reassembled
    );
    s.push_str("dropped:");
    for (i, d) in Drop::ALL.iter().enumerate() {
        let _ = write!(s, "{} {} {}", if i == 0 { "" } else { "," }, d.name(), st.drops(*d));
    }
    s.push('\n');
    s
}

/// The counters in Prometheus' text format.
pub fn prometheus(st: &Stats, g: Gauges) -> String {
    let mut o = String::new();
    for (name, kind, help) in [
        ("messages_total", "counter", "IKE messages by exchange, direction (in, out) and kind (request, response)."),
        ("error_responses_total", "counter", "Responses refusing a request with an error notify, by exchange and direction (sent: we refused; received: we were refused, or the answer did not fit)."),
        ("exchange_drops_total", "counter", "Received messages dropped without a change of state, by exchange (causes in iked_drops_total)."),
        ("drops_total", "counter", "Received messages dropped without a change of state, by cause."),
        ("ike_sas", "gauge", "IKE SAs in the table (any state)."),
        ("child_sas", "gauge", "CHILD_SAs of those IKE SAs."),
        ("ike_sas_up_total", "counter", "IKE SAs established."),
        ("ike_sas_down_total", "counter", "Established IKE SAs that went down."),
        ("child_sas_installed_total", "counter", "CHILD_SAs negotiated and handed to ipsecd."),
        ("half_open", "gauge", "Half-open IKE SAs (IKE_SA_INIT answered, IKE_AUTH not done)."),
        ("half_open_expired_total", "counter", "Half-open IKE SAs deleted because IKE_AUTH did not come in time."),
        ("cookies_on", "gauge", "1 while IKE_SA_INIT requests need a cookie (too many half-open SAs), else 0."),
        ("cookies_total", "counter", "Cookies, by outcome: sent (a COOKIE notify asked for) or accepted (a valid one came back)."),
        ("retransmissions_total", "counter", "Requests resent by the retransmission timer."),
        ("responses_resent_total", "counter", "Cached responses resent for a retransmitted request."),
        ("retransmit_timeouts_total", "counter", "Requests given up on after the last retransmission."),
        ("liveness_checks_total", "counter", "Liveness checks (empty INFORMATIONAL) sent."),
        ("peer_moves_total", "counter", "Peers behind a NAT that moved to another port, followed."),
        ("auth_failures_total", "counter", "Failed authentications, by cause: peer (we refused the peer), refused_by_peer (the peer refused us), local (our AUTH could not be made)."),
        ("untrusted_certs_total", "counter", "Peer certificates refused (also counted in iked_auth_failures_total)."),
        ("fragments_sent_total", "counter", "IKE fragments (RFC 7383 SKF payloads) sent."),
        ("fragments_received_total", "counter", "IKE fragments received and authenticated."),
        ("messages_reassembled_total", "counter", "Fragmented IKE messages reassembled."),
    ] {
        let _ = writeln!(o, "# HELP iked_{name} {help}\n# TYPE iked_{name} {kind}");
    }
    for (name, e) in exchanges(st) {
        for (dir, kind, n) in [
            ("out", "request", e.requests_sent),
            ("in", "request", e.requests_received),
            ("out", "response", e.responses_sent),
            ("in", "response", e.responses_received),
        ] {
            let _ =
                writeln!(o, "iked_messages_total{{exchange=\"{name}\",dir=\"{dir}\",kind=\"{kind}\"}} {n}");
        }
        let _ =
            writeln!(o, "iked_error_responses_total{{exchange=\"{name}\",dir=\"sent\"}} {}", e.errors_sent);
        let _ = writeln!(
            o,
            "iked_error_responses_total{{exchange=\"{name}\",dir=\"received\"}} {}",
            e.errors_received
        );
        let _ = writeln!(o, "iked_exchange_drops_total{{exchange=\"{name}\"}} {}", e.dropped);
    }
    for d in Drop::ALL {
        let _ = writeln!(o, "iked_drops_total{{reason=\"{}\"}} {}", d.name(), st.drops(d));
    }
    for (name, n) in [
        ("ike_sas", g.ike_sas as u64),
        ("child_sas", g.child_sas as u64),
        ("ike_sas_up_total", st.ike_sas_up),
        ("ike_sas_down_total", st.ike_sas_down),
        ("child_sas_installed_total", st.child_sas_installed),
        ("half_open", st.half_open),
        ("half_open_expired_total", st.half_open_expired),
        ("cookies_on", st.cookies_on),
        ("retransmissions_total", st.retransmissions),
        ("responses_resent_total", st.responses_resent),
        ("retransmit_timeouts_total", st.retransmit_timeouts),
        ("liveness_checks_total", st.liveness_checks),
        ("peer_moves_total", st.peer_moves),
        ("untrusted_certs_total", st.untrusted_certs),
        ("fragments_sent_total", st.fragments_sent),
        ("fragments_received_total", st.fragments_received),
        ("messages_reassembled_total", st.messages_reassembled),
    ] {
        let _ = writeln!(o, "iked_{name} {n}");
    }
    let _ = writeln!(o, "iked_cookies_total{{outcome=\"sent\"}} {}", st.cookies_sent);
    let _ = writeln!(o, "iked_cookies_total{{outcome=\"accepted\"}} {}", st.cookies_accepted);
    for (cause, n) in [
        ("peer", st.auth_failures),
        ("refused_by_peer", st.auth_refused_by_peer),
        ("local", st.auth_local_failures),
    ] {
        let _ = writeln!(o, "iked_auth_failures_total{{cause=\"{cause}\"}} {n}");
    }
    o
}

/// The metrics endpoint: the latest snapshot, served by threads of its own.
pub struct Endpoint {
    snapshot: Arc<Mutex<String>>,
    last: Option<Instant>,
}

impl Endpoint {
    /// Listens on `addr` and serves the snapshots from a thread of its own.
    pub fn start(addr: SocketAddr) -> Result<Endpoint, String> {
        let l = TcpListener::bind(addr).map_err(|e| format!("metrics address {addr}: {e}"))?;
        let snapshot = Arc::new(Mutex::new(String::new()));
        let shared = snapshot.clone();
        std::thread::Builder::new()
            .name("iked-metrics".into())
            .spawn(move || serve_snapshots(&l, shared))
            .map_err(|e| format!("the metrics thread: {e}"))?;
        tracing::info!("metrics on http://{addr}/metrics");
        Ok(Endpoint { snapshot, last: None })
    }

    /// Whether a new snapshot is due at `now`.
    pub fn due(&self, now: Instant) -> bool {
        self.last.is_none_or(|t| now.duration_since(t) >= PUBLISH_EVERY)
    }

    /// The counters scrapers get from now on.
    pub fn publish(&mut self, now: Instant, body: String) {
        self.last = Some(now);
        *self.snapshot.lock().unwrap_or_else(|e| e.into_inner()) = body;
    }
}

/// Answers every connection with the latest snapshot (any request: a scraper's GET
/// /metrics), up to [`CLIENTS`] at once, as ipsecd's endpoint does.
fn serve_snapshots(l: &TcpListener, snapshot: Arc<Mutex<String>>) {
    let counters = Counters::default();
    let busy =
        || b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_vec();
    serve::accept(l.incoming(), "iked-metrics-conn", CLIENTS, &counters, busy, move |mut conn| {
        let head = serve::read_by(&mut conn, Instant::now() + REQUEST_WAIT, MAX_HEAD, |b| {
            b.windows(4).any(|w| w == b"\r\n\r\n")
        });
        if head.is_err() {
            return;
        }
        let body = snapshot.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let reply = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        let _ = serve::write_by(&mut conn, reply.as_bytes(), Instant::now() + REPLY_WAIT);
    });
}
