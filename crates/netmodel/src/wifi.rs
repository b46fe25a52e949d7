//! A WiFi (802.11n/ac-style) link direction: one station sending to one receiver.
//!
//! What makes WiFi unlike a wire for a transport protocol is not its rate but its timing
//! (000 ch. 6): the station first wins the channel (DIFS plus a random backoff, longer when other
//! stations transmit first), then sends everything it may take from its queue as one A-MPDU (up
//! to a number of frames, of bytes and of airtime) behind one PHY preamble, and the receiver
//! answers with one block ACK. So packets leave in bursts whose size follows the backlog, the
//! fixed cost of a transmit opportunity (TXOP) is paid per burst (few queued packets: small
//! aggregates, low efficiency), and the gap between bursts varies. Frames the receiver did not
//! get are sent again in a later TXOP, up to a retry limit; the receiver's reorder buffer hands
//! frames on in sequence, so a lost frame delays the frames behind it (a delay burst) instead of
//! becoming a loss. Only frames that fail every attempt are lost (`random_loss`).
//!
//! Times follow IEEE 802.11-2016 (clause 19, HT PHY; clause 10.3, DCF); the defaults are an
//! 802.11n link at 5 GHz, two spatial streams, 20 MHz. docs/emulator.md says what is left out.

use std::collections::{BTreeMap, VecDeque};

use contract::link::WifiParams;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

use crate::packet::Packet;
use crate::Nanos;

/// Bytes each MPDU adds to its IP packet inside an A-MPDU: the A-MPDU delimiter (4), the QoS
/// data MAC header (26), the LLC/SNAP header (8) and the FCS (4). The padding of subframes to a
/// multiple of 4 bytes (0-3 bytes) is left out.
pub const MPDU_OVERHEAD_BYTES: u32 = 42;

/// Bound on the other stations' TXOPs before one of ours, so that a contention probability near 1
/// cannot stall the model (the expected number is `p / (1 - p)`, 99 at `p = 0.99`).
const MAX_DEFERRALS: u32 = 10_000;

/// The parameters of a WiFi link direction (docs/emulator.md, "WiFi links").
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WifiConfig {
    /// PHY rate of the data (the A-MPDU), bit/s.
    pub phy_rate_bps: u64,
    /// Most MPDUs in one A-MPDU (the block-ACK window: 64 in 802.11n/ac).
    pub max_ampdu_frames: u32,
    /// Most bytes in one A-MPDU (802.11n: 65 535).
    pub max_ampdu_bytes: u32,
    /// Most airtime of one A-MPDU's data.
    pub max_ampdu_duration: Nanos,
    /// Backoff slot time.
    pub slot: Nanos,
    /// Short interframe space (before the block ACK).
    pub sifs: Nanos,
    /// DCF interframe space: the idle time before every backoff.
    pub difs: Nanos,
    /// Smallest contention window: the backoff is uniform over 0..=cw slots.
    pub cw_min: u32,
    /// Largest contention window (it doubles after a TXOP of which no frame arrived).
    pub cw_max: u32,
    /// PHY preamble and headers before the data.
    pub preamble: Nanos,
    /// The block ACK frame, preamble included.
    pub block_ack: Nanos,
    /// Probability that one MPDU is received in error (each attempt, independently).
    pub frame_error_rate: f64,
    /// Retransmissions of a failed MPDU after its first attempt; the residual loss is
    /// `frame_error_rate ^ (retry_limit + 1)`.
    pub retry_limit: u32,
    /// Probability that another station takes the channel before each of ours (and again after
    /// it, geometrically).
    pub contention_probability: f64,
    /// How long another station's TXOP holds the channel.
    pub contention_txop: Nanos,
}

impl Default for WifiConfig {
    /// The contract's defaults (one place): 802.11n, 5 GHz, 2 spatial streams, 20 MHz (sources
    /// in docs/emulator.md).
    fn default() -> Self {
        WifiConfig::from(&WifiParams::default())
    }
}

