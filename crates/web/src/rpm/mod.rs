//! Responsiveness under working conditions (RPM, draft-ietf-ippm-responsiveness): the server's
//! endpoints ([`endpoints`]), the algorithm's arithmetic ([`algorithm`], no I/O) and the client
//! (`protolab-net rpm`, [`client`]); docs/rpm.md.

pub mod algorithm;
pub mod endpoints;
pub mod client;
mod conn;
pub mod delivered;
pub mod result;

pub use client::{Directions, Rpm, RpmError, RpmOptions};
