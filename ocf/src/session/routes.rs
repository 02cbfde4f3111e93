//! A session's routes: the drivers that may serve it, each with its binding (made the first
//! time a request goes there), and the choice of one for each request (see `crate::routing`
//! for the model and the policies' definitions).
//!
//! The routes are replaced as a whole — never edited — when the registry's list of drivers
//! changes (a driver registered or unregistered bumps its generation; a session notices at its
//! next request) or when a driver is found gone. A route that survives the change keeps its
//! binding, so a driver session is never made twice for one session.

use std::sync::atomic::{AtomicU16, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, PoisonError};

use arc_swap::Guard;

use crate::params::SessionParams;
use crate::profile;
use crate::request::{Op, Request};
use crate::routing::model::{
    op_index, tick, Arrival, ModelTable, OPS, RUN_CLASSES, SAMPLE_EVERY, SAMPLE_SETTLED, SETTLED_MARGIN,
    SETTLED_SPAN_NS, WARM_UP,
};
use crate::routing::{cpu, Policy, RoutingShared, SizeClass, SIZE_CLASSES};

use super::parts::{Binding, DriverEntry};
use super::SessionShared;

/// How a session chooses among drivers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Pin {
    /// Every capable driver is a route; the policy picks one per request.
    Free,
    /// One driver, the best when the session was made (policy `Priority`, multi-part
    /// sessions, whose messages must stay on one driver); it moves when the driver goes.
    Best,
    /// The driver the caller named (`new_session_on`).
    Named,
}

/// One driver that may serve the session.
pub(crate) struct Route {
    pub(crate) entry: Arc<DriverEntry>,
    /// The session's binding to the driver, made on first use; `None` if the driver
    /// refused the session.
    binding: OnceLock<Option<Arc<Binding>>>,
    pub(crate) model: Arc<ModelTable>,
}

impl Route {
    pub(crate) fn new(entry: Arc<DriverEntry>, params: &SessionParams) -> Route {
        let model = entry.routing.model(params);
        Route { entry, binding: OnceLock::new(), model }
    }

    /// A route whose binding is made already (a session's first).
    pub(crate) fn bound(binding: Arc<Binding>, model: Arc<ModelTable>) -> Route {
        Route { entry: binding.entry.clone(), binding: OnceLock::from(Some(binding)), model }
    }

    /// The binding, if it was made.
    pub(crate) fn made(&self) -> Option<&Arc<Binding>> {
        self.binding.get().and_then(Option::as_ref)
    }

    fn refused(&self) -> bool {
        matches!(self.binding.get(), Some(None))
    }
}

/// Every route of a session, and how it chooses.
pub(crate) struct Routes {
    pub(crate) routes: Box<[Arc<Route>]>,
    pub(crate) pin: Pin,
    pub(crate) policy: Policy,
    /// The registry generation these routes were made for.
    pub(crate) generation: u64,
    /// The next route for round-robin.
    turn: AtomicUsize,
    /// `CostModel`'s last full decision per direction × size class (the route's index + 1,
    /// and [`SETTLED`] if it was settled; 0: none): reused between full decisions while it
    /// is a synchronous driver that can take requests (a CPU driver has no backlog, so the
    /// choice changes only with the model, which changes only on timed requests). A driver
    /// that completes later is decided afresh every time: its backlog changes with every
    /// request.
    choice: [[AtomicU16; SIZE_CLASSES]; OPS],
    /// The binding, when there is one route and its binding was made: the direct path's
    /// shortcut (one pointer instead of four).
    only: Option<Arc<Binding>>,
    /// The bindings of the first [`AT_HAND`] routes, set when a choice of one is remembered:
    /// a reused choice reaches its binding from here, without the route list and the route
    /// (two cache lines fewer per request, often cold on a machine shared with other work;
    /// measured in `docs/measurements.md`).
    at_hand: [OnceLock<Arc<Binding>>; AT_HAND],
}

/// How many routes' bindings [`Routes`] keeps at hand: a remembered choice is one of them.
const AT_HAND: usize = 8;

/// What a decision among several routes came to.
enum Decided<'r> {
    /// A pick, whose route's binding is still to be found (or made).
    Pick(Pick),
    /// A remembered choice that still holds, with its binding at hand.
    AtHand(&'r Arc<Binding>, Pick),
}

