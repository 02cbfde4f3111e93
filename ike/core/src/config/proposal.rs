//! Proposals as strongSwan writes them: `aes128gcm16-prfsha256-x25519, aes256-sha256-modp2048`.
//!
//! A proposal list is proposals separated by commas; a proposal is keywords separated by
//! dashes, each keyword one transform (RFC 7296 §3.3). A proposal may name several transforms
//! of one type (`aes128-aes256-sha256-x25519-ecp256`): the peer picks one of each. The
//! keyword names are strongSwan's (`src/libstrongswan/crypto/proposal/
//! proposal_keywords_static.txt`), so that a swanctl.conf proposal means the same here.
//!
//! Accepted keywords (what ocf implements and the issue asks for; anything else is refused
//! with [`ProposalError::Unsupported`] if strongSwan knows it, [`ProposalError::Unknown`] if
//! not, both naming the keyword and the proposal):
//!
//! ```text
//! encryption  aes128 aes192 aes256 (aes = aes128)         ENCR_AES_CBC, key length 128/192/256
//!             aes128gcm16 aes256gcm16 (+ …gcm128, …gcm)   ENCR_AES_GCM_16, key length 128/256
//!             chacha20poly1305                            ENCR_CHACHA20_POLY1305, no key length
//! integrity   sha256 sha384 sha512 (+ sha2_256 …)         AUTH_HMAC_SHA2_256_128, _384_192, _512_256
//! prf         prfsha256 prfsha384 prfsha512               PRF_HMAC_SHA2_256, _384, _512
//! key exch.   x25519 curve25519 ecp256 ecp384 modp2048     31, 19, 20, 14
//! esn         esn noesn                                   ESN, NO_ESN (ESP only)
//! default     the whole proposal: DEFAULT_IKE / DEFAULT_ESP below
//! ```
//!
//! strongSwan's rules (`check_proposal()` in `proposal.c`), and where this is stricter:
//! - IKE: a proposal without a PRF keyword takes its PRFs from its integrity algorithms
//!   (sha256 → prfsha256); an AEAD proposal has none to take them from, so it needs a PRF.
//!   A key exchange method is mandatory.
//! - ESP: a key exchange method means PFS: a new Diffie-Hellman on every CHILD_SA rekey (and
//!   on the first CHILD_SA created by CREATE_CHILD_SA). Without `esn`/`noesn`, `noesn`. A PRF
//!   is refused (strongSwan drops it silently).
//! - AEAD and classic ciphers never share a proposal. strongSwan drops integrity algorithms
//!   from an AEAD proposal silently; here they are refused, since the writer meant something
//!   else. ESP with a classic cipher and no integrity (encryption only, which strongSwan
//!   allows) is refused: RFC 8221 §5 advises against it, and ipsecd does not do it.
//!
//! [`Proposal`]'s [`Display`](fmt::Display) writes strongSwan's `%P` form
//! (`IKE:AES_GCM_16_128/PRF_HMAC_SHA2_256/CURVE_25519`), which charon logs for a loaded
//! connection: the tests compare the two.

use std::fmt;

use ike_wire::ids::{DhId, EncrId, EsnId, IntegId, PrfId};

/// The protocol a proposal is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Protocol {
    /// The IKE SA (`proposals =`).
    Ike,
    /// A CHILD_SA's ESP (`esp_proposals =`).
    Esp,
}

/// An encryption transform: the algorithm and its Key Length attribute (RFC 7296 §3.3.5),
/// `None` for an algorithm with a fixed key that takes no attribute (ChaCha20-Poly1305).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Encr {
    pub id: EncrId,
    pub key_bits: Option<u16>,
}

impl Encr {
    /// Whether the algorithm is an AEAD (combined mode: no integrity transform with it).
    pub fn is_aead(self) -> bool {
        self.id == EncrId::AES_GCM_16 || self.id == EncrId::CHACHA20_POLY1305
    }
}

