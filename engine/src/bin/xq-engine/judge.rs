//! `xq-engine judge`: one JSON line per game on stdout, warnings on stderr.

use std::io::{BufRead, Write};

use anyhow::Context;
use serde_json::json;
use xq_engine::xiangqi::pgn::parse_pgn_bytes;
use xq_engine::xiangqi::rules::judge::{JudgeRequest, judge};
use xq_engine::xiangqi::rules::{RuleSet, ViolationTiming};

/// Rules one game and prints it; an unplayable game is an error (non-zero exit).
pub fn judge_one(request: &JudgeRequest, out: &mut impl Write) -> anyhow::Result<()> {
    let (verdict, warnings) = judge(request)?;
    for warning in warnings {
        eprintln!("warning: unreachable position: {warning}");
    }
    writeln!(out, "{verdict}")?;
    Ok(())
}

/// Rules every game of a PGN file; a game without a `[ViolationTiming]` tag of its own is
/// ruled with `timing`.
pub fn judge_pgn(
    path: &std::path::Path,
    rules: RuleSet,
    timing: ViolationTiming,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    let games = parse_pgn_bytes(&bytes).with_context(|| format!("in {}", path.display()))?;
    for (index, game) in games.iter().enumerate() {
        judge_one(&JudgeRequest::from_pgn(game, rules, timing), out).with_context(|| format!("game {}", index + 1))?;
    }
    Ok(())
}

/// Rules JSON lines from `input` (`rules` and `timing` where a line names none); a line
/// that cannot be ruled gets `{"error": ...}` and the batch goes on.
pub fn judge_batch(
    input: impl BufRead,
    out: &mut impl Write,
    rules: RuleSet,
    timing: ViolationTiming,
) -> anyhow::Result<()> {
    for (index, line) in input.lines().enumerate() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let answer = JudgeRequest::from_json(&line, rules, timing).and_then(|request| judge(&request));
        match answer {
            Ok((verdict, _)) => writeln!(out, "{verdict}")?,
            Err(error) => writeln!(out, "{}", json!({"error": format!("line {}: {error}", index + 1)}))?,
        }
    }
    Ok(())
}
