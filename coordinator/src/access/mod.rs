//! Who may do what: tokens and their roles, the live streams' token checks and caps,
//! and the capped accept loop. Nothing here names a job, the scheduler or a surface.

pub mod caller;
pub mod listener;
pub mod streams;
pub mod tokens;