/// One proposal: the transforms of each type the peer may choose from, in preference order.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Proposal {
    pub protocol: Protocol,
    /// At least one; all AEAD or all classic.
    pub encr: Vec<Encr>,
    /// Empty for AEAD; at least one for classic ciphers.
    pub integ: Vec<IntegId>,
    /// IKE only: at least one.
    pub prf: Vec<PrfId>,
    /// IKE: the key exchange methods, at least one. ESP: the PFS groups, empty for no PFS.
    pub dh: Vec<DhId>,
    /// ESP only: at least one (`[NO]` when the proposal names none).
    pub esn: Vec<EsnId>,
}

impl Proposal {
    /// Whether the proposal's ciphers are AEADs.
    pub fn is_aead(&self) -> bool {
        self.encr.first().is_some_and(|e| e.is_aead())
    }

    /// Whether an ESP proposal asks for a Diffie-Hellman on rekeying (PFS).
    pub fn pfs(&self) -> bool {
        self.protocol == Protocol::Esp && !self.dh.is_empty()
    }
}

/// What is wrong with a proposal string. `proposal` is the proposal as written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProposalError {
    /// The list, or one proposal in it, is empty (`a,,b`, `aes128-`).
    Empty { proposal: String },
    /// A keyword neither strongSwan nor this implementation knows.
    Unknown { keyword: String, proposal: String },
    /// A keyword strongSwan knows that this implementation does not offer.
    Unsupported { keyword: String, proposal: String },
    /// `default` next to other keywords in one proposal.
    DefaultNotAlone { proposal: String },
    /// No encryption algorithm.
    NoEncryption { proposal: String },
    /// AEAD and classic ciphers in one proposal.
    MixedAead { proposal: String },
    /// An integrity algorithm with an AEAD.
    IntegrityWithAead { proposal: String },
    /// A classic cipher without integrity.
    NoIntegrity { proposal: String },
    /// An AEAD IKE proposal without a PRF keyword.
    NoPrf { proposal: String },
    /// An IKE proposal without a key exchange method.
    NoKeyExchange { proposal: String },
    /// A PRF in an ESP proposal.
    PrfInEsp { proposal: String },
    /// `esn`/`noesn` in an IKE proposal.
    EsnInIke { proposal: String },
}

impl fmt::Display for ProposalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProposalError::Empty { proposal } => write!(f, "empty proposal in '{proposal}'"),
            ProposalError::Unknown { keyword, proposal } => {
                write!(f, "unknown algorithm '{keyword}' in proposal '{proposal}'")
            }
            ProposalError::Unsupported { keyword, proposal } => {
                write!(f, "algorithm '{keyword}' in proposal '{proposal}' is not supported by iked")
            }
            ProposalError::DefaultNotAlone { proposal } => {
                write!(f, "'default' must be a proposal of its own, not part of '{proposal}'")
            }
            ProposalError::NoEncryption { proposal } => {
                write!(f, "proposal '{proposal}' has no encryption algorithm")
            }
            ProposalError::MixedAead { proposal } => {
                write!(f, "proposal '{proposal}' mixes AEAD and classic encryption algorithms")
            }
            ProposalError::IntegrityWithAead { proposal } => {
                write!(f, "proposal '{proposal}' has an integrity algorithm with an AEAD (which has its own)")
            }
            ProposalError::NoIntegrity { proposal } => {
                write!(f, "proposal '{proposal}' has a classic cipher and no integrity algorithm")
            }
            ProposalError::NoPrf { proposal } => {
                write!(f, "AEAD proposal '{proposal}' needs a PRF (prfsha256, prfsha384 or prfsha512)")
            }
            ProposalError::NoKeyExchange { proposal } => write!(
                f,
                "IKE proposal '{proposal}' needs a key exchange method (x25519, ecp256, ecp384, modp2048)"
            ),
            ProposalError::PrfInEsp { proposal } => {
                write!(f, "ESP proposal '{proposal}' has a PRF (only IKE proposals do)")
            }
            ProposalError::EsnInIke { proposal } => {
                write!(f, "IKE proposal '{proposal}' has esn/noesn (only ESP proposals do)")
            }
        }
    }
}

impl std::error::Error for ProposalError {}

