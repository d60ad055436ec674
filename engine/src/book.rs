//! An opening book of either game, read as a test's variant wants: the coordinator
//! holds one for each test, the worker reads one for each lease.

use crate::variant::Variant;
use crate::xiangqi::book::{BookError, Opening, parse_book};
use crate::xiongqi;

/// A book's openings, in its game.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Book {
    /// Xiangqi openings: a position and book moves each.
    Xiangqi(Vec<Opening>),
    /// Xiongqi openings: a position each.
    Xiongqi(Vec<xiongqi::Position>),
}

/// One unit's opening.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BookOpening<'a> {
    /// A Xiangqi opening.
    Xiangqi(&'a Opening),
    /// A Xiongqi start position.
    Xiongqi(&'a xiongqi::Position),
}

impl Book {
    /// Reads the text of the book file `name` as a `variant` book: FEN/EPD lines or
    /// PGN (by the name's extension) for Xiangqi, FEN lines for Xiongqi.
    pub fn parse(variant: Variant, text: &str, name: &str) -> Result<Book, BookError> {
        match variant {
            Variant::Xiangqi => {
                let pgn = name.to_ascii_lowercase().ends_with(".pgn");
                parse_book(text, pgn, None, name).map(Book::Xiangqi)
            }
            Variant::Xiongqi => xiongqi::book::parse_book(text, name).map(Book::Xiongqi),
        }
    }

    /// The opening of `unit`: units go round the book.
    pub fn for_unit(&self, unit: u64) -> BookOpening<'_> {
        match self {
            Book::Xiangqi(book) => BookOpening::Xiangqi(&book[(unit % book.len() as u64) as usize]),
            Book::Xiongqi(book) => BookOpening::Xiongqi(&book[(unit % book.len() as u64) as usize]),
        }
    }
}
