//! Xiongqi opening books: one FEN a line, blank lines and `#` comments skipped. The
//! worker reads them for matches and the coordinator for the units of a test.

use super::Position;
pub use crate::xiangqi::book::BookError;

/// Reads the book text `text` of the file called `name` (for messages).
pub fn parse_book(text: &str, name: &str) -> Result<Vec<Position>, BookError> {
    let mut positions = Vec::new();
    for_each_position(text, name, |position| {
        positions.push(position);
        Ok(())
    })?;
    Ok(positions)
}

/// Reads a book's text as [`parse_book`] does, handing each position to `each` as it is
/// read; returns how many there were.
pub fn for_each_position(
    text: &str,
    name: &str,
    mut each: impl FnMut(Position) -> Result<(), BookError>,
) -> Result<usize, BookError> {
    let mut count = 0;
    for (index, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let position = super::fen::parse(line).map_err(|e| BookError::Entry {
            path: name.to_owned(),
            entry: index + 1,
            reason: e.to_string(),
        })?;
        count += 1;
        each(position)?;
    }
    if count == 0 {
        return Err(BookError::Empty(name.to_owned()));
    }
    Ok(count)
}

/// Reads the book file at `path`.
pub fn read_book(path: &std::path::Path) -> Result<Vec<Position>, BookError> {
    let name = path.display().to_string();
    let text =
        std::fs::read_to_string(path).map_err(|e| BookError::Read { path: name.clone(), reason: e.to_string() })?;
    parse_book(&text, &name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_positions_and_bad_ones_are_named() {
        let text = "# two openings\n\n".to_owned() + &Position::startpos().to_string() + "\n3g4/8/8/8/8/8/8/4G3 w\n";
        assert_eq!(parse_book(&text, "b.fen").unwrap().len(), 2);
        let error = parse_book("3g4/8/8/8/8/8/8/4G3 w\nnot a fen\n", "b.fen").unwrap_err().to_string();
        assert!(error.starts_with("b.fen, entry 2:"), "{error}");
        assert_eq!(parse_book("# nothing\n", "b.fen").unwrap_err().to_string(), "b.fen holds no opening");
    }
}
