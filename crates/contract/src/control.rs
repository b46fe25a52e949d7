//! The emulator's control requests (one tagged enum) and their typed replies (docs/control.md).
//!
//! (Being filled in: control requests.)

/// The documents of this module (see [`crate::documents`]).
pub(crate) fn documents() -> Vec<crate::Document> {
    Vec::new()
}
