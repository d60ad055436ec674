//! The window a repetition is judged on: the moves of the threefold repetition being
//! made (WXF 17.3.G, "repeated consecutively"), not every move since the position's
//! first occurrence in the game. A perpetual check or chase that follows an earlier,
//! allowed visit to the same position is still a perpetual (WXF 20.1, 20.3; Asian
//! Section 4 rule 6, Section 3 rule 3), under every rule set that rules repetitions,
//! in play (the referee) and on request (the judge).

use xq_engine::xiangqi::notation::{Dialect, parse_uci};
use xq_engine::xiangqi::rules::judge::{JudgeRequest, judge};
use xq_engine::xiangqi::rules::metamorphic;
use xq_engine::xiangqi::rules::{Outcome, Reason, Referee, RefereeConfig, RuleSet, Ruling};
use xq_engine::xiangqi::{Move, Position};

use xq_engine::color::Color;
use xq_engine::variant::Variant;

/// Red's rook checks the bare king from e0 and f0 in turn (Red loses by WXF 20.1).
const CHECKS: &str = "4k4/9/9/9/9/9/9/9/9/3K1R3 w - - 0 1";
const CHECK_CYCLE: [&str; 4] = ["f0e0", "e9f9", "e0f0", "f9e9"];

/// Red's rook chases the unprotected cannon between a0 and b0 (Red loses by WXF 20.3).
const CHASE: &str = "4k4/9/9/9/9/9/9/9/1R7/c2K5 w - - 0 1";
const CHASE_CYCLE: [&str; 4] = ["b1a1", "a0b0", "a1b1", "b0a0"];

/// Detours that leave the start position of [`CHECKS`] and return to it by idle
/// moves: of several lengths, by several pieces of both sides.
const CHECK_DETOURS: [&[&str]; 4] = [
    // The kings, one step each.
    &["d0d1", "e9e8", "d1d0", "e8e9"],
    // The rook along its file, and Black's king.
    &["f0f2", "e9e8", "f2f0", "e8e9"],
    // The rook, both kings.
    &["f0f2", "e9e8", "d0d1", "e8e7", "d1d0", "e7e8", "f2f0", "e8e9"],
    // The kings two steps each, the rook in between.
    &["d0d1", "e9e8", "d1d2", "e8e7", "f0f1", "e7e8", "f1f0", "e8e7", "d2d1", "e7e8", "d1d0", "e8e9"],
];

/// Detours from the start position of [`CHASE`], as [`CHECK_DETOURS`].
const CHASE_DETOURS: [&[&str]; 4] = [
    &["d0d1", "e9e8", "d1d0", "e8e9"],
    // Red's rook, Black's cannon.
    &["b1c1", "a0a2", "c1b1", "a2a0"],
    // Red's rook and king, Black's king and cannon.
    &["b1c1", "e9e8", "d0d1", "a0a2", "d1d0", "a2a0", "c1b1", "e8e9"],
    &["d0d1", "e9e8", "d1d2", "e8e7", "d2d1", "e7e8", "d1d0", "e8e9"],
];

/// A perpetual: its start, its cycle, detours from its start, and the violation.
type Perpetual = (&'static str, [&'static str; 4], [&'static [&'static str]; 4], Reason);

/// The two perpetuals.
const GAMES: [Perpetual; 2] = [
    (CHECKS, CHECK_CYCLE, CHECK_DETOURS, Reason::PerpetualCheck),
    (CHASE, CHASE_CYCLE, CHASE_DETOURS, Reason::PerpetualChase),
];

fn moves_of(start: &Position, texts: &[&str]) -> Vec<Move> {
    let mut position = start.clone();
    texts
        .iter()
        .map(|text| {
            let mv = parse_uci(&position, text, Dialect::ZeroBased).unwrap_or_else(|e| panic!("{text}: {e}"));
            position.make_move(mv);
            mv
        })
        .collect()
}

/// The board and moves changed as a rule-preserving transformation changes them.
#[derive(Clone, Copy, Debug)]
enum Transform {
    Identity,
    Mirrored,
    ColoursSwapped,
    Both,
}

