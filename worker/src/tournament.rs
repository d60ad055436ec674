//! Tournaments on one machine: many engines, a round robin (Berger tables, single or
//! double) or a gauntlet, games played several at once, each game slot keeping its
//! engines running between games; placings by Articles 9 and 10 of the World Xiangqi
//! Rules ([`xq_tournament`]) and ratings over all games ([`xq_stats::ratings`]).
//!
//! Openings: the games of a pairing share one (so that in a double round robin, or a
//! gauntlet with an even number of games per opponent, each side plays it with both
//! colours); pairing `i` of the schedule plays opening `i` modulo their number.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::channel;

use xq_engine::color::{ByColor, Color};
use xq_engine::xiangqi::rules::Outcome;
use xq_stats::ratings::{RatedGame, Ratings, event_ratings};
use xq_tournament::pairing::{Pairing, gauntlet, knockout_winner, next_knockout_round, round_robin};
use xq_tournament::scoring::{GameResult, Points};
use xq_tournament::standings::{Game, Standing, System, standings_with_byes};
use xq_tournament::swiss::{Entrant, pair_round, record_round};

use crate::engine_process::{EngineConfig, EngineProcess};
use crate::game::{GameRecord, GameSettings, Start, play_game};
use crate::match_runner::MatchError;

/// Who plays whom.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Every engine against every other, once or twice (colours swapped).
    RoundRobin { double: bool },
    /// The first `challengers` engines against each of the others,
    /// `games_per_opponent` times, colours alternating.
    Gauntlet { challengers: usize, games_per_opponent: usize },
    /// A Swiss event of `rounds` rounds, each paired from the results before it
    /// ([`run_swiss`]; [`schedule`] has no games for it).
    Swiss { rounds: usize },
    /// A knockout: matches of `games_per_match` games, ties broken by pairs of faster
    /// games ([`run_knockout`]; [`schedule`] has no games for it).
    Knockout { games_per_match: usize },
}

/// A tournament to play.
#[derive(Clone, Debug)]
pub struct TournamentSettings {
    /// The engines; their names must differ.
    pub engines: Vec<EngineConfig>,
    pub format: Format,
    /// Where games start.
    pub openings: Vec<Start>,
    /// How each game is played.
    pub game: GameSettings,
    /// Games played at once.
    pub concurrency: usize,
    /// How games score (Article 9.1).
    pub points: Points,
}

/// A game of the schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scheduled {
    /// Its number in the schedule, from 0.
    pub number: usize,
    /// The round, from 1.
    pub round: usize,
    pub pairing: Pairing,
    /// The opening, by index into the openings.
    pub opening: usize,
}

/// The games in play order.
pub fn schedule(engines: usize, format: Format, openings: usize) -> Vec<Scheduled> {
    let openings = openings.max(1);
    let mut games = Vec::new();
    match format {
        Format::RoundRobin { double } => {
            let rounds = round_robin(engines, double);
            // A pairing's opening, by its place in the first cycle.
            let mut opening_of: HashMap<(usize, usize), usize> = HashMap::new();
            for (index, round) in rounds.iter().enumerate() {
                for pairing in &round.games {
                    let key = (pairing.red.min(pairing.black), pairing.red.max(pairing.black));
                    let next = opening_of.len();
                    let opening = *opening_of.entry(key).or_insert(next) % openings;
                    games.push(Scheduled { number: games.len(), round: index + 1, pairing: *pairing, opening });
                }
            }
        }
        Format::Gauntlet { challengers, games_per_opponent } => {
            let field = engines.saturating_sub(challengers);
            for (index, pairing) in gauntlet(challengers, field, games_per_opponent).into_iter().enumerate() {
                let per_repeat = challengers * field;
                let round = index / per_repeat.max(1) + 1;
                let opening = (index % per_repeat.max(1)) % openings;
                games.push(Scheduled { number: games.len(), round, pairing, opening });
            }
        }
        Format::Swiss { .. } | Format::Knockout { .. } => {}
    }
    games
}