impl From<&WifiParams> for WifiConfig {
    fn from(p: &WifiParams) -> Self {
        WifiConfig {
            phy_rate_bps: p.phy_rate_bps,
            max_ampdu_frames: p.max_ampdu_frames,
            max_ampdu_bytes: p.max_ampdu_bytes,
            max_ampdu_duration: p.max_ampdu_duration_ns,
            slot: p.slot_ns,
            sifs: p.sifs_ns,
            difs: p.difs_ns,
            cw_min: p.cw_min,
            cw_max: p.cw_max,
            preamble: p.preamble_ns,
            block_ack: p.block_ack_ns,
            frame_error_rate: p.frame_error_rate,
            retry_limit: p.retry_limit,
            contention_probability: p.contention_probability,
            contention_txop: p.contention_txop_ns,
        }
    }
}

/// A refused value: (field, why). `LinkConfig::validate` turns it into a `ConfigError` (this
/// module stays below `config`, which holds a `WifiConfig`).
pub(crate) type Refusal = (&'static str, String);

fn check_probability(field: &'static str, p: f64, below_one: bool) -> Result<(), Refusal> {
    let within = p.is_finite() && p >= 0.0 && if below_one { p < 1.0 } else { p <= 1.0 };
    if within {
        Ok(())
    } else {
        let range = if below_one { "0..1 (1 excluded)" } else { "0..=1" };
        Err((field, format!("probability {p} is outside {range}")))
    }
}

impl WifiConfig {
    /// Checks every value; refusals name the field as `wifi.<name>`.
    pub(crate) fn validate(&self) -> Result<(), Refusal> {
        let positive = |field: &'static str, value: u64| {
            if value == 0 {
                Err((field, "must be greater than zero".to_string()))
            } else {
                Ok(())
            }
        };
        positive("wifi.phy_rate_bps", self.phy_rate_bps)?;
        positive("wifi.max_ampdu_frames", u64::from(self.max_ampdu_frames))?;
        positive("wifi.max_ampdu_bytes", u64::from(self.max_ampdu_bytes))?;
        positive("wifi.max_ampdu_duration", self.max_ampdu_duration)?;
        // DIFS > 0 also guarantees that every TXOP takes time, so the model always advances.
        positive("wifi.difs", self.difs)?;
        if self.max_ampdu_frames > 1024 {
            return Err(("wifi.max_ampdu_frames", "at most 1024 (802.11be's block-ACK window)".into()));
        }
        if self.cw_min > self.cw_max {
            return Err(("wifi.cw_min", format!("{} is above cw_max {}", self.cw_min, self.cw_max)));
        }
        if self.cw_max > 65_535 {
            return Err(("wifi.cw_max", "at most 65535 slots".into()));
        }
        if self.retry_limit > 255 {
            return Err(("wifi.retry_limit", "at most 255 retransmissions".into()));
        }
        check_probability("wifi.frame_error_rate", self.frame_error_rate, false)?;
        check_probability("wifi.contention_probability", self.contention_probability, true)
    }

    /// Bytes an IP packet of `ip_bytes` occupies in an A-MPDU.
    pub fn mpdu_bytes(ip_bytes: u32) -> u64 {
        u64::from(ip_bytes) + u64::from(MPDU_OVERHEAD_BYTES)
    }

    /// Airtime of `psdu_bytes` at the PHY rate (rounded to the nearest nanosecond).
    pub fn data_airtime(&self, psdu_bytes: u64) -> Nanos {
        let bits = u128::from(psdu_bytes) * 8 * 1_000_000_000;
        let rate = u128::from(self.phy_rate_bps.max(1));
        u64::try_from((bits + rate / 2) / rate).unwrap_or(u64::MAX)
    }

    /// Airtime of one TXOP that is not data, excluding the channel access: preamble, SIFS and
    /// block ACK.
    pub fn txop_overhead(&self) -> Nanos {
        self.preamble + self.sifs + self.block_ack
    }

    /// Mean channel access time without other stations: DIFS plus `cw_min / 2` slots.
    pub fn mean_access_time(&self) -> f64 {
        self.difs as f64 + f64::from(self.cw_min) / 2.0 * self.slot as f64
    }

    /// IP packets of `ip_bytes` one full A-MPDU holds under the three limits.
    pub fn frames_per_full_ampdu(&self, ip_bytes: u32) -> u32 {
        let mpdu = Self::mpdu_bytes(ip_bytes);
        let mut frames = 1u32;
        while frames < self.max_ampdu_frames {
            let bytes = mpdu * u64::from(frames + 1);
            if bytes > u64::from(self.max_ampdu_bytes) || self.data_airtime(bytes) > self.max_ampdu_duration {
                break;
            }
            frames += 1;
        }
        frames
    }

    /// IP throughput of a saturated station (always a full A-MPDU of `ip_bytes` packets, no
    /// frame errors, no other stations) over the PHY rate: the aggregation efficiency.
    pub fn saturated_efficiency(&self, ip_bytes: u32) -> f64 {
        let frames = self.frames_per_full_ampdu(ip_bytes);
        let psdu = Self::mpdu_bytes(ip_bytes) * u64::from(frames);
        let txop = self.mean_access_time() + (self.txop_overhead() + self.data_airtime(psdu)) as f64;
        let ip_bits = f64::from(frames) * f64::from(ip_bytes) * 8.0;
        ip_bits / (txop * 1e-9) / self.phy_rate_bps as f64
    }

    /// Channel access before a TXOP: DIFS, a backoff uniform over `0..=cw` slots, and for each
    /// other station that takes the channel first its TXOP and another DIFS (the backoff counter
    /// freezes meanwhile, as in DCF, so the slots are drawn once).
    fn draw_access(&self, cw: u32, rng: &mut ChaCha8Rng) -> Nanos {
        let slots = u64::from(rng.random_range(0..=cw));
        let mut access = self.difs + slots * self.slot;
        let mut deferrals = 0;
        while self.contention_probability > 0.0
            && deferrals < MAX_DEFERRALS
            && rng.random::<f64>() < self.contention_probability
        {
            access += self.contention_txop + self.difs;
            deferrals += 1;
        }
        access
    }
}

