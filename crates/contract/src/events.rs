//! The events the binaries print on stdout for the programs that start them: one JSON line
//! each, once the process is ready to be used.
//!
//! - [`Listening`]: `protolab-net serve`, once every socket is bound and the TLS material is
//!   written (`{"event": "listening", ...}`).
//! - [`Ready`]: `protolab-net emu run`, once the lab is built and forwarding
//!   (`{"ready": true, ...}`).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `event` of [`Listening`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub enum ListeningEvent {
    /// The only value.
    #[default]
    #[serde(rename = "listening")]
    Listening,
}

/// `protolab-net serve` is up: where it listens and what it runs with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Listening {
    /// `listening`.
    pub event: ListeningEvent,
    /// Cleartext HTTP/1.1 (and HTTP/2 with prior knowledge) sockets, `addr:port`.
    pub http: Vec<String>,
    /// TLS sockets (ALPN h2 and http/1.1), `addr:port`.
    pub https: Vec<String>,
    /// HTTP/3 (QUIC) sockets, `addr:port`.
    pub h3: Vec<String>,
    /// Sockets of the raw bulk protocol, `addr:port` (none with `--raw-port off`).
    pub raw: Vec<String>,
    /// TCP congestion control of every socket.
    pub tcp_cc: String,
    /// Whether the listeners are MPTCP sockets.
    pub mptcp: bool,
    /// The QUIC controller as given (`--quic-cc`).
    pub quic_cc: String,
    /// The QUIC controller with every parameter.
    pub quic_cc_canonical: String,
    /// Where the CA, certificates and SPKI hashes were written (docs/tls.md).
    pub tls_dir: String,
    /// The SPKI hashes of the certificates, comma-separated (Chromium's
    /// `--ignore-certificate-errors-spki-list`).
    pub spki: String,
    /// Real-page documents whose bodies could not reference all their children (the browser
    /// will not request the others).
    pub real_page_unfit: Vec<UnfitDocument>,
}

/// A document of a real page whose size is too small for references to all its children.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct UnfitDocument {
    /// The manifest file.
    pub file: String,
    /// The document's origin hostname.
    pub origin: String,
    /// The document's path.
    pub path: String,
    /// Its size in the manifest, bytes.
    pub size: u64,
    /// Children it references.
    pub referenced: usize,
    /// Children it should reference.
    pub children: usize,
}

/// `protolab-net emu run` has built the lab and forwards packets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Ready {
    /// Always true.
    pub ready: bool,
    /// The lab's name.
    pub lab: String,
    /// The emulator's process id.
    pub pid: u32,
    /// The control socket (docs/control.md).
    pub control: String,
    /// Each host's network namespace, by host name.
    pub namespaces: BTreeMap<String, String>,
    /// The emulator clock's zero, Unix ns (packet captures and traces count from it).
    pub start_unix_ns: u64,
}

/// The documents of this module (see [`crate::documents`]).
pub(crate) fn documents() -> Vec<crate::Document> {
    vec![crate::document::<Listening>("event-listening"), crate::document::<Ready>("event-ready")]
}
