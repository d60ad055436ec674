//! Xiangqi FEN, as Pikafish and Fairy-Stockfish write it (shared/reference/CONVENTIONS.md).
//!
//! Parsing is in two steps: the text is read into a board ([`FenError`] names what is
//! malformed), then the board is validated into a [`Position`] ([`PositionError`] names
//! what is impossible). Positions that no game can reach but whose pieces still move by
//! the rules (a pawn behind its start rank, an elephant off its seven points, more pieces
//! of a kind than a side starts with) are refused by [`parse`] and accepted with warnings
//! by [`parse_composed`], for tools that study composed positions.

use super::attacks::{elephant_points, home_half, palace, pawn_points};
use super::{Piece, PieceKind, Position, Square};
use crate::color::Color;

/// The standard start position.
pub const START_FEN: &str = "rnbakabnr/9/1c5c1/p1p1p1p1p/9/9/P1P1P1P1P/1C5C1/9/RNBAKABNR w - - 0 1";

/// The text is not a well-formed Xiangqi FEN, or its position is impossible.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FenError {
    /// Nothing was given.
    #[error("the FEN is empty")]
    Empty,
    /// The board does not have 10 ranks.
    #[error("the board has {0} ranks separated by '/'; Xiangqi has 10")]
    RankCount(usize),
    /// A rank does not cover 9 points.
    #[error("rank {rank} from the top covers {points} points; a rank has 9")]
    RankWidth {
        /// 1-based from Black's side.
        rank: usize,
        /// How many points it covered.
        points: usize,
    },
    /// An unknown character on the board.
    #[error("'{character}' in rank {rank} from the top is not a piece letter (K A B E N H R C P) or a digit 1-9")]
    BadCharacter {
        /// The character.
        character: char,
        /// 1-based from Black's side.
        rank: usize,
    },
    /// The side to move is missing.
    #[error("the side to move is missing after the board")]
    MissingSide,
    /// The side to move is not w, r or b.
    #[error("the side to move '{0}' is not 'w' (or 'r') for Red or 'b' for Black")]
    BadSide(String),
    /// A move counter is not a number.
    #[error("the {field} '{text}' is not a whole number")]
    BadCounter {
        /// Which counter.
        field: &'static str,
        /// What was written.
        text: String,
    },
    /// Something follows the move counters.
    #[error("unexpected text after the move counters: '{0}'")]
    TrailingText(String),
    /// The board is impossible.
    #[error(transparent)]
    Invalid(#[from] PositionError),
}

/// What makes a board impossible. The last three kinds only make it unreachable in a
/// game; [`parse_composed`] accepts those and returns them as warnings.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PositionError {
    /// A side has no king.
    #[error("{0:?} has no king")]
    MissingKing(Color),
    /// A side has more than one king.
    #[error("{0:?} has {1} kings")]
    ExtraKing(Color, u32),
    /// A king or advisor stands outside its palace (WXF 2.1, 2.2).
    #[error("the {color:?} {kind} on {square} stands outside its palace")]
    OutsidePalace {
        /// Whose piece.
        color: Color,
        /// King or advisor.
        kind: &'static str,
        /// Where.
        square: Square,
    },
    /// An elephant stands across the river (WXF 2.3).
    #[error("the {color:?} elephant on {square} stands across the river")]
    ElephantAcrossRiver {
        /// Whose elephant.
        color: Color,
        /// Where.
        square: Square,
    },
    /// The kings face each other on an open file (WXF 2.9).
    #[error("the kings face each other on an open file")]
    KingsFace,
    /// The side that just moved is in check: its opponent could take the king.
    #[error("{0:?} is not to move but is in check")]
    WaitingSideInCheck(Color),
    /// More pieces of a kind than a side starts with.
    #[error("{color:?} has {count} pieces of kind {kind}; a side starts with {max}")]
    TooManyPieces {
        /// Whose pieces.
        color: Color,
        /// Which kind.
        kind: &'static str,
        /// How many.
        count: u32,
        /// The start count.
        max: u32,
    },
    /// An elephant on a point elephants never reach.
    #[error("the {color:?} elephant on {square} stands on a point elephants never reach")]
    ElephantOffPoints {
        /// Whose elephant.
        color: Color,
        /// Where.
        square: Square,
    },
    /// A pawn behind its start rank, or sideways before the river.
    #[error("the {color:?} pawn on {square} stands on a point pawns never reach")]
    PawnUnreachable {
        /// Whose pawn.
        color: Color,
        /// Where.
        square: Square,
    },
}

impl PositionError {
    /// Whether the position is still playable: every piece moves by the rules.
    pub fn is_playable(&self) -> bool {
        matches!(
            self,
            PositionError::TooManyPieces { .. }
                | PositionError::ElephantOffPoints { .. }
                | PositionError::PawnUnreachable { .. }
        )
    }
}

/// Parses a FEN of a position that can arise in a game.
pub fn parse(fen: &str) -> Result<Position, FenError> {
    let (position, warnings) = parse_composed(fen)?;
    match warnings.into_iter().next() {
        Some(unreachable) => Err(FenError::Invalid(unreachable)),
        None => Ok(position),
    }
}

