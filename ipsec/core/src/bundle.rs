//! SA bundles: a policy whose `ipsec` action lists several rules, as setkey writes them
//! (`-P out ipsec ipcomp/tunnel/A-B/use esp/transport//require`, `esp/transport//require
//! ah/transport//require`). The first rule is applied first: it is the innermost (RFC 4301
//! §4.5's SA bundle; KAME's and Linux's order).
//!
//! ```text
//! out: packet ─ SPD out: rules r0 r1 … (outbound) ─ every SA found first, before any is used
//!        (a missing `require` SA: ACQUIRE, the packet held; a missing `use` one: its stage skipped)
//!      ─ stage 0 ─ stage 1 ─ … each on the packet the stage before made ─► transmit
//!        (IPComp: in the call; ESP, AH: an ocf request whose continuation runs the next stage)
//! in:  outer SA's decapsulation (inbound, ah_path, ipcomp_path) ─ accept_inner: a packet to the
//!        SA's destination from its source holding ESP, AH, IPComp (or an IPComp SA's IP-in-IP)?
//!      ─ that SA's stage, with the SAs so far (the path) ─ … ─ the last SA's accept_inner:
//!        SPD in: the path against the policy's rules (`allows`) ─► deliver
//! ```
//!
//! A packet of one SA never comes here: the single-rule policy's path is ESP's own
//! (`outbound`, `inbound`). A bundle's stages do not go through the batch's "more follow"
//! run (`crate::path::Batch`): each is submitted when the stage before it finishes, with a
//! continuation of its own (Fast IPsec's `ipsec_process_done` calling the next SA), which a
//! synchronous driver runs before `submit_or_finish` returns (the whole bundle in the call,
//! into its results) and an asynchronous one from its completion (to the sink; ocf never
//! blocks a completion context on flow control, so a stage submitted from there cannot wait
//! for the credits its own driver frees). That costs a continuation (a reference-counted
//! closure) per ESP or AH stage of a bundle's packet: measured in `benches/esp.rs`
//! (`bundle-*`).
//!
//! Not here: path MTU for bundles (the stages' packets go with DF where the SA's own path
//! would set it; an ICMP error about one is matched to its outermost SA as any other).

use std::sync::Arc;

use ipsec_wire::{IpProtocol, Summary, Upper as Wire};
use ocf::{Callback, Outcome, Request};

use crate::control::{Action, Dir, Level, Mode, Proto, Rule};
use crate::packet::Packet;
use crate::path::{parse_trusted, Batch, Shared, To, Way};
use crate::sad::Sa;
use crate::spd::Flow;
use crate::stats::Drop;
use crate::transform::Transform;

/// The most SAs one packet goes through in a row (a policy may list no more rules; a
/// packet that nests more is dropped as [`Drop::BundleTooDeep`]). RFC 4301 bundles are
/// IPComp, ESP and AH at most: three; one to spare.
pub const MAX_SAS: usize = 4;

/// One outbound stage: its SA and whether it adds an outer header (tunnel mode).
struct Step {
    sa: Arc<Sa>,
    tunnel: bool,
}

/// Where a bundle's packet is, for the continuation of its stage's request.
#[derive(Clone)]
enum Stage {
    /// Outbound: the bundle's steps and the one the request is for.
    Out(Arc<[Step]>, usize),
    /// Inbound: the SAs the packet came through before this one, outermost first.
    In(Arc<[Arc<Sa>]>),
}

impl Shared {
    /// Outbound through the bundle of the policy that selects `f`. (Never inlined: in
    /// `Shared::output`, it made ESP's own path slower.)
    #[inline(never)]
    pub(crate) fn bundle_output(
        &self,
        packet: Packet,
        s: &Summary,
        f: &Flow,
        b: &mut Batch<'_>,
    ) -> Result<(), Drop> {
        // The policy again, owned (the hot path's lookup only lends it).
        let policy = self.db.spd.lookup(Dir::Out, f);
        let Some(Action::Protect(rules)) = policy.as_ref().map(|p| &p.spec.action) else {
            // It changed between the two lookups.
            return Err(self.drop(None, Drop::Policy));
        };
        if rules.len() > MAX_SAS {
            return Err(self.drop(None, Drop::BundleTooDeep));
        }
        // Every SA first, as Linux resolves a bundle's templates: a packet goes through all
        // of its `require` SAs or is held for them, never through some of them.
        let mut steps = Vec::with_capacity(rules.len());
        let (mut src, mut dst) = (s.src, s.dst);
        for rule in rules {
            let ends = rule.tunnel.unwrap_or((src, dst));
            let Some(sa) = self.bundle_sa(rule, ends) else {
                if rule.level == Level::Use {
                    continue;
                }
                return self.acquire(packet, f, *rule, ends);
            };
            let tunnel = match rule.proto {
                Proto::IpComp => crate::ipcomp_path::tunnel(rule, &sa),
                _ => rule.mode == Mode::Tunnel || (rule.mode == Mode::Any && sa.spec.mode == Mode::Tunnel),
            };
            if tunnel {
                (src, dst) = (sa.id.src, sa.id.dst);
            }
            steps.push(Step { sa, tunnel });
        }
        match steps.first() {
            // Every rule `use`, and no SA: sent as it is (as for a single `use` rule).
            None => {
                b.transmit(packet);
                return Ok(());
            }
            // Transport mode needs whole packets; after a tunnel stage they are.
            Some(first) if s.is_fragment && !first.tunnel => {
                return Err(self.drop(Some(&first.sa), Drop::Fragment));
            }
            Some(_) => {}
        }
        self.bundle_stage(steps.into(), 0, packet, &mut To::Results(b.results()))
    }

