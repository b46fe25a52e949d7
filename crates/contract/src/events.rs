//! The events the binaries print on stdout (`listening`, `ready`).
//!
//! (Being filled in: events.)

/// The documents of this module (see [`crate::documents`]).
pub(crate) fn documents() -> Vec<crate::Document> {
    Vec::new()
}
