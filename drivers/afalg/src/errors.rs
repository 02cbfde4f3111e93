//! Every way the kernel can refuse a request, mapped to an ocf error and counted under a
//! cause of its own ([`Cause`], one counter each in [`KernelErrors`]).
//!
//! ocf counts a driver's failures under `driver_failure`; the kernel's errno tells more
//! (a bad tag, an invalid request, no memory, a message larger than the socket takes), so
//! the driver keeps its own counter per cause, read with `AfalgDriver::kernel_errors`.
//! A bad tag (`EBADMSG`) is ocf's `AuthFailed`, which ocf counts under `auth_failed` too.
//!
//! A failure before the kernel wrote into the request's pages leaves the request as it came:
//! `DriverFailure`, which a routed session redoes on another driver. One after (a
//! [`Fault`] with `midway`: the receive had begun, or a later piece of a long message
//! failed) wipes the payload and is `DriverFailureMidway`, never redone.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

use nix::errno::Errno;
use ocf::Error;

/// Why a kernel operation failed. One variant, one counter, one message per cause.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(usize)]
pub enum Cause {
    /// `EBADMSG`: the tag did not verify.
    BadTag,
    /// `EINVAL`: the kernel found the request invalid (a length it does not take).
    Invalid,
    /// `ENOMEM`: the kernel could not allocate.
    NoMemory,
    /// `EAGAIN` on a send: the message does not fit the socket's buffer.
    TooLarge,
    /// `EAGAIN` on a receive: the kernel waited for more data than was sent (a driver bug
    /// if it ever counts).
    Incomplete,
    /// `ENOKEY`: the transform has no key.
    NoKey,
    /// `EBUSY`, `EINTR`: the kernel or its device was momentarily unable.
    Busy,
    /// The kernel read or wrote fewer bytes than the operation needs.
    Short,
    /// AF_ALG could not give an operation socket (`accept` failed).
    Accept,
    /// A session could not be set up: the kernel refused the key or the tag length.
    Setup,
    /// An ESN request whose AAD is shorter than `authencesn` needs (4 bytes).
    EsnAad,
    /// Any other errno.
    Other,
}

impl Cause {
    pub const COUNT: usize = Cause::Other as usize + 1;
    pub const ALL: [Cause; Cause::COUNT] = [
        Cause::BadTag,
        Cause::Invalid,
        Cause::NoMemory,
        Cause::TooLarge,
        Cause::Incomplete,
        Cause::NoKey,
        Cause::Busy,
        Cause::Short,
        Cause::Accept,
        Cause::Setup,
        Cause::EsnAad,
        Cause::Other,
    ];

    /// The cause of an errno from a send, receive or splice (`sending`: EAGAIN is then a
    /// full socket, else missing data).
    pub fn of(errno: Errno, sending: bool) -> Cause {
        match errno {
            Errno::EBADMSG => Cause::BadTag,
            Errno::EINVAL | Errno::EMSGSIZE => Cause::Invalid,
            Errno::ENOMEM | Errno::ENOBUFS => Cause::NoMemory,
            Errno::EAGAIN if sending => Cause::TooLarge,
            Errno::EAGAIN => Cause::Incomplete,
            Errno::ENOKEY => Cause::NoKey,
            Errno::EBUSY | Errno::EINTR => Cause::Busy,
            _ => Cause::Other,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Cause::BadTag => "bad_tag",
            Cause::Invalid => "invalid",
            Cause::NoMemory => "no_memory",
            Cause::TooLarge => "too_large",
            Cause::Incomplete => "incomplete",
            Cause::NoKey => "no_key",
            Cause::Busy => "busy",
            Cause::Short => "short_io",
            Cause::Accept => "accept",
            Cause::Setup => "setup",
            Cause::EsnAad => "esn_aad",
            Cause::Other => "other",
        }
    }