impl Transform {
    const ALL: [Transform; 4] = [Transform::Identity, Transform::Mirrored, Transform::ColoursSwapped, Transform::Both];

    fn position(self, position: &Position) -> Position {
        match self {
            Transform::Identity => position.clone(),
            Transform::Mirrored => position.mirrored(),
            Transform::ColoursSwapped => position.color_flipped(),
            Transform::Both => position.mirrored().color_flipped(),
        }
    }

    fn moves(self, moves: &[Move]) -> Vec<Move> {
        moves
            .iter()
            .map(|m| match self {
                Transform::Identity => *m,
                Transform::Mirrored => Move::new(m.from().mirrored(), m.to().mirrored()),
                Transform::ColoursSwapped => Move::new(m.from().rotated(), m.to().rotated()),
                Transform::Both => Move::new(m.from().mirrored().rotated(), m.to().mirrored().rotated()),
            })
            .collect()
    }

    /// The side that was Red before the transformation.
    fn red(self) -> Color {
        match self {
            Transform::Identity | Transform::Mirrored => Color::Red,
            Transform::ColoursSwapped | Transform::Both => Color::Black,
        }
    }
}

/// The ruling in play and the ply it fell after, under `config`.
fn referee_ruling(start: &Position, moves: &[Move], config: RefereeConfig) -> Option<(usize, Ruling)> {
    let mut referee = Referee::new(start.clone(), config);
    for &mv in moves {
        referee.play(mv).expect("legal move");
    }
    referee.ended()
}

/// The game: `detour` from `start`, then `cycle` played `times` times.
fn game(start: &Position, detour: &[&str], cycle: &[&str], times: usize) -> Vec<Move> {
    let texts: Vec<&str> = detour.iter().chain(cycle.iter().cycle().take(cycle.len() * times)).copied().collect();
    moves_of(start, &texts)
}

fn expected(rules: RuleSet, reason: Reason, loser: Color) -> (Outcome, Reason, &'static str) {
    match (rules, reason) {
        (RuleSet::Computer, Reason::PerpetualChase) => (Outcome::Draw, Reason::Repetition, "WXF 3.2.B"),
        (RuleSet::Asian, Reason::PerpetualCheck) => (Outcome::Win(!loser), reason, "Asian Section 4 rule 6"),
        (RuleSet::Asian, _) => (Outcome::Win(!loser), reason, "Asian Section 3 rule 3"),
        (_, Reason::PerpetualCheck) => (Outcome::Win(!loser), reason, "WXF 20.1"),
        _ => (Outcome::Win(!loser), reason, "WXF 20.3"),
    }
}

#[test]
fn the_issues_games_are_perpetuals_after_a_detour() {
    // The two games of the rules review (F1), as written there: a four-ply detour by the
    // kings, then the perpetual twice. Ruled at the fourth occurrence of the start
    // position, the third of the perpetual's own repetition.
    for (fen, cycle, detours, reason) in GAMES {
        let start = Position::from_fen(fen).unwrap();
        let moves = game(&start, detours[0], &cycle, 2);
        let (ply, ruling) = referee_ruling(&start, &moves, RefereeConfig::default()).expect("a ruling");
        assert_eq!((ply, ruling.outcome, ruling.reason), (12, Outcome::Win(Color::Black), reason), "{fen}");
    }
}

#[test]
fn a_detour_before_a_perpetual_delays_its_ruling_by_the_detour_alone() {
    for rules in [RuleSet::Wxf, RuleSet::Asian, RuleSet::Computer] {
        let config = RefereeConfig::for_rules(rules);
        for (fen, cycle, detours, reason) in GAMES {
            let start = Position::from_fen(fen).unwrap();
            for transform in Transform::ALL {
                let board = transform.position(&start);
                let direct = transform.moves(&game(&start, &[], &cycle, 3));
                let (direct_ply, direct_ruling) = referee_ruling(&board, &direct, config).expect("ruled");
                let (outcome, reason, article) = expected(rules, reason, transform.red());
                assert_eq!(
                    (direct_ruling.outcome, direct_ruling.reason, direct_ruling.article),
                    (outcome, reason, article)
                );
                for detour in detours {
                    let moves = transform.moves(&game(&start, detour, &cycle, 3));
                    let got = referee_ruling(&board, &moves, config);
                    // A violation is ruled on its own threefold repetition, as late as
                    // the detour makes it; a draw at the fourth occurrence, which the
                    // detour's return brings one cycle earlier.
                    let ply = match direct_ruling.outcome {
                        Outcome::Draw => direct_ply + detour.len() - cycle.len(),
                        Outcome::Win(_) => direct_ply + detour.len(),
                    };
                    assert_eq!(
                        got,
                        Some((ply, direct_ruling)),
                        "{rules:?} {fen} {transform:?} after the detour {detour:?}"
                    );
                }
            }
        }
    }
}

