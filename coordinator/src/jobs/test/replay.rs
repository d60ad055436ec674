//! Nothing a worker sends is trusted: a reported game pair counts only after both its
//! games have been replayed through the arbiter. Each game must start at the unit's
//! opening, play only legal moves, stop where the rules end it (no move after a
//! ruling), and carry a result that agrees with the rules: a game ended by the rules
//! ("normal") must end in the ruling's result; a game ended otherwise (time forfeit,
//! adjudication, an engine's failure) must not be over by the rules, and must be borne
//! out by its evidence ([`crate::jobs::test::endings`]).

use xq_engine::book::BookOpening;
use xq_engine::color::Color;
use xq_engine::time_control::TimeControl;
use xq_engine::variant::Variant;
use xq_engine::xiangqi::Position;
use xq_engine::xiangqi::fen;
use xq_engine::xiangqi::notation::{Dialect, parse_uci};
use xq_engine::xiangqi::pgn::{PgnGame, parse_pgn};
use xq_engine::xiangqi::rules::{Outcome, Referee, RefereeConfig, RuleSet, Ruling, ViolationTiming};
use xq_engine::xiongqi;

use crate::jobs::test::endings::{self, Conditions, Replayed};
use crate::storage::counts::TIME_FORFEIT;

/// The most plies a reported game may have: far beyond any rule set's move limits.
pub const MAX_PLIES: usize = 2000;

/// The most bytes of one game's PGN.
pub const MAX_PGN_BYTES: usize = 64 * 1024;

/// What a pair's games must match.
#[derive(Clone, Copy, Debug)]
pub struct PairContext<'a> {
    /// The unit's opening, if the job has a book.
    pub opening: Option<&'a BookOpening>,
    pub variant: Variant,
    pub rules: RuleSet,
    /// When a lone repetition violation loses, as the lease told the worker.
    pub timing: ViolationTiming,
    /// The new engine's and the base engine's names.
    pub names: [&'a str; 2],
    /// The clocks and adjudication the lease's games were played under.
    pub conditions: &'a Conditions,
}

/// A checked game, from the new engine's view.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckedGame {
    /// Half points of the new engine: 0, 1 or 2.
    pub points: i64,
    /// How it ended: the ruling's reason for games ended by the rules, else the PGN's
    /// termination.
    pub reason: String,
}

/// A reported game that does not hold up.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("game {game} of the pair: {problem}")]
pub struct ReplayError {
    /// 1 or 2.
    pub game: usize,
    pub problem: String,
}

/// Checks a pair: the first game with the new engine as Red, the second as Black.
pub fn check_pair(pgns: [&str; 2], context: &PairContext<'_>) -> Result<[CheckedGame; 2], ReplayError> {
    let first = check_game(pgns[0], context, Color::Red).map_err(|problem| ReplayError { game: 1, problem })?;
    let second = check_game(pgns[1], context, Color::Black).map_err(|problem| ReplayError { game: 2, problem })?;
    Ok([first, second])
}

