//! [`crate::lint`]'s rules per change: the warnings a control request brings, found by
//! looking only at what it changed, so that a key manager installing its 1,000th CHILD_SA
//! pays what it paid for the first (the full check read every SA and policy, sorted, before
//! and after each request: two thirds of ipsecd's CPU per tunnel at 1,000 tunnels).
//!
//! ```text
//!  committed changes (Ipsec::transact_noting) ─ keys they touch ─┬─ findings of those keys, index before
//!                                                                 ├─ the index follows the changes
//!                                                                 └─ findings of those keys, index after
//!  new warnings = after − before (item by item) ──────────────────────────────────────────────┘
//! ```
//!
//! Which keys a change touches, rule by rule:
//! - **no inbound policy back**: an outbound tunnel policy added or removed is its own key;
//!   an inbound policy added or removed touches the outbound tunnel policies whose tunnel
//!   ends are its own reversed ([`LintIndex`] keeps both kinds by their ends).
//! - **tunnel source not ours**: the outbound policy alone (and this host's addresses,
//!   which are read once per request, [`crate::host_addrs`]).
//! - **ESP-in-UDP port**: the SA alone (its id and ports are in the change).
//!
//! A flush touches everything it removed, and removing can only take warnings away, so it
//! needs no key. The index is built from the databases when it has none
//! ([`LintIndex::build`]: at the first request, and after a SIGHUP reload, which changes
//! the databases outside the control path); the equivalence with the full check is
//! tested on random databases and changes.

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;

use ipsec_core::changes::Change;
use ipsec_core::control::{Dir, NatT, PolicySpec, Proto, SaId, Selector};
use ipsec_core::Ipsec;

use crate::host_addrs::HostAddrs;
use crate::lint::{self, Findings};

type Ends = (IpAddr, IpAddr);

/// What the rules need of the databases, by the keys a change names.
#[derive(Default)]
pub struct LintIndex {
    /// Outbound policies with a tunnel-mode rule, by selector.
    out: HashMap<Selector, PolicySpec>,
    /// Their selectors by each tunnel rule's (source, destination).
    out_by_ends: HashMap<Ends, HashSet<Selector>>,
    /// Inbound policies with a tunnel rule, by selector.
    inbound: HashMap<Selector, PolicySpec>,
    /// Their selectors by each tunnel rule's (source, destination), with how many of its
    /// rules name those ends.
    in_by_ends: HashMap<Ends, HashMap<Selector, usize>>,
    /// ESP-in-UDP SAs' ports.
    natt: HashMap<SaId, NatT>,
}

/// What a change touched: outbound policies (by selector) and SAs whose findings may differ.
#[derive(Default)]
struct Touched {
    out: Vec<Selector>,
    sas: Vec<SaId>,
}

impl LintIndex {
    /// The index of what `core` holds now.
    pub fn build(core: &Ipsec) -> LintIndex {
        let mut ix = LintIndex::default();
        for p in core.databases().spd.dump() {
            ix.add_policy(p);
        }
        for sa in core.databases().sad.dump(None) {
            if let Some(n) = sa.spec.natt {
                ix.natt.insert(sa.id, n);
            }
        }
        ix
    }

    /// Every finding for what the index holds (the full check's, in another order).
    pub fn findings(&self, is_local: &dyn Fn(IpAddr) -> bool, udp_port: u16) -> Findings {
        let mut f = Findings::default();
        for sel in self.out.keys() {
            f.extend(self.policy_findings(sel, is_local));
        }
        for id in self.natt.keys() {
            f.ports.extend(self.sa_finding(id, is_local, udp_port));
        }
        f
    }

    /// Follows `changes` (one committed transaction's, in order) and returns the findings
    /// they brought: those of the keys they touched after them that were not there before.
    pub fn change(
        &mut self,
        changes: &[Change],
        is_local: &dyn Fn(IpAddr) -> bool,
        udp_port: u16,
    ) -> Findings {
        let touched = self.touched(changes);
        let before = self.of(&touched, is_local, udp_port);
        for c in changes {
            self.apply(c);
        }
        let after = self.of(&touched, is_local, udp_port);
        Findings {
            no_way_back: minus(after.no_way_back, before.no_way_back),
            foreign_source: minus(after.foreign_source, before.foreign_source),
            ports: minus(after.ports, before.ports),
        }
    }

