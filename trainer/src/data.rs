//! Training data: chunk files read through the engine's chunk reader, filtered,
//! turned into feature indices by the engine's own feature code, and fed to the
//! training loop in shuffled batches by loader threads.
//!
//! The pipeline of one pass over the data:
//! 1. The chunk files are put in an order drawn from the run's seed and the epoch.
//! 2. Loader threads take chunks in turn (chunk `i` to thread `i mod n`), decode,
//!    split them into games, keep the games of the part asked for (training or
//!    validation), filter positions and compute their features; each thread sends
//!    its chunks' samples through a bounded channel of its own.
//! 3. The batcher reads the threads' channels in chunk order, so that a pass is the
//!    same whatever the threads' timing, passes samples through a shuffle buffer and
//!    sends batches through a bounded channel.
//!
//! The validation set is held out by game: a game goes to validation when a hash of
//! its chunk's file name and its index in the chunk falls under the validation share,
//! so no position of a validation game is ever trained on, and the split does not
//! change between runs or when chunks are added.
//!
//! A chunk that cannot be read is refused with its name and the reason, and the pass
//! goes on with the others.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crossbeam_channel::{Receiver, Sender, bounded};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use xq_engine::xiangqi::data::{ChunkError, MATE_BOUND, Record, read_chunk};
use xq_engine::xiangqi::nnue::features::active;
use xq_engine::xiangqi::rules::Outcome;

/// The most pieces a position holds, hence the most features of one side's view.
pub const MAX_FEATURES: usize = 32;

/// What the data pipeline could not do.
#[derive(Debug, thiserror::Error)]
pub enum DataError {
    /// The data directory could not be listed.
    #[error("cannot list the data directory {path}: {source}")]
    List {
        /// The directory.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// No chunk files where the data should be.
    #[error("no training chunks (*.xqc) in {0}")]
    Empty(String),
    /// Every chunk was refused, or the filters left nothing.
    #[error("no positions to train on in {0}: every chunk was refused or every position filtered out")]
    NothingLeft(String),
}

/// A chunk left out of training, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// The chunk's file.
    pub chunk: PathBuf,
    /// Why it was refused.
    pub reason: String,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "chunk {} refused: {}", self.chunk.display(), self.reason)
    }
}

/// Which positions to leave out; each is a setting of `xq-trainer train`.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Filter {
    /// Positions whose side to move is in check (their score is about the escape).
    pub skip_in_check: bool,
    /// Positions whose best move captures (their score is about the exchange).
    pub skip_captures: bool,
    /// Positions before this ply of their game.
    pub min_ply: u16,
    /// Positions scored as a mate.
    pub skip_mates: bool,
    /// Positions whose score is beyond this many centipawns either way.
    pub max_score: i32,
}

impl Default for Filter {
    fn default() -> Filter {
        Filter { skip_in_check: true, skip_captures: true, min_ply: 0, skip_mates: true, max_score: 3_000 }
    }
}

impl Filter {
    /// Whether `record` is trained on.
    pub fn keeps(&self, record: &Record) -> bool {
        let score = i32::from(record.score);
        !(self.skip_in_check && record.position.in_check()
            || self.skip_captures && record.position.piece_at(record.best_move.to()).is_some()
            || record.ply < self.min_ply
            || self.skip_mates && score.abs() >= i32::from(MATE_BOUND)
            || score.abs() > self.max_score)
    }
}

/// One position as the model reads it.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    /// Features of the side to move's view, then of the other side's; the first
    /// `count` of each are used.
    pub features: [[u16; MAX_FEATURES]; 2],
    /// Pieces on the board, the features of each view.
    pub count: u8,
    /// The search score in centipawns from the side to move's view.
    pub score: i16,
    /// The game's result from the side to move's view: 1 won, 0.5 drawn, 0 lost.
    pub result: f32,
}

