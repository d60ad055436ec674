//! The search: iterative deepening with aspiration windows over a principal variation
//! search, a shared lock-free transposition table, quiescence with static exchange
//! evaluation, null-move pruning, late move reductions, futility and late-move
//! pruning, check extensions, singular extensions (a tunable, off by default),
//! killer/history/counter-move ordering, mate-distance pruning, and Lazy SMP over
//! several threads.
//!
//! Repetitions are ruled by the arbiter ([`crate::xiangqi::rules`]) at their first
//! occurrence in the search: a cycle that loses under the rule set in force (perpetual
//! check, forbidden chase) scores as a loss for the violator, one that draws scores 0.

mod alphabeta;
mod cutoffs;
mod deepening;
pub mod history;
pub mod limits;
mod ordering;
pub mod params;
mod quiescence;
pub mod tt;

use super::movegen::{MAX_MOVES, MoveList};
use super::nnue::{AccumulatorStack, Network};
use super::rules::{Outcome, RuleSet};
use super::{Move, Position, Undo};
use history::{Learned, QuietHistory};
use limits::{Deadlines, Limits};
use params::SearchParams;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tt::TranspositionTable;

/// The score of being mated now; mate in n plies scores `MATE - n`.
pub const MATE: i32 = 30_000;
/// Deepest ply searched.
pub const MAX_PLY: usize = 128;
/// Scores at or beyond this magnitude are mates (or losses by rule).
pub const MATE_BOUND: i32 = MATE - MAX_PLY as i32;
pub(super) const INFINITY: i32 = 32_000;

/// A score as UCI reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Score {
    /// Centipawns from the side to move's view.
    Centipawns(i32),
    /// Mate in this many moves (negative: being mated).
    Mate(i32),
}

impl Score {
    /// Converts an internal score.
    pub fn from_internal(score: i32) -> Score {
        if score >= MATE_BOUND {
            Score::Mate((MATE - score + 1) / 2)
        } else if score <= -MATE_BOUND {
            Score::Mate(-(MATE + score) / 2)
        } else {
            Score::Centipawns(score)
        }
    }
}

/// Settings that hold across searches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SearchOptions {
    /// Search threads (Lazy SMP).
    pub threads: usize,
    /// The rules repetitions are scored by.
    pub rules: RuleSet,
    /// Time kept back per move for communication.
    pub move_overhead: Duration,
    /// Principal variations to report.
    pub multipv: usize,
    /// The NNUE net evaluating positions; `None`: the handcrafted evaluation.
    pub network: Option<Arc<Network>>,
    /// Pruning margins and reductions.
    pub params: SearchParams,
}

impl Default for SearchOptions {
    fn default() -> Self {
        SearchOptions {
            threads: 1,
            rules: RuleSet::Wxf,
            move_overhead: Duration::from_millis(10),
            multipv: 1,
            network: None,
            params: SearchParams::default(),
        }
    }
}

/// What all threads of a search share.
pub struct Shared {
    /// The transposition table.
    pub tt: TranspositionTable,
    /// What the game's last search learned of quiet moves.
    learned: Learned,
    stop: AtomicBool,
    nodes: AtomicU64,
}

impl Shared {
    /// Shared state with a table of `hash_megabytes`.
    pub fn new(hash_megabytes: usize) -> Self {
        Shared {
            tt: TranspositionTable::new(hash_megabytes),
            learned: Learned::default(),
            stop: AtomicBool::new(false),
            nodes: AtomicU64::new(0),
        }
    }

    /// Forgets the game: the table and what its searches learned of quiet moves.
    pub fn new_game(&self) {
        self.tt.clear();
        self.learned.forget();
    }

    /// Asks the running search to stop as soon as it can.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// A report after each completed iteration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SearchInfo {
    /// The depth completed.
    pub depth: i32,
    /// Which principal variation this is, from 1 (the best).
    pub multipv: usize,
    /// The deepest ply reached.
    pub seldepth: usize,
    /// The score.
    pub score: Score,
    /// Nodes searched by all threads.
    pub nodes: u64,
    /// Time since the search started.
    pub elapsed: Duration,
    /// The principal variation.
    pub pv: Vec<Move>,
    /// Permille of the table in use.
    pub hashfull: u32,
}

/// The outcome of a search.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SearchResult {
    /// The move to play; `None` when there is no legal move.
    pub best: Option<Move>,
    /// The expected reply.
    pub ponder: Option<Move>,
    /// The score of the best move.
    pub score: Score,
    /// The last depth completed.
    pub depth: i32,
    /// Nodes searched by all threads.
    pub nodes: u64,
}

/// Searches `start` after `moves` (the game so far, so that repetitions across the
/// root are seen) within `limits`, reporting each iteration of the main thread.
pub fn search(
    shared: &Shared,
    start: &Position,
    moves: &[Move],
    limits: &Limits,
    options: &SearchOptions,
    mut on_info: impl FnMut(&SearchInfo),
) -> SearchResult {
    shared.stop.store(false, Ordering::Relaxed);
    shared.nodes.store(0, Ordering::Relaxed);
    let deadlines = limits.deadlines(options.move_overhead, &options.params.time_plan());
    let started = Instant::now();
    let mut main = Worker::new(shared, start, moves, options, limits, deadlines, started, true);
    main.multipv = options.multipv;
    let result = std::thread::scope(|scope| {
        for helper in 1..options.threads.max(1) {
            let mut worker = Worker::new(shared, start, moves, options, limits, deadlines, started, false);
            scope.spawn(move || worker.iterate(helper, &mut |_| {}));
        }
        let result = main.iterate(0, &mut on_info);
        shared.stop();
        result
    });
    if options.params.history_keep_percent > 0 {
        shared.learned.keep(main.quiet);
    }
    result
}

/// One thread's search state.
pub(super) struct Worker<'a> {
    shared: &'a Shared,
    position: Position,
    /// Hash of every position of the game and the search path, the current one last.
    keys: Vec<u64>,
    /// The move from each of those positions to the next; `None` for a null move.
    undos: Vec<Option<Undo>>,
    rules: RuleSet,
    limits: Limits,
    deadlines: Deadlines,
    started: Instant,
    is_main: bool,
    stopped: bool,
    nodes: u64,
    reported_nodes: u64,
    seldepth: usize,
    killers: Vec<[Option<Move>; 2]>,
    quiet: Box<QuietHistory>,
    pv: Vec<Vec<Move>>,
    cycle_rulings: HashMap<u64, Outcome>,
    /// Each ply's moves and ordering scores, reused from node to node.
    move_buffers: Vec<ScoredMoves>,
    /// Each ply's quiet moves tried before a cutoff, for the history malus.
    quiets_tried: Vec<MoveList>,
    /// Principal variations to report (UCI MultiPV).
    multipv: usize,
    /// Root moves not searched: banned ones and the first moves of earlier lines.
    root_excluded: Vec<Move>,
    /// The NNUE accumulators along the path, when a net evaluates.
    nnue: Option<AccumulatorStack>,
    /// Each ply's static evaluation (`-INFINITY` in check), to tell whether the side
    /// to move is improving on its previous turn.
    static_evals: Vec<i32>,
    /// Each ply's move left out by the singular test's search of the node without it.
    excluded: Vec<Option<Move>>,
    /// The iteration's depth, which bounds where extensions may still be given.
    root_depth: i32,
    params: SearchParams,
}

/// A node's moves with their ordering scores, on the stack.
pub(super) struct ScoredMoves {
    list: MoveList,
    scores: [i32; MAX_MOVES],
    /// Moves scored `i32::MIN` are banned and never picked.
    banned_tail: bool,
}
