//! The security policy database: ordered policies per direction, first match wins.
//!
//! Fast IPsec's policy lookup was a lock hot spot. Here the packet path reads an immutable
//! snapshot (`ArcSwap`): a lookup takes no lock and never waits for a writer. Writers go
//! through [`crate::db::Transaction`]: a `Writer` changes a copy of the tables, each
//! change in place (no rebuild), and the copy is swapped in once, when the transaction
//! commits.
//!
//! # The lookup does not scan
//!
//! A gateway with many peers has thousands of policies; a first-match scan per packet cut
//! throughput tenfold with 10,000 of them. So the policies of one direction are grouped by
//! the shape of their selector, (family, source prefix length, destination prefix length)
//! — tuple space search (Srinivasan, Suri and Varghese, SIGCOMM 1999) — and within a group
//! the masked addresses are a hash key. A packet costs one hash lookup per group:
//!
//! ```text
//! lookup(flow) ─ groups, by the oldest policy each may hold ─┬─ none older than the best so far: stop
//!                                                            └─ hash (src & smask, dst & dmask)
//!                                                                └─ bucket: its policies in order; the
//!                                                                   first whose protocol and ports match
//! ```
//!
//! First match is kept exactly: every policy has a number that grows with each `spdadd` (its
//! place in the list), a bucket holds its policies in that order, and the winner is the
//! lowest number over all groups. A hub whose 10,000 spokes all have `net/24 net/24`
//! policies has one group: one hash lookup. `tests::the_classifier_is_the_linear_scan`
//! checks the answer against the scan on random policies and flows.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use arc_swap::ArcSwap;
use rustc_hash::FxHashMap as HashMap;

use crate::control::{Action, Dir, PolicySpec, Prefix, Selector, Upper};

/// What a packet offers to policy matching: addresses, upper-layer protocol and ports
/// (0 when the protocol has none or they are not visible).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Flow {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub proto: u8,
    pub sport: u16,
    pub dport: u16,
}

impl Prefix {
    /// Whether `addr` lies in the prefix (an address of the other family never does).
    #[inline]
    pub fn contains(&self, addr: IpAddr) -> bool {
        self.addr.is_ipv6() == addr.is_ipv6() && {
            let m = mask(addr.is_ipv6(), self.len);
            bits(self.addr) & m == bits(addr) & m
        }
    }
}

/// An address as a number (IPv4 in the low 32 bits).
#[inline]
fn bits(a: IpAddr) -> u128 {
    match a {
        IpAddr::V4(a) => u128::from(u32::from(a)),
        IpAddr::V6(a) => u128::from(a),
    }
}

/// The mask of a prefix of `len` bits (at most the family's width) in the family's width.
#[inline]
fn mask(v6: bool, len: u8) -> u128 {
    let width = if v6 { 128 } else { 32 };
    match u32::from(len).min(width) {
        0 => 0,
        len => (u128::MAX << (128 - len)) >> (128 - width),
    }
}

impl Upper {
    /// The IP protocol number, or `None` for any.
    pub fn number(self) -> Option<u8> {
        match self {
            Upper::Any => None,
            Upper::Tcp => Some(6),
            Upper::Udp => Some(17),
            Upper::Icmp => Some(1),
            Upper::Icmp6 => Some(58),
            Upper::Number(n) => Some(n),
        }
    }
}

impl Selector {
    /// Whether the selector matches a flow.
    #[inline]
    pub fn matches(&self, f: &Flow) -> bool {
        self.src.contains(f.src) && self.dst.contains(f.dst) && self.matches_upper(f)
    }

    /// Whether the protocol and ports match (the addresses aside).
    #[inline]
    fn matches_upper(&self, f: &Flow) -> bool {
        self.upper.number().is_none_or(|p| p == f.proto)
            && self.sport.is_none_or(|p| p == f.sport)
            && self.dport.is_none_or(|p| p == f.dport)
    }
}

