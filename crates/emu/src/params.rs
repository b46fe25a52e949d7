//! From the contract's link parameters ([`LinkParams`], docs/topology.md) to the model's
//! [`LinkConfig`]. Reading a trace file is I/O: it happens here, on the thread that asks (the
//! start-up or the control thread), never on the packet loop.

use std::path::Path;
use std::sync::Arc;

use contract::link::{JitterDistribution as Dist, LinkParams, LossParams, QueueKind as Kind, QueueLimit as Limit};
use netmodel::{
    DeliveryTrace, JitterConfig, JitterDistribution, LinkConfig, LossConfig, QueueConfig, QueueKind, QueueLimit, Rate,
    WifiConfig,
};

/// A refused value: (field relative to the link direction, why).
pub type FieldError = (String, String);

/// The model's configuration of one link direction; a trace path is resolved against `base_dir`
/// and read. Errors name the field as the contract spells it (`queue.target_ns`).
pub fn link_config(params: &LinkParams, base_dir: &Path) -> Result<LinkConfig, FieldError> {
    let rate = match (params.rate_bps, &params.trace, &params.wifi) {
        (Some(_), Some(_), _) => return Err(("trace".into(), "give either rate or trace, not both".into())),
        (Some(_), _, Some(_)) | (_, Some(_), Some(_)) => {
            return Err(("wifi".into(), "a WiFi link has its own PHY rate: give no rate or trace with it".into()))
        }
        (None, Some(path), None) => {
            Rate::Trace(Arc::new(read_trace(&base_dir.join(path))?.starting_at(params.trace_start_ns)))
        }
        (Some(bps), None, None) => Rate::BitsPerSecond(bps),
        (None, None, Some(wifi)) => Rate::Wifi(WifiConfig::from(wifi)),
        (None, None, None) => Rate::Unlimited,
    };
    let kind = match params.queue.kind {
        Kind::Droptail => QueueKind::DropTail,
        Kind::Drophead => QueueKind::DropHead,
        Kind::Codel { target_ns, interval_ns } => QueueKind::CoDel { target: target_ns, interval: interval_ns },
    };
    let limit = match params.queue.limit {
        Limit::Packets(packets) => QueueLimit::Packets(packets),
        Limit::Bytes(bytes) => QueueLimit::Bytes(bytes),
    };
    let jitter = params.jitter.map(|j| JitterConfig {
        std: j.std_ns,
        dist: match j.dist {
            Dist::Uniform => JitterDistribution::Uniform,
            Dist::Normal => JitterDistribution::Normal,
            Dist::Pareto => JitterDistribution::Pareto,
        },
        preserve_order: j.preserve_order,
    });
    let loss = params.loss.map(|loss| match loss {
        LossParams::Bernoulli { p } => LossConfig::Bernoulli { p },
        LossParams::GilbertElliott { p, r, loss_good, loss_bad } => LossConfig::GilbertElliott { p, r, loss_good, loss_bad },
    });
    let config = LinkConfig { rate, queue: QueueConfig { kind, limit }, delay: params.delay_ns, jitter, loss };
    config.validate().map_err(|e| (contract_field(&e.field).to_string(), e.message))?;
    Ok(config)
}

/// The model's field names where the contract's differ (it carries units in its names).
fn contract_field(model_field: &str) -> &str {
    match model_field {
        "rate" => "rate_bps",
        "queue.target" => "queue.target_ns",
        "queue.interval" => "queue.interval_ns",
        "wifi.max_ampdu_duration" => "wifi.max_ampdu_duration_ns",
        "wifi.difs" => "wifi.difs_ns",
        other => other,
    }
}

fn read_trace(path: &Path) -> Result<DeliveryTrace, FieldError> {
    let text = std::fs::read_to_string(path).map_err(|e| ("trace".to_string(), format!("cannot read {}: {e}", path.display())))?;
    DeliveryTrace::parse(&text).map_err(|e| ("trace".to_string(), format!("{}: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn convert(json: &str) -> Result<LinkConfig, FieldError> {
        link_config(&serde_json::from_str(json).unwrap(), Path::new("."))
    }

    #[test]
    fn params_convert_to_the_model() {
        let c = convert(
            r#"{"rate":"7mbit","delay":"25ms","queue":{"kind":"codel","bytes":45000},
                "loss":{"kind":"gilbert-elliott","p":0.01,"r":0.3},"jitter":{"std":"1ms","dist":"uniform"}}"#,
        )
        .unwrap();
        assert_eq!(c.rate, Rate::BitsPerSecond(7_000_000));
        assert_eq!(c.delay, 25_000_000);
        assert_eq!(c.queue, QueueConfig::codel(QueueLimit::Bytes(45000)));
        assert_eq!(c.loss, Some(LossConfig::GilbertElliott { p: 0.01, r: 0.3, loss_good: 0.0, loss_bad: 1.0 }));
        assert_eq!(c.jitter, Some(JitterConfig { std: 1_000_000, dist: JitterDistribution::Uniform, preserve_order: false }));
        assert_eq!(convert("{}").unwrap(), LinkConfig::default());
        let wifi = convert(r#"{"wifi":{"max_ampdu_frames":1,"sifs":"10us"},"delay":"1ms"}"#).unwrap();
        let expected = WifiConfig { max_ampdu_frames: 1, sifs: 10_000, ..WifiConfig::default() };
        assert_eq!((wifi.rate, wifi.delay), (Rate::Wifi(expected), 1_000_000));
    }

    #[test]
    fn the_model_s_refusals_name_the_contract_s_field() {
        assert_eq!(convert(r#"{"loss":{"kind":"bernoulli","p":1.5}}"#).unwrap_err().0, "loss.p");
        assert_eq!(convert(r#"{"queue":{"kind":"droptail","packets":0}}"#).unwrap_err().0, "queue.packets");
        assert_eq!(convert(r#"{"queue":{"kind":"codel","target":"0"}}"#).unwrap_err().0, "queue.target_ns");
        assert_eq!(convert(r#"{"rate":"1mbit","trace":"t"}"#).unwrap_err().0, "trace");
        assert_eq!(convert(r#"{"rate":"1mbit","wifi":{}}"#).unwrap_err().0, "wifi");
        assert_eq!(convert(r#"{"wifi":{"difs":"0"}}"#).unwrap_err().0, "wifi.difs_ns");
        assert_eq!(convert(r#"{"wifi":{"cw_min":31,"cw_max":15}}"#).unwrap_err().0, "wifi.cw_min");
        assert_eq!(convert(r#"{"wifi":{"frame_error_rate":2}}"#).unwrap_err().0, "wifi.frame_error_rate");
        let (field, message) = convert(r#"{"trace":"/nonexistent/trace"}"#).unwrap_err();
        assert_eq!(field, "trace");
        assert!(message.starts_with("cannot read /nonexistent/trace"), "{message}");
    }

    #[test]
    fn a_trace_starts_where_the_params_say() {
        let dir = std::env::temp_dir().join(format!("protolab-params-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("cell.trace"), "0\n2\n4\n").unwrap();
        let config = |json: &str| link_config(&serde_json::from_str(json).unwrap(), &dir).unwrap();
        let started = config(r#"{"trace":"cell.trace","trace_start":"3ms"}"#);
        let Rate::Trace(trace) = started.rate else { panic!("not a trace: {:?}", started.rate) };
        assert_eq!((trace.start(), trace.opportunity_time(0)), (3_000_000, 1_000_000));
        assert_ne!(config(r#"{"trace":"cell.trace"}"#).rate, Rate::Trace(trace), "another start is another rate");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
