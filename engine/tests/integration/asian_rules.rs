//! The Asian rules (HKCCA, translated by Eric Wu: shared/rules/asian-rules-hkcca-translation.txt)
//! rule by rule under `RuleSet::Asian`: each rule the arbiter decides is played on a small
//! position whose repeated cycle realises it, and the ruling is asserted as the text gives
//! it, cited by the text's own numbering (Chapter 4: Section 2 principles, Section 3
//! general rules, Section 4 detail rules), as the arbiter cites it.
//!
//! # Rules and their tests
//! (Rules 15-40 of Section 4 and rules 5 and 6 of Section 3, the chases, are in
//! `asian_chases`.)
//! Chapter 4 Section 4 (detail rules):
//! - 1 (capturing the king), 2 (no legal move), 5 (repetition without violation is a
//!   draw): `rules::asian_rules_are_ruled_and_cited_by_their_own_text`; rule 5 also in
//!   every drawn test below, and with 3 in
//!   `section_4_rules_3_and_5_a_violation_at_its_third_repetition_a_draw_at_the_fourth`;
//! - 6 (perpetual check with one piece or several loses): `section_4_rule_6_perpetual_check_by_several_pieces_loses`
//!   (one piece: `rules::wxf_3_1_h_a_perpetual_check_against_a_perpetual_chase_loses`);
//! - 7: `section_4_rule_7_check_and_check_back_is_a_draw`;
//! - 8: `section_4_rule_8_two_checks_one_check_back_the_checker_loses`;
//! - 9: `section_4_rule_9_perpetual_threat_to_mate_is_a_draw`;
//! - 10: `section_4_rule_10_mutual_threats_to_mate_are_a_draw`;
//! - 11: `section_4_rule_11_one_check_one_threat_to_mate_is_a_draw`;
//! - 12: `section_4_rule_12_checks_and_one_chase_are_a_draw`;
//! - 13: `section_4_rule_13_one_check_and_one_idle_or_threat_to_check_and_capture_draw`;
//! - 14: `section_4_rule_14_one_chase_and_one_threat_to_check_and_capture_draw`;
//! - 15: `section_4_rule_15_a_cannon_cannot_perpetually_chase_a_rook`;
//! - 16: `section_4_rule_16_cannons_chasing_two_rooks_draw`;
//! - 17: `section_4_rule_17_a_rook_may_chase_a_protected_cannon`;
//! - 18: `section_4_rule_18_a_rook_cannot_perpetually_chase_an_unprotected_cannon`;
//! - 19: `section_4_rule_19_a_rook_held_by_a_knight_cannot_be_chased`;
//! - 20: `section_4_rule_20_a_cannon_and_a_knight_cannot_take_turns_on_a_rook`;
//! - 21: `section_4_rule_21_a_knight_cannot_chase_a_rook_that_counters_once`;
//! - 22: `section_4_rule_22_rook_and_knight_chasing_each_other_draw`;
//! - 23: `section_4_rule_23_a_rook_cannot_chase_a_knight_that_answers_once`;
//! - 24 (and Section 3 rule 7): `section_4_rule_24_rook_chasing_rook`,
//!   `section_4_rule_24_cannon_chasing_cannon`, `section_4_rule_24_knight_chasing_knight`;
//! - 25: `section_4_rule_25_a_cannon_chases_by_its_mount`;
//! - 26: `section_4_rule_26_a_cannon_chases_a_rook_by_its_mount`;
//! - 27: `section_4_rule_27_a_rook_confined_by_a_cannon`;
//! - 28 (and Section 3 rule 9): `section_4_rule_28_the_king_may_chase`;
//! - 29 (and Section 3 rule 9): `section_4_rule_29_pawns_may_chase`;
//! - 30: `section_4_rule_30_a_king_or_pawn_helped_on_every_move_may_not_chase`;
//! - 31: `section_4_rule_31_a_rook_cannot_chase_a_crossed_pawn`;
//! - 32 (and Section 3 rule 4): `section_4_rule_32_chasing_two_pieces_is_a_draw`;
//! - 33 (and Section 3 rule 3): `section_4_rule_33_pieces_cannot_take_turns_on_one_piece`;
//! - 34: `section_4_rule_34_a_protector_that_cannot_recapture_protects_nothing`;
//! - 35: `section_4_rule_35_two_attackers_on_a_protected_piece_draw`;
//! - 36 (and Section 3 rule 8): `section_4_rule_36_a_chase_offering_exchange_is_a_chase`;
//! - 37: `section_4_rule_37_a_held_rook_and_king_cannot_be_chased_by_knight`;
//! - 38, 39, 40 (and Section 3 rule 10): `section_4_rule_38_perpetual_threat_to_check_and_capture_draws`,
//!   `section_4_rule_39_perpetual_block_draws`, `section_4_rule_40_perpetual_offer_draws`.
//!
//! Chapter 4 Section 3 (general rules): 1 is Section 4 rule 6; 2 is Section 4 rules 9
//! and 11-14; 3 is the article of every perpetual chase below (the uncrossed pawn and the
//! king or pawn among the chasers: rules 25, 28, 29); 4 is rule 32;
//! 5: `section_3_rule_5_two_chases_and_one_chase_back_the_chaser_loses`;
//! 6: `section_3_rule_6_real_and_false_protectors` (a knight or cannon on a protected
//! rook: rules 15, 20, 27); 7 is rule 24; 8 is rule 36; 9 is rules 28-29; 10 is rules 38-40.
//!
//! Chapter 4 Section 2 (principles): 1 is Section 4 rule 5; 2 is cited by the mutual
//! chase of rule 22 (the mutual check of rule 7 cites rule 7); 3:
//! `rules::wxf_3_1_h_a_perpetual_check_against_a_perpetual_chase_loses`; 4 is every
//! lone violation below.
//!
//! Chapter 4 Section 1 defines the terms (check, threat to mate, chase, protected, real
//! and false protector, two checks and one check back, ...); they are exercised by the
//! rules that use them, and each test asserts the natures its cycle is built of.
//!
//! # Out of scope
//! What the arbiter does not decide:
//! - Chapter 1 Section 1 (board and pieces): equipment; the board is the move
//!   generator's (perft tests).
//! - Chapter 1 Section 2 (movements, 1-10): move legality, decided by the move generator
//!   (perft tests); the referee only refuses illegal moves, citing rules 9 and 10 for
//!   the kings facing and the king left in check
//!   (`chapter_1_section_2_rules_9_and_10_are_cited_for_the_moves_they_forbid`).
//! - Chapter 1 Section 3 rule 1 (coin toss, colours alternating over a match): the match
//!   runner's scheduling.
//! - Chapter 1 Section 3 rule 2 (touch-move, technicals, adjusting pieces) and rule 3 (no
//!   undo): conduct at a physical board.
//! - Chapters 2 and 3 (organising and staffing a tournament): skipped by the translation.
//! - Chapter 4 Section 1 term 1's courtesy of announcing a check: conduct.
//! - Section 4 rule 3's referee asking the violator to alter: a conversation; the arbiter
//!   rules the violation when the position occurs a third time.
//! - Section 4 rule 4 (draw when both cannot win, by agreement, or by the referee's
//!   declaration): agreement and declaration are the players' and referee's; the arbiter
//!   has no ruling on material that cannot win.
//! - Clocks: the Asian text has none (nor a natural move count; see `rules.rs`).