/// One MPDU: its sequence number, its packet and its failed attempts so far.
struct Frame<P> {
    seq: u64,
    packet: Packet<P>,
    failures: u32,
}

/// The A-MPDU being built for one TXOP.
pub(crate) struct Aggregate<P> {
    frames: Vec<Frame<P>>,
    psdu_bytes: u64,
}

impl<P> Aggregate<P> {
    /// Whether a packet of `ip_bytes` still fits; the first frame always does.
    pub(crate) fn has_room(&self, config: &WifiConfig, ip_bytes: u32) -> bool {
        if self.frames.is_empty() {
            return true;
        }
        let bytes = self.psdu_bytes + WifiConfig::mpdu_bytes(ip_bytes);
        self.frames.len() < config.max_ampdu_frames as usize
            && bytes <= u64::from(config.max_ampdu_bytes)
            && config.data_airtime(bytes) <= config.max_ampdu_duration
    }

    fn push(&mut self, frame: Frame<P>) {
        self.psdu_bytes += WifiConfig::mpdu_bytes(frame.packet.size);
        self.frames.push(frame);
    }
}

/// What one TXOP did: the packets the receiver now hands on (in sequence, all at `received_at`)
/// and the packets that failed their last attempt.
pub(crate) struct TxopOutcome<P> {
    pub(crate) received_at: Nanos,
    pub(crate) released: Vec<Packet<P>>,
    pub(crate) dropped: Vec<Packet<P>>,
}

/// The sending station and the receiver's reorder buffer of one WiFi link direction.
pub(crate) struct Station<P> {
    /// Frames to send again (and at most one that did not fit its A-MPDU), in sequence order.
    retries: VecDeque<Frame<P>>,
    /// Frames received behind a missing one, by sequence number.
    reorder: BTreeMap<u64, Packet<P>>,
    next_seq: u64,
    /// The channel is ours again from then (after our last block ACK).
    free_at: Nanos,
    /// Channel access before the next TXOP, drawn in advance (the model asks for the next event
    /// without drawing).
    next_access: Nanos,
    cw: u32,
}

impl<P> Station<P> {
    pub(crate) fn new(config: &WifiConfig, now: Nanos, rng: &mut ChaCha8Rng) -> Self {
        Station {
            retries: VecDeque::new(),
            reorder: BTreeMap::new(),
            next_seq: 0,
            free_at: now,
            next_access: config.draw_access(config.cw_min, rng),
            cw: config.cw_min,
        }
    }

