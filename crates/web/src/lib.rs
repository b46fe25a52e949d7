//! protolab's HTTP endpoints: page manifests (docs/manifest.md), generated bodies, TLS material
//! (docs/tls.md), the multi-origin server (docs/server.md), and the clients: page loads
//! (docs/load.md), bulk transfers (docs/bulk.md) and the responsiveness test (docs/rpm.md) over
//! one connection layer (`client`).
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod body;
pub mod bulk;
pub mod client;
pub mod feedback;
pub mod instrument;
pub mod limits;
pub mod load;
pub mod manifest;
pub mod ratelimit;
pub mod pace;
pub mod page;
pub mod raw;
pub mod rpm;
pub mod server;
pub mod site;
pub mod sockopt;
pub mod tls;
pub mod transport;

pub use manifest::{Manifest, ManifestError};
pub use server::{Limits, ServeError, ServeOptions, Server};
pub use site::{Site, SiteError};
pub use tls::{TlsError, TlsMaterial};