/// Parses a FEN of a position that is playable though perhaps unreachable; returns
/// the position and what makes it unreachable.
pub fn parse_composed(fen: &str) -> Result<(Position, Vec<PositionError>), FenError> {
    let mut fields = fen.split_whitespace();
    let board = fields.next().ok_or(FenError::Empty)?;
    let side = match fields.next() {
        None => return Err(FenError::MissingSide),
        Some("w" | "r" | "W" | "R") => Color::Red,
        Some("b" | "B") => Color::Black,
        Some(other) => return Err(FenError::BadSide(other.to_owned())),
    };
    // Castling and en-passant placeholders ('-') may stand before the counters.
    let mut counters = Vec::new();
    for field in fields {
        if field == "-" && counters.is_empty() {
            continue;
        }
        let name = match counters.len() {
            0 => "halfmove clock",
            1 => "fullmove number",
            _ => return Err(FenError::TrailingText(field.to_owned())),
        };
        let value: u32 = field.parse().map_err(|_| FenError::BadCounter { field: name, text: field.to_owned() })?;
        counters.push(value);
    }
    let halfmove = counters.first().copied().unwrap_or(0);
    let fullmove = counters.get(1).copied().unwrap_or(1).max(1);

    let mut position = Position::empty(side, halfmove, fullmove);
    let ranks: Vec<&str> = board.split('/').collect();
    if ranks.len() != 10 {
        return Err(FenError::RankCount(ranks.len()));
    }
    let mut kings = [0u32; 2];
    for (row, text) in ranks.iter().enumerate() {
        let rank = 9 - row as u8;
        let mut file = 0usize;
        for c in text.chars() {
            if let Some(skip) = c.to_digit(10).filter(|&d| d >= 1) {
                file += skip as usize;
                continue;
            }
            let piece = Piece::from_fen_char(c).ok_or(FenError::BadCharacter { character: c, rank: row + 1 })?;
            if file >= 9 {
                file += 1;
                continue;
            }
            let sq = Square::new(file as u8, rank).expect("file and rank checked");
            if piece.kind == PieceKind::King {
                kings[piece.color.index()] += 1;
                if kings[piece.color.index()] > 1 {
                    file += 1;
                    continue;
                }
            }
            position.put(piece, sq);
            file += 1;
        }
        if file != 9 {
            return Err(FenError::RankWidth { rank: row + 1, points: file });
        }
    }
    let warnings = validate(&position, kings)?;
    Ok((position, warnings))
}

/// Refuses what the rules cannot work on; returns what is merely unreachable.
pub(crate) fn validate(position: &Position, kings: [u32; 2]) -> Result<Vec<PositionError>, PositionError> {
    for color in Color::ALL {
        match kings[color.index()] {
            0 => return Err(PositionError::MissingKing(color)),
            1 => {}
            n => return Err(PositionError::ExtraKing(color, n)),
        }
        for kind in [PieceKind::King, PieceKind::Advisor] {
            if let Some(square) = (position.pieces(color, kind) - palace(color)).first() {
                return Err(PositionError::OutsidePalace { color, kind: kind.name(), square });
            }
        }
        if let Some(square) = (position.pieces(color, PieceKind::Elephant) - home_half(color)).first() {
            return Err(PositionError::ElephantAcrossRiver { color, square });
        }
    }
    let (red_king, black_king) = (position.king(Color::Red), position.king(Color::Black));
    if red_king.file() == black_king.file()
        && (super::attacks::between(red_king, black_king) & position.occupied()).is_empty()
    {
        return Err(PositionError::KingsFace);
    }
    let waiting = !position.side_to_move();
    if position.is_king_attacked(waiting) {
        return Err(PositionError::WaitingSideInCheck(waiting));
    }

    let mut warnings = Vec::new();
    for color in Color::ALL {
        for kind in PieceKind::ALL {
            let count = position.count(color, kind);
            if count > kind.start_count() {
                warnings.push(PositionError::TooManyPieces {
                    color,
                    kind: kind.name(),
                    count,
                    max: kind.start_count(),
                });
            }
        }
        for square in position.pieces(color, PieceKind::Elephant) - elephant_points(color) {
            warnings.push(PositionError::ElephantOffPoints { color, square });
        }
        for square in position.pieces(color, PieceKind::Pawn) - pawn_points(color) {
            warnings.push(PositionError::PawnUnreachable { color, square });
        }
    }
    Ok(warnings)
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

/// Which letters an engine reads in FEN for horse and elephant.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FenFlavour {
    /// `N` and `B`, as Pikafish and Fairy-Stockfish write them.
    #[default]
    KnightBishop,
    /// `H` and `E`, as Sjaak II and some older engines want them.
    HorseElephant,
}

/// A FEN flavour other than `nb` or `he` was named.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("FEN letters '{0}': use nb (N, B) or he (H, E)")]
pub struct UnknownFenFlavour(pub String);

