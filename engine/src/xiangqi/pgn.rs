//! Reading game records in PGN: as the product writes them (shared/reference/
//! CONVENTIONS.md: tag pairs, then moves in UCI coordinates with optional move
//! numbers, comments and a result), and as game collections do (moves kept as written,
//! in any notation [`crate::xiangqi::notation::parse_any`] reads; files in UTF-8, GBK
//! or Big5: [`parse_pgn_bytes`]). The comment right after a move is its note: what the
//! engine said of it ([`MoveNote`]), which the coordinator checks clocks and
//! adjudications against.

use std::borrow::Cow;
use std::fmt;
use std::time::Duration;

/// One game of a PGN file: its tags and its moves as written.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PgnGame {
    /// Tag pairs in order, e.g. `("FEN", "...")`.
    pub tags: Vec<(String, String)>,
    /// Move texts in order.
    pub moves: Vec<String>,
    /// The comment right after each move, if it has one (same length as `moves`).
    pub notes: Vec<Option<String>>,
    /// The result token at the end of the movetext, if any.
    pub result: Option<String>,
    /// The last comment that is no move's note: where the product writes how the game
    /// ended (`{repetition draw (WXF 3.2.B)} 1/2-1/2`).
    pub comment: Option<String>,
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
    /// The bytes are not text in an encoding game collections use.
    #[error("the file is not text in UTF-8, GBK or Big5 (byte {offset} is where UTF-8 fails)")]
    Encoding {
        /// The first byte that is not UTF-8.
        offset: usize,
    },
}

/// Reads every game of a PGN file's bytes ([`decode_pgn`], then [`parse_pgn`]).
pub fn parse_pgn_bytes(bytes: &[u8]) -> Result<Vec<PgnGame>, PgnError> {
    parse_pgn(&decode_pgn(bytes)?)
}

/// A PGN file's text: UTF-8 (a byte-order mark skipped), or the encodings of older
/// Chinese collections, GBK (mainland) and Big5 (Taiwan, Hong Kong). Many byte strings
/// decode without error in both of these, so the decoding that yields more of the
/// notation's characters (進, 退, 平 in either script) is taken, GBK on a tie. A file
/// whose UTF-8 holds the notation's characters up to a bad byte, where neither GBK nor
/// Big5 yields any, is UTF-8 with a damaged byte: refused, naming it, rather than
/// read as garbage.
pub fn decode_pgn(bytes: &[u8]) -> Result<Cow<'_, str>, PgnError> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let error = match std::str::from_utf8(bytes) {
        Ok(text) => return Ok(Cow::Borrowed(text)),
        Err(error) => error,
    };
    let notation = |text: &str| text.chars().filter(|c| matches!(c, '進' | '进' | '退' | '平')).count();
    let damaged = PgnError::Encoding { offset: error.valid_up_to() };
    // max_by_key takes the last of equals: GBK last, so that it wins ties.
    let (text, found) = [encoding_rs::BIG5, encoding_rs::GBK]
        .into_iter()
        .filter_map(|encoding| encoding.decode_without_bom_handling_and_without_replacement(bytes))
        .map(|text| {
            let found = notation(&text);
            (text, found)
        })
        .max_by_key(|(_, found)| *found)
        .ok_or(damaged.clone())?;
    let utf8_prefix = std::str::from_utf8(&bytes[..error.valid_up_to()]).unwrap_or_default();
    if found == 0 && notation(utf8_prefix) > 0 {
        return Err(damaged);
    }
    Ok(text)
}

const RESULTS: [&str; 4] = ["1-0", "0-1", "1/2-1/2", "*"];

/// Reads every game of a PGN text.
pub fn parse_pgn(text: &str) -> Result<Vec<PgnGame>, PgnError> {
    let mut games = Vec::new();
    read_games(text, |_, game| games.push(game))?;
    Ok(games)
}

/// A PGN file decoded and cut into games without holding them parsed: a verification's
/// coordinator and workers read a unit's games from it as they need them (a parsed game
/// takes several times the bytes of its text).
#[derive(Clone, Debug)]
pub struct PgnFile {
    text: String,
    /// Where each game begins in `text`; game i runs to where game i + 1 begins.
    starts: Vec<usize>,
}

impl PgnFile {
    /// Decodes a PGN file's bytes ([`decode_pgn`]) and finds its games, checking that
    /// the whole file reads.
    pub fn read(bytes: &[u8]) -> Result<PgnFile, PgnError> {
        let text = decode_pgn(bytes)?.into_owned();
        let mut starts = Vec::new();
        read_games(&text, |start, _| starts.push(start))?;
        Ok(PgnFile { text, starts })
    }

    /// Games in the file.
    pub fn len(&self) -> usize {
        self.starts.len()
    }

