//! Xiongqi FEN (shared/reference/CONVENTIONS.md): rows 8 down to 1, the rule book's
//! letters, `w` for South and `b` for North; a position whose generals already face
//! each other is refused (they would have become dragons).

use super::{Piece, PieceKind, Position, Square};
use crate::color::Color;

/// The start position (rule 2.3).
pub const START_FEN: &str = "rhbagbhr/2c2c2/ssssssss/8/8/SSSSSSSS/2C2C2/RHBAGBHR w - - 0 1";

/// Why a text is not a valid Xiongqi FEN.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum XiongqiFenError {
    /// The text is malformed.
    #[error("malformed FEN: {0}")]
    Syntax(String),
    /// The position cannot arise.
    #[error("impossible position: {0}")]
    Invalid(String),
}

/// Parses a Xiongqi FEN.
pub fn parse(fen: &str) -> Result<Position, XiongqiFenError> {
    let syntax = |m: String| XiongqiFenError::Syntax(m);
    let invalid = |m: String| XiongqiFenError::Invalid(m);
    let mut fields = fen.split_whitespace();
    let board = fields.next().ok_or_else(|| syntax("the FEN is empty".to_owned()))?;
    let side = match fields.next() {
        Some("w") => Color::Red,
        Some("b") => Color::Black,
        Some(other) => return Err(syntax(format!("the side to move '{other}' is not w (South) or b (North)"))),
        None => return Err(syntax("the side to move is missing".to_owned())),
    };
    let mut counters = Vec::new();
    for field in fields {
        if field == "-" && counters.is_empty() {
            continue;
        }
        if counters.len() == 2 {
            return Err(syntax(format!("unexpected text after the move counters: '{field}'")));
        }
        counters.push(field.parse::<u32>().map_err(|_| syntax(format!("the move counter '{field}' is not a number")))?);
    }
    let mut position =
        Position::empty(side, counters.first().copied().unwrap_or(0), counters.get(1).copied().unwrap_or(1).max(1));
    let rows: Vec<&str> = board.split('/').collect();
    if rows.len() != 8 {
        return Err(syntax(format!("the board has {} rows; Xiongqi has 8", rows.len())));
    }
    for (index, text) in rows.iter().enumerate() {
        let rank = 7 - index as u8;
        let mut file = 0u8;
        for c in text.chars() {
            if let Some(skip) = c.to_digit(10).filter(|&d| (1..=8).contains(&d)) {
                file = file.saturating_add(skip as u8);
                continue;
            }
            let piece = Piece::from_fen_char(c).ok_or_else(|| {
                syntax(format!("'{c}' in row {} is not a piece letter (G A R B H C S D E)", rank + 1))
            })?;
            let sq =
                Square::new(file, rank).ok_or_else(|| syntax(format!("row {} has more than 8 squares", rank + 1)))?;
            position.put(piece, sq);
            file += 1;
        }
        if file != 8 {
            return Err(syntax(format!("row {} covers {file} squares; a row has 8", rank + 1)));
        }
    }
    for color in Color::ALL {
        let terminals: Vec<PieceKind> =
            position.pieces_of(color).map(|(_, p)| p.kind).filter(|k| k.is_terminal()).collect();
        if terminals.len() != 1 {
            return Err(invalid(format!(
                "{color:?} has {} terminal pieces (general or dragon); it needs one",
                terminals.len()
            )));
        }
        for (sq, piece) in position.pieces_of(color) {
            let behind = match color {
                Color::Red => sq.rank() < 2,
                Color::Black => sq.rank() > 5,
            };
            if piece.kind == PieceKind::Soldier && behind {
                return Err(invalid(format!("the {color:?} soldier on {sq} stands behind its start row")));
            }
        }
    }
    let dragons = Color::ALL.map(|c| position.pieces_of(c).any(|(_, p)| p.kind == PieceKind::Dragon));
    if dragons[0] != dragons[1] {
        return Err(invalid("one side has a dragon and the other a general: both turn at once (rule 4)".to_owned()));
    }
    if position.generals_face() {
        return Err(invalid("the generals face each other: they would already be dragons (rule 4)".to_owned()));
    }
    Ok(position)
}

/// Writes the FEN of `position`.
pub fn to_fen(position: &Position) -> String {
    crate::fen_text::write_fen(
        |sq| position.piece_at(sq).map(|piece| piece.fen_char()),
        position.side_to_move(),
        position.halfmove_clock(),
        position.fullmove_number(),
    )
}
