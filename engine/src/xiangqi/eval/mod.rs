//! The handcrafted evaluation: piece-square values (material included), mobility,
//! king safety and a few structural terms, each with a middle-game and an ending
//! weight, tapered by the attacking material left.
//!
//! The evaluation is a weighted sum of [`FEATURE_COUNT`] features, each counted for
//! Red minus Black, so that the weights can be fitted to reference scores
//! (`cargo run --release -p xq-engine --example tune_eval`, which writes
//! [`weights`]). [`visit_features`] is the one definition of the features: the search
//! sums weights through it, the tuner records them through it.
//!
//! Scores are centipawns from the side to move's view.

mod weights;

use super::attacks::{between, cannon_attacks, file_of, home_half, horse_attacks, palace, pawn_attacks, rook_attacks};
use super::{PieceKind, Position, Square};
use crate::color::Color;
pub use weights::WEIGHTS;

/// Piece-square features: kind, rank from the piece's own back rank, and distance of
/// the file from the edge (the board is symmetric left to right).
pub const PST: usize = 0;
const PST_FILES: usize = 5;
const PST_PER_KIND: usize = 10 * PST_FILES;
/// Reachable points of horses, chariots and cannons.
pub const MOBILITY: usize = PST + 7 * PST_PER_KIND;
/// Attacks on the enemy palace by chariots, horses, cannons and pawns.
pub const PALACE_HITS: usize = MOBILITY + 3;
/// Pieces attacking the enemy palace.
pub const PALACE_ATTACKERS: usize = PALACE_HITS + 4;
/// Attackers of the palace times the advisors it has lost.
pub const ATTACKERS_X_MISSING_ADVISORS: usize = PALACE_ATTACKERS + 1;
/// Attackers of the palace times the elephants it has lost.
pub const ATTACKERS_X_MISSING_ELEPHANTS: usize = ATTACKERS_X_MISSING_ADVISORS + 1;
/// A cannon on the enemy king's file with nothing between them.
pub const HOLLOW_CANNON: usize = ATTACKERS_X_MISSING_ELEPHANTS + 1;
/// The square of the weighted palace attacks, over 16: danger grows faster than
/// the attacks.
pub const DANGER_SQUARED: usize = HOLLOW_CANNON + 1;
/// Crossed pawns side by side.
pub const CONNECTED_PAWNS: usize = DANGER_SQUARED + 1;
/// Both advisors kept.
pub const ADVISOR_PAIR: usize = CONNECTED_PAWNS + 1;
/// Both elephants kept.
pub const ELEPHANT_PAIR: usize = ADVISOR_PAIR + 1;
/// A chariot on a file without pawns.
pub const ROOK_OPEN_FILE: usize = ELEPHANT_PAIR + 1;
/// A cannon on the enemy king's file with two pieces between them: one move from
/// a check, by taking a screen away.
pub const CANNON_TWO_SCREENS: usize = ROOK_OPEN_FILE + 1;
/// +1 when Red is to move, -1 when Black is.
pub const TEMPO: usize = CANNON_TWO_SCREENS + 1;
/// Number of features.
pub const FEATURE_COUNT: usize = TEMPO + 1;

/// A middle-game and an ending value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tapered(pub i32, pub i32);

/// The value search and move ordering use for a captured piece.
pub fn piece_value(kind: PieceKind) -> i32 {
    [0, 120, 120, 400, 900, 450, 30][kind.index()]
}

/// Largest value of the phase: both sides' horses, cannons (1 each) and chariots (2).
pub const MAX_PHASE: i32 = 16;

/// 0 (bare ending) to [`MAX_PHASE`] (all attacking pieces on the board).
pub fn phase(position: &Position) -> i32 {
    let mut phase = 0;
    for color in Color::ALL {
        phase += position.count(color, PieceKind::Horse) as i32;
        phase += position.count(color, PieceKind::Cannon) as i32;
        phase += 2 * position.count(color, PieceKind::Rook) as i32;
    }
    phase.min(MAX_PHASE)
}

