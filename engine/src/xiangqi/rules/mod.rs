//! The tournament rules arbiter: classifies moves (check, chase) and rules games:
//! checkmate and stalemate, repetitions (perpetual check and chase), and the draw by the
//! natural move count.
//!
//! # Reading of the rule books
//! - A repetition is a position recurring with the same side to move. The moves of its
//!   threefold repetition are judged (17.3.G: the position "repeated consecutively for
//!   three or more times"): those since the earliest of the position's last three
//!   occurrences (its last two when it has occurred twice). Its occurrences are
//!   counted for the repetition being made: a cycle that repeats neither of the two
//!   before it starts the count again (the players changed their moves, 3.2.B;
//!   `referee::Repetition`). So a perpetual check or chase that follows earlier,
//!   allowed visits to the position, however many, is judged on its own cycles, and
//!   two cycles alternating from one position (two chariots chasing two cannons in
//!   turn, Diagram 80) are judged together. Each side's moves in the window
//!   are judged (WXF 19.8-19.10, Article 20):
//!   - every move a check: perpetual check, which loses under all circumstances (20.1),
//!     also against a perpetual chase (3.1.H); both sides checking perpetually draw;
//!   - every move chasing one and the same enemy piece (see [`nature`]): a perpetual
//!     chase, forbidden (20.3), unless on some move only a king or pawn chases it
//!     (20.9; Section 25: a king or pawn helped by another piece on every move is a
//!     combined chase and forbidden);
//!     chasing different pieces on different moves is allowed (20.4); a check among
//!     the moves breaks the chase (20.2: alternate check and chase is allowed);
//!   - the sole violator loses; both violating alike draw (3.2.C); no violation is a
//!     draw by repetition (3.2.B).
//! - When: a forbidden perpetual is ruled at the third occurrence of the position
//!   (19.8: "a threefold repetition") by default, where the books warn first and rule
//!   the loss a cycle later (3.1.C, 17.3.G.III; the Asian Section 4 rule 3 later still):
//!   see [`ViolationTiming`] for both and why the default is the former. A repetition
//!   without violation is drawn at the fourth occurrence (3.2.B; 17.3.G.II: announced
//!   at the threefold, drawn if another cycle is repeated). Both are settings of
//!   [`Referee`]; the judge command and the search rule any repetition at once.
//! - Natural move count (Article 8, 3.2.D): a draw after 100 plies (50 moves by each
//!   side) without a capture, where each side's checks beyond its tenth in that span are
//!   not counted. Article 8 says "one hundred moves by both players" and 3.2.D "50
//!   moves by both players": read together, 100 plies. The limit is a setting; the
//!   count goes on from the start position's halfmove clock.
//!
//! # Rule sets
//! - `wxf`: the World Xiangqi Rules 2018, as above (the default).
//! - `asian`: the older HKCCA text (shared/rules/asian-rules-hkcca-translation.txt,
//!   Chapter 4), ruled by the same code with the Asian rules cited by section and
//!   number (Section 2 principles, Section 3 general rules, Section 4 detail rules). Its rules
//!   agree with WXF's on what this arbiter decides, with these differences in the text:
//!   - rule 28 lets the king chase together with another piece, where rule 30 and WXF
//!     Section 25 forbid a king or pawn helped on every move; the arbiter applies
//!     rule 30 (the stricter, and WXF's);
//!   - rule 17 says a chariot may chase a cannon that is protected on one move and not
//!     on another; WXF has no such sentence, but the intersection over the cycle gives
//!     the same draw;
//!   - rules 25-26 spell out that moving only the cannon mount is a chase by the
//!     cannon, and rule 27 that a chariot confined to a line by a cannon does not chase
//!     along it: WXF shows the same by diagrams (Sections 20-22);
//!   - the Asian text has no natural move count, so [`RefereeConfig::for_rules`] sets
//!     none for it (games end by the rules or by a match's own ply limit).
//! - `cxq`: the CXQ rules, see [`cxq`]: consecutive checks and chases are counted
//!   instead of repetitions ruled (a repetition alone is no draw), and the automatic
//!   draws replace the natural move count.
//! - `computer`: only perpetual check loses; any other repetition is a draw. For
//!   comparisons with engines that implement no chase rule.

pub mod cxq;
pub mod hard_games;
pub mod identity;
pub mod judge;
pub mod metamorphic;
pub mod nature;
pub mod referee;
pub mod verdicts;
pub mod verify;

use std::fmt;
use std::str::FromStr;

