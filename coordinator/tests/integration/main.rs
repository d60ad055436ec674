//! The coordinator's tests: storage on SQLite and PostgreSQL, the scheduler, the
//! services under bad input and floods, the dashboard over HTTP, and whole clusters of real
//! processes with faults.

mod accounts;
mod admission;
mod bounds;
mod browser;
mod builds;
mod chunks;
mod ci;
mod cli;
mod clock;
mod cluster;
mod cluster_jobs;
mod common;
mod config_file;
mod connections;
mod creations;
mod dashboard;
mod default_book;
mod docs;
mod drills;
mod durability;
mod failures;
mod foreign_nets;
mod given_up;
mod grpc_fuzz;
mod http_fuzz;
mod job_changes;
mod kill_drills;
mod local;
mod machines;
mod manuals;
mod nets;
mod prometheus;
mod quarantine;
mod retention;
mod scheduler;
mod security;
mod spsa;
mod storage;
mod systemd_units;
mod tls;
mod tournaments;
mod training_loop;
mod verification;
mod what_it_tests;
