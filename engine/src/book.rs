//! An opening book of either game, read as a test's variant wants: the coordinator
//! holds one for each test, the worker reads one for each lease.
//!
//! A book is kept compact: each opening's start position as its FEN, all of them in
//! one text, and its book moves, read again when a unit asks for its opening. Kept as
//! `Position`s, a book cost about 36 times its file (a position is some 900 bytes, a
//! FEN line some 40): a 64 MB book held 2.5 GB of a coordinator while its test ran, and
//! stored tests' books stopped a small host's coordinator from starting (review of
//! 2026-11-28, F3). Books are bounded too, in bytes and in openings.

use crate::variant::Variant;
use crate::xiangqi::book::{BookError, Opening, for_each_opening};
use crate::xiangqi::{Move, fen};
use crate::xiongqi;

/// The largest book file, bytes: 64 MiB, some 1.5 million FEN lines.
pub const MAX_BOOK_BYTES: usize = 64 << 20;

/// The most openings a book holds: ten times a 100,000-pair SPRT's openings.
pub const MAX_BOOK_OPENINGS: usize = 1_000_000;

/// A book's openings, in its game.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Book {
    variant: Variant,
    /// Each opening's start position as FEN, one after the other.
    fens: String,
    /// Where each opening's FEN ends in `fens`.
    ends: Vec<u32>,
    /// Each opening's book moves; empty for a book without any (FEN and EPD books).
    moves: Vec<Box<[Move]>>,
}

/// One unit's opening.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BookOpening {
    /// A Xiangqi opening (boxed: a position and its moves are ten Xiongqi positions).
    Xiangqi(Box<Opening>),
    /// A Xiongqi start position.
    Xiongqi(xiongqi::Position),
}

impl Book {
    /// Reads the text of the book file `name` as a `variant` book: FEN/EPD lines or
    /// PGN (by the name's extension) for Xiangqi, FEN lines for Xiongqi. Refused past
    /// [`MAX_BOOK_BYTES`] or [`MAX_BOOK_OPENINGS`].
    pub fn parse(variant: Variant, text: &str, name: &str) -> Result<Book, BookError> {
        let too_large = |reason: String| BookError::TooLarge { path: name.to_owned(), reason };
        if text.len() > MAX_BOOK_BYTES {
            return Err(too_large(format!("{} bytes, more than a book's {MAX_BOOK_BYTES}", text.len())));
        }
        let mut book = Book { variant, fens: String::new(), ends: Vec::new(), moves: Vec::new() };
        let mut add = |fen: String, moves: Vec<Move>| {
            if book.ends.len() == MAX_BOOK_OPENINGS {
                return Err(too_large(format!("more than a book's {MAX_BOOK_OPENINGS} openings")));
            }
            book.fens.push_str(&fen);
            book.ends.push(book.fens.len() as u32);
            if !moves.is_empty() && book.moves.is_empty() {
                book.moves.resize(book.ends.len() - 1, Box::default());
            }
            if !book.moves.is_empty() {
                book.moves.push(moves.into_boxed_slice());
            }
            Ok(())
        };
        match variant {
            Variant::Xiangqi => {
                let pgn = name.to_ascii_lowercase().ends_with(".pgn");
                for_each_opening(text, (pgn, None), name, |opening| add(fen::to_fen(&opening.start), opening.moves))?;
            }
            Variant::Xiongqi => {
                xiongqi::book::for_each_position(text, name, |position| add(position.to_string(), Vec::new()))?;
            }
        }
        book.fens.shrink_to_fit();
        Ok(book)
    }

    /// Its number of openings.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether it holds none (a parsed book never does).
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The opening of `unit`: units go round the book.
    pub fn for_unit(&self, unit: u64) -> BookOpening {
        let index = (unit % self.ends.len() as u64) as usize;
        let start = if index == 0 { 0 } else { self.ends[index - 1] as usize };
        let text = &self.fens[start..self.ends[index] as usize];
        // Written by this build from a position it read: it reads back.
        match self.variant {
            Variant::Xiangqi => BookOpening::Xiangqi(Box::new(Opening {
                start: fen::parse(text).expect("a book's FEN reads back"),
                moves: self.moves.get(index).map_or_else(Vec::new, |moves| moves.to_vec()),
            })),
            Variant::Xiongqi => {
                BookOpening::Xiongqi(xiongqi::fen::parse(text).expect("a book's Xiongqi FEN reads back"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xiangqi::book::parse_book;

    #[test]
    fn a_compact_book_gives_each_unit_the_opening_the_book_reads() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../books");
        let text = std::fs::read_to_string(dir.join("xiangqi-4ply.epd")).unwrap();
        let book = Book::parse(Variant::Xiangqi, &text, "xiangqi-4ply.epd").unwrap();
        let read = parse_book(&text, false, None, "xiangqi-4ply.epd").unwrap();
        assert_eq!(book.len(), read.len());
        for unit in [0, 1, read.len() as u64 - 1, read.len() as u64, 3 * read.len() as u64 + 7] {
            let BookOpening::Xiangqi(opening) = book.for_unit(unit) else { panic!("a Xiangqi book") };
            let expected = &read[(unit % read.len() as u64) as usize];
            assert_eq!(fen::to_fen(&opening.start), fen::to_fen(&expected.start), "unit {unit}");
            assert_eq!(opening.start.hash(), expected.start.hash());
        }
        // A PGN book keeps its moves, a game without any among them.
        let pgn = "[FEN \"4k4/9/9/9/9/9/9/9/9/3K1R3 w - - 0 1\"]\n\n*\n\n\
                   [FEN \"4k4/9/9/9/9/9/9/9/9/3K1R3 w - - 0 1\"]\n\nf0f1 e9e8 f1f0 *\n";
        let book = Book::parse(Variant::Xiangqi, pgn, "b.pgn").unwrap();
        let moves = |unit| match book.for_unit(unit) {
            BookOpening::Xiangqi(opening) => opening.moves.iter().map(ToString::to_string).collect::<Vec<_>>(),
            BookOpening::Xiongqi(_) => panic!("a Xiangqi book"),
        };
        assert_eq!((moves(0), moves(1)), (vec![], vec!["f0f1".to_owned(), "e9e8".to_owned(), "f1f0".to_owned()]));
    }

    #[test]
    fn a_book_past_its_bounds_is_refused_naming_the_bound() {
        let line = "3k5/9/9/9/9/9/9/9/9/4K4 w\n";
        let many = line.repeat(MAX_BOOK_OPENINGS + 1);
        let error = Book::parse(Variant::Xiangqi, &many, "many.epd").unwrap_err().to_string();
        assert_eq!(error, format!("many.epd: more than a book's {MAX_BOOK_OPENINGS} openings"));
        let long = format!("{}\n", " ".repeat(MAX_BOOK_BYTES));
        let error = Book::parse(Variant::Xiangqi, &long, "long.epd").unwrap_err().to_string();
        assert_eq!(error, format!("long.epd: {} bytes, more than a book's {MAX_BOOK_BYTES}", MAX_BOOK_BYTES + 1));
        // Just within: a million openings are taken, kept in little more than their text.
        let million = line.repeat(MAX_BOOK_OPENINGS);
        let book = Book::parse(Variant::Xiangqi, &million, "million.epd").unwrap();
        assert_eq!(book.len(), MAX_BOOK_OPENINGS);
        let held = book.fens.capacity() + book.ends.capacity() * 4 + book.moves.capacity() * 16;
        assert!(held < 2 * million.len() + MAX_BOOK_OPENINGS * 20, "{held} bytes for a {}-byte book", million.len());
    }
}
