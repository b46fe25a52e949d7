//! The page-load result document (`protolab-net load`, docs/load.md).
//!
//! (Being filled in: load result.)

/// The documents of this module (see [`crate::documents`]).
pub(crate) fn documents() -> Vec<crate::Document> {
    Vec::new()
}