/// An installed policy.
#[derive(Debug)]
pub struct Policy {
    pub spec: PolicySpec,
    /// Its place in match order: lower matches first (it grows with each add).
    pub id: u64,
}

/// Policies whose selectors have one shape: family and prefix lengths.
#[derive(Clone)]
struct Group {
    v6: bool,
    smask: u128,
    dmask: u128,
    /// No policy in the group is older (lower) than this. Exact when the group was made;
    /// a delete may leave it lower than the oldest, which only makes the search stop later.
    oldest: u64,
    len: usize,
    /// (source & smask, destination & dmask) → the policies with those prefixes, in order.
    buckets: HashMap<(u128, u128), Vec<Arc<Policy>>>,
}

impl Group {
    fn key(&self, src: IpAddr, dst: IpAddr) -> (u128, u128) {
        (bits(src) & self.smask, bits(dst) & self.dmask)
    }
}

/// A selector's group: family and masks; `None` when its addresses are of two families
/// (such a selector never matches: it is only listed).
fn shape(sel: &Selector) -> Option<(bool, u128, u128)> {
    let v6 = sel.src.addr.is_ipv6();
    (v6 == sel.dst.addr.is_ipv6()).then(|| (v6, mask(v6, sel.src.len), mask(v6, sel.dst.len)))
}

/// Up to this many policies a direction is scanned in order: cheaper than hashing for the
/// usual gateway's one or two (measured with `benches/esp.rs`).
const SCAN_UP_TO: usize = 4;

/// One direction's policies: in match order, by selector, and grouped for lookup.
#[derive(Clone, Default)]
pub(crate) struct Table {
    order: BTreeMap<u64, Arc<Policy>>,
    by_selector: HashMap<Selector, u64>,
    /// By `oldest`, ascending.
    groups: Vec<Group>,
    /// Every policy in order while there are at most [`SCAN_UP_TO`]; else empty.
    few: Vec<Arc<Policy>>,
}

impl Table {
    /// The first policy that matches (see the module documentation).
    #[inline]
    fn lookup(&self, f: &Flow) -> Option<&Arc<Policy>> {
        if self.order.len() <= SCAN_UP_TO {
            return self.few.iter().find(|p| p.spec.selector.matches(f));
        }
        let v6 = f.src.is_ipv6();
        if v6 != f.dst.is_ipv6() {
            return None;
        }
        let mut best: Option<&Arc<Policy>> = None;
        for g in &self.groups {
            if best.is_some_and(|b| b.id < g.oldest) {
                break;
            }
            if g.v6 != v6 {
                continue;
            }
            let Some(bucket) = g.buckets.get(&g.key(f.src, f.dst)) else { continue };
            if let Some(p) = bucket.iter().find(|p| p.spec.selector.matches_upper(f)) {
                if best.is_none_or(|b| p.id < b.id) {
                    best = Some(p);
                }
            }
        }
        best
    }

    /// Appends a policy: it matches after every policy already there.
    fn insert(&mut self, p: Arc<Policy>) -> Result<(), SpdError> {
        let sel = p.spec.selector;
        if self.by_selector.contains_key(&sel) {
            return Err(SpdError::Exists);
        }
        self.by_selector.insert(sel, p.id);
        self.order.insert(p.id, p.clone());
        self.refresh_few();
        let Some((v6, smask, dmask)) = shape(&sel) else { return Ok(()) };
        let at = match self.group(v6, smask, dmask) {
            Some(i) => i,
            None => {
                // Its policies are all newer than every other group's oldest: it goes last.
                let g = Group { v6, smask, dmask, oldest: p.id, len: 0, buckets: HashMap::default() };
                self.groups.push(g);
                self.groups.len() - 1
            }
        };
        let g = &mut self.groups[at];
        g.buckets.entry(g.key(sel.src.addr, sel.dst.addr)).or_default().push(p);
        g.len += 1;
        Ok(())
    }