impl Sample {
    /// The sample of `record`, through the engine's feature code.
    pub fn of(record: &Record) -> Sample {
        let side = record.position.side_to_move();
        let mut features = [[0u16; MAX_FEATURES]; 2];
        let mut count = 0;
        for (view, color) in features.iter_mut().zip([side, !side]) {
            count = 0;
            for feature in active(&record.position, color) {
                view[count] = feature as u16;
                count += 1;
            }
        }
        let result = match record.result {
            Outcome::Win(winner) if winner == side => 1.0,
            Outcome::Win(_) => 0.0,
            Outcome::Draw => 0.5,
        };
        Sample { features, count: count as u8, score: record.score, result }
    }

    /// The features of the side to move's view.
    pub fn ours(&self) -> &[u16] {
        &self.features[0][..usize::from(self.count)]
    }

    /// The features of the other side's view.
    pub fn theirs(&self) -> &[u16] {
        &self.features[1][..usize::from(self.count)]
    }
}

/// A batch in the layout the model's sparse layer takes: each view's feature
/// indices one sample after another, and where each sample's start.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Batch {
    /// Features of the side to move's views.
    pub ours: Vec<i64>,
    /// Features of the other side's views.
    pub theirs: Vec<i64>,
    /// Where each sample's features start in `ours` and `theirs` (both alike).
    pub offsets: Vec<i64>,
    /// Search scores, centipawns from the side to move's view.
    pub scores: Vec<f32>,
    /// Game results from the side to move's view.
    pub results: Vec<f32>,
}

impl Batch {
    /// A batch of `samples`.
    pub fn of(samples: &[Sample]) -> Batch {
        let mut batch = Batch::default();
        for sample in samples {
            batch.push(sample);
        }
        batch
    }

    fn push(&mut self, sample: &Sample) {
        self.offsets.push(self.ours.len() as i64);
        self.ours.extend(sample.ours().iter().map(|&f| i64::from(f)));
        self.theirs.extend(sample.theirs().iter().map(|&f| i64::from(f)));
        self.scores.push(f32::from(sample.score));
        self.results.push(sample.result);
    }

    /// Positions in the batch.
    pub fn len(&self) -> usize {
        self.offsets.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.offsets.is_empty()
    }
}

/// The chunk files (`*.xqc`) under `dir`, its subdirectories included, sorted.
pub fn find_chunks(dir: &Path) -> Result<Vec<PathBuf>, DataError> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let list = |source| DataError::List { path: dir.display().to_string(), source };
        for entry in std::fs::read_dir(&dir).map_err(list)? {
            let path = entry.map_err(list)?.path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "xqc") {
                found.push(path);
            }
        }
    }
    if found.is_empty() {
        return Err(DataError::Empty(dir.display().to_string()));
    }
    found.sort();
    Ok(found)
}

/// The records of the chunk file at `path`, or why it is refused.
pub fn read_chunk_file(path: &Path) -> Result<Vec<Record>, Refusal> {
    let refuse = |reason: String| Refusal { chunk: path.to_path_buf(), reason };
    let bytes = std::fs::read(path).map_err(|e| refuse(format!("cannot read it: {e}")))?;
    read_chunk(&bytes).map_err(|error| match error {
        ChunkError::Variant(1) => refuse(
            "it holds Xiongqi positions; the engine has no Xiongqi net yet, so the trainer reads Xiangqi chunks only"
                .to_owned(),
        ),
        other => refuse(other.to_string()),
    })
}

/// The games of a chunk: self-play writes each game's positions together, in ply
/// order, so a game ends where the ply number stops rising.
pub fn games(records: &[Record]) -> impl Iterator<Item = &[Record]> {
    let mut rest = records;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let length = 1 + rest.windows(2).take_while(|pair| pair[1].ply > pair[0].ply).count();
        let (game, tail) = rest.split_at(length);
        rest = tail;
        Some(game)
    })
}

/// The part of the data a pass reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    /// Games not held out.
    Training,
    /// Games held out for validation.
    Validation,
}

