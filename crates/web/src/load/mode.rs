//! The protocol modes of the page-load engine, as a registry looked up by name (`name` or
//! `name:N`): defined in the contract crate (`contract::modes`, `protolab-net modes`), which
//! Python reads too.

pub use contract::modes::{known, Mode, Pool, Protocol, Scheduler, Transport, MAX_PARALLEL};
