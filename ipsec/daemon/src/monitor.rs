//! `monitor`: the core's events, one line each, to every control client that subscribed
//! (what `setkey -x` and `ip xfrm monitor` show; what an IKE daemon listens to, as to
//! PF_KEY's broadcasts).
//!
//! ```text
//! core (packet path, tick, control) ─ Ipsec::take_events ─ publish_events: the daemon's
//!    tick (every 200 ms) ─► Hub::publish(line) ─ per subscriber: its queue has room? push : lost += 1
//!                                     │ (a lock per subscriber, held for a push)
//!         connection thread (ctl_server) ◄─ Subscription::next: the queued lines, and
//!            │                               "overflow lost=N" where N were lost
//!            └─ writes them to the client, blocking only itself
//! ```
//!
//! The packet path never sees a subscriber: it leaves events with the core, and the
//! daemon's tick thread publishes them. A subscriber that reads slowly, or not at all,
//! blocks only its own connection's thread; what does not fit its queue
//! ([`Hub::queue`] lines) is counted and announced in its stream, in the place where it
//! was lost, so a key manager knows to re-read the SAD (`dump`).
//!
//! # The lines
//!
//! One event per line, a name then `key=value` fields separated by spaces (values have
//! no spaces; addresses as `std` prints them, SPIs in hex):
//!
//! ```text
//! soft-expire limit=time|bytes|packets src=A dst=B proto=esp|esp-udp spi=0xN
//! hard-expire limit=time|bytes|packets src=A dst=B proto=P spi=0xN        (the SA is deleted)
//! acquire src=A dst=B proto=P mode=tunnel|transport|any reqid=N
//!         policy-src=NET/LEN policy-dst=NET/LEN policy-upper=U policy-sport=N|any policy-dport=N|any
//!         flow-src=A flow-dst=B flow-proto=N flow-sport=N flow-dport=N                (one line)
//! larval-expire src=A dst=B proto=P spi=0xN               (a getspi SPI not updated in time)
//! seq-exhausted src=A dst=B proto=P spi=0xN               (the SA no longer sends)
//! peer-moved src=A dst=B proto=P spi=0xN from=PORT to=PORT
//! path-mtu src=A dst=B proto=P spi=0xN mtu=N
//! sa-add src=A dst=B proto=P spi=0xN mode=M reqid=N [enc=E] [auth=A] [comp=deflate]
//!        [esn=1] [sport=N dport=N]                       (add; one line)
//! sa-update <as sa-add>                                   (update: a larval SA's keys, or a replacement)
//! sa-delete src=A dst=B proto=P spi=0xN                   (delete, and each SA deleteall removed)
//! sa-migrate src=A dst=B proto=P spi=0xN new-src=A2 new-dst=B2 [new-sport=N new-dport=N]
//!                                                         (migrate: the SA's old id, where it went)
//! sa-flush proto=P|any                                    (flush [proto])
//! policy-add dir=in|out|fwd src=NET/LEN dst=NET/LEN upper=U sport=N|any dport=N|any
//!            action=none|discard|ipsec [rules=R,R…]       (spdadd; one line; a rule as setkey
//!                                                          writes it: esp/tunnel/A-B/require)
//! policy-delete dir=D src=NET/LEN dst=NET/LEN upper=U sport=N|any dport=N|any   (spddelete)
//! policy-flush                                            (spdflush)
//! overflow lost=N                                         (N events did not fit the queue)
//! ```
//!
//! The `sa-*` and `policy-*` lines are what control requests (and a SIGHUP reload) changed,
//! once their transaction is committed, in the order they were made; a refused request
//! changed nothing and says nothing. No line ever holds a key.

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use ipsec_core::changes::{Change, SaSummary};
use ipsec_core::control::{Action, Dir, Level, Prefix, Rule, SaId, Selector, Upper};
use ipsec_core::sad::Event;
use ipsec_core::Ipsec;

/// Lines a subscriber's queue holds unless [`Hub::new`] says otherwise: a burst of
/// expiries (a reload's SAs all expiring at once) well past what a tick brings.
pub const QUEUE: usize = 4096;

/// Subscribers at once unless [`Hub::new`] says otherwise (each holds a control
/// connection and its thread; the control server serves 16 connections at once).
pub const SUBSCRIBERS: usize = 8;

/// The subscribers, and what was published and lost.
pub struct Hub {
    subs: Mutex<Vec<Arc<Sub>>>,
    queue: usize,
    most: usize,
    published: AtomicU64,
    lost: AtomicU64,
}

struct Sub {
    q: Mutex<Queue>,
    ready: Condvar,
}

#[derive(Default)]
struct Queue {
    lines: VecDeque<String>,
    /// Published since the last take that did not fit.
    lost: u64,
}