/// A played game of the event.
#[derive(Clone, Debug)]
pub struct Played {
    pub scheduled: Scheduled,
    pub record: GameRecord,
}

impl Played {
    /// Red's result.
    pub fn red_result(&self) -> GameResult {
        match self.record.outcome {
            Outcome::Win(Color::Red) => GameResult::Win,
            Outcome::Win(Color::Black) => GameResult::Loss,
            Outcome::Draw => GameResult::Draw,
        }
    }
}

/// Standings and ratings of the games played so far.
#[derive(Clone, Debug)]
pub struct Table {
    pub standings: Vec<Standing>,
    /// `None` until the games connect every engine.
    pub ratings: Option<Ratings>,
    /// Virtual draws per pair the ratings needed (an engine won or lost every game), or 0.
    pub rating_prior: f64,
}

/// The placings and ratings after `played` (and a Swiss event's `byes`, a win's points
/// each).
pub fn table(engines: usize, played: &[Played], byes: &[usize], system: System, points: Points) -> Table {
    let games: Vec<Game> = played
        .iter()
        .map(|p| Game { red: p.scheduled.pairing.red, black: p.scheduled.pairing.black, result: p.red_result() })
        .collect();
    let rated: Vec<RatedGame> = games
        .iter()
        .map(|g| RatedGame { first: g.red, second: g.black, score: points.of(g.result) / points.of(GameResult::Win) })
        .collect();
    let (ratings, rating_prior) = event_ratings(engines, &rated).map_or((None, 0.0), |(r, prior)| (Some(r), prior));
    Table { standings: standings_with_byes(engines, &games, byes, system, points), ratings, rating_prior }
}

/// The crosstable: a line per engine in placing order with its points, games,
/// wins/draws/losses, tie-breaks, rating and its points against each other engine.
pub fn crosstable(names: &[String], played: &[Played], table: &Table, points: Points) -> String {
    let width = names.iter().map(String::len).max().unwrap_or(4).max(6);
    let mut text =
        format!("{:>3} {:<width$} {:>6} {:>5} {:>9} {:>14}", "#", "engine", "points", "games", "W-D-L", "Elo");
    for line in &table.standings {
        let _ = write!(text, " {:>4}", format!("{}", line.player + 1));
    }
    text.push('\n');
    for line in &table.standings {
        let elo = table
            .ratings
            .as_ref()
            .map_or("-".to_owned(), |r| format!("{:+.0} ± {:.0}", r.elo[line.player], r.error[line.player]));
        let _ = write!(
            text,
            "{:>3} {:<width$} {:>6} {:>5} {:>9} {:>14}",
            line.place,
            names[line.player],
            line.points,
            line.games,
            format!("{}-{}-{}", line.wins, line.draws, line.losses),
            elo
        );
        for other in &table.standings {
            let cell = if other.player == line.player {
                "x".to_owned()
            } else {
                let mut met = false;
                let mut against = 0.0;
                for p in played {
                    let g = p.scheduled.pairing;
                    if g.red == line.player && g.black == other.player {
                        (met, against) = (true, against + points.of(p.red_result()));
                    } else if g.black == line.player && g.red == other.player {
                        (met, against) = (true, against + points.of(p.red_result().reversed()));
                    }
                }
                if met { format!("{against}") } else { ".".to_owned() }
            };
            let _ = write!(text, " {cell:>4}");
        }
        text.push('\n');
    }
    if table.rating_prior > 0.0 {
        let _ = writeln!(
            text,
            "Elo with {} virtual draw(s) between every pair that met: an engine won or lost every game",
            table.rating_prior
        );
    }
    text
}

fn start(config: &EngineConfig) -> Result<EngineProcess, MatchError> {
    EngineProcess::start(config).map_err(|error| MatchError::Engine { name: config.name.clone(), error })
}

