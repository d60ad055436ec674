//! Where the coordinator keeps units' files under its data directory: one name for each
//! folder, shared by the service that writes a unit's file, the writer that tells the
//! kinds of units apart by it, and retention that deletes a finished job's files.

/// Match games, one PGN file a job: `games/{job}.pgn`.
pub const GAMES_DIR: &str = "games";
/// Self-play chunks, a folder a job: `chunks/{job}/{unit}-{lease}-{digest}.xqd`.
pub const CHUNKS_DIR: &str = "chunks";
/// Verification reports, a folder a job: `verification/{job}/{unit}-{lease}-{digest}.jsonl`.
pub const VERIFICATION_DIR: &str = "verification";
