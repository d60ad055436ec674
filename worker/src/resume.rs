//! A match resumed from the PGN it was writing. A long match (an SPRT at 10+0.1 runs
//! for hours) stopped by a time limit or a lost machine goes on from its games as if it
//! had never stopped: the SPRT is sequential, and its error bounds hold across pauses
//! as long as every pair played is counted and the pauses do not depend on the
//! results. The games must be this match's (same engines, time control and openings
//! in the same order), checked game by game. A game whose partner in its pair is
//! missing (the run stopped between the two legs) is dropped and the pair played again
//! whole, so that the pentanomial counts only ever see complete pairs.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use xq_engine::color::{ByColor, Color};
use xq_engine::time_control::TimeControl;
use xq_engine::xiangqi::Position;
use xq_engine::xiangqi::notation::{Dialect, format_uci};
use xq_engine::xiangqi::pgn::{MoveNote, PgnError, PgnFile, PgnGame};
use xq_engine::xiangqi::rules::Outcome;
use xq_engine::xiongqi;

use crate::game::{Start, Termination, first_mover};
use crate::match_runner::MatchTotals;
use crate::openings::Openings;
use crate::time_use;

/// What the games of a resumed match must agree with.
#[derive(Clone, Copy, Debug)]
pub struct ThisMatch<'a> {
    /// The event's name as the match writes it.
    pub event: &'a str,
    /// The two engines' names; totals are from the first one's view.
    pub names: [&'a str; 2],
    /// The time control.
    pub time_control: &'a TimeControl,
    /// How far past its clock a move may end and the game go on.
    pub time_margin: Duration,
    /// Where the match's pairs start.
    pub openings: &'a Openings,
    /// The match's games.
    pub games: usize,
}

/// The games a match already played, as far as they count.
#[derive(Clone, Debug, Default)]
pub struct PlayedPairs {
    /// The totals of the complete pairs.
    pub totals: MatchTotals,
    /// The complete pairs, by index.
    pub pairs: BTreeSet<usize>,
    /// The complete pairs' games as written, in the file's order: what the PGN keeps.
    pub kept: String,
    /// Games dropped because their pair is incomplete.
    pub dropped: usize,
}

/// A PGN that is not this match's games.
#[derive(Debug, thiserror::Error)]
pub enum ResumeError {
    /// The file does not read as PGN.
    #[error(transparent)]
    Pgn(#[from] PgnError),
    /// A tag is missing or unreadable.
    #[error("game {game} of the file: [{tag}] is missing or unreadable")]
    Missing {
        /// 1-based game number in the file.
        game: usize,
        /// The tag.
        tag: &'static str,
    },
    /// A game was played under other settings.
    #[error(
        "game {game} of the file: {what} is \"{found}\" where this match's is \"{expected}\"; \
         resume with the settings the file was played with, or write to a new file"
    )]
    Mismatch {
        /// 1-based game number in the file.
        game: usize,
        /// What differs.
        what: &'static str,
        /// In the file.
        found: String,
        /// In this match.
        expected: String,
    },
    /// A round outside the match, or one that is in the file twice.
    #[error("game {game} of the file: round {round} {problem}")]
    Round {
        /// 1-based game number in the file.
        game: usize,
        /// Its round.
        round: usize,
        /// What is wrong with it.
        problem: &'static str,
    },
}

/// One game as far as the totals need it.
struct Counted {
    outcome: Outcome,
    first_is_red: bool,
    reason: String,
    termination: Termination,
    /// The engine that failed, where the game was abandoned: the loser.
    failed: Option<String>,
    players: ByColor<String>,
    first: Color,
    /// Each ply's thinking time as the match noted it (`None`: a book move).
    plies: Vec<Option<Duration>>,
    text_index: usize,
}