/// Plays the tournament's `games` (all of [`schedule`]'s, or those left of an event
/// resumed); `on_game` sees each game as it ends with the games so far, and may stop
/// the event by returning false. Returns the games played, in the order they ended.
pub fn run_tournament(
    settings: &TournamentSettings,
    games: &[Scheduled],
    mut on_game: impl FnMut(&Played, &[Played]) -> bool,
) -> Result<Vec<Played>, MatchError> {
    if settings.openings.is_empty() {
        return Err(MatchError::NoOpening(0));
    }
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let (sender, receiver) = channel::<Result<Played, MatchError>>();
    let mut played = Vec::with_capacity(games.len());
    std::thread::scope(|scope| {
        for _ in 0..settings.concurrency.max(1).min(games.len().max(1)) {
            let sender = sender.clone();
            let (next, stop) = (&next, &stop);
            scope.spawn(move || {
                // This slot's running engines, by index.
                let mut running: HashMap<usize, EngineProcess> = HashMap::new();
                loop {
                    let index = next.fetch_add(1, Ordering::Relaxed);
                    if index >= games.len() || stop.load(Ordering::Relaxed) {
                        return;
                    }
                    let scheduled = games[index];
                    let sides = [scheduled.pairing.red, scheduled.pairing.black];
                    let mut pair = Vec::with_capacity(2);
                    for engine in sides {
                        let process = match running.remove(&engine) {
                            Some(process) => Ok(process),
                            None => start(&settings.engines[engine]),
                        };
                        match process {
                            Ok(process) => pair.push(process),
                            Err(error) => {
                                let _ = sender.send(Err(error));
                                return;
                            }
                        }
                    }
                    let [mut red, mut black] = <[EngineProcess; 2]>::try_from(pair).ok().expect("two engines");
                    let opening = &settings.openings[scheduled.opening % settings.openings.len()];
                    let record = play_game(ByColor { red: &mut red, black: &mut black }, opening, &settings.game);
                    // An engine that failed is started afresh for its next game.
                    let failed = record.failure.as_ref().map(|(color, _)| *color);
                    for (color, engine, process) in [(Color::Red, sides[0], red), (Color::Black, sides[1], black)] {
                        if failed == Some(color) {
                            process.quit();
                        } else {
                            running.insert(engine, process);
                        }
                    }
                    if sender.send(Ok(Played { scheduled, record })).is_err() {
                        return;
                    }
                }
            });
        }
        drop(sender);
        for message in receiver {
            match message {
                Ok(game) => {
                    played.push(game);
                    let last = played.last().expect("just pushed");
                    if !on_game(last, &played) {
                        stop.store(true, Ordering::Relaxed);
                    }
                }
                Err(error) => {
                    stop.store(true, Ordering::Relaxed);
                    return Err(error);
                }
            }
        }
        Ok(played)
    })
}

/// Plays a Swiss event of `rounds` rounds: each round is paired from the results
/// before it ([`xq_tournament::swiss`]), then its games are played at once. `on_game`
/// sees each game with every game of the event so far and the byes so far (this
/// round's included). Returns the games and the byes
/// (a player per round of an odd field, scoring a win's points). An event whose
/// players have met too often to pair another round ends there.
pub fn run_swiss(
    settings: &TournamentSettings,
    rounds: usize,
    mut on_game: impl FnMut(&Played, &[Played], &[usize]) -> bool,
) -> Result<(Vec<Played>, Vec<usize>), MatchError> {
    let mut entrants = vec![Entrant::default(); settings.engines.len()];
    let (mut played, mut byes): (Vec<Played>, Vec<usize>) = (Vec::new(), Vec::new());
    let openings = settings.openings.len().max(1);
    for round_index in 0..rounds {
        let Some(round) = pair_round(&entrants) else { break };
        let games: Vec<Scheduled> = round
            .games
            .iter()
            .enumerate()
            .map(|(i, &pairing)| Scheduled {
                number: played.len() + i,
                round: round_index + 1,
                pairing,
                opening: (played.len() + i) % openings,
            })
            .collect();
        byes.extend(round.bye);
        let mut stopped = false;
        let before = played.clone();
        let results = run_tournament(settings, &games, |game, so_far| {
            let all: Vec<Played> = before.iter().chain(so_far).cloned().collect();
            let go_on = on_game(game, &all, &byes);
            stopped |= !go_on;
            go_on
        })?;
        // Red's and Black's points in each game, in the round's order.
        let points: Vec<(f64, f64)> = games
            .iter()
            .map(|g| {
                let result = results.iter().find(|p| p.scheduled.number == g.number).map(Played::red_result);
                let red = result.map_or(0.0, |r| settings.points.of(r));
                let black = result.map_or(0.0, |r| settings.points.of(r.reversed()));
                (red, black)
            })
            .collect();
        record_round(&mut entrants, &round, &points, settings.points.of(GameResult::Win));
        played.extend(results);
        if stopped {
            break;
        }
    }
    Ok((played, byes))
}

