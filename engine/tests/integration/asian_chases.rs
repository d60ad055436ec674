//! The Asian rules' chases (Chapter 4 Section 4 rules 15-40, Section 3 rules 5 and 6),
//! rule by rule as `asian_rules` plays the others: the index of every rule and its test
//! is there.

use crate::asian_rules::{BLACK_WINS, CHASE, DRAW, asian, attackers_after};
use xq_engine::xiangqi::rules::{Outcome, Reason};

#[test]
fn section_4_rule_15_a_cannon_cannot_perpetually_chase_a_rook() {
    // "One or two Cannons cannot perpetually chase a Rook even if the Rook is protected,
    // or both of the Rook's reacting moves are attacking an unprotected piece." The
    // cannon follows the rook between the a- and c-files, the pawns its mounts. The
    // horse on b9 protects the rook on both files; the cannon still loses (also Section
    // 3 rule 6: "a Knight or a Cannon cannot perpetually chase a protected Rook").
    let protected = asian("1n3k3/9/r8/9/9/9/P1P6/9/9/2CK5 w", "c0a0 a7c7 a0c0 c7a7");
    assert_eq!(protected.heaviest(), ["chase", "idle", "chase", "idle"]);
    assert_eq!(protected.chases[0], ["a0a7"]);
    assert_eq!(protected.outcome(), (BLACK_WINS, Reason::PerpetualChase, CHASE));
    // Each of the rook's escapes attacks an unprotected horse, a different one each time:
    // allowed for Black (rule 32), still forbidden for the cannon.
    let counter = asian("N1N2k3/9/r8/9/9/9/P1P6/9/9/2CK5 w", "c0a0 a7c7 a0c0 c7a7");
    assert_eq!(counter.chases, [vec!["a0a7"], vec!["c7c9"], vec!["c0c7"], vec!["a7a9"]]);
    assert_eq!(counter.outcome(), (BLACK_WINS, Reason::PerpetualChase, CHASE));
}

#[test]
fn section_4_rule_16_cannons_chasing_two_rooks_draw() {
    // "One Cannon perpetually chases two Rooks can be ruled a draw; two Cannons
    // perpetually chase two Rooks can also be ruled a draw." Each rook escapes between
    // two mounted files; one cannon follows both along rank 1, and then two cannons, one
    // for each rook.
    let one = asian("5k3/9/r5r2/9/9/9/P1P3P1P/9/8C/3K5 w", "i1a1 a7c7 a1g1 g7i7 g1c1 c7a7 c1i1 i7g7");
    assert_eq!(one.heaviest(), ["chase", "idle"].repeat(4));
    assert_eq!(one.outcome(), (Outcome::Draw, Reason::Repetition, DRAW));
    let two = asian("5k3/9/r5r2/9/9/9/P1P3P1P/9/2C5C/3K5 w", "c1a1 a7c7 i1g1 g7i7 a1c1 c7a7 g1i1 i7g7");
    assert_eq!(two.heaviest(), ["chase", "idle"].repeat(4));
    assert_eq!(two.chases[0], ["a1a7"]);
    assert_eq!(two.chases[2], ["g1g7"]);
    assert_eq!(two.outcome(), (Outcome::Draw, Reason::Repetition, DRAW));
}

#[test]
fn section_4_rule_17_a_rook_may_chase_a_protected_cannon() {
    // "Rook can perpetually chase a protected Cannon": the black rook on a5 protects the
    // cannon on a1 and on a0 (a real protector, Section 3 rule 6), so the red rook's
    // attacks are no chase.
    let protected = asian("3aka3/9/9/9/r8/9/9/5K3/c8/6R2 w", "g0g1 a1a0 g1g0 a0a1");
    assert!(protected.chases.iter().all(Vec::is_empty), "{:?}", protected.natures);
    assert_eq!(protected.outcome(), (Outcome::Draw, Reason::Repetition, DRAW));
    // "If the Cannon is protected in one move and not in another move, this chase is
    // still allowed": the horse on b2 protects a0 only.
    let once = asian("3aka3/9/9/9/9/9/9/1n3K3/c8/6R2 w", "g0g1 a1a0 g1g0 a0a1");
    assert_eq!(once.chases[0], ["g1a1"]);
    assert!(once.chases[2].is_empty());
    assert_eq!(once.outcome(), (Outcome::Draw, Reason::Repetition, DRAW));
}

