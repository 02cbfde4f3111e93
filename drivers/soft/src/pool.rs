//! A session's keyed library contexts, lent to one multi-part message at a time.
//!
//! ```text
//!  session ── Arc<Pool<C>> ── idle: [C, C, …]   (keyed once, with the session's key)
//!                  │  take (or key a new one)        ▲ give back (Drop of Lent)
//!                  ▼                                 │
//!  message ── Lent<C> ── arm(nonce, direction) ── parts … ── finished: kept in the
//!             request as spare state; the next message of the SAME pool re-arms it
//! ```
//!
//! Keying a context costs more than a short message, and OpenSSL's callers (the provider)
//! start a message per record. Measured through ocf's multi-part path (`examples/chacha_cost`,
//! pinned): a ChaCha20-Poly1305 message that made and keyed a libcrypto context cost 724 /
//! 790 / 954 ns at 16 B / 256 B / 1 KiB, one that re-arms a kept context 531-554 / 574-587 /
//! 726-746; an AES-GCM context's key schedule and GHASH powers likewise.
//!
//! A context holds its session's key, so it must never serve another session: a [`Lent`]
//! remembers its pool, a finished message's state is re-armed only by a message of the same
//! pool ([`Lent::is_from`], by `Arc` identity), and every other context is dropped (the
//! libraries wipe the key when a context is freed). `tests/multipart.rs`
//! (`one_request_serves_message_after_message_across_sessions`) runs two sessions' messages
//! through one request to hold this.

use std::sync::{Arc, Mutex, PoisonError};

use ocf::Error;

/// A library context that holds a key and runs one message at a time.
pub(crate) trait Keyed: Sized + Send {
    /// A new context holding `key` (a length the session accepted).
    fn keyed(key: &[u8]) -> Result<Self, Error>;
    /// Starts a message on the key already held: sets the nonce and the direction, and
    /// resets whatever the last message left (lengths, MAC state, expected tag).
    fn arm(&mut self, nonce: &[u8], encrypt: bool) -> Result<(), Error>;
}

/// One session's idle keyed contexts.
pub(crate) struct Pool<C> {
    /// Wiped on drop; keys contexts when none is idle.
    key: ocf::Key,
    idle: Mutex<Vec<C>>,
}

impl<C: Keyed> Pool<C> {
    /// Contexts kept idle at most (one per thread working on the session, in practice).
    const KEEP: usize = 16;

    pub(crate) fn new(key: &[u8]) -> Pool<C> {
        Pool { key: ocf::Key::new(key), idle: Mutex::new(Vec::new()) }
    }

    fn take(&self) -> Result<C, Error> {
        let idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner).pop();
        match idle {
            Some(c) => Ok(c),
            None => C::keyed(self.key.as_bytes()),
        }
    }

    fn give_back(&self, c: C) {
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        if idle.len() < Self::KEEP {
            idle.push(c);
        }
    }

    #[cfg(test)]
    pub(crate) fn idle_len(&self) -> usize {
        self.idle.lock().unwrap_or_else(PoisonError::into_inner).len()
    }
}

/// A context lent to one message; it goes back to its pool when dropped.
pub(crate) struct Lent<C: Keyed> {
    /// `Some` until dropped.
    ctx: Option<C>,
    pool: Arc<Pool<C>>,
}

impl<C: Keyed> Lent<C> {
    /// Starts a message on a context of `pool`.
    pub(crate) fn start(pool: &Arc<Pool<C>>, nonce: &[u8], encrypt: bool) -> Result<Lent<C>, Error> {
        let mut c = pool.take()?;
        c.arm(nonce, encrypt)?;
        Ok(Lent { ctx: Some(c), pool: pool.clone() })
    }

    /// Whether this context belongs to `pool` (holds that session's key).
    pub(crate) fn is_from(&self, pool: &Arc<Pool<C>>) -> bool {
        Arc::ptr_eq(&self.pool, pool)
    }

    /// The next message of the same session on this context: only a new nonce.
    pub(crate) fn rearm(&mut self, nonce: &[u8], encrypt: bool) -> Result<(), Error> {
        self.ctx()?.arm(nonce, encrypt)
    }

    pub(crate) fn ctx(&mut self) -> Result<&mut C, Error> {
        self.ctx.as_mut().ok_or(Error::DriverFailure("soft: a message state without its context"))
    }
}

impl<C: Keyed> Drop for Lent<C> {
    fn drop(&mut self) {
        if let Some(c) = self.ctx.take() {
            self.pool.give_back(c);
        }
    }
}
