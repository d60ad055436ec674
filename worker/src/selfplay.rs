//! Self-play data generation: our engine plays itself in-process (no pipes) at a node
//! budget per move, from a few random opening plies (a Xiangqi game as the engine
//! library defines it, [`xq_engine::xiangqi::selfplay`]), and every position after them
//! is written with the search's score and move and the game's result, in the engine
//! library's chunk format ([`xq_engine::xiangqi::data`]), for Xiangqi or Xiongqi.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::atomic::AtomicBool;

use xq_engine::variant::Variant;
use xq_engine::xiangqi::data::{Record, XiongqiRecord, write_chunk, write_xiongqi_chunk};
use xq_engine::xiangqi::nnue::Network;
use xq_engine::xiangqi::rules::Outcome;
use xq_engine::xiangqi::search::Shared;
use xq_engine::xiangqi::search::limits::Limits;
use xq_engine::xiangqi::selfplay::{self, PlaySettings};

/// What to generate.
#[derive(Clone, Debug)]
pub struct SelfPlaySettings {
    /// How each game is played: the engine library's definition of a self-play game
    /// (its rule set and net apply to Xiangqi only). Game `i` of the run has its
    /// random plies seeded `play.seed + i`, so runs are reproducible.
    pub play: PlaySettings,
    /// Games to play.
    pub games: usize,
    /// Games at once.
    pub threads: usize,
    /// Records per chunk file.
    pub chunk_records: usize,
    /// Where chunk files go.
    pub out: PathBuf,
    /// The game played.
    pub variant: Variant,
    /// Where to write every Xiangqi game, random plies included, as PGN (games to
    /// verify the rules on: `xq verify --pgn`); none: chunks only.
    pub pgn_out: Option<PathBuf>,
}

/// Why a self-play net cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SelfPlayNetError {
    /// Nets evaluate Xiangqi only.
    #[error("the net {0}: nets evaluate Xiangqi only, not {1}")]
    Variant(String, &'static str),
    /// The file is not a net the engine reads.
    #[error("the net {0}: {1}")]
    Unreadable(String, xq_engine::xiangqi::nnue::format::NetError),
}

/// Loads the net a self-play run of `variant` evaluates with; `name` names it in errors.
pub fn load_self_play_net(path: &Path, name: &str, variant: Variant) -> Result<Arc<Network>, SelfPlayNetError> {
    if variant != Variant::Xiangqi {
        return Err(SelfPlayNetError::Variant(name.to_owned(), variant.name()));
    }
    Network::load(path).map(Arc::new).map_err(|e| SelfPlayNetError::Unreadable(name.to_owned(), e))
}

/// What was generated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SelfPlayReport {
    /// Games played.
    pub games: usize,
    /// Positions written.
    pub positions: usize,
    /// Chunk files written.
    pub chunks: Vec<PathBuf>,
    /// Time taken.
    pub elapsed: Duration,
}

/// Writing chunks failed.
#[derive(Debug, thiserror::Error)]
#[error("cannot write {path}: {source}")]
pub struct SelfPlayError {
    path: String,
    source: std::io::Error,
}

/// Plays one Xiongqi game; returns its records with the result filled in.
fn play_xiongqi_game(settings: &SelfPlaySettings, index: usize) -> Vec<XiongqiRecord> {
    use xq_engine::xiongqi;
    let mut rng = StdRng::seed_from_u64(settings.play.seed.wrapping_add(index as u64));
    let mut game = xiongqi::Game::new(xiongqi::Position::startpos());
    let limits = Limits { nodes: Some(settings.play.nodes), ..Limits::default() };
    let never = AtomicBool::new(false);
    let mut records = Vec::new();
    let mut plies = 0;
    while game.ruling().is_none() && plies < settings.play.max_plies {
        let mv = if plies < settings.play.random_plies {
            let legal = game.legal_moves();
            legal[rng.random_range(0..legal.len())]
        } else {
            let result = xiongqi::search::search(&mut game, &limits, &never, Duration::ZERO);
            let best = result.best.expect("a game not yet ruled has a legal move");
            records.push(XiongqiRecord {
                position: game.position().clone(),
                score: result.score.clamp(i16::MIN as i32 + 1, i16::MAX as i32) as i16,
                best_move: best,
                ply: plies as u16,
                result: Outcome::Draw,
            });
            best
        };
        game.play(mv).expect("generated and searched moves are legal and not repetitive");
        plies += 1;
    }
    let result = game.ruling().map_or(Outcome::Draw, |r| r.outcome);
    for record in &mut records {
        record.result = result;
    }
    records
}

