//! iked's configuration file: swanctl.conf's syntax and sections, so that an operator can
//! paste a swanctl.conf connection with few or no changes (`docs/iked.md` lists every
//! setting, its default, and what differs from swanctl.conf).
//!
//! ```text
//!  file ─▶ settings::parse ─▶ [Item] (sections and settings with line:column)
//!                               │
//!              ┌────────────────┴─────────────────┐
//!              ▼                                  ▼
//!   connections::connection            secrets::secrets
//!   (settings → ike-core types,        (ike-… pre-shared keys,
//!    strongSwan's defaults)              private-… key files)
//!              └────────────────┬─────────────────┘
//!                               ▼
//!              Connection::validate(&secrets) ─▶ Config
//!
//!  Config (running), Config (reloaded) ─▶ diff ─▶ added / removed / changed / unchanged
//! ```
//!
//! Every error names the file, the line and the column ([`ConfigError`]). Unknown settings
//! and sections are refused, never ignored: a typo (`esp_proposal`, `rekey_tim`) would
//! otherwise silently leave a policy at its default, which may be weaker than meant.
//! Settings and sections given twice are refused for the same reason (strongSwan keeps the
//! last value, or merges the sections).

use std::path::Path;

use ike_core::config::{Connection, Secrets};

mod connections;
mod diff;
mod error;
mod secrets;
pub mod settings;
mod values;

pub use diff::Diff;
pub use error::{ConfigError, ErrorKind};

use settings::{Item, Pos};
use values::{Ctx, Seen};

/// The largest configuration file read, in bytes (a real one is a few kilobytes).
pub const MAX_FILE_LEN: usize = 1 << 20;

/// A whole configuration.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Config {
    /// In file order; names are unique.
    pub connections: Vec<Connection>,
    pub secrets: Secrets,
}

impl Config {
    /// Reads the configuration file at `path`; relative certificate and key files are read
    /// from under its directory.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let whole = |kind| ConfigError { file: path.to_path_buf(), line: 0, column: 0, kind };
        let bytes = std::fs::read(path).map_err(|e| whole(ErrorKind::Io(e.to_string())))?;
        if bytes.len() > MAX_FILE_LEN {
            return Err(whole(ErrorKind::TooLarge));
        }
        let text = String::from_utf8(bytes).map_err(|_| whole(ErrorKind::Io("not UTF-8 text".into())))?;
        Config::parse(&text, path)
    }

    /// Reads a configuration from its text; `origin` is the file it came from, for error
    /// messages and for relative file names (read from under its directory).
    pub fn parse(text: &str, origin: &Path) -> Result<Config, ConfigError> {
        let base = origin.parent().unwrap_or(Path::new(""));
        let ctx = Ctx { file: origin, base };
        let items =
            settings::parse(text).map_err(|e| ConfigError::at(origin, e.pos, ErrorKind::Syntax(e.error)))?;
        let mut config = Config::default();
        let mut positions: Vec<Pos> = Vec::new();
        let mut seen = Seen::default();
        for item in &items {
            let sec = match item {
                Item::Section(s) => s,
                Item::Setting(s) => {
                    return Err(ctx.err(
                        s.pos,
                        ErrorKind::UnknownKey { key: s.key.clone(), section: "the file's top level".into() },
                    ))
                }
            };
            seen.section(&ctx, sec)?;
            match sec.name.as_str() {
                "connections" => {
                    let mut names = Seen::default();
                    for c in &sec.items {
                        match c {
                            Item::Section(c) => {
                                names.section(&ctx, c)?;
                                config.connections.push(connections::connection(&ctx, c)?);
                                positions.push(c.pos);
                            }
                            Item::Setting(s) => {
                                return Err(ctx.err(s.pos, ErrorKind::ExpectedSection(s.key.clone())))
                            }
                        }
                    }
                }
                "secrets" => secrets::secrets(&ctx, sec, &mut config.secrets)?,
                _ => {
                    return Err(ctx.err(
                        sec.pos,
                        ErrorKind::UnknownSection {
                            name: sec.name.clone(),
                            section: "the file's top level".into(),
                        },
                    ))
                }
            }
        }
        for (c, &pos) in config.connections.iter().zip(&positions) {
            c.validate(&config.secrets).map_err(|e| ctx.err(pos, ErrorKind::Invalid(e)))?;
        }
        Ok(config)
    }

    /// The connection called `name`.
    pub fn connection(&self, name: &str) -> Option<&Connection> {
        self.connections.iter().find(|c| c.name == name)
    }

    /// What a reload from `old` to `new` changes (see [`Diff`]).
    pub fn diff(old: &Config, new: &Config) -> Diff {
        diff::diff(old, new)
    }
}