    /// The keys `changes` touch, each once, found on the index as it is before them.
    fn touched(&self, changes: &[Change]) -> Touched {
        let (mut out, mut sas) = (HashSet::new(), HashSet::new());
        let mut t = Touched::default();
        let mut out_key = |sel: Selector, t: &mut Touched| {
            if out.insert(sel) {
                t.out.push(sel);
            }
        };
        let mut sa_key = |id: SaId, t: &mut Touched| {
            if sas.insert(id) {
                t.sas.push(id);
            }
        };
        for c in changes {
            match c {
                Change::SaAdded(s) | Change::SaUpdated(s) => sa_key(s.id, &mut t),
                Change::SaMigrated { to, .. } => sa_key(to.id, &mut t),
                Change::PolicyAdded(p) if p.dir == Dir::Out => out_key(p.selector, &mut t),
                Change::PolicyAdded(p) if p.dir == Dir::In => {
                    for (src, dst) in lint::inbound_ends(p) {
                        for sel in self.out_by_ends.get(&(dst, src)).into_iter().flatten() {
                            out_key(*sel, &mut t);
                        }
                    }
                }
                Change::PolicyDeleted { selector, dir: Dir::Out } => out_key(*selector, &mut t),
                Change::PolicyDeleted { selector, dir: Dir::In } => {
                    let Some(p) = self.inbound.get(selector) else { continue };
                    for (src, dst) in lint::inbound_ends(p) {
                        for sel in self.out_by_ends.get(&(dst, src)).into_iter().flatten() {
                            out_key(*sel, &mut t);
                        }
                    }
                }
                // Removals bring no warning of their own (an inbound policy's removal is
                // above: it can leave an outbound one without its way back).
                _ => {}
            }
        }
        t
    }

    /// The findings of `touched` keys on the index as it is now.
    fn of(&self, touched: &Touched, is_local: &dyn Fn(IpAddr) -> bool, udp_port: u16) -> Findings {
        let mut f = Findings::default();
        for sel in &touched.out {
            f.extend(self.policy_findings(sel, is_local));
        }
        for id in &touched.sas {
            f.ports.extend(self.sa_finding(id, is_local, udp_port));
        }
        f
    }

    fn policy_findings(&self, sel: &Selector, is_local: &dyn Fn(IpAddr) -> bool) -> Findings {
        let Some(p) = self.out.get(sel) else { return Findings::default() };
        let back = |ends: Ends| {
            let found = self.in_by_ends.get(&ends);
            found.is_some_and(|sels| sels.keys().any(|q| lint::is_way_back(q, &p.selector)))
        };
        lint::outbound_findings(p, &back, is_local)
    }

    fn sa_finding(&self, id: &SaId, is_local: &dyn Fn(IpAddr) -> bool, udp_port: u16) -> Option<String> {
        lint::port_finding(id, Some(*self.natt.get(id)?), is_local, udp_port)
    }

    /// Follows one change.
    fn apply(&mut self, c: &Change) {
        match c {
            Change::SaAdded(s) | Change::SaUpdated(s) => self.set_natt(s.id, s.natt),
            Change::SaDeleted(id) => self.set_natt(*id, None),
            Change::SaMigrated { from, to } => {
                self.set_natt(*from, None);
                self.set_natt(to.id, to.natt);
            }
            Change::SasFlushed(proto) => {
                self.natt.retain(|id, _| proto.is_some_and(|p: Proto| p != id.proto))
            }
            Change::PolicyAdded(p) => self.add_policy(p.clone()),
            Change::PolicyDeleted { selector, dir } => self.remove_policy(selector, *dir),
            Change::PoliciesFlushed => {
                self.out.clear();
                self.out_by_ends.clear();
                self.inbound.clear();
                self.in_by_ends.clear();
            }
        }
    }

    fn set_natt(&mut self, id: SaId, natt: Option<NatT>) {
        match natt {
            Some(n) => self.natt.insert(id, n),
            None => self.natt.remove(&id),
        };
    }

    fn add_policy(&mut self, p: PolicySpec) {
        match p.dir {
            Dir::Out if lint::outbound_ends(&p).next().is_some() => {
                for ends in lint::outbound_ends(&p) {
                    self.out_by_ends.entry(ends).or_default().insert(p.selector);
                }
                self.out.insert(p.selector, p);
            }
            Dir::In if lint::inbound_ends(&p).next().is_some() => {
                for ends in lint::inbound_ends(&p) {
                    *self.in_by_ends.entry(ends).or_default().entry(p.selector).or_default() += 1;
                }
                self.inbound.insert(p.selector, p);
            }
            _ => {}
        }
    }

