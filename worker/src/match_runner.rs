//! A match between two engines: game pairs over the openings (each opening twice,
//! colours swapped), several at once, with running totals, pentanomial counts and an
//! optional SPRT that stops the match at a bound.
//!
//! Failures are sorted as fishtest's worker sorts them: an engine that crashes or
//! hangs loses that game and is restarted; an engine that cannot be started at all
//! fails the match.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::channel;

use xq_engine::color::{ByColor, Color};
use xq_engine::xiangqi::rules::{Outcome, Reason};
use xq_stats::{EloEstimate, Sprt, SprtState, elo_estimate};

use crate::engine_process::{EngineConfig, EngineError, EngineProcess};
use crate::game::{GameRecord, GameSettings, Termination, first_mover, play_game};
use crate::openings::Openings;
use crate::time_use::{self, TimeUse};

/// A match to play.
#[derive(Clone, Debug)]
pub struct MatchSettings {
    /// The two engines; totals are from the first one's view.
    pub engines: [EngineConfig; 2],
    /// The pairs to play, by index: pair `i` plays opening `i` modulo their number.
    /// A standalone match plays `0..n`; a coordinator's lease names its units.
    pub pairs: Vec<usize>,
    /// Games played at once.
    pub concurrency: usize,
    /// Pin each game slot, and so the engines it starts, to its own core.
    pub pin_cores: bool,
    /// Where the pairs start (Xiangqi openings or Xiongqi positions).
    pub openings: Openings,
    /// How each game is played.
    pub game: GameSettings,
    /// Stop at an SPRT bound.
    pub sprt: Option<Sprt>,
}

/// The match cannot go on.
#[derive(Debug, thiserror::Error)]
pub enum MatchError {
    /// An engine could not be started or restarted.
    #[error("engine '{name}' cannot be used: {error}")]
    Engine {
        /// Its name.
        name: String,
        /// What happened.
        error: EngineError,
    },
    /// An engine failed, or moved illegally, before its first move of a game: it
    /// cannot play, and the pair fails rather than being lost (most often a build or a
    /// setting the machine cannot run, or a notation the engine does not speak).
    #[error("engine '{name}' failed before its first move: {reason}")]
    BeforeFirstMove {
        /// Its name.
        name: String,
        /// Whether it was an illegal move (else it crashed, hung or answered nonsense).
        illegal: bool,
        /// The game's reason: the error, with the end of the engine's stderr.
        reason: String,
    },
    /// A pair of the match has no opening (a match without any: pair 0).
    #[error("no opening for pair {0}")]
    NoOpening(usize),
}

/// Running totals from the first engine's view.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MatchTotals {
    /// Games won by the first engine.
    pub wins: u64,
    /// Games drawn.
    pub draws: u64,
    /// Games lost.
    pub losses: u64,
    /// Finished pairs by the first engine's points in them: 0, 0.5, 1, 1.5, 2.
    pub pentanomial: [u64; 5],
    /// How games ended, by reason.
    pub reasons: BTreeMap<String, u64>,
    /// Games won by a repetition ruling (a lone perpetual check or chase), by the
    /// first engine and by the second. An engine that does not know the chase rules
    /// (Fairy-Stockfish 11.1 among them) loses such games to the arbiter, not on the
    /// board, so they are counted apart.
    pub ruled_wins: [u64; 2],
    /// Games won on time (the loser's clock ran out), by the first engine and by the
    /// second: a verdict of the clock, not the board, counted apart too.
    pub forfeit_wins: [u64; 2],
    /// Finished pairs as the board alone decided them: like `pentanomial`, with each
    /// game won by a repetition ruling or on time counted as a draw.
    pub over_the_board: [u64; 5],
    /// Engine failures (crashes, hangs) by engine name.
    pub failures: BTreeMap<String, u64>,
    /// How each engine spent its clock, by engine name.
    pub time_use: BTreeMap<String, TimeUse>,
    /// Games that ended after the match's SPRT decided: played, since a slot finishes
    /// the pair it is in, but neither counted nor shown to `on_game`. A sequential test
    /// stops at its first crossing: the games in flight then could carry the LLR back
    /// inside its bounds and leave a decided test undecided in its totals and its PGN
    /// (and a resumed match playing on past it). A match that `on_game` ends still
    /// shows it the games in flight: a fleet worker told to stop reports them.
    pub overrun: u64,
}

impl MatchTotals {
    /// Games played.
    pub fn games(&self) -> u64 {
        self.wins + self.draws + self.losses
    }

    /// The Elo estimate from the pairs (or the games while no pair is complete).
    pub fn elo(&self) -> Option<EloEstimate> {
        if self.pentanomial.iter().sum::<u64>() > 0 {
            elo_estimate(&self.pentanomial).ok()
        } else if self.games() > 0 {
            elo_estimate(&[self.losses, self.draws, self.wins]).ok()
        } else {
            None
        }
    }