/// The IKE proposals `default` stands for: an AEAD one first (preferred: one pass over the
/// data, no separate MAC) and a classic one, with every algorithm and group this
/// implementation offers. strongSwan's `default` is every algorithm its loaded plugins offer,
/// classic first; the two lists differ, and the tests do not compare them.
pub const DEFAULT_IKE: &str =
    "aes128gcm16-aes256gcm16-chacha20poly1305-prfsha256-prfsha384-prfsha512-x25519-ecp256-ecp384-modp2048, \
     aes128-aes192-aes256-sha256-sha384-sha512-prfsha256-prfsha384-prfsha512-x25519-ecp256-ecp384-modp2048";

/// The ESP proposals `default` stands for (no PFS, no ESN, as strongSwan's default).
pub const DEFAULT_ESP: &str =
    "aes128gcm16-aes256gcm16-chacha20poly1305, aes128-aes192-aes256-sha256-sha384-sha512";

/// One keyword's transform.
#[derive(Clone, Copy)]
enum Keyword {
    Encr(Encr),
    Integ(IntegId),
    Prf(PrfId),
    Dh(DhId),
    Esn(EsnId),
}

fn aes(id: EncrId, bits: u16) -> Keyword {
    Keyword::Encr(Encr { id, key_bits: Some(bits) })
}

/// The keywords this implementation accepts.
fn keyword(word: &str) -> Option<Keyword> {
    use EncrId as E;
    Some(match word {
        "aes" | "aes128" => aes(E::AES_CBC, 128),
        "aes192" => aes(E::AES_CBC, 192),
        "aes256" => aes(E::AES_CBC, 256),
        "aes128gcm16" | "aes128gcm128" | "aes128gcm" => aes(E::AES_GCM_16, 128),
        "aes256gcm16" | "aes256gcm128" | "aes256gcm" => aes(E::AES_GCM_16, 256),
        "chacha20poly1305" => Keyword::Encr(Encr { id: E::CHACHA20_POLY1305, key_bits: None }),
        "sha256" | "sha2_256" => Keyword::Integ(IntegId::HMAC_SHA2_256_128),
        "sha384" | "sha2_384" => Keyword::Integ(IntegId::HMAC_SHA2_384_192),
        "sha512" | "sha2_512" => Keyword::Integ(IntegId::HMAC_SHA2_512_256),
        "prfsha256" => Keyword::Prf(PrfId::HMAC_SHA2_256),
        "prfsha384" => Keyword::Prf(PrfId::HMAC_SHA2_384),
        "prfsha512" => Keyword::Prf(PrfId::HMAC_SHA2_512),
        "x25519" | "curve25519" => Keyword::Dh(DhId::CURVE25519),
        "ecp256" => Keyword::Dh(DhId::ECP_256),
        "ecp384" => Keyword::Dh(DhId::ECP_384),
        "modp2048" => Keyword::Dh(DhId::MODP_2048),
        "esn" => Keyword::Esn(EsnId::YES),
        "noesn" => Keyword::Esn(EsnId::NO),
        _ => return None,
    })
}

/// Whether strongSwan knows a keyword this implementation refuses (ciphers, MACs, PRFs and
/// groups ocf does not implement or the issue leaves out). Only for the error's wording:
/// either way the keyword is refused.
fn strongswan_knows(word: &str) -> bool {
    const WORDS: &[&str] = &[
        "3des",
        "des",
        "null",
        "chacha20poly1305compat",
        "sha",
        "sha1",
        "md5",
        "md5_128",
        "sha1_160",
        "sha256_96",
        "aesxcbc",
        "aescmac",
        "camelliaxcbc",
        "prfsha1",
        "prfmd5",
        "prfaesxcbc",
        "prfcamelliaxcbc",
        "prfaescmac",
        "modpnull",
        "modp768",
        "modp1024",
        "modp1536",
        "modp3072",
        "modp4096",
        "modp6144",
        "modp8192",
        "modp1024s160",
        "modp2048s224",
        "modp2048s256",
        "ecp192",
        "ecp224",
        "ecp521",
        "ecp224bp",
        "ecp256bp",
        "ecp384bp",
        "ecp512bp",
        "curve448",
        "x448",
        "mlkem512",
        "mlkem768",
        "mlkem1024",
    ];
    const FAMILIES: &[&str] = &["camellia", "serpent", "twofish", "blowfish", "cast128"];
    if WORDS.contains(&word) || FAMILIES.iter().any(|f| word.starts_with(f)) {
        return true;
    }
    // aes[128|192|256][ctr|ccm…|gcm…|gmac]: the AES modes and ICV lengths of the table.
    let rest = word.strip_prefix("aes").unwrap_or("-");
    let rest = ["128", "192", "256"].iter().find_map(|k| rest.strip_prefix(k)).unwrap_or(rest);
    let icv = |s: &str| ["", "8", "12", "16", "64", "96", "128"].contains(&s);
    rest == "ctr"
        || rest == "gmac"
        || rest.strip_prefix("ccm").is_some_and(icv)
        || rest.strip_prefix("gcm").is_some_and(icv)
}

