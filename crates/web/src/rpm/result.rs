//! The JSON result of `protolab-net rpm` (schema `protolab.rpm`, docs/rpm.md), defined in the
//! contract crate (`contract::rpm`, `schemas/rpm-result.json`).

pub use contract::rpm::{
    ClientInfo, Confidences, DirectionResult, IdleResult, InterfaceInfo, Interval, IntervalState, Probe, ProbeKind, RpmConfig, RpmResult,
    RpmSchema, RpmStatus, DRAFT, SCHEMA, SCHEMA_VERSION,
};