#[test]
fn the_judge_rules_the_repetition_being_made_not_the_detour_before_it() {
    for (fen, cycle, detours, reason) in GAMES {
        for detour in detours {
            let texts: Vec<String> =
                detour.iter().chain(cycle.iter()).chain(cycle.iter()).map(|t| t.to_string()).collect();
            let request = JudgeRequest {
                fen: Some(fen.to_owned()),
                moves: texts,
                rules: RuleSet::Wxf,
                variant: Variant::Xiangqi,
                timing: Default::default(),
            };
            let (verdict, _) = judge(&request).expect("a legal game");
            assert_eq!(verdict["result"], "0-1", "{fen} after {detour:?}: {verdict}");
            assert_eq!(verdict["reason"], reason.to_string());
        }
    }
}

#[test]
fn a_window_holding_an_allowed_cycle_is_not_a_perpetual() {
    // From the chase's start: the idle cycle is the kings' detour, allowed; the chase
    // cycle is forbidden. The threefold repetition judged at each occurrence of the start
    // position holds the last two cycles.
    let start = Position::from_fen(CHASE).unwrap();
    let idle = CHASE_DETOURS[0];
    let sequence = |cycles: &[&[&str]]| -> Vec<Move> {
        let texts: Vec<&str> = cycles.iter().flat_map(|cycle| cycle.iter().copied()).collect();
        moves_of(&start, &texts)
    };
    let config = RefereeConfig::default();
    // Chase, idle, chase: no threefold repetition of the chase alone; the fourth
    // occurrence draws (WXF 3.2.B) because the idle cycle is in its window.
    let (ply, ruling) =
        referee_ruling(&start, &sequence(&[&CHASE_CYCLE, idle, &CHASE_CYCLE]), config).expect("a draw at ply 12");
    assert_eq!(
        (ply, ruling.outcome, ruling.reason, ruling.article),
        (12, Outcome::Draw, Reason::Repetition, "WXF 3.2.B")
    );
    // Idle, chase, chase: the last three occurrences span two chases, Red loses.
    let (ply, ruling) =
        referee_ruling(&start, &sequence(&[idle, &CHASE_CYCLE, &CHASE_CYCLE]), config).expect("a loss at ply 12");
    assert_eq!((ply, ruling.outcome, ruling.reason), (12, Outcome::Win(Color::Black), Reason::PerpetualChase));
    // Chase, chase: the third occurrence rules the loss at once.
    let (ply, ruling) = referee_ruling(&start, &sequence(&[&CHASE_CYCLE, &CHASE_CYCLE]), config).expect("a loss");
    assert_eq!((ply, ruling.reason), (8, Reason::PerpetualChase));
    // Idle, idle, idle: a draw at the fourth occurrence.
    let (ply, ruling) = referee_ruling(&start, &sequence(&[idle, idle, idle]), config).expect("a draw");
    assert_eq!((ply, ruling.reason), (12, Reason::Repetition));
}