/// The PRF strongSwan derives from an integrity algorithm (`integ_prf_map` in proposal.c).
fn prf_of(integ: IntegId) -> Option<PrfId> {
    match integ {
        IntegId::HMAC_SHA2_256_128 => Some(PrfId::HMAC_SHA2_256),
        IntegId::HMAC_SHA2_384_192 => Some(PrfId::HMAC_SHA2_384),
        IntegId::HMAC_SHA2_512_256 => Some(PrfId::HMAC_SHA2_512),
        _ => None,
    }
}

fn push_unique<T: PartialEq>(v: &mut Vec<T>, t: T) {
    if !v.contains(&t) {
        v.push(t);
    }
}

/// Parses one proposal (`aes128-sha256-x25519`), not `default`.
fn parse_one(protocol: Protocol, text: &str) -> Result<Proposal, ProposalError> {
    let proposal = || text.to_string();
    let mut p = Proposal {
        protocol,
        encr: Vec::new(),
        integ: Vec::new(),
        prf: Vec::new(),
        dh: Vec::new(),
        esn: Vec::new(),
    };
    for word in text.split('-') {
        let word = word.trim();
        if word.is_empty() {
            return Err(ProposalError::Empty { proposal: proposal() });
        }
        if word == "default" {
            return Err(ProposalError::DefaultNotAlone { proposal: proposal() });
        }
        match keyword(word) {
            Some(Keyword::Encr(e)) => push_unique(&mut p.encr, e),
            Some(Keyword::Integ(i)) => push_unique(&mut p.integ, i),
            Some(Keyword::Prf(f)) => push_unique(&mut p.prf, f),
            Some(Keyword::Dh(d)) => push_unique(&mut p.dh, d),
            Some(Keyword::Esn(e)) => push_unique(&mut p.esn, e),
            None if strongswan_knows(word) => {
                return Err(ProposalError::Unsupported { keyword: word.to_string(), proposal: proposal() })
            }
            None => return Err(ProposalError::Unknown { keyword: word.to_string(), proposal: proposal() }),
        }
    }
    if p.encr.is_empty() {
        return Err(ProposalError::NoEncryption { proposal: proposal() });
    }
    let aead = p.encr.iter().filter(|e| e.is_aead()).count();
    if aead != 0 && aead != p.encr.len() {
        return Err(ProposalError::MixedAead { proposal: proposal() });
    }
    let aead = aead != 0;
    if aead && !p.integ.is_empty() {
        return Err(ProposalError::IntegrityWithAead { proposal: proposal() });
    }
    if !aead && p.integ.is_empty() {
        return Err(ProposalError::NoIntegrity { proposal: proposal() });
    }
    match protocol {
        Protocol::Ike => {
            if !p.esn.is_empty() {
                return Err(ProposalError::EsnInIke { proposal: proposal() });
            }
            if p.prf.is_empty() {
                if aead {
                    return Err(ProposalError::NoPrf { proposal: proposal() });
                }
                let derived: Vec<PrfId> = p.integ.iter().filter_map(|&i| prf_of(i)).collect();
                for f in derived {
                    push_unique(&mut p.prf, f);
                }
            }
            if p.dh.is_empty() {
                return Err(ProposalError::NoKeyExchange { proposal: proposal() });
            }
        }
        Protocol::Esp => {
            if !p.prf.is_empty() {
                return Err(ProposalError::PrfInEsp { proposal: proposal() });
            }
            if p.esn.is_empty() {
                p.esn.push(EsnId::NO);
            }
        }
    }
    Ok(p)
}

