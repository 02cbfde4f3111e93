//! The `secrets { }` section, as swanctl.conf writes it:
//!
//! ```text
//! secrets {
//!     ike-NAME { id = …  id-SUFFIX = …  secret = … }      a pre-shared key for identities
//!     private-NAME { file = …  secret = … }               a private key file (+ passphrase)
//! }
//! ```
//!
//! As in swanctl.conf, a pre-shared key section's name starts with `ike` and a key file's
//! with `private` (or `rsa`, `ecdsa`, `pkcs8`, swanctl's older names for the same); relative
//! key files are read from `private/` beside the configuration file. Other kinds (`eap`,
//! `xauth`, `ntlm`, `ppk`, `token`, `pkcs12`) are refused. Errors never quote a secret.

use ike_core::config::{Identity, PrivateKey, Psk, Secrets, SharedSecret};
use zeroize::Zeroizing;

use super::error::ErrorKind;
use super::settings::{Item, Section, Setting};
use super::values::{Ctx, Seen, R};

/// A secret's settings, each key once (`what` names the secret in errors); a section
/// inside a secret is refused.
fn settings<'a>(ctx: &Ctx, sec: &'a Section, what: &str) -> R<Vec<&'a Setting>> {
    let mut seen = Seen::default();
    let mut out = Vec::new();
    for item in &sec.items {
        match item {
            Item::Setting(s) => {
                seen.setting(ctx, s)?;
                out.push(s);
            }
            Item::Section(x) => {
                let section = what.to_owned();
                return Err(ctx.err(x.pos, ErrorKind::UnknownSection { name: x.name.clone(), section }));
            }
        }
    }
    Ok(out)
}

fn shared(ctx: &Ctx, sec: &Section) -> R<SharedSecret> {
    let what = format!("secret '{}'", sec.name);
    let mut ids = Vec::new();
    let mut secret = None;
    for s in settings(ctx, sec, &what)? {
        match s.key.as_str() {
            "secret" => secret = Some(ctx.value(s, Psk::parse, ErrorKind::Psk)?),
            k if k == "id" || k.starts_with("id-") => {
                ids.push(ctx.value(s, Identity::parse, ErrorKind::Identity)?)
            }
            _ => return Err(ctx.err(s.pos, ErrorKind::UnknownKey { key: s.key.clone(), section: what })),
        }
    }
    let secret =
        secret.ok_or_else(|| ctx.err(sec.pos, ErrorKind::MissingKey { key: "secret", section: what }))?;
    Ok(SharedSecret { name: sec.name.clone(), ids, secret })
}

fn private(ctx: &Ctx, sec: &Section) -> R<PrivateKey> {
    let what = format!("secret '{}'", sec.name);
    let mut file = None;
    let mut passphrase = None;
    for s in settings(ctx, sec, &what)? {
        match s.key.as_str() {
            "file" if s.value.is_empty() => {
                return Err(ctx.err(s.value_pos, ErrorKind::EmptyItem(s.key.clone())))
            }
            "file" => file = Some(ctx.path(&s.value, "private")),
            "secret" => passphrase = Some(Zeroizing::new(s.value.clone())),
            _ => return Err(ctx.err(s.pos, ErrorKind::UnknownKey { key: s.key.clone(), section: what })),
        }
    }
    let file = file.ok_or_else(|| ctx.err(sec.pos, ErrorKind::MissingKey { key: "file", section: what }))?;
    Ok(PrivateKey { name: sec.name.clone(), file, passphrase })
}

/// The `secrets` section's content.
pub(super) fn secrets(ctx: &Ctx, sec: &Section, out: &mut Secrets) -> R<()> {
    let mut seen = Seen::default();
    for item in &sec.items {
        let x = match item {
            Item::Section(x) => x,
            Item::Setting(s) => return Err(ctx.err(s.pos, ErrorKind::ExpectedSection(s.key.clone()))),
        };
        seen.section(ctx, x)?;
        let n = x.name.as_str();
        if n.starts_with("ike") {
            out.shared.push(shared(ctx, x)?);
        } else if ["private", "rsa", "ecdsa", "pkcs8"].iter().any(|p| n.starts_with(p)) {
            out.private_keys.push(private(ctx, x)?);
        } else {
            return Err(ctx.err(x.pos, ErrorKind::UnsupportedSecret(n.to_string())));
        }
    }
    Ok(())
}
