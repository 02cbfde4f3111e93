//! Certificate credentials of the connections whose rounds are `auth = pubkey`: our
//! certificates and private key, and the CAs a peer's chain must end in. Sans I/O: iked
//! reads the files named by `certs`, `cacerts` and the secrets' `private-NAME { file }`,
//! parses them with [`crate::cert::load_certificates`] and
//! [`crate::cert::load_private_key`], and hands them here by connection name.
//!
//! ```text
//!  iked: files ─ load_certificates / load_private_key ─▶ ConnCredentials ─▶ Config.credentials
//!  IKE_SA_INIT (responder), IKE_AUTH request (initiator): CERTREQ = certreq_data(trust)
//!  IKE_AUTH out: CERT per certificate of `certs`, AUTH signed with `key`
//!  IKE_AUTH in:  trust.validate(peer's CERTs, unix time) → Identity::bound_by → verify AUTH
//! ```

use std::collections::HashMap;

use crate::cert::{Certificate, TrustStore};
use crate::crypto::SigningKey;

/// One connection's certificates and key.
#[derive(Clone, Debug)]
pub struct ConnCredentials {
    /// Ours: the end entity first, then intermediates to send with it.
    pub certs: Vec<Certificate>,
    /// The private key of `certs[0]`.
    pub key: Option<SigningKey>,
    /// The CAs (`cacerts`) a peer's chain must end in.
    pub trust: TrustStore,
}

impl Default for ConnCredentials {
    fn default() -> ConnCredentials {
        ConnCredentials { certs: Vec::new(), key: None, trust: TrustStore::new(Vec::new()) }
    }
}

/// The credentials of every connection, by connection name.
#[derive(Clone, Debug, Default)]
pub struct Credentials {
    pub connections: HashMap<String, ConnCredentials>,
}

impl Credentials {
    /// The credentials of the connection `name`, if any were given.
    pub fn get(&self, name: &str) -> Option<&ConnCredentials> {
        self.connections.get(name)
    }
}
