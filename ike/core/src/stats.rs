//! The engine's counters: messages per exchange and outcome (sent and received, requests
//! and responses, error answers each way, dropped), half-open SAs, cookies,
//! retransmissions, authentication failures by who refused whom, and every dropped message
//! by its cause (one counter per [`Drop`] cause, so that a flood or a broken peer shows as
//! what it is).
//!
//! Plain `u64`s: the engine is single-threaded (iked owns it); the daemon copies them
//! into its metrics.

use ike_wire::ids::ExchangeType;

/// Why an incoming message was dropped without changing any state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Drop {
    /// The codec refused it (a length, a field, a critical unknown payload).
    Malformed,
    /// A response, or a non-IKE_SA_INIT request, for an IKE SA we do not have.
    UnknownSa,
    /// A request whose message ID is neither the expected one nor the last answered one.
    OutOfWindow,
    /// A response to no request of ours (wrong ID, or nothing outstanding).
    UnexpectedResponse,
    /// The SK payload's ICV did not verify (or its padding was wrong).
    Unauthenticated,
    /// An IKE_SA_INIT request without a valid COOKIE while cookies are required.
    CookieMissing,
    /// IKE_SA_INIT requests refused because the half-open table is full.
    HalfOpenFull,
    /// A payload the exchange needs is missing, or one it forbids is present.
    MissingPayload,
    /// An exchange type not handled in this state.
    UnexpectedExchange,
    /// A cryptographic operation failed on the peer's values (a bad KE value, a nonce
    /// length).
    BadPeerValue,
    /// A response whose SA payload is not one of our proposals, or a KE of another group.
    BadProposal,
    /// An SKF fragment where we reassemble none: we did not announce fragmentation, or
    /// the SA has no keys yet (RFC 7383 §2.5).
    FragmentUnexpected,
    /// A fragment already held (same number and total).
    FragmentDuplicate,
    /// A fragment whose Total Fragments is below the one being reassembled (§2.6.2).
    FragmentStale,
    /// A fragment past the bounds: too many fragments, or too many bytes held.
    FragmentTooLarge,
    /// A fragment other than the first of a request already answered (RFC 7383 §2.6.1:
    /// only fragment 1 of a retransmitted request brings the response again).
    FragmentOfAnswered,
}

impl Drop {
    /// Every cause, in [`Stats::drops`]' order.
    pub const ALL: [Drop; 16] = [
        Drop::Malformed,
        Drop::UnknownSa,
        Drop::OutOfWindow,
        Drop::UnexpectedResponse,
        Drop::Unauthenticated,
        Drop::CookieMissing,
        Drop::HalfOpenFull,
        Drop::MissingPayload,
        Drop::UnexpectedExchange,
        Drop::BadPeerValue,
        Drop::BadProposal,
        Drop::FragmentUnexpected,
        Drop::FragmentDuplicate,
        Drop::FragmentStale,
        Drop::FragmentTooLarge,
        Drop::FragmentOfAnswered,
    ];

