//! What routing keeps per driver: the cost models of the algorithms it has served, the work
//! it has in flight as the model predicts it (its backlog), its health, and the counts that
//! [`crate::Framework::routing`] reports.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use crate::params::{Mode, SessionParams};

use super::model::ModelTable;
use super::ModelEstimate;

/// Routing's state of one registered driver.
#[derive(Default)]
pub(crate) struct DriverRouteState {
    /// Predicted nanoseconds of work the driver holds (requests offered and not completed),
    /// for drivers that complete requests later; 0 for synchronous ones.
    pub(crate) backlog_ns: AtomicU64,
    /// The driver's last completion failed with a fault of its own; cleared by a success.
    pub(crate) failing: AtomicBool,
    /// When the driver last completed a request, or was given one while idle (clock ticks).
    pub(crate) last_progress: AtomicU64,
    /// Requests inside a synchronous driver's `process` now (counted only under
    /// [`super::Policy::LeastLoaded`], which needs it).
    pub(crate) active: AtomicUsize,
    pub(crate) explored: AtomicU64,
    pub(crate) skipped_blocked: AtomicU64,
    pub(crate) skipped_unhealthy: AtomicU64,
    models: Mutex<Vec<Arc<ModelTable>>>,
}

impl DriverRouteState {
    /// The driver's model for the algorithm of `params` (shared by every session with it).
    pub(crate) fn model(&self, params: &SessionParams) -> Arc<ModelTable> {
        let name = algorithm(params);
        let mut models = self.models.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(m) = models.iter().find(|m| m.algorithm == name) {
            return m.clone();
        }
        let m = Arc::new(ModelTable::new(name));
        models.push(m.clone());
        m
    }

    pub(crate) fn estimates(&self) -> Vec<ModelEstimate> {
        let models = self.models.lock().unwrap_or_else(PoisonError::into_inner);
        models.iter().flat_map(|m| m.estimates()).collect()
    }

    /// A completion: the driver made progress, and `failed` says whether it failed by a fault
    /// of its own.
    #[inline]
    pub(crate) fn completed(&self, now: u64, failed: bool) {
        self.last_progress.store(now, Ordering::Relaxed);
        if self.failing.load(Ordering::Relaxed) != failed {
            self.failing.store(failed, Ordering::Relaxed);
        }
    }
}

/// What a model is kept for: the mode, the algorithms and the key length (the cost of AES
/// depends on it), as `aead AES-GCM-128`.
fn algorithm(params: &SessionParams) -> String {
    let mode = params.mode.name();
    match &params.mode {
        Mode::Cipher { alg, key } | Mode::Aead { alg, key, .. } => format!("{mode} {alg}/{}", key.len() * 8),
        Mode::Digest { alg } => format!("{mode} {alg}"),
        Mode::Mac { alg, .. } => format!("{mode} {alg}"),
        Mode::CipherThenMac { cipher, cipher_key, mac, .. } => {
            format!("{mode} {cipher}/{}+{mac}", cipher_key.len() * 8)
        }
        Mode::Compress { alg } => format!("{mode} {alg}"),
        // Per key size: an RSA-4096 signature costs eight times a 2048-bit one.
        Mode::Asymmetric { alg, .. } => format!("{mode} {alg}/{}", params.key_bits()),
        Mode::Random => mode.to_string(),
    }
}

/// What routing shares across a framework: the generation of its list of drivers (bumped by
/// every register and unregister, so sessions renew their routes) and the measured cost of
/// decisions.
#[derive(Default)]
pub(crate) struct RoutingShared {
    pub(crate) generation: AtomicU64,
    pub(crate) timed_decisions: AtomicU64,
    pub(crate) decision_ns: AtomicU64,
}
