use std::path::Path;

use contract::control::Reply;
use netmodel::{Nanos, Rate, MS};
use serde_json::{json, Value};

use super::*;
use crate::dataplane::DataPlane;
use crate::testkit::{self, Scratch};

/// The packet loop in the test's own thread, at a fixed time.
struct Direct {
    plane: DataPlane,
    now: Nanos,
    calls: usize,
}

impl PacketLoop for Direct {
    fn call(&mut self, command: Command) -> Result<Outcome, String> {
        self.calls += 1;
        Ok(self.plane.apply(self.now, command))
    }
}

fn control_in(base_dir: &Path) -> ControlPlane<Direct> {
    let topology = testkit::topology(base_dir);
    // The control plane learns names and ids from a model like the one the loop owns.
    let names = testkit::network(&topology);
    let direct = Direct { plane: DataPlane::new(testkit::network(&topology), 0), now: MS, calls: 0 };
    ControlPlane::new(topology, &names, Clock::start(), 100_000, Arc::new(AtomicI32::new(10)), direct)
}

fn control() -> ControlPlane<Direct> {
    control_in(Path::new("."))
}

fn ask<L: PacketLoop>(control: &mut ControlPlane<L>, request: Value) -> Value {
    serde_json::to_value(control.handle_line(&request.to_string()).finish()).unwrap()
}

fn refusal<L: PacketLoop>(control: &mut ControlPlane<L>, request: Value) -> String {
    let reply = ask(control, request);
    assert_eq!(reply["ok"], false, "{reply}");
    reply["error"].as_str().unwrap().to_string()
}

fn model_config(control: &ControlPlane<Direct>, link: &str) -> netmodel::LinkConfig {
    let net = control.packet_loop().plane.network();
    net.link(net.link_id(link).unwrap()).unwrap().config().clone()
}

#[test]
fn set_link_patches_the_current_parameters_and_reports_them_in_numbers() {
    let mut control = control();
    let reply = ask(&mut control, json!({"cmd": "set_link", "link": ["client.up", "client.down"],
                                          "params": {"rate": "7mbit", "loss": {"kind": "bernoulli", "p": 0.1}}, "seed": 3}));
    assert_eq!(reply["ok"], true, "{reply}");
    assert_eq!(reply["link"], json!(["client.up", "client.down"]));
    let up = &reply["params"]["client.up"];
    assert_eq!((up["rate_bps"].as_u64(), up["delay_ns"].as_u64()), (Some(7_000_000), Some(5_000_000)), "the delay is kept");
    assert_eq!(up["loss"], json!({"kind": "bernoulli", "p": 0.1}));
    assert_eq!(reply["params"]["client.down"]["delay_ns"], 0);
    let config = model_config(&control, "client.up");
    assert_eq!((config.rate, config.delay), (Rate::BitsPerSecond(7_000_000), 5 * MS));
    assert_eq!(control.topology().link_params("client.up").unwrap().rate_bps, Some(7_000_000));
    let reply = ask(&mut control, json!({"cmd": "set_link", "link": "client.up", "params": {"loss": null, "delay_ns": 0}}));
    assert_eq!((reply["params"]["client.up"]["loss"].clone(), reply["params"]["client.up"]["rate_bps"].clone()), (Value::Null, json!(7_000_000)));
    assert_eq!(model_config(&control, "client.up").loss, None);
}

#[test]
fn a_refused_set_link_changes_nothing_anywhere() {
    let mut control = control();
    let before = (control.topology().clone(), model_config(&control, "client.up"));
    let e = refusal(&mut control, json!({"cmd": "set_link", "link": ["client.up", "nosuch.up"], "params": {"rate_bps": 1000}}));
    assert_eq!(e, "link: no link named \"nosuch.up\"");
    let e = refusal(&mut control, json!({"cmd": "set_link", "link": ["client.up", "p0.forward"], "params": {"loss": {"kind": "bernoulli", "p": 1.5}}}));
    assert!(e.starts_with("params.loss.p: probability 1.5"), "{e}");
    let e = refusal(&mut control, json!({"cmd": "set_link", "link": "client.up", "params": {"queue": {"kind": "droptail", "bytes": 100}}}));
    assert!(e.starts_with("params.queue.bytes:"), "{e}");
    let e = refusal(&mut control, json!({"cmd": "set_link", "link": "client.up", "params": {"rate": "-5mbit"}}));
    assert!(e.starts_with("params.rate: invalid rate \"-5mbit\""), "{e}");
    assert_eq!(refusal(&mut control, json!({"cmd": "set_link", "link": [], "params": {}})), "link: give a link name or a list of names");
    assert_eq!((control.topology().clone(), model_config(&control, "client.up")), before);
    assert_eq!(control.packet_loop().calls, 0, "nothing reached the packet loop");
}