use xq_engine::color::Color;
use xq_engine::xiangqi::notation::{Dialect, parse_uci};
use xq_engine::xiangqi::rules::identity::Identities;
use xq_engine::xiangqi::rules::nature::{allowed_natures, classify, nature_names};
use xq_engine::xiangqi::rules::{Outcome, Reason, Referee, RefereeConfig, RuleSet, Ruling};
use xq_engine::xiangqi::{Move, Position, fen, movegen};

pub(crate) const BLACK_WINS: Outcome = Outcome::Win(Color::Black);
pub(crate) const CHASE: &str = "Asian Section 3 rule 3";
pub(crate) const DRAW: &str = "Asian Section 4 rule 5";

/// A cycle of moves repeated from its start position under the Asian rules.
pub(crate) struct Cycle {
    pub(crate) ruling: Ruling,
    /// Plies played until the referee ruled.
    pub(crate) plies: usize,
    /// Each move's natures, heaviest first (`check`, `chase`, `kill`,
    /// `capture-after-check`, `exchange`, `offer`, `block`, or `idle`).
    pub(crate) natures: Vec<Vec<&'static str>>,
    /// Each move's chases as attacker and target squares, e.g. `"c0a7"`.
    pub(crate) chases: Vec<Vec<String>>,
}

impl Cycle {
    /// The heaviest nature of each move.
    pub(crate) fn heaviest(&self) -> Vec<&'static str> {
        self.natures.iter().map(|n| n[0]).collect()
    }

    pub(crate) fn outcome(&self) -> (Outcome, Reason, &'static str) {
        (self.ruling.outcome, self.ruling.reason, self.ruling.article)
    }
}