#[test]
fn section_4_rule_18_a_rook_cannot_perpetually_chase_an_unprotected_cannon() {
    // "A Rook cannot perpetually chase an unprotected Cannon": the cycle of rule 17
    // without a protector.
    let bare = asian("3aka3/9/9/9/9/9/9/5K3/c8/6R2 w", "g0g1 a1a0 g1g0 a0a1");
    assert_eq!(bare.heaviest(), ["chase", "idle", "chase", "idle"]);
    assert_eq!(bare.outcome(), (BLACK_WINS, Reason::PerpetualChase, CHASE));
    // "... even if the Cannon is perpetually threatening to checkmate": each move of the
    // cannon, between g8 and g7, leaves Black threatening mate with it and the rook on d2
    // against the king hemmed in by its advisors (without the cannon there is none).
    let kill = asian("3k5/6c2/R8/9/9/9/9/3r5/4A4/4KA3 w", "a7a8 g8g7 a8a7 g7g8");
    assert_eq!(kill.heaviest(), ["chase", "kill", "chase", "kill"]);
    assert_eq!(kill.outcome(), (BLACK_WINS, Reason::PerpetualChase, CHASE));
    // "... has a check": the cannon escapes to e5 with check through the advisor, and the
    // rook blocks it on e4, attacking the cannon again.
    let check = asian("5k3/9/9/9/4c4/3R5/9/9/4A4/4K4 w", "d4e4 e5d5 e4d4 d5e5");
    assert_eq!(check.heaviest(), ["chase", "idle", "chase", "check"]);
    assert_eq!(check.outcome(), (BLACK_WINS, Reason::PerpetualChase, CHASE));
    // "... even if both Cannon's reacting moves are attacking two different pieces":
    // the pawns on a9 and c9, through the red cannons on a8 and c8.
    let counter = asian("P1P2k3/C1C6/c8/9/9/9/9/9/9/2RK5 w", "c0a0 a7c7 a0c0 c7a7");
    assert_eq!(counter.chases, [vec!["a0a7"], vec!["c7c9"], vec!["c0c7"], vec!["a7a9"]]);
    assert_eq!(counter.outcome(), (BLACK_WINS, Reason::PerpetualChase, CHASE));
}

#[test]
fn section_4_rule_19_a_rook_held_by_a_knight_cannot_be_chased() {
    // "When a Rook cannot move because of an opponent's Knight, the Rook cannot be
    // perpetually chased, regardless of whether the opponent's Knight is protected": the
    // black rook on f8 is the leg of the horse on g8, which would check e9 were it to
    // move. The cannon on f1 attacks it through its pawn on f5, then through Black's
    // pawn when that comes in to block. Unprotected horse, then protected by the rook on
    // i8: Red loses both.
    for fen_text in ["4k4/5rN2/9/9/4P4/9/6p2/9/5C3/3K5 w", "4k4/5rN1R/9/9/4P4/9/6p2/9/5C3/3K5 w"] {
        let cycle = asian(fen_text, "e5f5 g3f3 f5e5 f3g3");
        assert_eq!(cycle.chases[0], ["f1f8"], "{fen_text}");
        assert_eq!(cycle.chases[2], ["f1f8"], "{fen_text}");
        assert_eq!(cycle.outcome(), (BLACK_WINS, Reason::PerpetualChase, CHASE), "{fen_text}");
    }
}

#[test]
fn section_4_rule_20_a_cannon_and_a_knight_cannot_take_turns_on_a_rook() {
    // "A Cannon and a Knight cannot take turns to perpetually chase a Rook, regardless of
    // whether the Rook is protected": the horse leaves e3 to attack the rook from d5, and
    // coming back it is the cannon's mount again. The elephant on g9 protects the rook.
    let cycle = asian("3k2b2/9/4r4/9/9/9/4N4/4C4/9/5K3 w", "e3d5 d9d8 d5e3 d8d9");
    assert_eq!(cycle.chases[0], ["d5e7"]);
    assert_eq!(cycle.chases[2], ["e2e7"]);
    assert_eq!(cycle.outcome(), (BLACK_WINS, Reason::PerpetualChase, CHASE));
}

#[test]
fn section_4_rule_21_a_knight_cannot_chase_a_rook_that_counters_once() {
    // "A Knight cannot perpetually chase a Rook ... if the Rook only counter attacks in
    // one of its moves": the rook escapes to b1 attacking the horse on b3, and back to a1
    // attacking nothing.
    let cycle = asian("3k5/9/9/9/9/9/9/3N5/r8/5K3 w", "d2b3 a1b1 b3d2 b1a1");
    assert_eq!(cycle.heaviest(), ["chase", "chase", "chase", "idle"]);
    assert_eq!(cycle.chases[1], ["b1b3"]);
    assert_eq!(cycle.outcome(), (BLACK_WINS, Reason::PerpetualChase, CHASE));
}

