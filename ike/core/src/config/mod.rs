//! The policy the IKE state machine works from: connections, their children, proposals,
//! identities and secrets, as plain types whose values are already checked.
//!
//! Nothing here reads a file: the daemon (`iked`) parses its configuration file, in
//! swanctl.conf's syntax, and builds these types through the parse functions below, each of
//! which takes one value as swanctl.conf writes it and answers with the value or an error
//! that says what is wrong with it. [`Connection::validate`] then checks what a single
//! value cannot show (a lifetime shorter than its rekey time, an initiator with no peer).
//!
//! ```text
//!   "aes128gcm16-prfsha256-x25519"  ─▶ proposal::parse_proposals ─▶ [Proposal]
//!   "gw.example.org", "C=CH, CN=y"  ─▶ Identity::parse            ─▶ Identity
//!   "0x…", "0s…", "text"            ─▶ Psk::parse                 ─▶ Psk (zeroized)
//!   "10.0.0.0/24[tcp/80]"           ─▶ TrafficSelector::parse     ─▶ TrafficSelector
//!   "1h", "30m", "3600"             ─▶ lifetime::parse_duration   ─▶ Duration
//!        │
//!        ▼
//!   Child { ts, mode, esp proposals, lifetimes, actions }
//!   Connection { addrs, auth rounds, ike proposals, lifetimes, children } ─▶ validate()
//! ```
//!
//! One concern per file: [`proposal`] (strongSwan's proposal keywords and rules),
//! [`identity`], [`auth`] (authentication rounds and pre-shared keys), [`secrets`] (the
//! shared secrets and their lookup by identities), [`ts`] (traffic selectors), [`lifetime`]
//! (durations and the lifetime defaults), [`child`], [`connection`], [`error`] (the
//! validation error naming the connection, child and field).

pub mod auth;
pub mod child;
pub mod connection;
pub mod error;
pub mod identity;
pub mod lifetime;
pub mod proposal;
pub mod secrets;
pub mod ts;

pub use auth::{AuthMethod, AuthRound, Psk, PskError, PSK_MIN_LEN};
pub use child::{Child, DpdAction, Mode, StartAction};
pub use connection::{Connection, Fragmentation, Unique};
pub use error::{Invalid, ValidationError};
pub use identity::{Identity, IdentityError};
pub use lifetime::{parse_duration, ChildLifetimes, DurationError, IkeLifetimes, LifetimeError};
pub use proposal::{parse_proposals, Encr, Proposal, ProposalError, Protocol};
pub use secrets::{PrivateKey, Secrets, SharedSecret};
pub use ts::{TrafficSelector, TsAddr, TsError};
