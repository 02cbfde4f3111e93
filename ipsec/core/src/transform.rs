//! An SA's transform: ESP's ([`crate::esp`]), AH's ([`crate::ah`]) or IPComp's
//! ([`crate::ipcomp`]), chosen by the SA's protocol when it is installed. The packet path asks which it is once per packet: ESP's
//! code takes [`Transform::Esp`], AH's hook takes [`Transform::Ah`], and a packet of one
//! protocol whose SPI names an SA of the other is dropped as
//! [`crate::stats::Drop::WrongProtocol`].

use ocf::SessionParams;

use crate::control::{Proto, SaSpec};
use crate::esp::TransformError;

/// How an SA's packets are laid out and authenticated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transform {
    Esp(crate::esp::Transform),
    Ah(crate::ah::Transform),
    /// IPComp: no IV and no ICV; the SA's session compresses ([`crate::ipcomp_path`]).
    IpComp,
}

impl Transform {
    /// The transform and the ocf session parameters for an SA (ESP and ESP in UDP, AH, or
    /// IPComp's compression).
    pub fn new(spec: &SaSpec) -> Result<(Transform, SessionParams), TransformError> {
        Ok(match spec.proto {
            Proto::IpComp => (Transform::IpComp, crate::ipcomp::session_params()),
            Proto::Ah => {
                let (t, p) = crate::ah::Transform::new(spec)?;
                (Transform::Ah(t), p)
            }
            _ => {
                let (t, p) = crate::esp::Transform::new(spec)?;
                (Transform::Esp(t), p)
            }
        })
    }

    /// The ESP transform, if this is one.
    pub fn esp(&self) -> Option<&crate::esp::Transform> {
        match self {
            Transform::Esp(t) => Some(t),
            Transform::Ah(_) | Transform::IpComp => None,
        }
    }

    /// The AH transform, if this is one.
    pub fn ah(&self) -> Option<&crate::ah::Transform> {
        match self {
            Transform::Ah(t) => Some(t),
            Transform::Esp(_) | Transform::IpComp => None,
        }
    }
}
