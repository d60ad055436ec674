//! Who may do what: tokens and their roles, the live streams' token checks, the caps
//! on long-held calls (live streams, downloads),
//! the capped accept loop and the serving of its connections. Nothing here names a job, the scheduler or a surface.

pub mod accounts;
pub mod caller;
pub mod connections;
pub mod hosts;
pub mod listener;
pub mod places;
pub mod streams;
pub mod tokens;
