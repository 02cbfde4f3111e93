//! Helpers shared by ipsec-core's integration tests (`mod common;` in each test file).

// Each test binary compiles this module for itself and uses only part of it.
#![allow(dead_code)]

pub mod gateway;
pub mod packets;
pub mod scapy;
