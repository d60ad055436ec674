//! `bench`: a fixed search over fixed positions whose node count is the engine's
//! signature (workers compare it before a test) and whose speed is its benchmark.

pub mod positions;

use std::time::{Duration, Instant};

use crate::bench::positions::POSITIONS;
use crate::xiangqi::Position;
use crate::xiangqi::search::limits::Limits;
use crate::xiangqi::search::{SearchOptions, Shared, search};

/// The default depth.
pub const DEFAULT_DEPTH: i32 = 10;

/// What a bench run measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BenchResult {
    /// Nodes over all positions: the signature.
    pub nodes: u64,
    /// Time taken.
    pub elapsed: Duration,
}

/// Searches every bench position to `depth` with one thread and a fresh 16 MiB table,
/// with the handcrafted evaluation: the signature.
pub fn run(depth: i32) -> BenchResult {
    run_with(depth, &SearchOptions::default())
}

/// [`run`] with other search options (an NNUE net, for its speed).
pub fn run_with(depth: i32, options: &SearchOptions) -> BenchResult {
    let started = Instant::now();
    let mut nodes = 0;
    let limits = Limits { depth: Some(depth), ..Limits::default() };
    for fen in POSITIONS {
        let position = Position::from_fen(fen).expect("bench positions are valid");
        let shared = Shared::new(16);
        nodes += search(&shared, &position, &[], &limits, options, |_| {}).nodes;
    }
    BenchResult { nodes, elapsed: started.elapsed() }
}

/// The signature in an engine's `bench` output: the number after the last "Nodes
/// searched" (Stockfish's format, which ours and most engines print).
pub fn parse_signature(output: &str) -> Option<u64> {
    output
        .lines()
        .filter_map(|l| l.trim().strip_prefix("Nodes searched"))
        .filter_map(|rest| rest.trim_start_matches([' ', ':']).trim().parse().ok())
        .next_back()
}

/// An engine's bench signature could not be read.
#[derive(Debug, thiserror::Error)]
pub enum SignatureError {
    /// The program did not run.
    #[error("running {program} bench: {error}")]
    Run {
        /// The program.
        program: String,
        /// Why.
        error: std::io::Error,
    },
    /// It ran but printed no signature.
    #[error("{0} bench printed no 'Nodes searched'")]
    Missing(String),
}

/// Runs `<binary> bench` (the engine's default bench) and reads its signature: what a
/// test's submitter records and every worker checks before playing.
pub fn signature_of(binary: &std::path::Path) -> Result<u64, SignatureError> {
    let mut command = std::process::Command::new(binary);
    command.arg("bench");
    signature_from(command, &binary.display().to_string())
}

/// Runs `command`, an engine's `bench` however it is started (a worker's starts in its
/// sandbox), and reads its signature; `program` names it in errors.
pub fn signature_from(mut command: std::process::Command, program: &str) -> Result<u64, SignatureError> {
    let output = command.output().map_err(|error| SignatureError::Run { program: program.to_owned(), error })?;
    let text = String::from_utf8_lossy(&output.stdout).into_owned() + &String::from_utf8_lossy(&output.stderr);
    parse_signature(&text).ok_or(SignatureError::Missing(program.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_are_read_in_either_spacing() {
        assert_eq!(parse_signature("info x\nNodes searched  : 721742\nNodes/second: 5\n"), Some(721742));
        assert_eq!(parse_signature("Nodes searched: 12\nNodes searched: 34"), Some(34));
        assert_eq!(parse_signature("no bench here"), None);
    }

    #[test]
    fn bench_positions_are_reachable_positions() {
        for fen in POSITIONS {
            assert!(Position::from_fen(fen).is_ok(), "{fen}");
        }
    }
}
