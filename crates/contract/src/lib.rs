//! protolab's contract: every document that crosses the Rust↔Python boundary, defined once.
//!
//! The binaries produce these types (serde) and `protolab-net schema` writes one JSON Schema per
//! document into the repository's `schemas/` folder; the Python `protolab.results` package reads
//! the same documents and is checked against those schemas (tests/test_contract.py). A new
//! result field therefore touches three places: the type here, its producer, and the
//! regenerated schema (docs/architecture.md).
//!
//! No I/O and no async runtime here: plain data, its (de)serialization, and the one parser of
//! rates and durations ([`units`]).
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod bulk;
pub mod control;
pub mod controllers;
pub mod events;
pub mod link;
pub mod load;
pub mod manifests;
pub mod modes;
pub mod rpm;
pub mod samples;
pub mod units;

/// One document of the contract: the file name of its schema (`schemas/<name>.json`) and the
/// schema itself.
pub struct Document {
    /// File stem in `schemas/` (`load-result`).
    pub name: &'static str,
    /// Its JSON Schema (draft 2020-12).
    pub schema: schemars::Schema,
}

impl Document {
    /// The schema as written to `schemas/<name>.json`: pretty JSON with every object's keys
    /// sorted (the same text whichever serde_json features the build unifies) and a trailing
    /// newline.
    pub fn render(&self) -> String {
        // A JSON value has string keys only: writing it cannot fail.
        let mut text = serde_json::to_string_pretty(&sorted(self.schema.as_value())).unwrap_or_default();
        text.push('\n');
        text
    }
}

/// `value` with the keys of every object in sorted order.
fn sorted(value: &serde_json::Value) -> serde_json::Value {
    match value {
        serde_json::Value::Object(map) => {
            let mut entries: Vec<(&String, &serde_json::Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            serde_json::Value::Object(entries.into_iter().map(|(k, v)| (k.clone(), sorted(v))).collect())
        }
        serde_json::Value::Array(items) => serde_json::Value::Array(items.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

/// A document of type `T` named `name`.
pub fn document<T: schemars::JsonSchema>(name: &'static str) -> Document {
    Document { name, schema: schemars::schema_for!(T) }
}

/// Every document of the contract, in a stable order (`protolab-net schema` writes them).
pub fn documents() -> Vec<Document> {
    let mut all = Vec::new();
    for part in [
        modes::documents,
        load::documents,
        bulk::documents,
        rpm::documents,
        samples::documents,
        events::documents,
        link::documents,
        control::documents,
        controllers::documents,
        manifests::documents,
    ] {
        all.extend(part());
    }
    all.sort_by_key(|d: &Document| d.name);
    all
}
