//! What the section readers share: the file being read (for error positions and relative
//! paths), the check that a section names each setting and subsection at most once, and the
//! readers of the small value types (booleans, choices, address lists, file lists).

use std::collections::HashSet;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use super::error::{ConfigError, ErrorKind};
use super::settings::{Pos, Section, Setting};

/// The file being read.
pub(super) struct Ctx<'a> {
    pub file: &'a Path,
    /// The directory relative file names are read from (swanctl's layout under it:
    /// `x509/`, `x509ca/`, `private/`).
    pub base: &'a Path,
}

pub(super) type R<T> = Result<T, ConfigError>;

impl Ctx<'_> {
    pub fn err(&self, pos: Pos, kind: ErrorKind) -> ConfigError {
        ConfigError::at(self.file, pos, kind)
    }

    /// A setting's value through `parse`, an error placed at the value.
    pub fn value<T, E>(
        &self,
        s: &Setting,
        parse: impl FnOnce(&str) -> Result<T, E>,
        wrap: fn(E) -> ErrorKind,
    ) -> R<T> {
        parse(&s.value).map_err(|e| self.err(s.value_pos, wrap(e)))
    }

    /// One of `choices` (the value as written, the meaning), or [`ErrorKind::BadChoice`].
    pub fn choice<T: Copy>(&self, s: &Setting, choices: &[(&str, T)], allowed: &'static str) -> R<T> {
        choices.iter().find(|(name, _)| *name == s.value).map(|&(_, t)| t).ok_or_else(|| {
            self.err(
                s.value_pos,
                ErrorKind::BadChoice { key: s.key.clone(), value: s.value.clone(), allowed },
            )
        })
    }

    /// strongSwan's booleans (`settings_value_as_bool`).
    pub fn boolean(&self, s: &Setting) -> R<bool> {
        self.choice(
            s,
            &[
                ("yes", true),
                ("true", true),
                ("enabled", true),
                ("1", true),
                ("no", false),
                ("false", false),
                ("disabled", false),
                ("0", false),
            ],
            "yes, no",
        )
    }

    /// A comma-separated address list; `%any` (alone) is the empty list.
    pub fn addrs(&self, s: &Setting) -> R<Vec<IpAddr>> {
        let mut out = Vec::new();
        for a in s.value.split(',').map(str::trim) {
            if a == "%any" && s.value.trim() == "%any" {
                return Ok(Vec::new());
            }
            let ip = a.parse().map_err(|_| self.err(s.value_pos, ErrorKind::BadAddress(a.to_string())))?;
            out.push(ip);
        }
        Ok(out)
    }

    /// A comma-separated list of files, relative ones under `base/subdir`.
    pub fn files(&self, s: &Setting, subdir: &str) -> R<Vec<PathBuf>> {
        let mut out = Vec::new();
        for f in s.value.split(',').map(str::trim) {
            if f.is_empty() {
                return Err(self.err(s.value_pos, ErrorKind::EmptyItem(s.key.clone())));
            }
            out.push(self.path(f, subdir));
        }
        Ok(out)
    }

    /// A file name, relative ones under `base/subdir`.
    pub fn path(&self, f: &str, subdir: &str) -> PathBuf {
        let p = Path::new(f);
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.base.join(subdir).join(p)
        }
    }
}

/// The names a section has given so far.
#[derive(Default)]
pub(super) struct Seen(HashSet<String>);

impl Seen {
    pub fn setting(&mut self, ctx: &Ctx, s: &Setting) -> R<()> {
        if !self.0.insert(s.key.clone()) {
            return Err(ctx.err(s.pos, ErrorKind::DuplicateKey(s.key.clone())));
        }
        Ok(())
    }

    pub fn section(&mut self, ctx: &Ctx, s: &Section) -> R<()> {
        if !self.0.insert(s.name.clone()) {
            return Err(ctx.err(s.pos, ErrorKind::DuplicateSection(s.name.clone())));
        }
        Ok(())
    }
}