/// Plays `cycle` (UCI coordinates) from `fen_text` until the referee rules under the
/// Asian rules, at most four times round; and classifies the moves of one round.
pub(crate) fn asian(fen_text: &str, cycle: &str) -> Cycle {
    let start = Position::from_fen(fen_text).expect("test FEN");
    let mut position = start.clone();
    let mut ids = Identities::new(&position);
    let (mut natures, mut chases) = (Vec::new(), Vec::new());
    let moves: Vec<Move> = cycle
        .split_whitespace()
        .map(|text| {
            let mv = parse_uci(&position, text, Dialect::ZeroBased).unwrap_or_else(|e| panic!("{text}: {e}"));
            let nature = classify(&position, &ids, mv);
            natures.push(nature_names(&nature, &allowed_natures(&position, &ids, mv)));
            chases.push(nature.chases.iter().map(|t| format!("{}{}", t.attacker_square, t.target_square)).collect());
            ids.apply(mv);
            position.make_move(mv);
            mv
        })
        .collect();
    assert_eq!(position.hash(), start.hash(), "the cycle returns to its start");
    let mut referee = Referee::new(start, RefereeConfig::for_rules(RuleSet::Asian));
    let mut plies = 0;
    let ruling = moves
        .iter()
        .cycle()
        .take(4 * moves.len())
        .find_map(|&mv| {
            plies += 1;
            referee.play(mv).expect("legal move")
        })
        .expect("a ruling within four rounds");
    Cycle { ruling, plies, natures, chases }
}

/// How many pieces of the side that did not move last could capture on `square` after
/// `moves` from `fen_text`, were it that side's turn.
pub(crate) fn attackers_after(fen_text: &str, moves: &str, square: &str) -> usize {
    let mut position = Position::from_fen(fen_text).expect("test FEN");
    for text in moves.split_whitespace() {
        let mv = parse_uci(&position, text, Dialect::ZeroBased).expect("legal move");
        position.make_move(mv);
    }
    let text = fen::to_fen(&position);
    let mut fields: Vec<&str> = text.split(' ').collect();
    fields[1] = if fields[1] == "w" { "b" } else { "w" };
    let turned = Position::from_fen(&fields.join(" ")).expect("the other side to move");
    movegen::legal_moves(&turned).iter().filter(|mv| mv.to().to_string() == square).count()
}

