//! The coordinator's tests: storage on SQLite and PostgreSQL, the scheduler, the
//! services under bad input, and whole clusters of real processes with faults.

mod cli;
mod cluster;
mod common;
mod nets;
mod scheduler;
mod security;
mod storage;
mod tls;
mod training_loop;
