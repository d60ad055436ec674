//! Writing FEN, the same for both boards: ranks from the second player's side down,
//! digits for runs of empty points, then side to move, placeholders and counters.

use std::fmt::Write as _;

use crate::color::Color;
use crate::geometry::{Geometry, Square};

/// The FEN of a board whose piece letters `letter_at` gives.
pub(crate) fn write_fen<G: Geometry>(
    letter_at: impl Fn(Square<G>) -> Option<char>,
    side_to_move: Color,
    halfmove_clock: u32,
    fullmove_number: u32,
) -> String {
    let mut fen = String::with_capacity(96);
    for rank in (0..G::RANKS).rev() {
        let mut empty = 0;
        for file in 0..G::FILES {
            match letter_at(Square::new(file, rank).expect("on the board")) {
                None => empty += 1,
                Some(letter) => {
                    if empty > 0 {
                        write!(fen, "{empty}").expect("writing to a string");
                        empty = 0;
                    }
                    fen.push(letter);
                }
            }
        }
        if empty > 0 {
            write!(fen, "{empty}").expect("writing to a string");
        }
        if rank > 0 {
            fen.push('/');
        }
    }
    write!(fen, " {} - - {halfmove_clock} {fullmove_number}", side_to_move.fen_char()).expect("writing to a string");
    fen
}