    /// The ocf error a request fails with; `midway`: the kernel had begun writing the
    /// request's buffer (see the module docs).
    pub fn error(self, midway: bool) -> Error {
        let why = match self {
            Cause::BadTag => return Error::AuthFailed,
            Cause::Invalid => "afalg: the kernel refused the request as invalid (EINVAL)",
            Cause::NoMemory => "afalg: the kernel is out of memory (ENOMEM)",
            Cause::TooLarge => "afalg: the message is larger than the kernel socket's buffer takes",
            Cause::Incomplete => "afalg: the kernel expected more data (EAGAIN on receive)",
            Cause::NoKey => "afalg: the kernel transform has no key (ENOKEY)",
            Cause::Busy => "afalg: the kernel was busy (EBUSY/EINTR)",
            Cause::Short => "afalg: the kernel returned fewer bytes than the operation needs",
            Cause::Accept => "afalg: no operation socket (accept failed)",
            Cause::Setup => "afalg: the kernel refused the session's key or tag length",
            Cause::EsnAad => "afalg: ESN needs at least 4 bytes of AAD (authencesn)",
            Cause::Other => "afalg: unexpected kernel error",
        };
        match midway {
            true => Error::DriverFailureMidway(why),
            false => Error::DriverFailure(why),
        }
    }
}

/// A request's failure: its cause, and whether the kernel had begun writing the request's
/// pages (the receive had started) when it came.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fault {
    pub cause: Cause,
    pub midway: bool,
}

impl From<Cause> for Fault {
    /// A failure before anything was written.
    fn from(cause: Cause) -> Fault {
        Fault { cause, midway: false }
    }
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One counter per [`Cause`].
#[derive(Default)]
pub struct KernelErrors([AtomicU64; Cause::COUNT]);

impl KernelErrors {
    /// Counts the fault's cause and returns its ocf error.
    pub fn record(&self, fault: impl Into<Fault>) -> Error {
        let Fault { cause, midway } = fault.into();
        self.0[cause as usize].fetch_add(1, Ordering::Relaxed);
        cause.error(midway)
    }

    pub fn get(&self, cause: Cause) -> u64 {
        self.0[cause as usize].load(Ordering::Relaxed)
    }

    /// The non-zero counters.
    pub fn nonzero(&self) -> Vec<(Cause, u64)> {
        Cause::ALL.iter().map(|c| (*c, self.get(*c))).filter(|(_, n)| *n > 0).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_errno_has_its_cause_and_error() {
        assert_eq!(Cause::of(Errno::EBADMSG, false).error(false), Error::AuthFailed);
        assert_eq!(Cause::of(Errno::EBADMSG, false).error(true), Error::AuthFailed);
        assert_eq!(Cause::of(Errno::EINVAL, true), Cause::Invalid);
        assert_eq!(Cause::of(Errno::ENOMEM, false), Cause::NoMemory);
        assert_eq!(Cause::of(Errno::EAGAIN, true), Cause::TooLarge);
        assert_eq!(Cause::of(Errno::EAGAIN, false), Cause::Incomplete);
        assert_eq!(Cause::of(Errno::ENOKEY, false), Cause::NoKey);
        assert_eq!(Cause::of(Errno::EIO, false), Cause::Other);
        for c in Cause::ALL {
            match (c.error(false), c.error(true)) {
                (Error::AuthFailed, Error::AuthFailed) => assert_eq!(c, Cause::BadTag),
                (Error::DriverFailure(why), Error::DriverFailureMidway(why2)) => {
                    assert!(why.starts_with("afalg: "), "{why}");
                    assert_eq!(why, why2);
                }
                e => panic!("{c}: {e:?}"),
            }
        }
    }

    #[test]
    fn causes_are_dense_named_uniquely_and_counted_apart() {
        let mut names: Vec<_> = Cause::ALL.iter().map(|c| c.name()).collect();
        for (i, c) in Cause::ALL.iter().enumerate() {
            assert_eq!(*c as usize, i);
        }
        names.sort();
        names.dedup();
        assert_eq!(names.len(), Cause::COUNT);
        let k = KernelErrors::default();
        assert_eq!(k.record(Cause::Invalid), Cause::Invalid.error(false));
        k.record(Cause::Invalid);
        k.record(Cause::BadTag);
        assert_eq!(k.nonzero(), vec![(Cause::BadTag, 1), (Cause::Invalid, 2)]);
    }
}
