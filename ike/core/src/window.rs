//! Message IDs (RFC 7296 §2.3): each IKE SA is requester and responder at once, with one
//! counter per role.
//!
//! ```text
//!  as requester:  next_id ──start()──▶ outstanding = Some(id)  (window 1: one at a time)
//!                 response(id) == outstanding ──▶ accepted; next_id = id + 1
//!                 any other response ──▶ dropped (Drop::UnexpectedResponse)
//!
//!  as responder:  request(id) == expected        ──▶ New: process it, then answered(id, …)
//!                 request(id) == expected - 1,
//!                   the same bytes as then       ──▶ Retransmitted: resend the cached bytes,
//!                                                    never process it again
//!                 anything else                  ──▶ OutOfWindow: dropped and counted
//! ```
//!
//! A retransmission must be the answered request byte for byte: a message that only
//! carries the old ID (an altered or forged one) gets nothing, not even the cached
//! response. The window is 1 (RFC 7296's default; SET_WINDOW_SIZE is not offered yet).
//! The cached response is a list of datagrams so that a fragmented response (RFC 7383) is resent
//! whole. A message ID never wraps: at `u32::MAX` the requester refuses to start another
//! exchange (RFC 7296 §2.3: the IKE SA must be rekeyed first).

/// Why a request could not be started.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WindowError {
    /// A request is outstanding (window 1).
    Busy,
    /// The message ID space is used up.
    Exhausted,
}

/// Our side as requester.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestWindow {
    next_id: u32,
    outstanding: Option<u32>,
    exhausted: bool,
}

impl RequestWindow {
    /// A window whose first request has ID `first` (0, or 1 after IKE_SA_INIT when the
    /// IKE SA is made from an exchange that used 0).
    pub fn starting_at(first: u32) -> RequestWindow {
        RequestWindow { next_id: first, outstanding: None, exhausted: false }
    }

    /// The ID the next request will carry.
    pub fn next_id(&self) -> u32 {
        self.next_id
    }

    /// The outstanding request's ID.
    pub fn outstanding(&self) -> Option<u32> {
        self.outstanding
    }

    /// Takes the next ID for a new request.
    pub fn start(&mut self) -> Result<u32, WindowError> {
        if self.outstanding.is_some() {
            return Err(WindowError::Busy);
        }
        if self.exhausted {
            return Err(WindowError::Exhausted);
        }
        self.outstanding = Some(self.next_id);
        Ok(self.next_id)
    }

    /// Whether a response with `id` answers the outstanding request (without accepting it:
    /// the response must authenticate first).
    pub fn matches(&self, id: u32) -> bool {
        self.outstanding == Some(id)
    }

    /// Accepts the response to the outstanding request `id`; false (nothing changes) when
    /// it answers nothing outstanding.
    pub fn accept(&mut self, id: u32) -> bool {
        if !self.matches(id) {
            return false;
        }
        self.outstanding = None;
        match id.checked_add(1) {
            Some(n) => self.next_id = n,
            None => self.exhausted = true,
        }
        true
    }

    /// Forgets the outstanding request without a response (an IKE_SA_INIT restarted with
    /// a cookie or another group reuses ID 0).
    pub fn restart(&mut self) {
        self.outstanding = None;
    }
}

/// What to do with an incoming request.
#[derive(Debug, PartialEq, Eq)]
pub enum Incoming<'a> {
    /// The expected request: process it.
    New,
    /// The last request again: resend these datagrams, process nothing.
    Retransmitted(&'a [Vec<u8>]),
    /// Neither: drop it.
    OutOfWindow,
}

/// Our side as responder.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResponseWindow {
    expected: u32,
    /// The last answered request: its ID, its bytes, the response's datagrams.
    cached: Option<(u32, Vec<u8>, Vec<Vec<u8>>)>,
}

impl ResponseWindow {
    /// A window expecting `first` next, with the request `first - 1` already answered
    /// (`cached`: its bytes and the response; the IKE_SA_INIT exchange, for a
    /// retransmitted IKE_SA_INIT request).
    pub fn after(first: u32, cached: Option<(Vec<u8>, Vec<Vec<u8>>)>) -> ResponseWindow {
        ResponseWindow {
            expected: first,
            cached: cached.and_then(|(q, r)| Some((first.checked_sub(1)?, q, r))),
        }
    }