    fn remove(&mut self, sel: &Selector) -> Result<Arc<Policy>, SpdError> {
        let id = self.by_selector.remove(sel).ok_or(SpdError::NotFound)?;
        let p = self.order.remove(&id).ok_or(SpdError::NotFound)?;
        self.refresh_few();
        let Some((v6, smask, dmask)) = shape(sel) else { return Ok(p) };
        if let Some(at) = self.group(v6, smask, dmask) {
            let g = &mut self.groups[at];
            let key = g.key(sel.src.addr, sel.dst.addr);
            if let Some(bucket) = g.buckets.get_mut(&key) {
                bucket.retain(|q| q.id != id);
                if bucket.is_empty() {
                    g.buckets.remove(&key);
                }
            }
            g.len -= 1;
            if g.len == 0 {
                self.groups.remove(at);
            }
        }
        Ok(p)
    }

    /// The index of the group of this shape, if there is one.
    fn group(&self, v6: bool, smask: u128, dmask: u128) -> Option<usize> {
        self.groups.iter().position(|g| g.v6 == v6 && g.smask == smask && g.dmask == dmask)
    }

    fn refresh_few(&mut self) {
        self.few.clear();
        if self.order.len() <= SCAN_UP_TO {
            self.few.extend(self.order.values().cloned());
        }
    }

    fn specs(&self) -> impl Iterator<Item = PolicySpec> + '_ {
        self.order.values().map(|p| p.spec.clone())
    }
}

/// The SPD.
pub struct Spd {
    tables: [ArcSwap<Table>; 3],
    /// Serializes writers (lookups never take it); holds the next policy's number.
    writer: Mutex<u64>,
}

/// Why a policy change was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SpdError {
    /// A policy with the same selector and direction exists (setkey: "File exists").
    Exists,
    /// No policy with that selector and direction.
    NotFound,
}

impl std::fmt::Display for SpdError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SpdError::Exists => "a policy with this selector and direction already exists",
            SpdError::NotFound => "no policy with this selector and direction",
        })
    }
}

fn index(dir: Dir) -> usize {
    match dir {
        Dir::In => 0,
        Dir::Out => 1,
        Dir::Fwd => 2,
    }
}

const DIRS: [Dir; 3] = [Dir::In, Dir::Out, Dir::Fwd];

impl Default for Spd {
    fn default() -> Spd {
        Spd { tables: Default::default(), writer: Mutex::new(0) }
    }
}

impl Spd {
    /// The first policy of `dir` that matches, if any. Lock-free; no allocation.
    #[inline]
    pub fn lookup(&self, dir: Dir, flow: &Flow) -> Option<Arc<Policy>> {
        self.tables[index(dir)].load().lookup(flow).cloned()
    }

    /// [`Spd::lookup`] that hands the policy to `f` instead of a counted reference: the
    /// packet path's, since every thread's packets of one policy would otherwise add to
    /// and take from one reference count, a cache line they all write.
    #[inline]
    pub(crate) fn lookup_with<R>(&self, dir: Dir, flow: &Flow, f: impl FnOnce(&Policy) -> R) -> Option<R> {
        self.tables[index(dir)].load().lookup(flow).map(|p| f(p))
    }

    /// Every policy, by direction then match order (setkey `spddump`).
    pub fn dump(&self) -> Vec<PolicySpec> {
        DIRS.iter().flat_map(|&d| self.tables[index(d)].load().specs().collect::<Vec<_>>()).collect()
    }

    /// Whether any policy exists for `dir` (a gateway with none passes traffic in the clear).
    pub fn is_empty(&self, dir: Dir) -> bool {
        self.tables[index(dir)].load().order.is_empty()
    }

    /// Starts a change (the only way to make one): waits for any other writer.
    pub(crate) fn writer(&self) -> Writer<'_> {
        let next_id = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        Writer { spd: self, next_id, tables: Default::default() }
    }
}

