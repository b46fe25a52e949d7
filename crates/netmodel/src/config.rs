//! Configuration of one link direction, validated before use.

use std::sync::Arc;

use crate::trace::DeliveryTrace;
use crate::wifi::WifiConfig;
use crate::{Nanos, MS};

/// A configuration value the model refuses; `field` is relative to the link direction.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct ConfigError {
    /// The offending field, e.g. `queue.packets` or `loss.p`.
    pub field: String,
    /// Why it is refused.
    pub message: String,
}

impl ConfigError {
    pub(crate) fn new(field: &str, message: impl Into<String>) -> Self {
        ConfigError { field: field.to_string(), message: message.into() }
    }
}

/// How fast a link direction serializes packets.
#[derive(Debug, Clone, PartialEq)]
pub enum Rate {
    /// No serialization delay.
    Unlimited,
    /// A fixed rate in bit/s.
    BitsPerSecond(u64),
    /// Delivery opportunities replayed from a Mahimahi trace.
    Trace(Arc<DeliveryTrace>),
    /// A WiFi station: aggregated transmit opportunities (`crate::wifi`).
    Wifi(WifiConfig),
}

/// What limits the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueLimit {
    /// At most this many packets wait.
    Packets(u32),
    /// At most this many bytes wait.
    Bytes(u64),
}

/// Queue discipline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueKind {
    /// Drop the arriving packet when full.
    DropTail,
    /// Drop the oldest packets until the arriving one fits.
    DropHead,
    /// CoDel (RFC 8289) at dequeue, plus the limit at enqueue.
    CoDel {
        /// Acceptable standing queue delay.
        target: Nanos,
        /// Sliding window over which the minimum sojourn time is tracked.
        interval: Nanos,
    },
}

/// The queue in front of a link direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueConfig {
    /// Discipline.
    pub kind: QueueKind,
    /// Limit.
    pub limit: QueueLimit,
}

impl Default for QueueConfig {
    fn default() -> Self {
        QueueConfig { kind: QueueKind::DropTail, limit: QueueLimit::Packets(1000) }
    }
}

impl QueueConfig {
    /// CoDel with the RFC 8289 defaults (5 ms target, 100 ms interval).
    pub fn codel(limit: QueueLimit) -> Self {
        QueueConfig { kind: QueueKind::CoDel { target: 5 * MS, interval: 100 * MS }, limit }
    }
}

/// Shape of the delay variation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JitterDistribution {
    /// Uniform over `±std·√3`.
    Uniform,
    /// Normal with the given standard deviation.
    Normal,
    /// Pareto with shape 3 shifted to zero mean: a heavy tail of late packets.
    Pareto,
}

/// Random delay variation added to the propagation delay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JitterConfig {
    /// Standard deviation of the zero-mean variation.
    pub std: Nanos,
    /// Distribution.
    pub dist: JitterDistribution,
    /// Never deliver a packet before one that entered the link earlier.
    pub preserve_order: bool,
}

/// Random loss, decided when a packet arrives at the link.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LossConfig {
    /// Independent loss with probability `p`.
    Bernoulli {
        /// Loss probability.
        p: f64,
    },
    /// Gilbert-Elliott two-state chain.
    GilbertElliott {
        /// P(good -> bad) per packet.
        p: f64,
        /// P(bad -> good) per packet.
        r: f64,
        /// Loss probability in the good state (1-k).
        loss_good: f64,
        /// Loss probability in the bad state (1-h).
        loss_bad: f64,
    },
}

/// Everything about one link direction.
#[derive(Debug, Clone, PartialEq)]
pub struct LinkConfig {
    /// Serialization.
    pub rate: Rate,
    /// Queue.
    pub queue: QueueConfig,
    /// Propagation delay.
    pub delay: Nanos,
    /// Optional delay variation.
    pub jitter: Option<JitterConfig>,
    /// Optional random loss.
    pub loss: Option<LossConfig>,
}

