//! Fairy-Stockfish's rules as a verification job's reference: pyffish, in a Python the
//! worker is given (`xq-worker connect --pyffish PYTHON`), asked game by game through a
//! small script (pyffish_verdicts.py) on its standard input. Only the plies where a
//! ruling can fall are asked about: pyffish replays the moves from the start on every
//! call.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde_json::{Value, json};
use xq_engine::xiangqi::notation::{Dialect, format_uci};
use xq_engine::xiangqi::rules::Outcome;
use xq_engine::xiangqi::rules::verify::Reference;
use xq_engine::xiangqi::{Move, Position, fen};

const SCRIPT: &str = include_str!("pyffish_verdicts.py");

/// The name capabilities and verification jobs give this reference.
pub const PYFFISH: &str = "pyffish";

/// A running pyffish helper.
pub struct Pyffish {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Pyffish {
    /// Whether `python` can import pyffish.
    pub fn available(python: &Path) -> bool {
        Command::new(python)
            .args(["-c", "import pyffish"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success())
    }

    /// Starts the helper under `python`.
    pub fn start(python: &Path) -> std::io::Result<Pyffish> {
        let mut child = Command::new(python)
            .args(["-c", SCRIPT])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()?;
        let stdin = child.stdin.take().expect("piped");
        let stdout = BufReader::new(child.stdout.take().expect("piped"));
        Ok(Pyffish { child, stdin, stdout })
    }
}

impl Drop for Pyffish {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Reference for Pyffish {
    fn name(&self) -> &'static str {
        xq_engine::xiangqi::rules::verify::FAIRY_STOCKFISH
    }

    fn verdict(
        &mut self,
        start: &Position,
        moves: &[Move],
        candidates: &[usize],
    ) -> Result<Option<(usize, Outcome)>, String> {
        let texts: Vec<String> = moves.iter().map(|&mv| format_uci(mv, Dialect::OneBased)).collect();
        let query = json!({"fen": fen::to_fen(start), "moves": texts, "plies": candidates});
        writeln!(self.stdin, "{query}").and_then(|()| self.stdin.flush()).map_err(|e| format!("pyffish: {e}"))?;
        let mut line = String::new();
        match self.stdout.read_line(&mut line) {
            Ok(0) => return Err("pyffish: the helper ended".to_owned()),
            Ok(_) => {}
            Err(e) => return Err(format!("pyffish: {e}")),
        }
        let answer: Value = serde_json::from_str(&line).map_err(|e| format!("pyffish: '{}': {e}", line.trim()))?;
        let (Some(ply), Some(value)) = (answer["ply"].as_u64(), answer["value"].as_i64()) else { return Ok(None) };
        let ply = ply as usize;
        // The side to move after `ply` plies, whose value pyffish gives.
        let mover = if ply.is_multiple_of(2) { start.side_to_move() } else { !start.side_to_move() };
        let outcome = match value.signum() {
            1 => Outcome::Win(mover),
            -1 => Outcome::Win(!mover),
            _ => Outcome::Draw,
        };
        Ok(Some((ply, outcome)))
    }
}