/// A change to the SPD in progress: the tables of the directions it touched, copied once
/// and changed in place; nothing is visible to lookups until [`Writer::commit`].
pub(crate) struct Writer<'a> {
    spd: &'a Spd,
    next_id: MutexGuard<'a, u64>,
    tables: [Option<Table>; 3],
}

impl Writer<'_> {
    fn table(&mut self, dir: Dir) -> &mut Table {
        let i = index(dir);
        let spd = self.spd;
        self.tables[i].get_or_insert_with(|| Table::clone(&spd.tables[i].load()))
    }

    /// Appends a policy (setkey `spdadd`). More specific policies should be added first;
    /// like KAME's, this SPD does not reorder them.
    pub(crate) fn add(&mut self, spec: PolicySpec) -> Result<(), SpdError> {
        let id = *self.next_id + 1;
        self.table(spec.dir).insert(Arc::new(Policy { spec, id }))?;
        *self.next_id = id;
        Ok(())
    }

    /// Removes a policy (setkey `spddelete`).
    pub(crate) fn delete(&mut self, selector: &Selector, dir: Dir) -> Result<(), SpdError> {
        self.table(dir).remove(selector).map(|_| ())
    }

    /// Removes every policy (setkey `spdflush`).
    pub(crate) fn flush(&mut self) {
        self.tables = [Some(Table::default()), Some(Table::default()), Some(Table::default())];
    }

    /// Every policy as this change leaves them (setkey `spddump`).
    pub(crate) fn dump(&self) -> Vec<PolicySpec> {
        DIRS.iter()
            .flat_map(|&d| match &self.tables[index(d)] {
                Some(t) => t.specs().collect::<Vec<_>>(),
                None => self.spd.tables[index(d)].load().specs().collect(),
            })
            .collect()
    }

    /// Makes the change visible, each direction it touched in one swap.
    pub(crate) fn commit(self) {
        for (slot, t) in self.spd.tables.iter().zip(self.tables) {
            if let Some(t) = t {
                slot.store(Arc::new(t));
            }
        }
    }
}