use identity::{Identities, PieceId};
use nature::{Nature, classify};
pub use referee::{Panel, Referee, RefereeConfig, ViolationTiming};

use super::position::{KING_IN_CHECK_ARTICLE, KINGS_FACE_ARTICLE};
use super::{Move, PieceKind, Position};
use crate::color::Color;

/// A named set of tournament rules.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum RuleSet {
    /// World Xiangqi Rules 2018.
    #[default]
    Wxf,
    /// The Asian (HKCCA) rules.
    Asian,
    /// The CXQ rules: counted consecutive checks and chases, automatic draws.
    Cxq,
    /// Only perpetual check is forbidden.
    Computer,
}

impl RuleSet {
    /// The name used on command lines and in options.
    pub fn name(self) -> &'static str {
        match self {
            RuleSet::Wxf => "wxf",
            RuleSet::Asian => "asian",
            RuleSet::Cxq => "cxq",
            RuleSet::Computer => "computer",
        }
    }

    /// `message`, about a move the rules of movement refuse, citing this rule set's
    /// articles ([`cite_move_rules`]).
    pub fn cite_move_rules(self, message: &str) -> String {
        cite_move_rules(&[self], message)
    }

    fn article(self, wxf: &'static str, asian: &'static str) -> &'static str {
        match self {
            RuleSet::Asian => asian,
            _ => wxf,
        }
    }
}

/// `message`, about a move the rules of movement refuse, citing the articles of each
/// of `rule_sets` (a verification judges under several): those messages cite WXF
/// Article 2, which the Asian text numbers Chapter 1 Section 2 (rule 9, the kings
/// facing; rule 10, leaving the king in check). The CXQ and computer rules take the
/// rules of movement as WXF writes them.
pub fn cite_move_rules(rule_sets: &[RuleSet], message: &str) -> String {
    if !rule_sets.contains(&RuleSet::Asian) {
        return message.to_owned();
    }
    let also_wxf = rule_sets.iter().any(|&rules| rules != RuleSet::Asian);
    let cite = |wxf: &str, rule: u8| {
        let asian = format!("Asian Chapter 1 Section 2 rule {rule}");
        (format!("({wxf})"), if also_wxf { format!("({wxf}; {asian})") } else { format!("({asian})") })
    };
    let (kings_face, kings_face_cited) = cite(KINGS_FACE_ARTICLE, 9);
    let (in_check, in_check_cited) = cite(KING_IN_CHECK_ARTICLE, 10);
    message.replace(&kings_face, &kings_face_cited).replace(&in_check, &in_check_cited)
}

/// The rule set name was not recognised.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown rule set '{0}': expected wxf, asian, cxq or computer")]
pub struct UnknownRuleSet(String);

impl FromStr for RuleSet {
    type Err = UnknownRuleSet;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "wxf" => Ok(RuleSet::Wxf),
            "asian" => Ok(RuleSet::Asian),
            "cxq" => Ok(RuleSet::Cxq),
            "computer" => Ok(RuleSet::Computer),
            _ => Err(UnknownRuleSet(s.to_owned())),
        }
    }
}

/// Who won.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// This side won.
    Win(Color),
    /// Nobody won.
    Draw,
}

impl Outcome {
    /// The PGN result: `1-0` (Red wins), `0-1`, `1/2-1/2`.
    pub fn pgn(self) -> &'static str {
        match self {
            Outcome::Win(Color::Red) => "1-0",
            Outcome::Win(Color::Black) => "0-1",
            Outcome::Draw => "1/2-1/2",
        }
    }

    fn loss_of(loser: Color) -> Outcome {
        Outcome::Win(!loser)
    }
}

/// Why a game ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reason {
    /// The side to move is checkmated.
    Checkmate,
    /// The side to move has no legal move and is not in check.
    Stalemate,
    /// One side checked on every move of a repetition.
    PerpetualCheck,
    /// Both sides checked on every move of a repetition.
    MutualPerpetualCheck,
    /// One side chased the same piece on every move of a repetition.
    PerpetualChase,
    /// Both sides chased perpetually.
    MutualPerpetualChase,
    /// A repetition without a forbidden perpetual.
    Repetition,
    /// The natural move count ran out.
    NaturalMoveCount,
    /// CXQ: 300 moves by each side.
    CxqMoveLimit,
    /// CXQ: 120 effective moves by each side.
    CxqEffectiveMoves,
    /// CXQ: 30 moves by each side without progress.
    CxqNoProgress,
    /// Xiongqi: a terminal piece was captured (6.1).
    TerminalCaptured,
    /// Xiongqi: the side to move has no legal move and loses (6.2).
    NoLegalMove,
    /// Xiongqi: a repetitive move, which loses for its player (6.3).
    RepetitiveMove,
    /// Xiongqi: only terminal pieces are left (6.4).
    OnlyTerminals,
    /// Xiongqi: 50 moves by each side without a capture or a soldier move (6.5).
    FiftyMoves,
}