/// A knockout match as it was decided.
#[derive(Clone, Debug, PartialEq)]
pub struct KnockoutMatch {
    /// The round, from 1 (the final is the last).
    pub round: usize,
    /// The higher seed and the lower one (`None`: a bye).
    pub players: (usize, Option<usize>),
    /// Who goes on.
    pub winner: usize,
    /// Points of each in the match's regular games, then in its tie-break games.
    pub points: (f64, f64),
    pub tie_break_points: (f64, f64),
    /// Tie-break games played.
    pub tie_break_games: usize,
    /// Still tied after every tie-break pair: the higher seed went on.
    pub by_seed: bool,
}

/// Plays games of `matches` (each `(higher seed, lower seed)`) `count` at a time in
/// pairs of colours, from opening `first_opening` on; returns each match's points.
fn play_matches(
    settings: &TournamentSettings,
    matches: &[(usize, usize)],
    (round, count, first_opening): (usize, usize, usize),
    played: &mut Vec<Played>,
    on_game: &mut impl FnMut(&Played, &[Played]) -> bool,
) -> Result<(Vec<(f64, f64)>, bool), MatchError> {
    let mut games = Vec::new();
    for (index, &(a, b)) in matches.iter().enumerate() {
        for game in 0..count {
            let pairing =
                if game.is_multiple_of(2) { Pairing { red: a, black: b } } else { Pairing { red: b, black: a } };
            let opening = (first_opening + index * count.div_ceil(2) + game / 2) % settings.openings.len().max(1);
            games.push(Scheduled { number: played.len() + games.len(), round, pairing, opening });
        }
    }
    let before = played.clone();
    let mut stopped = false;
    let results = run_tournament(settings, &games, |game, so_far| {
        let all: Vec<Played> = before.iter().chain(so_far).cloned().collect();
        let go_on = on_game(game, &all);
        stopped |= !go_on;
        go_on
    })?;
    let points = matches
        .iter()
        .map(|&(a, b)| {
            let mut points = (0.0, 0.0);
            for p in results.iter().filter(|p| [p.scheduled.pairing.red, p.scheduled.pairing.black].contains(&a)) {
                let red = settings.points.of(p.red_result());
                let black = settings.points.of(p.red_result().reversed());
                let (for_a, for_b) = if p.scheduled.pairing.red == a { (red, black) } else { (black, red) };
                debug_assert!(p.scheduled.pairing.red == b || p.scheduled.pairing.black == b);
                points = (points.0 + for_a, points.1 + for_b);
            }
            points
        })
        .collect();
    played.extend(results);
    Ok((points, stopped))
}