    /// When the next TXOP's A-MPDU is built, given when the queue's head arrived.
    pub(crate) fn next_start(&self, head_arrival: Option<Nanos>) -> Option<Nanos> {
        let ready = if self.retries.is_empty() { head_arrival? } else { self.free_at };
        Some(ready.max(self.free_at) + self.next_access)
    }

    /// Packets the station holds (to send again, or waiting in the reorder buffer).
    pub(crate) fn held(&self) -> usize {
        self.retries.len() + self.reorder.len()
    }

    /// Draws the next access again (after the link's random stream was reseeded).
    pub(crate) fn redraw(&mut self, config: &WifiConfig, rng: &mut ChaCha8Rng) {
        self.cw = self.cw.clamp(config.cw_min, config.cw_max);
        self.next_access = config.draw_access(self.cw, rng);
    }

    /// Starts an A-MPDU with the frames to send again, oldest first, as many as fit.
    pub(crate) fn begin_txop(&mut self, config: &WifiConfig) -> Aggregate<P> {
        let mut aggregate = Aggregate { frames: Vec::new(), psdu_bytes: 0 };
        while let Some(frame) = self.retries.front() {
            if !aggregate.has_room(config, frame.packet.size) {
                break;
            }
            if let Some(frame) = self.retries.pop_front() {
                aggregate.push(frame);
            }
        }
        aggregate
    }

    /// Adds a packet just taken from the queue. If it does not fit (a queue discipline may hand
    /// over another packet than the head it was asked about), it waits for the next TXOP, first
    /// in line; returns whether it was added.
    pub(crate) fn add_new(&mut self, config: &WifiConfig, aggregate: &mut Aggregate<P>, packet: Packet<P>) -> bool {
        let frame = Frame { seq: self.next_seq, packet, failures: 0 };
        self.next_seq += 1;
        if aggregate.has_room(config, frame.packet.size) {
            aggregate.push(frame);
            true
        } else {
            self.retries.push_back(frame);
            false
        }
    }

    /// Sends the A-MPDU built for the TXOP whose data starts after `start`'s channel access:
    /// draws each frame's fate, keeps the failed ones for later, and releases from the reorder
    /// buffer what is now in sequence.
    pub(crate) fn finish_txop(&mut self, config: &WifiConfig, aggregate: Aggregate<P>, start: Nanos, rng: &mut ChaCha8Rng) -> TxopOutcome<P> {
        let mut outcome = TxopOutcome { received_at: start, released: Vec::new(), dropped: Vec::new() };
        if aggregate.frames.is_empty() {
            return outcome;
        }
        outcome.received_at = start + config.preamble + config.data_airtime(aggregate.psdu_bytes);
        self.free_at = outcome.received_at + config.sifs + config.block_ack;
        let mut failed = Vec::new();
        let mut any_received = false;
        for mut frame in aggregate.frames {
            if config.frame_error_rate > 0.0 && rng.random::<f64>() < config.frame_error_rate {
                frame.failures += 1;
                if frame.failures > config.retry_limit {
                    outcome.dropped.push(frame.packet);
                } else {
                    failed.push(frame);
                }
            } else {
                any_received = true;
                self.reorder.insert(frame.seq, frame.packet);
            }
        }
        // The failed frames are older than any frame still waiting here, which were left out of
        // this A-MPDU for lack of room: putting them in front keeps the sequence order.
        for frame in failed.into_iter().rev() {
            self.retries.push_front(frame);
        }
        // No block ACK at all counts as a collision: the contention window doubles (DCF).
        self.cw = if any_received { config.cw_min } else { (2 * self.cw + 1).min(config.cw_max) };
        self.next_access = config.draw_access(self.cw, rng);
        let oldest_missing = self.retries.front().map(|frame| frame.seq);
        while let Some(entry) = self.reorder.first_entry() {
            if oldest_missing.is_some_and(|missing| *entry.key() > missing) {
                break;
            }
            outcome.released.push(entry.remove());
        }
        outcome
    }

    /// Everything held, in sequence order, for a link that stops being WiFi.
    pub(crate) fn into_held(self) -> Vec<Packet<P>> {
        let mut all: BTreeMap<u64, Packet<P>> = self.reorder;
        all.extend(self.retries.into_iter().map(|frame| (frame.seq, frame.packet)));
        all.into_values().collect()
    }
}

#[cfg(test)]
mod tests;
