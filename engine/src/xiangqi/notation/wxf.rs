//! The rule book's notation (WXF Article 7): piece, file, movement, then destination
//! file or number of steps, with files numbered 1..9 from the mover's right.
//!
//! Written as the book prints it: `C2=5`, `H8+7`; tandem pieces on one file `+C=5`,
//! `-H+8` (7.5); pawns by their place in the file, front first, when a file holds
//! three or more or several files hold two (`36=5`, 7.5.i). Advisors and elephants on
//! one file keep the plain form whenever it names one move, as players write them.
//! Read leniently: `N`/`B` for horse/elephant, `.` for `=`, lower case, and the
//! letter-then-sign tandem form Fairy-Stockfish prints (`R-=8`).

use super::MoveTextError;
use crate::color::Color;
use crate::xiangqi::{Move, PieceKind, Position, Square};

/// Red counts files from its right (file i is 1), Black from its own right (file a is 1).
pub(super) fn wxf_file(color: Color, file: u8) -> u8 {
    match color {
        Color::Red => 9 - file,
        Color::Black => file + 1,
    }
}

fn board_file(color: Color, number: u8) -> u8 {
    match color {
        Color::Red => 9 - number,
        Color::Black => number - 1,
    }
}

fn forward(color: Color) -> i8 {
    color.fold(1, -1)
}

/// Chariot, cannon, pawn and king give a number of steps when they advance or retreat
/// (7.1D); the others give their destination file.
fn moves_in_lines(kind: PieceKind) -> bool {
    matches!(kind, PieceKind::King | PieceKind::Rook | PieceKind::Cannon | PieceKind::Pawn)
}

/// `color`'s pieces of `kind` on `file`, front (most advanced) first.
pub(super) fn column(position: &Position, color: Color, kind: PieceKind, file: u8) -> Vec<Square> {
    let mut squares: Vec<Square> = position.pieces(color, kind).filter(|sq| sq.file() == file).collect();
    squares.sort_by_key(|sq| sq.rank());
    if color == Color::Red {
        squares.reverse();
    }
    squares
}

/// Files on which `color` has two or more pieces of `kind`.
fn crowded_files(position: &Position, color: Color, kind: PieceKind) -> Vec<u8> {
    (0..9).filter(|&f| column(position, color, kind, f).len() >= 2).collect()
}

/// Writes a legal move in WXF notation.
pub fn format_wxf(position: &Position, mv: Move) -> Result<String, MoveTextError> {
    position.check_move(mv).map_err(|reason| MoveTextError::Illegal { text: mv.to_string(), reason })?;
    let (from, to) = (mv.from(), mv.to());
    let piece = position.piece_at(from).expect("a legal move has a piece to move");
    let (color, kind) = (piece.color, piece.kind);
    let advance = (to.rank() as i8 - from.rank() as i8) * forward(color);
    let movement = match advance {
        0 => format!("={}", wxf_file(color, to.file())),
        _ => {
            let sign = if advance > 0 { '+' } else { '-' };
            let arg = if moves_in_lines(kind) { advance.unsigned_abs() } else { wxf_file(color, to.file()) };
            format!("{sign}{arg}")
        }
    };
    let letter = kind.wxf_letter();
    let file_number = wxf_file(color, from.file());
    let plain = format!("{letter}{file_number}{movement}");
    let file = column(position, color, kind, from.file());
    if file.len() == 1 {
        return Ok(plain);
    }
    let place = file.iter().position(|&sq| sq == from).expect("the piece is on its file");
    let front_or_rear = if place == 0 { '+' } else { '-' };
    let text = match kind {
        PieceKind::Pawn if file.len() == 2 && crowded_files(position, color, kind).len() == 1 => {
            format!("{front_or_rear}{letter}{movement}")
        }
        PieceKind::Pawn => format!("{}{file_number}{movement}", place + 1),
        PieceKind::Advisor | PieceKind::Elephant if parse_wxf(position, &plain) == Ok(mv) => plain,
        _ => format!("{front_or_rear}{letter}{movement}"),
    };
    Ok(text)
}

