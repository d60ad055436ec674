//! The coordinator: holds SPRT tests, self-play, SPSA, verification and tournament
//! jobs, leases their units to workers, checks and stores every result, and decides
//! tests.
//!
//! Layout, a folder a concern, each naming only those below it: [`access`] (tokens,
//! callers, the live streams' caps, the capped listener) and the small shared parts
//! ([`metrics`], [`kept`], [`detached`], [`fail_point`], [`names`]) at the bottom; [`storage`]
//! (the database, its rows, changes and group-commit writer, the files' layout,
//! durability, disk, artifacts, books); [`jobs`], a room a kind of job (what a request
//! may ask, how a kind's reports check out, how a job reads back); [`scheduler`] (the
//! jobs, leases, workers and tokens in memory); [`nets`] (the registry); [`api`] (the
//! gRPC services, the HTTP dashboard and the admission in front of both);
//! [`retention`] (finished jobs' data aged out); and [`server`], which wires them.
//! docs/architecture.md follows a report and a request through them.

pub mod access;
pub mod api;
pub mod detached;
pub mod fail_point;
pub mod jobs;
pub mod kept;
pub mod metrics;
pub mod names;
pub mod nets;
pub mod notify;
pub mod retention;
pub mod scheduler;
pub mod server;
pub mod storage;
