//! The bulk-transfer result document (`protolab-net bulk`, docs/bulk.md).
//!
//! (Being filled in: bulk result.)

/// The documents of this module (see [`crate::documents`]).
pub(crate) fn documents() -> Vec<crate::Document> {
    Vec::new()
}