impl Reason {
    /// Every reason, in declaration order.
    pub const ALL: [Reason; 16] = [
        Reason::Checkmate,
        Reason::Stalemate,
        Reason::PerpetualCheck,
        Reason::MutualPerpetualCheck,
        Reason::PerpetualChase,
        Reason::MutualPerpetualChase,
        Reason::Repetition,
        Reason::NaturalMoveCount,
        Reason::CxqMoveLimit,
        Reason::CxqEffectiveMoves,
        Reason::CxqNoProgress,
        Reason::TerminalCaptured,
        Reason::NoLegalMove,
        Reason::RepetitiveMove,
        Reason::OnlyTerminals,
        Reason::FiftyMoves,
    ];

    /// The reason whose words (its `Display`) are `text`, as a game record or a PGN
    /// comment carries them.
    pub fn named(text: &str) -> Option<Reason> {
        Reason::ALL.into_iter().find(|reason| reason.to_string() == text)
    }

    /// Whether one side lost for its conduct over a repetition (a lone perpetual check
    /// or chase, Xiongqi's repetitive move) rather than by the position or a count.
    /// Engines that do not know the chase rules lose such games to the arbiter, not
    /// on the board, so a match counts them apart.
    pub fn is_repetition_violation(self) -> bool {
        matches!(self, Reason::PerpetualCheck | Reason::PerpetualChase | Reason::RepetitiveMove)
    }

    /// Whether an ending's words, as a game record or a unit stores them, name a
    /// repetition violation: the one test of a ruled win for the worker's match totals
    /// and the coordinator's over-the-board counts.
    pub fn names_a_repetition_violation(text: &str) -> bool {
        Reason::named(text).is_some_and(Reason::is_repetition_violation)
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Reason::Checkmate => "checkmate",
            Reason::Stalemate => "stalemate",
            Reason::PerpetualCheck => "perpetual check",
            Reason::MutualPerpetualCheck => "perpetual check by both sides",
            Reason::PerpetualChase => "perpetual chase",
            Reason::MutualPerpetualChase => "perpetual chase by both sides",
            Reason::Repetition => "repetition draw",
            Reason::NaturalMoveCount => "natural move count",
            Reason::CxqMoveLimit => "300 moves by each side (CXQ)",
            Reason::CxqEffectiveMoves => "120 effective moves by each side (CXQ)",
            Reason::CxqNoProgress => "30 moves by each side without progress (CXQ)",
            Reason::TerminalCaptured => "terminal piece captured",
            Reason::NoLegalMove => "no legal move",
            Reason::RepetitiveMove => "repetitive move",
            Reason::OnlyTerminals => "only terminal pieces left",
            Reason::FiftyMoves => "50 moves each without capture or soldier move",
        })
    }
}

/// A ruling on a game.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Ruling {
    /// The result.
    pub outcome: Outcome,
    /// Why.
    pub reason: Reason,
    /// The article applied, e.g. `WXF 20.1`.
    pub article: &'static str,
}

/// What one side did over a repetition cycle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Conduct {
    PerpetualCheck,
    ForbiddenChase,
    Allowed,
}

fn conduct(natures: &[&Nature], rules: RuleSet) -> Conduct {
    let Some(first) = natures.first() else {
        return Conduct::Allowed;
    };
    if natures.iter().all(|n| n.check) {
        return Conduct::PerpetualCheck;
    }
    if rules == RuleSet::Computer {
        return Conduct::Allowed;
    }
    let mut targets: Vec<PieceId> = first.chases.iter().map(|t| t.target).collect();
    targets.dedup();
    for target in targets {
        if !natures.iter().all(|n| n.chases(target)) {
            continue;
        }
        // A king or pawn may chase perpetually, also with help on some moves; a chase in
        // which another piece takes part on every move is forbidden (20.9, Section 25).
        let helped_every_move = natures.iter().all(|n| {
            n.chases.iter().any(|t| t.target == target && !matches!(t.attacker_kind, PieceKind::King | PieceKind::Pawn))
        });
        if helped_every_move {
            return Conduct::ForbiddenChase;
        }
    }
    Conduct::Allowed
}

