//! Helpers shared by the integration tests.

use std::path::PathBuf;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use xq_engine::xiangqi::notation::parse_wxf;
use xq_engine::xiangqi::{Move, Position, fen, movegen};

/// The perft data file, one position a line: `FEN ;D1 n ;D2 n ...`.
pub fn perft_cases() -> Vec<(String, Vec<(u32, u64)>)> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/perft.epd");
    let text = std::fs::read_to_string(&path).expect("perft data file");
    text.lines()
        .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
        .map(|line| {
            let mut parts = line.split(';');
            let fen = parts.next().expect("a FEN").trim().to_owned();
            let counts = parts
                .map(|part| {
                    let (depth, nodes) = part.trim().split_once(' ').expect("D<depth> <nodes>");
                    (depth[1..].parse().expect("depth"), nodes.parse().expect("nodes"))
                })
                .collect();
            (fen, counts)
        })
        .collect()
}

/// Positions met in random games from the start position and from the perft
/// positions, with captures preferred so that middle games and endings appear.
pub fn random_positions(seed: u64, games: usize, max_plies: usize) -> Vec<Position> {
    let mut rng = StdRng::seed_from_u64(seed);
    let starts: Vec<Position> =
        perft_cases().iter().map(|(text, _)| fen::parse_composed(text).expect("perft FEN").0).collect();
    let mut positions = Vec::new();
    for game in 0..games {
        let mut position = starts[game % starts.len()].clone();
        for _ in 0..max_plies {
            positions.push(position.clone());
            let moves = movegen::legal_moves(&position);
            if moves.is_empty() {
                break;
            }
            let captures: Vec<_> = moves.iter().filter(|mv| position.piece_at(mv.to()).is_some()).collect();
            let mv = if !captures.is_empty() && rng.random_bool(0.4) {
                *captures[rng.random_range(0..captures.len())]
            } else {
                moves[rng.random_range(0..moves.len())]
            };
            position.make_move(mv);
        }
    }
    positions
}

/// The `xq-engine` binary built for these tests.
pub fn engine_binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_xq-engine"))
}

/// Feeds `input` to `xq-engine` on its standard input and returns what it printed.
pub fn converse(input: &str) -> String {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let mut child =
        Command::new(engine_binary()).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("start xq-engine");
    child.stdin.take().expect("stdin").write_all(input.as_bytes()).expect("write");
    let output = child.wait_with_output().expect("xq-engine output");
    assert!(output.status.success());
    String::from_utf8(output.stdout).expect("utf-8")
}

/// One of the rule book's Chapter 5 examples (tests/data/wxf-chapter5-examples.json),
/// its moves read in the book's notation from its position.
pub struct Chapter5Example {
    pub section: String,
    pub fen: String,
    pub start: Position,
    pub moves: Vec<Move>,
    /// `Win`, `Loss` or `Draw` for the side to move after the last move.
    pub ruling: String,
    /// Per side ("red", "black"), the pattern of natures the book names, if it does.
    pub natures: serde_json::Value,
}

pub fn chapter_5_examples() -> Vec<Chapter5Example> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/wxf-chapter5-examples.json");
    let examples: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(path).expect("examples")).expect("JSON");
    assert!(!examples.is_empty());
    examples
        .iter()
        .map(|example| {
            let section = example["section"].as_str().unwrap().to_owned();
            let fen = example["fen"].as_str().unwrap().to_owned();
            let start = Position::from_fen(&fen).expect("example FEN");
            let mut position = start.clone();
            let moves = example["moves"]
                .as_array()
                .unwrap()
                .iter()
                .map(|text| {
                    let text = text.as_str().unwrap();
                    let mv = parse_wxf(&position, text).unwrap_or_else(|e| panic!("{section}: {text}: {e}"));
                    position.make_move(mv);
                    mv
                })
                .collect();
            let ruling = example["ruling_for_side_to_move"].as_str().unwrap().to_owned();
            Chapter5Example { section, fen, start, moves, ruling, natures: example["natures"].clone() }
        })
        .collect()
}
