//! # ipsec-core — Fast IPsec's protocol core, over ocf
//!
//! Fast IPsec (S. Leffler, *Fast IPsec: A High-Performance IPsec Implementation*, BSDCon
//! 2003) rebuilt without I/O: bytes in, bytes and actions out, so that it can be tested
//! byte for byte against independent implementations and driven by the gateway (`ipsecd`).
//!
//! - [`datapath`]: [`Ipsec`], the packet path's API: batches in, [`Results`] out (a
//!   [`Sink`] only for an asynchronous driver's completions); `path` (what both directions
//!   share, and how a batch meets ocf with the "more follow" hint), `outbound` (policy and
//!   ESP encapsulation) and `inbound` (decapsulation and the policy check), as
//!   continuations over ocf.
//! - [`db`]: the databases behind the control protocol.
//! - [`changes`]: what control requests changed, as events for key managers.
//! - [`sad`]: the security association database.
//! - [`ipcomp`]: the IPComp transform (RFC 3173, DEFLATE per RFC 3174) over an ocf
//!   compression session: threshold, "not smaller: send as is", the decompression limit;
//!   `ipcomp_path`: IPComp SAs, tunnel and transport mode, on the packet path.
//! - [`bundle`]: SA bundles (setkey's rule lists): one stage per SA, the inbound check of
//!   the whole bundle.
//! - `transport`: transport mode's header surgery, shared by ESP, AH and IPComp.
//! - `ipip`: IP-in-IP, tunnel mode's own first step (then ESP as in transport mode).
//! - [`control`]: the typed control protocol (add/get/delete/flush/dump SAs and policies),
//!   separate from the databases, shared by the setkey parser and the gateway's socket.
//! - [`setkey`]: the KAME/FreeBSD setkey(8) language → control requests.
//! - [`replay`]: the anti-replay window (RFC 4303 §3.4.3 with ESN, RFC 6479 bitmap).
//! - [`esp`]: the ESP transform: an SA's algorithms as one ocf session, and the packet
//!   layout one ocf request encrypts and authenticates in place.
//! - [`ah`]: the AH transform (RFC 4302): HMACs and AES-GMAC as one ocf session;
//!   `ah_path`: AH on the packet path, the ICV over the packet with its mutable fields
//!   zeroed, tunnel and transport, ESN.
//! - [`transform`]: an SA's transform, ESP's, AH's or IPComp's.
//! - [`spd`]: the security policy database, read lock-free on the packet path.
//! - [`pmtu`]: path MTU per SA, learned from ICMP errors on the outer path; ICMP errors
//!   to inner senders whose packets no longer fit (RFC 4301 §8); `pmtu_path`: the steps
//!   that find or read the SA.
//! - [`stats`]: a counter for every reason a packet is dropped.
//! - [`acquire`]: ACQUIRE: outbound packets that wait for an SA a key manager was asked for.
//! - [`larval`]: GETSPI's reserved SPIs (larval SAs) until UPDATE gives them keys.

#![forbid(unsafe_code)]

pub mod acquire;
pub mod ah;
mod ah_path;
pub mod bundle;
pub mod changes;
pub mod control;
pub mod datapath;
pub mod db;
pub mod esp;
mod hold;
mod inbound;
pub mod ipcomp;
mod ipcomp_path;
mod ipip;
/// Where outbound CBC IVs come from; public for its benchmark only (not a stable API).
#[doc(hidden)]
pub mod ivs;
pub mod larval;
mod outbound;
mod packet;
mod path;
pub mod pmtu;
mod pmtu_path;
pub mod replay;
pub mod sad;
pub mod setkey;
pub mod spd;
pub mod stats;
pub mod transform;
mod transport;

pub use datapath::{DefaultPolicy, Ipsec, Packet, Payload, Results, Sink, Via, HEADROOM, TAILROOM};
pub use pmtu::{IcmpFrom, Learned};