/// Rules the cycle of `moves` from `start`, which must lead back to `start`'s
/// position; returns the ruling and each move's nature.
pub fn rule_cycle(start: &Position, moves: &[Move], rules: RuleSet) -> (Ruling, Vec<Nature>) {
    let natures = cycle_natures(start, moves);
    (rule_natures(start.side_to_move(), &natures, rules), natures)
}

/// Each move's nature over the cycle of `moves` from `start`: what the rule sets rule
/// on, the same for all of them.
pub fn cycle_natures(start: &Position, moves: &[Move]) -> Vec<Nature> {
    let mut ids = Identities::new(start);
    let mut position = start.clone();
    let mut natures = Vec::with_capacity(moves.len());
    for &mv in moves {
        natures.push(classify(&position, &ids, mv));
        ids.apply(mv);
        position.make_move(mv);
    }
    natures
}

/// Rules a cycle, whose first move the side `first` made, by its moves' natures.
pub fn rule_natures(first: Color, natures: &[Nature], rules: RuleSet) -> Ruling {
    let of_side = |side: Color| -> Vec<&Nature> {
        let offset = usize::from(side != first);
        natures.iter().skip(offset).step_by(2).collect()
    };
    let red = conduct(&of_side(Color::Red), rules);
    let black = conduct(&of_side(Color::Black), rules);
    let checker_loses = |article| Ruling {
        outcome: Outcome::loss_of(if red == Conduct::PerpetualCheck { Color::Red } else { Color::Black }),
        reason: Reason::PerpetualCheck,
        article,
    };
    match (red, black) {
        (Conduct::PerpetualCheck, Conduct::PerpetualCheck) => Ruling {
            outcome: Outcome::Draw,
            reason: Reason::MutualPerpetualCheck,
            article: rules.article("WXF 20.1", "Asian Section 4 rule 7"),
        },
        // The checker loses also when the other side's chase is forbidden in turn.
        (Conduct::PerpetualCheck, Conduct::ForbiddenChase) | (Conduct::ForbiddenChase, Conduct::PerpetualCheck) => {
            checker_loses(rules.article("WXF 3.1.H", "Asian Section 2 principle 3"))
        }
        (Conduct::PerpetualCheck, _) | (_, Conduct::PerpetualCheck) => {
            // The Asian text gives "two checks, one check back" (the other side checks
            // too, not on every move) a rule of its own.
            let other = if red == Conduct::PerpetualCheck { Color::Black } else { Color::Red };
            let checked_back = of_side(other).iter().any(|nature| nature.check);
            let asian = if checked_back { "Asian Section 4 rule 8" } else { "Asian Section 4 rule 6" };
            checker_loses(rules.article("WXF 20.1", asian))
        }
        (Conduct::ForbiddenChase, Conduct::ForbiddenChase) => Ruling {
            outcome: Outcome::Draw,
            reason: Reason::MutualPerpetualChase,
            article: rules.article("WXF 3.2.C", "Asian Section 2 principle 2"),
        },
        (Conduct::ForbiddenChase, _) | (_, Conduct::ForbiddenChase) => Ruling {
            outcome: Outcome::loss_of(if red == Conduct::ForbiddenChase { Color::Red } else { Color::Black }),
            reason: Reason::PerpetualChase,
            article: rules.article("WXF 20.3", "Asian Section 3 rule 3"),
        },
        _ => Ruling {
            outcome: Outcome::Draw,
            reason: Reason::Repetition,
            article: rules.article("WXF 3.2.B", "Asian Section 4 rule 5"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_is_named_by_its_words() {
        for reason in Reason::ALL {
            assert_eq!(Reason::named(&reason.to_string()), Some(reason));
        }
        assert_eq!(Reason::named("perpetual check (WXF 21)"), None, "the article is not part of the name");
    }

    /// A lone perpetual check or chase loses (WXF 20.1, 20.3), so does Xiongqi's
    /// repetitive move (6.3); both sides doing it, or a plain repetition, is a draw, and
    /// the board's own endings are not rulings.
    #[test]
    fn only_a_lone_sides_repetition_is_a_ruled_win() {
        let ruled: Vec<Reason> =
            Reason::ALL.into_iter().filter(|r| Reason::names_a_repetition_violation(&r.to_string())).collect();
        assert_eq!(ruled, [Reason::PerpetualCheck, Reason::PerpetualChase, Reason::RepetitiveMove]);
        for text in ["", "Perpetual check", "time forfeit", "perpetual check by both sides"] {
            assert!(!Reason::names_a_repetition_violation(text), "{text}");
        }
    }
}