    /// Bytes of decoded text held.
    pub fn text_len(&self) -> usize {
        self.text.len()
    }

    /// Whether the file holds no game.
    pub fn is_empty(&self) -> bool {
        self.starts.is_empty()
    }

    /// Game `index`'s text as the file has it (the last game's runs to the end).
    pub fn game_text(&self, index: usize) -> &str {
        let end = self.starts.get(index + 1).copied().unwrap_or(self.text.len());
        &self.text[self.starts[index]..end]
    }

    /// Games `range` (clipped to the file), parsed.
    pub fn games(&self, range: std::ops::Range<usize>) -> Vec<PgnGame> {
        let end = range.end.min(self.len());
        let start = range.start.min(end);
        let byte = |game: usize| self.starts.get(game).copied().unwrap_or(self.text.len());
        let mut games = Vec::with_capacity(end - start);
        read_games(&self.text[byte(start)..byte(end)], |_, game| games.push(game))
            .expect("each game of a file that read whole reads alone");
        games
    }
}

/// Reads the games of a PGN text in order, giving each with the byte offset of the line
/// it begins on.
fn read_games(text: &str, mut each: impl FnMut(usize, PgnGame)) -> Result<(), PgnError> {
    let mut game = PgnGame::default();
    let mut game_start = 0;
    let mut in_movetext = false;
    let mut comment_from: Option<usize> = None;
    let mut comment = String::new();
    // Whether the last token read was a move whose note may follow.
    let mut after_move = false;
    let mut line_start = 0;
    for (index, raw) in text.split_inclusive('\n').enumerate() {
        let line = raw.trim();
        let number = index + 1;
        let offset = line_start;
        line_start += raw.len();
        if comment_from.is_none() && line.starts_with('[') {
            if in_movetext {
                each(game_start, std::mem::take(&mut game));
                game_start = offset;
                in_movetext = false;
            }
            // A comment after the new game's tags is no note of the last game's move.
            after_move = false;
            game.tags.push(parse_tag(line).ok_or(PgnError::BadTag { line: number })?);
            continue;
        }
        let mut rest = line;
        while !rest.is_empty() {
            if comment_from.is_some() {
                match rest.find('}') {
                    Some(end) => {
                        comment.push_str(&rest[..end]);
                        comment_from = None;
                        rest = &rest[end + 1..];
                        let text = std::mem::take(&mut comment).trim().to_owned();
                        if std::mem::take(&mut after_move) {
                            *game.notes.last_mut().expect("a note follows a move") = Some(text);
                        } else {
                            game.comment = Some(text);
                        }
                    }
                    None => {
                        comment.push_str(rest);
                        comment.push(' ');
                        rest = "";
                    }
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
            after_move = false;
            if RESULTS.contains(&token) {
                game.result = Some(token.to_owned());
            } else if let Some(mv) = strip_move_number(token) {
                game.moves.push(mv.to_owned());
                game.notes.push(None);
                after_move = true;
            }
        }
    }
    if let Some(line) = comment_from {
        return Err(PgnError::UnclosedComment { line });
    }
    if in_movetext || !game.tags.is_empty() {
        each(game_start, game);
    }
    Ok(())
}

/// What a move's note says: a book move, or an engine's move with its score (from the
/// mover's view, centipawns), depth and thinking time. Written `{book}`,
/// `{+0.25/12 0.500s}` or `{0.500s}` (cutechess-cli's form; the time is the move's
/// elapsed time, PGN's `%emt`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MoveNote {
    /// A move of the opening book.
    Book,
    /// A move an engine chose.
    Engine {
        /// The engine's score, centipawns from the mover's view.
        score: Option<i32>,
        /// The depth it reached.
        depth: Option<u32>,
        /// Its thinking time, to the millisecond.
        elapsed: Duration,
    },
}

impl MoveNote {
    /// Reads a note as [`MoveNote`]'s `Display` writes it; `None` for any other text.
    pub fn parse(text: &str) -> Option<MoveNote> {
        let words: Vec<&str> = text.split_whitespace().collect();
        match words.as_slice() {
            ["book"] => Some(MoveNote::Book),
            [time] => Some(MoveNote::Engine { score: None, depth: None, elapsed: parse_seconds(time)? }),
            [evaluation, time] => {
                let (score, depth) = match evaluation.split_once('/') {
                    Some((score, depth)) => (score, Some(depth.parse().ok()?)),
                    None => (*evaluation, None),
                };
                if !score.starts_with(['+', '-']) {
                    return None;
                }
                let pawns: f64 = score.parse().ok()?;
                let centipawns = (pawns * 100.0).round();
                if !(f64::from(i32::MIN)..=f64::from(i32::MAX)).contains(&centipawns) {
                    return None;
                }
                Some(MoveNote::Engine { score: Some(centipawns as i32), depth, elapsed: parse_seconds(time)? })
            }
            _ => None,
        }
    }
}

/// Movetext as PGN writes it: tokens (move numbers, moves, comments, the result)
/// separated by spaces, a line broken before it would pass 79 characters.
#[derive(Debug, Default)]
pub struct Movetext {
    text: String,
    line: String,
}

impl Movetext {
    /// Adds a token.
    pub fn push(&mut self, token: &str) {
        if !self.line.is_empty() && self.line.len() + token.len() > 79 {
            self.text.push_str(self.line.trim_end());
            self.text.push('\n');
            self.line.clear();
        }
        self.line.push_str(token);
        self.line.push(' ');
    }

    /// The movetext, without a final newline.
    pub fn finish(mut self) -> String {
        self.text.push_str(self.line.trim_end());
        self.text
    }
}

/// `0.500s` -> 500 ms.
fn parse_seconds(text: &str) -> Option<Duration> {
    let seconds: f64 = text.strip_suffix('s')?.parse().ok()?;
    (seconds.is_finite() && (0.0..1e9).contains(&seconds))
        .then(|| Duration::from_millis((seconds * 1000.0).round() as u64))
}

impl fmt::Display for MoveNote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            MoveNote::Book => write!(f, "book"),
            MoveNote::Engine { score, depth, elapsed } => {
                if let Some(score) = score {
                    write!(f, "{:+.2}", f64::from(score) / 100.0)?;
                    if let Some(depth) = depth {
                        write!(f, "/{depth}")?;
                    }
                    write!(f, " ")?;
                }
                write!(f, "{:.3}s", elapsed.as_secs_f64())
            }
        }
    }
}

