//! `ipsecctl ike list --raw`: iked's IKE SAs and CHILD_SAs one field a line, under the
//! names and in the values of strongSwan's `swanctl --list-sas --raw`, so that a script
//! (scripts/ike-interop) reads iked and charon alike.
//!
//! ```text
//!  IkeSa ──▶ "ike CONN state ESTABLISHED"            "ike CONN dh-group CURVE_25519"
//!            "ike CONN initiator-spi 5f0c…"          "ike CONN remote-id b.ocf.test" …
//!   └ ChildSa ──▶ "child CONN CHILD state INSTALLED"  "child CONN CHILD encr-alg AES_GCM_16"
//!                 "child CONN CHILD spi-in c1a2b3c4"  …
//! ```
//!
//! The fields (charon's names; a field charon leaves out, iked leaves out too):
//! - IKE SA: `state` (charon's words: CONNECTING, ESTABLISHED, DELETING), `initiator`
//!   (yes when we initiated), `local-host`, `local-port`, `remote-host`, `remote-port`,
//!   `local-id`, `remote-id` (once authenticated), `initiator-spi`, `responder-spi` (16 hex
//!   digits), `nat-local`, `nat-remote` (yes, or left out), `encr-alg`, `encr-keysize`
//!   (not for ChaCha20-Poly1305), `integ-alg` (not with an AEAD), `prf-alg`, `dh-group`;
//! - CHILD_SA: `state` (INSTALLED: iked lists only what it installed), `mode` (TUNNEL,
//!   TRANSPORT), `protocol` (ESP), `encap` (yes for ESP in UDP), `spi-in`, `spi-out` (8
//!   hex digits), `encr-alg`, `encr-keysize`, `integ-alg`, `esn` (yes, or left out),
//!   `local-ts`, `remote-ts` (the selectors' address ranges).
//!
//! The counters of a CHILD_SA (bytes, packets) are ipsecd's: `ipsecctl stats`.

use std::fmt::Write as _;

use ike_core::config::Mode;
use ike_core::crypto::{Encr, Integ, KeMethod, Prf};
use ike_core::ike_sa::{IkeSa, State};
use ike_wire::ts::TrafficSelector;

/// The raw listing of `sas` (in the order given), each named by `conn_name(sa.conn)` with
/// `local_id` its configured local identity.
pub fn raw_list<'a>(sas: impl IntoIterator<Item = (&'a IkeSa, &'a str, String)>) -> String {
    let mut s = String::new();
    for (sa, conn, local_id) in sas {
        let mut f = |k: &str, v: &dyn std::fmt::Display| {
            let _ = writeln!(s, "ike {conn} {k} {v}");
        };
        f("state", &state_name(sa.state));
        f("initiator", &yes_no(sa.initiator));
        f("local-host", &sa.local.ip());
        f("local-port", &sa.local.port());
        f("remote-host", &sa.remote.ip());
        f("remote-port", &sa.remote.port());
        f("local-id", &local_id);
        if let Some(id) = &sa.peer_id {
            f("remote-id", id);
        }
        f("initiator-spi", &format_args!("{:016x}", sa.spi_i));
        f("responder-spi", &format_args!("{:016x}", sa.spi_r));
        if sa.nat_local {
            f("nat-local", &"yes");
        }
        if sa.nat_remote {
            f("nat-remote", &"yes");
        }
        if let Some(suite) = &sa.suite {
            let (encr, bits) = encr_name(suite.encr);
            f("encr-alg", &encr);
            if let Some(b) = bits {
                f("encr-keysize", &b);
            }
            if let Some(i) = suite.integ {
                f("integ-alg", &integ_name(i));
            }
            f("prf-alg", &prf_name(suite.prf));
            f("dh-group", &ke_name(suite.ke));
        }
        for c in &sa.children {
            let mut f = |k: &str, v: &dyn std::fmt::Display| {
                let _ = writeln!(s, "child {conn} {} {k} {v}", c.name);
            };
            f("state", &"INSTALLED");
            f("mode", &if c.mode == Mode::Transport { "TRANSPORT" } else { "TUNNEL" });
            f("protocol", &"ESP");
            if sa.behind_nat() {
                f("encap", &"yes");
            }
            f("spi-in", &format_args!("{:08x}", c.spi_in));
            f("spi-out", &format_args!("{:08x}", c.spi_out));
            let (encr, bits) = encr_name(c.suite.encr);
            f("encr-alg", &encr);
            if let Some(b) = bits {
                f("encr-keysize", &b);
            }
            if let Some(i) = c.suite.integ {
                f("integ-alg", &integ_name(i));
            }
            if c.esn {
                f("esn", &"yes");
            }
            f("local-ts", &ts_list(&c.local_ts));
            f("remote-ts", &ts_list(&c.remote_ts));
        }
    }
    s
}

