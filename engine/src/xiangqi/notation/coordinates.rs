//! Coordinate notations: UCI (`h2e2`, the product's canonical form), Fairy-Stockfish's
//! dialect with ranks 1..10 (`h3e3`), and ICCS (`H2-E2`).

use super::MoveTextError;
use crate::xiangqi::{Move, Position, Square};

/// How ranks are numbered in coordinate text.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Dialect {
    /// Ranks 0..9 (Pikafish, ElephantEye, UCCI, ICCS): the canonical form.
    #[default]
    ZeroBased,
    /// Ranks 1..10 (Fairy-Stockfish's plain UCI).
    OneBased,
}

/// A rank numbering other than `0-9` or `1-10` was named.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("ranks '{0}': use 0-9 or 1-10")]
pub struct UnknownDialect(pub String);

impl std::str::FromStr for Dialect {
    type Err = UnknownDialect;

    /// `0-9` or `1-10`, the ranks' first and last labels, as the engines' documentation
    /// and the worker's `--engine ranks=` name them.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "0-9" => Ok(Dialect::ZeroBased),
            "1-10" => Ok(Dialect::OneBased),
            other => Err(UnknownDialect(other.to_owned())),
        }
    }
}

impl Dialect {
    fn first_rank_label(self) -> u8 {
        match self {
            Dialect::ZeroBased => 0,
            Dialect::OneBased => 1,
        }
    }
}

/// Splits `from`+`to` written without a separator; a rank may have two digits in the
/// 1..10 dialect, so the split is at the second letter.
fn split_squares(text: &str) -> Option<(&str, &str)> {
    let second_letter = text.char_indices().skip(1).find(|(_, c)| c.is_ascii_alphabetic()).map(|(i, _)| i)?;
    Some(text.split_at(second_letter))
}

fn legal(position: &Position, text: &str, from: Square, to: Square) -> Result<Move, MoveTextError> {
    let mv = Move::new(from, to);
    position.check_move(mv).map(|()| mv).map_err(|reason| MoveTextError::Illegal { text: text.to_owned(), reason })
}

/// Reads a coordinate move such as `h2e2` and checks that it is legal.
pub fn parse_uci(position: &Position, text: &str, dialect: Dialect) -> Result<Move, MoveTextError> {
    let syntax = |problem| MoveTextError::Syntax { text: text.to_owned(), notation: "coordinate", problem };
    if !text.is_ascii() {
        return Err(syntax("it is not plain ASCII"));
    }
    let (from, to) = split_squares(text).ok_or_else(|| syntax("expected two squares such as h2e2"))?;
    let label = dialect.first_rank_label();
    let from = Square::parse_with_label(from, label).ok_or_else(|| syntax("the first square is off the board"))?;
    let to = Square::parse_with_label(to, label).ok_or_else(|| syntax("the second square is off the board"))?;
    legal(position, text, from, to)
}

/// Writes a move in coordinates of the given dialect.
pub fn format_uci(mv: Move, dialect: Dialect) -> String {
    let label = dialect.first_rank_label();
    format!("{}{}", mv.from().display_with_label(label), mv.to().display_with_label(label))
}

/// Reads an ICCS move such as `H2-E2` (either case) and checks that it is legal.
pub fn parse_iccs(position: &Position, text: &str) -> Result<Move, MoveTextError> {
    let syntax = |problem| MoveTextError::Syntax { text: text.to_owned(), notation: "ICCS", problem };
    let (from, to) = text.split_once('-').ok_or_else(|| syntax("expected two squares joined by '-', such as H2-E2"))?;
    let from = Square::parse_with_label(from, 0).ok_or_else(|| syntax("the first square is off the board"))?;
    let to = Square::parse_with_label(to, 0).ok_or_else(|| syntax("the second square is off the board"))?;
    legal(position, text, from, to)
}

/// Writes a move in ICCS.
pub fn format_iccs(mv: Move) -> String {
    format!("{}-{}", mv.from(), mv.to()).to_ascii_uppercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dialects_are_named_by_their_ranks() {
        assert_eq!("0-9".parse::<Dialect>(), Ok(Dialect::ZeroBased));
        assert_eq!("1-10".parse::<Dialect>(), Ok(Dialect::OneBased));
        assert_eq!("1-9".parse::<Dialect>().unwrap_err().to_string(), "ranks '1-9': use 0-9 or 1-10");
    }

    #[test]
    fn dialects_name_the_same_move() {
        let position = Position::startpos();
        let canonical = parse_uci(&position, "h2e2", Dialect::ZeroBased).unwrap();
        assert_eq!(parse_uci(&position, "h3e3", Dialect::OneBased).unwrap(), canonical);
        assert_eq!(parse_iccs(&position, "H2-E2").unwrap(), canonical);
        assert_eq!(format_uci(canonical, Dialect::OneBased), "h3e3");
        assert_eq!(format_iccs(canonical), "H2-E2");
        let long = parse_uci(&position, "b3b10", Dialect::OneBased).unwrap();
        assert_eq!(format_uci(long, Dialect::ZeroBased), "b2b9");
    }

    #[test]
    fn refusals_say_why() {
        let position = Position::startpos();
        let cases = [
            ("h2e3", "a cannon on h2 cannot move to e3"),
            ("e9e8", "belongs to the side not to move"),
            ("e5e6", "there is no piece on e5"),
            ("z2e2", "the first square is off the board"),
            ("h2", "expected two squares"),
            ("b2b10", "the second square is off the board"),
        ];
        for (text, expected) in cases {
            let message = parse_uci(&position, text, Dialect::ZeroBased).unwrap_err().to_string();
            assert!(message.contains(expected), "{text}: {message}");
        }
        let pinned = Position::from_fen("4k4/9/9/9/4r4/9/9/9/4R4/4K4 w").unwrap();
        let message = parse_uci(&pinned, "e1d1", Dialect::ZeroBased).unwrap_err().to_string();
        assert!(message.contains("leaves the king in check"), "{message}");
        let facing = Position::from_fen("4k4/9/9/9/9/9/9/9/4A4/4K4 w").unwrap();
        let message = parse_uci(&facing, "e1d2", Dialect::ZeroBased).unwrap_err().to_string();
        assert!(message.contains("face each other"), "{message}");
    }
}
