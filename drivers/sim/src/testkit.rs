//! Test drivers shared by the crate's unit tests (`tests.rs` and `device.rs`'s timing-model
//! test), in a module of their own so that neither test module imports the other.

use std::sync::Mutex;

use ocf::{
    Capabilities, Driver, DriverSession, Error, Hint, Priority, Processed, Request, SessionContext,
    SessionParams,
};

/// A driver that only exists to hand out the `SessionContext` the framework makes for it:
/// ocf has no other way to make one, and these tests call the sim's `process` directly
/// (`device.rs`'s timing-model test too).
pub(crate) struct ContextCatcher(pub(crate) Mutex<Option<SessionContext>>);

/// A driver session that answers every request at once, unchanged.
pub(crate) struct Nothing;

impl DriverSession for Nothing {
    fn process(&self, req: Request, _hint: Hint) -> Processed {
        Processed::Done(Ok(req))
    }
}

impl Driver for ContextCatcher {
    fn name(&self) -> &str {
        "context-catcher"
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities { synchronous: true, named_only: true, ..Capabilities::every_algorithm() }
    }
    fn probe_session(&self, _: &SessionParams) -> Option<Priority> {
        Some(Priority::Software)
    }
    fn new_session(&self, _: &SessionParams, ctx: SessionContext) -> Result<Box<dyn DriverSession>, Error> {
        *self.0.lock().unwrap() = Some(ctx);
        Ok(Box::new(Nothing))
    }
}
