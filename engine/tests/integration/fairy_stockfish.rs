//! Differential test: our legal moves against Debian's Fairy-Stockfish on thousands
//! of positions from random games. Fairy-Stockfish writes ranks 1..10 in plain UCI.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use xq_engine::xiangqi::notation::{Dialect, format_uci};
use xq_engine::xiangqi::{Position, Square, movegen};

use crate::common::random_positions;

const FAIRY_STOCKFISH: &str = "/usr/games/fairy-stockfish";

/// A running Fairy-Stockfish set to Xiangqi.
pub struct FairyStockfish {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl FairyStockfish {
    pub fn start() -> Self {
        assert!(
            Path::new(FAIRY_STOCKFISH).exists(),
            "{FAIRY_STOCKFISH} is missing: the README's test command installs it (apt package fairy-stockfish)"
        );
        let mut child = Command::new(FAIRY_STOCKFISH)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start fairy-stockfish");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut engine = FairyStockfish { child, stdin, stdout };
        engine.send("uci\nsetoption name UCI_Variant value xiangqi\nisready");
        engine.read_until(|line| line == "readyok");
        engine
    }

    fn send(&mut self, text: &str) {
        writeln!(self.stdin, "{text}").expect("write to fairy-stockfish");
        self.stdin.flush().expect("flush");
    }

    fn read_until(&mut self, done: impl Fn(&str) -> bool) -> Vec<String> {
        let mut lines = Vec::new();
        loop {
            let mut line = String::new();
            let n = self.stdout.read_line(&mut line).expect("read from fairy-stockfish");
            assert!(n > 0, "fairy-stockfish closed its output");
            let line = line.trim().to_owned();
            if done(&line) {
                return lines;
            }
            lines.push(line);
        }
    }

    /// Its legal moves in the position, in canonical coordinates (ranks 0..9), sorted.
    pub fn legal_moves(&mut self, position: &Position) -> Vec<String> {
        self.send(&format!("position fen {position}\ngo perft 1"));
        let lines = self.read_until(|line| line.starts_with("Nodes searched"));
        let mut moves: Vec<String> = lines
            .iter()
            .filter_map(|line| line.split_once(':').map(|(mv, _)| mv))
            .map(|mv| {
                let split = mv[1..].find(|c: char| c.is_ascii_alphabetic()).expect("two squares") + 1;
                let from = Square::parse_with_label(&mv[..split], 1).expect("from square");
                let to = Square::parse_with_label(&mv[split..], 1).expect("to square");
                format!("{from}{to}")
            })
            .collect();
        moves.sort();
        moves
    }

    /// The length of the mate Fairy-Stockfish finds for the side to move in `position`
    /// within `moves` moves and `seconds`, `None` when it finds none in that time.
    pub fn mate_within(&mut self, position: &Position, moves: i32, seconds: u32) -> Option<i32> {
        self.send(&format!("ucinewgame\nposition fen {position}\ngo mate {moves} movetime {}", seconds * 1000));
        let lines = self.read_until(|line| line.starts_with("bestmove"));
        lines.iter().rev().find_map(|line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            let at = words.windows(2).position(|pair| pair == ["score", "mate"])?;
            words.get(at + 2)?.parse().ok()
        })
    }
}

impl Drop for FairyStockfish {
    fn drop(&mut self) {
        let _ = writeln!(self.stdin, "quit");
        let _ = self.child.wait();
    }
}

#[test]
fn legal_moves_agree_with_fairy_stockfish_on_random_positions() {
    let mut reference = FairyStockfish::start();
    let positions = random_positions(0x5EED_F00D, 48, 110);
    assert!(positions.len() > 4000, "only {} positions", positions.len());
    for position in &positions {
        let mut ours: Vec<String> =
            movegen::legal_moves(position).iter().map(|&mv| format_uci(mv, Dialect::ZeroBased)).collect();
        ours.sort();
        assert_eq!(ours, reference.legal_moves(position), "{position}");
    }
}
