//! A game's verdicts: where a referee under each rule set ends it in play, the rule
//! sets following the game together as a [`Panel`]. The verification of games
//! ([`super::verify`]) and the metamorphic properties ([`super::metamorphic`]) both
//! compare verdicts.

use super::{Panel, RefereeConfig, RuleSet, Ruling};
use crate::xiangqi::{Move, Position};

/// Where and how a referee under one rule set ended a game.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// The rule set.
    pub rules: RuleSet,
    /// The ply (1-based) after which it ruled, and the ruling; `None`: not over.
    pub ended: Option<(usize, Ruling)>,
}

/// Each rule set's verdict on the game: where a referee under it ends the game in
/// play. Moves after the last rule set's ruling are not played.
pub fn verdicts(start: &Position, moves: &[Move], rule_sets: &[RuleSet]) -> Vec<Verdict> {
    let configs: Vec<RefereeConfig> = rule_sets.iter().map(|&rules| RefereeConfig::for_rules(rules)).collect();
    let mut panel = Panel::new(start.clone(), &configs);
    for &mv in moves {
        if panel.all_ended() || panel.play(mv).is_err() {
            break;
        }
    }
    rule_sets.iter().zip(panel.ended()).map(|(&rules, ended)| Verdict { rules, ended }).collect()
}
