//! Move text: coordinates (UCI in both rank dialects, ICCS) and the rule book's WXF
//! notation. Every parser checks the move's legality in the position and says why a
//! move cannot be played.

mod coordinates;
mod wxf;

pub use coordinates::{Dialect, UnknownDialect, format_iccs, format_uci, parse_iccs, parse_uci};
pub use wxf::{format_wxf, parse_wxf};

use super::position::IllegalMove;

/// Why a move text was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MoveTextError {
    /// The text does not have the notation's shape.
    #[error("'{text}' is not a move in {notation} notation: {problem}")]
    Syntax {
        /// The text.
        text: String,
        /// The notation.
        notation: &'static str,
        /// What is wrong with it.
        problem: &'static str,
    },
    /// The text names a move the position does not allow.
    #[error("'{text}' cannot be played: {reason}")]
    Illegal {
        /// The text.
        text: String,
        /// Why.
        reason: IllegalMove,
    },
    /// The text names no piece of the side to move, or names a move no piece can make.
    #[error("'{text}' cannot be played: {problem}")]
    NoSuchMove {
        /// The text.
        text: String,
        /// Why.
        problem: String,
    },
}
