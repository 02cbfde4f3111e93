//! # ocf-null — the null driver
//!
//! A driver whose "algorithm" does nothing: every request completes at once, untouched (an
//! asymmetric one with an empty result, a random one with its buffer as it came). The
//! original OCF paper measured the framework's own overhead with a null algorithm; this
//! driver does the same for ocf, so that what a benchmark through it shows is the framework
//! alone (validation, dispatch, completion, accounting).
//!
//! Its results are not cryptography, so it is `named_only`: the registry never gives it a
//! session on its own, only to callers that ask for `"null"` by name. [`NullDriver::routable`]
//! makes one that routing may choose, under a name of its own, to measure what routing
//! itself costs (the dispatch bench) — never register one beside real drivers.

#![forbid(unsafe_code)]

use std::sync::Arc;

use ocf::{
    Capabilities, Driver, DriverSession, Error, Framework, Hint, Priority, Processed, Request,
    SessionContext, SessionParams,
};

/// The name the null driver registers under.
pub const NAME: &str = "null";

/// The null driver.
#[derive(Debug)]
pub struct NullDriver {
    name: &'static str,
    named_only: bool,
}

impl Default for NullDriver {
    fn default() -> NullDriver {
        NullDriver { name: NAME, named_only: true }
    }
}

impl NullDriver {
    /// A null driver named `name` that routing may give requests to (not `named_only`).
    pub fn routable(name: &'static str) -> NullDriver {
        NullDriver { name, named_only: false }
    }
}

/// Registers a null driver with `fw`.
pub fn register(fw: &Framework) -> Result<(), Error> {
    fw.register(Arc::new(NullDriver::default()))
}

impl Driver for NullDriver {
    fn name(&self) -> &str {
        self.name
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            synchronous: true,
            named_only: self.named_only,
            // Public-key requests too: what one costs the framework is measured here (their
            // result is empty: `result_len` stays 0).
            asymmetric: ocf::AsymAlg::all(),
            random: true,
            ..Capabilities::every_algorithm()
        }
    }

    fn probe_session(&self, _params: &SessionParams) -> Option<Priority> {
        Some(Priority::Software)
    }

    fn new_session(
        &self,
        _params: &SessionParams,
        _ctx: SessionContext,
    ) -> Result<Box<dyn DriverSession>, Error> {
        Ok(Box::new(NullSession))
    }
}

struct NullSession;

impl DriverSession for NullSession {
    #[inline]
    fn process(&self, req: Request, _hint: Hint) -> Processed {
        Processed::Done(Ok(req))
    }
}