/// The choice for one request: the route's index, whether a decision among several routes
/// was made, whether to time the request for the model, and the model's prediction (ns).
///
/// Packed in one word (index: 16 bits, two flags, prediction: 46 bits, saturating) because
/// it travels on the direct path: a struct of several fields is written piece by piece and
/// read back whole, which stalls store forwarding (measured: 15 ns per request in the
/// dispatch bench).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Pick(u64);

impl Pick {
    const TIMED: u64 = 1 << 16;
    const DECIDED: u64 = 1 << 17;
    /// Chosen for a run (two bits: the run's length class + 1, `Arrival::index`): its
    /// completion teaches the model's cells for runs of that length.
    const RUN_SHIFT: u32 = 18;
    const RUN: u64 = 3 << Self::RUN_SHIFT;
    const COST_SHIFT: u32 = 20;

    #[inline(always)]
    pub(crate) fn route(index: usize) -> Pick {
        Pick(index.min(u16::MAX as usize) as u64)
    }

    /// A decision's pick, with the model's prediction.
    #[inline(always)]
    pub(crate) fn decided(index: usize, timed: bool, cost_ns: u64) -> Pick {
        let cost = cost_ns.min(u64::MAX >> Self::COST_SHIFT) << Self::COST_SHIFT;
        Pick(Pick::route(index).0 | Self::DECIDED | if timed { Self::TIMED } else { 0 } | cost)
    }

    #[inline(always)]
    pub(crate) fn index(self) -> usize {
        (self.0 & 0xffff) as usize
    }

    #[inline(always)]
    pub(crate) fn timed(self) -> bool {
        self.0 & Self::TIMED != 0
    }

    #[inline(always)]
    pub(crate) fn is_decided(self) -> bool {
        self.0 & Self::DECIDED != 0
    }

    #[inline(always)]
    pub(crate) fn cost_ns(self) -> u64 {
        self.0 >> Self::COST_SHIFT
    }

    /// 0, or the length class (its lower bound) of the run it was chosen for
    /// (`Routes::pick_run`).
    #[inline(always)]
    pub(crate) fn run_len(self) -> usize {
        match (self.0 & Self::RUN) >> Self::RUN_SHIFT {
            0 => 0,
            c => RUN_CLASSES[c as usize - 1],
        }
    }

    /// The same pick, marked as chosen for a run of `n` requests.
    pub(crate) fn for_run(self, n: usize) -> Pick {
        let class = Arrival::InRun(n).index() as u64;
        Pick((self.0 & !Self::RUN) | (class << Self::RUN_SHIFT))
    }

    /// The same pick on another route, without a prediction.
    fn moved_to(self, index: usize) -> Pick {
        Pick(Pick::route(index).0 | (self.0 & (Self::TIMED | Self::DECIDED | Self::RUN)))
    }
}

/// How long a route not chosen for a size class goes untried before one request explores
/// it; and how soon one still warming up (fewer than `WARM_UP` samples) is tried again.
const EXPLORE_EVERY_NS: u64 = 100_000_000;
const EXPLORE_UNKNOWN_NS: u64 = 1_000_000;
/// And no more often than it costs 1/this of the time: a route predicted 300 µs slower than
/// the best is tried every 0.6 s (measured: with every 100 ms, exploring a `bcm5822` over
/// eleven size classes cost 1-2% of AES-CBC+HMAC-SHA1 throughput).
const EXPLORE_SHARE: u64 = 2_000;
/// A driver with requests in flight and no completion for this long (and for eight times
/// its predicted backlog) is stalled: left out, except to explore.
const STALLED_NS: u64 = 5_000_000;
/// A timed decision counts as at most this long in the reported decision cost.
const MAX_DECISION_NS: u64 = 2_000;

/// In a remembered choice: the decision was settled (one request in [`SAMPLE_SETTLED`]
/// per thread is timed, not one in [`SAMPLE_EVERY`]; `crate::routing::model`).
const SETTLED: u16 = 1 << 15;

fn ticks_ago_ns(then: u64, now: u64) -> u64 {
    if then == 0 {
        u64::MAX
    } else {
        profile::elapsed_ns(then, now)
    }
}

