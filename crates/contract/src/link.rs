//! Link parameters as numbers (`rate_bps`, `delay_ns`, ...); strings with units accepted as input.
//!
//! (Being filled in: link parameters.)

/// The documents of this module (see [`crate::documents`]).
pub(crate) fn documents() -> Vec<crate::Document> {
    Vec::new()
}
