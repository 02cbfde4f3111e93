//! The databases behind the control protocol: a [`Request`] in, a [`Response`] out.
//!
//! This is the only place that knows both the protocol ([`crate::control`]) and the
//! databases ([`Sad`], [`Spd`]); the setkey parser and the gateway's control socket only
//! make requests.
//!
//! Every change is a [`Transaction`]: any number of requests, applied in order to copies
//! of the tables (each change in place: no rebuild), and made visible to the packet path
//! at once by [`Transaction::commit`]; dropped uncommitted, it changes nothing. So a
//! configuration of 10,000 SAs costs one copy of the tables, not one per SA, and a reload
//! or a control request that fails half-way leaves the databases as they were.
//!
//! ```text
//! transaction() ─ apply(req) … apply(req) ─┬─ commit(): one swap per table; removed SAs die
//!  (waits for other writers)               └─ drop: nothing happened (new sessions freed)
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant};

use ocf::Framework;

use crate::changes::{Change, SaSummary};
use crate::control::{PolicySpec, Proto, Request, SaId, SaSpec};
use crate::larval::{self, Larval, LarvalError};
use crate::sad::{self, Installed, Sa, SaState, Sad, SadError};
use crate::spd::{self, Spd, SpdError};
use crate::stats::Stats;

/// The SAD and SPD together, and the larval SAs GETSPI reserved.
pub struct Databases {
    pub sad: Sad,
    pub spd: Spd,
    /// Boxed: only the control path and the tick use them (see `Shared::acquires`).
    pub larval: Box<Larval>,
}

/// What an SA looks like from outside (setkey `get` and `dump`).
#[derive(Clone, Debug)]
pub struct SaInfo {
    pub spec: SaSpec,
    pub state: SaState,
    pub stats: Stats,
    pub age: Duration,
    /// The ocf driver doing its crypto.
    pub driver: String,
    /// How long ago it last carried traffic each way (`None`: never), as of this answer
    /// ([`Sa::observe`]: late by at most the time between observations, 200 ms in ipsecd).
    pub idle_in: Option<Duration>,
    pub idle_out: Option<Duration>,
}

impl SaInfo {
    fn of(sa: &Arc<Sa>) -> SaInfo {
        let now = Instant::now();
        let used = sa.observe(now);
        SaInfo {
            spec: sa.spec.clone(),
            state: sa.state(),
            stats: sa.stats(),
            age: sa.age(),
            driver: sa.driver(),
            idle_in: used.inbound.map(|t| now.saturating_duration_since(t)),
            idle_out: used.outbound.map(|t| now.saturating_duration_since(t)),
        }
    }
}

/// The answer to a [`Request`].
#[derive(Clone, Debug)]
pub enum Response {
    /// Done (add, delete, flush): how many entries it affected.
    Done(usize),
    Sa(Box<SaInfo>),
    Sas(Vec<SaInfo>),
    Policies(Vec<PolicySpec>),
    /// GETSPI: the larval SA, with the SPI it reserved.
    Larval(SaId),
}

/// Why a request failed.
#[derive(Debug, PartialEq, Eq)]
pub enum ControlError {
    Sad(SadError),
    Spd(SpdError),
    Larval(LarvalError),
}

impl std::fmt::Display for ControlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ControlError::Sad(e) => e.fmt(f),
            ControlError::Spd(e) => e.fmt(f),
            ControlError::Larval(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for ControlError {}

impl Databases {
    pub fn new(fw: Framework) -> Databases {
        Databases { sad: Sad::new(fw), spd: Spd::default(), larval: Box::default() }
    }

    /// Starts a change of both databases; waits for any other writer.
    pub fn transaction(&self) -> Transaction<'_> {
        Transaction {
            sad: self.sad.writer(),
            spd: self.spd.writer(),
            larval: self.larval.writer(),
            changes: Vec::new(),
        }
    }
}

/// Changes to the SAD and SPD that become visible together, or not at all (see the module
/// documentation). Reads through it ([`Request::DumpSa`], …) see its changes.
pub struct Transaction<'a> {
    sad: sad::Writer<'a>,
    spd: spd::Writer<'a>,
    larval: larval::Writer<'a>,
    /// What it changed, in order, for the events of a commit ([`crate::changes`]).
    changes: Vec<Change>,
}