#[test]
fn two_chases_of_different_pieces_alternating_from_one_position_are_judged_together() {
    // WXF Diagram 80 (rule case #117): both Red chariots chase a cannon in turn; the
    // position after the fourth ply recurs after each chariot's cycle. Each cycle alone
    // chases one cannon; the threefold repetition holds both and is allowed (20.4).
    let start = Position::from_fen("3rkabc1/4a3R/4b4/9/9/9/9/B8/1R2A4/c1BAK4 w - - 0 1").unwrap();
    let opening = ["i8h8", "h9i9", "b1a1", "a0b0"];
    let right = ["h8i8", "i9h9", "i8h8", "h9i9"];
    let left = ["a1b1", "b0a0", "b1a1", "a0b0"];
    let alternating: Vec<&str> =
        opening.iter().chain(&right).chain(&left).chain(&right).chain(&left).copied().collect();
    let (ply, ruling) =
        referee_ruling(&start, &moves_of(&start, &alternating), RefereeConfig::default()).expect("ruled");
    // Ply 12 closes the third occurrence (both chases: allowed), ply 16 the fourth.
    assert_eq!((ply, ruling.outcome, ruling.reason), (16, Outcome::Draw, Reason::Repetition));
    // One chariot alone, repeating its own cycle, is a perpetual chase (20.3).
    let alone: Vec<&str> = opening.iter().chain(&right).chain(&left).chain(&left).copied().collect();
    let (ply, ruling) = referee_ruling(&start, &moves_of(&start, &alone), RefereeConfig::default()).expect("ruled");
    assert_eq!((ply, ruling.outcome, ruling.reason), (16, Outcome::Win(Color::Black), Reason::PerpetualChase));
}

#[test]
fn visits_before_a_perpetual_neither_draw_it_nor_hide_it_however_many() {
    // The review of 2026-11-28, N1: with the position reached twice before by allowed
    // moves, the perpetual's first cycle brought its fourth occurrence and was drawn
    // (3.2.B) before it had been repeated once. Two visits by the same detour, two and
    // three different detours: the perpetual's own threefold repetition rules it, after
    // the visits' plies and two cycles of its own, under every rule set ruling
    // repetitions, mirrored and with the colours swapped. (The computer rule set allows
    // perpetual chases: drawn there at the same ply, the repetition's fourth occurrence
    // whose window holds the chase alone.)
    for rules in [RuleSet::Wxf, RuleSet::Asian, RuleSet::Computer] {
        let config = RefereeConfig::for_rules(rules);
        for (fen, cycle, detours, reason) in GAMES {
            let start = Position::from_fen(fen).unwrap();
            for visits in [[detours[0], detours[0]].as_slice(), &detours[..2], &detours[1..4], &detours[..3]] {
                let before: Vec<&str> = visits.iter().flat_map(|detour| detour.iter().copied()).collect();
                let ply = before.len() + 2 * cycle.len();
                for transform in Transform::ALL {
                    let moves = transform.moves(&game(&start, &before, &cycle, 4));
                    let (outcome, reason, article) = expected(rules, reason, transform.red());
                    let got = referee_ruling(&transform.position(&start), &moves, config)
                        .map(|(ply, ruling)| (ply, ruling.outcome, ruling.reason, ruling.article));
                    assert_eq!(got, Some((ply, outcome, reason, article)), "{rules:?} {fen} {transform:?} {visits:?}");
                }
            }
        }
    }
}

#[test]
fn the_review_s_games_with_two_visits_are_ruled_as_the_books_rule_them() {
    // As the review wrote them: Red's checks and chase (20.1, 20.3) after two idle round
    // trips, lost at ply 16, the perpetual's own threefold; the judge's `ended` (where a
    // match ends the game) and `result` (the last cycle ruled) agree.
    for (fen, moves) in [
        (CHECKS, "d0d1 e9e8 d1d0 e8e9 f0f1 e9e8 f1f0 e8e9"),
        (CHASE, "d0d1 e9e8 d1d0 e8e9 b1c1 a0a2 c1b1 a2a0"),
        // WXF Diagram 2 (Chapter 5, Section 1) after two round trips of the kings.
        ("4k4/9/9/9/5R3/9/9/9/9/3K5 w - - 0 1", "d0d1 e9e8 d1d0 e8e9 d0d1 e9e8 d1d0 e8e9"),
    ] {
        let cycle = match fen {
            CHECKS => CHECK_CYCLE,
            CHASE => CHASE_CYCLE,
            _ => ["f5e5", "e9f9", "e5f5", "f9e9"],
        };
        let texts: Vec<String> = moves
            .split_whitespace()
            .chain(cycle.iter().copied().cycle().take(4 * cycle.len()))
            .map(str::to_owned)
            .collect();
        let (verdict, _) = judge(&JudgeRequest {
            fen: Some(fen.to_owned()),
            moves: texts,
            rules: RuleSet::Wxf,
            variant: Variant::Xiangqi,
            timing: Default::default(),
        })
        .expect("a legal game");
        assert_eq!(verdict["ended"]["ply"], 16, "{fen}: {verdict}");
        assert_eq!(verdict["ended"]["result"], "0-1", "{fen}");
        assert_eq!(verdict["result"], "0-1", "{fen}");
        assert_eq!(verdict["ended"]["reason"], verdict["reason"], "{fen}");
    }
}

