//! The protocol modes of the page-load engine, as a registry looked up by name (`h2`, `h2-parallel:N`, ...).
//!
//! (Being filled in: modes registry.)

/// The documents of this module (see [`crate::documents`]).
pub(crate) fn documents() -> Vec<crate::Document> {
    Vec::new()
}