/// What a subscriber gets: the lines queued in order, then how many were lost after them.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Batch {
    pub lines: Vec<String>,
    pub lost: u64,
}

impl Batch {
    pub fn is_empty(&self) -> bool {
        self.lines.is_empty() && self.lost == 0
    }

    /// The bytes to send: each line, then the overflow line if any were lost.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = String::new();
        for l in &self.lines {
            out.push_str(l);
            out.push('\n');
        }
        if self.lost > 0 {
            let _ = writeln!(out, "overflow lost={}", self.lost);
        }
        out.into_bytes()
    }
}

impl Default for Hub {
    fn default() -> Self {
        Hub::new(QUEUE, SUBSCRIBERS)
    }
}

impl Hub {
    /// A hub whose subscribers each queue `queue` lines, at most `most` of them at once.
    pub fn new(queue: usize, most: usize) -> Hub {
        Hub { subs: Mutex::default(), queue, most, published: AtomicU64::new(0), lost: AtomicU64::new(0) }
    }

    fn subs(&self) -> MutexGuard<'_, Vec<Arc<Sub>>> {
        self.subs.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Lines a subscriber's queue holds.
    pub fn queue(&self) -> usize {
        self.queue
    }

    /// A new subscriber, or `None` if there are as many as the bound already.
    pub fn subscribe(self: &Arc<Self>) -> Option<Subscription> {
        let mut subs = self.subs();
        if subs.len() >= self.most {
            return None;
        }
        let sub = Arc::new(Sub { q: Mutex::default(), ready: Condvar::new() });
        subs.push(sub.clone());
        Some(Subscription { hub: self.clone(), sub })
    }

    /// Gives `line` to every subscriber; one whose queue is full counts it lost. Never
    /// waits for a subscriber to read.
    pub fn publish(&self, line: &str) {
        self.published.fetch_add(1, Ordering::Relaxed);
        for s in self.subs().iter() {
            let mut q = s.q.lock().unwrap_or_else(PoisonError::into_inner);
            if q.lines.len() >= self.queue {
                q.lost += 1;
                self.lost.fetch_add(1, Ordering::Relaxed);
            } else {
                q.lines.push_back(line.to_owned());
            }
            drop(q);
            s.ready.notify_one();
        }
    }

    /// Subscribers now.
    pub fn subscribers(&self) -> usize {
        self.subs().len()
    }
}

impl std::fmt::Display for Hub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} subscribers, {} events published, {} lost to full queues",
            self.subscribers(),
            self.published.load(Ordering::Relaxed),
            self.lost.load(Ordering::Relaxed)
        )
    }
}

/// One subscriber's end; dropping it unsubscribes.
pub struct Subscription {
    hub: Arc<Hub>,
    sub: Arc<Sub>,
}

impl Subscription {
    /// What was published since the last call, waiting up to `wait` for something.
    pub fn next(&self, wait: Duration) -> Batch {
        let q = self.sub.q.lock().unwrap_or_else(PoisonError::into_inner);
        let (mut q, _) = self
            .sub
            .ready
            .wait_timeout_while(q, wait, |q| q.lines.is_empty() && q.lost == 0)
            .unwrap_or_else(PoisonError::into_inner);
        Batch { lines: q.lines.drain(..).collect(), lost: std::mem::take(&mut q.lost) }
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.hub.subs().retain(|s| !Arc::ptr_eq(s, &self.sub));
    }
}

/// An SA's fields in an event line.
fn sa(id: &SaId) -> String {
    format!("src={} dst={} proto={} spi={:#x}", id.src, id.dst, id.proto.name(), id.spi)
}

fn prefix(p: &Prefix) -> String {
    format!("{}/{}", p.addr, p.len)
}

fn port(p: Option<u16>) -> String {
    p.map_or_else(|| "any".to_owned(), |p| p.to_string())
}

fn upper(u: Upper) -> String {
    u.number().map_or_else(|| "any".to_owned(), |n| n.to_string())
}

/// An SA's fields in an `sa-add` or `sa-update` line: all but its keys.
fn summary(s: &SaSummary) -> String {
    let mut l = format!("{} mode={} reqid={}", sa(&s.id), s.mode.name(), s.reqid);
    if let Some(e) = s.enc {
        let _ = write!(l, " enc={}", e.name());
    }
    if let Some(a) = s.auth {
        let _ = write!(l, " auth={}", a.name());
    }
    if s.id.proto == ipsec_core::control::Proto::IpComp {
        l.push_str(" comp=deflate");
    }
    if s.esn {
        l.push_str(" esn=1");
    }
    if let Some(n) = s.natt {
        let _ = write!(l, " sport={} dport={}", n.sport, n.dport);
    }
    l
}

