//! A chunk's games checked against the self-play unit they claim to be: each game
//! replayed from the opening self-play gives its number, every record's position,
//! move and result followed, and its end ruled (see the module above for how far).

use crate::xiangqi::Position;
use crate::xiangqi::data::{ChunkError, GameProblem, Record, Records, XiongqiRecord};
use crate::xiangqi::rules::{Outcome, Referee, Ruling};
use crate::xiangqi::selfplay::{PlaySettings, random_opening};
use crate::xiongqi;
use std::collections::HashMap;
use std::ops::Range;

impl Records {
    /// Checks that the records are the games of a self-play unit of `games` games
    /// played by `settings` (game `g` seeded `settings.seed + g`): see the module
    /// documentation for what is checked, and how far for Xiongqi. The engine's search
    /// is not played again, so the scores and the choice of best moves are not checked.
    pub fn check_games(&self, settings: &PlaySettings, games: usize) -> Result<(), ChunkError> {
        match self {
            Records::Xiangqi(records) => check_xiangqi_games(records, settings, games),
            Records::Xiongqi(records) => check_xiongqi_games(records, settings, games),
        }
    }
}

/// A problem of the game's record at `offset` from its first.
pub(super) type AtRecord = (usize, GameProblem);

/// Splits a chunk's records, by their plies, into games: a game starts at ply
/// `random_plies`, and each of its next records is one ply on.
fn game_spans(plies: impl Iterator<Item = u16>, random_plies: usize) -> Result<Vec<Range<usize>>, ChunkError> {
    let mut spans: Vec<Range<usize>> = Vec::new();
    let mut previous = 0;
    for (index, ply) in plies.enumerate() {
        let error = |problem| {
            let (game, first) = spans.last().map_or((0, 0), |span| (spans.len() - 1, span.start));
            Err(ChunkError::Game { game, first, record: index, problem })
        };
        if usize::from(ply) == random_plies {
            spans.push(index..index + 1);
        } else if spans.is_empty() {
            return error(GameProblem::Start { ply, random_plies });
        } else if u32::from(ply) != u32::from(previous) + 1 {
            return error(GameProblem::PlyGap { previous, ply });
        } else {
            spans.last_mut().expect("a game").end = index + 1;
        }
        previous = ply;
    }
    Ok(spans)
}

/// Checks a record's ply against the move limit and its result against the game's
/// first record's.
fn check_record(ply: u16, result: Outcome, first: Outcome, max_plies: usize) -> Result<(), GameProblem> {
    if usize::from(ply) >= max_plies {
        return Err(GameProblem::PastMoveLimit { ply, max_plies });
    }
    if result != first {
        return Err(GameProblem::MixedResults { result, first });
    }
    Ok(())
}

fn ruling_text(ruling: &Ruling) -> String {
    format!("{} by {} ({})", ruling.outcome.pgn(), ruling.reason, ruling.article)
}

/// Checks a game's `result` against its end, `plies` played: the ruling, or a draw at
/// the move limit; a game neither ruled over nor at the limit had not ended.
fn check_end(ruling: Option<Ruling>, plies: usize, max_plies: usize, result: Outcome) -> Result<(), GameProblem> {
    match ruling {
        Some(ruling) if ruling.outcome == result => Ok(()),
        Some(ruling) => Err(GameProblem::WrongResult { claimed: result, end: ruling_text(&ruling) }),
        None if plies < max_plies => Err(GameProblem::Unfinished { plies, max_plies }),
        None if result == Outcome::Draw => Ok(()),
        None => Err(GameProblem::WrongResult {
            claimed: result,
            end: format!("a draw at the move limit of {max_plies} plies"),
        }),
    }
}

/// Whether two positions have the same pieces on the same points and side to move
/// (the move counters, which records do not hold, aside).
pub(super) fn same_board(a: &Position, b: &Position) -> bool {
    a.hash() == b.hash()
        && a.side_to_move() == b.side_to_move()
        && a.occupied() == b.occupied()
        && a.occupied().all(|sq| a.piece_at(sq) == b.piece_at(sq))
}

/// Where the unit's games that go on after their random plies (the others record
/// nothing) stand when the engine takes over: the distinct openings, each with its
/// referee and the number of the unit's games playing it that no game of the chunk
/// has matched yet, by the hash of their last position.
pub(super) struct Openings(HashMap<u64, Vec<(Referee, usize)>>);

