//! The QUIC congestion controllers' registry as `protolab-net cc list --json` prints it, and a
//! checked controller spec as `protolab-net cc check --json` prints it (docs/congestion.md):
//! Python asks the binary instead of copying the registry.
//!
//! The registry itself lives in `crates/cc` (it builds the controllers); these are the
//! documents it is listed as.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `schema` of the controller registry listing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub enum CcRegistrySchema {
    /// The only value.
    #[default]
    #[serde(rename = "protolab.cc-registry")]
    CcRegistry,
}

/// Version of [`CcRegistry`].
pub const REGISTRY_SCHEMA_VERSION: u32 = 1;

/// `protolab-net cc list --json`: every controller and its parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CcRegistry {
    /// `protolab.cc-registry`.
    pub schema: CcRegistrySchema,
    /// Version of this listing.
    pub schema_version: u32,
    /// Every controller, in the registry's order.
    pub controllers: Vec<CcEntry>,
}

/// One controller of the registry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CcEntry {
    /// Its name (`cubic`, `gquic39`).
    pub name: String,
    /// What it is.
    pub doc: String,
    /// A profile: the spec it stands for (`cubic:n=2,...`); null for a controller of its own.
    pub profile: Option<String>,
    /// Its parameters (a profile has none of its own: its base's are accepted).
    pub params: Vec<CcParam>,
}

/// One parameter of a controller.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CcParam {
    /// Its key (`c`, `beta`, `rate`).
    pub key: String,
    /// Its default as written; null when the parameter is required.
    pub default: Option<String>,
    /// What values it accepts (`a number in 0.1..2`).
    pub accepts: String,
    /// What it is.
    pub doc: String,
}

/// One checked `NAME[:key=value,...]` spec (`protolab-net cc check --json` prints a list of
/// them, one per spec given).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CcSpec {
    /// The spec as given.
    pub given: String,
    /// The name given (a profile's own name, e.g. `gquic39`).
    pub name: String,
    /// The controller that implements it (a profile's base, e.g. `cubic`).
    pub base: String,
    /// The spec with every parameter's effective value.
    pub canonical: String,
    /// Every parameter's effective value, as written.
    pub params: BTreeMap<String, String>,
}

/// The documents of this module (see [`crate::documents`]).
pub(crate) fn documents() -> Vec<crate::Document> {
    vec![crate::document::<CcRegistry>("cc-registry"), crate::document::<Vec<CcSpec>>("cc-check")]
}