#[test]
fn the_committed_match_games_drawn_by_the_old_count_are_perpetual_checks() {
    // The review of 2026-11-28 found two committed match games drawn at a fourth
    // occurrence whose closing cycle was a lone perpetual check; from the positions it
    // quotes, the idle cycle twice and the checks continued: the checker loses at its
    // own threefold repetition, ply 16 of these extracts (they were drawn at ply 12).
    for (game, fen, idle, checks, checker) in [
        (
            "window2-gen4-vs-fairy-stockfish-10s-mo10 game 82",
            "5k3/9/9/2r5p/9/4R3P/9/9/3pA4/2B1K1B2 w - - 20 53",
            "c0a2 c6b6 a2c0 b6c6",
            "e4f4 f9e9 f4e4 e9f9",
            Color::Red,
        ),
        (
            "window2-gen4-vs-default-nodes10k game 303",
            "3a5/4ak3/9/9/6R2/9/9/B3B4/5r3/4K4 b - - 13 75",
            "f8f9 g5g9 f9f8 g9g5",
            "f1f0 e0e1 f0f1 e1e0",
            Color::Black,
        ),
    ] {
        let start = Position::from_fen(fen).unwrap();
        let played = [idle, idle, checks, checks, checks].join(" ");
        let moves = moves_of(&start, &played.split_whitespace().collect::<Vec<_>>());
        for rules in [RuleSet::Wxf, RuleSet::Asian, RuleSet::Computer] {
            let (ply, ruling) = referee_ruling(&start, &moves, RefereeConfig::for_rules(rules)).expect("ruled");
            assert_eq!(
                (ply, ruling.outcome, ruling.reason),
                (16, Outcome::Win(!checker), Reason::PerpetualCheck),
                "{game}"
            );
        }
    }
}

#[test]
fn the_book_s_examples_keep_every_property_as_printed_and_with_the_colours_swapped() {
    // The review's probes: every Chapter 5 example, continued by its last cycle until
    // it is ruled in play (the printed moves mostly stop at the second occurrence),
    // and the same with the colours swapped; mirrored, started at its repetition, and
    // with one, two (the same twice, and different) and three idle detours at places
    // of its first cycle: it keeps its verdict under each rule set that rules
    // repetitions.
    let rule_sets = [RuleSet::Wxf, RuleSet::Asian, RuleSet::Computer];
    let mut repetitions = 0;
    for example in crate::common::chapter_5_examples() {
        let mut referee = Referee::new(example.start.clone(), RefereeConfig::default());
        let mut moves = example.moves.clone();
        for &mv in &moves {
            referee.play(mv).expect("the book's moves are legal");
        }
        while referee.ruling().is_none() && moves.len() < example.moves.len() + 60 {
            let Some((_, cycle)) = referee.last_cycle() else { break };
            for mv in cycle {
                referee.play(mv).expect("a cycle replays");
                moves.push(mv);
            }
        }
        repetitions += usize::from(referee.ruling().is_some_and(|r| r.reason != Reason::Checkmate));
        let swapped: Vec<Move> = moves.iter().map(|m| Move::new(m.from().rotated(), m.to().rotated())).collect();
        for (start, moves) in [(example.start.clone(), moves), (example.start.color_flipped(), swapped)] {
            let broken = metamorphic::check(&start, &moves, &rule_sets);
            assert!(broken.is_empty(), "{}: {}", example.section, broken[0].to_json());
        }
    }
    // Nearly every example ends on its repetition, which the detours test.
    assert!(repetitions >= 45, "{repetitions} of 50 ruled on a repetition");
}
