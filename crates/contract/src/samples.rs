//! Transport sample files: a header line and typed rows (docs/samples.md).
//!
//! (Being filled in: sample rows.)

/// The documents of this module (see [`crate::documents`]).
pub(crate) fn documents() -> Vec<crate::Document> {
    Vec::new()
}
