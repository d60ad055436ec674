//! A self-play game: our engine plays itself at a node budget a move, from a few random
//! opening plies, refereed by a rule set. The worker's self-play jobs record its
//! searched positions as training data; verification jobs verify such games, and the
//! coordinator plays a sample of them again to check a worker's report, so the game is
//! defined here, once.

use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::data::{MATE_SCORE, Record};
use super::movegen::legal_moves;
use super::nnue::Network;
use super::pgn::PgnGame;
use super::rules::{Outcome, Referee, RefereeConfig, RuleSet};
use super::search::limits::Limits;
use super::search::{Score, SearchOptions, Shared, search};
use super::{Move, Position};

/// How self-play games are played.
#[derive(Clone, Debug)]
pub struct PlaySettings {
    /// Search nodes a move.
    pub nodes: u64,
    /// Random legal plies before the engine takes over (not recorded).
    pub random_plies: usize,
    /// Game `g` has its random plies seeded `seed + g`.
    pub seed: u64,
    /// The rule set refereeing the games.
    pub rules: RuleSet,
    /// Plies after which a game is drawn.
    pub max_plies: usize,
    /// The net the engine evaluates with; none: the handcrafted evaluation.
    pub network: Option<Arc<Network>>,
}

/// A game played: its moves and result, and the records of the positions the engine
/// searched, the result filled in.
#[derive(Clone, Debug)]
pub struct PlayedGame {
    /// Every move, random plies included.
    pub moves: Vec<Move>,
    /// How the referee (or the ply limit: a draw) ended it.
    pub result: Outcome,
    /// The searched positions with their scores, best moves and the result.
    pub records: Vec<Record>,
}

impl PlayedGame {
    /// The game as PGN, numbered `round`: every move in UCI coordinates.
    pub fn pgn(&self, round: usize) -> String {
        let texts: Vec<String> = self.moves.iter().map(ToString::to_string).collect();
        let result = self.result.pgn();
        format!("[Event \"self-play\"]\n[Round \"{round}\"]\n[Result \"{result}\"]\n\n{} {result}\n\n", texts.join(" "))
    }
}

fn score_to_i16(score: Score) -> i16 {
    let value = match score {
        Score::Centipawns(cp) => cp,
        Score::Mate(moves) if moves > 0 => i32::from(MATE_SCORE) - moves,
        Score::Mate(moves) => -i32::from(MATE_SCORE) - moves,
    };
    value.clamp(i16::MIN as i32 + 1, i16::MAX as i32) as i16
}

/// Game `game`'s random opening plies (seeded `settings.seed + game`), played by its
/// referee: where the engine takes over, unless the referee or the ply limit ended the
/// game first. The coordinator plays them again to check a unit's training records
/// ([`super::data::Records::check_games`]).
pub fn random_opening(settings: &PlaySettings, game: usize) -> Referee {
    let mut rng = StdRng::seed_from_u64(settings.seed.wrapping_add(game as u64));
    let mut referee = Referee::new(Position::startpos(), RefereeConfig::for_rules(settings.rules));
    for _ in 0..settings.random_plies.min(settings.max_plies) {
        if referee.ruling().is_some() {
            break;
        }
        let legal = legal_moves(referee.position());
        referee.play(legal[rng.random_range(0..legal.len())]).expect("generated moves are legal");
    }
    referee
}

/// Plays game `game` of `settings`, searching with `shared`'s transposition table.
pub fn play_game(settings: &PlaySettings, game: usize, shared: &Shared) -> PlayedGame {
    let start = Position::startpos();
    let mut referee = random_opening(settings, game);
    let mut moves: Vec<Move> = referee.moves().collect();
    let mut records = Vec::new();
    let limits = Limits { nodes: Some(settings.nodes), ..Limits::default() };
    let options =
        SearchOptions { rules: settings.rules, network: settings.network.clone(), ..SearchOptions::default() };
    while referee.ruling().is_none() && moves.len() < settings.max_plies {
        let result = search(shared, &start, &moves, &limits, &options, |_| {});
        let best = result.best.expect("a game not yet ruled has a legal move");
        records.push(Record {
            position: referee.position().clone(),
            score: score_to_i16(result.score),
            best_move: best,
            ply: moves.len() as u16,
            result: Outcome::Draw,
        });
        referee.play(best).expect("searched moves are legal");
        moves.push(best);
    }
    let result = referee.ruling().map_or(Outcome::Draw, |r| r.outcome);
    for record in &mut records {
        record.result = result;
    }
    PlayedGame { moves, result, records }
}

/// A verification job's fresh game `game` (its number in the job, from 0), as PGN:
/// played with a transposition table of its own, so that every build alike plays it
/// the same, whoever plays it and whatever it played before.
pub fn fresh_game(settings: &PlaySettings, game: usize) -> PgnGame {
    let played = play_game(settings, game, &Shared::new(1));
    let moves: Vec<String> = played.moves.iter().map(ToString::to_string).collect();
    PgnGame {
        tags: vec![("Round".to_owned(), (game + 1).to_string())],
        notes: vec![None; moves.len()],
        moves,
        result: Some(played.result.pgn().to_owned()),
        comment: None,
    }
}