    /// The ID the next new request must carry.
    pub fn expected(&self) -> u32 {
        self.expected
    }

    /// Classifies a request with message ID `id` whose datagram is `request`.
    pub fn classify(&self, id: u32, request: &[u8]) -> Incoming<'_> {
        if id == self.expected {
            return Incoming::New;
        }
        match &self.cached {
            Some((last, q, r)) if *last == id && q == request => Incoming::Retransmitted(r),
            _ => Incoming::OutOfWindow,
        }
    }

    /// The datagram a retransmission of the answered request `id` is recognised by, when
    /// it is not the one `answered` was given: for a fragmented request, its first
    /// fragment (RFC 7383 §2.6.1). Nothing if `id` is not the last answered.
    pub fn recognised_by(&mut self, id: u32, request: Vec<u8>) {
        if let Some((last, q, _)) = &mut self.cached {
            if *last == id {
                *q = request;
            }
        }
    }

    /// Records the response sent to the new request `id` and moves the window on.
    pub fn answered(&mut self, id: u32, request: Vec<u8>, response: Vec<Vec<u8>>) {
        debug_assert_eq!(id, self.expected);
        self.cached = Some((id, request, response));
        self.expected = id.wrapping_add(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requester_one_at_a_time() {
        let mut w = RequestWindow::starting_at(1);
        assert_eq!(w.start(), Ok(1));
        assert_eq!(w.start(), Err(WindowError::Busy));
        assert!(!w.accept(0), "a response to an older request");
        assert!(!w.accept(2), "a response to a request not sent");
        assert_eq!(w.outstanding(), Some(1));
        assert!(w.accept(1));
        assert!(!w.accept(1), "a duplicate response");
        assert_eq!(w.start(), Ok(2));
    }

    #[test]
    fn requester_never_wraps() {
        let mut w = RequestWindow::starting_at(u32::MAX);
        assert_eq!(w.start(), Ok(u32::MAX));
        assert!(w.accept(u32::MAX));
        assert_eq!(w.start(), Err(WindowError::Exhausted));
    }

    #[test]
    fn restart_reuses_the_id() {
        let mut w = RequestWindow::starting_at(0);
        assert_eq!(w.start(), Ok(0));
        w.restart();
        assert_eq!(w.start(), Ok(0));
    }

    #[test]
    fn responder_answers_a_retransmission_from_its_cache() {
        let mut w = ResponseWindow::after(1, Some((b"init".to_vec(), vec![b"init-response".to_vec()])));
        assert_eq!(w.classify(0, b"init"), Incoming::Retransmitted(&[b"init-response".to_vec()]));
        assert_eq!(w.classify(0, b"inix"), Incoming::OutOfWindow, "the old ID on other bytes");
        assert_eq!(w.classify(1, b"auth"), Incoming::New);
        w.answered(1, b"auth".to_vec(), vec![b"auth-response".to_vec()]);
        assert_eq!(w.classify(1, b"auth"), Incoming::Retransmitted(&[b"auth-response".to_vec()]));
        assert_eq!(w.classify(0, b"init"), Incoming::OutOfWindow, "only the last response is kept");
        assert_eq!(w.classify(3, b"x"), Incoming::OutOfWindow);
        assert_eq!(w.classify(2, b"x"), Incoming::New);
    }

    #[test]
    fn a_fragmented_request_is_recognised_by_its_first_fragment() {
        let mut w = ResponseWindow::after(1, None);
        w.answered(1, b"fragment 3 of 3".to_vec(), vec![b"response".to_vec()]);
        w.recognised_by(0, b"other".to_vec());
        assert_eq!(w.classify(1, b"fragment 3 of 3"), Incoming::Retransmitted(&[b"response".to_vec()]));
        w.recognised_by(1, b"fragment 1 of 3".to_vec());
        assert_eq!(w.classify(1, b"fragment 1 of 3"), Incoming::Retransmitted(&[b"response".to_vec()]));
        assert_eq!(w.classify(1, b"fragment 3 of 3"), Incoming::OutOfWindow);
    }

    #[test]
    fn responder_from_nothing() {
        let w = ResponseWindow::after(0, Some((vec![0], vec![vec![1]])));
        assert_eq!(w.classify(0, &[0]), Incoming::New);
        assert_eq!(w.classify(u32::MAX, &[0]), Incoming::OutOfWindow, "no cache before ID 0");
    }
}
