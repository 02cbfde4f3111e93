//! The certificate credentials iked hands ike-core (which reads no files): for each
//! connection whose rounds are `auth = pubkey`, its `certs` (ours, the end entity first),
//! the private key of the end entity from the secrets' `private-NAME { file }`, and the
//! `cacerts` of the remote round as the CAs a peer's chain must end in.
//!
//! ```text
//!  local.certs files   ─ read, load_certificates ─▶ certs (end entity first)
//!  private-* files     ─ read, load_private_key ─▶ the key whose signature the end
//!                                                   entity's public key verifies
//!  remote.cacerts files ─ read, load_certificates ─▶ TrustStore
//! ```
//!
//! A key is matched to its certificate by a test signature (RFC 7427 method 14 over a fixed
//! message, verified with the certificate's key), as strongSwan matches a private key to a
//! certificate by its public key. Encrypted key files (a `secret` passphrase) are refused:
//! ike-core's loader reads unencrypted PKCS#8, SEC1 and PKCS#1 only.

use std::path::Path;

use ike_core::cert::{load_certificates, load_private_key, Certificate, TrustStore};
use ike_core::config::AuthMethod;
use ike_core::credentials::{ConnCredentials, Credentials};
use ike_core::crypto::{verify_signature, SigningKey};
use ike_wire::ids::HashAlgorithm;

use crate::config::Config;

const PROBE: &[u8] = b"iked: does this key belong to this certificate?";

fn read(file: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(file).map_err(|e| format!("{}: {e}", file.display()))
}

fn certificates(files: &[std::path::PathBuf]) -> Result<Vec<Certificate>, String> {
    let mut out = Vec::new();
    for f in files {
        out.extend(load_certificates(&read(f)?).map_err(|e| format!("{}: {e}", f.display()))?);
    }
    Ok(out)
}

/// Whether `key` is the private half of `cert`'s public key.
fn belongs(fw: &ocf::Framework, key: &SigningKey, cert: &Certificate) -> bool {
    let all = [HashAlgorithm::SHA2_256, HashAlgorithm::SHA2_384, HashAlgorithm::SHA2_512];
    let Ok(scheme) = key.choose_scheme(&all) else { return false };
    key.sign(fw, scheme, PROBE)
        .is_ok_and(|sig| verify_signature(fw, cert.spki(), scheme.method(), &sig, PROBE).is_ok())
}

/// Every `pubkey` connection's credentials, the files read now.
pub fn load(fw: &ocf::Framework, config: &Config) -> Result<Credentials, String> {
    let mut keys = Vec::new();
    for k in &config.secrets.private_keys {
        if k.passphrase.is_some() {
            return Err(format!("private-{}: encrypted key files are not supported", k.name));
        }
        let key = load_private_key(&read(&k.file)?).map_err(|e| format!("{}: {e}", k.file.display()))?;
        keys.push(key);
    }
    let mut out = Credentials::default();
    for c in &config.connections {
        if c.local.method != AuthMethod::Pubkey && c.remote.method != AuthMethod::Pubkey {
            continue;
        }
        let mut creds = ConnCredentials::default();
        if c.local.method == AuthMethod::Pubkey {
            creds.certs = certificates(&c.local.certs)?;
            let ee =
                creds.certs.first().ok_or(format!("connection {}: local pubkey without certs", c.name))?;
            creds.key = Some(keys.iter().find(|k| belongs(fw, k, ee)).cloned().ok_or(format!(
                "connection {}: no private key in the secrets for certificate '{}'",
                c.name,
                ee.subject_text()
            ))?);
        }
        if c.remote.method == AuthMethod::Pubkey {
            creds.trust = TrustStore::new(certificates(&c.remote.cacerts)?);
        }
        out.connections.insert(c.name.clone(), creds);
    }
    Ok(out)
}