    fn remove_policy(&mut self, sel: &Selector, dir: Dir) {
        match dir {
            Dir::Out => {
                let Some(p) = self.out.remove(sel) else { return };
                for ends in lint::outbound_ends(&p) {
                    if let Some(set) = self.out_by_ends.get_mut(&ends) {
                        set.remove(sel);
                        if set.is_empty() {
                            self.out_by_ends.remove(&ends);
                        }
                    }
                }
            }
            Dir::In => {
                let Some(p) = self.inbound.remove(sel) else { return };
                for ends in lint::inbound_ends(&p) {
                    if let Some(sels) = self.in_by_ends.get_mut(&ends) {
                        if let Some(n) = sels.get_mut(sel) {
                            *n -= 1;
                            if *n == 0 {
                                sels.remove(sel);
                            }
                        }
                        if sels.is_empty() {
                            self.in_by_ends.remove(&ends);
                        }
                    }
                }
            }
            Dir::Fwd => {}
        }
    }
}

/// The warnings of control requests as ipsecd gives them: the index, built when missing,
/// and this host's addresses.
pub struct ChangeLint {
    index: Option<LintIndex>,
    addrs: HostAddrs,
    udp_port: u16,
}

impl ChangeLint {
    /// For a host whose ESP-in-UDP port is `udp_port`; the index is built at the first
    /// request.
    pub fn new(udp_port: u16) -> ChangeLint {
        ChangeLint { index: None, addrs: HostAddrs::new(), udp_port }
    }

    /// The databases changed outside the control path (a reload): the index is built
    /// again before the next request.
    pub fn forget(&mut self) {
        self.index = None;
    }

    /// Call before a request's transaction: builds the index if there is none, from the
    /// databases as the request finds them.
    pub fn prepare(&mut self, core: &Ipsec) {
        if self.index.is_none() {
            self.index = Some(LintIndex::build(core));
        }
    }

    /// The warning lines that `changes` (the request's, committed) bring. Where this host's
    /// addresses cannot be read, tunnel sources are not checked (the full check's lines at
    /// start-up and reload say why).
    pub fn change(&mut self, core: &Ipsec, changes: &[Change]) -> Vec<String> {
        self.prepare(core);
        let local = self.addrs.get();
        let is_local = |a: IpAddr| local.as_ref().is_ok_and(|l| l.contains(&a));
        let Some(index) = &mut self.index else { return Vec::new() };
        let mut f = index.change(changes, &is_local, self.udp_port);
        if local.is_err() {
            f.foreign_source.clear();
        }
        f.lines(self.udp_port)
    }
}

