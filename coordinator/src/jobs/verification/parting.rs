//! The games where the rule sets part, read back from the reports as PGN with their
//! moves and verdicts.

use serde_json::Value;
use xq_engine::xiangqi::pgn::Movetext;

/// A stored report's game lines, without its tally.
pub fn report_games(report: &str) -> String {
    let mut lines: Vec<&str> = report.lines().collect();
    lines.pop();
    lines.iter().map(|line| format!("{line}\n")).collect()
}

/// Report lines' parting games as PGN, one after the other ([`parting_pgn`]).
pub fn parting_pgns(lines: &str, job: u64) -> String {
    lines.lines().filter_map(|line| parting_pgn(line, job)).collect()
}

/// A parting game's report line as PGN: its start and moves, the verdicts in a comment
/// before the moves; `None` for a line without moves (a game that could not be
/// replayed).
pub fn parting_pgn(line: &str, job: u64) -> Option<String> {
    let value: Value = serde_json::from_str(line).ok()?;
    let moves: Vec<&str> = value.get("moves")?.as_array()?.iter().filter_map(Value::as_str).collect();
    let start = value.get("start")?.as_str()?;
    let quoted = |text: &str| text.replace('\\', "\\\\").replace('"', "\\\"");
    let mut text = format!(
        "[Event \"verification {job}\"]\n[Site \"{}\"]\n[Result \"*\"]\n[SetUp \"1\"]\n[FEN \"{}\"]\n\n",
        quoted(value.get("game")?.as_str()?),
        quoted(start)
    );
    let verdicts: Vec<String> = value
        .get("verdicts")?
        .as_array()?
        .iter()
        .map(|v| match v["ply"].as_u64() {
            Some(ply) => format!(
                "{}: {} at ply {ply}, {} ({})",
                v["rules"].as_str().unwrap_or("?"),
                v["result"].as_str().unwrap_or("?"),
                v["reason"].as_str().unwrap_or("?"),
                v["article"].as_str().unwrap_or("?")
            ),
            None => format!("{}: no ruling", v["rules"].as_str().unwrap_or("?")),
        })
        .collect();
    let mut movetext = Movetext::default();
    movetext.push(&format!("{{{}}}", verdicts.join("; ").replace(['{', '}'], "")));
    let black_first = start.split_whitespace().nth(1) == Some("b");
    for (index, mv) in moves.iter().enumerate() {
        let ply = index + usize::from(black_first);
        match (ply % 2, index) {
            (0, _) => movetext.push(&format!("{}. {mv}", ply / 2 + 1)),
            (_, 0) => movetext.push(&format!("{}... {mv}", ply / 2 + 1)),
            _ => movetext.push(mv),
        }
    }
    movetext.push("*");
    text.push_str(&movetext.finish());
    text.push_str("\n\n");
    Some(text)
}