/// For each side and point: the point's piece-square slot, its rank from that side's
/// back rank times [`PST_FILES`] plus its file's distance from the nearer edge.
static PST_SLOT: [[u8; 90]; 2] = {
    let mut slots = [[0; 90]; 2];
    let mut sq = 0;
    while sq < 90 {
        let (file, rank) = (sq % 9, sq / 9);
        let folded = if file > 4 { 8 - file } else { file };
        slots[0][sq] = (rank * PST_FILES + folded) as u8;
        slots[1][sq] = ((9 - rank) * PST_FILES + folded) as u8;
        sq += 1;
    }
    slots
};

/// The piece-square feature of `kind` on `sq` for `color`.
#[inline(always)]
pub fn pst_feature(kind: PieceKind, sq: Square, color: Color) -> usize {
    PST + kind.index() * PST_PER_KIND + usize::from(PST_SLOT[color.index()][sq.index()])
}

/// Calls `sink(feature, value)` for every feature of `position`, values counted for
/// Red minus Black; a feature may be reported more than once, the values adding up.
#[inline(always)]
pub fn visit_features(position: &Position, sink: &mut impl FnMut(usize, i32)) {
    let occupancy = position.occupancy();
    let occupied = position.occupied();
    let pawns = position.pieces(Color::Red, PieceKind::Pawn) | position.pieces(Color::Black, PieceKind::Pawn);
    for color in Color::ALL {
        let sign = if color == Color::Red { 1 } else { -1 };
        let own = position.pieces_of(color);
        let enemy = position.pieces_of(!color);
        // The other side's palace, and what this side's attack on it adds up to.
        let zone = palace(!color);
        let enemy_king = position.king(!color);
        let mut attack = PalaceAttack::default();
        for kind in PieceKind::ALL {
            for sq in position.pieces(color, kind) {
                sink(pst_feature(kind, sq, color), sign);
                match kind {
                    PieceKind::Horse => {
                        let reach = horse_attacks(sq, occupied);
                        sink(MOBILITY, sign * (reach - own).count() as i32);
                        attack.add(1, 3, (reach & zone).count() as i32);
                    }
                    PieceKind::Rook => {
                        let reach = rook_attacks(sq, occupancy);
                        sink(MOBILITY + 1, sign * (reach - own).count() as i32);
                        attack.add(0, 3, (reach & zone).count() as i32);
                        if !(file_of(sq) & pawns).any() {
                            sink(ROOK_OPEN_FILE, sign);
                        }
                    }
                    PieceKind::Cannon => {
                        let slides = rook_attacks(sq, occupancy) - occupied;
                        let over_screen = cannon_attacks(sq, occupancy);
                        sink(MOBILITY + 2, sign * (slides | (over_screen & enemy)).count() as i32);
                        attack.add(2, 2, (over_screen & zone).count() as i32);
                        if sq.file() == enemy_king.file() {
                            match (between(sq, enemy_king) & occupied).count() {
                                0 => sink(HOLLOW_CANNON, sign),
                                2 => sink(CANNON_TWO_SCREENS, sign),
                                _ => {}
                            }
                        }
                    }
                    PieceKind::Pawn => attack.add(3, 2, (pawn_attacks(color, sq) & zone).count() as i32),
                    _ => {}
                }
            }
        }
        for (offset, hits) in attack.hits.into_iter().enumerate() {
            sink(PALACE_HITS + offset, sign * hits);
        }
        let defender = !color;
        let missing_advisors = 2 - position.count(defender, PieceKind::Advisor).min(2) as i32;
        let missing_elephants = 2 - position.count(defender, PieceKind::Elephant).min(2) as i32;
        sink(PALACE_ATTACKERS, sign * attack.attackers);
        sink(ATTACKERS_X_MISSING_ADVISORS, sign * attack.attackers * missing_advisors);
        sink(ATTACKERS_X_MISSING_ELEPHANTS, sign * attack.attackers * missing_elephants);
        sink(DANGER_SQUARED, sign * attack.weighted * attack.weighted / 16);
        let crossed = position.pieces(color, PieceKind::Pawn) - home_half(color);
        let side_by_side = crossed.into_iter().filter(|&sq| sq.offset(1, 0).is_some_and(|r| crossed.has(r)));
        sink(CONNECTED_PAWNS, sign * side_by_side.count() as i32);
        sink(ADVISOR_PAIR, sign * i32::from(position.count(color, PieceKind::Advisor) == 2));
        sink(ELEPHANT_PAIR, sign * i32::from(position.count(color, PieceKind::Elephant) == 2));
    }
    sink(TEMPO, if position.side_to_move() == Color::Red { 1 } else { -1 });
}