impl Default for LinkConfig {
    fn default() -> Self {
        LinkConfig { rate: Rate::Unlimited, queue: QueueConfig::default(), delay: 0, jitter: None, loss: None }
    }
}

/// The largest packet a byte-limited queue must be able to hold.
pub const MAX_PACKET_BYTES: u64 = 1500;

fn check_probability(field: &str, p: f64) -> Result<(), ConfigError> {
    if p.is_finite() && (0.0..=1.0).contains(&p) {
        Ok(())
    } else {
        Err(ConfigError::new(field, format!("probability {p} is outside 0..=1")))
    }
}

impl LinkConfig {
    /// A fixed-rate link with the given delay and a default queue.
    pub fn with_rate(bits_per_second: u64, delay: Nanos) -> Self {
        LinkConfig { rate: Rate::BitsPerSecond(bits_per_second), delay, ..LinkConfig::default() }
    }

    /// Checks every value; errors name the field relative to the link direction.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if let Rate::BitsPerSecond(0) = self.rate {
            return Err(ConfigError::new("rate", "must be greater than zero"));
        }
        if let Rate::Wifi(wifi) = &self.rate {
            wifi.validate().map_err(|(field, message)| ConfigError::new(field, message))?;
        }
        match self.queue.limit {
            QueueLimit::Packets(0) => return Err(ConfigError::new("queue.packets", "must be at least 1")),
            QueueLimit::Bytes(b) if b < MAX_PACKET_BYTES => {
                return Err(ConfigError::new(
                    "queue.bytes",
                    format!("{b} bytes cannot hold one {MAX_PACKET_BYTES}-byte packet"),
                ))
            }
            _ => {}
        }
        if let QueueKind::CoDel { target, interval } = self.queue.kind {
            if target == 0 {
                return Err(ConfigError::new("queue.target", "must be greater than zero"));
            }
            if interval < target {
                return Err(ConfigError::new("queue.interval", "must be at least the target"));
            }
        }
        match self.loss {
            Some(LossConfig::Bernoulli { p }) => check_probability("loss.p", p)?,
            Some(LossConfig::GilbertElliott { p, r, loss_good, loss_bad }) => {
                check_probability("loss.p", p)?;
                check_probability("loss.r", r)?;
                check_probability("loss.loss_good", loss_good)?;
                check_probability("loss.loss_bad", loss_bad)?;
            }
            None => {}
        }
        Ok(())
    }

    /// Serialization time of `bytes` at a fixed rate (rounded to the nearest nanosecond).
    pub fn serialization_time(bits_per_second: u64, bytes: u32) -> Nanos {
        let bits = u128::from(bytes) * 8 * 1_000_000_000;
        let rate = u128::from(bits_per_second.max(1));
        u64::try_from((bits + rate / 2) / rate).unwrap_or(u64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_bad_values_naming_the_field() {
        let mut c = LinkConfig { rate: Rate::BitsPerSecond(0), ..Default::default() };
        assert_eq!(c.validate().unwrap_err().field, "rate");
        c.rate = Rate::Unlimited;
        c.queue.limit = QueueLimit::Bytes(1000);
        assert_eq!(c.validate().unwrap_err().field, "queue.bytes");
        c.queue.limit = QueueLimit::Packets(10);
        c.loss = Some(LossConfig::GilbertElliott { p: 0.1, r: 1.5, loss_good: 0.0, loss_bad: 1.0 });
        assert_eq!(c.validate().unwrap_err().field, "loss.r");
        c.loss = Some(LossConfig::Bernoulli { p: f64::NAN });
        assert_eq!(c.validate().unwrap_err().field, "loss.p");
        c.loss = None;
        assert!(c.validate().is_ok());
    }

    #[test]
    fn serialization_time_is_exact() {
        assert_eq!(LinkConfig::serialization_time(10_000_000, 1500), 1_200_000);
        assert_eq!(LinkConfig::serialization_time(1_000_000_000, 1500), 12_000);
        assert_eq!(LinkConfig::serialization_time(7_000_000, 1500), 1_714_286);
    }
}
