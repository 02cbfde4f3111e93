//! Durations as swanctl.conf writes them (`1h`, `30m`, `3600s`, `3600`, `1d`) and the rules
//! that turn the lifetime settings of an IKE SA and of a CHILD_SA into times.
//!
//! The defaults and derived values are strongSwan's (swanctl.conf(5); charon 5.9.8 logs the
//! same numbers for a connection loaded without them):
//!
//! ```text
//! IKE SA     rekey_time 4h   over_time 10% of rekey_time   rand_time = over_time
//! CHILD_SA   rekey_time 1h   life_time 110% of rekey_time  rand_time = life_time - rekey_time
//! ```
//!
//! A rekey starts at `rekey_time` minus a random part of `rand_time` (the jitter that keeps
//! both ends from rekeying at once); an IKE SA is closed `over_time` after its rekey time if
//! the rekey has not happened, a CHILD_SA at `life_time`. Unlike strongSwan, a rekey time of 0
//! (never rekey) is refused: an SA that is never rekeyed eventually reuses its keys' limits,
//! and ipsecd's hard expiry would then drop traffic with no replacement.

use std::fmt;
use std::time::Duration;

/// What is wrong with a duration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DurationError {
    /// Not digits followed by at most one of `s`, `m`, `h`, `d`.
    Bad(String),
    /// More than 2^32 seconds (136 years).
    TooLong(String),
}

impl fmt::Display for DurationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DurationError::Bad(s) => write!(f, "'{s}' is not a duration (a number with s, m, h or d)"),
            DurationError::TooLong(s) => write!(f, "duration '{s}' is too long"),
        }
    }
}

impl std::error::Error for DurationError {}

/// Reads a duration: a decimal number of seconds, or of minutes, hours or days with `m`, `h`
/// or `d` (`s` for seconds is optional).
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    let s = text.trim();
    let bad = || DurationError::Bad(s.to_string());
    let (digits, unit) = match s.as_bytes().last() {
        Some(b's') => (&s[..s.len() - 1], 1u64),
        Some(b'm') => (&s[..s.len() - 1], 60),
        Some(b'h') => (&s[..s.len() - 1], 3600),
        Some(b'd') => (&s[..s.len() - 1], 86400),
        Some(_) => (s, 1),
        None => return Err(bad()),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let n: u64 = digits.parse().map_err(|_| DurationError::TooLong(s.to_string()))?;
    match n.checked_mul(unit) {
        Some(secs) if secs <= u32::MAX as u64 => Ok(Duration::from_secs(secs)),
        _ => Err(DurationError::TooLong(s.to_string())),
    }
}

/// What is wrong with a set of lifetimes; `field` is the setting to change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LifetimeError {
    /// `rekey_time = 0`.
    NoRekey,
    /// A CHILD_SA's `life_time` not after its `rekey_time`.
    LifeNotAfterRekey,
    /// `rand_time` reaching past the time left between rekey and expiry.
    RandTooLong,
}

impl LifetimeError {
    /// The setting the error is about.
    pub fn field(&self) -> &'static str {
        match self {
            LifetimeError::NoRekey => "rekey_time",
            LifetimeError::LifeNotAfterRekey => "life_time",
            LifetimeError::RandTooLong => "rand_time",
        }
    }
}

impl fmt::Display for LifetimeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LifetimeError::NoRekey => write!(f, "rekey_time 0 (no rekeying) is not supported"),
            LifetimeError::LifeNotAfterRekey => write!(f, "life_time must be longer than rekey_time"),
            LifetimeError::RandTooLong => {
                write!(f, "rand_time must not exceed the time between rekeying and expiry")
            }
        }
    }
}

impl std::error::Error for LifetimeError {}

/// An IKE SA's times.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct IkeLifetimes {
    pub rekey_time: Duration,
    pub over_time: Duration,
    pub rand_time: Duration,
}

impl IkeLifetimes {
    /// strongSwan's IKE default rekey time, 4 hours.
    pub const DEFAULT_REKEY: Duration = Duration::from_secs(4 * 3600);

    /// The times from the settings given (`None`: not in the file), defaults applied.
    pub fn resolve(
        rekey: Option<Duration>,
        over: Option<Duration>,
        rand: Option<Duration>,
    ) -> Result<IkeLifetimes, LifetimeError> {
        let rekey_time = rekey.unwrap_or(Self::DEFAULT_REKEY);
        if rekey_time.is_zero() {
            return Err(LifetimeError::NoRekey);
        }
        let over_time = over.unwrap_or(rekey_time / 10);
        let rand_time = rand.unwrap_or(over_time);
        if rand_time > rekey_time {
            return Err(LifetimeError::RandTooLong);
        }
        Ok(IkeLifetimes { rekey_time, over_time, rand_time })
    }
}

