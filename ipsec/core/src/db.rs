//! The databases behind the control protocol: a [`Request`] in, a [`Response`] out.
//!
//! This is the only place that knows both the protocol ([`crate::control`]) and the
//! databases ([`Sad`], [`Spd`]); the setkey parser and the gateway's control socket only
//! make requests.

use std::sync::Arc;
use std::time::Duration;

use ocf::Framework;

use crate::control::{PolicySpec, Request, SaSpec};
use crate::sad::{Sa, SaState, Sad, SadError};
use crate::spd::{Spd, SpdError};
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

    /// Carries out one request.
    pub fn apply(&self, req: &Request) -> Result<Response, ControlError> {
        use ControlError::{Sad as E, Spd as P};
        Ok(match req {
            Request::AddSa(spec) => {
                self.sad.add(spec.clone()).map_err(E)?;
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
}
