//! The UCI loop. A malformed command is answered with `info string` and the reason;
//! the engine carries on.

use std::io::{BufRead, Write};

use xq_engine::xiangqi::notation::{Dialect, parse_uci};
use xq_engine::xiangqi::{Position, movegen, perft};

/// The engine's state between commands.
struct Session {
    position: Position,
}

pub fn run(input: impl BufRead, mut out: impl Write) -> anyhow::Result<()> {
    let mut session = Session {
        position: Position::startpos(),
    };
    for line in input.lines() {
        let line = match line {
            Ok(line) => line,
            Err(error) => {
                writeln!(out, "info string unreadable input: {error}")?;
                continue;
            }
        };
        let mut words = line.split_whitespace();
        let Some(command) = words.next() else {
            continue;
        };
        let rest: Vec<&str> = words.collect();
        match command {
            "quit" => break,
            "uci" => {
                writeln!(out, "id name xq-engine {}", env!("CARGO_PKG_VERSION"))?;
                writeln!(out, "id author the xq-cluster developers")?;
                writeln!(
                    out,
                    "option name UCI_Variant type combo default xiangqi var xiangqi"
                )?;
                writeln!(out, "uciok")?;
            }
            "isready" => writeln!(out, "readyok")?,
            "ucinewgame" | "stop" | "ponderhit" => {}
            "setoption" => {
                if let Err(message) = set_option(&rest) {
                    writeln!(out, "info string {message}")?;
                }
            }
            "position" => match parse_position(&rest) {
                Ok(position) => session.position = position,
                Err(message) => writeln!(out, "info string {message}")?,
            },
            "go" => session.go(&rest, &mut out)?,
            "d" => writeln!(out, "info string fen {}", session.position)?,
            other => writeln!(out, "info string unknown command '{other}'")?,
        }
        out.flush()?;
    }
    Ok(())
}

fn set_option(words: &[&str]) -> Result<(), String> {
    let text = words.join(" ");
    let (name, value) = text
        .strip_prefix("name ")
        .and_then(|rest| rest.split_once(" value "))
        .ok_or_else(|| format!("setoption expects 'name <id> value <x>', got '{text}'"))?;
    match (name.trim(), value.trim()) {
        ("UCI_Variant", "xiangqi") => Ok(()),
        ("UCI_Variant", other) => Err(format!("variant '{other}' is not supported; xiangqi is")),
        (other, _) => Err(format!("unknown option '{other}'")),
    }
}

/// `position startpos|fen <fen> [moves m1 m2 ...]`
fn parse_position(words: &[&str]) -> Result<Position, String> {
    let moves_at = words
        .iter()
        .position(|&w| w == "moves")
        .unwrap_or(words.len());
    let (setup, moves) = words.split_at(moves_at);
    let mut position = match setup {
        ["startpos"] => Position::startpos(),
        ["fen", fen @ ..] if !fen.is_empty() => crate::composed_position(&fen.join(" "))
            .map_err(|error| format!("invalid FEN: {error}"))?,
        _ => {
            return Err(
                "position expects 'startpos' or 'fen <fen>', then optionally 'moves ...'"
                    .to_owned(),
            );
        }
    };
    for (ply, text) in moves.iter().skip(1).enumerate() {
        let mv = parse_uci(&position, text, Dialect::ZeroBased)
            .map_err(|error| format!("move {} of the list: {error}", ply + 1))?;
        position.make_move(mv);
    }
    Ok(position)
}

impl Session {
    fn go(&mut self, words: &[&str], out: &mut impl Write) -> anyhow::Result<()> {
        if let ["perft", depth] = words {
            let Ok(depth) = depth.parse::<u32>() else {
                writeln!(
                    out,
                    "info string perft depth '{depth}' is not a whole number"
                )?;
                return Ok(());
            };
            let split = perft::divide(&mut self.position, depth);
            for (mv, count) in &split {
                writeln!(out, "{mv}: {count}")?;
            }
            let total: u64 = split.iter().map(|(_, count)| count).sum();
            writeln!(out)?;
            writeln!(out, "Nodes searched: {total}")?;
            return Ok(());
        }
        // The search arrives with its own issue; until then any legal move.
        match movegen::legal_moves(&self.position).first() {
            Some(mv) => writeln!(out, "bestmove {mv}")?,
            None => writeln!(out, "bestmove (none)")?,
        }
        Ok(())
    }
}
