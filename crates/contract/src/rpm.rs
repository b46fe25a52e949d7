//! The responsiveness result document (`protolab-net rpm`, docs/rpm.md).
//!
//! (Being filled in: rpm result.)

/// The documents of this module (see [`crate::documents`]).
pub(crate) fn documents() -> Vec<crate::Document> {
    Vec::new()
}