/// Whether game `index` of `chunk` is held out, for `share` of the games (0..=1).
pub fn held_out(chunk: &Path, index: usize, share: f64) -> bool {
    let hash = position_hash(chunk, index, &[]);
    // FNV's low bits mix poorly on short tails; the top 53 bits give the fraction.
    ((hash >> 11) as f64 / (1u64 << 53) as f64) < share
}

/// How a pass reads the data.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LoaderSettings {
    /// Loader threads.
    pub threads: usize,
    /// Positions per batch.
    pub batch_size: usize,
    /// Positions the shuffle buffer holds.
    pub shuffle_buffer: usize,
    /// Share of the games held out for validation.
    pub validation_share: f64,
    /// Positions left out.
    pub filter: Filter,
    /// Left-right mirror augmentation: each training position is seen mirrored in
    /// about half of the epochs (Xiangqi's rules and its evaluation are symmetric, and
    /// the features of a mirrored position differ: the king buckets are not), which
    /// gives a pass new samples from the same games. Validation is never mirrored, so
    /// losses compare with and without it.
    #[serde(default)]
    pub mirror: bool,
}

impl Default for LoaderSettings {
    fn default() -> LoaderSettings {
        LoaderSettings {
            threads: 2,
            batch_size: 16_384,
            shuffle_buffer: 1 << 20,
            validation_share: 0.05,
            filter: Filter::default(),
            mirror: false,
        }
    }
}

/// Whether position `index` of `chunk` is mirrored in the pass drawn from `seed`: a
/// hash, so that a pass is the same whatever the loader threads' timing.
fn mirrored_in_pass(chunk: &Path, index: usize, seed: u64) -> bool {
    position_hash(chunk, index, &seed.to_le_bytes()) >> 63 == 1
}

/// FNV-1a of a chunk's file name, an index in it and `extra`: fixed by the data alone,
/// whatever the order the loader threads read it in.
fn position_hash(chunk: &Path, index: usize, extra: &[u8]) -> u64 {
    let name = chunk.file_name().unwrap_or(chunk.as_os_str());
    name.as_encoded_bytes()
        .iter()
        .copied()
        .chain((index as u64).to_le_bytes())
        .chain(extra.iter().copied())
        .fold(0xcbf2_9ce4_8422_2325u64, |hash, byte| (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3))
}

/// One pass over the chunks: batches as they are made, and the chunks refused.
pub struct Pass {
    /// The batches, in an order fixed by the seed; the last may be short.
    pub batches: Receiver<Batch>,
    refusals: Arc<Mutex<Vec<Refusal>>>,
}

impl Pass {
    /// Starts a pass over `part` of `chunks`, shuffled by `seed`.
    pub fn start(chunks: &[PathBuf], part: Part, settings: &LoaderSettings, seed: u64) -> Pass {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut order = chunks.to_vec();
        if part == Part::Training {
            order.shuffle(&mut rng);
        }
        let threads = settings.threads.max(1);
        let refusals = Arc::new(Mutex::new(Vec::new()));
        let mut receivers = Vec::new();
        for thread in 0..threads {
            let (send, receive) = bounded::<Vec<Sample>>(2);
            receivers.push(receive);
            let mine: Vec<PathBuf> = order.iter().skip(thread).step_by(threads).cloned().collect();
            let (settings, refusals) = (settings.clone(), refusals.clone());
            std::thread::spawn(move || load(&mine, part, &settings, seed, &refusals, &send));
        }
        let (send, batches) = bounded(4);
        let (settings, shuffle_seed) = (settings.clone(), rng.random());
        std::thread::spawn(move || batch(receivers, &settings, shuffle_seed, part, &send));
        Pass { batches, refusals }
    }

    /// The chunks refused so far (all of them once the batches have run out).
    pub fn refusals(&self) -> Vec<Refusal> {
        self.refusals.lock().expect("refusal list").clone()
    }
}