/// Parses a proposal list as swanctl.conf's `proposals` (for [`Protocol::Ike`]) or
/// `esp_proposals` (for [`Protocol::Esp`]) writes it. `default` stands for [`DEFAULT_IKE`] or
/// [`DEFAULT_ESP`] where it appears in the list.
pub fn parse_proposals(protocol: Protocol, text: &str) -> Result<Vec<Proposal>, ProposalError> {
    let mut out = Vec::new();
    for one in text.split(',') {
        let one = one.trim();
        if one.is_empty() {
            return Err(ProposalError::Empty { proposal: text.trim().to_string() });
        }
        if one == "default" {
            let def = match protocol {
                Protocol::Ike => DEFAULT_IKE,
                Protocol::Esp => DEFAULT_ESP,
            };
            for d in def.split(',') {
                out.push(parse_one(protocol, d.trim())?);
            }
        } else {
            out.push(parse_one(protocol, one)?);
        }
    }
    Ok(out)
}

/// strongSwan's name of an encryption transform with its key length (`AES_CBC_128`).
fn encr_name(e: Encr) -> String {
    let base = match e.id {
        EncrId::AES_CBC => "AES_CBC",
        EncrId::AES_GCM_16 => "AES_GCM_16",
        EncrId::CHACHA20_POLY1305 => "CHACHA20_POLY1305",
        other => return format!("{other}"),
    };
    match e.key_bits {
        Some(bits) => format!("{base}_{bits}"),
        None => base.to_string(),
    }
}

fn integ_name(i: IntegId) -> String {
    match i {
        IntegId::HMAC_SHA2_256_128 => "HMAC_SHA2_256_128".into(),
        IntegId::HMAC_SHA2_384_192 => "HMAC_SHA2_384_192".into(),
        IntegId::HMAC_SHA2_512_256 => "HMAC_SHA2_512_256".into(),
        other => format!("{other}"),
    }
}

fn dh_name(d: DhId) -> String {
    match d {
        DhId::CURVE25519 => "CURVE_25519".into(),
        other => format!("{other}"),
    }
}

fn esn_name(e: EsnId) -> String {
    match e {
        EsnId::YES => "EXT_SEQ".into(),
        EsnId::NO => "NO_EXT_SEQ".into(),
        other => format!("{other}"),
    }
}