    /// The Elo estimate from the pairs with the wins by a repetition ruling or on time
    /// counted as draws; `None` until a pair is complete.
    pub fn over_the_board_elo(&self) -> Option<EloEstimate> {
        (self.over_the_board.iter().sum::<u64>() > 0).then(|| elo_estimate(&self.over_the_board).ok()).flatten()
    }

    /// Where the SPRT stands on the pairs so far.
    pub fn sprt(&self, sprt: &Sprt) -> Option<SprtState> {
        sprt.state(&self.pentanomial).ok()
    }

    fn add_game(&mut self, game: &GameRecord, first_is_red: bool, settings: &GameSettings) -> GamePoints {
        let plies =
            game.moves.iter().enumerate().map(|(ply, played)| (ply >= game.book_plies).then_some(played.elapsed));
        let first = first_mover(&game.start_fen);
        time_use::add_game(
            &mut self.time_use,
            &game.players,
            first,
            plies,
            &settings.time_control,
            settings.time_margin,
        );
        let failed = game.failure.as_ref().map(|(color, _)| game.players[*color].as_str());
        self.add_result(game.outcome, first_is_red, &game.reason, game.termination, failed)
    }

    /// Counts a game by its result, the reason it ended (its first words, before the
    /// article) and the engine that failed in it, if one did; gives the first
    /// engine's half points.
    pub(crate) fn add_result(
        &mut self,
        outcome: Outcome,
        first_is_red: bool,
        reason: &str,
        termination: Termination,
        failed: Option<&str>,
    ) -> GamePoints {
        let first = if first_is_red { Color::Red } else { Color::Black };
        let reason = if termination == Termination::Rules {
            reason.split(" (").next().unwrap_or(reason).to_owned()
        } else {
            termination.pgn().to_owned()
        };
        let ruled = termination == Termination::Rules && Reason::names_a_repetition_violation(&reason);
        let on_time = termination == Termination::TimeForfeit;
        let half_points = match outcome {
            Outcome::Win(winner) if winner == first => {
                self.wins += 1;
                self.ruled_wins[0] += u64::from(ruled);
                self.forfeit_wins[0] += u64::from(on_time);
                2
            }
            Outcome::Win(_) => {
                self.losses += 1;
                self.ruled_wins[1] += u64::from(ruled);
                self.forfeit_wins[1] += u64::from(on_time);
                0
            }
            Outcome::Draw => {
                self.draws += 1;
                1
            }
        };
        *self.reasons.entry(reason).or_default() += 1;
        if let Some(name) = failed {
            *self.failures.entry(name.to_owned()).or_default() += 1;
        }
        GamePoints { as_ruled: half_points, over_the_board: if ruled || on_time { 1 } else { half_points } }
    }

    /// Counts a finished pair, its two games in either order.
    pub(crate) fn add_pair(&mut self, one: GamePoints, other: GamePoints) {
        self.pentanomial[(one.as_ruled + other.as_ruled) as usize] += 1;
        self.over_the_board[(one.over_the_board + other.over_the_board) as usize] += 1;
    }
}

/// A game's half points for the first engine (0, 1 or 2): as the arbiter ruled it,
/// and as the board decided it (a win by a repetition ruling or on time a draw).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct GamePoints {
    as_ruled: u64,
    over_the_board: u64,
}

/// A finished game as the match reports it.
#[derive(Clone, Debug)]
pub struct FinishedGame {
    /// The pair it belongs to (0-based).
    pub pair: usize,
    /// 0 for the first game of the pair (first engine Red), 1 for the second.
    pub leg: usize,
    /// The record.
    pub record: GameRecord,
}

fn start_engine(config: &EngineConfig) -> Result<EngineProcess, MatchError> {
    EngineProcess::start(config).map_err(|error| MatchError::Engine { name: config.name.clone(), error })
}

/// Sets a pair's options; an engine that died since its last game is started again
/// once before the match gives up on it.
fn give_options(
    engine: &mut EngineProcess,
    config: &EngineConfig,
    options: &[(String, String)],
) -> Result<(), MatchError> {
    if engine.set_options(options).is_ok() {
        return Ok(());
    }
    *engine = start_engine(config)?;
    engine.set_options(options).map_err(|error| MatchError::Engine { name: config.name.clone(), error })
}

/// Options each engine is given before a pair: `None` leaves them as they are.
pub type PairOptions<'a> = &'a (dyn Fn(usize) -> Option<[Vec<(String, String)>; 2]> + Sync);

/// Plays the match; `on_game` sees every finished game with the totals after it, and
/// may end the match early by returning false.
pub fn run_match(
    settings: &MatchSettings,
    on_game: impl FnMut(&FinishedGame, &MatchTotals) -> bool,
) -> Result<MatchTotals, MatchError> {
    run_match_with_options(settings, &|_| None, on_game)
}

/// Plays the match as [`run_match`] does, on from `carried`, the totals of the games it
/// played before it stopped ([`crate::resume`]): the SPRT sees them all.
pub fn resume_match(
    settings: &MatchSettings,
    carried: MatchTotals,
    on_game: impl FnMut(&FinishedGame, &MatchTotals) -> bool,
) -> Result<MatchTotals, MatchError> {
    play_pairs(settings, &|_| None, carried, on_game)
}