impl Default for IkeLifetimes {
    fn default() -> IkeLifetimes {
        let rekey_time = Self::DEFAULT_REKEY;
        IkeLifetimes { rekey_time, over_time: rekey_time / 10, rand_time: rekey_time / 10 }
    }
}

/// A CHILD_SA's times.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ChildLifetimes {
    pub rekey_time: Duration,
    pub life_time: Duration,
    pub rand_time: Duration,
}

impl ChildLifetimes {
    /// strongSwan's CHILD_SA default rekey time, 1 hour.
    pub const DEFAULT_REKEY: Duration = Duration::from_secs(3600);

    /// The times from the settings given (`None`: not in the file), defaults applied.
    pub fn resolve(
        rekey: Option<Duration>,
        life: Option<Duration>,
        rand: Option<Duration>,
    ) -> Result<ChildLifetimes, LifetimeError> {
        let rekey_time = rekey.unwrap_or(Self::DEFAULT_REKEY);
        if rekey_time.is_zero() {
            return Err(LifetimeError::NoRekey);
        }
        let life_time = life.unwrap_or(rekey_time + rekey_time / 10);
        if life_time <= rekey_time {
            return Err(LifetimeError::LifeNotAfterRekey);
        }
        let rand_time = rand.unwrap_or(life_time - rekey_time);
        if rand_time > life_time - rekey_time {
            return Err(LifetimeError::RandTooLong);
        }
        Ok(ChildLifetimes { rekey_time, life_time, rand_time })
    }
}

impl Default for ChildLifetimes {
    fn default() -> ChildLifetimes {
        let rekey_time = Self::DEFAULT_REKEY;
        ChildLifetimes { rekey_time, life_time: rekey_time + rekey_time / 10, rand_time: rekey_time / 10 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("1h"), Ok(secs(3600)));
        assert_eq!(parse_duration("30m"), Ok(secs(1800)));
        assert_eq!(parse_duration("3600s"), Ok(secs(3600)));
        assert_eq!(parse_duration("3600"), Ok(secs(3600)));
        assert_eq!(parse_duration("2d"), Ok(secs(172800)));
        assert_eq!(parse_duration("0"), Ok(secs(0)));
        for bad in ["", "h", "1.5h", "-1", "1 h", "1w", "0x10", "+5"] {
            assert_eq!(parse_duration(bad), Err(DurationError::Bad(bad.trim().into())), "{bad}");
        }
        assert_eq!(parse_duration("99999999999d"), Err(DurationError::TooLong("99999999999d".into())));
        assert_eq!(
            parse_duration("99999999999999999999999"),
            Err(DurationError::TooLong("99999999999999999999999".into()))
        );
    }

    /// The numbers charon 5.9.8 logs for a connection without lifetime settings.
    #[test]
    fn strongswan_defaults() {
        assert_eq!(IkeLifetimes::resolve(None, None, None), Ok(IkeLifetimes::default()));
        let ike = IkeLifetimes::default();
        assert_eq!((ike.rekey_time, ike.over_time, ike.rand_time), (secs(14400), secs(1440), secs(1440)));
        assert_eq!(ChildLifetimes::resolve(None, None, None), Ok(ChildLifetimes::default()));
        let c = ChildLifetimes::default();
        assert_eq!((c.rekey_time, c.life_time, c.rand_time), (secs(3600), secs(3960), secs(360)));
        let c = ChildLifetimes::resolve(Some(secs(600)), None, None).unwrap();
        assert_eq!((c.life_time, c.rand_time), (secs(660), secs(60)));
        let ike = IkeLifetimes::resolve(Some(secs(1800)), None, Some(secs(10))).unwrap();
        assert_eq!((ike.over_time, ike.rand_time), (secs(180), secs(10)));
    }

    #[test]
    fn refused() {
        assert_eq!(ChildLifetimes::resolve(Some(secs(0)), None, None), Err(LifetimeError::NoRekey));
        assert_eq!(IkeLifetimes::resolve(Some(secs(0)), None, None), Err(LifetimeError::NoRekey));
        assert_eq!(
            ChildLifetimes::resolve(Some(secs(3600)), Some(secs(3600)), None),
            Err(LifetimeError::LifeNotAfterRekey)
        );
        assert_eq!(
            ChildLifetimes::resolve(Some(secs(3600)), Some(secs(4000)), Some(secs(401))),
            Err(LifetimeError::RandTooLong)
        );
        assert_eq!(LifetimeError::RandTooLong.field(), "rand_time");
    }
}