#[test]
fn section_4_rule_22_rook_and_knight_chasing_each_other_draw() {
    // "If a Rook and a Knight perpetually chase each other, the game should be a draw":
    // both violate alike (Section 2 principle 2). The horse attacks the rook, which
    // escapes to a square attacking the horse, round four squares each.
    let cycle = asian("3k5/9/9/9/9/N1r6/9/9/9/5K3 w", "a4b6 c4b4 b6d5 b4b5 d5c3 b5c5 c3a4 c5c4");
    assert_eq!(cycle.heaviest(), ["chase"; 8]);
    assert_eq!(cycle.outcome(), (Outcome::Draw, Reason::MutualPerpetualChase, "Asian Section 2 principle 2"));
}

#[test]
fn section_4_rule_23_a_rook_cannot_chase_a_knight_that_answers_once() {
    // "If a Rook perpetually chases a Knight and the Knight only chases back once, checks
    // once, or has one check and one chase, the Rook side has to change."
    let chase_back = asian("3k5/9/9/4R4/9/6n2/9/9/4A4/5K3 w", "e6e4 g4f6 e4e6 f6g4");
    assert_eq!(chase_back.heaviest(), ["chase", "chase", "chase", "idle"]);
    assert_eq!(chase_back.outcome(), (BLACK_WINS, Reason::PerpetualChase, CHASE));
    // The horse checks from g2 once the rook has left g1, the horse's leg; the rook
    // comes back to g1, blocking the check and attacking the horse.
    let check = asian("3k5/9/9/9/9/7n1/9/9/6R2/5K3 w", "g1h1 h4g2 h1g1 g2h4");
    assert_eq!(check.heaviest(), ["chase", "check", "chase", "idle"]);
    assert_eq!(check.outcome(), (BLACK_WINS, Reason::PerpetualChase, CHASE));
    // And with a pawn on f5 for the horse to attack on its way back: one check, one chase.
    let both = asian("3k5/9/9/9/5P3/7n1/9/9/6R2/5K3 w", "g1h1 h4g2 h1g1 g2h4");
    assert_eq!(both.heaviest(), ["chase", "check", "chase", "chase"]);
    assert_eq!(both.outcome(), (BLACK_WINS, Reason::PerpetualChase, CHASE));
}

#[test]
fn section_4_rule_24_rook_chasing_rook() {
    // "Rook chases Rook: If both side can capture the other side, this is considered
    // perpetual sacrifice and should be ruled as a draw" (also Section 3 rule 7).
    let both = asian("5k3/9/r8/9/9/9/9/1R7/9/4K4 w", "b2a2 a7b7 a2b2 b7a7");
    assert!(both.chases.iter().all(Vec::is_empty));
    assert!(both.natures[0].contains(&"exchange"));
    assert_eq!(both.outcome(), (Outcome::Draw, Reason::Repetition, DRAW));
    // "If one side cannot capture the other for some reason, the other side cannot
    // perpetually chases it": the black rook is pinned on the d-file by the rook on d0.
    let pinned = asian("3k5/9/9/9/3r5/7R1/9/9/9/3RK4 w", "h4h5 d5d4 h5h4 d4d5");
    assert_eq!(pinned.chases[0], ["h5d5"]);
    assert_eq!(pinned.chases[2], ["h4d4"]);
    assert_eq!(pinned.outcome(), (BLACK_WINS, Reason::PerpetualChase, CHASE));
}