impl Routes {
    pub(crate) fn new(routes: Vec<Arc<Route>>, pin: Pin, policy: Policy, generation: u64) -> Routes {
        let only = match routes.as_slice() {
            [one] => one.made().cloned(),
            _ => None,
        };
        Routes {
            only,
            routes: routes.into_boxed_slice(),
            pin,
            policy,
            generation,
            turn: AtomicUsize::new(0),
            choice: Default::default(),
            at_hand: Default::default(),
        }
    }

    /// Chooses the route for a request of `len` payload bytes; `None` if there is none.
    #[inline(always)]
    pub(crate) fn pick(&self, op: Op, len: usize, shared: &RoutingShared) -> Option<Pick> {
        match self.routes.len() {
            0 => None,
            1 => Some(Pick::default()),
            _ => Some(match self.decide(op, len, shared) {
                Decided::Pick(pick) | Decided::AtHand(_, pick) => pick,
            }),
        }
    }

    /// A decision among several routes.
    #[inline]
    fn decide(&self, op: Op, len: usize, shared: &RoutingShared) -> Decided<'_> {
        if self.policy != Policy::CostModel {
            return Decided::Pick(self.decide_fully(op, len, shared, tick(SAMPLE_EVERY)));
        }
        let c = self.choice[op_index(op)][SizeClass::of(len).index()].load(Ordering::Relaxed);
        let timed = tick(if c & SETTLED != 0 { SAMPLE_SETTLED } else { SAMPLE_EVERY });
        if !timed {
            if let Some((b, pick)) = self.last_choice(c) {
                return Decided::AtHand(b, pick);
            }
        }
        Decided::Pick(self.decide_fully(op, len, shared, timed))
    }

    /// The remembered choice `c` for a direction and size and its binding, if it still
    /// holds: a synchronous driver, bound, not blocked, not failing. Nothing to account on
    /// its way back (`decided` stays false).
    #[inline]
    fn last_choice(&self, c: u16) -> Option<(&Arc<Binding>, Pick)> {
        // Stored only for a synchronous driver whose binding is at hand.
        let index = ((c & !SETTLED) as usize).wrapping_sub(1);
        let b = self.at_hand.get(index)?.get()?;
        let holds = !b.entry.flow.is_blocked() && !b.entry.routing.failing.load(Ordering::Relaxed);
        holds.then_some((b, Pick::route(index)))
    }

    #[inline(never)]
    fn decide_fully(&self, op: Op, len: usize, shared: &RoutingShared, timed: bool) -> Pick {
        // The clock, read for a timed decision (its cost is measured from here).
        let now = if timed { profile::now() } else { 0 };
        let retry = || if timed { self.retry_failing() } else { None };
        let pick = match self.policy {
            Policy::CostModel => self.least_cost(op, len, timed, now),
            Policy::LeastLoaded => retry().unwrap_or_else(|| self.least_loaded()),
            Policy::RoundRobin => retry().unwrap_or_else(|| self.round_robin()),
            // A Priority session has one route; the first is its best.
            Policy::Priority => Pick::default(),
        };
        let pick = Pick::decided(pick.index(), pick.timed() || timed, pick.cost_ns());
        if timed {
            // The decision's own cost, from the clock reading at its start.
            shared.timed_decisions.fetch_add(1, Ordering::Relaxed);
            // A decision that took longer was preempted: not its own cost.
            let took = profile::elapsed_ns(now, profile::now()).min(MAX_DECISION_NS);
            shared.decision_ns.fetch_add(took, Ordering::Relaxed);
        }
        pick
    }

    /// Whether a route can take a request now; counts why not. A failing driver is left
    /// out (it is tried again by exploration under `CostModel`, else by `retry_failing`).
    #[inline]
    fn usable(&self, r: &Route) -> bool {
        if r.refused() {
            return false;
        }
        if r.entry.flow.is_blocked() {
            r.entry.routing.skipped_blocked.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        if r.entry.routing.failing.load(Ordering::Relaxed) {
            r.entry.routing.skipped_unhealthy.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        true
    }

    /// Under `LeastLoaded` and `RoundRobin`, a timed decision (one in [`SAMPLE_EVERY`] per
    /// thread) gives a failing driver a request again: a success there ends its failing
    /// (and a failure is redone elsewhere).
    fn retry_failing(&self) -> Option<Pick> {
        let index = self.routes.iter().position(|r| {
            !r.refused() && !r.entry.flow.is_blocked() && r.entry.routing.failing.load(Ordering::Relaxed)
        })?;
        Some(Pick::route(index))
    }

    /// The route with the least predicted completion time (see `crate::routing`).
    #[inline]
    fn least_cost(&self, op: Op, len: usize, timed: bool, now: u64) -> Pick {
        let class = SizeClass::of(len);
        let mut best: Option<(usize, f64, f64)> = None;
        let mut fallback = None;
        // The clock, read at most once per decision and only for a driver that holds
        // requests (`now` is this thread's last timed decision's, maybe long ago).
        let mut fresh = if timed { Some(now) } else { None };
        // A synchronous driver not yet measured for this class: measure it now (it costs
        // one timed request on the CPU), before a card is tried or trusted there.
        let mut unmeasured_cpu = None;
        // Any route not yet measured here, or still warming up: exploration is due sooner
        // than a timed decision.
        let mut unmeasured = false;
        let mut contention = None;
        for (i, r) in self.routes.iter().enumerate() {
            // Failing drivers are tried again by exploration, not here.
            if !self.usable(r) {
                continue;
            }
            let state = &r.entry.routing;
            if stalled(r, &mut fresh) {
                state.skipped_unhealthy.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            fallback.get_or_insert(i);
            let Some(cost) = r.model.predict(op, class, len) else {
                if r.entry.caps.synchronous {
                    unmeasured_cpu.get_or_insert(i);
                }
                unmeasured = true;
                continue;
            };
            unmeasured |= r.model.cell(op, class).samples() < WARM_UP;
            // A card's queue is its backlog; the CPU's is the wait for a core, and a request
            // on a contended CPU also delays the threads waiting for it: its marginal cost,
            // `cost × (2f − 1)` for contention `f` (`routing::cpu`), is what it costs
            // everyone (routing by each request's own time alone leaves cards idle while
            // threads queue for the CPU). Uncontended (f = 1) it is just `cost`.
            let total = if r.entry.caps.synchronous {
                let f = *contention.get_or_insert_with(cpu::contention);
                cost * (2.0 * f - 1.0)
            } else {
                // The request in service is half done on average: the wait is the backlog
                // less half of one request.
                let backlog = state.backlog_ns.load(Ordering::Relaxed) as f64;
                cost + (backlog - cost / 2.0).max(0.0)
            };
            if best.is_none_or(|(_, t, _)| total < t) {
                best = Some((i, total, cost));
            }
        }
        if let Some(i) = unmeasured_cpu {
            return Pick::decided(i, true, 0);
        }
        if timed || unmeasured {
            let now = *fresh.get_or_insert_with(profile::now);
            if let Some(p) = self.explore(Arrival::Alone, op, class, len, best.map(|b| (b.0, b.1)), now) {
                return p;
            }
        }
        match best {
            Some((index, total, cost)) => {
                let r = &self.routes[index];
                // Reusable while nothing else could win: a synchronous driver (no backlog
                // of its own) that beats every other route even with theirs at zero, all of
                // them past their warm-up. Settled (timed less often, `model::SAMPLE_SETTLED`)
                // where every other route is predicted to cost `SETTLED_MARGIN` times as
                // much, the driver's own estimate is warm and in line with its last sample,
                // and the longer period is short in time.
                let mut settled = r.model.cell(op, class).samples() >= WARM_UP
                    && r.model.cell(op, class).in_line()
                    && total * f64::from(SAMPLE_SETTLED) <= SETTLED_SPAN_NS;
                let at_hand = r.made().filter(|_| index < AT_HAND);
                let reusable = r.entry.caps.synchronous
                    && at_hand.is_some()
                    && self.routes.iter().enumerate().all(|(i, o)| {
                        if i == index || o.refused() {
                            return true;
                        }
                        let cost = o.model.predict(op, class, len);
                        settled &= cost.is_some_and(|c| c >= total * SETTLED_MARGIN);
                        o.model.cell(op, class).samples() >= WARM_UP && cost.is_some_and(|c| c >= total)
                    });
                if let (true, Some(b)) = (reusable, at_hand) {
                    // Once per route (an Arc clone, then never again).
                    let _ = self.at_hand[index].get_or_init(|| b.clone());
                }
                let remembered = match (reusable, settled) {
                    (false, _) => 0,
                    (true, false) => index as u16 + 1,
                    (true, true) => (index as u16 + 1) | SETTLED,
                };
                self.choice[op_index(op)][class.index()].store(remembered, Ordering::Relaxed);
                Pick::decided(index, false, cost as u64)
            }
            // Nothing measured yet (or every route blocked or unhealthy): the first route
            // that can take it, else the first (a blocked driver holds it until it has room).
            None => Pick::route(fallback.unwrap_or(0)),
        }
    }

    /// One request, now and then, to a route that is not the predicted best: an unmeasured
    /// one soon, a measured one every [`EXPLORE_EVERY_NS`] per size class, so that the
    /// model notices a driver that got faster or recovered. Bounded: one request per route
    /// per class per interval, whatever the request rate.
    #[cold]
    fn explore(
        &self,
        arrival: Arrival,
        op: Op,
        class: SizeClass,
        len: usize,
        best: Option<(usize, f64)>,
        now: u64,
    ) -> Option<Pick> {
        for (i, r) in self.routes.iter().enumerate() {
            if best.is_some_and(|b| b.0 == i) || r.refused() {
                continue;
            }
            let cell = r.model.cell_for(arrival, op, class);
            let wait = if cell.samples() < WARM_UP {
                EXPLORE_UNKNOWN_NS
            } else {
                // What trying it is predicted to cost over the best, spread so that it takes
                // at most 1/EXPLORE_SHARE of the time.
                let loss = match (r.model.predict_for(arrival, op, class, len), best) {
                    (Some(c), Some((_, b))) => (c - b).max(0.0) as u64,
                    _ => 0,
                };
                EXPLORE_EVERY_NS.max(loss.saturating_mul(EXPLORE_SHARE))
            };
            let tried = cell.tried.load(Ordering::Relaxed);
            if ticks_ago_ns(tried, now) < wait {
                continue;
            }
            // One thread explores; the others go on.
            if cell.tried.compare_exchange(tried, now, Ordering::Relaxed, Ordering::Relaxed).is_err() {
                continue;
            }
            r.entry.routing.explored.fetch_add(1, Ordering::Relaxed);
            let cost = r.model.predict_for(arrival, op, class, len).unwrap_or(0.0) as u64;
            return Some(Pick::decided(i, true, cost));
        }
        None
    }

    /// The route for a run of requests of about `len` bytes each, handed over whole: under
    /// `CostModel` the least predicted cost per request in runs (every run is timed, so
    /// exploration is looked at every time); under the other policies the pick for its
    /// first request. `None` if there is no route.
    pub(crate) fn pick_run(&self, op: Op, len: usize, n: usize, shared: &RoutingShared) -> Option<Pick> {
        if self.routes.len() < 2 || self.policy != Policy::CostModel {
            return self.pick(op, len, shared);
        }
        // Every run's decision is full and counted as a timed one (with its cost).
        let now = profile::now();
        let class = SizeClass::of(len);
        let mut fresh = Some(now);
        let (mut best, mut fallback) = (None::<(usize, f64)>, None);
        for (i, r) in self.routes.iter().enumerate() {
            if !self.usable(r) || stalled(r, &mut fresh) {
                continue;
            }
            fallback.get_or_insert(i);
            if let Some(cost) = r.model.predict_for(Arrival::InRun(n), op, class, len) {
                if best.is_none_or(|(_, b)| cost < b) {
                    best = Some((i, cost));
                }
            }
        }
        let pick = self.explore(Arrival::InRun(n), op, class, len, best, now).unwrap_or(match best {
            Some((i, cost)) => Pick::decided(i, true, cost as u64),
            None => Pick::decided(fallback.unwrap_or(0), true, 0),
        });
        shared.timed_decisions.fetch_add(1, Ordering::Relaxed);
        let took = profile::elapsed_ns(now, profile::now()).min(MAX_DECISION_NS);
        shared.decision_ns.fetch_add(took, Ordering::Relaxed);
        Some(pick)
    }

    /// The route with the fewest requests in flight relative to its limit.
    fn least_loaded(&self) -> Pick {
        let mut best: Option<(usize, f64)> = None;
        for (i, r) in self.routes.iter().enumerate() {
            if !self.usable(r) {
                continue;
            }
            let e = &r.entry;
            let load = (e.credits.in_flight() + e.routing.active.load(Ordering::Relaxed)) as f64
                / e.credits.limit() as f64;
            if best.is_none_or(|(_, l)| load < l) {
                best = Some((i, load));
            }
        }
        Pick::route(best.map_or(0, |b| b.0))
    }

    /// The next route in turn that can take a request.
    fn round_robin(&self) -> Pick {
        let n = self.routes.len();
        let start = self.turn.fetch_add(1, Ordering::Relaxed);
        let index =
            (0..n).map(|k| (start + k) % n).find(|&i| self.usable(&self.routes[i])).unwrap_or(start % n);
        Pick::route(index)
    }
}

/// A driver that completes later, holds requests and has not completed one for a while.
fn stalled(r: &Route, now: &mut Option<u64>) -> bool {
    let e = &r.entry;
    if e.caps.synchronous || e.credits.in_flight() == 0 {
        return false;
    }
    let now = *now.get_or_insert_with(profile::now);
    let quiet = ticks_ago_ns(e.routing.last_progress.load(Ordering::Relaxed), now);
    quiet != u64::MAX
        && quiet > STALLED_NS.max(e.routing.backlog_ns.load(Ordering::Relaxed).saturating_mul(8))
}

impl SessionShared {
    /// The session's routes, renewed first if the registry's drivers changed since they
    /// were made (one relaxed load on the request path when they did not).
    #[inline]
    pub(crate) fn routes(self: &Arc<Self>) -> Guard<Arc<Routes>> {
        let r = self.routes.load();
        if r.generation == self.shared.generation.load(Ordering::Acquire) {
            return r;
        }
        drop(r);
        self.renew_routes(None);
        self.routes.load()
    }

    /// Makes the session's routes afresh from the registry (keeping the routes that remain),
    /// unless they are current and none of them is on `gone`. Returns the binding the
    /// session had on `gone`, if any (so `unregister` can wait for threads still using it).
    pub(crate) fn renew_routes(self: &Arc<Self>, gone: Option<&Arc<DriverEntry>>) -> Option<Arc<Binding>> {
        let _one_at_a_time = self.rebinding.lock().unwrap_or_else(PoisonError::into_inner);
        let generation = self.shared.generation.load(Ordering::Acquire);
        let old = self.routes.load_full();
        let on_gone = |r: &Route| gone.is_some_and(|g| Arc::ptr_eq(&r.entry, g));
        let stale = old.routes.iter().any(|r| r.entry.is_gone() || on_gone(r));
        if old.generation == generation && !stale {
            return None;
        }
        let registry = self.registry.upgrade();
        let kept = |e: &Arc<DriverEntry>| old.routes.iter().find(|r| Arc::ptr_eq(&r.entry, e)).cloned();
        let live = |r: &&Arc<Route>| !r.entry.is_gone() && !on_gone(r);
        let (pin, routes): (Pin, Vec<Arc<Route>>) = match (old.pin, old.routes.iter().find(live)) {
            // A named or best driver that is still there stays the only route.
            (Pin::Named | Pin::Best, Some(r)) => (old.pin, vec![r.clone()]),
            // The named driver is gone: a named_only driver's sessions have nowhere to go;
            // others move to the best driver there is.
            (Pin::Named, None) if old.routes.iter().any(|r| r.entry.caps.named_only) => (Pin::Named, vec![]),
            (Pin::Named | Pin::Best, None) => {
                let best = registry.as_ref().and_then(|reg| reg.candidates(&self.params).into_iter().next());
                (
                    Pin::Best,
                    best.map(|e| kept(&e).unwrap_or_else(|| Arc::new(Route::new(e, &self.params))))
                        .into_iter()
                        .collect(),
                )
            }
            (Pin::Free, _) => {
                let candidates =
                    registry.as_ref().map(|reg| reg.candidates(&self.params)).unwrap_or_default();
                let routes = candidates
                    .into_iter()
                    .filter(|e| !e.is_gone() && gone.is_none_or(|g| !Arc::ptr_eq(e, g)))
                    .map(|e| kept(&e).unwrap_or_else(|| Arc::new(Route::new(e, &self.params))))
                    .collect();
                (Pin::Free, routes)
            }
        };
        let left = old.routes.iter().find(|r| on_gone(r)).and_then(|r| r.made().cloned());
        self.routes.store(Arc::new(Routes::new(routes, pin, old.policy, generation)));
        left
    }

    /// The binding of `route`, made now if this is its first request; `None` if the driver
    /// refused the session (counted at the driver) or the framework is gone.
    pub(crate) fn binding<'r>(self: &Arc<Self>, route: &'r Route) -> Option<&'r Arc<Binding>> {
        route
            .binding
            .get_or_init(|| {
                let registry = self.registry.upgrade()?;
                match registry.bind(
                    &route.entry,
                    &self.params,
                    self.id,
                    self.order.clone(),
                    route.model.clone(),
                ) {
                    Ok(b) => {
                        let _ = b.core.session.set(Arc::downgrade(self));
                        route.entry.counters.add_live(b.core.counters.clone(), self);
                        self.add_history(b.core.counters.clone());
                        Some(Arc::new(b))
                    }
                    Err(e) => {
                        route.entry.counters.errors.record(e.kind());
                        None
                    }
                }
            })
            .as_ref()
    }

    /// A binding for a request: the policy's pick among the routes (made on first use),
    /// or, if that driver refused the session, the first route that takes it. A later part
    /// of a multi-part message goes where its first part went (the driver's state for the
    /// message is in the request). `None`: no route at all, or the message's driver is gone.
    #[inline(always)]
    pub(crate) fn choose<'r>(
        self: &Arc<Self>,
        routes: &'r Routes,
        req: &Request,
    ) -> Option<(&'r Arc<Binding>, Pick)> {
        if let Some(b) = &routes.only {
            return Some((b, Pick::default()));
        }
        if routes.routes.len() > 1 && !req.part.starts() {
            return self.message_route(routes, req);
        }
        let pick = match routes.routes.len() {
            0 => return None,
            1 => Pick::default(),
            _ => match routes.decide(req.op, req.payload_range().len(), &self.shared) {
                Decided::Pick(pick) => pick,
                Decided::AtHand(b, pick) => return Some((b, pick)),
            },
        };
        let route = &routes.routes[pick.index()];
        if let Some(b) = route.made() {
            return Some((b, pick));
        }
        self.choose_slow(routes, pick)
    }

    /// A binding for a run of `n` requests whose first is `first` (see `Routes::pick_run`).
    pub(crate) fn choose_run<'r>(
        self: &Arc<Self>,
        routes: &'r Routes,
        first: &Request,
        n: usize,
    ) -> Option<(&'r Arc<Binding>, Pick)> {
        if routes.only.is_some() || !first.part.starts() {
            return self.choose(routes, first);
        }
        let pick = routes.pick_run(first.op, first.payload_range().len(), n, &self.shared)?.for_run(n);
        match routes.routes[pick.index()].made() {
            Some(b) => Some((b, pick)),
            None => self.choose_slow(routes, pick),
        }
    }

    /// The model of the route a pick chose.
    pub(crate) fn route_model(routes: &Routes, pick: Pick) -> &ModelTable {
        &routes.routes[pick.index()].model
    }

    /// The binding that took the first part of the request's message (no decision: parts do
    /// not teach the model, a message's time is not a part's). A part without a message
    /// goes to the first route, whose request rules refuse it.
    fn message_route<'r>(&self, routes: &'r Routes, req: &Request) -> Option<(&'r Arc<Binding>, Pick)> {
        let message = req.trip().message;
        if message == 0 {
            return routes.routes[0].made().map(|b| (b, Pick::default()));
        }
        routes
            .routes
            .iter()
            .enumerate()
            .find_map(|(index, r)| r.made().filter(|b| b.id == message).map(|b| (b, Pick::route(index))))
    }

    #[cold]
    fn choose_slow<'r>(self: &Arc<Self>, routes: &'r Routes, pick: Pick) -> Option<(&'r Arc<Binding>, Pick)> {
        if let Some(b) = self.binding(&routes.routes[pick.index()]) {
            return Some((b, pick));
        }
        routes.routes.iter().enumerate().find_map(|(i, r)| self.binding(r).map(|b| (b, pick.moved_to(i))))
    }

    /// The names of the drivers that may serve this session now, the first best.
    pub(crate) fn route_names(self: &Arc<Self>) -> Vec<String> {
        self.routes().routes.iter().map(|r| r.entry.name.clone()).collect()
    }
}