/// Plays a knockout (Article 10.1): the bracket of [`xq_tournament::pairing::
/// knockout_bracket`], matches of `games_per_match` games (colours alternating, one
/// opening a pair of games), a tied match going to pairs of games at `tie_break`
/// (a faster time control), at most `tie_break_pairs` of them, after which the higher
/// seed goes on. Returns the games and the matches in the order they were decided.
pub fn run_knockout(
    settings: &TournamentSettings,
    games_per_match: usize,
    (tie_break, tie_break_pairs): (&GameSettings, usize),
    mut on_game: impl FnMut(&Played, &[Played]) -> bool,
) -> Result<(Vec<Played>, Vec<KnockoutMatch>), MatchError> {
    let rapid = TournamentSettings { game: tie_break.clone(), ..settings.clone() };
    let mut bracket = xq_tournament::pairing::knockout_bracket(settings.engines.len());
    let (mut played, mut decided) = (Vec::new(), Vec::new());
    let mut opening = 0;
    for round in 1.. {
        let pairs: Vec<(usize, usize)> = bracket.iter().filter_map(|&(a, b)| b.map(|b| (a, b))).collect();
        let (points, mut stopped) =
            play_matches(settings, &pairs, (round, games_per_match, opening), &mut played, &mut on_game)?;
        opening += pairs.len() * games_per_match.div_ceil(2);
        let mut tie_break_points = vec![(0.0, 0.0); pairs.len()];
        for _ in 0..tie_break_pairs {
            let tied: Vec<usize> = (0..pairs.len())
                .filter(|&i| points[i].0 + tie_break_points[i].0 == points[i].1 + tie_break_points[i].1)
                .collect();
            if tied.is_empty() || stopped {
                break;
            }
            let tied_pairs: Vec<(usize, usize)> = tied.iter().map(|&i| pairs[i]).collect();
            let (more, stop) = play_matches(&rapid, &tied_pairs, (round, 2, opening), &mut played, &mut on_game)?;
            stopped |= stop;
            opening += tied_pairs.len();
            for (&i, extra) in tied.iter().zip(more) {
                tie_break_points[i] = (tie_break_points[i].0 + extra.0, tie_break_points[i].1 + extra.1);
            }
        }
        let mut winners = Vec::with_capacity(bracket.len());
        for &(a, b) in &bracket {
            let Some(b) = b else {
                decided.push(KnockoutMatch {
                    round,
                    players: (a, None),
                    winner: a,
                    points: (0.0, 0.0),
                    tie_break_points: (0.0, 0.0),
                    tie_break_games: 0,
                    by_seed: false,
                });
                winners.push(a);
                continue;
            };
            let i = pairs.iter().position(|&p| p == (a, b)).expect("a played match");
            let (regular, extra) = (points[i], tie_break_points[i]);
            let (winner, by_seed) = knockout_winner(a, b, (regular.0 + extra.0, regular.1 + extra.1));
            let tie_break_games = played
                .iter()
                .filter(|p| p.scheduled.round == round)
                .filter(|p| [p.scheduled.pairing.red, p.scheduled.pairing.black].contains(&a))
                .count()
                - games_per_match;
            decided.push(KnockoutMatch {
                round,
                players: (a, Some(b)),
                winner,
                points: regular,
                tie_break_points: extra,
                tie_break_games,
                by_seed,
            });
            winners.push(winner);
        }
        if winners.len() == 1 || stopped {
            break;
        }
        bracket = next_knockout_round(&winners);
    }
    Ok((played, decided))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_double_round_robin_plays_each_pairing_s_opening_with_both_colours() {
        let games = schedule(4, Format::RoundRobin { double: true }, 100);
        assert_eq!(games.len(), 12);
        for a in &games {
            let twin = games
                .iter()
                .find(|b| b.pairing.red == a.pairing.black && b.pairing.black == a.pairing.red)
                .expect("the return game");
            assert_eq!(twin.opening, a.opening);
        }
        let openings: std::collections::HashSet<usize> = games.iter().map(|g| g.opening).collect();
        assert_eq!(openings.len(), 6, "one opening a pairing");
        assert_eq!(games.iter().map(|g| g.round).max(), Some(6));
    }

    #[test]
    fn a_gauntlet_repeats_its_openings_with_colours_swapped() {
        let games = schedule(4, Format::Gauntlet { challengers: 1, games_per_opponent: 2 }, 100);
        assert_eq!(games.len(), 6);
        for a in games.iter().filter(|g| g.round == 1) {
            let twin = games.iter().find(|b| b.round == 2 && b.pairing.red == a.pairing.black).unwrap();
            assert_eq!((twin.opening, twin.pairing.black), (a.opening, a.pairing.red));
        }
    }
}