/// Plays the match as [`run_match`] does, giving the engines `pair_options(pair)`
/// before each pair (SPSA's probes: the engines' values change from pair to pair).
pub fn run_match_with_options(
    settings: &MatchSettings,
    pair_options: PairOptions<'_>,
    on_game: impl FnMut(&FinishedGame, &MatchTotals) -> bool,
) -> Result<MatchTotals, MatchError> {
    play_pairs(settings, pair_options, MatchTotals::default(), on_game)
}

fn play_pairs(
    settings: &MatchSettings,
    pair_options: PairOptions<'_>,
    carried: MatchTotals,
    mut on_game: impl FnMut(&FinishedGame, &MatchTotals) -> bool,
) -> Result<MatchTotals, MatchError> {
    if let Some(&pair) = settings.pairs.iter().find(|&&pair| settings.openings.of_pair(pair).is_none()) {
        return Err(MatchError::NoOpening(pair));
    }
    let next_pair = AtomicUsize::new(0);
    let pair_count = settings.pairs.len();
    let stop = AtomicBool::new(false);
    let (sender, receiver) = channel::<Result<FinishedGame, MatchError>>();
    let mut totals = carried;
    let mut first_leg: BTreeMap<usize, GamePoints> = BTreeMap::new();
    let mut decided = false;
    std::thread::scope(|scope| {
        let cores = if settings.pin_cores { core_affinity::get_core_ids().unwrap_or_default() } else { Vec::new() };
        for slot in 0..settings.concurrency.max(1).min(pair_count.max(1)) {
            let sender = sender.clone();
            let (next_pair, stop) = (&next_pair, &stop);
            let core = (!cores.is_empty()).then(|| cores[slot % cores.len()]);
            scope.spawn(move || {
                // Engines started from a pinned thread inherit its core.
                if let Some(core) = core {
                    core_affinity::set_for_current(core);
                }
                let mut engines = match (start_engine(&settings.engines[0]), start_engine(&settings.engines[1])) {
                    (Ok(a), Ok(b)) => [a, b],
                    (Err(e), _) | (_, Err(e)) => {
                        let _ = sender.send(Err(e));
                        return;
                    }
                };
                loop {
                    let next = next_pair.fetch_add(1, Ordering::Relaxed);
                    if next >= pair_count || stop.load(Ordering::Relaxed) {
                        return;
                    }
                    let pair = settings.pairs[next];
                    let opening = settings.openings.of_pair(pair).expect("every pair's opening was checked");
                    let options = pair_options(pair);
                    if let Some(options) = &options {
                        for index in 0..2 {
                            if let Err(error) =
                                give_options(&mut engines[index], &settings.engines[index], &options[index])
                            {
                                let _ = sender.send(Err(error));
                                return;
                            }
                        }
                    }
                    for leg in 0..2 {
                        let [first, second] = &mut engines;
                        let by_color = if leg == 0 {
                            ByColor { red: first, black: second }
                        } else {
                            ByColor { red: second, black: first }
                        };
                        let record = play_game(by_color, opening, &settings.game);
                        if let Some(color) = record.failed_before_moving {
                            let index = usize::from((color == Color::Red) == (leg == 1));
                            let _ = sender.send(Err(MatchError::BeforeFirstMove {
                                name: settings.engines[index].name.clone(),
                                illegal: record.termination == Termination::IllegalMove,
                                reason: record.reason,
                            }));
                            return;
                        }
                        if let Some((color, _)) = &record.failure {
                            let index = usize::from((*color == Color::Red) == (leg == 1));
                            let restarted = start_engine(&settings.engines[index]).and_then(|fresh| {
                                engines[index] = fresh;
                                match &options {
                                    Some(options) => {
                                        give_options(&mut engines[index], &settings.engines[index], &options[index])
                                    }
                                    None => Ok(()),
                                }
                            });
                            if let Err(error) = restarted {
                                let _ = sender.send(Err(error));
                                return;
                            }
                        }
                        if sender.send(Ok(FinishedGame { pair, leg, record })).is_err() {
                            return;
                        }
                    }
                }
            });
        }
        drop(sender);
        for message in receiver {
            let finished = match message {
                Ok(finished) => finished,
                Err(error) => {
                    stop.store(true, Ordering::Relaxed);
                    return Err(error);
                }
            };
            if decided {
                totals.overrun += 1;
                continue;
            }
            let points = totals.add_game(&finished.record, finished.leg == 0, &settings.game);
            match first_leg.remove(&finished.pair) {
                Some(other) => totals.add_pair(other, points),
                None => {
                    first_leg.insert(finished.pair, points);
                }
            }
            let go_on = on_game(&finished, &totals);
            decided = settings.sprt.as_ref().and_then(|s| totals.sprt(s)).and_then(|s| s.decision()).is_some();
            if !go_on || decided {
                stop.store(true, Ordering::Relaxed);
            }
        }
        Ok(totals)
    })
}
