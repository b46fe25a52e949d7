//! The library's errors. Capture errors carry the byte offset of the record or block that could
//! not be read, so a damaged file can be inspected (or cut) at that point.

use thiserror::Error;

/// Why a capture, or the output, could not be handled.
#[derive(Debug, Error)]
pub enum Error {
    /// The bytes start with neither a pcap nor a pcapng magic number.
    #[error("not a pcap or pcapng capture: the file starts with {magic}")]
    UnknownFormat {
        /// The first bytes, in hex.
        magic: String,
    },
    /// The file ends inside a header, record or block.
    #[error("truncated capture: the {what} at byte {offset} needs {needed} bytes, the file has {available} more")]
    Truncated {
        /// Offset of the header, record or block that is cut short.
        offset: u64,
        /// What was being read ("pcap file header", "packet record", "pcapng block").
        what: &'static str,
        /// Bytes it needs from `offset` on (at least; for a header, its fixed size).
        needed: u64,
        /// Bytes the file has from `offset` on.
        available: u64,
    },
    /// A header, record or block holds values no valid capture has.
    #[error("corrupt capture at byte {offset}: {reason}")]
    Corrupt {
        /// Offset of the header, record or block.
        offset: u64,
        /// What is wrong with it.
        reason: String,
    },
    /// A legacy pcap file whose single link type this reader does not decode.
    #[error("unsupported link type {linktype} (supported: Ethernet 1, raw IP 101/228/229/12/14, Linux cooked SLL 113 and SLL2 276, BSD loopback 0/108)")]
    UnsupportedLinkType {
        /// The file header's link type.
        linktype: i32,
    },
    /// Reading the capture or writing the output failed.
    #[error("{context}: {error}")]
    Io {
        /// What was being done, with the path.
        context: String,
        /// The operating system's error (in the message, so not also a `source()`).
        error: std::io::Error,
    },
    /// The Parquet writer refused the records (a bug, or a failing writer).
    #[error("cannot write Parquet: {0}")]
    Parquet(#[from] parquet::errors::ParquetError),
    /// The NDJSON writer failed.
    #[error("cannot write NDJSON: {0}")]
    Json(#[from] serde_json::Error),
}

impl Error {
    /// The byte offset a capture error points at, if it is one.
    pub fn offset(&self) -> Option<u64> {
        match self {
            Error::Truncated { offset, .. } | Error::Corrupt { offset, .. } => Some(*offset),
            Error::UnknownFormat { .. } => Some(0),
            _ => None,
        }
    }

    /// Whether the capture itself is damaged (truncated or corrupt after a valid start), as
    /// opposed to not being a capture at all or an I/O failure.
    pub fn is_damaged_capture(&self) -> bool {
        matches!(self, Error::Truncated { .. } | Error::Corrupt { .. })
    }
}

/// The library's result type.
pub type Result<T> = std::result::Result<T, Error>;