/// Plays one Xiangqi game; returns its records and writes the game to `pgn` if given.
fn play_game(
    settings: &SelfPlaySettings,
    game: usize,
    shared: &Shared,
    pgn: Option<&Mutex<std::fs::File>>,
) -> Result<Vec<Record>, std::io::Error> {
    let played = selfplay::play_game(&settings.play, game, shared);
    if let Some(file) = pgn {
        file.lock().expect("the PGN file").write_all(played.pgn(game + 1).as_bytes())?;
    }
    Ok(played.records)
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<(), SelfPlayError> {
    let error = |source| SelfPlayError { path: path.display().to_string(), source };
    let temporary = path.with_extension("tmp");
    std::fs::write(&temporary, bytes).map_err(error)?;
    std::fs::rename(&temporary, path).map_err(error)
}

/// Plays the games and writes the chunks.
pub fn run_selfplay(settings: &SelfPlaySettings) -> Result<SelfPlayReport, SelfPlayError> {
    match settings.variant {
        Variant::Xiangqi => {
            let pgn = match &settings.pgn_out {
                Some(path) => Some(Mutex::new(
                    std::fs::File::create(path)
                        .map_err(|source| SelfPlayError { path: path.display().to_string(), source })?,
                )),
                None => None,
            };
            let play = |index, shared: &mut Shared| {
                play_game(settings, index, shared, pgn.as_ref()).map_err(|source| SelfPlayError {
                    path: settings.pgn_out.as_ref().map_or(String::new(), |p| p.display().to_string()),
                    source,
                })
            };
            run_games(settings, || Shared::new(8), play, write_chunk)
        }
        Variant::Xiongqi => {
            run_games(settings, || (), |index, _| Ok(play_xiongqi_game(settings, index)), write_xiongqi_chunk)
        }
    }
}

/// Plays the games on `settings.threads` threads, each with its own `state` (a
/// transposition table), and writes their records in chunks.
fn run_games<R: Send, S>(
    settings: &SelfPlaySettings,
    state: impl Fn() -> S + Sync,
    play: impl Fn(usize, &mut S) -> Result<Vec<R>, SelfPlayError> + Sync,
    encode: fn(&[R]) -> Vec<u8>,
) -> Result<SelfPlayReport, SelfPlayError> {
    std::fs::create_dir_all(&settings.out)
        .map_err(|source| SelfPlayError { path: settings.out.display().to_string(), source })?;
    let started = Instant::now();
    let next_game = AtomicUsize::new(0);
    let pending: Mutex<Vec<R>> = Mutex::new(Vec::new());
    let chunks: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
    let positions = AtomicUsize::new(0);
    let failure: Mutex<Option<SelfPlayError>> = Mutex::new(None);
    let flush = |records: Vec<R>| {
        let mut chunks = chunks.lock().expect("chunk list");
        let path = settings.out.join(format!("selfplay-s{}-{:05}.xqc", settings.play.seed, chunks.len()));
        match write_file(&path, &encode(&records)) {
            Ok(()) => chunks.push(path),
            Err(error) => *failure.lock().expect("failure slot") = Some(error),
        }
    };
    std::thread::scope(|scope| {
        for _ in 0..settings.threads.max(1) {
            scope.spawn(|| {
                let mut state = state();
                loop {
                    let game = next_game.fetch_add(1, Ordering::Relaxed);
                    if game >= settings.games || failure.lock().expect("failure slot").is_some() {
                        return;
                    }
                    let records = match play(game, &mut state) {
                        Ok(records) => records,
                        Err(error) => {
                            *failure.lock().expect("failure slot") = Some(error);
                            return;
                        }
                    };
                    positions.fetch_add(records.len(), Ordering::Relaxed);
                    let full = {
                        let mut pending = pending.lock().expect("pending records");
                        pending.extend(records);
                        (pending.len() >= settings.chunk_records).then(|| std::mem::take(&mut *pending))
                    };
                    if let Some(records) = full {
                        flush(records);
                    }
                }
            });
        }
    });
    let rest = std::mem::take(&mut *pending.lock().expect("pending records"));
    if !rest.is_empty() {
        flush(rest);
    }
    if let Some(error) = failure.into_inner().expect("failure slot") {
        return Err(error);
    }
    Ok(SelfPlayReport {
        games: settings.games,
        positions: positions.into_inner(),
        chunks: chunks.into_inner().expect("chunk list"),
        elapsed: started.elapsed(),
    })
}
