//! `xq-engine judge`: rules games given as FEN and moves, and prints one JSON object per
//! game with the result, the reason, the article and each ply's nature.

use std::io::{BufRead, Write};

use anyhow::{Context, bail};
use serde_json::{Value, json};
use xq_engine::xiangqi::notation::{Dialect, parse_uci};
use xq_engine::xiangqi::rules::identity::Identities;
use xq_engine::xiangqi::rules::nature::{Nature, classify};
use xq_engine::xiangqi::rules::{Referee, RefereeConfig, RuleSet};
use xq_engine::xiangqi::{Move, Position};

/// One game to rule.
pub struct Game {
    pub fen: Option<String>,
    pub moves: Vec<String>,
    pub rules: RuleSet,
}

/// Rules `game`: the cycle its last move closed if any, else any other ruling it reached.
pub fn judge(game: &Game) -> anyhow::Result<Value> {
    let start = match &game.fen {
        Some(text) => {
            crate::composed_position(text).with_context(|| format!("invalid FEN '{text}'"))?
        }
        None => Position::startpos(),
    };
    let config = RefereeConfig {
        rules: game.rules,
        ..RefereeConfig::default()
    };
    let mut referee = Referee::new(start.clone(), config);
    let mut ids = Identities::new(&start);
    let mut plies = Vec::with_capacity(game.moves.len());
    for (index, text) in game.moves.iter().enumerate() {
        let before = referee.position().clone();
        let mv = parse_uci(&before, text, Dialect::ZeroBased)
            .with_context(|| format!("ply {} ({text})", index + 1))?;
        plies.push(ply_json(&classify(&before, &ids, mv), mv));
        ids.apply(mv);
        referee
            .play(mv)
            .with_context(|| format!("ply {} ({text})", index + 1))?;
    }
    let ruling = referee.rule_last_cycle().or(referee.ruling());
    Ok(json!({
        "result": ruling.map_or("*", |r| r.outcome.pgn()),
        "reason": ruling.map(|r| r.reason.to_string()),
        "article": ruling.map(|r| r.article),
        "plies": plies,
    }))
}

fn ply_json(nature: &Nature, mv: Move) -> Value {
    let kind = if nature.check {
        "check"
    } else if nature.chases.is_empty() {
        "idle"
    } else {
        "chase"
    };
    let mut targets: Vec<_> = nature
        .chases
        .iter()
        .map(|t| (t.target_square, t.target_kind))
        .collect();
    targets.dedup();
    let chases: Vec<Value> = targets
        .into_iter()
        .map(|(square, kind)| {
            let by: Vec<String> = nature
                .chases
                .iter()
                .filter(|t| t.target_square == square)
                .map(|t| format!("{} {}", t.attacker_kind.name(), t.attacker_square))
                .collect();
            json!({"target": format!("{} {square}", kind.name()), "by": by})
        })
        .collect();
    json!({"move": mv.to_string(), "nature": kind, "chases": chases})
}

/// Reads `{"fen": ..., "moves": [...], "rules": ...}` lines and rules each; a line
/// that cannot be ruled gets `{"error": ...}` and the batch goes on.
pub fn judge_batch(
    input: impl BufRead,
    mut out: impl Write,
    default_rules: RuleSet,
) -> anyhow::Result<()> {
    for (number, line) in input.lines().enumerate() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let answer = game_from_json(&line, default_rules)
            .and_then(|game| judge(&game))
            .unwrap_or_else(|error| json!({"error": format!("line {}: {error:#}", number + 1)}));
        writeln!(out, "{answer}")?;
    }
    Ok(())
}

fn game_from_json(line: &str, default_rules: RuleSet) -> anyhow::Result<Game> {
    let value: Value = serde_json::from_str(line).context("not a JSON object")?;
    let fen = match &value["fen"] {
        Value::Null => None,
        Value::String(text) => Some(text.clone()),
        _ => bail!("\"fen\" must be a string"),
    };
    let moves = match &value["moves"] {
        Value::Null => Vec::new(),
        Value::Array(items) => items
            .iter()
            .map(|m| {
                m.as_str()
                    .map(str::to_owned)
                    .context("\"moves\" must hold strings")
            })
            .collect::<anyhow::Result<_>>()?,
        Value::String(text) => text.split_whitespace().map(str::to_owned).collect(),
        _ => bail!("\"moves\" must be a list of strings"),
    };
    let rules = match &value["rules"] {
        Value::Null => default_rules,
        Value::String(name) => name.parse()?,
        _ => bail!("\"rules\" must be a string"),
    };
    Ok(Game { fen, moves, rules })
}