#[test]
fn section_4_rule_24_cannon_chasing_cannon() {
    // "Cannon chases Cannon: If both side can capture the other side, this is considered
    // perpetual sacrifice and should be ruled as a draw": the red cannon follows the
    // black one between the a- and c-files, each able to take the other over the pawn.
    let both = asian("5k3/9/c8/9/9/9/P1P6/9/9/2CK5 w", "c0a0 a7c7 a0c0 c7a7");
    assert!(both.chases.iter().all(Vec::is_empty));
    assert_eq!(both.outcome(), (Outcome::Draw, Reason::Repetition, DRAW));
    // "If one side cannot capture the other for some reason, the other side cannot
    // perpetually chases it": the black cannon on f8 is the leg of the horse on g8. Red's
    // cannon attacks it through either mount; without the horse the black cannon could
    // take back, and the same cycle is a draw.
    let held = asian("4k4/5cN2/9/9/4P4/9/6p2/9/5C3/3K5 w", "e5f5 g3f3 f5e5 f3g3");
    assert_eq!(held.chases[0], ["f1f8"]);
    assert_eq!(held.chases[2], ["f1f8"]);
    assert_eq!(held.outcome(), (BLACK_WINS, Reason::PerpetualChase, CHASE));
    let free = asian("4k4/5c3/9/9/4P4/9/6p2/9/5C3/3K5 w", "e5f5 g3f3 f5e5 f3g3");
    assert!(free.chases.iter().all(Vec::is_empty));
    assert_eq!(free.outcome(), (Outcome::Draw, Reason::Repetition, DRAW));
}

#[test]
fn section_4_rule_24_knight_chasing_knight() {
    // "Knight chases Knight: If both side can capture the other side, this is considered
    // perpetual sacrifice and should be ruled as a draw. If one side is blocked, the
    // other side cannot perpetually chases it" (Section 3 rule 7: "A free Knight cannot
    // perpetually chase a blocked Knight"). The red pawns on a6 and c5 stand on the legs
    // the black horse would need to take back.
    let blocked = asian("3k5/9/9/P2N5/n1P6/9/9/9/9/5K3 w", "d6b7 a5c4 b7d6 c4a5");
    assert_eq!(blocked.chases[0], ["b7a5"]);
    assert_eq!(blocked.chases[2], ["d6c4"]);
    assert_eq!(blocked.outcome(), (BLACK_WINS, Reason::PerpetualChase, CHASE));
    let free = asian("3k5/9/9/3N5/n8/9/9/9/9/5K3 w", "d6b7 a5c4 b7d6 c4a5");
    assert!(free.chases.iter().all(Vec::is_empty));
    assert_eq!(free.outcome(), (Outcome::Draw, Reason::Repetition, DRAW));
}

#[test]
fn section_4_rule_25_a_cannon_chases_by_its_mount() {
    // "When a Cannon is attacking an unprotected Knight, Guard, Minister, or Pawn that has
    // crossed the river, it will be a perpetual chase even if only the cannon mount moves
    // but neither the attacking Cannon nor the attacked piece moves": Red's mount comes
    // in, Black blocks with a second screen, Red's mount leaves and Black's is the mount.
    let mount = "e5f5 g3f3 f5e5 f3g3";
    for (fen_text, cycle, chase) in [
        ("4k4/5n3/9/9/4P4/9/6p2/9/5C3/3K5 w", mount, "f1f8"), // knight
        ("3k5/9/5a3/9/4P4/9/6p2/9/5C3/4K4 w", mount, "f1f7"), // guard
        ("4k1b2/9/9/9/5P3/9/7p1/9/6C2/3K5 w", "f5g5 h3g3 g5f5 g3h3", "g1g9"), // minister
        ("4k4/9/9/9/9/9/9/5A1c1/p7C/3K5 w", "f2e1 h2h1 e1f2 h1h2", "i1a1"), // crossed pawn
    ] {
        let cycle = asian(fen_text, cycle);
        assert_eq!(cycle.chases[0], [chase], "{fen_text}");
        assert_eq!(cycle.chases[2], [chase], "{fen_text}");
        assert_eq!(cycle.outcome(), (BLACK_WINS, Reason::PerpetualChase, CHASE), "{fen_text}");
    }
    // "However, perpetually chasing a Pawn that has NOT crossed the river is allowed"
    // (also Section 3 rule 3): the pawn on g6 is no target.
    let uncrossed = asian("4k4/9/9/6p2/5P3/9/7p1/9/6C2/3K5 w", "f5g5 h3g3 g5f5 g3h3");
    assert!(uncrossed.chases.iter().all(Vec::is_empty));
    assert_eq!(uncrossed.outcome(), (Outcome::Draw, Reason::Repetition, DRAW));
}

#[test]
fn section_4_rule_26_a_cannon_chases_a_rook_by_its_mount() {
    // "When a Cannon keeps attacking a Rook, disregard whether the Rook is protected or
    // not, even if the Rook doesn't move and both sides only move the cannon mount, it is
    // a perpetual chase": the mounts of rule 25 before a rook, protected by the horse on
    // h7, then unprotected.
    for fen_text in ["4k4/5r3/7n1/9/4P4/9/6p2/9/5C3/3K3N1 w", "4k4/5r3/9/9/4P4/9/6p2/9/5C3/3K3N1 w"] {
        let cycle = asian(fen_text, "e5f5 g3f3 f5e5 f3g3");
        assert_eq!(cycle.chases[0], ["f1f8"], "{fen_text}");
        assert_eq!(cycle.chases[2], ["f1f8"], "{fen_text}");
        assert_eq!(cycle.outcome(), (BLACK_WINS, Reason::PerpetualChase, CHASE), "{fen_text}");
    }
}

