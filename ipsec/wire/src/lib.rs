//! # ipsec-wire — the packet formats Fast IPsec reads and writes
//!
//! (Being written; see the modules.)
