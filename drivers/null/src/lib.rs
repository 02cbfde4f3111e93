//! # ocf-null — the null driver
//!
//! A driver whose "algorithm" does nothing: every request completes at once, untouched. The
//! original OCF paper measured the framework's own overhead with a null algorithm; this
//! driver does the same for ocf, so that what a benchmark through it shows is the framework
//! alone (validation, dispatch, completion, accounting).
//!
//! Its results are not cryptography, so it is `named_only`: the registry never gives it a
//! session on its own, only to callers that ask for `"null"` by name.

use std::sync::Arc;

use ocf::{
    Capabilities, Driver, DriverSession, Error, Framework, Hint, Priority, Processed, Request,
    SessionContext, SessionParams,
};

/// The name the null driver registers under.
pub const NAME: &str = "null";

/// The null driver.
#[derive(Debug, Default)]
pub struct NullDriver {
    _private: (),
}

/// Registers a null driver with `fw`.
pub fn register(fw: &Framework) -> Result<(), Error> {
    fw.register(Arc::new(NullDriver::default()))
}

impl Driver for NullDriver {
    fn name(&self) -> &str {
        NAME
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities { synchronous: true, named_only: true, ..Capabilities::every_algorithm() }
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
