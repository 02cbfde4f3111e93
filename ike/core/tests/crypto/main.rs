//! ike-core's cryptography against known answers (NIST CAVP, RFC 5903, RFC 7748, RFC 4231)
//! and against independent implementations that run here (Python's `cryptography` and
//! `hmac` in target/peers-venv, the openssl CLI). One test binary, a module per concern.

mod common;

mod auth;
mod kdf;
mod kex;
mod ocf_counts;
mod signature;
mod sk;