impl std::str::FromStr for FenFlavour {
    type Err = UnknownFenFlavour;

    /// `nb` or `he`: the letters of horse and elephant, in that order.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "nb" => Ok(FenFlavour::KnightBishop),
            "he" => Ok(FenFlavour::HorseElephant),
            other => Err(UnknownFenFlavour(other.to_owned())),
        }
    }
}

impl FenFlavour {
    /// The FEN in this flavour; only the board field changes.
    pub fn write(self, fen: &str) -> String {
        match self {
            FenFlavour::KnightBishop => fen.to_owned(),
            FenFlavour::HorseElephant => {
                let (board, rest) = fen.split_once(' ').unwrap_or((fen, ""));
                let board: String = board
                    .chars()
                    .map(|c| match c {
                        'N' => 'H',
                        'n' => 'h',
                        'B' => 'E',
                        'b' => 'e',
                        other => other,
                    })
                    .collect();
                format!("{board} {rest}")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_position_round_trips() {
        assert_eq!(to_fen(&parse(START_FEN).unwrap()), START_FEN);
    }

    #[test]
    fn flavours_are_named_by_their_letters_and_written_as_engines_read_them() {
        let flavour: FenFlavour = "he".parse().unwrap();
        let written = flavour.write(START_FEN);
        assert_eq!(written, "rheakaehr/9/1c5c1/p1p1p1p1p/9/9/P1P1P1P1P/1C5C1/9/RHEAKAEHR w - - 0 1");
        assert_eq!(to_fen(&parse(&written).unwrap()), START_FEN);
        assert_eq!("nb".parse::<FenFlavour>().unwrap().write(START_FEN), START_FEN);
        assert_eq!("xy".parse::<FenFlavour>().unwrap_err().to_string(), "FEN letters 'xy': use nb (N, B) or he (H, E)");
    }

    #[test]
    fn aliases_and_short_forms_are_accepted() {
        let short = "rheakaehr/9/1c5c1/p1p1p1p1p/9/9/P1P1P1P1P/1C5C1/9/RHEAKAEHR r";
        assert_eq!(to_fen(&parse(short).unwrap()), START_FEN);
    }

    fn error_of(fen: &str) -> String {
        parse(fen).unwrap_err().to_string()
    }

    #[test]
    fn impossible_boards_are_refused_with_the_reason() {
        let cases = [
            ("rnbakabnr/9/1c5c1/p1p1p1p1p/9/9/P1P1P1P1P/1C5C1/9/RNBA1ABNR w", "Red has no king"),
            ("3k5/9/9/9/9/9/9/9/4K4/4K4 w", "Red has 2 kings"),
            ("4k4/9/9/9/9/9/9/9/9/4K4 w", "the kings face each other"),
            ("3k5/9/9/9/9/9/9/K8/9/9 w", "the Red king on a2 stands outside its palace"),
            ("4k4/9/9/9/9/9/9/9/9/A2K5 w", "the Red advisor on a0 stands outside its palace"),
            ("3k5/9/9/2B6/9/9/9/9/9/4K4 w", "the Red elephant on c6 stands across the river"),
            ("3k5/3R5/9/9/9/9/9/9/9/4K4 w", "Black is not to move but is in check"),
            ("3k5/9/9/9/9/9/9/9/9/4K4 x", "the side to move 'x'"),
            ("3k5/9/9/9/9/9/9/9/9/4K4", "the side to move is missing"),
            ("", "the FEN is empty"),
            ("3k5/9/9/9/9/9/9/9/4K4 w", "the board has 9 ranks"),
            ("3k6/9/9/9/9/9/9/9/9/4K4 w", "rank 1 from the top covers 10 points"),
            ("3k5/9/9/9/9/9/9/9/9/4KX3 w", "'X' in rank 10 from the top"),
            ("3k5/9/9/9/9/9/9/9/9/4K4 w - - x 1", "the halfmove clock 'x'"),
            ("3k5/9/9/9/9/9/9/9/9/4K4 w - - 0 1 7", "after the move counters: '7'"),
            ("5k3/9/9/9/9/9/9/9/9/RRRK5 w", "Red has 3 pieces of kind chariot"),
        ];
        for (fen, expected) in cases {
            let message = error_of(fen);
            assert!(message.contains(expected), "{fen}: {message}");
        }
    }

    #[test]
    fn unreachable_but_playable_positions_need_the_composed_parser() {
        let pawn_behind = "3k5/4p4/9/9/9/9/9/9/9/4K4 w";
        assert!(parse(pawn_behind).unwrap_err().to_string().contains("pawn on e8 stands on a point pawns never reach"));
        let (_, warnings) = parse_composed(pawn_behind).unwrap();
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].is_playable());
        let elephant_off = "3k5/9/9/9/9/9/9/9/3B5/4K4 w";
        assert!(parse(elephant_off).is_err());
        assert!(parse_composed(elephant_off).is_ok());
        let kings_facing = "4k4/9/9/9/9/9/9/9/9/4K4 w";
        assert!(parse_composed(kings_facing).is_err());
    }
}