#[test]
fn trace_files_are_read_on_the_control_side() {
    let scratch = Scratch::new("control-trace");
    std::fs::write(scratch.0.join("cell.trace"), "1\n2\n2\n5\n").unwrap();
    let mut control = control_in(&scratch.0);
    let reply = ask(&mut control, json!({"cmd": "set_link", "link": "p0.forward", "params": {"trace": "cell.trace"}}));
    assert_eq!(reply["ok"], true, "{reply}");
    assert_eq!((reply["params"]["p0.forward"]["trace"].clone(), reply["params"]["p0.forward"]["rate_bps"].clone()), (json!("cell.trace"), Value::Null));
    std::fs::remove_file(scratch.0.join("cell.trace")).unwrap();
    assert!(matches!(model_config(&control, "p0.forward").rate, Rate::Trace(_)), "the loop holds the trace, not its path");
    let e = refusal(&mut control, json!({"cmd": "set_link", "link": "p0.reverse", "params": {"trace": "cell.trace"}}));
    assert!(e.starts_with("params.trace: cannot read"), "{e}");
    assert_eq!(model_config(&control, "p0.reverse").rate, Rate::Unlimited);
    let reply = ask(&mut control, json!({"cmd": "set_link", "link": "p0.forward", "params": {"rate": "2mbit"}}));
    assert_eq!(reply["params"]["p0.forward"]["trace"], Value::Null, "a rate replaces the trace");
    assert_eq!(model_config(&control, "p0.forward").rate, Rate::BitsPerSecond(2_000_000));
}

#[test]
fn capture_files_are_opened_and_refused_on_the_control_side() {
    let scratch = Scratch::new("control-pcap");
    let mut control = control();
    let path = scratch.0.join("client.pcap");
    let e = refusal(&mut control, json!({"cmd": "pcap_start", "host": "client", "path": "/nonexistent/dir/c.pcap"}));
    assert!(e.starts_with("path: cannot create /nonexistent/dir/c.pcap"), "{e}");
    assert!(refusal(&mut control, json!({"cmd": "pcap_start", "host": "nobody", "path": path})).starts_with("host: no host named"));
    assert!(refusal(&mut control, json!({"cmd": "pcap_stop", "host": "client"})).contains("no capture is running"));
    assert_eq!(control.packet_loop().calls, 0);
    let started = ask(&mut control, json!({"cmd": "pcap_start", "host": "client", "path": path}));
    assert_eq!(started, json!({"ok": true, "path": path}));
    assert!(path.exists(), "created before the loop got the writer");
    let e = refusal(&mut control, json!({"cmd": "pcap_start", "host": "client", "path": scratch.0.join("again.pcap")}));
    assert_eq!(e, "host: a capture is already running on this host");
    assert!(!scratch.0.join("again.pcap").exists(), "a refused capture creates no file");
    let stopped = ask(&mut control, json!({"cmd": "pcap_stop", "host": "client"}));
    assert_eq!(stopped, json!({"ok": true, "capture": {"written": 0, "dropped": 0}}));
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 24, "a pcap header, written by then");
    assert!(refusal(&mut control, json!({"cmd": "pcap_stop", "host": "client"})).contains("no capture is running"));
}

