//! The setkey(8) language (being written).