impl Openings {
    fn of(settings: &PlaySettings, games: usize) -> Self {
        let mut openings: HashMap<u64, Vec<(Referee, usize)>> = HashMap::new();
        for game in 0..games {
            let referee = random_opening(settings, game);
            if referee.ruling().is_some() || referee.moves().count() >= settings.max_plies {
                continue;
            }
            let same_position = openings.entry(referee.position().hash()).or_default();
            match same_position.iter_mut().find(|(other, _)| other.moves().eq(referee.moves())) {
                Some((_, unmatched)) => *unmatched += 1,
                None => same_position.push((referee, 1)),
            }
        }
        Openings(openings)
    }
}

fn check_xiangqi_games(records: &[Record], settings: &PlaySettings, games: usize) -> Result<(), ChunkError> {
    let spans = game_spans(records.iter().map(|r| r.ply), settings.random_plies)?;
    let mut openings = Openings::of(settings, games);
    for (game, span) in spans.into_iter().enumerate() {
        let played = &records[span.clone()];
        openings.take(&played[0].position, |referee| replay_xiangqi(played, referee, settings.max_plies)).map_err(
            |(offset, problem)| ChunkError::Game { game, first: span.start, record: span.start + offset, problem },
        )?;
    }
    match openings.unmatched() {
        0 => Ok(()),
        missing => Err(ChunkError::MissingGames { missing, games }),
    }
}

/// Replays a game's records after its opening, followed by `referee`.
fn replay_xiangqi(records: &[Record], mut referee: Referee, max_plies: usize) -> Result<(), AtRecord> {
    let first = records[0].result;
    for (offset, record) in records.iter().enumerate() {
        if let Some(ruling) = referee.ruling() {
            return Err((offset, GameProblem::AfterTheEnd { ruling: ruling_text(&ruling) }));
        }
        check_record(record.ply, record.result, first, max_plies).map_err(|problem| (offset, problem))?;
        if !same_board(&record.position, referee.position()) {
            let previous_move = records[offset - 1].best_move.to_string();
            return Err((offset, GameProblem::NotChained { previous_move }));
        }
        let mv = record.best_move;
        referee.play(mv).map_err(|e| (offset, GameProblem::Illegal { mv: mv.to_string(), reason: e.to_string() }))?;
    }
    let last = records.len() - 1;
    check_end(referee.ruling(), usize::from(records[last].ply) + 1, max_plies, first).map_err(|problem| (last, problem))
}

fn same_xiongqi_board(a: &xiongqi::Position, b: &xiongqi::Position) -> bool {
    a.side_to_move() == b.side_to_move() && xiongqi::Square::all().all(|sq| a.piece_at(sq) == b.piece_at(sq))
}

fn check_xiongqi_games(records: &[XiongqiRecord], settings: &PlaySettings, games: usize) -> Result<(), ChunkError> {
    let spans = game_spans(records.iter().map(|r| r.ply), settings.random_plies)?;
    if spans.len() > games {
        return Err(ChunkError::TooManyGames { found: spans.len(), games });
    }
    for (game, span) in spans.into_iter().enumerate() {
        replay_xiongqi(&records[span.clone()], settings.max_plies).map_err(|(offset, problem)| ChunkError::Game {
            game,
            first: span.start,
            record: span.start + offset,
            problem,
        })?;
    }
    Ok(())
}

/// Replays a Xiongqi game's records from its first (see the module documentation).
fn replay_xiongqi(records: &[XiongqiRecord], max_plies: usize) -> Result<(), AtRecord> {
    let mut game = xiongqi::Game::new(records[0].position.clone());
    let first = records[0].result;
    let mut captured = false;
    for (offset, record) in records.iter().enumerate() {
        if let Some(ruling) = game.ruling() {
            return Err((offset, GameProblem::AfterTheEnd { ruling: ruling_text(&ruling) }));
        }
        check_record(record.ply, record.result, first, max_plies).map_err(|problem| (offset, problem))?;
        if !same_xiongqi_board(&record.position, game.position()) {
            let previous_move = records[offset - 1].best_move.to_string();
            return Err((offset, GameProblem::NotChained { previous_move }));
        }
        let mv = record.best_move;
        captured |= game.position().piece_at(mv.to).is_some();
        game.play(mv).map_err(|e| (offset, GameProblem::Illegal { mv: mv.to_string(), reason: e.to_string() }))?;
    }
    let last = records.len() - 1;
    let plies = usize::from(records[last].ply) + 1;
    // A win the replay rules the worker's game ruled too: the opening's positions only
    // take moves away from the side to move.
    let ruling = game.ruling();
    if captured || ruling.is_some_and(|ruling| ruling.outcome != Outcome::Draw) {
        return check_end(ruling, plies, max_plies, first).map_err(|problem| (last, problem));
    }
    let to_move = game.position().side_to_move();
    if first == Outcome::Win(to_move) {
        let end = "without a capture among the recorded moves, only a draw or a win for the side that moved \
                   last can have ended the game"
            .to_owned();
        return Err((last, GameProblem::WrongResult { claimed: first, end }));
    }
    Ok(())
}

