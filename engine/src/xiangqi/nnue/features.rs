//! The input features: for each side's view of the board, one feature per piece on a
//! point, chosen within the bucket of that side's king.
//!
//! A side sees the board from its own back rank (Black's view is the board turned
//! half a turn) and mirrored left-right when its king stands right of the centre
//! file, so its king is always on file d or e of its palace: two files by three ranks,
//! six buckets. Each bucket holds 14 piece slots (the side's own seven kinds, then
//! the other side's) on 90 points. Turning the board and swapping the colours thus
//! gives exactly the same features, and a king's step across the centre file only
//! mirrors its side's view.

use super::super::{Piece, Position, Square};
use crate::color::Color;

/// King buckets: the king's file (d or e, after mirroring) by its rank in the palace.
pub const KING_BUCKETS: usize = 6;
/// Piece slots in a bucket: the viewing side's seven kinds, then the other side's.
pub const PIECE_SLOTS: usize = 14;
/// Points of the board.
pub const POINTS: usize = 90;
/// Features of one side's view.
pub const FEATURES: usize = KING_BUCKETS * PIECE_SLOTS * POINTS;

/// How `color` sees the board with its king where it stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct View {
    color: Color,
    mirrored: bool,
    bucket: usize,
}

impl View {
    /// `color`'s view of `position`.
    pub fn of(position: &Position, color: Color) -> View {
        let king = oriented(position.king(color), color);
        let mirrored = king.file() > 4;
        let king = if mirrored { king.mirrored() } else { king };
        // A king stands in its palace (the FEN reader refuses anything else); the
        // clamps only keep the index in range whatever the position.
        let file = usize::from(king.file().clamp(3, 4) - 3);
        let rank = usize::from(king.rank().min(2));
        View { color, mirrored, bucket: rank * 2 + file }
    }

    /// The feature of `piece` on `sq` in this view, in 0..[`FEATURES`].
    pub fn feature(self, piece: Piece, sq: Square) -> usize {
        let sq = oriented(sq, self.color);
        let sq = if self.mirrored { sq.mirrored() } else { sq };
        let slot = if piece.color == self.color { 0 } else { 7 } + piece.kind.index();
        (self.bucket * PIECE_SLOTS + slot) * POINTS + sq.index()
    }
}

/// `sq` seen from `color`'s back rank.
fn oriented(sq: Square, color: Color) -> Square {
    match color {
        Color::Red => sq,
        Color::Black => sq.rotated(),
    }
}

/// Every feature of `color`'s view of `position`.
pub fn active(position: &Position, color: Color) -> impl Iterator<Item = usize> + '_ {
    let view = View::of(position, color);
    Square::all().filter_map(move |sq| position.piece_at(sq).map(|piece| view.feature(piece, sq)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xiangqi::PieceKind;

    #[test]
    fn features_are_distinct_and_in_range() {
        let position = Position::startpos();
        for color in Color::ALL {
            let mut features: Vec<usize> = active(&position, color).collect();
            assert_eq!(features.len(), 32);
            assert!(features.iter().all(|&f| f < FEATURES));
            features.sort_unstable();
            features.dedup();
            assert_eq!(features.len(), 32);
        }
    }

    #[test]
    fn both_sides_see_the_start_position_alike() {
        let position = Position::startpos();
        let mut red: Vec<usize> = active(&position, Color::Red).collect();
        let mut black: Vec<usize> = active(&position, Color::Black).collect();
        red.sort_unstable();
        black.sort_unstable();
        assert_eq!(red, black);
    }

    #[test]
    fn a_king_right_of_centre_sees_the_board_mirrored() {
        let left = Position::from_fen("4k4/9/9/9/9/9/9/9/9/3K1R3 w").unwrap();
        let right = Position::from_fen("4k4/9/9/9/9/9/9/9/9/3R1K3 w").unwrap();
        let rook = Piece::new(Color::Red, PieceKind::Rook);
        let sq = |text: &str| Square::parse_with_label(text, 0).unwrap();
        let left_view = View::of(&left, Color::Red);
        let right_view = View::of(&right, Color::Red);
        assert_eq!(left_view.bucket, right_view.bucket);
        assert_eq!(left_view.feature(rook, sq("f0")), right_view.feature(rook, sq("d0")));
    }
}