/// A loader thread: reads its chunks in order and sends each one's samples.
fn load(
    chunks: &[PathBuf],
    part: Part,
    settings: &LoaderSettings,
    seed: u64,
    refusals: &Mutex<Vec<Refusal>>,
    out: &Sender<Vec<Sample>>,
) {
    let mirror = settings.mirror && part == Part::Training;
    for chunk in chunks {
        let samples = match read_chunk_file(chunk) {
            Ok(records) => {
                let mut index = 0;
                games(&records)
                    .enumerate()
                    .filter(|(game, _)| held_out(chunk, *game, settings.validation_share) == (part == Part::Validation))
                    .flat_map(|(_, game)| game.iter().filter(|r| settings.filter.keeps(r)))
                    .map(|record| {
                        index += 1;
                        if mirror && mirrored_in_pass(chunk, index, seed) {
                            Sample::of(&Record { position: record.position.mirrored(), ..record.clone() })
                        } else {
                            Sample::of(record)
                        }
                    })
                    .collect()
            }
            Err(refusal) => {
                refusals.lock().expect("refusal list").push(refusal);
                Vec::new()
            }
        };
        // An empty list still goes, so that the batcher's turn order holds.
        if out.send(samples).is_err() {
            return;
        }
    }
}

/// The batcher: takes the loaders' chunks in turn through the shuffle buffer.
fn batch(loaders: Vec<Receiver<Vec<Sample>>>, settings: &LoaderSettings, seed: u64, part: Part, out: &Sender<Batch>) {
    let mut rng = StdRng::seed_from_u64(seed);
    let capacity = if part == Part::Training { settings.shuffle_buffer.max(settings.batch_size) } else { 0 };
    let mut buffer: Vec<Sample> = Vec::new();
    let mut live: Vec<bool> = vec![true; loaders.len()];
    let mut turn = 0;
    while live.iter().any(|&l| l) {
        if live[turn] {
            match loaders[turn].recv() {
                Ok(samples) => buffer.extend(samples),
                Err(_) => live[turn] = false,
            }
        }
        turn = (turn + 1) % loaders.len();
        while buffer.len() >= capacity.max(settings.batch_size) {
            if out.send(take_batch(&mut buffer, settings.batch_size, part, &mut rng)).is_err() {
                return;
            }
        }
    }
    while !buffer.is_empty() {
        if out.send(take_batch(&mut buffer, settings.batch_size, part, &mut rng)).is_err() {
            return;
        }
    }
}

/// Takes a batch from the buffer: random samples for training (each replaced by the
/// buffer's last, so a draw costs nothing), the first ones for validation.
fn take_batch(buffer: &mut Vec<Sample>, size: usize, part: Part, rng: &mut StdRng) -> Batch {
    let size = size.min(buffer.len());
    if part == Part::Validation {
        return Batch::of(&buffer.drain(..size).collect::<Vec<_>>());
    }
    let mut batch = Batch::default();
    for _ in 0..size {
        let at = rng.random_range(0..buffer.len());
        batch.push(&buffer.swap_remove(at));
    }
    batch
}

#[cfg(test)]
mod tests {
    use super::*;
    use xq_engine::color::Color;
    use xq_engine::xiangqi::Position;
    use xq_engine::xiangqi::movegen::legal_moves;

    /// `games` games of `plies` positions each, pseudo-random moves from the start.
    pub(crate) fn records(games: usize, plies: u16) -> Vec<Record> {
        let mut out = Vec::new();
        for game in 0..games {
            let mut position = Position::startpos();
            for ply in 0..plies {
                let moves = legal_moves(&position);
                let mv = moves[(game * 31 + usize::from(ply) * 7) % moves.len()];
                out.push(Record {
                    position: position.clone(),
                    score: (game as i16 * 10) - i16::try_from(ply).unwrap(),
                    best_move: mv,
                    ply: ply + 4,
                    result: Outcome::Win(Color::Red),
                });
                position.make_move(mv);
            }
        }
        out
    }