fn check_game(pgn: &str, context: &PairContext<'_>, new_color: Color) -> Result<CheckedGame, String> {
    if pgn.len() > MAX_PGN_BYTES {
        return Err(format!("PGN of {} bytes, more than {MAX_PGN_BYTES}", pgn.len()));
    }
    let mut games = parse_pgn(pgn).map_err(|e| e.to_string())?;
    if games.len() != 1 {
        return Err(format!("{} games in its PGN, not one", games.len()));
    }
    let game = games.remove(0);
    let variant = game.tag("Variant").unwrap_or("xiangqi");
    if !variant.eq_ignore_ascii_case(context.variant.name()) {
        return Err(format!("variant '{variant}', not {}", context.variant.name()));
    }
    let (red, black) = match new_color {
        Color::Red => (context.names[0], context.names[1]),
        Color::Black => (context.names[1], context.names[0]),
    };
    if game.tag("White") != Some(red) || game.tag("Black") != Some(black) {
        return Err(format!("players {:?} - {:?}, expected {red} - {black}", game.tag("White"), game.tag("Black")));
    }
    if game.moves.len() > MAX_PLIES {
        return Err(format!("{} plies, more than {MAX_PLIES}", game.moves.len()));
    }
    let time_controls = context.conditions.time_controls(new_color);
    for (tag, expected) in TimeControl::pgn_tags(time_controls.red, time_controls.black) {
        if game.tag(tag) != Some(expected.as_str()) {
            return Err(format!("[{tag}] {:?}, not the lease's {expected}", game.tag(tag)));
        }
    }
    // The worker writes the tag for any timing but the default.
    let timing = game.tag("ViolationTiming").unwrap_or(ViolationTiming::Threefold.name());
    if timing != context.timing.name() {
        return Err(format!("violation timing '{timing}', not the lease's {}", context.timing.name()));
    }
    let (ruling, replayed) = match context.variant {
        Variant::Xiangqi => replay_xiangqi(&game, context)?,
        Variant::Xiongqi => replay_xiongqi(&game, context)?,
    };
    let result = game.tag("Result").ok_or("no Result tag")?;
    if game.result.as_deref().is_some_and(|token| token != result) {
        return Err(format!("the Result tag {result} and the movetext's {:?} differ", game.result));
    }
    let outcome = match result {
        "1-0" => Outcome::Win(Color::Red),
        "0-1" => Outcome::Win(Color::Black),
        "1/2-1/2" => Outcome::Draw,
        other => return Err(format!("result '{other}' is not a finished game")),
    };
    let termination = game.tag("Termination").ok_or("no Termination tag")?;
    let reason = match (termination, ruling) {
        ("normal", Some(ruling)) if ruling.outcome == outcome => ruling.reason.to_string(),
        ("normal", Some(ruling)) => {
            return Err(format!("result {result}, but the rules give {} ({})", ruling.outcome.pgn(), ruling.reason));
        }
        ("normal", None) => return Err(format!("result {result} by the rules, but the rules have not ended it")),
        (TIME_FORFEIT | "adjudication" | "rules infraction" | "abandoned", None) => termination.to_owned(),
        (_, Some(ruling)) => {
            return Err(format!("termination '{termination}', but the rules ended it: {}", ruling.reason));
        }
        (other, None) => return Err(format!("unknown termination '{other}'")),
    };
    endings::check(&game, &replayed, termination, outcome, context.conditions, time_controls)?;
    let points = match outcome {
        Outcome::Draw => 1,
        Outcome::Win(winner) if winner == new_color => 2,
        Outcome::Win(_) => 0,
    };
    Ok(CheckedGame { points, reason })
}

/// Replays a Xiangqi game through the referee: the ruling it reached, if any.
fn replay_xiangqi(game: &PgnGame, context: &PairContext<'_>) -> Result<(Option<Ruling>, Replayed), String> {
    let start = match game.tag("FEN") {
        Some(text) => fen::parse(text).map_err(|e| format!("FEN: {e}"))?,
        None => Position::startpos(),
    };
    let book_moves: &[_] = match context.opening {
        Some(BookOpening::Xiangqi(opening)) => {
            if start != opening.start {
                return Err("it does not start at the unit's opening".to_owned());
            }
            &opening.moves
        }
        Some(BookOpening::Xiongqi(_)) => return Err("the unit's opening is a Xiongqi position".to_owned()),
        None if start != Position::startpos() => return Err("it does not start at the start position".to_owned()),
        None => &[],
    };
    let first_mover = start.side_to_move();
    let mut referee = Referee::new(start, RefereeConfig::with_timing(context.rules, context.timing));
    for (ply, text) in game.moves.iter().enumerate() {
        if let Some(ruling) = referee.ruling() {
            return Err(format!("move {} ({text}) is played after the game ended: {}", ply + 1, ruling.reason));
        }
        let mv =
            parse_uci(referee.position(), text, Dialect::ZeroBased).map_err(|e| format!("ply {}: {e}", ply + 1))?;
        if book_moves.get(ply).is_some_and(|&book| book != mv) {
            return Err(format!("ply {} ({text}) leaves the unit's opening", ply + 1));
        }
        referee.play(mv).map_err(|_| format!("ply {}: {text} is illegal", ply + 1))?;
    }
    if game.moves.len() < book_moves.len() {
        return Err("it ends inside the opening".to_owned());
    }
    let replayed = Replayed {
        first_mover,
        book_plies: book_moves.len(),
        refuses_illegal_move: game
            .tag("IllegalMove")
            .map(|text| parse_uci(referee.position(), text, Dialect::ZeroBased).is_err()),
    };
    Ok((referee.ruling(), replayed))
}