#[test]
fn section_4_rules_3_and_5_a_violation_at_its_third_repetition_a_draw_at_the_fourth() {
    // Rule 3: the violator "repeats the violation for three times" before it loses: the
    // four-ply cycle of a rook after a crossed pawn (rule 31) is ruled when its start
    // comes round the third time. Rule 5: a repetition without violation "can be ruled a
    // draw" when "both sides refuse to change": the pawn's allowed chase (rule 29) is
    // drawn only at the fourth.
    let violation = asian("4k4/9/3R5/9/9/9/2p6/9/9/5K3 w", "d7c7 c3d3 c7d7 d3c3");
    assert_eq!(violation.outcome(), (BLACK_WINS, Reason::PerpetualChase, CHASE));
    assert_eq!(violation.plies, 8);
    let draw = asian("4k4/9/9/2c6/3P5/9/9/9/9/5K3 w", "d5c5 c6d6 c5d5 d6c6");
    assert_eq!(draw.outcome(), (Outcome::Draw, Reason::Repetition, DRAW));
    assert_eq!(draw.plies, 12);
}

#[test]
fn section_4_rule_6_perpetual_check_by_several_pieces_loses() {
    // "Under any circumstance, the side that perpetually checks with one piece or
    // several pieces will be ruled to lose" (also Section 3 rule 1): two rooks take turns
    // to check the lone king, which steps aside and back each time.
    let cycle = asian("4k4/9/9/9/3R1R3/9/9/9/4A4/4K4 w", "d5e5 e9d9 e5d5 d9e9 f5e5 e9f9 e5f5 f9e9");
    assert_eq!(cycle.heaviest(), ["check", "idle", "check", "idle", "check", "idle", "check", "idle"]);
    assert_eq!(cycle.outcome(), (BLACK_WINS, Reason::PerpetualCheck, "Asian Section 4 rule 6"));
}

#[test]
fn section_4_rule_7_check_and_check_back_is_a_draw() {
    // "It is a draw when both sides keep checking ('Resolve check and check back' is a
    // draw)": each side blocks the check it is in with a piece whose move uncovers a
    // check on the other king (the black rook's file, then the red cannon's through the
    // black cannon, then the black cannon's through the red rook, then the red rook's).
    let cycle = asian("4kr3/5c3/4R4/9/9/9/9/9/9/4CK3 b", "f8e8 e7f7 e8f8 f7e7");
    assert_eq!(cycle.heaviest(), ["check"; 4]);
    assert_eq!(cycle.outcome(), (Outcome::Draw, Reason::MutualPerpetualCheck, "Asian Section 4 rule 7"));
}

#[test]
fn section_4_rule_8_two_checks_one_check_back_the_checker_loses() {
    // "In 'Two checks one check back', the perpetually checking side will be ruled to
    // lose": Red's pawn checks through the cannon on e1 on every move, first as its mount,
    // then by leaving Black's pawn the only one. Black's pawn blocks the first check as a
    // second screen, which uncovers its cannon's check through the advisor on f2, and
    // steps back from the second. Red checked throughout, Black one move in two: Red
    // loses, under rule 8 itself.
    let cycle = asian("5c3/9/4k4/9/5P3/9/5p3/5A3/4CK3/9 w", "f5e5 f3e3 e5f5 e3f3");
    assert_eq!(cycle.natures[0][0], "check");
    assert_eq!(cycle.natures[1][0], "check");
    assert_eq!(cycle.natures[2][0], "check");
    assert!(!cycle.natures[3].contains(&"check"));
    assert_eq!(cycle.outcome(), (BLACK_WINS, Reason::PerpetualCheck, "Asian Section 4 rule 8"));
}