/// Reads the games a match wrote to its PGN (`bytes`), checks each against `this`, and
/// counts the complete pairs.
pub fn played_games(bytes: &[u8], this: &ThisMatch<'_>) -> Result<PlayedPairs, ResumeError> {
    let file = PgnFile::read(bytes)?;
    let time_control = this.time_control.to_string();
    let mut legs: BTreeMap<usize, [Option<Counted>; 2]> = BTreeMap::new();
    for (index, game) in file.games(0..file.len()).into_iter().enumerate() {
        let number = index + 1;
        let tag = |tag: &'static str| game.tag(tag).ok_or(ResumeError::Missing { game: number, tag });
        let expect = |what: &'static str, found: &str, expected: &str| {
            if found == expected {
                Ok(())
            } else {
                Err(ResumeError::Mismatch {
                    game: number,
                    what,
                    found: found.to_owned(),
                    expected: expected.to_owned(),
                })
            }
        };
        expect("[Event]", tag("Event")?, this.event)?;
        expect("[TimeControl]", tag("TimeControl")?, &time_control)?;
        let round: usize = tag("Round")?.parse().map_err(|_| ResumeError::Missing { game: number, tag: "Round" })?;
        if round == 0 || round > this.games {
            return Err(ResumeError::Round { game: number, round, problem: "is not one of this match's games" });
        }
        let (pair, leg) = ((round - 1) / 2, (round - 1) % 2);
        let (red, black) = if leg == 0 { (this.names[0], this.names[1]) } else { (this.names[1], this.names[0]) };
        expect("[White] (Red)", tag("White")?, red)?;
        expect("[Black]", tag("Black")?, black)?;
        let opening = this.openings.of_pair(pair).ok_or(ResumeError::Round {
            game: number,
            round,
            problem: "has no opening in this match",
        })?;
        let (fen, startpos, book) = opening_record(opening);
        // The match writes no FEN for a game from the variant's start position.
        let start = game.tag("FEN").unwrap_or(&startpos);
        expect("the start position", start, &fen)?;
        let opened = game.moves.iter().take(book.len()).cloned().collect::<Vec<_>>().join(" ");
        expect("the opening's moves", &opened, &book.join(" "))?;
        let outcome = match tag("Result")? {
            "1-0" => Outcome::Win(Color::Red),
            "0-1" => Outcome::Win(Color::Black),
            "1/2-1/2" => Outcome::Draw,
            _ => return Err(ResumeError::Missing { game: number, tag: "Result" }),
        };
        let termination = Termination::from_pgn(tag("Termination")?)
            .ok_or(ResumeError::Missing { game: number, tag: "Termination" })?;
        let failed = match (termination, outcome) {
            (Termination::EngineFailure, Outcome::Win(winner)) => {
                Some(if winner == Color::Red { black } else { red }.to_owned())
            }
            _ => None,
        };
        let counted = Counted {
            outcome,
            first_is_red: leg == 0,
            reason: ending_reason(&game),
            termination,
            failed,
            players: ByColor { red: red.to_owned(), black: black.to_owned() },
            first: first_mover(start),
            plies: game.notes.iter().map(|note| note.as_deref().and_then(engine_time)).collect(),
            text_index: index,
        };
        let slot = &mut legs.entry(pair).or_default()[leg];
        if slot.is_some() {
            return Err(ResumeError::Round { game: number, round, problem: "is in the file twice" });
        }
        *slot = Some(counted);
    }
    let mut played = PlayedPairs::default();
    let mut kept = BTreeSet::new();
    for (pair, legs) in legs {
        match legs {
            [Some(first), Some(second)] => {
                let mut count = |game: &Counted| {
                    let totals = &mut played.totals;
                    time_use::add_game(
                        &mut totals.time_use,
                        &game.players,
                        game.first,
                        game.plies.iter().copied(),
                        this.time_control,
                        this.time_margin,
                    );
                    totals.add_result(
                        game.outcome,
                        game.first_is_red,
                        &game.reason,
                        game.termination,
                        game.failed.as_deref(),
                    )
                };
                let points = (count(&first), count(&second));
                played.totals.add_pair(points.0, points.1);
                played.pairs.insert(pair);
                kept.extend([first.text_index, second.text_index]);
            }
            _ => played.dropped += 1,
        }
    }
    played.kept = kept.into_iter().map(|index| file.game_text(index)).collect();
    Ok(played)
}

/// How a game as the match writes it starts: the start position's FEN, the FEN of
/// its variant's start position, and the opening's book moves.
fn opening_record(start: &Start) -> (String, String, Vec<String>) {
    match start {
        Start::Xiangqi(opening) => (
            opening.start.to_string(),
            Position::startpos().to_string(),
            opening.moves.iter().map(|&mv| format_uci(mv, Dialect::ZeroBased)).collect(),
        ),
        Start::Xiongqi(position) => (position.to_string(), xiongqi::Position::startpos().to_string(), Vec::new()),
    }
}

/// The thinking time of a move an engine chose, from the note the match wrote after it;
/// `None` for a book move (and a note the match did not write).
fn engine_time(note: &str) -> Option<Duration> {
    match MoveNote::parse(note)? {
        MoveNote::Engine { elapsed, .. } => Some(elapsed),
        MoveNote::Book => None,
    }
}

