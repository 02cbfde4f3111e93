//! # ocf — a user-space cryptographic framework
//!
//! ocf rebuilds the OpenBSD Cryptographic Framework as FreeBSD reworked it (S. Leffler,
//! "Cryptographic Device Support for FreeBSD", BSDCon 2003) for today's machines. It has no
//! algorithms and does no I/O: it connects clients (IPsec, the OpenSSL provider, tools) to
//! drivers (the CPU, accelerators) through one interface.
//!
//! - A client makes a [`Session`] from [`SessionParams`] (mode, algorithms, keys). The
//!   [`Framework`] validates the parameters in one place and gives the session every driver
//!   that can serve it; for each request a [`Policy`] picks one (by default the least
//!   predicted completion time, learned online: `routing`). A caller may pin a session to a
//!   named driver; [`Priority`] ranks the drivers.
//! - The client submits [`Request`]s on the session and gets the outcome one of three ways:
//!   [`Session::run`] (blocking), [`Session::submit`] (callback) or
//!   [`Session::submit_async`] (a `Future`). All three share one path.
//! - A [`Driver`] implements probing, session setup and a per-session processing function
//!   ([`DriverSession::process`]) that finishes a request, accepts it for later completion,
//!   or answers [`Processed::Busy`].
//! - Every error is an [`Error`] variant and is counted separately per session, per driver
//!   and framework-wide ([`SessionStats`], [`DriverStats`], [`FrameworkStats`]).
//! - A message may also travel in pieces ([`Part`]): a session opened with
//!   [`SessionParams::multipart`] takes a first, middle and last part in one reused request,
//!   the driver keeping its state for the message in the request between parts.
//! - Keys live in [`Key`]s, wiped when a session is freed.
//! - Public-key sessions ([`Mode::Asymmetric`], [`asym`]) hold their key: signatures,
//!   key agreement, key encapsulation and modular exponentiation go through the same
//!   dispatch, flow control, counters, profile and cost model (per operation and key
//!   size) as the ciphers; [`Mode::Random`] serves random bytes.
//!
//! ```
//! use std::sync::Arc;
//! # struct Nop;
//! # impl ocf::Driver for Nop {
//! #     fn name(&self) -> &str { "nop" }
//! #     fn capabilities(&self) -> ocf::Capabilities {
//! #         ocf::Capabilities { ciphers: vec![ocf::CipherAlg::Null], synchronous: true, ..Default::default() }
//! #     }
//! #     fn probe_session(&self, _: &ocf::SessionParams) -> Option<ocf::Priority> { Some(ocf::Priority::Software) }
//! #     fn new_session(&self, _: &ocf::SessionParams, _: ocf::SessionContext)
//! #         -> Result<Box<dyn ocf::DriverSession>, ocf::Error> { Ok(Box::new(Nop)) }
//! # }
//! # impl ocf::DriverSession for Nop {
//! #     fn process(&self, r: ocf::Request, _: ocf::Hint) -> ocf::Processed { ocf::Processed::Done(Ok(r)) }
//! # }
//! let fw = ocf::Framework::new();
//! fw.register(Arc::new(Nop)).unwrap();
//! let session = fw.new_session(&ocf::SessionParams::cipher(ocf::CipherAlg::Null, ocf::Key::empty())).unwrap();
//! let req = session.run(ocf::Request::new(ocf::Op::Encrypt, b"hello".to_vec())).unwrap();
//! assert_eq!(req.buf.to_vec(), b"hello");
//! assert_eq!(session.stats().ops, 1);
//! ```
//!
//! ## Layering
//!
//! Modules depend only downwards; nothing imports a module above it (no cycles):
//!
//! ```text
//!  framework                  the registry, session creation, unregistering, statistics
//!      │
//!  session                    the request path: submit, return, ordered completion,
//!      │                      routes and bindings, counters, the workers' jobs
//!      ├────────────┬─────────────┐
//!  completion    dispatch      driver     futures, callbacks │ threads, queues, held
//!      │            │             │       queues (generic)   │ the driver contract
//!      ▼            ▼             ▼
//!  routing, request, credits, profile, buffer, params,        the leaf types (routing: the
//!  error, asym, alg, key                                      policies and the cost model;
//!                                                             asym: public-key algorithms
//!                                                             and key handles)
//! ```
//!
//! The driver contract reaches back into the framework only through the handle it defines
//! ([`SessionContext`], whose other side the session implements); the session reaches the
//! registry only through a trait it defines (`Registrar`, implemented by the framework); and
//! a request's travel state (`request::trip`) lives with the request because the two are
//! mutually recursive.

pub mod alg;
pub mod asym;
pub mod buffer;
pub mod completion;
mod credits;
mod dispatch;
pub mod driver;
pub mod error;
pub mod framework;
pub mod key;
pub mod params;
pub mod profile;
pub mod request;
pub mod routing;
pub mod scrub;
pub mod session;

pub use alg::{CipherAlg, CompAlg, DigestAlg, MacAlg};
pub use asym::{AsymAlg, AsymKey, Curve, ModpGroup, PrivateKey, PublicKey, SigEncoding};
pub use buffer::{Borrowed, Buffer};
pub use completion::{Callback, RequestFuture};
pub use driver::{Capabilities, Driver, DriverSession, Hint, Priority, Processed, SessionContext};
pub use error::{Error, ErrorCounts, ErrorKind};
pub use framework::{Config, DriverInfo, DriverStats, FlowStats, Framework, FrameworkStats};
pub use params::{Key, Mode, SessionParams};
pub use profile::{ProfileStats, Stage, StageStats};
pub use request::{
    Aad, Failed, Flags, InlineAad, Op, Outcome, Part, PartState, Request, RequestFields, TagPlace, Views,
    MAX_IV_LEN, MAX_TAG_LEN,
};
pub use routing::{DriverRouting, ModelEstimate, Policy, RoutingStats, SizeClass};
pub use session::{Session, SessionStats};
