//! The error [`Connection::validate`](super::Connection::validate) returns: which connection,
//! which child, which setting, and what is wrong, so that a message reads
//! `connection 'gw', child 'net', start_action: …`.

use std::fmt;

use super::lifetime::LifetimeError;

/// What a validation found wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Invalid {
    /// A connection without children.
    NoChildren,
    /// Two children with the same name.
    DuplicateChild,
    /// A child that starts (or traps) with no remote address to initiate to.
    InitiateToAny,
    /// Lifetimes that do not fit together.
    Lifetime(LifetimeError),
    /// A `pubkey` local round without a certificate.
    NoCertificate,
    /// A `pubkey` remote round without a CA to check the peer's chain against.
    NoCa,
    /// Certificates on a `psk` round.
    CertificateWithPsk,
    /// A `psk` connection for which no secret matches the identities.
    NoSecret,
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Invalid::NoChildren => write!(f, "a connection needs at least one child"),
            Invalid::DuplicateChild => write!(f, "two children have this name"),
            Invalid::InitiateToAny => {
                write!(f, "start or trap needs remote_addrs to name an address to initiate to, not %any")
            }
            Invalid::Lifetime(e) => write!(f, "{e}"),
            Invalid::NoCertificate => write!(f, "auth = pubkey needs certs (this side's certificate)"),
            Invalid::NoCa => {
                write!(f, "auth = pubkey needs cacerts (the CA the peer's certificate chains to)")
            }
            Invalid::CertificateWithPsk => write!(f, "certs and cacerts are for auth = pubkey, not psk"),
            Invalid::NoSecret => {
                write!(f, "no secret in secrets {{ ike-… }} matches this connection's identities")
            }
        }
    }
}

/// A validation error and where it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValidationError {
    pub connection: String,
    pub child: Option<String>,
    /// The setting to change (`start_action`, `local.certs`, `rekey_time` …).
    pub field: &'static str,
    pub invalid: Invalid,
}

impl fmt::Display for ValidationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "connection '{}'", self.connection)?;
        if let Some(c) = &self.child {
            write!(f, ", child '{c}'")?;
        }
        write!(f, ", {}: {}", self.field, self.invalid)
    }
}

impl std::error::Error for ValidationError {}