#[test]
fn section_4_rule_27_a_rook_confined_by_a_cannon() {
    // The black rook stands between the red cannon on e2 and the advisor before its
    // king: leaving the e-file would let the cannon check through the advisor.
    // "An attack with a Rook on this confined Rook is not considered a sacrifice.
    // Therefore, the attacking Rook cannot keep chasing the confined Rook."
    let rook = asian("4k4/4a4/9/4r4/1R7/9/9/4C4/4K4/9 w", "b5b6 e6e5 b6b5 e5e6");
    assert_eq!(rook.chases[0], ["b6e6"]);
    assert_eq!(rook.chases[2], ["b5e5"]);
    assert_eq!(rook.outcome(), (BLACK_WINS, Reason::PerpetualChase, CHASE));
    // "If one of the moves of the confined Rook is protected, this Rook can be
    // perpetually chased": the horse on g4 protects e5.
    let protected = asian("4k4/4a4/9/4r4/1R7/6n2/9/4C4/4K4/9 w", "b5b6 e6e5 b6b5 e5e6");
    assert!(protected.chases[2].is_empty());
    assert_eq!(protected.outcome(), (Outcome::Draw, Reason::Repetition, DRAW));
    // "A Knight or a Cannon cannot perpetually chase a confined Rook, disregard whether
    // the confined Rook is protected or not"; and "the Rook's move within this line
    // cannot be considered a chase": on e5 the rook faces the horse on c5 and chases
    // nothing.
    let knight = asian("4k4/4a4/9/4r4/9/6n2/3N5/4C4/4K4/9 w", "d3c5 e6e5 c5d3 e5e6");
    assert_eq!(knight.heaviest(), ["chase", "idle", "chase", "idle"]);
    assert_eq!(knight.outcome(), (BLACK_WINS, Reason::PerpetualChase, CHASE));
}

#[test]
fn section_4_rule_28_the_king_may_chase() {
    // "The King can perpetually chase an enemy piece" (also Section 3 rule 9: "It is a
    // draw if a King ... perpetually chases"): the king follows the cannon along its
    // palace.
    let alone = asian("5k3/9/9/9/9/9/9/3K5/4c4/9 w", "d2e2 e1d1 e2d2 d1e1");
    assert_eq!(alone.chases, [vec!["e2e1"], vec![], vec!["d2d1"], vec![]]);
    assert_eq!(alone.outcome(), (Outcome::Draw, Reason::Repetition, DRAW));
    // "The King can also work with another piece to perpetually chase an enemy piece":
    // stepping off e2 the king frees the leg of the horse on e3, which attacks d1 too.
    let helped = asian("5k3/9/9/9/9/9/4N4/3K5/4c4/9 w", "d2e2 e1d1 e2d2 d1e1");
    assert_eq!(helped.chases[0], ["e2e1"]);
    assert_eq!(helped.chases[2].len(), 2, "king and horse: {:?}", helped.chases[2]);
    assert_eq!(helped.outcome(), (Outcome::Draw, Reason::Repetition, DRAW));
}

#[test]
fn section_4_rule_29_pawns_may_chase() {
    // "A Pawn can perpetually chase" (also Section 3 rules 3 and 9).
    let alone = asian("4k4/9/9/2c6/3P5/9/9/9/9/5K3 w", "d5c5 c6d6 c5d5 d6c6");
    assert_eq!(alone.chases, [vec!["c5c6"], vec![], vec!["d5d6"], vec![]]);
    assert_eq!(alone.outcome(), (Outcome::Draw, Reason::Repetition, DRAW));
    // "Two or more Pawns can work together to perpetually chase": two pawns take turns
    // under the cannon as it runs along rank 7.
    let two = asian("4k4/9/1c7/P1P6/9/9/9/9/9/5K3 w", "a6b6 b7d7 c6d6 d7a7 b6a6 a7c7 d6c6 c7b7");
    assert_eq!(two.heaviest(), ["chase", "idle"].repeat(4));
    assert_eq!(two.outcome(), (Outcome::Draw, Reason::Repetition, DRAW));
    // "If one of the moves of the Pawn's perpetual chase involves a Rook, Cannon, or
    // Knight, it is still allowed": leaving c5 the pawn frees the leg of the horse on c4.
    let helped = asian("4k4/9/9/2c6/3P5/2N6/9/9/9/5K3 w", "d5c5 c6d6 c5d5 d6c6");
    assert_eq!(helped.chases[0], ["c5c6"]);
    assert_eq!(helped.chases[2].len(), 2, "pawn and horse: {:?}", helped.chases[2]);
    assert_eq!(helped.outcome(), (Outcome::Draw, Reason::Repetition, DRAW));
}

