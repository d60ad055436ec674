//! The handcrafted evaluation: material, piece-square terms, mobility and king safety,
//! tapered between middle game and ending by the attacking material left.
//!
//! Scores are centipawns from the side to move's view. The piece-square terms are
//! written as formulas of the point seen from the piece's own side (file 0..8 from
//! its left, rank 0..9 from its back rank), so both sides use the same rules.

use super::attacks::home_half;
use super::{Bitboard, Piece, PieceKind, Position};
use crate::color::Color;

/// A middle-game and an ending value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Tapered(i32, i32);

impl std::ops::AddAssign for Tapered {
    fn add_assign(&mut self, other: Tapered) {
        self.0 += other.0;
        self.1 += other.1;
    }
}

impl std::ops::SubAssign for Tapered {
    fn sub_assign(&mut self, other: Tapered) {
        self.0 -= other.0;
        self.1 -= other.1;
    }
}

/// Material by kind, in [`PieceKind::ALL`] order.
const MATERIAL: [Tapered; 7] = [
    Tapered(0, 0),
    Tapered(120, 130),
    Tapered(120, 130),
    Tapered(400, 460),
    Tapered(900, 950),
    Tapered(450, 420),
    Tapered(30, 50),
];

/// The value search and move ordering use for a captured piece.
pub fn piece_value(kind: PieceKind) -> i32 {
    MATERIAL[kind.index()].0
}

/// Mobility per reachable point, by kind.
const MOBILITY: [Tapered; 7] =
    [Tapered(0, 0), Tapered(0, 0), Tapered(0, 0), Tapered(8, 6), Tapered(3, 4), Tapered(2, 2), Tapered(0, 0)];

/// The piece-square term of `kind` on the point (`file`, `rank`) seen from its side.
const fn placement(kind: PieceKind, file: i32, rank: i32) -> Tapered {
    let off_centre = if file > 4 { file - 4 } else { 4 - file };
    match kind {
        PieceKind::King => Tapered(if file == 4 { 10 } else { 0 } - 12 * rank, -4 * rank),
        PieceKind::Advisor => Tapered(if file == 4 && rank == 1 { 10 } else { 0 }, 0),
        PieceKind::Elephant => Tapered(
            if file == 4 && rank == 2 {
                10
            } else if file == 0 || file == 8 {
                -5
            } else {
                0
            },
            0,
        ),
        PieceKind::Horse => {
            let advance = if rank > 6 { 6 } else { rank };
            let back_rank = if rank == 0 { 12 } else { 0 };
            Tapered(14 - 5 * off_centre + 5 * advance - back_rank, 10 - 4 * off_centre)
        }
        PieceKind::Rook => Tapered(2 * rank + if off_centre == 1 { 6 } else { 0 }, 0),
        PieceKind::Cannon => {
            Tapered(if file == 4 { 20 } else { 0 } + if rank == 2 { 6 } else { 0 } - if rank >= 7 { 6 } else { 0 }, 0)
        }
        PieceKind::Pawn => {
            if rank <= 4 {
                Tapered(if rank == 4 && file == 4 { 10 } else { 0 }, 0)
            } else if rank == 9 {
                Tapered(15, 25)
            } else {
                let near_palace = if off_centre <= 1 && rank >= 6 { 20 } else { 0 };
                Tapered(40 + 8 * (rank - 5) - 4 * off_centre + near_palace, 70 + 10 * (rank - 5) + near_palace)
            }
        }
    }
}

/// `[kind][point]` for Red; Black reads the rotated point.
static PLACEMENT: [[Tapered; 90]; 7] = {
    let mut table = [[Tapered(0, 0); 90]; 7];
    let mut k = 0;
    while k < 7 {
        let mut sq = 0;
        while sq < 90 {
            table[k][sq] = placement(PieceKind::ALL[k], (sq % 9) as i32, (sq / 9) as i32);
            sq += 1;
        }
        k += 1;
    }
    table
};

/// Attacking weight of each kind for king safety.
const ATTACK_WEIGHT: [i32; 7] = [0, 0, 0, 2, 3, 2, 1];

/// Largest value of the phase: both sides' horses, cannons (1 each) and chariots (2).
const MAX_PHASE: i32 = 16;

const TEMPO: i32 = 12;

fn side_terms(position: &Position, color: Color) -> Tapered {
    let mut total = Tapered::default();
    for kind in PieceKind::ALL {
        let piece = Piece::new(color, kind);
        for sq in position.pieces(color, kind) {
            let seen_from_side = match color {
                Color::Red => sq,
                Color::Black => sq.rotated(),
            };
            total += MATERIAL[kind.index()];
            total += PLACEMENT[kind.index()][seen_from_side.index()];
            if matches!(kind, PieceKind::Horse | PieceKind::Rook | PieceKind::Cannon) {
                let reach = position.pseudo_targets(piece, sq).count() as i32;
                let weight = MOBILITY[kind.index()];
                total += Tapered(weight.0 * reach, weight.1 * reach);
            }
        }
    }
    total -= king_danger(position, color);
    total
}

/// How exposed `color`'s king is: enemy attackers across the river against the
/// advisors and elephants left to guard it.
fn king_danger(position: &Position, color: Color) -> Tapered {
    let enemy = !color;
    let our_half = home_half(color);
    let mut attack = 0;
    for kind in [PieceKind::Horse, PieceKind::Rook, PieceKind::Cannon, PieceKind::Pawn] {
        let attackers: Bitboard = position.pieces(enemy, kind);
        let count = if kind == PieceKind::Pawn { (attackers & our_half).count() } else { attackers.count() };
        attack += ATTACK_WEIGHT[kind.index()] * count as i32;
    }
    let guards = (position.count(color, PieceKind::Advisor) + position.count(color, PieceKind::Elephant)) as i32;
    Tapered(attack * (4 - guards) * 4, 0)
}

fn phase(position: &Position) -> i32 {
    let mut phase = 0;
    for color in Color::ALL {
        phase += position.count(color, PieceKind::Horse) as i32;
        phase += position.count(color, PieceKind::Cannon) as i32;
        phase += 2 * position.count(color, PieceKind::Rook) as i32;
    }
    phase.min(MAX_PHASE)
}

/// The evaluation of `position` from the side to move's view, in centipawns.
pub fn evaluate(position: &Position) -> i32 {
    let us = position.side_to_move();
    let mut score = side_terms(position, us);
    score -= side_terms(position, !us);
    let phase = phase(position);
    (score.0 * phase + score.1 * (MAX_PHASE - phase)) / MAX_PHASE + TEMPO
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_start_position_is_balanced_but_for_the_tempo() {
        assert_eq!(evaluate(&Position::startpos()), TEMPO);
    }

    #[test]
    fn colour_flipping_keeps_the_score() {
        let fen = "r2akab1r/3n5/4b3n/p1p1pRp1p/9/2P3P2/P3P3c/N2C3C1/4A4/1RBAK1B2 w";
        let position = Position::from_fen(fen).unwrap();
        assert_eq!(evaluate(&position), evaluate(&position.color_flipped()));
        assert_eq!(evaluate(&position), evaluate(&position.mirrored()));
    }

    #[test]
    fn a_chariot_up_is_winning() {
        let position = Position::from_fen("rnbakabn1/9/1c5c1/p1p1p1p1p/9/9/P1P1P1P1P/1C5C1/9/RNBAKABNR w").unwrap();
        assert!(evaluate(&position) > 700);
    }
}
