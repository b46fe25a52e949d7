//! The committed `schemas/` folder is what `protolab-net schema` writes today: one file per
//! document, nothing stale, nothing missing, nothing left over.

use std::path::PathBuf;

#[test]
fn committed_schemas_are_current() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../schemas");
    let documents = contract::documents();
    let mut stale = Vec::new();
    for document in &documents {
        let path = dir.join(format!("{}.json", document.name));
        if std::fs::read_to_string(&path).ok().as_deref() != Some(document.render().as_str()) {
            stale.push(format!("{}.json", document.name));
        }
    }
    let leftover: Vec<String> = std::fs::read_dir(&dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter(|name| name.ends_with(".json") && !documents.iter().any(|d| format!("{}.json", d.name) == *name))
                .collect()
        })
        .unwrap_or_default();
    assert!(
        stale.is_empty() && leftover.is_empty(),
        "schemas/ is stale: {stale:?} differ or are missing, {leftover:?} are no document's; \
         run `protolab-net schema` (cargo run -p protolab-cli -- schema) and commit schemas/"
    );
}

#[test]
fn document_names_are_unique_and_file_safe() {
    let documents = contract::documents();
    for (i, d) in documents.iter().enumerate() {
        assert!(!d.name.is_empty() && d.name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'), "{}", d.name);
        assert!(documents[..i].iter().all(|other| other.name != d.name), "{} twice", d.name);
        assert!(d.render().ends_with("}\n"));
    }
    let names: Vec<&str> = documents.iter().map(|d| d.name).collect();
    for expected in [
        "bulk-result",
        "cc-check",
        "cc-registry",
        "event-listening",
        "event-ready",
        "load-result",
        "manifest-check",
        "mode-registry",
        "quic-sample",
        "rpm-result",
        "sample-header",
        "state-sample",
        "tcp-sample",
    ] {
        assert!(names.contains(&expected), "{expected} missing from {names:?}");
    }
}
