//! ike-core's certificates (`ike_core::cert`) against certificates made by independent
//! implementations at test time — the openssl CLI, strongSwan's `pki`, the `rcgen` crate —
//! with `openssl verify` as the independent verdict on every chain, valid or refused.

mod common;

mod openssl;
mod rcgen;
mod strongswan;