    /// The SA a bundle's `rule` asks for between `ends`.
    fn bundle_sa(&self, rule: &Rule, (src, dst): (std::net::IpAddr, std::net::IpAddr)) -> Option<Arc<Sa>> {
        let reqid = if let Level::Unique(n) = rule.level { n } else { 0 };
        match rule.proto {
            Proto::IpComp => self.db.sad.ipcomp_between(src, dst, reqid),
            proto => self.db.sad.outbound_with(src, dst, proto, rule.mode, reqid, |sa| sa.cloned()),
        }
    }

    /// Outbound stage `i` of `steps` on `packet` (past the last: the packet is done).
    fn bundle_stage(
        &self,
        steps: Arc<[Step]>,
        i: usize,
        packet: Packet,
        to: &mut To<'_>,
    ) -> Result<(), Drop> {
        let Some(step) = steps.get(i) else {
            self.transmit_to(to, packet);
            return Ok(());
        };
        let parsed = parse_trusted(packet.bytes());
        let Ok(s) = &parsed else {
            return Err(self.drop(Some(&step.sa), Drop::Malformed));
        };
        if let Transform::IpComp = step.sa.transform {
            let (packet, len) = self.ipcomp_encap(&step.sa, packet, s, step.tunnel)?;
            self.count(None, &step.sa, Way::Out, len);
            return self.bundle_stage(steps, i + 1, packet, to);
        }
        let (req, len) = self.seal_request(&step.sa, packet, s, step.tunnel, false)?;
        self.count(None, &step.sa, Way::Out, len);
        let sa = step.sa.clone();
        self.run_stage(sa, req, Stage::Out(steps, i), to)
    }

    /// Inbound: a packet that the bundle's SAs in `path` (outermost first) have taken off
    /// and that holds the next SA's: that SA's stage.
    pub(crate) fn bundle_input(
        &self,
        path: Arc<[Arc<Sa>]>,
        packet: Packet,
        to: &mut To<'_>,
    ) -> Result<(), Drop> {
        let last = path.last().cloned();
        if path.len() >= MAX_SAS {
            return Err(self.drop(last.as_deref(), Drop::BundleTooDeep));
        }
        let parsed = parse_trusted(packet.bytes());
        let Ok(s) = &parsed else {
            return Err(self.drop(last.as_deref(), Drop::BadInner));
        };
        let (sa, req) = if let Some(ah) = crate::ah_path::offset(packet.bytes(), s) {
            self.ah_request(packet, s, ah)?
        } else {
            match s.upper {
                Wire::Esp(_) => self.open_nested(packet, s)?,
                Wire::BadEsp(ipsec_wire::Error::Truncated { .. }) => {
                    return Err(self.drop(None, Drop::EspTruncated))
                }
                Wire::BadEsp(_) => return Err(self.drop(None, Drop::UnknownSpi)),
                // IPComp, or an IPComp SA's IP-in-IP (`holds_another_sa` said which): no
                // crypto, the whole stage here.
                _ => {
                    let (sa, inner, len, tunnel) = self.ipcomp_decap(packet, s)?;
                    let inner = self.accept_inner(&sa, &path, tunnel, inner, len, None)?;
                    return self.take_inner(inner, to);
                }
            }
        };
        self.run_stage(sa, req, Stage::In(path), to)
    }

    /// Submits a bundle stage's request with its continuation: finished now (a synchronous
    /// driver) into `to`, or later, from the driver's completion, to the sink.
    fn run_stage(&self, sa: Arc<Sa>, req: Request, stage: Stage, to: &mut To<'_>) -> Result<(), Drop> {
        let (me, later) = (self.me.clone(), (sa.clone(), stage.clone()));
        let continuation: Callback = Arc::new(move |outcome| {
            if let Some(shared) = me.upgrade() {
                let _ = shared.stage_done(&later.0, outcome, later.1.clone(), &mut To::Sink);
            }
        });
        match sa.session.submit_or_finish(req, &continuation) {
            Some(outcome) => self.stage_done(&sa, outcome, stage, to),
            None => Ok(()),
        }
    }

