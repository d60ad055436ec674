//! Opening books: FEN/EPD files (one position a line) and PGN files (the position after
//! a number of plies). The worker plays them; the coordinator checks that a reported
//! game started where its unit's opening says.

use std::path::Path;

use crate::xiangqi::notation::{Dialect, parse_uci};
use crate::xiangqi::pgn::parse_pgn;
use crate::xiangqi::{Move, Position, fen};

/// Where a game starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Opening {
    /// The start position.
    pub start: Position,
    /// Moves played from it before the engines take over.
    pub moves: Vec<Move>,
}

/// A book that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum BookError {
    /// The file cannot be read.
    #[error("cannot read {path}: {reason}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
    /// An entry is not a valid position or game.
    #[error("{path}, entry {entry}: {reason}")]
    Entry {
        /// The file.
        path: String,
        /// 1-based line (FEN/EPD) or game (PGN) number.
        entry: usize,
        /// What is wrong.
        reason: String,
    },
    /// The book holds no opening.
    #[error("{0} holds no opening")]
    Empty(String),
    /// The book is larger than a book may be.
    #[error("{path}: {reason}")]
    TooLarge {
        /// The file.
        path: String,
        /// Which bound it passed.
        reason: String,
    },
}

/// The FEN part of an EPD or FEN line: board and side, then placeholders and counters
/// while they look like FEN fields; EPD operations after them are dropped.
fn fen_part(line: &str) -> String {
    let mut fields: Vec<&str> = Vec::new();
    for (index, token) in line.split_whitespace().enumerate() {
        let fen_like = index < 2 || token == "-" || (index >= 4 && token.bytes().all(|b| b.is_ascii_digit()));
        if index >= 6 || !fen_like {
            break;
        }
        fields.push(token);
    }
    fields.join(" ")
}

/// Reads a book: PGN when the file name ends in `.pgn` (each game's position after
/// `pgn_plies`, or after all its moves), else one FEN or EPD position a line.
pub fn read_book(path: &Path, pgn_plies: Option<usize>) -> Result<Vec<Opening>, BookError> {
    let name = path.display().to_string();
    let text =
        std::fs::read_to_string(path).map_err(|e| BookError::Read { path: name.clone(), reason: e.to_string() })?;
    let pgn = path.extension().is_some_and(|e| e.eq_ignore_ascii_case("pgn"));
    parse_book(&text, pgn, pgn_plies, &name)
}

/// Reads a book's text: PGN games if `pgn`, else FEN or EPD lines; `name` names it in
/// errors.
pub fn parse_book(text: &str, pgn: bool, pgn_plies: Option<usize>, name: &str) -> Result<Vec<Opening>, BookError> {
    let mut openings = Vec::new();
    for_each_opening(text, (pgn, pgn_plies), name, |opening| {
        openings.push(opening);
        Ok(())
    })?;
    Ok(openings)
}

/// Reads a book's text as [`parse_book`] does, handing each opening to `each` as it is
/// read instead of holding them all (a `Position` costs many times its FEN line);
/// returns how many there were.
pub fn for_each_opening(
    text: &str,
    (pgn, pgn_plies): (bool, Option<usize>),
    name: &str,
    mut each: impl FnMut(Opening) -> Result<(), BookError>,
) -> Result<usize, BookError> {
    let name = name.to_owned();
    let entry_error = |entry, reason: String| BookError::Entry { path: name.clone(), entry, reason };
    let mut count = 0;
    let mut push = |opening: Opening| {
        count += 1;
        each(opening)
    };
    if pgn {
        let games = parse_pgn(text).map_err(|e| entry_error(0, e.to_string()))?;
        for (index, game) in games.iter().enumerate() {
            let start = match game.tag("FEN") {
                Some(text) => fen::parse(text).map_err(|e| entry_error(index + 1, e.to_string()))?,
                None => Position::startpos(),
            };
            let mut position = start.clone();
            let mut moves = Vec::new();
            for text in game.moves.iter().take(pgn_plies.unwrap_or(usize::MAX)) {
                let mv = parse_uci(&position, text, Dialect::ZeroBased)
                    .map_err(|e| entry_error(index + 1, e.to_string()))?;
                position.make_move(mv);
                moves.push(mv);
            }
            push(Opening { start, moves })?;
        }
    } else {
        for (index, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let start = fen::parse(&fen_part(line)).map_err(|e| entry_error(index + 1, e.to_string()))?;
            push(Opening { start, moves: Vec::new() })?;
        }
    }
    if count == 0 {
        return Err(BookError::Empty(name));
    }
    Ok(count)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every book the repository ships reads whole: each of its lines an opening, a
    /// legal position with moves to play, no position twice (counters aside).
    #[test]
    fn the_shipped_books_read_whole_each_position_once() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../books");
        let mut books = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "epd") {
                continue;
            }
            books += 1;
            let text = std::fs::read_to_string(&path).unwrap();
            let lines = text.lines().filter(|l| !l.trim().is_empty() && !l.starts_with('#')).count();
            let openings = read_book(&path, None).unwrap();
            assert_eq!(openings.len(), lines, "{}", path.display());
            let mut seen = std::collections::HashSet::new();
            for opening in &openings {
                let fen = opening.start.to_string();
                let key: Vec<&str> = fen.split_whitespace().take(2).collect();
                assert!(seen.insert(key.join(" ")), "{}: {fen} twice", path.display());
                assert!(!crate::xiangqi::movegen::legal_moves(&opening.start).is_empty(), "{fen}");
            }
        }
        assert!(books >= 2, "the two-ply and four-ply books");
    }

    #[test]
    fn epd_operations_are_dropped() {
        assert_eq!(fen_part("4k4/9/9/9/9/9/9/9/9/3K5 w - - bm e1e2; id \"x\";"), "4k4/9/9/9/9/9/9/9/9/3K5 w - -");
        assert_eq!(fen_part("4k4/9/9/9/9/9/9/9/9/3K5 b - - 3 7"), "4k4/9/9/9/9/9/9/9/9/3K5 b - - 3 7");
    }

    #[test]
    fn books_are_read_and_bad_entries_named() {
        let dir = std::env::temp_dir().join(format!("xq-book-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let epd = dir.join("book.epd");
        std::fs::write(&epd, "# openings\nrnbakabnr/9/1c5c1/p1p1p1p1p/9/9/P1P1P1P1P/1C2C4/9/RNBAKABNR b - - 1 1\n\n4k4/9/9/9/9/9/9/9/9/3K5 w - - id \"end\";\n").unwrap();
        assert_eq!(read_book(&epd, None).unwrap().len(), 2);
        let pgn = dir.join("book.pgn");
        std::fs::write(&pgn, "[Event \"a\"]\n\n1. h2e2 h9g7 2. h0g2 *\n").unwrap();
        let book = read_book(&pgn, Some(2)).unwrap();
        assert_eq!(book[0].moves.len(), 2);
        let bad = dir.join("bad.epd");
        std::fs::write(&bad, "4k4/9/9/9/9/9/9/9/9/4K4 w\n").unwrap();
        let message = read_book(&bad, None).unwrap_err().to_string();
        assert!(message.contains("entry 1") && message.contains("face each other"), "{message}");
        std::fs::remove_dir_all(&dir).ok();
    }
}