#[test]
fn section_4_rule_30_a_king_or_pawn_helped_on_every_move_may_not_chase() {
    // "A King or a Pawn cannot work together with another piece to perpetually chase an
    // opponent's piece": the cycles of rules 28 and 29 with a second horse, so that a
    // horse joins the king (the pawn) on every move. The text reads both ways here: rule
    // 28 ("The King can also work with another piece") and Section 3 rule 9 ("It is
    // still a draw if a King or a Pawn works with a Rook, a Knight, or a Cannon") against
    // this rule; as the arbiter does, these tests read rules 28-29 as another piece
    // joining on some moves (rule 29: "one of the moves") and this rule as on every move.
    for (fen_text, moves) in [
        ("5k3/9/9/9/9/9/3NN4/3K5/4c4/9 w", "d2e2 e1d1 e2d2 d1e1"),
        ("4k4/9/9/2c6/3P5/2NN5/9/9/9/5K3 w", "d5c5 c6d6 c5d5 d6c6"),
    ] {
        let cycle = asian(fen_text, moves);
        assert_eq!(cycle.chases[0].len(), 2, "{fen_text}: {:?}", cycle.chases);
        assert_eq!(cycle.chases[2].len(), 2, "{fen_text}: {:?}", cycle.chases);
        assert_eq!(cycle.outcome(), (BLACK_WINS, Reason::PerpetualChase, CHASE), "{fen_text}");
    }
}

#[test]
fn section_4_rule_31_a_rook_cannot_chase_a_crossed_pawn() {
    // "A Rook cannot perpetually chase a Pawn that has crossed the river. It doesn't
    // matter if the Pawn also threaten to capture a piece. The Rook's side has to change
    // or lose." The pawn steps between c3 and d3; then with red horses on b3 and e3 for
    // it to threaten, one on each step.
    let plain = asian("4k4/9/3R5/9/9/9/2p6/9/9/5K3 w", "d7c7 c3d3 c7d7 d3c3");
    assert_eq!(plain.heaviest(), ["chase", "idle", "chase", "idle"]);
    assert_eq!(plain.outcome(), (BLACK_WINS, Reason::PerpetualChase, CHASE));
    let threatening = asian("4k4/9/3R5/9/9/9/1Np1N4/9/9/5K3 w", "d7c7 c3d3 c7d7 d3c3");
    assert_eq!(threatening.chases[1], ["d3e3"]);
    assert_eq!(threatening.chases[3], ["c3b3"]);
    assert_eq!(threatening.outcome(), (BLACK_WINS, Reason::PerpetualChase, CHASE));
}

#[test]
fn section_4_rule_32_chasing_two_pieces_is_a_draw() {
    // "One piece perpetually chases two pieces or more should be ruled as a draw" (also
    // Section 3 rule 4): the rook turns from the horse on e5 to the cannon on e6 and back.
    let one = asian("5k3/9/9/R3c4/4n4/9/9/9/9/3K5 w", "a6a5 f9f8 a5a6 f8f9");
    assert_eq!(one.chases, [vec!["a5e5"], vec![], vec!["a6e6"], vec![]]);
    assert_eq!(one.outcome(), (Outcome::Draw, Reason::Repetition, DRAW));
    // "Two pieces take turns to perpetually chase two or more pieces also should be ruled
    // a draw": a second rook on the other side takes its turns.
    let two = asian("5k3/9/9/R3c4/4n3R/9/9/9/9/3K5 w", "a6a5 f9f8 i5i6 f8f9 a5a6 f9f8 i6i5 f8f9");
    assert_eq!(two.heaviest(), ["chase", "idle"].repeat(4));
    assert_eq!(two.outcome(), (Outcome::Draw, Reason::Repetition, DRAW));
}

