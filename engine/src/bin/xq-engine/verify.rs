//! `xq-engine verify`: games of PGN files under several rule sets; a JSON line for
//! each game where they part, then a summary line.

use std::collections::BTreeMap;
use std::io::Write;
use std::time::Instant;

use anyhow::Context;
use serde_json::{Value, json};
use xq_engine::xiangqi::pgn::parse_pgn;
use xq_engine::xiangqi::rules::RuleSet;
use xq_engine::xiangqi::rules::verify::{Verdict, disagreement, parse_moves, verdicts};
use xq_engine::xiangqi::{Position, fen};

fn verdict_json(verdict: &Verdict) -> Value {
    match verdict.ended {
        Some((ply, ruling)) => json!({
            "rules": verdict.rules.name(),
            "ply": ply,
            "result": ruling.outcome.pgn(),
            "reason": ruling.reason.to_string(),
            "article": ruling.article,
        }),
        None => json!({"rules": verdict.rules.name(), "ply": null, "result": "*"}),
    }
}

/// Verifies every game of `paths` under `rule_sets` (none: only replays the moves).
pub fn verify_files(paths: &[std::path::PathBuf], rule_sets: &[RuleSet], out: &mut impl Write) -> anyhow::Result<()> {
    let started = Instant::now();
    let (mut games, mut refused, mut parting) = (0u64, 0u64, 0u64);
    let mut by_kind: BTreeMap<String, u64> = BTreeMap::new();
    let mut by_articles: BTreeMap<String, u64> = BTreeMap::new();
    for path in paths {
        let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
        let parsed = parse_pgn(&text).with_context(|| format!("in {}", path.display()))?;
        for (index, game) in parsed.iter().enumerate() {
            games += 1;
            let place = format!("{} game {}", path.display(), index + 1);
            let start = match game.tag("FEN").map(fen::parse_composed) {
                None => Position::startpos(),
                Some(Ok((position, _))) => position,
                Some(Err(error)) => {
                    refused += 1;
                    writeln!(out, "{}", json!({"game": place, "error": format!("FEN: {error}")}))?;
                    continue;
                }
            };
            let moves = match parse_moves(&start, &game.moves) {
                Ok(moves) => moves,
                Err((ply, error)) => {
                    refused += 1;
                    writeln!(out, "{}", json!({"game": place, "error": format!("ply {ply}: {error}")}))?;
                    continue;
                }
            };
            let found = verdicts(&start, &moves, rule_sets);
            let mut kinds = Vec::new();
            for (i, a) in found.iter().enumerate() {
                for b in &found[i + 1..] {
                    if let Some(kind) = disagreement(a, b) {
                        let article = |v: &Verdict| v.ended.map_or("none", |(_, r)| r.article);
                        kinds.push(format!("{} vs {}: {}", a.rules.name(), b.rules.name(), kind.name()));
                        *by_articles.entry(format!("{} / {}", article(a), article(b))).or_default() += 1;
                    }
                }
            }
            if kinds.is_empty() {
                continue;
            }
            parting += 1;
            for kind in &kinds {
                *by_kind.entry(kind.clone()).or_default() += 1;
            }
            let first_end = found.iter().filter_map(|v| v.ended.map(|(ply, _)| ply)).min().unwrap_or(0);
            let mut position = start.clone();
            for &mv in &moves[..first_end.saturating_sub(1)] {
                position.make_move(mv);
            }
            let verdicts: Vec<Value> = found.iter().map(verdict_json).collect();
            let line = json!({
                "game": place,
                "start": fen::to_fen(&start),
                "moves": game.moves,
                "before_first_ruling": fen::to_fen(&position),
                "verdicts": verdicts,
                "kinds": kinds,
            });
            writeln!(out, "{line}")?;
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    let summary = json!({
        "summary": {
            "games": games,
            "refused": refused,
            "parting": parting,
            "seconds": seconds,
            "games_per_second": games as f64 / seconds.max(1e-9),
            "by_kind": by_kind,
            "by_articles": by_articles,
        }
    });
    writeln!(out, "{summary}")?;
    Ok(())
}