#[test]
fn chapter_1_section_2_rules_9_and_10_are_cited_for_the_moves_they_forbid() {
    // "Kings are not allowed to face each other directly" (rule 9); "the side being
    // checked should resolve the check" (rule 10). The judge refuses a move breaking
    // either citing the rule set's own article: Red's king stepping onto the open d-file
    // below Black's king, or onto e1, which Black's chariot on f1 attacks.
    use xq_engine::variant::Variant;
    use xq_engine::xiangqi::rules::judge::{JudgeRequest, judge};
    let refused = |rules, mv: &str| {
        let fen = Some("3k5/9/9/9/9/9/9/9/5r3/4K4 w - - 0 1".to_owned());
        let request = JudgeRequest {
            fen,
            moves: vec![mv.to_owned()],
            rules,
            variant: Variant::Xiangqi,
            timing: Default::default(),
        };
        judge(&request).unwrap_err().to_string()
    };
    assert!(refused(RuleSet::Asian, "e0d0").ends_with("(Asian Chapter 1 Section 2 rule 9)"));
    assert!(refused(RuleSet::Asian, "e0e1").ends_with("leaves the king in check (Asian Chapter 1 Section 2 rule 10)"));
    assert!(refused(RuleSet::Wxf, "e0d0").ends_with("(WXF 2.9)"));
    assert!(refused(RuleSet::Wxf, "e0e1").ends_with("(WXF 2.10)"));
    // A verification judging under several rule sets refuses the game citing each.
    use xq_engine::xiangqi::pgn::parse_pgn;
    use xq_engine::xiangqi::rules::verify::{Tally, check_game};
    let refusal = |rule_sets: &[RuleSet]| {
        let game = parse_pgn("[FEN \"3k5/9/9/9/9/9/9/9/5r3/4K4 w - - 0 1\"]\n\ne0e1 *\n").unwrap().remove(0);
        let line = check_game(&game, rule_sets, "game 1", &mut Tally::default(), None).unwrap().unwrap();
        line["error"].as_str().unwrap().to_owned()
    };
    assert_eq!(
        refusal(&[RuleSet::Wxf, RuleSet::Asian, RuleSet::Cxq]),
        "ply 1: 'e0e1' cannot be played: it leaves the king in check (WXF 2.10; Asian Chapter 1 Section 2 rule 10)"
    );
    assert!(refusal(&[RuleSet::Asian]).ends_with("(Asian Chapter 1 Section 2 rule 10)"));
    assert!(refusal(&[RuleSet::Wxf, RuleSet::Cxq]).ends_with("(WXF 2.10)"));
}

#[test]
fn section_4_rule_10_mutual_threats_to_mate_are_a_draw() {
    // "Resolve threatening to checkmate and threatening to checkmate back should be ruled
    // as a draw": the position realising WXF Diagram 10's second example (Chapter 5,
    // Section 5, tests/data/wxf-chapter5-examples.json). Each side's pawn, on the other's
    // back ranks, and king step between the e- and f-files; every move parries the mate
    // the last one threatened and threatens one in turn, with no check and no chase.
    let cycle = asian("4P4/8R/1r3k3/6R2/9/2B6/9/4p4/9/4K4 w", "e9f9 f7e7 e0f0 e2f2 f9e9 e7f7 f0e0 f2e2");
    assert_eq!(cycle.heaviest(), ["kill"; 8]);
    assert!(cycle.natures.iter().all(|n| !n.contains(&"check") && !n.contains(&"chase")), "{:?}", cycle.natures);
    assert_eq!(cycle.outcome(), (Outcome::Draw, Reason::Repetition, DRAW));
}

#[test]
fn section_4_rule_9_perpetual_threat_to_mate_is_a_draw() {
    // "When one side perpetually TTC and the other side cannot resolve the TTC, or can
    // only keep moving King to avoid being checkmated, it is a draw" (also Section 3 rule
    // 2): the rook on a8 holds the king on its back rank, the other rook threatens to
    // mate along it from h0 and i0 alike, and the bare king can only step aside.
    let cycle = asian("4k4/R8/9/9/9/9/9/9/9/5K1R1 w", "h0i0 e9d9 i0h0 d9e9");
    assert_eq!(cycle.heaviest(), ["kill", "idle", "kill", "idle"]);
    assert_eq!(cycle.outcome(), (Outcome::Draw, Reason::Repetition, DRAW));
}

