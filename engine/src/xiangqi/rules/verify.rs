//! Rule verification: a game replayed under several rule sets, each ending it where a
//! referee under that set would (the first ruling of play, [`ruled_in_play`], which
//! the judge reports too), and the ways the rule sets part. `xq-engine verify` runs it
//! over PGN files; a verification job runs the same function on each of its games.

use super::{Referee, RefereeConfig, RuleSet, Ruling};
use crate::xiangqi::IllegalMove;
use crate::xiangqi::notation::{Dialect, MoveTextError, parse_uci};
use crate::xiangqi::{Move, Position};

/// Where and how a referee under one rule set ended a game.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// The rule set.
    pub rules: RuleSet,
    /// The ply (1-based) after which it ruled, and the ruling; `None`: not over.
    pub ended: Option<(usize, Ruling)>,
}

/// How two rule sets' verdicts on one game differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Disagreement {
    /// One ends the game; the other lets it go on to its last move.
    OnlyOneRules,
    /// Both end it, at different plies.
    DifferentPly,
    /// Both end it at the same ply, with different results.
    DifferentOutcome,
    /// Same ply, same result, for a different reason.
    DifferentReason,
}

impl Disagreement {
    /// How reports name it.
    pub fn name(self) -> &'static str {
        match self {
            Disagreement::OnlyOneRules => "only one rules",
            Disagreement::DifferentPly => "different ply",
            Disagreement::DifferentOutcome => "different result",
            Disagreement::DifferentReason => "different reason",
        }
    }
}

/// A referee following a game in play, remembering the first ruling it made: where a
/// referee would have ended the game. The judge plays every move through one (and
/// reports what it remembers as `ended`); [`ruled_in_play`] stops at the ruling.
pub struct InPlay {
    referee: Referee,
    plies: usize,
    ended: Option<(usize, Ruling)>,
}

impl InPlay {
    /// A game from `start` under `config`; a start position that is already over is
    /// ruled at ply 0.
    pub fn new(start: Position, config: RefereeConfig) -> InPlay {
        let referee = Referee::new(start, config);
        let ended = referee.ruling().map(|ruling| (0, ruling));
        InPlay { referee, plies: 0, ended }
    }

    /// Plays `mv`, remembering the ruling it brings if it is the first.
    pub fn play(&mut self, mv: Move) -> Result<(), IllegalMove> {
        let ruling = self.referee.play(mv)?;
        self.plies += 1;
        if self.ended.is_none() {
            self.ended = ruling.map(|ruling| (self.plies, ruling));
        }
        Ok(())
    }

    /// The first ruling: its ply (1-based; 0 for the start) and the ruling.
    pub fn ended(&self) -> Option<(usize, Ruling)> {
        self.ended
    }

    /// The referee, after the moves played.
    pub fn referee(&self) -> &Referee {
        &self.referee
    }
}

/// The verdict of a referee under `config` as play proceeds: the first ply after which
/// it rules, and its ruling. Moves after that are not played.
pub fn ruled_in_play(start: &Position, moves: &[Move], config: RefereeConfig) -> Option<(usize, Ruling)> {
    let mut game = InPlay::new(start.clone(), config);
    for &mv in moves {
        if game.ended().is_some() || game.play(mv).is_err() {
            break;
        }
    }
    game.ended()
}

/// The moves of a game in UCI coordinates (ranks 0..9), checked against the rules of
/// movement from `start`; the ply (1-based) and the error of the first that is not
/// legal.
pub fn parse_moves(start: &Position, texts: &[String]) -> Result<Vec<Move>, (usize, MoveTextError)> {
    let mut position = start.clone();
    let mut moves = Vec::with_capacity(texts.len());
    for (index, text) in texts.iter().enumerate() {
        let mv = parse_uci(&position, text, Dialect::ZeroBased).map_err(|error| (index + 1, error))?;
        position.make_move(mv);
        moves.push(mv);
    }
    Ok(moves)
}

/// Each rule set's verdict on the game.
pub fn verdicts(start: &Position, moves: &[Move], rule_sets: &[RuleSet]) -> Vec<Verdict> {
    rule_sets
        .iter()
        .map(|&rules| Verdict { rules, ended: ruled_in_play(start, moves, RefereeConfig::for_rules(rules)) })
        .collect()
}

/// How verdicts `a` and `b` differ, if they do.
pub fn disagreement(a: &Verdict, b: &Verdict) -> Option<Disagreement> {
    match (a.ended, b.ended) {
        (None, None) => None,
        (Some(_), None) | (None, Some(_)) => Some(Disagreement::OnlyOneRules),
        (Some((ply_a, _)), Some((ply_b, _))) if ply_a != ply_b => Some(Disagreement::DifferentPly),
        (Some((_, x)), Some((_, y))) if x.outcome != y.outcome => Some(Disagreement::DifferentOutcome),
        (Some((_, x)), Some((_, y))) if x.reason != y.reason => Some(Disagreement::DifferentReason),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xiangqi::rules::{Outcome, Reason};

    fn moves(start: &Position, text: &str) -> Vec<Move> {
        let texts: Vec<String> = text.split_whitespace().map(str::to_owned).collect();
        parse_moves(start, &texts).unwrap()
    }

    #[test]
    fn rule_sets_end_a_game_where_their_referees_would() {
        // A chariot chasing a lone cannon: a loss at the third occurrence under WXF and
        // the Asian rules, allowed by the computer rules until the fourth (a draw).
        let start = Position::from_fen("4k4/9/9/9/9/9/9/9/1R7/c2K5 w").unwrap();
        let game = moves(&start, &"b1a1 a0b0 a1b1 b0a0 ".repeat(4));
        let found = verdicts(&start, &game, &[RuleSet::Wxf, RuleSet::Asian, RuleSet::Computer]);
        let ended: Vec<_> = found.iter().map(|v| v.ended.map(|(ply, r)| (ply, r.outcome, r.reason))).collect();
        let chase = Some((8, Outcome::Win(crate::color::Color::Black), Reason::PerpetualChase));
        assert_eq!(ended, [chase, chase, Some((12, Outcome::Draw, Reason::Repetition))]);
        assert_eq!(disagreement(&found[0], &found[1]), None);
        assert_eq!(disagreement(&found[0], &found[2]), Some(Disagreement::DifferentPly));
        // Cut before the computer rules' draw: only one rules.
        let short = &game[..10];
        let found = verdicts(&start, short, &[RuleSet::Wxf, RuleSet::Computer]);
        assert_eq!(disagreement(&found[0], &found[1]), Some(Disagreement::OnlyOneRules));
    }

    #[test]
    fn an_illegal_move_is_named_by_its_ply() {
        let start = Position::startpos();
        let texts: Vec<String> = ["h2e2", "h9g7", "e2e9"].iter().map(|s| (*s).to_owned()).collect();
        assert_eq!(parse_moves(&start, &texts).unwrap_err().0, 3);
    }
}