fn yes_no(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

/// charon's words for an IKE SA's state (`ike_sa_state_names`).
pub fn state_name(s: State) -> &'static str {
    match s {
        State::InitSent | State::AuthSent | State::HalfOpen => "CONNECTING",
        State::Established => "ESTABLISHED",
        State::Deleting => "DELETING",
    }
}

/// charon's name of an encryption algorithm (`encryption_algorithm_names`) and its key size
/// in bits where charon lists one.
pub fn encr_name(e: Encr) -> (&'static str, Option<usize>) {
    match e {
        Encr::AesGcm16 { key_len } => ("AES_GCM_16", Some(key_len * 8)),
        Encr::AesCbc { key_len } => ("AES_CBC", Some(key_len * 8)),
        Encr::ChaCha20Poly1305 => ("CHACHA20_POLY1305", None),
    }
}

/// charon's name of an integrity algorithm (`integrity_algorithm_names`).
pub fn integ_name(i: Integ) -> &'static str {
    match i {
        Integ::HmacSha256_128 => "HMAC_SHA2_256_128",
        Integ::HmacSha384_192 => "HMAC_SHA2_384_192",
        Integ::HmacSha512_256 => "HMAC_SHA2_512_256",
    }
}

/// charon's name of a PRF (`pseudo_random_function_names`).
pub fn prf_name(p: Prf) -> &'static str {
    match p {
        Prf::HmacSha1 => "PRF_HMAC_SHA1",
        Prf::HmacSha256 => "PRF_HMAC_SHA2_256",
        Prf::HmacSha384 => "PRF_HMAC_SHA2_384",
        Prf::HmacSha512 => "PRF_HMAC_SHA2_512",
    }
}

/// charon's name of a key exchange method (`key_exchange_method_names`).
pub fn ke_name(k: KeMethod) -> &'static str {
    match k {
        KeMethod::X25519 => "CURVE_25519",
        KeMethod::Ecp256 => "ECP_256",
        KeMethod::Ecp384 => "ECP_384",
        KeMethod::Modp2048 => "MODP_2048",
    }
}

/// The selectors' address ranges, comma-separated (a range of one address as that address).
fn ts_list(v: &[TrafficSelector]) -> String {
    let one = |t: &TrafficSelector| {
        if t.start == t.end {
            t.start.to_string()
        } else {
            format!("{}-{}", t.start, t.end)
        }
    };
    v.iter().map(one).collect::<Vec<_>>().join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The names are charon's, as `swanctl --list-sas --raw` prints them (strongSwan 5.9.8,
    /// src/libstrongswan/crypto/*.c's enum names).
    #[test]
    fn algorithm_names_are_charons() {
        assert_eq!(encr_name(Encr::AesGcm16 { key_len: 32 }), ("AES_GCM_16", Some(256)));
        assert_eq!(encr_name(Encr::AesCbc { key_len: 16 }), ("AES_CBC", Some(128)));
        assert_eq!(encr_name(Encr::ChaCha20Poly1305), ("CHACHA20_POLY1305", None));
        assert_eq!(integ_name(Integ::HmacSha256_128), "HMAC_SHA2_256_128");
        assert_eq!(prf_name(Prf::HmacSha384), "PRF_HMAC_SHA2_384");
        assert_eq!(
            [KeMethod::X25519, KeMethod::Ecp256, KeMethod::Ecp384, KeMethod::Modp2048].map(ke_name),
            ["CURVE_25519", "ECP_256", "ECP_384", "MODP_2048"]
        );
        assert_eq!(state_name(State::HalfOpen), "CONNECTING");
    }
}
