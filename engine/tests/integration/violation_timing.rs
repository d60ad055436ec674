//! When a lone violation is ruled (`ViolationTiming`): at the threefold repetition, as
//! engines rule, by default; or as the books rule over the board, after the arbiter's
//! warning at the threefold repetition: WXF 3.1.C and 17.3.G.III at the fourth
//! occurrence, the Asian Section 4 rule 3 after three more repetitions.

use xq_engine::color::Color;
use xq_engine::xiangqi::notation::{Dialect, parse_uci};
use xq_engine::xiangqi::rules::{Outcome, Reason, Referee, RefereeConfig, RuleSet, Ruling, ViolationTiming};
use xq_engine::xiangqi::{Move, Position};

/// Red's rook checks the bare king from e0 and f0 in turn.
const CHECKS: (&str, &str) = ("4k4/9/9/9/9/9/9/9/9/3K1R3 w - - 0 1", "f0e0 e9f9 e0f0 f9e9");
/// Red's rook chases the unprotected cannon between a0 and b0.
const CHASE: (&str, &str) = ("4k4/9/9/9/9/9/9/9/1R7/c2K5 w - - 0 1", "b1a1 a0b0 a1b1 b0a0");
/// The kings step out and back: allowed.
const IDLE: &str = "d0d1 e9e8 d1d0 e8e9";

/// The first ruling and its ply, the cycles `cycles` played from `fen`.
fn ruled(fen: &str, cycles: &[&str], config: RefereeConfig) -> Option<(usize, Ruling)> {
    let mut position = Position::from_fen(fen).unwrap();
    let mut referee = Referee::new(position.clone(), config);
    let moves: Vec<Move> = cycles
        .iter()
        .flat_map(|cycle| cycle.split_whitespace())
        .map(|text| {
            let mv = parse_uci(&position, text, Dialect::ZeroBased).unwrap();
            position.make_move(mv);
            mv
        })
        .collect();
    for mv in moves {
        referee.play(mv).unwrap();
    }
    referee.ended()
}

#[test]
fn by_default_a_lone_violation_is_ruled_at_the_threefold_repetition() {
    for rules in [RuleSet::Wxf, RuleSet::Asian, RuleSet::Computer] {
        let config = RefereeConfig::with_timing(rules, ViolationTiming::Threefold);
        assert_eq!(config, RefereeConfig::for_rules(rules), "the default");
        let (ply, ruling) = ruled(CHECKS.0, &[CHECKS.1; 6], config).expect("ruled");
        assert_eq!((ply, ruling.outcome, ruling.reason), (8, Outcome::Win(Color::Black), Reason::PerpetualCheck));
    }
}

#[test]
fn after_the_warning_wxf_rules_the_loss_when_the_cycle_is_repeated_once_more() {
    // 17.3.G.III: warned at the threefold repetition (ply 8), "if the same moves were
    // repeated another cycle, the player made the prohibited moves would be penalized
    // with a loss": the fourth occurrence, ply 12. The computer rule set keeps WXF's
    // perpetual check and its timing.
    for (rules, (fen, cycle), reason, article) in [
        (RuleSet::Wxf, CHECKS, Reason::PerpetualCheck, "WXF 20.1"),
        (RuleSet::Wxf, CHASE, Reason::PerpetualChase, "WXF 20.3"),
        (RuleSet::Computer, CHECKS, Reason::PerpetualCheck, "WXF 20.1"),
    ] {
        let config = RefereeConfig::with_timing(rules, ViolationTiming::AfterWarning);
        let ruling = ruled(fen, &[cycle; 6], config).expect("ruled");
        assert_eq!(
            (ruling.0, ruling.1.outcome, ruling.1.reason, ruling.1.article),
            (12, Outcome::Win(Color::Black), reason, article),
            "{rules:?} {fen}"
        );
    }
}

#[test]
fn a_violator_that_changes_its_moves_after_the_warning_is_not_ruled_against() {
    // Warned at ply 8, Red changes its moves (the kings' idle cycle, 17.3.G.III "would
    // have to change his moves"): the fourth occurrence at ply 12 closes a cycle that
    // repeats neither of the window's, so the players changed their moves and nothing is
    // ruled (3.2.B draws only players "not willing to change their moves"); the idle
    // cycle played once more is the repetition's fourth occurrence, drawn (17.3.G.II).
    let config = RefereeConfig::with_timing(RuleSet::Wxf, ViolationTiming::AfterWarning);
    assert_eq!(ruled(CHASE.0, &[CHASE.1, CHASE.1, IDLE], config), None);
    let (ply, ruling) = ruled(CHASE.0, &[CHASE.1, CHASE.1, IDLE, IDLE], config).expect("ruled");
    assert_eq!(
        (ply, ruling.outcome, ruling.reason, ruling.article),
        (16, Outcome::Draw, Reason::Repetition, "WXF 3.2.B")
    );
    // At the threefold repetition alone, the same game was lost at ply 8.
    let (ply, ruling) = ruled(CHASE.0, &[CHASE.1, CHASE.1, IDLE], RefereeConfig::for_rules(RuleSet::Wxf)).unwrap();
    assert_eq!((ply, ruling.reason), (8, Reason::PerpetualChase));
}