/// Which piece of a file the text names.
enum Selector {
    /// Every piece of the kind on this file (board file index).
    File(u8),
    /// The piece at this place (0 = front) on this file.
    Place(u8, usize),
    /// The front (true) or rear piece of whichever file holds two or more.
    Tandem(bool),
}

/// Reads a WXF move and checks that it is legal.
pub fn parse_wxf(position: &Position, text: &str) -> Result<Move, MoveTextError> {
    let syntax = |problem| MoveTextError::Syntax { text: text.to_owned(), notation: "WXF", problem };
    let chars: Vec<char> = text.trim().chars().collect();
    let &[c0, c1, c2, c3] = chars.as_slice() else {
        return Err(syntax("expected four characters such as C2=5, +C=5 or 36=5"));
    };
    let color = position.side_to_move();
    let digit = |c: char| c.to_digit(10).filter(|d| (1..=9).contains(d)).map(|d| d as u8);
    let sign = |c: char| match c {
        '+' => Some(true),
        '-' => Some(false),
        _ => None,
    };
    let (kind, selector) = match (PieceKind::from_letter(c0), PieceKind::from_letter(c1)) {
        (None, Some(kind)) => {
            (kind, Selector::Tandem(sign(c0).ok_or_else(|| syntax("a tandem piece is marked + (front) or - (rear)"))?))
        }
        (Some(kind), None) => match (digit(c1), sign(c1)) {
            (Some(n), _) => (kind, Selector::File(board_file(color, n))),
            (None, Some(front)) => (kind, Selector::Tandem(front)),
            _ => {
                return Err(syntax("the piece letter is followed by a file 1-9 or by + or -"));
            }
        },
        (None, None) => match (digit(c0), digit(c1), sign(c0)) {
            (Some(place), Some(n), _) => (PieceKind::Pawn, Selector::Place(board_file(color, n), place as usize - 1)),
            (None, Some(n), Some(front)) => {
                let file = board_file(color, n);
                let count = column(position, color, PieceKind::Pawn, file).len();
                (PieceKind::Pawn, Selector::Place(file, if front { 0 } else { count.saturating_sub(1) }))
            }
            _ => {
                return Err(syntax(
                    "it does not start with a piece letter (R H E A K C P), a tandem mark or a pawn's place",
                ));
            }
        },
        (Some(_), Some(_)) => return Err(syntax("it names two pieces")),
    };
    let advance = match c2 {
        '+' => Some(1),
        '-' => Some(-1),
        '=' | '.' => None,
        _ => {
            return Err(syntax("the third character is + (advance), - (retreat) or = (traverse)"));
        }
    };
    let arg = digit(c3).ok_or_else(|| syntax("the last character is a digit 1-9"))?;

    let candidates: Vec<Square> = match selector {
        Selector::File(file) => column(position, color, kind, file),
        Selector::Place(file, place) => column(position, color, kind, file).get(place).copied().into_iter().collect(),
        Selector::Tandem(front) => crowded_files(position, color, kind)
            .into_iter()
            .filter_map(|f| {
                let file = column(position, color, kind, f);
                if front { file.first().copied() } else { file.last().copied() }
            })
            .collect(),
    };
    if candidates.is_empty() {
        return Err(MoveTextError::NoSuchMove {
            text: text.to_owned(),
            problem: format!("the side to move has no {} there", kind.name()),
        });
    }
    let mut found = Vec::new();
    let mut last_refusal = None;
    for from in candidates {
        let Some(to) = destination(color, kind, from, advance, arg) else {
            continue;
        };
        let mv = Move::new(from, to);
        match position.check_move(mv) {
            Ok(()) => found.push(mv),
            Err(reason) => last_refusal = Some(reason),
        }
    }
    match (found.as_slice(), last_refusal) {
        ([mv], _) => Ok(*mv),
        ([], Some(reason)) => Err(MoveTextError::Illegal { text: text.to_owned(), reason }),
        ([], None) => Err(MoveTextError::NoSuchMove {
            text: text.to_owned(),
            problem: format!("no {} can move that way", kind.name()),
        }),
        _ => Err(MoveTextError::NoSuchMove {
            text: text.to_owned(),
            problem: "it fits more than one piece: mark the front (+) or rear (-) piece".to_owned(),
        }),
    }
}

