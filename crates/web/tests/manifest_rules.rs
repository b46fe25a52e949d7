//! The shared table of bad manifests (tests/fixtures/bad_manifests.json): every case is refused,
//! naming the file and the case's field. tests/test_manifest_rules.py runs the same table through
//! Python's API (which asks `protolab-net manifest check`), so both sides refuse the same inputs.

use serde_json::Value;
use web::Manifest;

fn table() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/bad_manifests.json");
    let text = std::fs::read_to_string(path).expect("the shared table is in the repository");
    serde_json::from_str(&text).expect("the shared table is JSON")
}

#[test]
fn the_valid_page_is_accepted() {
    let table = table();
    let manifest = Manifest::parse(&table["valid"].to_string(), "page.json").expect("the table's valid page");
    assert_eq!(manifest.objects.len(), 4);
}

#[test]
fn every_bad_manifest_is_refused_naming_its_field() {
    let table = table();
    let cases = table["cases"].as_array().expect("cases");
    assert!(cases.len() >= 60, "{} cases", cases.len());
    let mut wrong = Vec::new();
    for case in cases {
        let name = case["name"].as_str().expect("name");
        let field = case["field"].as_str().expect("field");
        let text = match case.get("text") {
            Some(text) => text.as_str().expect("text").to_string(),
            None => case["manifest"].to_string(),
        };
        match Manifest::parse(&text, "page.json") {
            Ok(_) => wrong.push(format!("{name}: accepted")),
            Err(e) => {
                let shown = e.to_string();
                if e.field != field || e.file != "page.json" || !shown.starts_with(&format!("page.json: {field}: ")) {
                    wrong.push(format!("{name}: expected field {field}, got {shown}"));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
