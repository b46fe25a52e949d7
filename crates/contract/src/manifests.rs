//! The answer of `protolab-net manifest check --json` (docs/manifest.md): per manifest, what it
//! holds when every rule holds, or the field it is refused for. The rules live in `crates/web`
//! (`web::manifest`); Python asks the binary instead of keeping a copy of them.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `schema` of the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub enum ManifestCheckSchema {
    /// The only value.
    #[default]
    #[serde(rename = "protolab.manifest-check")]
    ManifestCheck,
}

/// Version of [`ManifestCheck`].
pub const CHECK_SCHEMA_VERSION: u32 = 1;

/// `protolab-net manifest check --json FILE...`: one entry per file, in the order given.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ManifestCheck {
    /// `protolab.manifest-check`.
    pub schema: ManifestCheckSchema,
    /// Version of this answer.
    pub schema_version: u32,
    /// Every manifest checked.
    pub manifests: Vec<CheckedManifest>,
}

/// One manifest's check: accepted (`ok`, with what it holds) or refused (the field and why).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckedManifest {
    /// The file as given (`-`: the manifest read from stdin).
    pub file: String,
    /// Whether every rule holds (and every recorded body is there with its size).
    pub ok: bool,
    /// Accepted: the page's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Accepted: number of origins.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origins: Option<usize>,
    /// Accepted: number of objects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub objects: Option<usize>,
    /// Accepted: total size of the objects, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// Refused: the field, as a path (`objects[3].parent`; `(document)` for text that is not a
    /// JSON manifest, `(file)` for a file that cannot be read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// Refused: why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// The documents of this module (see [`crate::documents`]).
pub(crate) fn documents() -> Vec<crate::Document> {
    vec![crate::document::<ManifestCheck>("manifest-check")]
}