/// Where the piece on `from` goes: traversing to file `arg`, or advancing/retreating
/// `arg` steps (line movers) or onto file `arg` (horse, elephant, advisor).
fn destination(color: Color, kind: PieceKind, from: Square, advance: Option<i8>, arg: u8) -> Option<Square> {
    let Some(direction) = advance else {
        return if moves_in_lines(kind) { Square::new(board_file(color, arg), from.rank()) } else { None };
    };
    let ranks_forward = direction * forward(color);
    if moves_in_lines(kind) {
        return from.offset(0, ranks_forward * arg as i8);
    }
    let to_file = board_file(color, arg);
    let files_across = (to_file as i8 - from.file() as i8).abs();
    let ranks = match (kind, files_across) {
        (PieceKind::Horse, 1) => 2,
        (PieceKind::Horse, 2) => 1,
        (PieceKind::Elephant, 2) => 2,
        (PieceKind::Advisor, 1) => 1,
        _ => return None,
    };
    Square::new(to_file, (from.rank() as i8 + ranks_forward * ranks).try_into().ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xiangqi::notation::{Dialect, parse_uci};

    fn check(fen: &str, uci: &str, wxf: &str) {
        let position = Position::from_fen(fen).unwrap();
        let mv = parse_uci(&position, uci, Dialect::ZeroBased).unwrap();
        assert_eq!(format_wxf(&position, mv).unwrap(), wxf, "{fen} {uci}");
        assert_eq!(parse_wxf(&position, wxf).unwrap(), mv, "{fen} {wxf}");
    }

    #[test]
    fn opening_moves_of_article_7_4() {
        let start = crate::xiangqi::fen::START_FEN;
        check(start, "h2e2", "C2=5");
        check(start, "b0c2", "H8+7");
        check(start, "i0i1", "R1+1");
        let black = "rnbakabnr/9/1c5c1/p1p1p1p1p/9/9/P1P1P1P1P/1C2C4/9/RNBAKABNR b";
        check(black, "b9c7", "H2+3");
        check(black, "h7e7", "C8=5");
        check(black, "a9a8", "R1+1");
    }

    #[test]
    fn tandem_pieces_are_front_and_rear_article_7_5() {
        let rooks = "3k5/9/9/9/9/9/9/R8/R8/4K4 w";
        check(rooks, "a2a3", "+R+1");
        check(rooks, "a1d1", "-R=6");
        let position = Position::from_fen(rooks).unwrap();
        let front = parse_wxf(&position, "R-=8").unwrap();
        assert_eq!(front.to_string(), "a1b1", "Fairy-Stockfish's letter-then-sign form");
    }

    #[test]
    fn three_pawns_on_a_file_are_numbered_from_the_front_article_7_5() {
        let three = "5k3/9/4P4/4P4/4P4/9/9/9/9/3K5 w";
        check(three, "e5d5", "35=6");
        check(three, "e6d6", "25=6");
        check(three, "e7e8", "15+1");
    }

    #[test]
    fn advisors_on_one_file_keep_the_plain_form() {
        let advisors = "3k5/9/9/9/9/9/9/3A5/9/3AK4 w";
        check(advisors, "d0e1", "A6+5");
        check(advisors, "d2e1", "A6-5");
    }

    #[test]
    fn bad_text_is_refused_with_the_reason() {
        let position = Position::startpos();
        for (text, expected) in [
            ("C2=", "four characters"),
            ("X2=5", "does not start with a piece letter"),
            ("C2*5", "third character"),
            ("C2=0", "last character"),
            ("C3=5", "no cannon there"),
            ("H8=7", "no horse can move that way"),
            ("R1+5", "a chariot on i0 cannot move to i5"),
        ] {
            let message = parse_wxf(&position, text).unwrap_err().to_string();
            assert!(message.contains(expected), "{text}: {message}");
        }
    }
}
