//! `xq-engine verify`: games of PGN files, and generated rule-hard games, under several
//! rule sets; a JSON line for each game where they part, break a metamorphic property
//! or cannot be replayed, then a summary line.

use std::io::Write;
use std::ops::Range;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use serde_json::json;
use xq_engine::xiangqi::pgn::parse_pgn_bytes;
use xq_engine::xiangqi::rules::RuleSet;
use xq_engine::xiangqi::rules::verify::{Tally, check_game, check_game_metamorphic, check_hard_game};

/// The games to verify and what to check on them.
pub struct Sources {
    /// PGN files.
    pub pgn: Vec<PathBuf>,
    /// Numbers of the rule-hard games to generate.
    pub generated: Range<u64>,
    /// Whether to check the metamorphic properties.
    pub metamorphic: bool,
}

/// Verifies every game of `sources` under `rule_sets` (none: only replays the moves).
pub fn verify(sources: &Sources, rule_sets: &[RuleSet], out: &mut impl Write) -> anyhow::Result<()> {
    let started = Instant::now();
    let mut tally = Tally::default();
    for path in &sources.pgn {
        let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
        let parsed = parse_pgn_bytes(&bytes).with_context(|| format!("in {}", path.display()))?;
        for (index, game) in parsed.iter().enumerate() {
            let label = format!("{} game {}", path.display(), index + 1);
            let line = if sources.metamorphic {
                check_game_metamorphic(game, rule_sets, &label, &mut tally)
            } else {
                check_game(game, rule_sets, &label, &mut tally, None).map_err(anyhow::Error::msg)?
            };
            if let Some(line) = line {
                writeln!(out, "{line}")?;
            }
        }
    }
    for number in sources.generated.clone() {
        if let Some(line) = check_hard_game(number, rule_sets, sources.metamorphic, &mut tally) {
            writeln!(out, "{line}")?;
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    let mut summary = tally.to_json();
    summary["seconds"] = json!(seconds);
    summary["games_per_second"] = json!(tally.games as f64 / seconds.max(1e-9));
    writeln!(out, "{}", json!({ "summary": summary }))?;
    Ok(())
}