impl Openings {
    /// Matches a game starting at `position` with an unmatched opening that `replay`
    /// accepts. Games of different openings may meet at one position with different
    /// histories, which the referee's rulings depend on: each is tried.
    fn take(&mut self, position: &Position, replay: impl Fn(Referee) -> Result<(), AtRecord>) -> Result<(), AtRecord> {
        let mut refused = None;
        for (referee, unmatched) in self.0.get_mut(&position.hash()).into_iter().flatten() {
            if *unmatched == 0 || !same_board(referee.position(), position) {
                continue;
            }
            match replay(referee.clone()) {
                Ok(()) => {
                    *unmatched -= 1;
                    return Ok(());
                }
                Err(problem) => {
                    refused.get_or_insert(problem);
                }
            }
        }
        Err(refused.unwrap_or((0, GameProblem::UnknownOpening)))
    }

    fn unmatched(&self) -> usize {
        self.0.values().flatten().map(|(_, unmatched)| unmatched).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::color::Color;
    use crate::xiangqi::data::{XiongqiRecord, read_any_chunk, write_chunk, write_xiongqi_chunk};
    use crate::xiangqi::rules::{Reason, RefereeConfig, RuleSet};
    use crate::xiangqi::search::Shared;
    use crate::xiangqi::selfplay::{PlayedGame, play_game};

    fn play_settings(rules: RuleSet, seed: u64, max_plies: usize) -> PlaySettings {
        PlaySettings { nodes: 48, random_plies: 6, seed, rules, max_plies, network: None }
    }

    /// The records of a unit's `games` games, as the worker plays them.
    fn unit(settings: &PlaySettings, games: usize) -> Vec<Vec<Record>> {
        (0..games).map(|game| play_game(settings, game, &Shared::new(1)).records).collect()
    }

    /// How a game ended: the referee's ruling, none at the move limit.
    fn ending(rules: RuleSet, game: &PlayedGame) -> Option<String> {
        let mut referee = Referee::new(Position::startpos(), RefereeConfig::for_rules(rules));
        for &mv in &game.moves {
            referee.play(mv).unwrap();
        }
        referee.ruling().map(|ruling| ruling.reason.to_string())
    }

    /// A unit of 24 games under WXF of which some end in checkmate, others at the move
    /// limit (80 plies), and how each ended.
    fn wxf_unit() -> (PlaySettings, Vec<Vec<Record>>, Vec<Option<String>>) {
        let settings = play_settings(RuleSet::Wxf, 5, 80);
        let played: Vec<_> = (0..24).map(|game| play_game(&settings, game, &Shared::new(1))).collect();
        let endings = played.iter().map(|game| ending(RuleSet::Wxf, game)).collect();
        (settings, played.into_iter().map(|game| game.records).collect(), endings)
    }

    fn check(settings: &PlaySettings, games: usize, unit: &[Vec<Record>]) -> Result<(), ChunkError> {
        Records::Xiangqi(unit.concat()).check_games(settings, games)
    }

    /// The problem `check` finds, at which game and record of the chunk.
    fn problem(settings: &PlaySettings, games: usize, unit: &[Vec<Record>]) -> (usize, usize, GameProblem) {
        match check(settings, games, unit) {
            Err(ChunkError::Game { game, record, problem, .. }) => (game, record, problem),
            other => panic!("a game's problem expected, not {other:?}"),
        }
    }

    #[test]
    fn the_games_the_worker_plays_pass_under_every_rule_set_in_any_order() {
        let mut endings = std::collections::BTreeSet::new();
        for rules in [RuleSet::Wxf, RuleSet::Asian, RuleSet::Cxq, RuleSet::Computer] {
            for seed in [1, 2] {
                let settings = PlaySettings { random_plies: 8, ..play_settings(rules, seed, 300) };
                let played: Vec<_> = (0..32).map(|game| play_game(&settings, game, &Shared::new(1))).collect();
                endings.extend(played.iter().map(|game| ending(rules, game)));
                let mut games: Vec<Vec<Record>> = played.into_iter().map(|game| game.records).collect();
                let records = read_any_chunk(&write_chunk(&games.concat())).unwrap();
                assert_eq!(records.check_games(&settings, 32), Ok(()), "{rules:?}, seed {seed}");
                games.reverse();
                assert_eq!(check(&settings, 32, &games), Ok(()), "{rules:?}, seed {seed}, games reversed");
            }
        }
        let reasons =
            [Reason::Checkmate, Reason::Stalemate, Reason::Repetition, Reason::NaturalMoveCount, Reason::CxqNoProgress];
        assert!(reasons.iter().all(|&reason| endings.contains(&Some(reason.to_string()))), "{endings:?}");
    }

    #[test]
    fn a_record_whose_position_does_not_follow_is_refused() {
        let settings = play_settings(RuleSet::Wxf, 5, 80);
        let mut games = unit(&settings, 3);
        // Record 5 of game 1 replaced by the game's record 3, its ply kept.
        let forged = Record { ply: games[1][5].ply, ..games[1][3].clone() };
        games[1][5] = forged;
        let first = games[0].len();
        let (game, record, problem) = problem(&settings, 3, &games);
        assert_eq!((game, record), (1, first + 5));
        assert_eq!(problem, GameProblem::NotChained { previous_move: games[1][4].best_move.to_string() });
        let message = check(&settings, 3, &games).unwrap_err().to_string();
        assert!(message.starts_with(&format!("game 1 (from record {first}), record {}: its position", first + 5)));
    }

    #[test]
    fn a_best_move_that_is_not_legal_is_refused() {
        let settings = play_settings(RuleSet::Wxf, 5, 80);
        let mut games = unit(&settings, 2);
        // The next record's move: the other side's piece.
        games[0][4].best_move = games[0][5].best_move;
        let (game, record, problem) = problem(&settings, 2, &games);
        assert_eq!((game, record), (0, 4));
        assert!(matches!(problem, GameProblem::Illegal { .. }), "{problem}");
    }

    #[test]
    fn a_result_changed_on_one_record_is_refused() {
        let settings = play_settings(RuleSet::Wxf, 5, 80);
        let mut games = unit(&settings, 2);
        let result = games[1][0].result;
        let other = if result == Outcome::Draw { Outcome::Win(Color::Red) } else { Outcome::Draw };
        games[1][7].result = other;
        let (game, record, problem) = problem(&settings, 2, &games);
        assert_eq!((game, record), (1, games[0].len() + 7));
        assert_eq!(problem, GameProblem::MixedResults { result: other, first: result });
    }

    #[test]
    fn a_win_claimed_for_a_game_drawn_at_the_move_limit_is_refused() {
        let (settings, mut games, endings) = wxf_unit();
        assert_eq!(check(&settings, 24, &games), Ok(()));
        let drawn = endings.iter().position(Option::is_none).expect("a game at the move limit");
        for record in &mut games[drawn] {
            record.result = Outcome::Win(Color::Black);
        }
        let (game, record, problem) = problem(&settings, 24, &games);
        let last = games[..=drawn].iter().map(Vec::len).sum::<usize>() - 1;
        assert_eq!((game, record), (drawn, last));
        let end = "a draw at the move limit of 80 plies".to_owned();
        assert_eq!(problem, GameProblem::WrongResult { claimed: Outcome::Win(Color::Black), end });
    }

    #[test]
    fn a_checkmate_credited_to_the_loser_is_refused() {
        let (settings, mut games, endings) = wxf_unit();
        let mated = endings.iter().position(|e| e.as_deref() == Some("checkmate")).expect("a checkmate");
        let Outcome::Win(winner) = games[mated][0].result else { panic!("a checkmate drawn") };
        for record in &mut games[mated] {
            record.result = Outcome::Win(!winner);
        }
        let (game, record, problem) = problem(&settings, 24, &games);
        assert_eq!((game, record), (mated, games[..=mated].iter().map(Vec::len).sum::<usize>() - 1));
        let GameProblem::WrongResult { end, .. } = &problem else { panic!("{problem}") };
        assert!(end.contains("by checkmate"), "{problem}");
    }

    #[test]
    fn games_missing_repeated_cut_short_or_of_another_unit_are_refused() {
        let settings = play_settings(RuleSet::Wxf, 5, 80);
        let games = unit(&settings, 3);
        assert_eq!(check(&settings, 3, &games[..2]), Err(ChunkError::MissingGames { missing: 1, games: 3 }));
        // Games whose random plies reach the move limit record nothing and are not missed.
        let short = PlaySettings { max_plies: 6, ..settings.clone() };
        assert_eq!(check(&short, 3, &[]), Ok(()));
        let repeated = [games[0].clone(), games[1].clone(), games[1].clone()];
        let first = games[0].len() + games[1].len();
        assert_eq!(problem(&settings, 3, &repeated), (2, first, GameProblem::UnknownOpening));
        let other_unit = PlaySettings { seed: 100, ..settings.clone() };
        assert_eq!(problem(&other_unit, 3, &games[2..]).2, GameProblem::UnknownOpening);
        let mut cut = games.clone();
        cut[0].truncate(10);
        assert_eq!(problem(&settings, 3, &cut).2, GameProblem::Unfinished { plies: 16, max_plies: 80 });
        // A game must start after the random plies, its plies rising by one.
        let mut late = games.clone();
        late[0].remove(0);
        assert_eq!(problem(&settings, 3, &late), (0, 0, GameProblem::Start { ply: 7, random_plies: 6 }));
        let mut gap = games;
        gap[0].remove(3);
        assert_eq!(problem(&settings, 3, &gap), (0, 3, GameProblem::PlyGap { previous: 8, ply: 10 }));
    }

    /// A Xiongqi game as the worker plays it: random plies seeded `seed`, then the search
    /// at a few nodes, every searched position recorded.
    fn xiongqi_game(seed: u64, random_plies: usize, max_plies: usize) -> Vec<XiongqiRecord> {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let mut game = xiongqi::Game::new(xiongqi::Position::startpos());
        let limits = crate::xiangqi::search::limits::Limits { nodes: Some(48), ..Default::default() };
        let never = std::sync::atomic::AtomicBool::new(false);
        let mut records = Vec::new();
        let mut plies = 0;
        while game.ruling().is_none() && plies < max_plies {
            let mv = if plies < random_plies {
                let legal = game.legal_moves();
                legal[rng.random_range(0..legal.len())]
            } else {
                let result = xiongqi::search::search(&mut game, &limits, &never, std::time::Duration::ZERO);
                let best = result.best.expect("a game not yet ruled has a legal move");
                let (position, ply) = (game.position().clone(), plies as u16);
                records.push(XiongqiRecord { position, score: 0, best_move: best, ply, result: Outcome::Draw });
                best
            };
            game.play(mv).unwrap();
            plies += 1;
        }
        let result = game.ruling().map_or(Outcome::Draw, |ruling| ruling.outcome);
        records.iter_mut().for_each(|record| record.result = result);
        records
    }

    #[test]
    fn xiongqi_games_are_checked_along_their_records_and_at_their_end() {
        let settings = play_settings(RuleSet::Wxf, 0, 120);
        let games: Vec<Vec<XiongqiRecord>> = (0..6).map(|seed| xiongqi_game(seed, 6, 120)).collect();
        let check = |games: &[Vec<XiongqiRecord>]| Records::Xiongqi(games.concat()).check_games(&settings, 6);
        let chunk = read_any_chunk(&write_xiongqi_chunk(&games.concat())).unwrap();
        assert_eq!(chunk.check_games(&settings, 6), Ok(()));
        assert_eq!(check(&games[..3]), Ok(()), "the worker's openings are not replayed: games may be missing");
        assert_eq!(
            Records::Xiongqi(games.concat()).check_games(&settings, 5),
            Err(ChunkError::TooManyGames { found: 6, games: 5 })
        );
        let problem = |games: &[Vec<XiongqiRecord>]| match check(games) {
            Err(ChunkError::Game { game, record, problem, .. }) => (game, record, problem),
            other => panic!("a game's problem expected, not {other:?}"),
        };
        let mut forged = games.clone();
        forged[0][5] = XiongqiRecord { ply: forged[0][5].ply, ..forged[0][3].clone() };
        assert!(matches!(problem(&forged), (0, 5, GameProblem::NotChained { .. })));
        let mut forged = games.clone();
        forged[1][2].result =
            if games[1][0].result == Outcome::Draw { Outcome::Win(Color::Red) } else { Outcome::Draw };
        assert!(matches!(problem(&forged), (1, _, GameProblem::MixedResults { .. })));
        // A win for the side to move after the last record is no way a game ends.
        let mut forged = games.clone();
        let last = forged[2].last().unwrap().position.side_to_move();
        forged[2].iter_mut().for_each(|record| record.result = Outcome::Win(!last));
        assert!(matches!(problem(&forged), (2, _, GameProblem::WrongResult { .. })));
    }
}