#[test]
fn section_4_rule_11_one_check_one_threat_to_mate_is_a_draw() {
    // "'One check and one threatening to checkmate' is a draw" (also Section 3 rule 2):
    // the rook checks from h9, and back on h0 it threatens Rh8+ Ke9 Ra9 mate.
    let cycle = asian("4k4/9/R8/9/9/9/9/9/9/3K3R1 w", "h0h9 e9e8 h9h0 e8e9");
    assert_eq!(cycle.heaviest(), ["check", "idle", "kill", "idle"]);
    assert_eq!(cycle.outcome(), (Outcome::Draw, Reason::Repetition, DRAW));
}

#[test]
fn section_4_rule_12_checks_and_one_chase_are_a_draw() {
    // "'One check and one chase' or 'several checks and one chase' should be ruled as a
    // draw" (also Section 3 rule 2). One check and one chase: the rook checks on the
    // e-file and comes back to attack the lone cannon.
    let one = asian("4k4/9/9/R8/9/c8/9/9/9/3K5 w", "a6e6 e9f9 e6a6 f9e9");
    assert_eq!(one.heaviest(), ["check", "idle", "chase", "idle"]);
    assert_eq!(one.chases[2], ["a6a4"]);
    assert_eq!(one.outcome(), (Outcome::Draw, Reason::Repetition, DRAW));
    // Several checks and one chase: three checks down the ranks, then the rook turns on
    // the cannon along rank 6.
    let several = asian("4k4/9/9/R6c1/9/9/9/9/9/3K5 w", "a6a9 e9e8 a9a8 e8e7 a8a7 e7e8 a7a6 e8e9");
    assert_eq!(several.heaviest(), ["check", "idle", "check", "idle", "check", "idle", "chase", "idle"]);
    assert_eq!(several.chases[6], ["a6h6"]);
    assert_eq!(several.outcome(), (Outcome::Draw, Reason::Repetition, DRAW));
}

#[test]
fn section_4_rule_13_one_check_and_one_idle_or_threat_to_check_and_capture_draw() {
    // "'One check and one idle' and 'one check and one threatening to check and capture'
    // are both ruled as draw" (also Section 3 rule 2). The same rook shuttle, first
    // against the bare king, then with a black horse on i8 that the rook, back on a6,
    // threatens to win by Ra9+ and Ra8+.
    let idle = asian("4k4/9/9/R8/9/9/9/9/9/3K5 w", "a6e6 e9f9 e6a6 f9e9");
    assert_eq!(idle.heaviest(), ["check", "idle", "idle", "idle"]);
    assert_eq!(idle.outcome(), (Outcome::Draw, Reason::Repetition, DRAW));
    let capture = asian("4k4/8n/9/R8/9/9/9/9/9/3K5 w", "a6e6 e9f9 e6a6 f9e9");
    assert_eq!(capture.heaviest(), ["check", "idle", "capture-after-check", "idle"]);
    assert_eq!(capture.outcome(), (Outcome::Draw, Reason::Repetition, DRAW));
}

#[test]
fn section_4_rule_14_one_chase_and_one_threat_to_check_and_capture_draw() {
    // "'One chase and one threatening to check and capture' should be ruled a draw"
    // (also Section 3 rule 2): the rook attacks the horse along rank 8, then drops back
    // to a6, from where it threatens to win it after checks.
    let cycle = asian("4k4/8n/9/R8/9/9/9/9/9/3K5 w", "a6a8 e9f9 a8a6 f9e9");
    assert_eq!(cycle.heaviest(), ["chase", "idle", "capture-after-check", "idle"]);
    assert_eq!(cycle.chases[0], ["a8i8"]);
    assert_eq!(cycle.outcome(), (Outcome::Draw, Reason::Repetition, DRAW));
}