impl Transaction<'_> {
    /// Carries out one request.
    pub fn apply(&mut self, req: &Request) -> Result<Response, ControlError> {
        use ControlError::{Sad as E, Spd as P};
        Ok(match req {
            Request::AddSa(spec) => {
                self.add_sa(spec.clone())?;
                Response::Done(1)
            }
            Request::GetSa(id) => {
                Response::Sa(Box::new(SaInfo::of(&self.sad.get(id).ok_or(E(SadError::NotFound))?)))
            }
            Request::DeleteSa(id) => {
                if !self.larval.remove(id) {
                    self.sad.delete(id).map_err(E)?;
                }
                self.changes.push(Change::SaDeleted(*id));
                Response::Done(1)
            }
            // Larval SAs go too, as PF_KEY's SADB_FLUSH and deleteall take them.
            Request::DeleteAllSa { src, dst, proto } => {
                let between = |id: &SaId| id.src == *src && id.dst == *dst && id.proto == *proto;
                let mut gone: Vec<SaId> =
                    self.sad.dump(Some(*proto)).iter().map(|sa| sa.id).filter(between).collect();
                self.sad.delete_all(*src, *dst, *proto);
                gone.extend(self.larval.remove_where(between));
                self.changes.extend(gone.iter().map(|id| Change::SaDeleted(*id)));
                Response::Done(gone.len())
            }
            Request::FlushSa(proto) => {
                let n = self.sad.flush(*proto)
                    + self.larval.remove_where(|id| proto.is_none_or(|p| p == id.proto)).len();
                self.changes.push(Change::SasFlushed(*proto));
                Response::Done(n)
            }
            Request::DumpSa(proto) => Response::Sas(self.sad.dump(*proto).iter().map(SaInfo::of).collect()),
            Request::AddPolicy(spec) => {
                self.spd.add(spec.clone()).map_err(P)?;
                self.changes.push(Change::PolicyAdded(spec.clone()));
                Response::Done(1)
            }
            Request::DeletePolicy { selector, dir } => {
                self.spd.delete(selector, *dir).map_err(P)?;
                self.changes.push(Change::PolicyDeleted { selector: *selector, dir: *dir });
                Response::Done(1)
            }
            Request::FlushPolicies => {
                self.spd.flush();
                self.changes.push(Change::PoliciesFlushed);
                Response::Done(0)
            }
            Request::DumpPolicies => Response::Policies(self.spd.dump()),
            Request::GetSpi { src, dst, proto, range } => {
                if !sad::supports(*proto) {
                    return Err(E(SadError::Unsupported(*proto)));
                }
                let id = SaId { src: *src, dst: *dst, proto: *proto, spi: 0 };
                let (sad, n) = (&self.sad, self.sad.len());
                // An IPComp CPI is 16 bits (RFC 3173 §2.4): its search stops at 0xffff.
                let range = match proto {
                    Proto::IpComp => (range.0, range.1.min(u32::from(u16::MAX))),
                    _ => *range,
                };
                let taken = |spi| sad.spi_holder(*proto, spi, *dst).is_some();
                let larval = self.larval.reserve(id, range, taken, n);
                Response::Larval(larval.map_err(ControlError::Larval)?)
            }
            Request::UpdateSa(spec) => {
                self.update_sa(spec.clone())?;
                Response::Done(1)
            }
            Request::MigrateSa { id, to } => {
                // A larval SA's SPI at the new destination is taken too.
                if let Some(larval) = self.larval.holder(id.spi, to.dst).filter(|_| id.proto != Proto::IpComp)
                {
                    return Err(ControlError::Larval(LarvalError::Reserved(larval)));
                }
                let moved = self.sad.migrate(id, to).map_err(E)?;
                self.changes.push(Change::SaMigrated { from: *id, to: SaSummary::of(&moved.spec) });
                Response::Done(1)
            }
        })
    }

    /// UPDATE (RFC 2367 SADB_UPDATE): a larval SA with `spec`'s id gets its keys, or the
    /// installed SA with that id is replaced (continued if its keys are the same).
    pub fn update_sa(&mut self, spec: SaSpec) -> Result<Installed, ControlError> {
        let id = SaId { src: spec.src, dst: spec.dst, proto: spec.proto, spi: spec.spi };
        if !self.larval.remove(&id) && self.sad.delete(&id).is_err() {
            return Err(ControlError::Larval(LarvalError::NotFound));
        }
        let summary = SaSummary::of(&spec);
        let installed = self.sad.add(spec).map_err(ControlError::Sad)?;
        self.changes.push(Change::SaUpdated(summary));
        Ok(installed)
    }

    /// Installs an SA; if this transaction removed the SA with the same addresses, SPI
    /// and keys, the new one goes on with its sequence number and replay window.
    pub fn add_sa(&mut self, spec: SaSpec) -> Result<Installed, ControlError> {
        if let Some(larval) = self.larval.holder(spec.spi, spec.dst) {
            return Err(ControlError::Larval(LarvalError::Reserved(larval)));
        }
        let summary = SaSummary::of(&spec);
        let installed = self.sad.add(spec).map_err(ControlError::Sad)?;
        self.changes.push(Change::SaAdded(summary));
        Ok(installed)
    }

    /// Every SA as this transaction leaves them, oldest first.
    pub fn sas(&self) -> Vec<Arc<Sa>> {
        self.sad.dump(None)
    }

    /// What this transaction changed so far, in order, taken out of it: the events its
    /// commit announces ([`crate::changes`]).
    pub fn take_changes(&mut self) -> Vec<Change> {
        std::mem::take(&mut self.changes)
    }

    /// Makes every change visible; returns the SAs installed (the packet path gives them
    /// their completions).
    pub fn commit(self) -> Vec<Arc<Sa>> {
        // SAs first: a new policy must find its SAs.
        let added = self.sad.commit();
        self.spd.commit();
        self.larval.commit();
        added
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::{
        Action, Dir, EncAlg, KeyBytes, Lifetime, Mode, Prefix, Proto, SaId, Selector, Upper,
    };

    fn dbs() -> Databases {
        let fw = Framework::new();
        ocf_soft::register(&fw).unwrap();
        Databases::new(fw)
    }

    fn gcm(src: &str, dst: &str, spi: u32, key: u8) -> SaSpec {
        SaSpec {
            src: src.parse().unwrap(),
            dst: dst.parse().unwrap(),
            proto: Proto::Esp,
            spi,
            mode: Mode::Tunnel,
            reqid: 0,
            enc: EncAlg::AesGcm16,
            enc_key: KeyBytes::new(&[key; 20]),
            auth: None,
            replay_window: 64,
            esn: false,
            natt: None,
            hard: Lifetime::default(),
            soft: Lifetime::default(),
        }
    }

    fn id(s: &SaSpec) -> SaId {
        SaId { src: s.src, dst: s.dst, proto: s.proto, spi: s.spi }
    }

    fn policy(net: &str) -> PolicySpec {
        let p = |a: &str| Prefix { addr: a.parse().unwrap(), len: 24 };
        PolicySpec {
            selector: Selector {
                src: p("10.1.0.0"),
                dst: p(net),
                sport: None,
                dport: None,
                upper: Upper::Any,
            },
            dir: Dir::Out,
            action: Action::Discard,
        }
    }

    fn apply(db: &Databases, reqs: &[Request]) -> Result<(), ControlError> {
        let mut t = db.transaction();
        for r in reqs {
            t.apply(r)?;
        }
        t.commit();
        Ok(())
    }

    /// setkey's `ipcomp ... -C deflate` installs (a compression session on soft), and ESP's
    /// lookups never find it: an ESP SA with the same number beside it is found alone.
    #[test]
    fn ipcomp_sas_are_installed_beside_esp_and_cpis_fit_16_bits() {
        let db = dbs();
        let text = "add 10.0.0.1 10.0.0.2 ipcomp 0x4000 -m tunnel -C deflate ;";
        let reqs: Vec<Request> = crate::setkey::parse(text).unwrap().into_iter().map(|l| l.item).collect();
        apply(&db, &reqs).unwrap();
        let Request::AddSa(spec) = &reqs[0] else { panic!("{reqs:?}") };
        let sa = db.sad.get(&id(spec)).expect("installed");
        assert_eq!(sa.driver(), "soft");
        assert_eq!(db.sad.dump(Some(Proto::IpComp)).len(), 1);
        let (src, dst) = (spec.src, spec.dst);
        assert!(db.sad.outbound(src, dst, Mode::Any, 0).is_none(), "not an ESP SA");
        assert!(db.sad.inbound(0x4000, dst).is_none(), "not an ESP SA");
        let esp = gcm("10.0.0.1", "10.0.0.2", 0x4000, 9);
        apply(&db, &[Request::AddSa(esp.clone())]).unwrap();
        assert_eq!(db.sad.outbound(src, dst, Mode::Any, 0).unwrap().id, id(&esp));
        assert_eq!(db.sad.inbound(0x4000, dst).unwrap().id, id(&esp));
        // The same CPI to the same destination again is taken; deleting it works.
        let again = SaSpec { src: "10.0.0.3".parse().unwrap(), ..spec.clone() };
        assert_eq!(
            apply(&db, &[Request::AddSa(again)]),
            Err(ControlError::Sad(SadError::SpiTaken(id(spec))))
        );
        apply(&db, &[Request::DeleteSa(id(spec))]).unwrap();
        assert_eq!(db.sad.inbound(0x4000, dst).unwrap().id, id(&esp), "ESP's SA stays");
        // A CPI is 16 bits.
        let wide = SaSpec { spi: 0x1_0000, ..spec.clone() };
        let e = apply(&db, &[Request::AddSa(wide)]).unwrap_err();
        assert_eq!(e, ControlError::Sad(SadError::CpiTooLarge(0x1_0000)));
        assert!(e.to_string().contains("16-bit CPI"), "{e}");
    }

    #[test]
    fn a_transaction_that_fails_changes_nothing() {
        let db = dbs();
        let a = gcm("10.0.0.1", "10.0.0.2", 0x1001, 1);
        apply(&db, &[Request::AddSa(a.clone()), Request::AddPolicy(policy("10.2.0.0"))]).unwrap();
        let sa = db.sad.get(&id(&a)).unwrap();
        let err = apply(
            &db,
            &[
                Request::FlushSa(None),
                Request::FlushPolicies,
                Request::AddSa(gcm("10.0.0.1", "10.0.0.3", 0x2001, 2)),
                Request::AddPolicy(policy("10.3.0.0")),
                Request::AddPolicy(policy("10.3.0.0")),
            ],
        )
        .unwrap_err();
        assert_eq!(err, ControlError::Spd(SpdError::Exists));
        assert_eq!(db.sad.dump(None).len(), 1);
        assert_eq!(db.spd.dump(), vec![policy("10.2.0.0")]);
        assert_eq!(sa.state(), SaState::Mature, "the SA the failed flush would have removed lives");
        // The key of the SA that was never committed was not recorded either.
        apply(&db, &[Request::AddSa(gcm("10.0.0.1", "10.0.0.3", 0x2001, 2))]).unwrap();
        // Reads inside a transaction see its own changes.
        let mut t = db.transaction();
        t.apply(&Request::DeleteSa(id(&a))).unwrap();
        assert_eq!(t.sas().len(), 1);
        assert!(matches!(t.apply(&Request::DumpPolicies), Ok(Response::Policies(p)) if p.len() == 1));
        drop(t);
        assert_eq!(db.sad.dump(None).len(), 2);
    }

    #[test]
    fn a_changed_sa_with_the_same_key_goes_on_with_its_state() {
        let db = dbs();
        let a = gcm("10.0.0.1", "10.0.0.2", 0x1001, 1);
        apply(&db, &[Request::AddSa(a.clone())]).unwrap();
        let old = db.sad.get(&id(&a)).unwrap();
        for _ in 0..5 {
            old.seq.next().unwrap();
        }
        {
            let mut w = old.replay.lock().unwrap();
            for s in [1, 2, 3, 100] {
                w.update(s).unwrap();
            }
        }
        let wider =
            SaSpec { replay_window: 128, hard: Lifetime { seconds: Some(60), ..Lifetime::default() }, ..a };
        let mut t = db.transaction();
        t.apply(&Request::DeleteSa(id(&wider))).unwrap();
        assert_eq!(t.add_sa(wider.clone()), Ok(Installed::Continued));
        t.commit();
        let new = db.sad.get(&id(&wider)).unwrap();
        assert_eq!(new.spec, wider);
        assert_eq!(new.seq.next(), Ok(6), "the sequence number goes on");
        assert_eq!(old.seq.next(), Ok(7), "the old version shares the counter: never a number twice");
        assert_eq!(old.state(), SaState::Mature, "a packet holding the old version is not dropped");
        let w = new.replay.lock().unwrap();
        assert_eq!((w.size(), w.top()), (128, 100));
        assert!(w.check(3).is_err() && w.check(30).is_err(), "seen, and left behind by the old window");
        assert!(w.check(50).is_ok(), "in the old window and not seen");
        assert!(w.check(99).is_ok());
        drop(w);
        // Continued again: it still shares the first version's state.
        let mut t = db.transaction();
        t.apply(&Request::DeleteSa(id(&wider))).unwrap();
        assert_eq!(t.add_sa(SaSpec { replay_window: 32, ..wider.clone() }), Ok(Installed::Continued));
        t.commit();
        let last = db.sad.get(&id(&wider)).unwrap();
        assert_eq!(last.seq.next(), Ok(8));
        // A new key is a new SA, from 1.
        let mut t = db.transaction();
        t.apply(&Request::DeleteSa(id(&wider))).unwrap();
        assert_eq!(t.add_sa(gcm("10.0.0.1", "10.0.0.2", 0x1001, 9)), Ok(Installed::New));
        t.commit();
        assert_eq!(db.sad.get(&id(&wider)).unwrap().seq.next(), Ok(1));
        assert_eq!(last.state(), SaState::Dead, "replaced with a new key: the old one is gone");
    }

    #[test]
    fn an_aead_key_comes_back_only_as_the_same_sa_in_one_transaction() {
        let db = dbs();
        let a = gcm("10.0.0.1", "10.0.0.2", 0x1001, 1);
        apply(&db, &[Request::AddSa(a.clone())]).unwrap();
        let reused = ControlError::Sad(SadError::KeyReused(id(&a)));
        // The same key under another SPI, while the first is installed.
        let twin = SaSpec { spi: 0x1002, ..a.clone() };
        assert_eq!(
            apply(&db, &[Request::AddSa(twin.clone())]),
            Err(ControlError::Sad(SadError::KeyReused(id(&a))))
        );
        // Deleted, then added again by a later request.
        apply(&db, &[Request::DeleteSa(id(&a))]).unwrap();
        assert_eq!(
            apply(&db, &[Request::AddSa(a.clone())]),
            Err(ControlError::Sad(SadError::KeyReused(id(&a))))
        );
        // Twice in one transaction.
        let b = gcm("10.0.0.1", "10.0.0.3", 0x3001, 3);
        let b2 = SaSpec { spi: 0x3002, ..b.clone() };
        assert_eq!(
            apply(&db, &[Request::AddSa(b.clone()), Request::AddSa(b2)]),
            Err(ControlError::Sad(SadError::KeyReused(id(&b))))
        );
        // A changed ESN flag cannot continue the counter: refused too.
        apply(&db, &[Request::AddSa(b.clone())]).unwrap();
        let esn = SaSpec { esn: true, ..b.clone() };
        assert_eq!(
            apply(&db, &[Request::DeleteSa(id(&b)), Request::AddSa(esn)]),
            Err(ControlError::Sad(SadError::KeyReused(id(&b))))
        );
        // CBC with HMAC: its IVs are random, the key may come back (as with setkey).
        let mut cbc = gcm("10.0.0.1", "10.0.0.4", 0x4001, 4);
        cbc.enc = EncAlg::AesCbc;
        cbc.enc_key = KeyBytes::new(&[4; 16]);
        cbc.auth = Some((crate::control::AuthAlg::HmacSha256, KeyBytes::new(&[5; 32])));
        apply(&db, &[Request::AddSa(cbc.clone())]).unwrap();
        apply(&db, &[Request::DeleteSa(id(&cbc))]).unwrap();
        apply(&db, &[Request::AddSa(cbc)]).unwrap();
        // The message names the SA, never the key.
        let msg = reused.to_string();
        assert!(msg.contains("10.0.0.1 -> 10.0.0.2 esp SPI 0x1001") && msg.contains("nonce reuse"), "{msg}");
    }

    #[test]
    fn an_spi_clash_names_the_other_sa() {
        let db = dbs();
        let a = gcm("10.0.0.9", "10.0.0.2", 0x1001, 1);
        apply(&db, &[Request::AddSa(a.clone())]).unwrap();
        let err = apply(&db, &[Request::AddSa(gcm("10.0.0.1", "10.0.0.2", 0x1001, 2))]).unwrap_err();
        assert_eq!(err, ControlError::Sad(SadError::SpiTaken(id(&a))));
        assert!(err
            .to_string()
            .contains("SPI and destination are those of the SA 10.0.0.9 -> 10.0.0.2 esp SPI 0x1001"));
        let err = apply(&db, &[Request::AddSa(gcm("10.0.0.9", "10.0.0.2", 0x1001, 3))]).unwrap_err();
        assert_eq!(err.to_string(), "an SA with the same addresses, protocol and SPI already exists");
    }
}
