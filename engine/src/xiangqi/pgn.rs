//! Reading game records in PGN as the product writes them (shared/reference/
//! CONVENTIONS.md): tag pairs, then moves in UCI coordinates with optional move
//! numbers, comments and a result.

/// One game of a PGN file: its tags and its moves as written.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PgnGame {
    /// Tag pairs in order, e.g. `("FEN", "...")`.
    pub tags: Vec<(String, String)>,
    /// Move texts in order.
    pub moves: Vec<String>,
    /// The result token at the end of the movetext, if any.
    pub result: Option<String>,
}

impl PgnGame {
    /// The value of tag `name`.
    pub fn tag(&self, name: &str) -> Option<&str> {
        self.tags.iter().find(|(key, _)| key == name).map(|(_, value)| value.as_str())
    }
}

/// A PGN text that cannot be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PgnError {
    /// A tag pair is not `[Name "value"]`.
    #[error("line {line}: a tag pair should read [Name \"value\"]")]
    BadTag {
        /// 1-based line number.
        line: usize,
    },
    /// A comment is never closed.
    #[error("line {line}: a comment opened with '{{' is never closed")]
    UnclosedComment {
        /// 1-based line number.
        line: usize,
    },
}

const RESULTS: [&str; 4] = ["1-0", "0-1", "1/2-1/2", "*"];

/// Reads every game of a PGN text.
pub fn parse_pgn(text: &str) -> Result<Vec<PgnGame>, PgnError> {
    let mut games = Vec::new();
    let mut game = PgnGame::default();
    let mut in_movetext = false;
    let mut comment_from: Option<usize> = None;
    for (index, raw) in text.lines().enumerate() {
        let line = raw.trim();
        let number = index + 1;
        if comment_from.is_none() && line.starts_with('[') {
            if in_movetext {
                games.push(std::mem::take(&mut game));
                in_movetext = false;
            }
            game.tags.push(parse_tag(line).ok_or(PgnError::BadTag { line: number })?);
            continue;
        }
        let mut rest = line;
        while !rest.is_empty() {
            if comment_from.is_some() {
                match rest.find('}') {
                    Some(end) => {
                        comment_from = None;
                        rest = &rest[end + 1..];
                    }
                    None => rest = "",
                }
                continue;
            }
            rest = rest.trim_start();
            if let Some(after) = rest.strip_prefix('{') {
                comment_from = Some(number);
                rest = after;
                continue;
            }
            if rest.starts_with(';') {
                break;
            }
            let end = rest.find(|c: char| c.is_whitespace() || c == '{').unwrap_or(rest.len());
            let token = &rest[..end];
            rest = &rest[end..];
            if token.is_empty() {
                continue;
            }
            in_movetext = true;
            if RESULTS.contains(&token) {
                game.result = Some(token.to_owned());
            } else if let Some(mv) = strip_move_number(token) {
                game.moves.push(mv.to_owned());
            }
        }
    }
    if let Some(line) = comment_from {
        return Err(PgnError::UnclosedComment { line });
    }
    if in_movetext || !game.tags.is_empty() {
        games.push(game);
    }
    Ok(games)
}

fn parse_tag(line: &str) -> Option<(String, String)> {
    let inner = line.strip_prefix('[')?.strip_suffix(']')?.trim();
    let (name, value) = inner.split_once(char::is_whitespace)?;
    let value = value.trim().strip_prefix('"')?.strip_suffix('"')?;
    Some((name.to_owned(), value.replace("\\\"", "\"")))
}

/// `12.h2e2` -> `h2e2`; `12.` or `12...` -> nothing.
fn strip_move_number(token: &str) -> Option<&str> {
    let without_digits = token.trim_start_matches(|c: char| c.is_ascii_digit());
    if without_digits.len() == token.len() {
        return Some(token);
    }
    let mv = without_digits.trim_start_matches('.');
    (!mv.is_empty()).then_some(mv)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_tags_moves_comments_and_result() {
        let text = "[Event \"test\"]\n[FEN \"4k4/9/9/9/9/9/9/9/9/3K5 w - - 0 1\"]\n\n1. d0d1 {score 0} e9e8 2.d1d0 ; rest\ne8e9 1/2-1/2\n\n[Event \"two\"]\n1. h2e2 *\n";
        let games = parse_pgn(text).unwrap();
        assert_eq!(games.len(), 2);
        assert_eq!(games[0].tag("FEN"), Some("4k4/9/9/9/9/9/9/9/9/3K5 w - - 0 1"));
        assert_eq!(games[0].moves, ["d0d1", "e9e8", "d1d0", "e8e9"]);
        assert_eq!(games[0].result.as_deref(), Some("1/2-1/2"));
        assert_eq!(games[1].moves, ["h2e2"]);
    }

    #[test]
    fn malformed_records_are_refused_with_the_line() {
        assert_eq!(parse_pgn("[Event test]\n"), Err(PgnError::BadTag { line: 1 }));
        assert_eq!(parse_pgn("1. h2e2 {oops\n"), Err(PgnError::UnclosedComment { line: 1 }));
    }
}