#[test]
fn the_event_log_opens_and_closes_once() {
    let scratch = Scratch::new("control-events");
    let mut control = control();
    let path = scratch.0.join("ev.ndjson");
    assert_eq!(refusal(&mut control, json!({"cmd": "events_stop"})), "the event log is not running");
    assert_eq!(ask(&mut control, json!({"cmd": "events_start", "path": path}))["ok"], true);
    assert_eq!(refusal(&mut control, json!({"cmd": "events_start", "path": path})), "the event log is already running");
    let stopped = ask(&mut control, json!({"cmd": "events_stop"}));
    assert_eq!(stopped, json!({"ok": true, "log": {"written": 0, "dropped": 0}}));
    let header: Value = serde_json::from_str(std::fs::read_to_string(&path).unwrap().lines().next().unwrap()).unwrap();
    assert_eq!((header["schema"].clone(), header["lab"].clone()), (json!("protolab.events"), json!("t1")));
}

#[test]
fn routing_is_checked_then_kept_as_the_current_one() {
    let mut control = control();
    let e = refusal(&mut control, json!({"cmd": "set_routing", "pins": [{"left": "server", "right": "client", "path": "p0"}]}));
    assert!(e.starts_with("pins[0].left: host \"server\" is not on the left side"), "{e}");
    assert!(control.topology().routing.pins.is_empty());
    let pins = json!([{"left": "client", "right": "server", "path": "p1"}]);
    assert_eq!(ask(&mut control, json!({"cmd": "set_routing", "mode": "round-robin", "pins": pins})), json!({"ok": true}));
    assert_eq!(ask(&mut control, json!({"cmd": "set_routing", "mode": "ecmp-hash"}))["ok"], true);
    let routing = &control.topology().routing;
    assert_eq!((routing.mode, routing.pins.len()), (contract::control::RoutingMode::EcmpHash, 1), "omitted pins are kept");
    let info = ask(&mut control, json!({"cmd": "info"}));
    assert_eq!(info["topology"]["routing"]["pins"], pins);
}

#[test]
fn info_counters_and_the_delay_compensation() {
    let mut control = control();
    let e = refusal(&mut control, json!({"cmd": "set_delay_compensation", "ns": 20_000_000}));
    assert!(e.starts_with("ns: 20000000 is more than 10 ms"), "{e}");
    let set = ask(&mut control, json!({"cmd": "set_delay_compensation", "ns": 90_000}));
    assert_eq!(set, json!({"ok": true, "delay_compensation_ns": 90_000}));
    assert_eq!(control.packet_loop().plane.network().delay_compensation(), 90_000);
    let info = ask(&mut control, json!({"cmd": "info"}));
    assert_eq!((info["lab"].clone(), info["rt_priority"].clone(), info["spin_ns"].clone()), (json!("t1"), json!(10), json!(100_000)));
    assert_eq!(info["delay_compensation_ns"], 90_000);
    assert_eq!(info["topology"]["hosts"][0]["access"]["up"]["delay_ns"], 5_000_000, "the topology in numbers");
    let counters = ask(&mut control, json!({"cmd": "counters"}));
    let links: Vec<&String> = counters["links"].as_object().unwrap().keys().collect();
    assert_eq!(links, ["client.down", "client.up", "p0.forward", "p0.reverse", "p1.forward", "p1.reverse", "server.down", "server.up"]);
    assert_eq!(counters["paths"]["p1"]["reverse"]["dropped_packets"], json!({"queue_full": 0, "random_loss": 0, "aqm": 0}));
    assert_eq!(counters["emulator"]["delay_compensation_ns"], 90_000);
    assert_eq!(ask(&mut control, json!({"cmd": "reset_counters"})), json!({"ok": true}));
}

#[test]
fn bad_lines_are_refused_and_shutdown_stops_the_loop() {
    let mut control = control();
    let reply = |line: &str, control: &mut ControlPlane<Direct>| -> Reply { control.handle_line(line).finish() };
    assert!(reply("not json", &mut control).error.unwrap().starts_with("invalid JSON"));
    assert_eq!(reply("[1, 2]", &mut control).error.unwrap(), "a request must be a JSON object");
    assert!(reply(r#"{"cmd": "nosuch"}"#, &mut control).error.unwrap().starts_with("cmd: unknown command"));
    assert!(!control.packet_loop().plane.stopping());
    assert_eq!(ask(&mut control, json!({"cmd": "shutdown"})), json!({"ok": true}));
    assert!(control.packet_loop().plane.stopping());
}
