//! Move text: coordinates (UCI in both rank dialects, ICCS), the rule book's WXF
//! notation and its Chinese form. Every parser checks the move's legality in the
//! position and says why a move cannot be played.

mod chinese;
mod coordinates;
mod wxf;

pub use chinese::parse_chinese;
pub use coordinates::{Dialect, UnknownDialect, format_iccs, format_uci, parse_iccs, parse_uci};
pub use wxf::{format_wxf, parse_wxf};

use super::Move;
use super::position::{IllegalMove, Position};

/// Reads a move in whichever notation game collections write it, told apart by its
/// shape: Chinese (not ASCII: 炮二平五), ICCS (a hyphen: H2-E2), WXF (a sign or dot
/// third: C2=5, C2.5, +C+1, 35=6) or coordinates with ranks 0..9 (h2e2,
/// the product's own PGN). Coordinates with ranks 1..10 cannot be told from these by
/// shape and are not read here.
pub fn parse_any(position: &Position, text: &str) -> Result<Move, MoveTextError> {
    let bytes = text.as_bytes();
    if !text.is_ascii() {
        parse_chinese(position, text)
    } else if bytes.len() == 5 && bytes[2] == b'-' {
        parse_iccs(position, text)
    } else if bytes.len() == 4 && matches!(bytes[2], b'+' | b'-' | b'=' | b'.') {
        parse_wxf(position, text)
    } else {
        parse_uci(position, text, Dialect::ZeroBased)
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_notation_is_told_apart_by_its_shape() {
        let start = Position::startpos();
        let central_cannon = parse_uci(&start, "h2e2", Dialect::ZeroBased).unwrap();
        for text in ["h2e2", "H2-E2", "h2-e2", "C2=5", "C2.5", "炮二平五"] {
            assert_eq!(parse_any(&start, text), Ok(central_cannon), "{text}");
        }
        let three = Position::from_fen("5k3/9/4P4/4P4/4P4/9/9/9/9/3K5 w").unwrap();
        assert_eq!(parse_any(&three, "35=6").unwrap().to_string(), "e5d5");
        assert_eq!(parse_any(&three, "+P+1").unwrap().to_string(), "e7e8");
        for (text, notation) in [("h2x2", "coordinate"), ("H2-X2", "ICCS"), ("C2=0", "WXF"), ("炮", "Chinese")] {
            let message = parse_any(&start, text).unwrap_err().to_string();
            assert!(message.contains(&format!("in {notation} notation")), "{text}: {message}");
        }
    }
}