#[test]
fn section_4_rule_33_pieces_cannot_take_turns_on_one_piece() {
    // "Two or more pieces cannot take turns to perpetually chase a piece" (also Section 3
    // rule 3: "One also loses if one uses two or more pieces to perpetually chase"): the
    // rook attacks the horse on b9 from b5, and stepping away it uncovers the cannon on
    // b0, whose mount is the horse on b1.
    let cycle = asian("1n3k3/9/9/9/4R4/9/9/9/1N7/1C1K5 w", "e5b5 f9f8 b5e5 f8f9");
    assert_eq!(cycle.chases, [vec!["b5b9"], vec![], vec!["b0b9"], vec![]]);
    assert_eq!(cycle.outcome(), (BLACK_WINS, Reason::PerpetualChase, CHASE));
}

#[test]
fn section_4_rule_34_a_protector_that_cannot_recapture_protects_nothing() {
    // "A protected pieces cannot be perpetually chased if its protector has lost its
    // effectness": the horse on e5 protects the cannon on c6 and on c4, but it is the
    // only piece between the kings and may not leave the e-file.
    let lost = asian("4k4/9/9/2c6/4n4/8R/9/9/9/4K4 w", "i4i6 c6c4 i6i4 c4c6");
    assert_eq!(lost.chases[0], ["i6c6"]);
    assert_eq!(lost.chases[2], ["i4c4"]);
    assert_eq!(lost.outcome(), (BLACK_WINS, Reason::PerpetualChase, CHASE));
    // With the red pawn on e3 between the kings as well, the horse may take back: a
    // protected piece, a draw.
    let effective = asian("4k4/9/9/2c6/4n4/8R/4P4/9/9/4K4 w", "i4i6 c6c4 i6i4 c4c6");
    assert!(effective.chases.iter().all(Vec::is_empty));
    assert_eq!(effective.outcome(), (Outcome::Draw, Reason::Repetition, DRAW));
}

#[test]
fn section_4_rule_35_two_attackers_on_a_protected_piece_draw() {
    // "Two or more pieces trying to capture a protected piece doesn't constitute a
    // 'perpetual chase' and if neither side would change, the game can be ruled as a
    // draw": the cannon, protected by the rook on a5, is attacked by the red rook and by
    // a red cannon behind it on each move.
    let fen_text = "3aka3/9/9/9/r8/9/9/5K3/c7C/6R1C w";
    let cycle = asian(fen_text, "g0g1 a1a0 g1g0 a0a1");
    assert_eq!(attackers_after(fen_text, "g0g1", "a1"), 2);
    assert_eq!(attackers_after(fen_text, "g0g1 a1a0 g1g0", "a0"), 2);
    assert!(cycle.chases.iter().all(Vec::is_empty));
    assert_eq!(cycle.outcome(), (Outcome::Draw, Reason::Repetition, DRAW));
}

#[test]
fn section_4_rule_36_a_chase_offering_exchange_is_a_chase() {
    // "If a move in a perpetual chase is an offer to exchange, it still constitutes a
    // perpetual chase. If every move in a perpetual chase is also an offer to exchange, it
    // still constitutes a perpetual chase" (also Section 3 rule 8): the rook chasing the
    // lone cannon meets the black rook on g5 on both squares, protected there by the
    // horse on h3 and the elephant on e2.
    let cycle = asian("3aka3/9/9/9/6r2/9/7N1/4BK3/c8/6R2 w", "g0g1 a1a0 g1g0 a0a1");
    assert!(cycle.natures[0].contains(&"exchange") && cycle.natures[2].contains(&"exchange"));
    assert_eq!(cycle.chases[0], ["g1a1"]);
    assert_eq!(cycle.chases[2], ["g0a0"]);
    assert_eq!(cycle.outcome(), (BLACK_WINS, Reason::PerpetualChase, CHASE));
}

#[test]
fn section_4_rule_37_a_held_rook_and_king_cannot_be_chased_by_knight() {
    // "When A's Rook and King are controlled by B's Rook and Cannon, A cannot use a Knight
    // or Cannon to perpetually chase B's Rook": Red's rook on e1 can neither leave rank 1
    // nor take the black rook (the cannon on b1 would then check), and Red's horse chases
    // the black rook between d1 and c1; the rook attacks the horse on d3 on one of its
    // moves only, which allows Black nothing forbidden.
    let cycle = asian("3k5/9/9/9/9/9/3N5/9/1c1rRK3/9 w", "d3f2 d1c1 f2d3 c1d1");
    assert_eq!(cycle.chases[0], ["f2d1"]);
    assert_eq!(cycle.chases[2], ["d3c1"]);
    assert_eq!(cycle.outcome(), (BLACK_WINS, Reason::PerpetualChase, CHASE));
}