#[test]
fn after_an_earlier_visit_the_violator_is_warned_on_its_own_repetition_and_loses_a_cycle_later() {
    // The review of 2026-11-28, N2: the kings' round trip, then Red's perpetual check
    // or chase. The perpetual's own threefold repetition is at ply 12 (the window of
    // the position's last three occurrences holds two of its cycles): Red is warned
    // there, and loses when it repeats the cycle again (17.3.G.III), at ply 16; under
    // the Asian text, after three more repetitions (Section 4 rule 3), at ply 24.
    for (rules, (fen, cycle), reason, article, loss) in [
        (RuleSet::Wxf, CHECKS, Reason::PerpetualCheck, "WXF 20.1", 16),
        (RuleSet::Wxf, CHASE, Reason::PerpetualChase, "WXF 20.3", 16),
        (RuleSet::Computer, CHECKS, Reason::PerpetualCheck, "WXF 20.1", 16),
        (RuleSet::Asian, CHECKS, Reason::PerpetualCheck, "Asian Section 4 rule 6", 24),
        (RuleSet::Asian, CHASE, Reason::PerpetualChase, "Asian Section 3 rule 3", 24),
    ] {
        let config = RefereeConfig::with_timing(rules, ViolationTiming::AfterWarning);
        let cycles: Vec<&str> = std::iter::once(IDLE).chain([cycle; 6]).collect();
        let (ply, ruling) = ruled(fen, &cycles, config).expect("ruled");
        assert_eq!(
            (ply, ruling.outcome, ruling.reason, ruling.article),
            (loss, Outcome::Win(Color::Black), reason, article),
            "{rules:?} {fen}"
        );
    }
    // The warning at ply 12 names Red's checking move from this position.
    let config = RefereeConfig::with_timing(RuleSet::Wxf, ViolationTiming::AfterWarning);
    let mut position = Position::from_fen(CHECKS.0).unwrap();
    let mut referee = Referee::new(position.clone(), config);
    for text in [IDLE, CHECKS.1, CHECKS.1].join(" ").split_whitespace() {
        assert!(referee.warned_moves().is_empty(), "no warning before ply 12");
        let mv = parse_uci(&position, text, Dialect::ZeroBased).unwrap();
        position.make_move(mv);
        referee.play(mv).unwrap();
    }
    assert_eq!(referee.warned_moves().iter().map(ToString::to_string).collect::<Vec<_>>(), ["f0e0"]);
}

#[test]
fn after_the_warning_the_asian_rules_rule_the_loss_after_three_more_repetitions() {
    // Section 4 rule 3: "asked by the referee to alter, and repeats the violation for
    // three times": asked at the threefold repetition (ply 8), lost at the sixth
    // occurrence (ply 20); no draw in between, since every window holds the violation.
    let config = RefereeConfig::with_timing(RuleSet::Asian, ViolationTiming::AfterWarning);
    for ((fen, cycle), reason, article) in [
        (CHECKS, Reason::PerpetualCheck, "Asian Section 4 rule 6"),
        (CHASE, Reason::PerpetualChase, "Asian Section 3 rule 3"),
    ] {
        assert_eq!(ruled(fen, &[cycle; 4], config), None, "{fen}: not yet at the fifth occurrence");
        let (ply, ruling) = ruled(fen, &[cycle; 6], config).expect("ruled");
        assert_eq!(
            (ply, ruling.outcome, ruling.reason, ruling.article),
            (20, Outcome::Win(Color::Black), reason, article)
        );
    }
}

#[test]
fn a_repetition_without_violation_is_drawn_at_the_fourth_occurrence_under_either_timing() {
    // 3.2.B and 17.3.G.II: announced at the threefold repetition, drawn when another
    // cycle is repeated; the timing of violations changes nothing here.
    for timing in [ViolationTiming::Threefold, ViolationTiming::AfterWarning] {
        for rules in [RuleSet::Wxf, RuleSet::Asian] {
            let config = RefereeConfig::with_timing(rules, timing);
            let (ply, ruling) = ruled(CHASE.0, &[IDLE; 4], config).expect("ruled");
            assert_eq!((ply, ruling.outcome, ruling.reason), (12, Outcome::Draw, Reason::Repetition), "{timing:?}");
        }
    }
}

#[test]
fn timings_are_named_for_command_lines() {
    for timing in [ViolationTiming::Threefold, ViolationTiming::AfterWarning] {
        assert_eq!(timing.name().parse::<ViolationTiming>(), Ok(timing));
    }
    assert!("fourfold".parse::<ViolationTiming>().unwrap_err().contains("threefold or after-warning"));
}

#[test]
fn the_warning_names_the_violator_s_repeating_moves() {
    // Red checks from e0 and f0; at the threefold repetition (ply 8) Red, to move, is
    // warned off f0e0, the move it played from this position before. Black, the side
    // checked, is never warned.
    let config = RefereeConfig::with_timing(RuleSet::Wxf, ViolationTiming::AfterWarning);
    let mut position = Position::from_fen(CHECKS.0).unwrap();
    let mut referee = Referee::new(position.clone(), config);
    let mut warnings = Vec::new();
    for text in [CHECKS.1; 3].join(" ").split_whitespace() {
        let mv = parse_uci(&position, text, Dialect::ZeroBased).unwrap();
        position.make_move(mv);
        referee.play(mv).unwrap();
        warnings.push(referee.warned_moves().iter().map(ToString::to_string).collect::<Vec<_>>().join(" "));
    }
    // After plies 1..12: the warning stands at every position of the third cycle where
    // Red is to move (plies 8 and 10: e0f0 is repeated from e0 too).
    let expected = ["", "", "", "", "", "", "", "f0e0", "", "e0f0", "", "f0e0"];
    assert_eq!(warnings, expected);
    // Under the Threefold timing the game is over at ply 8 and nobody is warned after.
    assert_eq!(ruled(CHECKS.0, &[CHECKS.1; 2], RefereeConfig::for_rules(RuleSet::Wxf)).map(|(ply, _)| ply), Some(8));
}
