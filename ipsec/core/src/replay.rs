//! The anti-replay window (being written).