fn parse_tag(line: &str) -> Option<(String, String)> {
    let inner = line.strip_prefix('[')?.strip_suffix(']')?.trim();
    let (name, value) = inner.split_once(char::is_whitespace)?;
    let value = value.trim().strip_prefix('"')?.strip_suffix('"')?;
    Some((name.to_owned(), value.replace("\\\"", "\"")))
}

/// `12.h2e2` -> `h2e2`; `12.` or `12...` -> nothing.
/// A token that is all digits is a move number too; digits not followed by a dot begin
/// a move (a WXF pawn's place, `35=6`).
fn strip_move_number(token: &str) -> Option<&str> {
    let without_digits = token.trim_start_matches(|c: char| c.is_ascii_digit());
    if without_digits.is_empty() {
        return None;
    }
    if without_digits.len() == token.len() || !without_digits.starts_with('.') {
        return Some(token);
    }
    let mv = without_digits.trim_start_matches('.');
    (!mv.is_empty()).then_some(mv)
}

#[cfg(test)]
mod tests {

    #[test]
    fn movetext_wraps_before_79_characters_and_keeps_every_token() {
        let mut movetext = Movetext::default();
        let tokens: Vec<String> = (0..40).map(|i| format!("{}. h2e2 {{+0.{i:02}/7 0.100s}}", i + 1)).collect();
        for token in &tokens {
            movetext.push(token);
        }
        movetext.push("1-0");
        let text = movetext.finish();
        assert!(text.lines().all(|line| line.len() <= 79 && !line.ends_with(' ')), "{text}");
        assert_eq!(text.split_whitespace().collect::<Vec<_>>().join(" "), format!("{} 1-0", tokens.join(" ")));
        // A token longer than a line gets a line of its own, never an empty one before it.
        let mut long = Movetext::default();
        long.push(&"x".repeat(100));
        assert_eq!(long.finish(), "x".repeat(100));
    }

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
        assert_eq!(games[0].notes, [Some("score 0".to_owned()), None, None, None]);
        // Each game read again alone from where it begins.
        let file = PgnFile::read(text.as_bytes()).unwrap();
        assert_eq!(file.starts, [0, text.find("[Event \"two\"]").unwrap()]);
        assert_eq!((file.games(0..1), file.games(1..2)), (games[..1].to_vec(), games[1..].to_vec()));
        assert_eq!((file.games(0..9), file.games(2..3)), (games.clone(), Vec::new()));
    }

    #[test]
    fn each_move_keeps_the_comment_right_after_it() {
        let text = "1. h2e2 {book} h9g7 {+0.25/12\n0.500s} {a second comment} 2. h0g2 {-1.00 1.250s} 1-0\n";
        let game = &parse_pgn(text).unwrap()[0];
        let notes: Vec<Option<MoveNote>> = game.notes.iter().map(|n| n.as_deref().and_then(MoveNote::parse)).collect();
        let engine = |score, depth, ms| Some(MoveNote::Engine { score, depth, elapsed: Duration::from_millis(ms) });
        assert_eq!(notes, [Some(MoveNote::Book), engine(Some(25), Some(12), 500), engine(Some(-100), None, 1250)]);
    }

    #[test]
    fn the_last_comment_that_is_no_note_tells_how_the_game_ended() {
        let text = "1. h2e2 {book} h9g7 {+0.25/12 0.500s} {an aside} 2. h0g2 {0.100s} {checkmate} 1-0\n\n[Round \"2\"]\n1. h2e2 *\n";
        let games = parse_pgn(text).unwrap();
        assert_eq!(games[0].comment.as_deref(), Some("checkmate"));
        assert_eq!(games[0].notes.len(), 3, "the ending is no move's note");
        assert_eq!(games[1].comment, None);
    }

    #[test]
    fn move_notes_read_back_what_they_write() {
        let notes = [
            MoveNote::Book,
            MoveNote::Engine { score: Some(-3), depth: Some(7), elapsed: Duration::from_millis(1) },
            MoveNote::Engine { score: Some(29_990), depth: None, elapsed: Duration::from_millis(61_234) },
            MoveNote::Engine { score: None, depth: None, elapsed: Duration::ZERO },
        ];
        for note in notes {
            assert_eq!(MoveNote::parse(&note.to_string()), Some(note), "{note}");
        }
        for text in ["", "fast", "0.5", "+x/3 1s", "+1.0/x 1s", "1.0 1s", "+1e99 1s", "-1s", "NaNs", "+1 1s extra"] {
            assert_eq!(MoveNote::parse(text), None, "{text}");
        }
    }

    #[test]
    fn chinese_collections_are_read_in_utf8_gbk_and_big5() {
        // As a collection writes a game: inner quotes in a tag, a full move a line,
        // Black's files in full-width digits, the result alone on the last line.
        let simplified = "[Event \"1999年\"杯\"决赛\"]\n\n1. 炮二平五 马８进７\n2. 马二进三 车９平８\n1-0\n";
        let traditional = "[Event \"1999年\"杯\"決賽\"]\n\n1. 炮二平五 馬８進７\n2. 馬二進三 車９平８\n1-0\n";
        let expected = |text: &str| parse_pgn(text).unwrap();
        assert_eq!(expected(simplified)[0].moves, ["炮二平五", "马８进７", "马二进三", "车９平８"]);
        assert_eq!(expected(simplified)[0].tag("Event"), Some("1999年\"杯\"决赛"));
        assert_eq!(expected(traditional)[0].result.as_deref(), Some("1-0"));
        let (gbk, _, lossy) = encoding_rs::GBK.encode(simplified);
        assert!(!lossy);
        assert_eq!(parse_pgn_bytes(&gbk).unwrap(), expected(simplified));
        let (big5, _, lossy) = encoding_rs::BIG5.encode(traditional);
        assert!(!lossy);
        assert_eq!(parse_pgn_bytes(&big5).unwrap(), expected(traditional));
        let bom = [b"\xEF\xBB\xBF".as_slice(), simplified.as_bytes()].concat();
        assert_eq!(parse_pgn_bytes(&bom).unwrap(), expected(simplified));
        // 0xFF is a byte of none of the three.
        assert_eq!(parse_pgn_bytes(b"1. h2e2 \xFF\xFF"), Err(PgnError::Encoding { offset: 8 }));
        // UTF-8 with one damaged byte is not taken for GBK or Big5.
        let mut damaged = simplified.as_bytes().to_vec();
        let at = damaged.len() - 4; // the "1" of the result
        damaged[at] = 0xFF;
        assert_eq!(parse_pgn_bytes(&damaged), Err(PgnError::Encoding { offset: at }));
    }

    #[test]
    fn move_numbers_are_told_from_moves_that_begin_with_digits() {
        let game = &parse_pgn("1. 35=6 1... C2.5 2.+P+1 12 *\n").unwrap()[0];
        assert_eq!(game.moves, ["35=6", "C2.5", "+P+1"]);
        // A game whose last token is a move, then a game opening with a comment.
        let games = parse_pgn("[Event \"a\"]\n1. h2e2\n[Event \"b\"]\n{opening} 1. h2e2\n").unwrap();
        assert_eq!(games.len(), 2);
        assert_eq!((games[0].notes.clone(), games[1].notes.clone()), (vec![None], vec![None]));
    }

    #[test]
    fn malformed_records_are_refused_with_the_line() {
        assert_eq!(parse_pgn("[Event test]\n"), Err(PgnError::BadTag { line: 1 }));
        assert_eq!(parse_pgn("1. h2e2 {oops\n"), Err(PgnError::UnclosedComment { line: 1 }));
    }
}
