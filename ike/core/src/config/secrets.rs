//! The secrets: pre-shared keys bound to identities (swanctl.conf's `ike-NAME { id-… = …,
//! secret = … }`) and private key files (`private-NAME { file = … }`), and the lookup of the
//! key for a pair of identities.
//!
//! The lookup is strongSwan's (`shared_key` matching in its credential manager): a secret with
//! no identities matches every pair; one whose identities include both the local and the
//! remote identity matches best, one that includes either matches less well. The best match
//! wins; among equals, the first in the file.

use std::path::PathBuf;

use zeroize::Zeroizing;

use super::auth::Psk;
use super::identity::Identity;

/// A pre-shared key and the identities it is for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SharedSecret {
    /// The section's name without `ike-`, for messages.
    pub name: String,
    /// Empty: any identity.
    pub ids: Vec<Identity>,
    pub secret: Psk,
}

/// A private key file and the passphrase that decrypts it, if any.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PrivateKey {
    pub name: String,
    pub file: PathBuf,
    pub passphrase: Option<Zeroizing<String>>,
}

/// Every secret of a configuration.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Secrets {
    pub shared: Vec<SharedSecret>,
    pub private_keys: Vec<PrivateKey>,
}

impl Secrets {
    /// The pre-shared key for the two identities, if any secret matches them (module doc).
    pub fn psk_for(&self, local: &Identity, remote: &Identity) -> Option<&Psk> {
        let mut best: Option<(u8, &Psk)> = None;
        for s in &self.shared {
            let score = if s.ids.is_empty() {
                1
            } else {
                let has = |id: &Identity| s.ids.iter().any(|x| x.matches(id) || id.matches(x));
                match (has(local), has(remote)) {
                    (true, true) => 3,
                    (true, false) | (false, true) => 2,
                    (false, false) => 0,
                }
            };
            if score > 0 && best.is_none_or(|(b, _)| score > b) {
                best = Some((score, &s.secret));
            }
        }
        best.map(|(_, k)| k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(name: &str, ids: &[&str], key: &str) -> SharedSecret {
        SharedSecret {
            name: name.into(),
            ids: ids.iter().map(|s| Identity::parse(s).unwrap()).collect(),
            secret: Psk::parse(key).unwrap(),
        }
    }

    #[test]
    fn best_match_wins() {
        let s = Secrets {
            shared: vec![
                secret("any", &[], "any-any-any-any-any"),
                secret("one", &["b.example"], "one-one-one-one-one"),
                secret("both", &["a.example", "b.example"], "both-both-both-both"),
            ],
            private_keys: Vec::new(),
        };
        let id = |x| Identity::parse(x).unwrap();
        let get = |l, r| s.psk_for(&id(l), &id(r)).map(|k| k.as_bytes().to_vec());
        assert_eq!(get("a.example", "b.example").unwrap(), b"both-both-both-both");
        assert_eq!(get("c.example", "b.example").unwrap(), b"one-one-one-one-one");
        assert_eq!(get("c.example", "d.example").unwrap(), b"any-any-any-any-any");
        let none =
            Secrets { shared: vec![secret("x", &["x.example"], "xxxxxxxxxxxxxxxx")], ..Default::default() };
        assert!(none.psk_for(&id("a.example"), &id("b.example")).is_none());
    }
}
