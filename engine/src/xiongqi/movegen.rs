//! The moves allowed by the movement, capture and promotion rules (rules 3 and 5).
//! Check does not restrict them (1.1); the repetition rule (6.3) needs the game's
//! history and is applied by [`super::Game`].

use super::{Bitboard, Piece, PieceKind, Position, Square, XiongqiMove};
use crate::color::Color;

const ORTHOGONAL: [(i8, i8); 4] = [(1, 0), (-1, 0), (0, 1), (0, -1)];
const DIAGONAL: [(i8, i8); 4] = [(1, 1), (1, -1), (-1, 1), (-1, -1)];
const KNIGHT: [(i8, i8); 8] = [(1, 2), (2, 1), (2, -1), (1, -2), (-1, -2), (-2, -1), (-2, 1), (-1, 2)];

fn steps(sq: Square, directions: &[(i8, i8)]) -> Bitboard {
    directions.iter().filter_map(|&(df, dr)| sq.offset(df, dr)).collect()
}

/// Squares along the diagonals up to and including the first occupied one.
fn diagonal_rays(sq: Square, occupied: Bitboard) -> Bitboard {
    let mut reach = Bitboard::EMPTY;
    for (df, dr) in DIAGONAL {
        let mut at = sq;
        while let Some(next) = at.offset(df, dr) {
            reach.insert(next);
            if occupied.has(next) {
                break;
            }
            at = next;
        }
    }
    reach
}

fn horse_targets(sq: Square, occupied: Bitboard) -> Bitboard {
    let mut reach = Bitboard::EMPTY;
    for (df, dr) in ORTHOGONAL {
        let Some(leg) = sq.offset(df, dr) else { continue };
        if occupied.has(leg) {
            continue;
        }
        // Outward diagonally: along the leg's direction, to either side of it.
        for side in [-1, 1] {
            let (sf, sr) = if df == 0 { (side, 0) } else { (0, side) };
            if let Some(to) = leg.offset(df + sf, dr + sr) {
                reach.insert(to);
            }
        }
    }
    reach
}

/// The last row for `color`'s soldiers.
fn last_rank(color: Color) -> u8 {
    color.fold(7, 0)
}

fn has_crossed(color: Color, sq: Square) -> bool {
    match color {
        Color::Red => sq.rank() >= 4,
        Color::Black => sq.rank() <= 3,
    }
}

/// The squares of `color`'s pieces.
fn squares_of(position: &Position, color: Color) -> Bitboard {
    position.pieces_of(color).map(|(sq, _)| sq).collect()
}

/// (empty squares reached, enemy squares captured on) for `piece` on `sq`, where
/// `enemy` holds the opponent's pieces.
fn targets(position: &Position, piece: Piece, sq: Square, enemy: Bitboard) -> (Bitboard, Bitboard) {
    let occupancy = position.occupancy();
    let occupied = occupancy.squares();
    let free = !occupied;
    let split = |reach: Bitboard| (reach & free, reach & enemy);
    match piece.kind {
        PieceKind::General => split(steps(sq, &ORTHOGONAL)),
        PieceKind::Advisor => split(steps(sq, &DIAGONAL)),
        PieceKind::Chariot => split(occupancy.slide_attacks(sq)),
        PieceKind::Bear => split(diagonal_rays(sq, occupied)),
        PieceKind::Horse => split(horse_targets(sq, occupied)),
        PieceKind::Cannon => (occupancy.slide_attacks(sq) & free, occupancy.jump_attacks(sq) & enemy),
        PieceKind::Dragon => (steps(sq, &ORTHOGONAL) & free, occupancy.slide_attacks(sq) & enemy),
        PieceKind::Empress => split(occupancy.slide_attacks(sq) | steps(sq, &KNIGHT)),
        PieceKind::Soldier => {
            let forward = piece.color.fold(1, -1);
            let mut reach: Bitboard = sq.offset(0, forward).into_iter().collect();
            if has_crossed(piece.color, sq) {
                reach |= steps(sq, &[(1, 0), (-1, 0)]);
            }
            split(reach)
        }
    }
}

/// Every move the movement rules allow the side to move, promotions included (each
/// choice, and not promoting, a move of its own); none when it has lost its terminal
/// piece.
pub fn pseudo_legal_moves(position: &Position) -> Vec<XiongqiMove> {
    let us = position.side_to_move();
    let mut moves = Vec::with_capacity(64);
    if position.terminal(us).is_none() {
        return moves;
    }
    let enemy = squares_of(position, !us);
    for (from, piece) in position.pieces_of(us) {
        let (quiet, captures) = targets(position, piece, from, enemy);
        for to in quiet | captures {
            moves.push(XiongqiMove { from, to, promotion: None });
            if piece.kind == PieceKind::Soldier && to.rank() == last_rank(us) {
                for kind in PieceKind::PROMOTIONS {
                    moves.push(XiongqiMove { from, to, promotion: Some(kind) });
                }
            }
        }
    }
    moves
}

/// Whether `color`'s terminal piece is attacked: check, which is information only (1.1).
pub fn in_check(position: &Position, color: Color) -> bool {
    let Some(terminal) = position.terminal(color) else {
        return false;
    };
    let defenders = squares_of(position, color);
    position.pieces_of(!color).any(|(sq, piece)| targets(position, piece, sq, defenders).1.has(terminal))
}