impl fmt::Display for Proposal {
    /// strongSwan's `%P`: `IKE:AES_CBC_256/HMAC_SHA2_256_128/PRF_HMAC_SHA2_256/MODP_2048`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<String> = self
            .encr
            .iter()
            .map(|&e| encr_name(e))
            .chain(self.integ.iter().map(|&i| integ_name(i)))
            .chain(self.prf.iter().map(|p| p.to_string()))
            .chain(self.dh.iter().map(|&d| dh_name(d)))
            .chain(self.esn.iter().map(|&e| esn_name(e)))
            .collect();
        let proto = match self.protocol {
            Protocol::Ike => "IKE",
            Protocol::Esp => "ESP",
        };
        write!(f, "{proto}:{}", names.join("/"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn show(protocol: Protocol, text: &str) -> String {
        let ps = parse_proposals(protocol, text).unwrap_or_else(|e| panic!("{text}: {e}"));
        ps.iter().map(|p| p.to_string()).collect::<Vec<_>>().join(", ")
    }

    /// strongSwan strings → transforms, written as charon 5.9.8 logs them (`proposals = …`
    /// at `cfg 2` when swanctl loads the connection). Every row is also in iked's
    /// `tests/configs/proposals.conf`, which iked's `strongswan` test loads into a running
    /// charon and compares.
    #[test]
    fn table_matches_strongswan() {
        let ike = [
            ("aes128gcm16-prfsha256-x25519", "IKE:AES_GCM_16_128/PRF_HMAC_SHA2_256/CURVE_25519"),
            (
                "aes256-sha256-modp2048",
                "IKE:AES_CBC_256/HMAC_SHA2_256_128/PRF_HMAC_SHA2_256/MODP_2048",
            ),
            ("aes-sha384-ecp384", "IKE:AES_CBC_128/HMAC_SHA2_384_192/PRF_HMAC_SHA2_384/ECP_384"),
            (
                "aes192-sha2_512-prfsha256-curve25519",
                "IKE:AES_CBC_192/HMAC_SHA2_512_256/PRF_HMAC_SHA2_256/CURVE_25519",
            ),
            (
                "aes256gcm128-chacha20poly1305-prfsha512-ecp256",
                "IKE:AES_GCM_16_256/CHACHA20_POLY1305/PRF_HMAC_SHA2_512/ECP_256",
            ),
            ("aes128gcm-prfsha384-ecp384", "IKE:AES_GCM_16_128/PRF_HMAC_SHA2_384/ECP_384"),
            (
                "aes128-aes256-sha256-sha384-x25519-ecp256",
                "IKE:AES_CBC_128/AES_CBC_256/HMAC_SHA2_256_128/HMAC_SHA2_384_192/PRF_HMAC_SHA2_256/PRF_HMAC_SHA2_384/CURVE_25519/ECP_256",
            ),
        ];
        for (text, want) in ike {
            assert_eq!(show(Protocol::Ike, text), want, "{text}");
        }
        let esp = [
            ("aes128gcm16", "ESP:AES_GCM_16_128/NO_EXT_SEQ"),
            ("aes256gcm16-esn", "ESP:AES_GCM_16_256/EXT_SEQ"),
            ("chacha20poly1305-x25519-esn", "ESP:CHACHA20_POLY1305/CURVE_25519/EXT_SEQ"),
            ("aes128-sha256-noesn", "ESP:AES_CBC_128/HMAC_SHA2_256_128/NO_EXT_SEQ"),
            ("aes256-sha512-modp2048", "ESP:AES_CBC_256/HMAC_SHA2_512_256/MODP_2048/NO_EXT_SEQ"),
            ("aes128gcm16-esn-noesn", "ESP:AES_GCM_16_128/EXT_SEQ/NO_EXT_SEQ"),
        ];
        for (text, want) in esp {
            assert_eq!(show(Protocol::Esp, text), want, "{text}");
        }
        assert_eq!(
            show(Protocol::Esp, "aes128gcm16, chacha20poly1305-x25519-esn, aes128-sha256-noesn"),
            "ESP:AES_GCM_16_128/NO_EXT_SEQ, ESP:CHACHA20_POLY1305/CURVE_25519/EXT_SEQ, \
             ESP:AES_CBC_128/HMAC_SHA2_256_128/NO_EXT_SEQ"
        );
    }

    #[test]
    fn transforms_and_pfs() {
        let p = &parse_proposals(Protocol::Esp, "aes256gcm16-ecp256").unwrap()[0];
        assert_eq!(p.encr, vec![Encr { id: EncrId::AES_GCM_16, key_bits: Some(256) }]);
        assert!(p.is_aead() && p.pfs());
        assert_eq!(p.dh, vec![DhId::ECP_256]);
        let p = &parse_proposals(Protocol::Esp, "chacha20poly1305").unwrap()[0];
        assert_eq!(p.encr[0].key_bits, None);
        assert!(!p.pfs());
        assert_eq!(p.esn, vec![EsnId::NO]);
        let p = &parse_proposals(Protocol::Ike, "aes128-sha256-x25519").unwrap()[0];
        assert_eq!(p.prf, vec![PrfId::HMAC_SHA2_256], "PRF from the integrity algorithm");
        assert!(!p.pfs());
    }

    #[test]
    fn default_expands_in_place() {
        let ps = parse_proposals(Protocol::Ike, "aes256-sha256-modp2048, default").unwrap();
        assert_eq!(ps.len(), 3);
        assert_eq!(ps[1], parse_proposals(Protocol::Ike, DEFAULT_IKE).unwrap()[0]);
        let ps = parse_proposals(Protocol::Esp, "default").unwrap();
        assert_eq!(ps.len(), 2);
        assert!(ps.iter().all(|p| p.dh.is_empty() && p.esn == vec![EsnId::NO]));
    }

    #[test]
    fn errors_name_keyword_and_proposal() {
        let cases: &[(Protocol, &str, ProposalError)] = &[
            (
                Protocol::Ike,
                "aes128-sha1-modp2048",
                ProposalError::Unsupported {
                    keyword: "sha1".into(),
                    proposal: "aes128-sha1-modp2048".into(),
                },
            ),
            (
                Protocol::Ike,
                "aes128-sha265-x25519",
                ProposalError::Unknown { keyword: "sha265".into(), proposal: "aes128-sha265-x25519".into() },
            ),
            (
                Protocol::Esp,
                "aes128ccm16",
                ProposalError::Unsupported { keyword: "aes128ccm16".into(), proposal: "aes128ccm16".into() },
            ),
            (
                Protocol::Ike,
                "aes128-sha256-modp1024",
                ProposalError::Unsupported {
                    keyword: "modp1024".into(),
                    proposal: "aes128-sha256-modp1024".into(),
                },
            ),
            (
                Protocol::Esp,
                "aes128gcm17",
                ProposalError::Unknown { keyword: "aes128gcm17".into(), proposal: "aes128gcm17".into() },
            ),
            (
                Protocol::Esp,
                "aes192gcm16",
                ProposalError::Unsupported { keyword: "aes192gcm16".into(), proposal: "aes192gcm16".into() },
            ),
            (
                Protocol::Ike,
                "aes128gcm16-x25519",
                ProposalError::NoPrf { proposal: "aes128gcm16-x25519".into() },
            ),
            (
                Protocol::Ike,
                "aes128-sha256",
                ProposalError::NoKeyExchange { proposal: "aes128-sha256".into() },
            ),
            (Protocol::Esp, "aes128", ProposalError::NoIntegrity { proposal: "aes128".into() }),
            (Protocol::Esp, "sha256", ProposalError::NoEncryption { proposal: "sha256".into() }),
            (
                Protocol::Esp,
                "aes128gcm16-aes128-sha256",
                ProposalError::MixedAead { proposal: "aes128gcm16-aes128-sha256".into() },
            ),
            (
                Protocol::Esp,
                "aes128gcm16-sha256",
                ProposalError::IntegrityWithAead { proposal: "aes128gcm16-sha256".into() },
            ),
            (
                Protocol::Esp,
                "aes128gcm16-prfsha256",
                ProposalError::PrfInEsp { proposal: "aes128gcm16-prfsha256".into() },
            ),
            (
                Protocol::Ike,
                "aes128gcm16-prfsha256-x25519-esn",
                ProposalError::EsnInIke { proposal: "aes128gcm16-prfsha256-x25519-esn".into() },
            ),
            (Protocol::Esp, "aes128gcm16,", ProposalError::Empty { proposal: "aes128gcm16,".into() }),
            (Protocol::Esp, "aes128gcm16-", ProposalError::Empty { proposal: "aes128gcm16-".into() }),
            (Protocol::Esp, "", ProposalError::Empty { proposal: "".into() }),
            (
                Protocol::Esp,
                "aes128gcm16-default",
                ProposalError::DefaultNotAlone { proposal: "aes128gcm16-default".into() },
            ),
        ];
        for (protocol, text, want) in cases {
            assert_eq!(parse_proposals(*protocol, text).as_ref(), Err(want), "{text}");
        }
        let msg = parse_proposals(Protocol::Ike, "aes128-sha1-modp2048").unwrap_err().to_string();
        assert!(msg.contains("'sha1'") && msg.contains("'aes128-sha1-modp2048'"), "{msg}");
    }
}