/// A policy's selector and direction.
fn policy(sel: &Selector, dir: Dir) -> String {
    format!(
        "dir={} src={} dst={} upper={} sport={} dport={}",
        dir.name(),
        prefix(&sel.src),
        prefix(&sel.dst),
        upper(sel.upper),
        port(sel.sport),
        port(sel.dport)
    )
}

/// A rule as setkey writes it: `esp/tunnel/A-B/require`, `ah/transport//unique:2`.
fn rule(r: &Rule) -> String {
    let ends = r.tunnel.map_or_else(String::new, |(a, b)| format!("{a}-{b}"));
    let level = match r.level {
        Level::Use => "use".to_owned(),
        Level::Require => "require".to_owned(),
        Level::Unique(0) => "unique".to_owned(),
        Level::Unique(n) => format!("unique:{n}"),
    };
    format!("{}/{}/{ends}/{level}", r.proto.name(), r.mode.name())
}

fn change(c: &Change) -> String {
    match c {
        Change::SaAdded(s) => format!("sa-add {}", summary(s)),
        Change::SaUpdated(s) => format!("sa-update {}", summary(s)),
        Change::SaDeleted(id) => format!("sa-delete {}", sa(id)),
        Change::SaMigrated { from, to } => {
            let ports =
                to.natt.map_or_else(String::new, |n| format!(" new-sport={} new-dport={}", n.sport, n.dport));
            format!("sa-migrate {} new-src={} new-dst={}{ports}", sa(from), to.id.src, to.id.dst)
        }
        Change::SasFlushed(p) => format!("sa-flush proto={}", p.map_or("any", |p| p.name())),
        Change::PolicyAdded(p) => {
            let action = match &p.action {
                Action::Bypass => "none".to_owned(),
                Action::Discard => "discard".to_owned(),
                Action::Protect(rules) => {
                    format!("ipsec rules={}", rules.iter().map(rule).collect::<Vec<_>>().join(","))
                }
            };
            format!("policy-add {} action={action}", policy(&p.selector, p.dir))
        }
        Change::PolicyDeleted { selector, dir } => format!("policy-delete {}", policy(selector, *dir)),
        Change::PoliciesFlushed => "policy-flush".to_owned(),
    }
}

/// Publishes the core's events since the last call, each as its line, and logs them (the
/// control path's changes at debug level: a reload of 10,000 SAs makes as many). The
/// daemon's tick calls it every 200 ms.
pub fn publish_events(core: &Ipsec, hub: &Hub) {
    for ev in core.take_events() {
        match ev {
            Event::Changed(_) => tracing::debug!("{ev:?}"),
            _ => tracing::info!("{ev:?}"),
        }
        hub.publish(&line(&ev));
    }
}

