//! The coordinator: holds SPRT tests and self-play jobs, leases their units to
//! workers, checks and stores every result, and decides tests.
//!
//! Layout: [`storage`] is the database (SQLite or PostgreSQL, one schema) and
//! [`writer`] its group-commit task; [`scheduler`] holds jobs, leases and workers in
//! memory, each worker's [`pace`] bounding the work it holds; [`jobs`] checks requests
//! and presents jobs; [`registration`] bounds what a worker says of itself; [`replay`]
//! checks reported games with the arbiter; [`nets`] is the registry of trained nets;
//! [`artifacts`] stores engines, books and nets by hash, [`books`] keeps the books jobs
//! play parsed once; [`tokens`] authenticates; [`endings`] checks the evidence of
//! endings the rules did not make; [`disk`] keeps a reserve of free space; [`durable`]
//! makes the files and folders that must survive a crash, in the folders [`layout`]
//! names; [`retention`] ages finished jobs' data out and holds submitters to their
//! quotas; [`fail_point`] lets the fault drills crash it on cue; [`service`] is the
//! gRPC surface, [`listener`] its capped accept loop, [`admission`] bounds the requests
//! in flight and their rates, [`detached`] runs reports and other writes to their end,
//! [`streams`] bounds and ends the live streams, and [`server`] puts them together.

pub mod access;
pub mod api;
pub mod detached;
pub mod fail_point;
pub mod jobs;
pub mod kept;
pub mod metrics;
pub mod nets;
pub mod retention;
pub mod scheduler;
pub mod server;
pub mod storage;