    /// Its name in metrics and logs.
    pub fn name(self) -> &'static str {
        match self {
            Drop::Malformed => "malformed",
            Drop::UnknownSa => "unknown-sa",
            Drop::OutOfWindow => "out-of-window",
            Drop::UnexpectedResponse => "unexpected-response",
            Drop::Unauthenticated => "unauthenticated",
            Drop::CookieMissing => "cookie-missing",
            Drop::HalfOpenFull => "half-open-full",
            Drop::MissingPayload => "missing-payload",
            Drop::UnexpectedExchange => "unexpected-exchange",
            Drop::BadPeerValue => "bad-peer-value",
            Drop::BadProposal => "bad-proposal",
            Drop::FragmentUnexpected => "fragment-unexpected",
            Drop::FragmentDuplicate => "fragment-duplicate",
            Drop::FragmentStale => "fragment-stale",
            Drop::FragmentTooLarge => "fragment-too-large",
            Drop::FragmentOfAnswered => "fragment-of-answered",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Exchanges counted apart; others are [`Exchange::Other`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Exchange {
    SaInit,
    Auth,
    CreateChildSa,
    Informational,
    Other,
}

impl Exchange {
    pub fn of(t: ExchangeType) -> Exchange {
        match t {
            ExchangeType::IKE_SA_INIT => Exchange::SaInit,
            ExchangeType::IKE_AUTH => Exchange::Auth,
            ExchangeType::CREATE_CHILD_SA => Exchange::CreateChildSa,
            ExchangeType::INFORMATIONAL => Exchange::Informational,
            _ => Exchange::Other,
        }
    }
}

/// Per exchange: requests and responses sent and received, and their outcomes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExchangeCounts {
    pub requests_sent: u64,
    pub requests_received: u64,
    pub responses_sent: u64,
    pub responses_received: u64,
    /// Our responses that refused the request with an error notify (type < 16384).
    pub errors_sent: u64,
    /// Responses to our requests that refused them (an error notify), or, authentic, did
    /// not fit what we asked.
    pub errors_received: u64,
    /// Messages of this exchange (parsed, so its type known) dropped without a change of
    /// state, for any [`Drop`] cause (the causes are counted in [`Stats::drops`]).
    pub dropped: u64,
}

/// The counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub sa_init: ExchangeCounts,
    pub auth: ExchangeCounts,
    pub create_child_sa: ExchangeCounts,
    pub informational: ExchangeCounts,
    pub other: ExchangeCounts,
    /// IKE SAs now half-open (responder side, IKE_SA_INIT answered, IKE_AUTH not done).
    pub half_open: u64,
    /// Half-open SAs deleted because IKE_AUTH did not come in time.
    pub half_open_expired: u64,
    /// 1 while IKE_SA_INIT needs a cookie (half-open SAs at the threshold), else 0.
    pub cookies_on: u64,
    /// COOKIE notifies sent (cookies required) and valid cookies received.
    pub cookies_sent: u64,
    pub cookies_accepted: u64,
    /// Requests resent by the retransmission timer, and cached responses resent for a
    /// retransmitted request.
    pub retransmissions: u64,
    pub responses_resent: u64,
    /// Requests given up on after the last retransmission (the IKE SA went down).
    pub retransmit_timeouts: u64,
    /// Our liveness checks sent (dpd_delay), and moves of a peer behind its NAT (§2.23).
    pub liveness_checks: u64,
    pub peer_moves: u64,
    /// Peers we refused: their AUTH did not verify, their identity or certificate did not
    /// fit the connection.
    pub auth_failures: u64,
    /// Our authentication refused by the peer (its AUTHENTICATION_FAILED).
    pub auth_refused_by_peer: u64,
    /// Our own AUTH could not be made (no key for the certificate, an RSA key with a peer
    /// that announced no RFC 7427 hash): the IKE SA went down before IKE_AUTH was sent.
    pub auth_local_failures: u64,
    /// Peer certificates refused: no chain to a configured CA, expired, not binding the
    /// peer's ID (each also an auth failure).
    pub untrusted_certs: u64,
    pub ike_sas_up: u64,
    pub ike_sas_down: u64,
    pub child_sas_installed: u64,
    /// RFC 7383: fragments sent (each fragment of each message, retransmissions not
    /// counted), authenticated fragments kept, and messages reassembled from them.
    pub fragments_sent: u64,
    pub fragments_received: u64,
    pub messages_reassembled: u64,
    drops: [u64; Drop::ALL.len()],
}

impl Stats {
    /// The counts of one exchange type.
    pub fn exchange(&mut self, t: ExchangeType) -> &mut ExchangeCounts {
        match Exchange::of(t) {
            Exchange::SaInit => &mut self.sa_init,
            Exchange::Auth => &mut self.auth,
            Exchange::CreateChildSa => &mut self.create_child_sa,
            Exchange::Informational => &mut self.informational,
            Exchange::Other => &mut self.other,
        }
    }

    /// Counts a dropped message.
    pub fn drop(&mut self, cause: Drop) {
        self.drops[cause.index()] += 1;
    }

    /// Messages dropped for `cause`.
    pub fn drops(&self, cause: Drop) -> u64 {
        self.drops[cause.index()]
    }

    /// Messages dropped for any cause.
    pub fn drops_total(&self) -> u64 {
        self.drops.iter().sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_cause_has_its_own_counter() {
        let mut s = Stats::default();
        for (i, c) in Drop::ALL.iter().enumerate() {
            for _ in 0..=i {
                s.drop(*c);
            }
        }
        for (i, c) in Drop::ALL.iter().enumerate() {
            assert_eq!(s.drops(*c), i as u64 + 1, "{}", c.name());
        }
        assert_eq!(s.drops_total(), (1..=16).sum::<u64>());
        let names: std::collections::HashSet<_> = Drop::ALL.iter().map(|c| c.name()).collect();
        assert_eq!(names.len(), Drop::ALL.len());
    }

    #[test]
    fn exchanges_are_counted_apart() {
        let mut s = Stats::default();
        s.exchange(ExchangeType::IKE_AUTH).requests_sent += 1;
        s.exchange(ExchangeType(99)).responses_received += 1;
        assert_eq!(s.auth.requests_sent, 1);
        assert_eq!(s.sa_init, ExchangeCounts::default());
        assert_eq!(s.other.responses_received, 1);
    }
}