    #[test]
    fn games_are_split_where_the_ply_stops_rising() {
        let all = records(3, 5);
        let lengths: Vec<usize> = games(&all).map(<[Record]>::len).collect();
        assert_eq!(lengths, [5, 5, 5]);
    }

    #[test]
    fn samples_use_the_engine_features_from_the_side_to_move() {
        let all = records(1, 2);
        let sample = Sample::of(&all[1]);
        let position = &all[1].position;
        assert_eq!(position.side_to_move(), Color::Black);
        let black: Vec<u16> = active(position, Color::Black).map(|f| f as u16).collect();
        assert_eq!(sample.ours(), &black[..], "the side to move's view comes first");
        // Red won, so Black to move lost.
        assert_eq!(sample.result, 0.0);
        assert_eq!(Sample::of(&all[0]).result, 1.0);
    }

    #[test]
    fn the_validation_share_holds_out_about_that_share_of_games() {
        let chunk = Path::new("/data/run3/selfplay-s1-00000.xqc");
        let held = (0..10_000).filter(|&i| held_out(chunk, i, 0.1)).count();
        assert!((850..1150).contains(&held), "{held} of 10,000 games held out at 10%");
        assert_eq!(held, (0..10_000).filter(|&i| held_out(chunk, i, 0.1)).count(), "the split is fixed");
    }

    #[test]
    fn filters_leave_out_what_they_name() {
        let all = records(1, 12);
        let keep_all =
            Filter { skip_in_check: false, skip_captures: false, min_ply: 0, skip_mates: false, max_score: i32::MAX };
        assert!(all.iter().all(|r| keep_all.keeps(r)));
        assert_eq!(all.iter().filter(|r| Filter { min_ply: 10, ..keep_all.clone() }.keeps(r)).count(), 6);
        let mut mate = all[0].clone();
        mate.score = 29_990;
        assert!(!Filter { skip_mates: true, ..keep_all.clone() }.keeps(&mate));
        assert!(!Filter { max_score: 100, ..keep_all.clone() }.keeps(&mate));
        let checked = Record { position: Position::from_fen("4k4/9/9/9/9/9/9/9/4R4/3K5 b").unwrap(), ..all[0].clone() };
        assert!(checked.position.in_check());
        let moves = legal_moves(&checked.position);
        let checked = Record { best_move: moves[0], ..checked };
        assert!(!Filter { skip_in_check: true, ..keep_all.clone() }.keeps(&checked));
        let capture = Position::from_fen("4k4/9/9/9/9/9/9/4r4/4R4/3K5 w").unwrap();
        let take = *legal_moves(&capture).iter().find(|m| capture.piece_at(m.to()).is_some()).unwrap();
        let capture = Record { position: capture, best_move: take, ..all[0].clone() };
        assert!(!Filter { skip_captures: true, ..keep_all }.keeps(&capture));
    }

    #[test]
    fn mirroring_sees_about_half_the_positions_mirrored_and_differently_each_pass() {
        let chunk = Path::new("/data/run3/selfplay-s1-00000.xqc");
        let first: Vec<bool> = (0..10_000).map(|i| mirrored_in_pass(chunk, i, 1)).collect();
        let second: Vec<bool> = (0..10_000).map(|i| mirrored_in_pass(chunk, i, 2)).collect();
        let share = first.iter().filter(|&&m| m).count();
        assert!((4_700..5_300).contains(&share), "{share} of 10,000 mirrored");
        let differ = first.iter().zip(&second).filter(|(a, b)| a != b).count();
        assert!((4_700..5_300).contains(&differ), "another pass mirrors others: {differ}");
        // A mirrored position has other features (the king buckets), the same score.
        let record = &records(1, 9)[8];
        let mirrored = Sample::of(&Record { position: record.position.mirrored(), ..record.clone() });
        assert_ne!(mirrored.ours(), Sample::of(record).ours());
        assert_eq!((mirrored.score, mirrored.result), (record.score, Sample::of(record).result));
    }
}
