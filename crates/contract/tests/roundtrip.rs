//! Every document type reads what its producer wrote and writes it back byte for byte: same
//! field names, values and order. The fixtures are real output of `protolab-net` on loopback
//! (`tests/fixtures/make.sh`); documents no fixture covers are built here.

use std::collections::BTreeMap;
use std::path::PathBuf;

use contract::bulk::BulkResult;
use contract::controllers::{CcRegistry, CcSpec};
use contract::events::{Listening, Ready, UnfitDocument};
use contract::load::{ClientConfig, LoadResult};
use contract::manifests::ManifestCheck;
use contract::modes::ModeRegistry;
use contract::rpm::RpmResult;
use contract::samples::{QuicSample, SampleHeader, StateSample, TcpSample};
use serde::de::DeserializeOwned;
use serde::Serialize;

fn fixture(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A pretty-printed result file (as `--out` writes it, with its newline) read as `T` and
/// written back.
fn round_trips_pretty<T: Serialize + DeserializeOwned>(name: &str) -> T {
    let text = fixture(name);
    let value: T = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
    let again = serde_json::to_string_pretty(&value).unwrap() + "\n";
    assert_eq!(again, text, "{name} does not round-trip");
    value
}

/// One compact NDJSON line read as `T` and written back.
fn round_trips_line<T: Serialize + DeserializeOwned>(name: &str, line: &str) -> T {
    let value: T = serde_json::from_str(line).unwrap_or_else(|e| panic!("{name}: {e}: {line}"));
    assert_eq!(serde_json::to_string(&value).unwrap(), line, "{name}: a row does not round-trip");
    value
}

#[test]
fn load_results() {
    let failed: LoadResult = round_trips_pretty("load-h1c.json");
    assert_eq!(failed.status, contract::load::LoadStatus::Failed);
    assert!(failed.objects.iter().any(|o| o.error.is_some()) && failed.connections.iter().any(|c| c.error.is_some()));
    let parallel: LoadResult = round_trips_pretty("load-h2-parallel.json");
    let ClientConfig::Engine(config) = &parallel.config else { panic!("an engine load") };
    assert_eq!(config.scheduler, contract::modes::Scheduler::LeastOutstanding);
    let mptcp: LoadResult = round_trips_pretty("load-h2-mptcp.json");
    assert!(mptcp.connections.iter().all(|c| c.transport == contract::modes::Transport::Mptcp && c.subflow_details.is_some()));
    let h3: LoadResult = round_trips_pretty("load-h3.json");
    let ClientConfig::Engine(config) = &h3.config else { panic!("an engine load") };
    assert!(config.warm && config.quic.time_threshold == Some(1.5));
    assert!(h3.connections.iter().all(|c| c.samples_file.is_some() && c.qlog_file.is_some()));
}

#[test]
fn bulk_results() {
    let tcp: BulkResult = round_trips_pretty("bulk-tcp.json");
    assert_eq!(tcp.config.pacing, Some(contract::bulk::Pacing::Server));
    assert!(!tcp.intervals.is_empty() && tcp.samples.is_some());
    let upload: BulkResult = round_trips_pretty("bulk-h3-upload.json");
    assert!(upload.server.is_some());
}

#[test]
fn rpm_result() {
    let r: RpmResult = round_trips_pretty("rpm-h2.json");
    assert_eq!(r.directions.keys().map(String::as_str).collect::<Vec<_>>(), ["download", "upload"]);
    let kinds: Vec<_> = r.directions["download"].probes.iter().map(|p| p.kind).collect();
    assert!(kinds.contains(&contract::rpm::ProbeKind::Foreign) && kinds.contains(&contract::rpm::ProbeKind::SelfProbe));
}

/// Reads a samples file: the header, then each row by its kind.
fn samples_file(name: &str) -> (SampleHeader, usize, usize) {
    let text = fixture(name);
    let mut lines = text.lines();
    let header: SampleHeader = round_trips_line(name, lines.next().expect("a header line"));
    let (mut samples, mut states) = (0, 0);
    for line in lines {
        let event: serde_json::Value = serde_json::from_str(line).unwrap();
        if event["event"] == "state" {
            round_trips_line::<StateSample>(name, line);
            states += 1;
        } else if header.transport == contract::modes::Transport::Quic {
            round_trips_line::<QuicSample>(name, line);
            samples += 1;
        } else {
            let row: TcpSample = round_trips_line(name, line);
            assert_eq!(row.subflow.is_some(), header.transport == contract::modes::Transport::Mptcp, "{name}: {line}");
            samples += 1;
        }
    }
    (header, samples, states)
}

#[test]
fn sample_files() {
    let (tcp, rows, _) = samples_file("samples-tcp.ndjson");
    assert_eq!((tcp.mptcp_fallback, tcp.quic_congestion.as_deref()), (Some(None), None));
    assert!(rows > 0);
    let (mptcp, rows, _) = samples_file("samples-mptcp.ndjson");
    assert_eq!(mptcp.mptcp_fallback, Some(Some(false)));
    assert!(rows > 0);
    let (quic, rows, states) = samples_file("samples-quic.ndjson");
    assert_eq!((quic.mptcp_fallback, quic.tcp_congestion), (None, None));
    assert!(rows > 0 && states > 0, "{rows} rows, {states} state changes");
}

#[test]
fn events() {
    let text = fixture("event-listening.json");
    let listening: Listening = round_trips_line("event-listening.json", text.trim_end());
    assert!(listening.mptcp);
    let unfit = Listening {
        real_page_unfit: vec![UnfitDocument {
            file: "page.json".into(),
            origin: "www.a.test".into(),
            path: "/".into(),
            size: 1200,
            referenced: 3,
            children: 9,
        }],
        ..listening
    };
    let line = serde_json::to_string(&unfit).unwrap();
    assert!(line.contains(r#""real_page_unfit":[{"file":"page.json","origin":"www.a.test","path":"/","size":1200,"referenced":3,"children":9}]}"#), "{line}");
    assert_eq!(serde_json::from_str::<Listening>(&line).unwrap(), unfit);
    // The emulator's line, as `emu run` printed it before it was typed.
    let line = r#"{"ready":true,"lab":"demo","pid":4242,"control":"/run/protolab/demo/control.sock","namespaces":{"client":"pl-demo-client","server":"pl-demo-server"},"start_unix_ns":1795669096322618517}"#;
    let ready: Ready = round_trips_line("ready", line);
    assert_eq!(ready.namespaces, BTreeMap::from([("client".into(), "pl-demo-client".into()), ("server".into(), "pl-demo-server".into())]));
}

#[test]
fn mode_registry() {
    let registry = contract::modes::registry();
    let line = serde_json::to_string(&registry).unwrap();
    assert_eq!(round_trips_line::<ModeRegistry>("mode-registry", &line), registry);
}

#[test]
fn manifest_check() {
    let text = fixture("manifest-check.json");
    let check: ManifestCheck = round_trips_line("manifest-check.json", text.trim_end());
    let refused: Vec<(&str, Option<&str>)> = check.manifests.iter().filter(|m| !m.ok).map(|m| (m.file.as_str(), m.field.as_deref())).collect();
    assert_eq!(refused, [("bad.json", Some("objects[1].size")), ("missing.json", Some("(file)"))]);
    assert_eq!(check.manifests[0].objects, Some(3));
}

#[test]
fn controller_registry() {
    let text = fixture("cc-list.json");
    let registry: CcRegistry = round_trips_line("cc-list.json", text.trim_end());
    assert!(registry.controllers.iter().any(|c| c.name == "cubic" && !c.params.is_empty()));
    // `cc check` lists each spec's parameters as an object; its keys come back sorted.
    let text = fixture("cc-check.json");
    let specs: Vec<CcSpec> = serde_json::from_str(&text).unwrap();
    assert_eq!(specs.iter().map(|s| s.base.as_str()).collect::<Vec<_>>(), ["cubic", "cubic", "fixed", "bbr"]);
    let again: serde_json::Value = serde_json::to_value(&specs).unwrap();
    assert_eq!(again, serde_json::from_str::<serde_json::Value>(&text).unwrap());
}
