//! The configuration's error: the file, the line and column, and one variant per cause.
//! Printed as `FILE:LINE:COLUMN: message`, the form editors and compilers use. A message
//! never quotes a secret.

use std::fmt;
use std::path::PathBuf;

use ike_core::config::{
    DurationError, IdentityError, LifetimeError, ProposalError, PskError, TsError, ValidationError,
};

use super::settings::{Pos, SyntaxError};

/// What is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// The file could not be read.
    Io(String),
    /// The file is larger than [`MAX_FILE_LEN`](super::MAX_FILE_LEN).
    TooLarge,
    Syntax(SyntaxError),
    /// A setting this section does not have (typos are refused, never ignored: a misspelt
    /// key would silently leave a policy at a weaker default).
    UnknownKey {
        key: String,
        section: String,
    },
    /// A section this section does not have.
    UnknownSection {
        name: String,
        section: String,
    },
    /// A setting given twice in one section (strongSwan keeps the last one silently).
    DuplicateKey(String),
    /// A section given twice (strongSwan merges them silently).
    DuplicateSection(String),
    /// `name = …` where a section `name { … }` belongs.
    ExpectedSection(String),
    /// `name { … }` where a setting `name = …` belongs.
    ExpectedSetting(String),
    /// A required setting is missing from the section.
    MissingKey {
        key: &'static str,
        section: String,
    },
    /// A connection with no `local { }` or no `remote { }` round.
    MissingRound(&'static str),
    /// A second authentication round on one side (`local-1`, `local-2`).
    SecondRound(String),
    /// A value not among those the setting takes.
    BadChoice {
        key: String,
        value: String,
        allowed: &'static str,
    },
    /// A value strongSwan takes that iked does not support, and why.
    Unsupported {
        key: String,
        value: String,
        why: &'static str,
    },
    /// An empty entry in a comma-separated list of files.
    EmptyItem(String),
    /// An address that is not an IP address or `%any`.
    BadAddress(String),
    /// A secrets section of a kind iked does not support (`eap-`, `xauth-`, `ppk-` …).
    UnsupportedSecret(String),
    Proposal(ProposalError),
    Identity(IdentityError),
    Psk(PskError),
    TrafficSelector(TsError),
    Duration(DurationError),
    Lifetime(LifetimeError),
    /// A connection that fails [`Connection::validate`](ike_core::config::Connection::validate).
    Invalid(ValidationError),
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ErrorKind::Io(e) => write!(f, "cannot read: {e}"),
            ErrorKind::TooLarge => write!(f, "file larger than {} bytes", super::MAX_FILE_LEN),
            ErrorKind::Syntax(e) => write!(f, "{e}"),
            ErrorKind::UnknownKey { key, section } => write!(f, "unknown setting '{key}' in {section}"),
            ErrorKind::UnknownSection { name, section } => write!(f, "unknown section '{name}' in {section}"),
            ErrorKind::DuplicateKey(k) => write!(f, "'{k}' is set twice in this section"),
            ErrorKind::DuplicateSection(n) => write!(f, "section '{n}' appears twice"),
            ErrorKind::ExpectedSection(n) => write!(f, "'{n}' is a section: write '{n} {{ … }}'"),
            ErrorKind::ExpectedSetting(n) => write!(f, "'{n}' is a setting: write '{n} = …'"),
            ErrorKind::MissingKey { key, section } => write!(f, "{section} needs '{key}'"),
            ErrorKind::MissingRound(side) => write!(f, "the connection needs a '{side} {{ … }}' section"),
            ErrorKind::SecondRound(n) => {
                write!(f, "'{n}': a second authentication round is not supported (one local, one remote)")
            }
            ErrorKind::BadChoice { key, value, allowed } => {
                write!(f, "'{value}' is not a value of {key} (one of: {allowed})")
            }
            ErrorKind::Unsupported { key, value, why } => {
                write!(f, "{key} = {value} is not supported: {why}")
            }
            ErrorKind::EmptyItem(k) => write!(f, "empty entry in the list of {k}"),
            ErrorKind::BadAddress(a) => {
                write!(f, "'{a}' is not an IP address or %any (host names are not resolved)")
            }
            ErrorKind::UnsupportedSecret(n) => {
                write!(
                    f,
                    "secret '{n}': only ike-… (pre-shared keys) and private-… (key files) are supported"
                )
            }
            ErrorKind::Proposal(e) => write!(f, "{e}"),
            ErrorKind::Identity(e) => write!(f, "{e}"),
            ErrorKind::Psk(e) => write!(f, "{e}"),
            ErrorKind::TrafficSelector(e) => write!(f, "{e}"),
            ErrorKind::Duration(e) => write!(f, "{e}"),
            ErrorKind::Lifetime(e) => write!(f, "{}: {e}", e.field()),
            ErrorKind::Invalid(e) => write!(f, "{e}"),
        }
    }
}

/// An error in a configuration file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    pub file: PathBuf,
    /// 1-based; line 0 for an error about the whole file (it cannot be read).
    pub line: usize,
    pub column: usize,
    pub kind: ErrorKind,
}

impl ConfigError {
    pub(super) fn at(file: &std::path::Path, pos: Pos, kind: ErrorKind) -> ConfigError {
        ConfigError { file: file.to_path_buf(), line: pos.line, column: pos.column, kind }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.file.display(), self.kind)
        } else {
            write!(f, "{}:{}:{}: {}", self.file.display(), self.line, self.column, self.kind)
        }
    }
}

impl std::error::Error for ConfigError {}