    /// A bundle stage's outcome: on to the next stage, or finished into `to`.
    fn stage_done(&self, sa: &Arc<Sa>, outcome: Outcome, stage: Stage, to: &mut To<'_>) -> Result<(), Drop> {
        match stage {
            Stage::Out(steps, i) => {
                // A bundle's stage is never cut into fragments (`seal_request` was told the
                // packet may not be): one packet comes out.
                let mut sealed = None;
                self.output_done(sa, outcome, &mut |p| sealed = Some(p))?;
                match sealed {
                    Some(p) => self.bundle_stage(steps, i + 1, p, to),
                    None => Ok(()),
                }
            }
            Stage::In(outer) => match self.input_done(sa, outcome, None, &outer)? {
                Some(inner) => self.take_inner(inner, to),
                None => Ok(()),
            },
        }
    }
}

/// Whether a packet that `sa` decapsulated (summarised by `s`) holds a bundle's next SA's
/// packet rather than one for the policy check: it is to the SA's destination (us) from its
/// source, and carries ESP, AH, IPComp, or IP-in-IP between the ends of an IPComp SA (what
/// IPComp sends uncompressed, RFC 3173 §2.2). (Inline: it is on every inbound packet's
/// path, where the protocol alone answers for almost all.)
#[inline(always)]
pub(crate) fn holds_another_sa(shared: &Shared, sa: &Sa, s: &Summary, bytes: &[u8]) -> bool {
    let ours = || s.dst == sa.id.dst && s.src == sa.id.src;
    match s.protocol {
        IpProtocol::ESP | IpProtocol::AH | IpProtocol::IPCOMP => ours(),
        IpProtocol::IPV4 | IpProtocol::IPV6 => ours() && crate::ipcomp_path::claims(shared, s),
        // IPv6's AH is an extension header: the protocol is what follows it.
        _ => s.ext_headers != 0 && ours() && crate::ah_path::offset(bytes, s).is_some(),
    }
}

/// The policy check after decapsulation: whether the SAs a packet came through, `sa` last
/// (innermost; `tunnel`: it took an outer header off) and `outer` before it (outermost
/// first), are the ones `rules` asks for, in order. A `use` rule may have no SA (it is
/// skipped); every other rule needs its SA; and every SA must be one a rule asked for
/// (Linux's template check, `xfrm_policy_ok`). For a packet of one SA and a policy of one
/// rule: whether the rule allows the SA.
pub(crate) fn allows(rules: &[Rule], sa: &Sa, tunnel: bool, outer: &[Arc<Sa>]) -> bool {
    let innermost = std::iter::once((sa, Some(tunnel)));
    let mut sas = innermost.chain(outer.iter().rev().map(|a| (&**a, None))).peekable();
    for r in rules {
        match sas.peek() {
            Some(&(s, tunnel)) if rule_allows(r, s, tunnel) => {
                sas.next();
            }
            _ if r.level == Level::Use => {}
            _ => return false,
        }
    }
    sas.next().is_none()
}

/// Whether a policy rule is satisfied by a packet that came through `sa`: an `ah` rule by
/// an AH SA, an `ipcomp` rule by an IPComp SA, an `esp` or `esp-udp` rule by either ESP SA;
/// a tunnel rule's ends are the SA's; a `unique:N` rule's reqid is the SA's; and the rule's
/// mode is the one the packet came through (`tunnel`, where known: the innermost SA's; else
/// the SA's own mode, `any` fitting either), as Linux's `xfrm_state_ok` asks. (Without
/// that, a tunnel SA from one peer satisfied a transport rule, and delivered inner packets
/// from the addresses the rule's policy covers.)
fn rule_allows(r: &Rule, sa: &Sa, tunnel: Option<bool>) -> bool {
    let proto = match sa.id.proto {
        Proto::Ah => r.proto == Proto::Ah,
        Proto::IpComp => r.proto == Proto::IpComp,
        Proto::Esp | Proto::EspUdp => matches!(r.proto, Proto::Esp | Proto::EspUdp),
    };
    let mode = match (r.mode, tunnel) {
        (Mode::Any, _) => true,
        (m, Some(tunnel)) => tunnel == (m == Mode::Tunnel),
        (m, None) => sa.spec.mode == Mode::Any || sa.spec.mode == m,
    };
    proto
        && mode
        && r.tunnel.is_none_or(|(src, dst)| src == sa.id.src && dst == sa.id.dst)
        && match r.level {
            Level::Unique(n) if n != 0 => sa.spec.reqid == n,
            _ => true,
        }
}
