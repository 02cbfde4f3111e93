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
use std::time::Duration;

use ocf::Framework;

use crate::control::{PolicySpec, Request, SaSpec};
use crate::sad::{self, Installed, Sa, SaState, Sad, SadError};
use crate::spd::{self, Spd, SpdError};
use crate::stats::Stats;

/// The SAD and SPD together.
pub struct Databases {
    pub sad: Sad,
    pub spd: Spd,
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
}

impl SaInfo {
    fn of(sa: &Arc<Sa>) -> SaInfo {
        SaInfo {
            spec: sa.spec.clone(),
            state: sa.state(),
            stats: sa.stats(),
            age: sa.age(),
            driver: sa.driver(),
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
}

/// Why a request failed.
#[derive(Debug, PartialEq, Eq)]
pub enum ControlError {
    Sad(SadError),
    Spd(SpdError),
}

impl std::fmt::Display for ControlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ControlError::Sad(e) => e.fmt(f),
            ControlError::Spd(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for ControlError {}

impl Databases {
    pub fn new(fw: Framework) -> Databases {
        Databases { sad: Sad::new(fw), spd: Spd::default() }
    }

    /// Starts a change of both databases; waits for any other writer.
    pub fn transaction(&self) -> Transaction<'_> {
        Transaction { sad: self.sad.writer(), spd: self.spd.writer() }
    }
}

/// Changes to the SAD and SPD that become visible together, or not at all (see the module
/// documentation). Reads through it ([`Request::DumpSa`], …) see its changes.
pub struct Transaction<'a> {
    sad: sad::Writer<'a>,
    spd: spd::Writer<'a>,
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
                self.sad.delete(id).map_err(E)?;
                Response::Done(1)
            }
            Request::DeleteAllSa { src, dst, proto } => {
                Response::Done(self.sad.delete_all(*src, *dst, *proto))
            }
            Request::FlushSa(proto) => Response::Done(self.sad.flush(*proto)),
            Request::DumpSa(proto) => Response::Sas(self.sad.dump(*proto).iter().map(SaInfo::of).collect()),
            Request::AddPolicy(spec) => {
                self.spd.add(spec.clone()).map_err(P)?;
                Response::Done(1)
            }
            Request::DeletePolicy { selector, dir } => {
                self.spd.delete(selector, *dir).map_err(P)?;
                Response::Done(1)
            }
            Request::FlushPolicies => {
                self.spd.flush();
                Response::Done(0)
            }
            Request::DumpPolicies => Response::Policies(self.spd.dump()),
        })
    }

    /// Installs an SA; if this transaction removed the SA with the same addresses, SPI
    /// and keys, the new one goes on with its sequence number and replay window.
    pub fn add_sa(&mut self, spec: SaSpec) -> Result<Installed, ControlError> {
        self.sad.add(spec).map_err(ControlError::Sad)
    }

    /// Every SA as this transaction leaves them, oldest first.
    pub fn sas(&self) -> Vec<Arc<Sa>> {
        self.sad.dump(None)
    }

    /// Makes every change visible; returns the SAs installed (the packet path gives them
    /// their completions).
    pub fn commit(self) -> Vec<Arc<Sa>> {
        // SAs first: a new policy must find its SAs.
        let added = self.sad.commit();
        self.spd.commit();
        added
    }
}