/// Whether an action is ESP protection.
pub fn protects(a: &Action) -> bool {
    matches!(a, Action::Protect(_))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    fn p4(a: [u8; 4], len: u8) -> Prefix {
        Prefix { addr: IpAddr::V4(Ipv4Addr::from(a)), len }
    }

    fn flow(src: [u8; 4], dst: [u8; 4], proto: u8, dport: u16) -> Flow {
        Flow { src: IpAddr::V4(src.into()), dst: IpAddr::V4(dst.into()), proto, sport: 1000, dport }
    }

    fn sel(src: Prefix, dst: Prefix, upper: Upper, dport: Option<u16>) -> Selector {
        Selector { src, dst, sport: None, dport, upper }
    }

    #[test]
    fn prefixes_match_by_their_length() {
        assert!(p4([10, 1, 0, 0], 16).contains(IpAddr::V4(Ipv4Addr::new(10, 1, 200, 3))));
        assert!(!p4([10, 1, 0, 0], 16).contains(IpAddr::V4(Ipv4Addr::new(10, 2, 0, 3))));
        assert!(p4([0, 0, 0, 0], 0).contains(IpAddr::V4(Ipv4Addr::new(1, 2, 3, 4))));
        assert!(!p4([0, 0, 0, 0], 0).contains(IpAddr::V6(Ipv6Addr::LOCALHOST)), "families never mix");
        let v6 = Prefix { addr: "2001:db8::".parse().unwrap(), len: 32 };
        assert!(v6.contains("2001:db8:1::5".parse().unwrap()));
        assert!(!v6.contains("2001:db9::5".parse().unwrap()));
        assert!(Prefix { addr: "2001:db8::5".parse().unwrap(), len: 128 }
            .contains("2001:db8::5".parse().unwrap()));
    }

    fn add(spd: &Spd, spec: PolicySpec) -> Result<(), SpdError> {
        let mut w = spd.writer();
        w.add(spec)?;
        w.commit();
        Ok(())
    }

    #[test]
    fn first_match_wins_and_writers_do_not_disturb_readers() {
        let spd = Spd::default();
        let web = sel(p4([10, 0, 0, 0], 8), p4([10, 0, 0, 0], 8), Upper::Tcp, Some(443));
        let all = sel(p4([10, 0, 0, 0], 8), p4([10, 0, 0, 0], 8), Upper::Any, None);
        add(&spd, PolicySpec { selector: web, dir: Dir::Out, action: Action::Bypass }).unwrap();
        add(&spd, PolicySpec { selector: all, dir: Dir::Out, action: Action::Discard }).unwrap();
        assert_eq!(
            add(&spd, PolicySpec { selector: all, dir: Dir::Out, action: Action::Bypass }),
            Err(SpdError::Exists)
        );
        let https = flow([10, 0, 0, 1], [10, 0, 0, 2], 6, 443);
        let ssh = flow([10, 0, 0, 1], [10, 0, 0, 2], 6, 22);
        assert_eq!(spd.lookup(Dir::Out, &https).unwrap().spec.action, Action::Bypass);
        assert_eq!(spd.lookup(Dir::Out, &ssh).unwrap().spec.action, Action::Discard);
        assert!(spd.lookup(Dir::In, &ssh).is_none(), "directions are separate");
        assert!(spd.lookup(Dir::Out, &flow([192, 168, 0, 1], [10, 0, 0, 2], 6, 22)).is_none());

        let held = spd.lookup(Dir::Out, &https).unwrap();
        let mut w = spd.writer();
        w.delete(&web, Dir::Out).unwrap();
        assert_eq!(spd.lookup(Dir::Out, &https).unwrap().spec.action, Action::Bypass, "not before commit");
        w.commit();
        assert_eq!(held.spec.action, Action::Bypass, "a reader's policy outlives its removal");
        assert_eq!(spd.lookup(Dir::Out, &https).unwrap().spec.action, Action::Discard);
        let mut w = spd.writer();
        assert_eq!(w.delete(&web, Dir::Out), Err(SpdError::NotFound));
        drop(w);
        assert_eq!(spd.dump().len(), 1);
        let mut w = spd.writer();
        w.flush();
        assert!(!spd.is_empty(Dir::Out), "a writer dropped uncommitted changes nothing");
        w.commit();
        assert!(spd.is_empty(Dir::Out));
    }

    /// The first match by a scan of the policies in order: the SPD's semantics, which the
    /// classifier must give exactly.
    fn scan<'a>(policies: &'a [PolicySpec], dir: Dir, f: &Flow) -> Option<&'a PolicySpec> {
        policies.iter().find(|p| p.dir == dir && p.selector.matches(f))
    }

    /// Addresses from a small space (10.0.x.y, fd00::x:y) so that random flows meet random
    /// prefixes often; prefix lengths from a few shapes, as configurations have.
    fn addr(v6: bool, x: u8, y: u8) -> IpAddr {
        if v6 {
            IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, u16::from(x & 3), u16::from(y & 7)))
        } else {
            IpAddr::V4(Ipv4Addr::new(10, 0, x & 3, y & 7))
        }
    }

    fn any_selector() -> impl proptest::strategy::Strategy<Value = Selector> {
        use proptest::prelude::*;
        let lens4 = prop::sample::select(vec![0u8, 8, 16, 22, 24, 29, 30, 32]);
        let lens6 = prop::sample::select(vec![0u8, 64, 112, 120, 125, 126, 128]);
        (any::<bool>(), any::<[u8; 4]>(), lens4.clone(), lens4, lens6.clone(), lens6, 0u8..4, 0u8..3, 0u8..3)
            .prop_map(|(v6, a, l4s, l4d, l6s, l6d, up, sp, dp)| {
                let (sl, dl) = if v6 { (l6s, l6d) } else { (l4s, l4d) };
                Selector {
                    src: Prefix { addr: addr(v6, a[0], a[1]), len: sl },
                    dst: Prefix { addr: addr(v6, a[2], a[3]), len: dl },
                    upper: [Upper::Any, Upper::Tcp, Upper::Udp, Upper::Number(6)][usize::from(up)],
                    sport: [None, Some(1000), Some(7)][usize::from(sp)],
                    dport: [None, Some(443), Some(22)][usize::from(dp)],
                }
            })
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(300))]
        /// Random policies (added, some deleted, some re-added at the end) and random flows:
        /// the classifier answers what the linear first-match scan answers.
        #[test]
        fn the_classifier_is_the_linear_scan(
            sels in proptest::collection::vec((any_selector(), proptest::prelude::any::<bool>()), 1..60),
            deletes in proptest::collection::vec(proptest::prelude::any::<proptest::sample::Index>(), 0..20),
            flows in proptest::collection::vec(proptest::prelude::any::<(bool, [u8; 4], u8, u8, u8)>(), 64),
        ) {
            let spd = Spd::default();
            let mut list: Vec<PolicySpec> = Vec::new();
            let mut w = spd.writer();
            for (i, (s, out)) in sels.iter().enumerate() {
                let dir = if *out { Dir::Out } else { Dir::In };
                let spec = PolicySpec { selector: *s, dir, action: Action::Protect(vec![]) };
                let dup = list.iter().any(|p| p.selector == *s && p.dir == dir);
                proptest::prop_assert_eq!(w.add(spec.clone()).is_err(), dup);
                if !dup {
                    list.push(spec);
                }
                if i % 7 == 6 {
                    // Commit in the middle too: later changes start from a copy.
                    w.commit();
                    w = spd.writer();
                }
            }
            for (n, d) in deletes.iter().enumerate() {
                if list.is_empty() { break; }
                let p = list.remove(d.index(list.len()));
                w.delete(&p.selector, p.dir).unwrap();
                if n % 2 == 0 {
                    // Back at the end: it now matches after every other policy.
                    w.add(p.clone()).unwrap();
                    list.push(p);
                }
            }
            w.commit();
            proptest::prop_assert_eq!(spd.dump().len(), list.len());
            for (v6, a, proto, sp, dp) in flows {
                let f = Flow {
                    src: addr(v6, a[0], a[1]),
                    dst: addr(v6, a[2], a[3]),
                    proto: [6, 17, 1][usize::from(proto % 3)],
                    sport: [1000, 7, 5][usize::from(sp % 3)],
                    dport: [443, 22, 80][usize::from(dp % 3)],
                };
                for dir in [Dir::In, Dir::Out] {
                    let want = scan(&list, dir, &f);
                    let got = spd.lookup(dir, &f);
                    proptest::prop_assert_eq!(got.as_ref().map(|p| &p.spec), want, "{:?} {:?}", dir, f);
                }
            }
        }
    }

    #[test]
    fn masks_and_mixed_families() {
        assert_eq!(mask(false, 24), 0xffff_ff00);
        assert_eq!(mask(false, 40), 0xffff_ffff, "clamped to the family");
        assert_eq!(mask(true, 128), u128::MAX);
        assert_eq!(mask(true, 0), 0);
        // A selector of two families is listed and never matches.
        let spd = Spd::default();
        let mixed = Selector {
            src: p4([10, 0, 0, 0], 8),
            dst: Prefix { addr: "::".parse().unwrap(), len: 0 },
            sport: None,
            dport: None,
            upper: Upper::Any,
        };
        add(&spd, PolicySpec { selector: mixed, dir: Dir::Out, action: Action::Discard }).unwrap();
        assert!(spd.lookup(Dir::Out, &flow([10, 0, 0, 1], [0, 0, 0, 0], 6, 1)).is_none());
        assert_eq!(spd.dump().len(), 1);
        let mut w = spd.writer();
        w.delete(&mixed, Dir::Out).unwrap();
        w.commit();
        assert!(spd.is_empty(Dir::Out));
    }
}
