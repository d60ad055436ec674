//! `xq-engine verify`: games of PGN files under several rule sets; a JSON line for
//! each game where they part (or that cannot be replayed), then a summary line.

use std::io::Write;
use std::time::Instant;

use anyhow::Context;
use serde_json::json;
use xq_engine::xiangqi::pgn::parse_pgn_bytes;
use xq_engine::xiangqi::rules::RuleSet;
use xq_engine::xiangqi::rules::verify::{Tally, check_game};

/// Verifies every game of `paths` under `rule_sets` (none: only replays the moves).
pub fn verify_files(paths: &[std::path::PathBuf], rule_sets: &[RuleSet], out: &mut impl Write) -> anyhow::Result<()> {
    let started = Instant::now();
    let mut tally = Tally::default();
    for path in paths {
        let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
        let parsed = parse_pgn_bytes(&bytes).with_context(|| format!("in {}", path.display()))?;
        for (index, game) in parsed.iter().enumerate() {
            let label = format!("{} game {}", path.display(), index + 1);
            if let Some(line) = check_game(game, rule_sets, &label, &mut tally, None).map_err(anyhow::Error::msg)? {
                writeln!(out, "{line}")?;
            }
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    let mut summary = tally.to_json();
    summary["seconds"] = json!(seconds);
    summary["games_per_second"] = json!(tally.games as f64 / seconds.max(1e-9));
    writeln!(out, "{}", json!({ "summary": summary }))?;
    Ok(())
}
