//! Capture and event-log writers: files are written on their own threads, fed through bounded
//! queues, so the packet loop never waits for a disk. When a queue is full the record is dropped
//! and counted, never the packet.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use contract::control::WriterSummary;
use crossbeam_channel::{bounded, Sender, TrySendError};
use netmodel::{DropCause, Event, EventKind};
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::{DataLink, TsResolution};

const QUEUE_RECORDS: usize = 65_536;

/// A running writer: a bounded queue and its thread.
pub struct Writer<T: Send + 'static> {
    tx: Sender<T>,
    dropped: u64,
    thread: JoinHandle<Result<u64, String>>,
}

impl<T: Send + 'static> Writer<T> {
    /// Queues a record standing for `weight` items; drops and counts them if the writer is behind.
    pub fn offer(&mut self, record: T, weight: u64) {
        match self.tx.try_send(record) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => self.dropped += weight,
        }
    }

    /// Records dropped so far.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Closes the queue; the returned handle finishes writing (join it off the packet loop).
    pub fn finish(self) -> PendingSummary {
        drop(self.tx);
        PendingSummary { dropped: self.dropped, thread: self.thread }
    }
}

/// A writer that was told to finish.
pub struct PendingSummary {
    dropped: u64,
    thread: JoinHandle<Result<u64, String>>,
}

impl PendingSummary {
    /// Waits for the writer thread.
    pub fn wait(self) -> WriterSummary {
        match self.thread.join() {
            Ok(Ok(written)) => WriterSummary { written, dropped: self.dropped, error: None },
            Ok(Err(e)) => WriterSummary { written: 0, dropped: self.dropped, error: Some(e) },
            Err(_) => WriterSummary { written: 0, dropped: self.dropped, error: Some("writer thread panicked".into()) },
        }
    }
}

fn create(path: &Path) -> Result<File, String> {
    File::create(path).map_err(|e| format!("cannot create {}: {e}", path.display()))
}

/// A captured packet: Unix time in ns and the IP bytes.
pub type CapturedPacket = (u64, Vec<u8>);

/// Starts a pcap writer (link type RAW: IPv4 packets without a link-layer header).
pub fn pcap(path: &Path) -> Result<Writer<CapturedPacket>, String> {
    let file = create(path)?;
    let (tx, rx) = bounded::<CapturedPacket>(QUEUE_RECORDS);
    let thread = std::thread::Builder::new()
        .name("pcap-writer".into())
        .spawn(move || {
            crate::realtime::make_current_thread_normal();
            let header = PcapHeader { datalink: DataLink::RAW, ts_resolution: TsResolution::NanoSecond, ..PcapHeader::default() };
            let mut writer = PcapWriter::with_header(BufWriter::new(file), header).map_err(|e| e.to_string())?;
            let mut written = 0;
            for (unix_ns, data) in rx {
                let len = u32::try_from(data.len()).unwrap_or(u32::MAX);
                let packet = PcapPacket::new(Duration::from_nanos(unix_ns), len, &data);
                writer.write_packet(&packet).map_err(|e| e.to_string())?;
                written += 1;
            }
            writer.into_writer().flush().map_err(|e| e.to_string())?;
            Ok(written)
        })
        .map_err(|e| format!("cannot start the pcap writer: {e}"))?;
    Ok(Writer { tx, dropped: 0, thread })
}

/// Starts an event-log writer (NDJSON, see docs/control.md).
pub fn event_log(path: &Path, lab: &str, start_unix_ns: u64, link_names: Arc<Vec<String>>) -> Result<Writer<Vec<Event>>, String> {
    let file = create(path)?;
    let header = serde_json::json!({"schema": "protolab.events", "schema_version": 1, "lab": lab, "start_unix_ns": start_unix_ns});
    let (tx, rx) = bounded::<Vec<Event>>(QUEUE_RECORDS / 64);
    let thread = std::thread::Builder::new()
        .name("event-writer".into())
        .spawn(move || {
            crate::realtime::make_current_thread_normal();
            let mut out = BufWriter::with_capacity(1 << 20, file);
            let io = |e: std::io::Error| e.to_string();
            writeln!(out, "{header}").map_err(io)?;
            let mut written = 0u64;
            for batch in rx {
                for e in batch {
                    let (ev, cause) = match e.kind {
                        EventKind::Enqueue => ("enqueue", None),
                        EventKind::Deliver => ("deliver", None),
                        EventKind::Drop(c) => (
                            "drop",
                            Some(match c {
                                DropCause::QueueFull => "queue_full",
                                DropCause::RandomLoss => "random_loss",
                                DropCause::Aqm => "aqm",
                            }),
                        ),
                    };
                    let link = link_names.get(e.link as usize).map_or("?", String::as_str);
                    let f = e.flow;
                    write!(
                        out,
                        r#"{{"t":{},"ev":"{ev}","link":"{link}","src":"{}","dst":"{}","sport":{},"dport":{},"proto":{},"size":{},"ip_id":{}"#,
                        start_unix_ns + e.time,
                        f.src,
                        f.dst,
                        f.sport,
                        f.dport,
                        f.proto,
                        e.size,
                        e.ip_id
                    )
                    .map_err(io)?;
                    match cause {
                        Some(c) => writeln!(out, r#","cause":"{c}"}}"#).map_err(io)?,
                        None => writeln!(out, "}}").map_err(io)?,
                    }
                    written += 1;
                }
            }
            out.flush().map_err(io)?;
            Ok(written)
        })
        .map_err(|e| format!("cannot start the event writer: {e}"))?;
    Ok(Writer { tx, dropped: 0, thread })
}