/// One side's attack on the other's palace: hits by chariots, horses, cannons and
/// pawns (in that order), the pieces taking part, and their weighted hits.
#[derive(Default)]
struct PalaceAttack {
    hits: [i32; 4],
    attackers: i32,
    weighted: i32,
}

impl PalaceAttack {
    fn add(&mut self, slot: usize, weight: i32, hits: i32) {
        if hits > 0 {
            self.hits[slot] += hits;
            self.attackers += 1;
            self.weighted += weight * hits;
        }
    }
}

/// The evaluation of `position` from the side to move's view, in centipawns.
pub fn evaluate(position: &Position) -> i32 {
    evaluate_with(position, &WEIGHTS)
}

/// [`evaluate`] with other weights (the tuner's).
pub fn evaluate_with(position: &Position, weights: &[Tapered; FEATURE_COUNT]) -> i32 {
    let (mut middle, mut ending) = (0, 0);
    visit_features(position, &mut |feature, value| {
        middle += weights[feature].0 * value;
        ending += weights[feature].1 * value;
    });
    let phase = phase(position);
    let red = (middle * phase + ending * (MAX_PHASE - phase)) / MAX_PHASE;
    if position.side_to_move() == Color::Red { red } else { -red }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_start_position_is_balanced_but_for_the_tempo() {
        let tempo = WEIGHTS[TEMPO];
        let expected = (tempo.0 * MAX_PHASE) / MAX_PHASE;
        assert_eq!(evaluate(&Position::startpos()), expected);
        assert!(expected >= 0);
    }

    #[test]
    fn colour_flipping_and_mirroring_keep_the_score() {
        for fen in crate::bench::positions::POSITIONS {
            let position = Position::from_fen(fen).unwrap();
            assert_eq!(evaluate(&position), evaluate(&position.color_flipped()), "{fen}");
            assert_eq!(evaluate(&position), evaluate(&position.mirrored()), "{fen}");
        }
    }

    #[test]
    fn a_chariot_up_is_winning() {
        let position = Position::from_fen("rnbakabn1/9/1c5c1/p1p1p1p1p/9/9/P1P1P1P1P/1C5C1/9/RNBAKABNR w").unwrap();
        assert!(evaluate(&position) > 700);
        let black_to_move = position.with_other_side_to_move();
        assert!(evaluate(&black_to_move) < -700);
    }

    #[test]
    fn a_hollow_cannon_is_seen() {
        let hollow = |fen: &str| {
            let mut seen = 0;
            visit_features(&Position::from_fen(fen).unwrap(), &mut |feature, value| {
                if feature == HOLLOW_CANNON {
                    seen += value;
                }
            });
            seen
        };
        assert_eq!(hollow("3k5/9/9/9/9/9/9/9/4C4/5K3 w"), 0, "not on the king's file");
        assert_eq!(hollow("4k4/9/9/9/9/9/9/9/4C4/5K3 w"), 1);
        assert_eq!(hollow("4k4/4a4/9/9/9/9/9/9/4C4/5K3 b"), 0, "a screen: that is a check, not a hollow cannon");
        assert_eq!(hollow("4k4/9/9/9/9/9/9/9/4c4/4K4 b"), -1);
    }
}