/// Replays a Xiongqi game by its own rules: the ruling it reached, if any. A
/// repetitive move is legal to play but loses for its player (Xiongqi 6.3).
fn replay_xiongqi(game: &PgnGame, context: &PairContext<'_>) -> Result<(Option<Ruling>, Replayed), String> {
    let start = match game.tag("FEN") {
        Some(text) => xiongqi::fen::parse(text).map_err(|e| format!("FEN: {e}"))?,
        None => xiongqi::Position::startpos(),
    };
    match context.opening {
        Some(BookOpening::Xiongqi(position)) if start != *position => {
            return Err("it does not start at the unit's opening".to_owned());
        }
        Some(BookOpening::Xiangqi(_)) => return Err("the unit's opening is a Xiangqi position".to_owned()),
        None if start != xiongqi::Position::startpos() => {
            return Err("it does not start at the start position".to_owned());
        }
        _ => {}
    }
    let first_mover = start.side_to_move();
    let mut referee = xiongqi::Refereed::new(start);
    for (ply, text) in game.moves.iter().enumerate() {
        if let Some(ruling) = referee.ruling() {
            return Err(format!("move {} ({text}) is played after the game ended: {}", ply + 1, ruling.reason));
        }
        referee.play_text(text).map_err(|error| format!("ply {}: {error}", ply + 1))?;
    }
    let replayed = Replayed {
        first_mover,
        book_plies: 0,
        refuses_illegal_move: game.tag("IllegalMove").map(|text| referee.clone().play_text(text).is_err()),
    };
    Ok((referee.ruling(), replayed))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use xq_engine::adjudication::Adjudication;
    use xq_engine::book::Book;
    use xq_engine::xiangqi::book::Opening;

    fn pgn(white: &str, black: &str, fen: Option<&str>, moves: &str, result: &str, termination: &str) -> String {
        variant_pgn("xiangqi", [white, black], fen, moves, result, termination)
    }

    fn variant_pgn(
        variant: &str,
        [white, black]: [&str; 2],
        fen: Option<&str>,
        moves: &str,
        result: &str,
        termination: &str,
    ) -> String {
        let fen = fen.map(|f| format!("[SetUp \"1\"]\n[FEN \"{f}\"]\n")).unwrap_or_default();
        // Moves without notes get a tenth of a second each and no score.
        let moves = if moves.contains('{') {
            moves.to_owned()
        } else {
            let noted = moves
                .split_whitespace()
                .map(|t| if t.ends_with('.') { t.to_owned() } else { format!("{t} {{0.100s}}") });
            noted.collect::<Vec<_>>().join(" ")
        };
        format!(
            "[White \"{white}\"]\n[Black \"{black}\"]\n[Result \"{result}\"]\n[Variant \"{variant}\"]\n{fen}\
             [TimeControl \"st=1\"]\n[Termination \"{termination}\"]\n\n{moves} {result}\n\n"
        )
    }

    /// `pgn` with one more tag.
    fn tagged(pgn: &str, name: &str, value: &str) -> String {
        format!("[{name} \"{value}\"]\n{pgn}")
    }

    /// A second a move, a tenth of margin, and a draw as soon as an engine scores 0.
    static CONDITIONS: Conditions = Conditions {
        time_controls: [TimeControl::MoveTime(Duration::from_secs(1)), TimeControl::MoveTime(Duration::from_secs(1))],
        time_margin: Duration::from_millis(100),
        adjudication: Adjudication { draw: Some((1, 1, 0)), resign: None },
        max_plies: None,
    };

    const CONTEXT: PairContext<'static> = PairContext {
        opening: None,
        variant: Variant::Xiangqi,
        rules: RuleSet::Wxf,
        timing: ViolationTiming::Threefold,
        names: ["new", "base"],
        conditions: &CONDITIONS,
    };

    // Two rooks against a bare king: 1. b0b8 confines the king to its back rank, and
    // after 1... d9e9 2. a1a9 it is mated (f9 faces the red king on the f-file).
    const MATE_FEN: &str = "3k5/9/9/9/9/9/9/9/R8/1R3K3 w - - 0 1";

    #[test]
    fn legal_games_with_consistent_results_count() {
        let context = PairContext { opening: None, ..CONTEXT };
        let moves = "1. h2e2 {+0.50 0.100s} h9g7 {+0.00 0.100s}";
        let adjudicated = pgn("new", "base", None, moves, "1/2-1/2", "adjudication");
        let moves = "1. h2e2 {+0.50 0.100s} h9g7 {-0.50 0.100s}";
        let lost_on_time = tagged(&pgn("base", "new", None, moves, "0-1", "time forfeit"), "OverTime", "1.2");
        let checked = check_pair([&adjudicated, &lost_on_time], &context).unwrap();
        assert_eq!(checked[0], CheckedGame { points: 1, reason: "adjudication".to_owned() });
        assert_eq!(checked[1].points, 2, "the new engine had Black and won on time");
    }

    #[test]
    fn rule_endings_are_checked_against_the_arbiter() {
        let opening = Opening { start: fen::parse(MATE_FEN).unwrap(), moves: Vec::new() };
        let context = PairContext { opening: Some(&BookOpening::Xiangqi(Box::new(opening.clone()))), ..CONTEXT };
        let mate = pgn("new", "base", Some(MATE_FEN), "1. b0b8 d9e9 2. a1a9", "1-0", "normal");
        let timeout = pgn("base", "new", Some(MATE_FEN), "1. b0b8 {+0.00 0.100s}", "1/2-1/2", "adjudication");
        let checked = check_pair([&mate, &timeout], &context).unwrap();
        assert_eq!(checked[0], CheckedGame { points: 2, reason: "checkmate".to_owned() });
        // The rules ended the game for Red; a claimed draw or a loss is refused.
        let wrong = pgn("new", "base", Some(MATE_FEN), "1. b0b8 d9e9 2. a1a9", "0-1", "normal");
        assert!(check_pair([&wrong, &timeout], &context).unwrap_err().problem.contains("the rules give 1-0"));
        let not_over = pgn("new", "base", Some(MATE_FEN), "1. b0b8", "1-0", "normal");
        assert!(check_pair([&not_over, &timeout], &context).unwrap_err().problem.contains("not ended"));
        let adjudicated_mate = pgn("new", "base", Some(MATE_FEN), "1. b0b8 d9e9 2. a1a9", "1-0", "adjudication");
        assert!(check_pair([&adjudicated_mate, &timeout], &context).is_err());
        let after_mate = pgn("new", "base", Some(MATE_FEN), "1. b0b8 d9e9 2. a1a9 e9d9", "1-0", "normal");
        assert!(check_pair([&after_mate, &timeout], &context).unwrap_err().problem.contains("after the game ended"));
    }

    /// A game played under the books' timing (WXF 17.3.G.III): Red's rook checks the
    /// bare king from e0 and f0 in turn, is warned at the threefold repetition (ply 8)
    /// and loses at the fourth occurrence (ply 12). Replayed under the lease's timing it
    /// counts; a game that says another timing than its lease's is refused, and under
    /// the default timing its moves after ply 8 come after the game ended.
    #[test]
    fn games_are_replayed_under_the_lease_s_violation_timing() {
        const CHECKS: &str = "4k4/9/9/9/9/9/9/9/9/3K1R3 w - - 0 1";
        let cycles = "1. f0e0 e9f9 2. e0f0 f9e9 3. f0e0 e9f9 4. e0f0 f9e9 5. f0e0 e9f9 6. e0f0 f9e9";
        let opening = Opening { start: fen::parse(CHECKS).unwrap(), moves: Vec::new() };
        let warned = PairContext {
            opening: Some(&BookOpening::Xiangqi(Box::new(opening.clone()))),
            timing: ViolationTiming::AfterWarning,
            ..CONTEXT
        };
        let perpetual =
            tagged(&pgn("new", "base", Some(CHECKS), cycles, "0-1", "normal"), "ViolationTiming", "after-warning");
        let other = tagged(
            &pgn("base", "new", Some(CHECKS), "1. f0e0 {+0.00 0.100s}", "1/2-1/2", "adjudication"),
            "ViolationTiming",
            "after-warning",
        );
        let checked = check_pair([&perpetual, &other], &warned).unwrap();
        assert_eq!(checked[0], CheckedGame { points: 0, reason: "perpetual check".to_owned() });

        let untagged = pgn("new", "base", Some(CHECKS), cycles, "0-1", "normal");
        let problem = check_pair([&untagged, &other], &warned).unwrap_err().problem;
        assert!(problem.contains("violation timing 'threefold', not the lease's after-warning"), "{problem}");
        let threefold = PairContext { timing: ViolationTiming::Threefold, ..warned };
        let other = pgn("base", "new", Some(CHECKS), "1. f0e0 {+0.00 0.100s}", "1/2-1/2", "adjudication");
        let problem = check_pair([&untagged, &other], &threefold).unwrap_err().problem;
        assert!(problem.contains("move 9 (f0e0) is played after the game ended: perpetual check"), "{problem}");
    }

    #[test]
    fn mangled_reports_are_refused_not_panicked_on() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let good = pgn("new", "base", Some(MATE_FEN), "1. b0b8 d9e9 2. a1a9", "1-0", "normal");
        let other = pgn("base", "new", Some(MATE_FEN), "1. b0b8 {+0.00 0.100s}", "1/2-1/2", "adjudication");
        let opening = Opening { start: fen::parse(MATE_FEN).unwrap(), moves: Vec::new() };
        let context = PairContext { opening: Some(&BookOpening::Xiangqi(Box::new(opening.clone()))), ..CONTEXT };
        let alphabet = b" \n[]\"{}.0123456789abcdefghiRNBAKCPrnbakcp/-*";
        for _ in 0..3000 {
            let mut bytes = good.clone().into_bytes();
            for _ in 0..rng.random_range(1..6) {
                let at = rng.random_range(0..bytes.len());
                match rng.random_range(0..3) {
                    0 => bytes[at] = alphabet[rng.random_range(0..alphabet.len())],
                    1 => {
                        bytes.remove(at);
                    }
                    _ => bytes.insert(at, alphabet[rng.random_range(0..alphabet.len())]),
                }
            }
            let text = String::from_utf8_lossy(&bytes);
            // Either refused with a reason, or still a consistent game.
            if let Ok(checked) = check_pair([&text, &other], &context) {
                assert!(checked[0].points <= 2);
            }
        }
    }

    #[test]
    fn illegal_moves_wrong_players_and_wrong_openings_are_refused() {
        let good = pgn("base", "new", None, "1. h2e2 {+0.00 0.100s}", "1/2-1/2", "adjudication");
        let illegal = pgn("new", "base", None, "1. h2e2 h9h5", "1/2-1/2", "adjudication");
        let error = check_pair([&illegal, &good], &CONTEXT).unwrap_err();
        assert_eq!(error.game, 1);
        assert!(error.problem.contains("ply 2"), "{}", error.problem);
        let swapped = pgn("base", "new", None, "1. h2e2 {+0.00 0.100s}", "1/2-1/2", "adjudication");
        assert!(check_pair([&swapped, &good], &CONTEXT).unwrap_err().problem.contains("players"));
        let elsewhere = pgn("new", "base", Some(MATE_FEN), "1. b0b8 {+0.00 0.100s}", "1/2-1/2", "adjudication");
        assert!(check_pair([&elsewhere, &good], &CONTEXT).unwrap_err().problem.contains("start position"));
        let unfinished = pgn("new", "base", None, "1. h2e2", "*", "adjudication");
        assert!(check_pair([&unfinished, &good], &CONTEXT).is_err());
        assert!(check_pair(["", &good], &CONTEXT).is_err());
        let two = format!("{good}{good}");
        assert!(check_pair([&two, &good], &CONTEXT).is_err());
        let huge = "x".repeat(MAX_PGN_BYTES + 1);
        assert!(check_pair([&huge, &good], &CONTEXT).unwrap_err().problem.contains("bytes"));
    }

    #[test]
    fn xiongqi_games_are_replayed_by_xiongqi_rules() {
        // The dragon on d1 takes the terminal dragon on d8 (6.1); on the other board a
        // chariot repeats a move that recreates a position, which loses (6.3).
        let capture = "3d4/8/8/2s5/4S3/8/8/3D4 w - - 0 1";
        let repeat = "3g4/8/8/8/8/8/8/R3G3 w - - 0 1";
        let book = Book::parse(Variant::Xiongqi, &format!("{capture}\n{repeat}\n"), "x.fen").unwrap();
        let context = PairContext { opening: Some(&book.for_unit(0)), variant: Variant::Xiongqi, ..CONTEXT };
        let won = variant_pgn("xiongqi", ["new", "base"], Some(capture), "1. d1d8", "1-0", "normal");
        let drawn =
            variant_pgn("xiongqi", ["base", "new"], Some(capture), "1. e4e5 {+0.00 0.100s}", "1/2-1/2", "adjudication");
        let checked = check_pair([&won, &drawn], &context).unwrap();
        assert_eq!(checked.map(|c| c.points), [2, 1]);

        let context = PairContext { opening: Some(&book.for_unit(1)), ..context };
        let moves = "1. a1a2 d8c8 2. a2a1 c8d8 3. a1a2";
        let repeated = variant_pgn("xiongqi", ["new", "base"], Some(repeat), moves, "0-1", "normal");
        let other =
            variant_pgn("xiongqi", ["base", "new"], Some(repeat), "1. a1a2 {+0.00 0.100s}", "1/2-1/2", "adjudication");
        assert_eq!(check_pair([&repeated, &other], &context).unwrap()[0].points, 0);
        let claimed = variant_pgn("xiongqi", ["new", "base"], Some(repeat), moves, "1-0", "normal");
        assert!(check_pair([&claimed, &other], &context).unwrap_err().problem.contains("the rules give 0-1"));
        let illegal =
            variant_pgn("xiongqi", ["new", "base"], Some(repeat), "1. a1h8 {+0.00 0.100s}", "1/2-1/2", "adjudication");
        assert!(check_pair([&illegal, &other], &context).unwrap_err().problem.contains("ply 1"));
        // A Xiangqi game in a Xiongqi test, or the wrong opening, does not count.
        let xiangqi = pgn("new", "base", None, "1. h2e2 {+0.00 0.100s}", "1/2-1/2", "adjudication");
        assert!(check_pair([&xiangqi, &other], &context).unwrap_err().problem.contains("variant"));
        let elsewhere =
            variant_pgn("xiongqi", ["new", "base"], Some(capture), "1. e4e5 {+0.00 0.100s}", "1/2-1/2", "adjudication");
        assert!(check_pair([&elsewhere, &other], &context).unwrap_err().problem.contains("unit's opening"));
    }

    /// A drawn one-ply filler for the pair's other game.
    fn filler() -> String {
        pgn("base", "new", None, "1. h2e2 {+0.00 0.100s}", "1/2-1/2", "adjudication")
    }

    /// What is wrong with `game` as a pair's first game; empty when it counts (the pair
    /// is checked game by game, so the filler's fate under `context` does not matter).
    fn problem(game: &str, context: &PairContext<'_>) -> String {
        match check_pair([game, &filler()], context) {
            Err(error) if error.game == 1 => error.problem,
            _ => String::new(),
        }
    }

    #[test]
    fn time_forfeits_count_only_past_the_clock() {
        // 10 s each, no increment: Red (new) leaves itself 0.2 s, then thinks 0.5 s.
        let conditions =
            Conditions { time_controls: ["10".parse().unwrap(), "10".parse().unwrap()], ..CONDITIONS.clone() };
        let context = PairContext { conditions: &conditions, ..CONTEXT };
        let game = |moves: &str, over: Option<&str>| {
            let text = pgn("new", "base", None, moves, "0-1", "time forfeit").replace("st=1", "10");
            over.map_or(text.clone(), |over| tagged(&text, "OverTime", over))
        };
        let moves = "1. h2e2 {+0.10 9.800s} h9g7 {-0.10 1.000s}";
        assert_eq!(problem(&game(moves, Some("0.500")), &context), "");
        // Within the 0.2 s left and the 0.1 s margin, or no evidence at all: refused.
        assert!(problem(&game(moves, Some("0.250")), &context).contains("within the 0.300 s it had"));
        assert!(problem(&game(moves, None), &context).contains("without [OverTime]"));
        assert!(problem(&game(moves, Some("soon")), &context).contains("bad [OverTime]"));
        // The side that lost must be the one to move.
        let black_to_move = "1. h2e2 {+0.10 9.800s}";
        assert!(problem(&game(black_to_move, Some("5")), &context).contains("side to move"));
        // A move past its clock would have lost there, not later.
        let overdrawn = "1. h2e2 {+0.10 10.200s} h9g7 {-0.10 1.000s}";
        assert!(problem(&game(overdrawn, Some("5")), &context).contains("ply 1: 10.200 s is past the clock"));
        // Nodes and depths have no clock to lose on.
        let conditions = Conditions {
            time_controls: ["nodes=1000".parse().unwrap(), "nodes=1000".parse().unwrap()],
            ..CONDITIONS.clone()
        };
        let context = PairContext { conditions: &conditions, ..CONTEXT };
        let text = game(moves, Some("5")).replace("[TimeControl \"10\"]", "[TimeControl \"nodes=1000\"]");
        assert!(problem(&text, &context).contains("without a clock"));
        // And the game must say it was played at the lease's time control.
        assert!(problem(&game(moves, Some("0.500")), &CONTEXT).contains("not the lease's st=1"));
    }

    /// Time odds: the new engine (Red in the first game) has 10 s, the base 20 s. Each
    /// side's moves are charged to its own clock, and the game names both clocks.
    #[test]
    fn with_time_odds_each_side_is_held_to_its_own_clock() {
        let conditions =
            Conditions { time_controls: ["10".parse().unwrap(), "20".parse().unwrap()], ..CONDITIONS.clone() };
        let context = PairContext { conditions: &conditions, ..CONTEXT };
        let game = |moves: &str, result: &str| {
            let text = pgn("new", "base", None, moves, result, "time forfeit").replace("[TimeControl \"st=1\"]\n", "");
            tagged(&tagged(&text, "WhiteTimeControl", "10"), "BlackTimeControl", "20")
        };
        // The base thinks 15 s of its 20 and goes on; Red then runs out of its 10.
        let moves = "1. h2e2 {+0.10 9.800s} h9g7 {-0.10 15.000s}";
        assert_eq!(problem(&tagged(&game(moves, "0-1"), "OverTime", "0.500"), &context), "");
        // Red thinking 15 s would have lost at once.
        let red_over = "1. h2e2 {+0.10 15.000s} h9g7 {-0.10 1.000s}";
        assert!(
            problem(&tagged(&game(red_over, "0-1"), "OverTime", "5"), &context).contains("ply 1: 15.000 s is past")
        );
        // Black's loss on time needs a think past its own 20 s, not Red's 10.
        let black_loses = "1. h2e2 {+0.10 1.000s} h9g7 {-0.10 1.000s} 2. e2e6 {+0.10 1.000s}";
        let within = tagged(&game(black_loses, "1-0"), "OverTime", "12.000");
        assert!(problem(&within, &context).contains("within the 19.100 s it had"), "{}", problem(&within, &context));
        assert_eq!(problem(&tagged(&game(black_loses, "1-0"), "OverTime", "19.500"), &context), "");
        // One [TimeControl] for both, as if there were no odds, is refused.
        let plain = pgn("new", "base", None, moves, "0-1", "time forfeit").replace("st=1", "10");
        assert!(problem(&tagged(&plain, "OverTime", "0.500"), &context).contains("[WhiteTimeControl] None"));
    }

    #[test]
    fn a_move_time_forfeit_needs_a_think_past_the_move_time() {
        let moves = "1. h2e2 {+0.10 0.900s} h9g7 {-0.10 1.000s}";
        let game = |over: &str| tagged(&pgn("new", "base", None, moves, "0-1", "time forfeit"), "OverTime", over);
        assert_eq!(problem(&game("1.5"), &CONTEXT), "");
        assert!(problem(&game("1.05"), &CONTEXT).contains("within"));
    }

    #[test]
    fn illegal_moves_count_only_when_the_rules_refuse_them() {
        let game = |claimed: Option<&str>| {
            let text = pgn("new", "base", None, "1. h2e2 h9g7", "0-1", "rules infraction");
            claimed.map_or(text.clone(), |mv| tagged(&text, "IllegalMove", mv))
        };
        assert_eq!(problem(&game(Some("h0h9")), &CONTEXT), "", "a horse cannot go there");
        assert_eq!(problem(&game(Some("nonsense")), &CONTEXT), "");
        assert!(problem(&game(Some("h0g2")), &CONTEXT).contains("is legal"));
        assert!(problem(&game(None), &CONTEXT).contains("without [IllegalMove]"));
    }

    #[test]
    fn adjudications_count_only_where_the_test_s_settings_end_the_game() {
        let resign = Adjudication { draw: None, resign: Some((1, 500)) };
        let conditions = Conditions { adjudication: resign, ..CONDITIONS.clone() };
        let context = PairContext { conditions: &conditions, ..CONTEXT };
        // Black scores itself lost after Red scored itself winning: Black resigns.
        let resigned = "1. h2e2 {+6.00 0.100s} h9g7 {-6.00 0.100s}";
        let game = |moves: &str, result: &str| pgn("new", "base", None, moves, result, "adjudication");
        assert_eq!(problem(&game(resigned, "1-0"), &context), "");
        assert!(problem(&game(resigned, "0-1"), &context).contains("neither"));
        assert!(problem(&game(resigned, "1/2-1/2"), &context).contains("neither"));
        // Scores that do not meet the setting, or no adjudication at all: refused.
        assert!(problem(&game("1. h2e2 {+6.00 0.100s} h9g7 {-4.00 0.100s}", "1-0"), &context).contains("neither"));
        let no_adjudication = Conditions { adjudication: Adjudication::default(), ..CONDITIONS.clone() };
        let none = PairContext { conditions: &no_adjudication, ..CONTEXT };
        assert!(problem(&game(resigned, "1-0"), &none).contains("neither"));
        // A game that goes on past the point where adjudication ended it.
        let played_on = "1. h2e2 {+6.00 0.100s} h9g7 {-6.00 0.100s} 2. h0g2 {+6.00 0.100s}";
        assert!(problem(&game(played_on, "1-0"), &context).contains("ended it at ply 2"));
        // The ply limit: a draw exactly there, never past it.
        let at_two = Conditions { max_plies: Some(2), ..no_adjudication.clone() };
        let limited = PairContext { conditions: &at_two, ..CONTEXT };
        assert_eq!(problem(&game("1. h2e2 h9g7", "1/2-1/2"), &limited), "");
        assert!(problem(&game("1. h2e2 h9g7", "1-0"), &limited).contains("neither"));
        assert!(problem(&game("1. h2e2 h9g7 2. h0g2", "1/2-1/2"), &limited).contains("past the test's limit of 2"));
    }

    #[test]
    fn every_ply_needs_its_note() {
        let game = |moves: &str| pgn("new", "base", None, moves, "1/2-1/2", "adjudication");
        assert!(problem(&game("1. h2e2 {+0.00 0.100s} h9g7"), &CONTEXT).contains("ply 2 has no note"));
        assert!(problem(&game("1. h2e2 {fast}"), &CONTEXT).contains("unreadable note 'fast'"));
        assert!(problem(&game("1. h2e2 {book}"), &CONTEXT).contains("opening's 0 plies"));
    }

    #[test]
    fn an_abandoned_game_is_lost_by_the_engine_it_names_on_that_engine_s_move() {
        let game = |moves: &str, result: &str, failed: Option<&str>| {
            let text = pgn("new", "base", None, moves, result, "abandoned");
            failed.map_or(text.clone(), |side| tagged(&text, "FailedEngine", side))
        };
        // Black's engine fails thinking on its first move: Red wins.
        assert_eq!(problem(&game("1. h2e2", "1-0", Some("black")), &CONTEXT), "");
        // Before any engine has moved, either may fail getting ready for the game.
        assert_eq!(problem(&game("", "0-1", Some("red")), &CONTEXT), "");
        assert_eq!(problem(&game("", "1-0", Some("black")), &CONTEXT), "");
        // No evidence, a side that is not one, a result for the failed side: refused.
        assert!(problem(&game("1. h2e2", "1-0", None), &CONTEXT).contains("abandoned without [FailedEngine]"));
        assert!(problem(&game("1. h2e2", "1-0", Some("base")), &CONTEXT).contains("a bad [FailedEngine] \"base\""));
        assert!(problem(&game("1. h2e2", "0-1", Some("black")), &CONTEXT).contains("the result says otherwise"));
        assert!(problem(&game("1. h2e2", "1/2-1/2", Some("black")), &CONTEXT).contains("the result says otherwise"));
        // Red's engine is not asked anything while Black thinks.
        let problem_text = problem(&game("1. h2e2", "0-1", Some("red")), &CONTEXT);
        assert!(problem_text.contains("Red's engine failed after ply 1, where Black was to move"), "{problem_text}");
        // Nor does an engine fail after adjudication or the ply limit ended the game.
        let drawn = problem(&game("1. h2e2 {+0.00 0.100s}", "1-0", Some("black")), &CONTEXT);
        assert!(drawn.contains("abandoned at ply 1, where adjudication had ended it"), "{drawn}");
        let at_one = Conditions { max_plies: Some(1), ..CONDITIONS.clone() };
        let limited = PairContext { conditions: &at_one, ..CONTEXT };
        let limit = problem(&game("1. h2e2", "1-0", Some("black")), &limited);
        assert!(limit.contains("abandoned at ply 1, where the ply limit had ended it"), "{limit}");
        // Inside the opening no engine has moved yet: the side not to move may fail.
        let opening = Opening {
            start: Position::startpos(),
            moves: vec![parse_uci(&Position::startpos(), "h2e2", Dialect::ZeroBased).unwrap()],
        };
        let book = PairContext { opening: Some(&BookOpening::Xiangqi(Box::new(opening.clone()))), ..CONTEXT };
        assert_eq!(problem(&game("1. h2e2 {book}", "0-1", Some("red")), &book), "");
    }

    /// The forfeits and infractions of a forger fare no better where the test's
    /// settings ended the game.
    #[test]
    fn no_forfeit_or_infraction_comes_where_adjudication_ended_the_game() {
        let moves = "1. h2e2 {+0.00 0.100s}";
        let forfeit = tagged(&pgn("new", "base", None, moves, "1-0", "time forfeit"), "OverTime", "5");
        assert!(problem(&forfeit, &CONTEXT).contains("time forfeit at ply 1, where adjudication had ended it"));
        let infraction = tagged(&pgn("new", "base", None, moves, "1-0", "rules infraction"), "IllegalMove", "h0h9");
        assert!(problem(&infraction, &CONTEXT).contains("rules infraction at ply 1, where adjudication had ended it"));
    }

    #[test]
    fn book_moves_are_noted_book_and_only_inside_the_opening() {
        let opening = Opening {
            start: Position::startpos(),
            moves: vec![parse_uci(&Position::startpos(), "h2e2", Dialect::ZeroBased).unwrap()],
        };
        let context = PairContext { opening: Some(&BookOpening::Xiangqi(Box::new(opening.clone()))), ..CONTEXT };
        let game = pgn("new", "base", None, "1. h2e2 {book} h9g7 {+0.00 0.100s}", "1/2-1/2", "adjudication");
        let other = pgn("base", "new", None, "1. h2e2 {book} h9g7 {+0.00 0.100s}", "1/2-1/2", "adjudication");
        assert_eq!(check_pair([&game, &other], &context).map(|c| c.map(|g| g.points)), Ok([1, 1]));
        let engine_in_book =
            pgn("new", "base", None, "1. h2e2 {+0.10 0.100s} h9g7 {+0.00 0.100s}", "1/2-1/2", "adjudication");
        assert!(check_pair([&engine_in_book, &other], &context).unwrap_err().problem.contains("opening's 1 plies"));
    }
}