/// The items of `after` that `before` does not have, counting repeats (a policy with two
/// tunnel rules is named twice).
fn minus(after: Vec<String>, mut before: Vec<String>) -> Vec<String> {
    after
        .into_iter()
        .filter(|a| match before.iter().position(|b| b == a) {
            Some(i) => {
                before.swap_remove(i);
                false
            }
            None => true,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ipsec_core::control::SaSpec;
    use ipsec_core::datapath::{Packet, Sink};
    use std::sync::Arc;

    struct Nowhere;

    impl Sink for Nowhere {
        fn transmit(&self, _: Packet) {}
        fn deliver(&self, _: Packet) {}
    }

    /// A small deterministic generator (xorshift64*), so that a failure replays.
    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: usize) -> usize {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33) as usize % n
        }

        fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
            from[self.below(from.len())]
        }
    }

    /// Tunnel ends (10.0.0.1 is this host's), selector prefixes that cover one another
    /// in several ways, and ESP-in-UDP ports on and off --udp-port 4500.
    const ENDS: &[&str] = &["10.0.0.1", "10.0.0.2", "10.0.0.3"];
    const PREFIXES: &[&str] =
        &["10.1.0.0/16", "10.1.1.0/24", "10.1.1.1", "10.2.0.0/16", "10.2.2.0/24", "10.2.2.2"];
    const PORTS: &[&str] = &["4500", "4501"];

    /// One random setkey statement; the databases may refuse it (a policy that exists,
    /// an SA that does not), which is a case too.
    fn statement(r: &mut Rng, n: &mut u32) -> String {
        let (a, b) = (r.pick(ENDS), r.pick(ENDS));
        let (s, d) = (r.pick(PREFIXES), r.pick(PREFIXES));
        let dir = r.pick(&["in", "out"]);
        let spi = 0x100 + r.below(12);
        match r.below(20) {
            0..=5 => {
                let rules = match r.below(4) {
                    0 => format!("esp/tunnel/{a}-{b}/require esp/tunnel/{b}-{a}/require"),
                    1 => "esp/transport//require".to_owned(),
                    _ => format!("esp/tunnel/{a}-{b}/require"),
                };
                format!("spdadd {s} {d} any -P {dir} ipsec {rules};")
            }
            6 => format!("spdadd {s} {d} any -P {dir} none;"),
            7..=10 => format!("spddelete {s} {d} any -P {dir};"),
            11..=15 => {
                *n += 1;
                let (p, q) = (r.pick(PORTS), r.pick(PORTS));
                format!("add {a}[{p}] {b}[{q}] esp-udp {spi:#x} -m tunnel -E aes-gcm-16 {:#042x};", *n)
            }
            16..=17 => format!("delete {a} {b} esp-udp {spi:#x};"),
            18 => format!("deleteall {a} {b} esp-udp;"),
            _ => r.pick(&["flush;", "spdflush;", "flush esp-udp;", "flush esp;"]).to_owned(),
        }
    }

    /// Every finding of the full check on what `core` holds, sorted per kind.
    fn full(core: &Ipsec, is_local: &dyn Fn(IpAddr) -> bool) -> Findings {
        let sas: Vec<SaSpec> = core.databases().sad.dump(None).iter().map(|sa| sa.spec.clone()).collect();
        sorted(lint::findings(&sas, &core.databases().spd.dump(), is_local, 4500))
    }

    fn sorted(mut f: Findings) -> Findings {
        f.no_way_back.sort();
        f.foreign_source.sort();
        f.ports.sort();
        f
    }

    /// On random databases changed by random requests (one to three statements each),
    /// the check of one change finds what the full check finds new (what it finds after,
    /// less what it found before, item by item), and the index, followed change by change,
    /// holds what the full check finds.
    #[test]
    fn the_check_of_one_change_agrees_with_the_full_check() {
        let is_local = |a: IpAddr| a == "10.0.0.1".parse::<IpAddr>().unwrap();
        let (mut kinds, mut refused) = ([0usize; 3], 0);
        for seed in 1..=8u64 {
            let fw = ocf::Framework::new();
            ocf_soft::register(&fw).unwrap();
            let core = Ipsec::new(fw, Arc::new(Nowhere));
            let mut index = LintIndex::build(&core);
            let (mut r, mut n) = (Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15)), 0u32);
            for step in 0..150 {
                let text: String = (0..1 + r.below(3)).map(|_| statement(&mut r, &mut n) + "\n").collect();
                let before = full(&core, &is_local);
                let Ok((_, changes)) =
                    crate::service::apply_setkey_noting(&core, "test", &text, crate::service::Keys::Hidden)
                else {
                    refused += 1;
                    continue;
                };
                let after = full(&core, &is_local);
                let want = Findings {
                    no_way_back: minus(after.no_way_back.clone(), before.no_way_back),
                    foreign_source: minus(after.foreign_source.clone(), before.foreign_source),
                    ports: minus(after.ports.clone(), before.ports),
                };
                let got = sorted(index.change(&changes, &is_local, 4500));
                assert_eq!(got, want, "seed {seed} step {step}: {text}");
                assert_eq!(sorted(index.findings(&is_local, 4500)), after, "seed {seed} step {step}: {text}");
                for (k, v) in kinds.iter_mut().zip([&got.no_way_back, &got.foreign_source, &got.ports]) {
                    *k += usize::from(!v.is_empty());
                }
            }
        }
        // The cases were met: each kind of warning brought by some change, and requests
        // the databases refused.
        assert!(kinds.iter().all(|&k| k > 5), "{kinds:?}");
        assert!(refused > 10, "{refused}");
    }

    /// A built index holds what the databases hold: the full check's findings.
    #[test]
    fn a_built_index_finds_what_the_full_check_finds() {
        let fw = ocf::Framework::new();
        ocf_soft::register(&fw).unwrap();
        let core = Ipsec::new(fw, Arc::new(Nowhere));
        let text = "add 10.0.0.1[4501] 10.0.0.2[4500] esp-udp 0x100 -m tunnel -E aes-gcm-16 0x1111111111111111111111111111111111111111;\n\
                    spdadd 10.1.0.0/16 10.2.0.0/16 any -P out ipsec esp/tunnel/10.0.0.3-10.0.0.2/require;\n\
                    spdadd 10.1.1.0/24 10.2.2.0/24 any -P out ipsec esp/tunnel/10.0.0.1-10.0.0.2/require;\n\
                    spdadd 10.2.0.0/16 10.1.0.0/16 any -P in ipsec esp/tunnel/10.0.0.2-10.0.0.1/require;\n";
        crate::service::apply_setkey(&core, "test", text).unwrap();
        let is_local = |a: IpAddr| a == "10.0.0.1".parse::<IpAddr>().unwrap();
        let f = sorted(LintIndex::build(&core).findings(&is_local, 4500));
        assert_eq!(f, full(&core, &is_local));
        assert_eq!((f.no_way_back.len(), f.foreign_source.len(), f.ports.len()), (1, 1, 1), "{f:?}");
    }
}