/// An event as its monitor line (see the module docs), without the newline.
pub fn line(ev: &Event) -> String {
    match ev {
        Event::SoftExpired { sa: id, by } => format!("soft-expire limit={} {}", by.name(), sa(id)),
        Event::HardExpired { sa: id, by } => format!("hard-expire limit={} {}", by.name(), sa(id)),
        Event::Acquire(a) => {
            let p = &a.policy;
            let upper = upper(p.upper);
            format!(
                "acquire src={} dst={} proto={} mode={} reqid={} policy-src={} policy-dst={} policy-upper={upper} \
                 policy-sport={} policy-dport={} flow-src={} flow-dst={} flow-proto={} flow-sport={} flow-dport={}",
                a.src,
                a.dst,
                a.proto.name(),
                a.mode.name(),
                a.reqid,
                prefix(&p.src),
                prefix(&p.dst),
                port(p.sport),
                port(p.dport),
                a.flow.src,
                a.flow.dst,
                a.flow.proto,
                a.flow.sport,
                a.flow.dport
            )
        }
        Event::LarvalExpired(id) => format!("larval-expire {}", sa(id)),
        Event::SeqExhausted(id) => format!("seq-exhausted {}", sa(id)),
        Event::PeerMoved { sa: id, from, to } => format!("peer-moved {} from={from} to={to}", sa(id)),
        Event::PathMtu { sa: id, mtu } => format!("path-mtu {} mtu={mtu}", sa(id)),
        Event::Changed(c) => change(c),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ipsec_core::acquire::Acquire;
    use ipsec_core::control::{Mode, PolicySpec, Proto, Selector};

    fn changed(c: Change) -> Event {
        Event::Changed(Box::new(c))
    }
    use ipsec_core::sad::Limit;
    use ipsec_core::spd::Flow;

    fn id() -> SaId {
        SaId {
            src: "192.0.2.1".parse().unwrap(),
            dst: "2001:db8::2".parse().unwrap(),
            proto: Proto::Esp,
            spi: 0x1000,
        }
    }

    /// Every event's line, as the module docs give them.
    #[test]
    fn every_event_has_its_line() {
        let s = "src=192.0.2.1 dst=2001:db8::2 proto=esp spi=0x1000";
        let net = |a: &str, len| Prefix { addr: a.parse().unwrap(), len };
        let acquire = Acquire {
            src: "192.0.2.1".parse().unwrap(),
            dst: "192.0.2.2".parse().unwrap(),
            proto: Proto::Esp,
            mode: Mode::Tunnel,
            reqid: 7,
            policy: Selector {
                src: net("10.1.0.0", 24),
                dst: net("10.2.0.0", 24),
                sport: None,
                dport: Some(53),
                upper: Upper::Udp,
            },
            flow: Flow {
                src: "10.1.0.1".parse().unwrap(),
                dst: "10.2.0.7".parse().unwrap(),
                proto: 17,
                sport: 40000,
                dport: 53,
            },
        };
        let cases = [
            (Event::SoftExpired { sa: id(), by: Limit::Bytes }, format!("soft-expire limit=bytes {s}")),
            (Event::HardExpired { sa: id(), by: Limit::Time }, format!("hard-expire limit=time {s}")),
            (Event::HardExpired { sa: id(), by: Limit::Packets }, format!("hard-expire limit=packets {s}")),
            (Event::LarvalExpired(id()), format!("larval-expire {s}")),
            (Event::SeqExhausted(id()), format!("seq-exhausted {s}")),
            (
                Event::PeerMoved { sa: id(), from: 4500, to: 1024 },
                format!("peer-moved {s} from=4500 to=1024"),
            ),
            (Event::PathMtu { sa: id(), mtu: 1400 }, format!("path-mtu {s} mtu=1400")),
            (
                Event::Acquire(Box::new(acquire)),
                "acquire src=192.0.2.1 dst=192.0.2.2 proto=esp mode=tunnel reqid=7 policy-src=10.1.0.0/24 \
                 policy-dst=10.2.0.0/24 policy-upper=17 policy-sport=any policy-dport=53 flow-src=10.1.0.1 \
                 flow-dst=10.2.0.7 flow-proto=17 flow-sport=40000 flow-dport=53"
                    .to_owned(),
            ),
            (changed(Change::SaDeleted(id())), format!("sa-delete {s}")),
            (changed(Change::SasFlushed(None)), "sa-flush proto=any".to_owned()),
            (changed(Change::SasFlushed(Some(Proto::Ah))), "sa-flush proto=ah".to_owned()),
            (changed(Change::PoliciesFlushed), "policy-flush".to_owned()),
            (
                changed(Change::PolicyAdded(PolicySpec {
                    selector: acquire.policy,
                    dir: Dir::In,
                    action: Action::Protect(vec![
                        Rule { proto: Proto::Ah, mode: Mode::Transport, tunnel: None, level: Level::Use },
                        Rule {
                            proto: Proto::IpComp,
                            mode: Mode::Transport,
                            tunnel: None,
                            level: Level::Unique(0),
                        },
                    ]),
                })),
                "policy-add dir=in src=10.1.0.0/24 dst=10.2.0.0/24 upper=17 sport=any dport=53 action=ipsec \
                 rules=ah/transport//use,ipcomp/transport//unique"
                    .to_owned(),
            ),
        ];
        for (ev, want) in cases {
            assert_eq!(line(&ev), want);
        }
    }

    /// A full queue loses the newest lines, counted, and says so after what it kept.
    #[test]
    fn a_full_queue_counts_and_announces_what_it_lost() {
        let hub = Arc::new(Hub::new(2, 1));
        let sub = hub.subscribe().unwrap();
        assert!(hub.subscribe().is_none(), "one subscriber at most");
        for l in ["a", "b", "c", "d"] {
            hub.publish(l);
        }
        let b = sub.next(Duration::ZERO);
        assert_eq!(b, Batch { lines: vec!["a".into(), "b".into()], lost: 2 });
        assert_eq!(b.encode(), b"a\nb\noverflow lost=2\n");
        hub.publish("e");
        assert_eq!(sub.next(Duration::ZERO), Batch { lines: vec!["e".into()], lost: 0 });
        assert!(sub.next(Duration::from_millis(10)).is_empty());
        assert_eq!(hub.to_string(), "1 subscribers, 5 events published, 2 lost to full queues");
        drop(sub);
        assert_eq!(hub.subscribers(), 0);
        assert!(hub.subscribe().is_some(), "the place is free again");
    }
}