/// The reason the match wrote after the last move (`{checkmate} 1-0`), or the
/// result's own name when the comment is missing.
fn ending_reason(game: &PgnGame) -> String {
    game.comment.clone().unwrap_or_else(|| format!("result {}", game.result.as_deref().unwrap_or("*")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::game::{GameRecord, Opening, PlayedMove};
    use crate::pgn_out::game_pgn;
    use xq_engine::color::ByColor;
    use xq_engine::variant::Variant;
    use xq_engine::xiangqi::rules::ViolationTiming;

    fn openings() -> Openings {
        ["rnbakabnr/9/1c5c1/p1p1p1p1p/9/9/P1P1P1P1P/1C5C1/9/RNBAKABNR w - - 0 1", "4k4/9/9/9/9/9/9/9/9/3K1R3 w - - 0 1"]
            .iter()
            .map(|fen| Start::from(Opening { start: Position::from_fen(fen).unwrap(), moves: Vec::new() }))
            .collect::<Vec<_>>()
            .into()
    }

    fn record(openings: &Openings, pair: usize, leg: usize, outcome: Outcome) -> String {
        game_pgn(&game(openings, pair, leg, outcome), "a vs b", pair * 2 + leg + 1)
    }

    fn game(openings: &Openings, pair: usize, leg: usize, outcome: Outcome) -> GameRecord {
        let Some(Start::Xiangqi(opening)) = openings.of_pair(pair) else { unreachable!() };
        let (red, black) = if leg == 0 { ("a", "b") } else { ("b", "a") };
        GameRecord {
            players: ByColor { red: red.to_owned(), black: black.to_owned() },
            variant: Variant::Xiangqi,
            start_fen: opening.start.to_string(),
            from_startpos: opening.start == Position::startpos(),
            moves: Vec::new(),
            book_plies: 0,
            outcome,
            reason: "checkmate".to_owned(),
            termination: Termination::Rules,
            failure: None,
            overtime: None,
            illegal_move: None,
            failed_before_moving: None,
            violation_timing: ViolationTiming::Threefold,
            warnings: Vec::new(),
            time_controls: ByColor { red: TEN_SECONDS.clone(), black: TEN_SECONDS.clone() },
        }
    }

    static TEN_SECONDS: std::sync::LazyLock<TimeControl> = std::sync::LazyLock::new(|| "10+0.1".parse().unwrap());

    fn this(openings: &Openings) -> ThisMatch<'_> {
        ThisMatch {
            event: "a vs b",
            names: ["a", "b"],
            time_control: &TEN_SECONDS,
            time_margin: Duration::ZERO,
            openings,
            games: 8,
        }
    }

    #[test]
    fn complete_pairs_count_and_a_lone_leg_is_dropped() {
        let openings = openings();
        // Pair 0: a wins with Red, draws with Black (1.5 points); pair 1: a loses both;
        // pair 2 stopped after its first leg.
        let text = [
            record(&openings, 0, 0, Outcome::Win(Color::Red)),
            record(&openings, 1, 0, Outcome::Win(Color::Black)),
            record(&openings, 0, 1, Outcome::Draw),
            record(&openings, 2, 0, Outcome::Win(Color::Red)),
            record(&openings, 1, 1, Outcome::Win(Color::Red)),
        ]
        .concat();
        let played = played_games(text.as_bytes(), &this(&openings)).unwrap();
        assert_eq!(played.pairs, BTreeSet::from([0, 1]));
        assert_eq!((played.totals.wins, played.totals.draws, played.totals.losses), (1, 1, 2));
        assert_eq!(played.totals.pentanomial, [1, 0, 0, 1, 0]);
        assert_eq!(played.totals.reasons.get("checkmate"), Some(&4));
        assert_eq!(played.dropped, 1);
        let kept = PgnFile::read(played.kept.as_bytes()).unwrap();
        let rounds: Vec<String> =
            kept.games(0..kept.len()).iter().map(|g| g.tag("Round").unwrap().to_owned()).collect();
        assert_eq!(rounds, ["1", "3", "2", "4"], "the complete pairs' games, in the file's order");
    }

    /// A resumed match counts the games won on time from its PGN apart, as the live
    /// one does, and its over-the-board figures count them as draws.
    #[test]
    fn wins_on_time_are_counted_apart_and_as_draws_over_the_board() {
        let openings = openings();
        let on_time = |leg: usize, winner: Color| {
            let mut game = game(&openings, 0, leg, Outcome::Win(winner));
            game.termination = Termination::TimeForfeit;
            game.reason = "time forfeit".to_owned();
            game.overtime = Some(Duration::from_millis(40));
            game_pgn(&game, "a vs b", leg + 1)
        };
        // Pair 0: b's clock runs out in both games (a wins with Red, then with Black):
        // 2 + 2 half points for a, 1 + 1 on the board.
        let text = [on_time(0, Color::Red), on_time(1, Color::Black)].concat();
        let played = played_games(text.as_bytes(), &this(&openings)).unwrap();
        assert_eq!(played.totals.pentanomial, [0, 0, 0, 0, 1]);
        assert_eq!(played.totals.forfeit_wins, [2, 0]);
        assert_eq!(played.totals.ruled_wins, [0, 0]);
        assert_eq!(played.totals.over_the_board, [0, 0, 1, 0, 0]);
        assert_eq!(played.totals.reasons.get("time forfeit"), Some(&2));
    }

    #[test]
    fn games_of_another_match_are_refused_naming_what_differs() {
        let openings = openings();
        let game = record(&openings, 0, 0, Outcome::Draw);
        let mut other = this(&openings);
        let sixty = "60+0.6".parse().unwrap();
        other.time_control = &sixty;
        let error = played_games(game.as_bytes(), &other).unwrap_err().to_string();
        assert!(error.contains("[TimeControl] is \"10+0.1\" where this match's is \"60+0.6\""), "{error}");
        let swapped = ThisMatch { names: ["b", "a"], event: "a vs b", ..this(&openings) };
        let error = played_games(game.as_bytes(), &swapped).unwrap_err().to_string();
        assert!(error.contains("[White] (Red) is \"a\""), "{error}");
        let Openings::Cycle(starts) = &openings else { unreachable!() };
        let reordered = Openings::Cycle(starts.iter().rev().cloned().collect());
        let error = played_games(game.as_bytes(), &this(&reordered)).unwrap_err().to_string();
        assert!(error.contains("the start position"), "{error}");
        let twice = [game.clone(), game.clone()].concat();
        let error = played_games(twice.as_bytes(), &this(&openings)).unwrap_err().to_string();
        assert!(error.contains("round 1 is in the file twice"), "{error}");
        let beyond = record(&openings, 4, 0, Outcome::Draw);
        let error = played_games(beyond.as_bytes(), &this(&openings)).unwrap_err().to_string();
        assert!(error.contains("round 9 is not one of this match's games"), "{error}");
        // A lease's openings name only its own pairs.
        let leased = Openings::Pairs([(1, starts[1].clone())].into());
        let error = played_games(game.as_bytes(), &this(&leased)).unwrap_err().to_string();
        assert!(error.contains("has no opening in this match"), "{error}");
    }

    /// What a resumed match says of the engines' clocks is what the live match said of
    /// the same games: the move times come back from the notes the PGN was written
    /// with (to the millisecond it writes them to), the book's moves charged to no one.
    #[test]
    fn time_use_read_back_from_the_notes_is_the_live_matchs() {
        let openings = openings();
        let mut live = BTreeMap::new();
        let mut text = String::new();
        for (leg, times) in
            [[None, Some(412), Some(1_250), Some(7)], [None, Some(3), Some(5_001), Some(998)]].iter().enumerate()
        {
            let mut game = game(&openings, 0, leg, Outcome::Draw);
            game.book_plies = 1;
            game.moves = ["h2e2", "h9g7", "h0g2", "i9h9"]
                .iter()
                .zip(times)
                .map(|(mv, ms)| PlayedMove {
                    mv: (*mv).to_owned(),
                    score: Some(12),
                    depth: Some(9),
                    elapsed: Duration::from_millis(ms.unwrap_or(0)),
                })
                .collect();
            let plies = game.moves.iter().enumerate().map(|(ply, m)| (ply >= game.book_plies).then_some(m.elapsed));
            time_use::add_game(&mut live, &game.players, Color::Red, plies, &TEN_SECONDS, Duration::ZERO);
            text += &game_pgn(&game, "a vs b", leg + 1);
        }
        let played = played_games(text.as_bytes(), &this(&openings)).unwrap();
        assert_eq!(played.totals.time_use, live);
        // a: 1,250 ms with Red, 3 and 998 ms with Black; 10 s and 0.1 s a move.
        let a = live["a"];
        assert_eq!((a.moves, a.thinking), (3, Duration::from_millis(2_251)));
        assert_eq!(a.left_at_end, Duration::from_millis(10_000 - 1_250 + 100 + 10_000 - 3 - 998 + 200));
        assert_eq!(live["b"].least_left, Some(Duration::from_millis(10_000 - 5_001 + 100)));
    }
}