#[test]
fn section_4_rule_38_perpetual_threat_to_check_and_capture_draws() {
    // "Perpetually threatening to 'check and capture' is a draw" (also Section 3 rule
    // 10): from a6 and from a0 the rook threatens to win the horse on i8 after checks.
    let cycle = asian("4k4/8n/9/R8/9/9/9/9/9/3K5 w", "a6a0 e9f9 a0a6 f9e9");
    assert_eq!(cycle.heaviest(), ["capture-after-check", "idle", "capture-after-check", "idle"]);
    assert_eq!(cycle.outcome(), (Outcome::Draw, Reason::Repetition, DRAW));
}

#[test]
fn section_4_rule_39_perpetual_block_draws() {
    // "Perpetual block is a draw" (also Section 3 rule 10): the horse, protected by the
    // rook, stands in the black rook's way along rank 5 and then rank 4.
    let cycle = asian("3k5/9/9/9/8r/5R1N1/9/9/9/5K3 w", "h4f5 i5i4 f5h4 i4i5");
    assert_eq!(cycle.natures[0], ["block"]);
    assert_eq!(cycle.natures[2], ["block"]);
    assert_eq!(cycle.outcome(), (Outcome::Draw, Reason::Repetition, DRAW));
}

#[test]
fn section_4_rule_40_perpetual_offer_draws() {
    // "Perpetually offering to exchange or to sacrifice is a draw" (also Section 3 rule
    // 10). To sacrifice: the unprotected horse steps into the black rook's rank each time.
    let sacrifice = asian("3k5/9/9/9/7r1/9/4N4/9/9/5K3 w", "e3d5 h5h3 d5e3 h3h5");
    assert!(sacrifice.natures[0].contains(&"offer") && sacrifice.natures[2].contains(&"offer"));
    assert!(sacrifice.chases.iter().all(Vec::is_empty));
    assert_eq!(sacrifice.outcome(), (Outcome::Draw, Reason::Repetition, DRAW));
    // To exchange: the rook meets the black rook on rank 8, then on rank 6.
    let exchange = asian("4k4/8r/9/R8/9/9/9/9/9/3K5 w", "a6a8 i8i6 a8a6 i6i8");
    assert_eq!(exchange.natures[0], ["exchange"]);
    assert_eq!(exchange.natures[2], ["exchange"]);
    assert_eq!(exchange.outcome(), (Outcome::Draw, Reason::Repetition, DRAW));
}

#[test]
fn section_3_rule_5_two_chases_and_one_chase_back_the_chaser_loses() {
    // "In 'Two chase and one chase back', the 'two chase' side is 'perpetually chasing'
    // and has to change. Otherwise, it loses": the cannon chases the rook on every move;
    // the rook attacks the horse on a9 on one of its two moves.
    let cycle = asian("N4k3/9/r8/9/9/9/P1P6/9/9/2CK5 w", "c0a0 a7c7 a0c0 c7a7");
    assert_eq!(cycle.heaviest(), ["chase", "idle", "chase", "chase"]);
    assert_eq!(cycle.outcome(), (BLACK_WINS, Reason::PerpetualChase, CHASE));
}

#[test]
fn section_3_rule_6_real_and_false_protectors() {
    // "It is a draw if one side perpetually chases a 'protected' piece when the protector
    // is a real protector. One loses if one perpetually chases a 'protected' piece when
    // the protector is a false protector": the black rook on e4 protects the cannon on a4
    // and b4; pinned to its king by the red rook on e0 it is a false protector.
    let false_protector = asian("4k4/9/1R7/9/9/c3r4/9/9/9/3KR4 w", "b7a7 a4b4 a7b7 b4a4");
    assert_eq!(false_protector.chases[0], ["a7a4"]);
    assert_eq!(false_protector.chases[2], ["b7b4"]);
    assert_eq!(false_protector.outcome(), (BLACK_WINS, Reason::PerpetualChase, CHASE));
    let real_protector = asian("4k4/9/1R7/9/9/c3r4/9/9/9/3K5 w", "b7a7 a4b4 a7b7 b4a4");
    assert!(real_protector.chases.iter().all(Vec::is_empty));
    assert_eq!(real_protector.outcome(), (Outcome::Draw, Reason::Repetition, DRAW));
}
