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

pub mod history;
pub mod limits;
pub mod params;
pub mod tt;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use history::{Learned, QuietHistory};
use limits::{Deadlines, Limits};
use params::SearchParams;
use tt::{Bound, TranspositionTable, TtData};

use super::eval::{evaluate, piece_value};
use super::movegen::{MAX_MOVES, MoveList, Selection, generate_into};
use super::nnue::{AccumulatorStack, Network};
use super::rules::{Outcome, RuleSet, rule_cycle};
use super::{Move, PieceKind, Position, Undo};
use crate::color::Color;

/// The score of being mated now; mate in n plies scores `MATE - n`.
pub const MATE: i32 = 30_000;
/// Deepest ply searched.
pub const MAX_PLY: usize = 128;
/// Scores at or beyond this magnitude are mates (or losses by rule).
pub const MATE_BOUND: i32 = MATE - MAX_PLY as i32;
const INFINITY: i32 = 32_000;

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
struct Worker<'a> {
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

impl<'a> Worker<'a> {
    #[allow(clippy::too_many_arguments)]
    fn new(
        shared: &'a Shared,
        start: &Position,
        moves: &[Move],
        options: &SearchOptions,
        limits: &Limits,
        deadlines: Deadlines,
        started: Instant,
        is_main: bool,
    ) -> Self {
        let mut position = start.clone();
        let mut keys = vec![position.hash()];
        let mut undos = Vec::with_capacity(moves.len() + MAX_PLY);
        for &mv in moves {
            undos.push(Some(position.make_move(mv)));
            keys.push(position.hash());
        }
        let nnue = options.network.as_ref().map(|network| AccumulatorStack::new(Arc::clone(network), &position));
        Worker {
            shared,
            position,
            keys,
            undos,
            rules: options.rules,
            limits: limits.clone(),
            deadlines,
            started,
            is_main,
            stopped: false,
            nodes: 0,
            reported_nodes: 0,
            seldepth: 0,
            killers: vec![[None; 2]; MAX_PLY + 2],
            quiet: shared.learned.start(options.params.history_keep_percent),
            pv: vec![Vec::new(); MAX_PLY + 2],
            cycle_rulings: HashMap::new(),
            move_buffers: (0..MAX_PLY + 2)
                .map(|_| ScoredMoves { list: MoveList::new(), scores: [0; MAX_MOVES], banned_tail: false })
                .collect(),
            quiets_tried: vec![MoveList::new(); MAX_PLY + 2],
            multipv: 1,
            root_excluded: limits.banned.clone(),
            nnue,
            static_evals: vec![-INFINITY; MAX_PLY + 2],
            excluded: vec![None; MAX_PLY + 2],
            root_depth: 0,
            params: options.params,
        }
    }

    fn play(&mut self, mv: Move) {
        let undo = self.position.make_move(mv);
        self.undos.push(Some(undo));
        self.keys.push(self.position.hash());
        if let Some(nnue) = &mut self.nnue {
            nnue.push(&self.position, &undo);
        }
    }

    fn play_null(&mut self) {
        self.position.make_null_move();
        self.undos.push(None);
        self.keys.push(self.position.hash());
        if let Some(nnue) = &mut self.nnue {
            nnue.push_null();
        }
    }

    fn take_back(&mut self) {
        if let Some(nnue) = &mut self.nnue {
            nnue.pop();
        }
        self.keys.pop();
        match self.undos.pop().expect("a move to take back") {
            Some(undo) => self.position.unmake_move(undo),
            None => self.position.unmake_null_move(),
        }
    }

    fn previous_move(&self) -> Option<Move> {
        self.undos.last().copied().flatten().map(|u| u.mv())
    }

    /// Checks the stop flag, the clock and the node budget.
    fn should_stop(&mut self) -> bool {
        if self.stopped {
            return true;
        }
        if self.nodes & 1023 == 0 {
            self.shared.nodes.fetch_add(self.nodes - self.reported_nodes, Ordering::Relaxed);
            self.reported_nodes = self.nodes;
            if self.shared.stop.load(Ordering::Relaxed) {
                self.stopped = true;
            } else if self.is_main
                && let Some(hard) = self.deadlines.hard
            {
                self.stopped = self.started.elapsed() >= hard;
            }
        }
        if self.is_main && self.limits.nodes.is_some_and(|limit| self.nodes >= limit) {
            self.stopped = true;
        }
        if self.stopped {
            self.shared.stop();
        }
        self.stopped
    }

    fn total_nodes(&self) -> u64 {
        self.shared.nodes.load(Ordering::Relaxed) + self.nodes - self.reported_nodes
    }

    /// Searches one principal variation at `depth` with aspiration windows around
    /// `previous`; `None` when stopped before it completed.
    fn aspiration(&mut self, depth: i32, previous: i32) -> Option<i32> {
        let mut delta = self.params.aspiration_delta;
        let (mut alpha, mut beta) =
            if depth >= 5 { (previous - delta, previous + delta) } else { (-INFINITY, INFINITY) };
        loop {
            let value = self.negamax(alpha, beta, depth, 0, true);
            if self.stopped && depth > 1 {
                return None;
            }
            if value <= alpha {
                beta = (alpha + beta) / 2;
                alpha = (value - delta).max(-INFINITY);
            } else if value >= beta {
                beta = (value + delta).min(INFINITY);
            } else {
                return Some(value);
            }
            delta += delta / 2;
        }
    }

    fn iterate(&mut self, thread: usize, on_info: &mut dyn FnMut(&SearchInfo)) -> SearchResult {
        let max_depth = self.limits.depth.unwrap_or(MAX_PLY as i32 - 1).clamp(1, MAX_PLY as i32 - 1);
        let mut result = SearchResult { best: None, ponder: None, score: Score::Centipawns(0), depth: 0, nodes: 0 };
        let lines_wanted = if self.is_main { self.multipv.max(1) } else { 1 };
        let mut previous_scores = vec![0; lines_wanted];
        let mut depth = 1 + (thread % 2) as i32;
        'deepening: while depth <= max_depth {
            self.root_depth = depth;
            // Each further line excludes the first moves of the lines before it.
            let mut lines: Vec<(i32, Vec<Move>)> = Vec::with_capacity(lines_wanted);
            self.root_excluded.clone_from(&self.limits.banned);
            for (line, &previous) in previous_scores.iter().enumerate() {
                let Some(score) = self.aspiration(depth, previous) else {
                    break 'deepening;
                };
                let Some(&first) = self.pv[0].first() else {
                    break;
                };
                if line > 0 && self.root_excluded.contains(&first) {
                    break;
                }
                lines.push((score, self.pv[0].clone()));
                self.root_excluded.push(first);
            }
            self.root_excluded.clone_from(&self.limits.banned);
            lines.sort_by_key(|(score, _)| std::cmp::Reverse(*score));
            let Some((score, pv)) = lines.first().cloned() else {
                break;
            };
            for (index, (line_score, _)) in lines.iter().enumerate() {
                previous_scores[index] = *line_score;
            }
            result = SearchResult {
                best: pv.first().copied(),
                ponder: pv.get(1).copied(),
                score: Score::from_internal(score),
                depth,
                nodes: self.total_nodes(),
            };
            if self.is_main {
                for (index, (line_score, line_pv)) in lines.iter().enumerate() {
                    on_info(&SearchInfo {
                        depth,
                        multipv: index + 1,
                        seldepth: self.seldepth,
                        score: Score::from_internal(*line_score),
                        nodes: self.total_nodes(),
                        elapsed: self.started.elapsed(),
                        pv: line_pv.clone(),
                        hashfull: self.shared.tt.hashfull(),
                    });
                }
                if self.iteration_limits_reached(score) {
                    break;
                }
            }
            if result.best.is_none() {
                break;
            }
            depth += 1;
        }
        result.nodes = self.total_nodes();
        result
    }

    fn iteration_limits_reached(&self, score: i32) -> bool {
        if self.limits.infinite {
            return false;
        }
        if let Some(moves) = self.limits.mate
            && score >= MATE_BOUND
            && (MATE - score + 1) / 2 <= moves as i32
        {
            return true;
        }
        self.deadlines.soft.is_some_and(|soft| self.started.elapsed() >= soft)
    }

    /// The score of the repetition the last move closed, if it closed one.
    fn repetition_score(&mut self, ply: usize) -> Option<i32> {
        let current = self.keys.len() - 1;
        let reach = (self.position.halfmove_clock() as usize).min(current);
        let mut distance = 2;
        while distance <= reach {
            if self.undos[current - distance + 1].is_none() || self.undos[current - distance].is_none() {
                return None;
            }
            if distance >= 4 && self.keys[current - distance] == self.keys[current] {
                return Some(self.score_cycle(current - distance, ply));
            }
            distance += 2;
        }
        None
    }

    fn score_cycle(&mut self, from: usize, ply: usize) -> i32 {
        let moves: Vec<Move> = self.undos[from..].iter().map(|u| u.expect("no null move in a cycle").mv()).collect();
        let key = moves
            .iter()
            .fold(self.keys[from], |h, m| h.rotate_left(7) ^ u64::from(m.to_u16()).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let outcome = match self.cycle_rulings.get(&key) {
            Some(&outcome) => outcome,
            None => {
                let mut start = self.position.clone();
                for undo in self.undos[from..].iter().rev() {
                    start.unmake_move(undo.expect("no null move in a cycle"));
                }
                let outcome = rule_cycle(&start, &moves, self.rules).0.outcome;
                self.cycle_rulings.insert(key, outcome);
                outcome
            }
        };
        match outcome {
            Outcome::Draw => 0,
            Outcome::Win(side) if side == self.position.side_to_move() => MATE - ply as i32,
            Outcome::Win(_) => -(MATE - ply as i32),
        }
    }

    /// The static evaluation of the current position from the side to move's view.
    fn evaluate(&self) -> i32 {
        match &self.nnue {
            Some(nnue) => nnue.evaluate(self.position.side_to_move()),
            None => evaluate(&self.position),
        }
    }

    fn has_pieces_beyond_pawns(&self, color: Color) -> bool {
        [PieceKind::Rook, PieceKind::Horse, PieceKind::Cannon].iter().any(|&k| self.position.pieces(color, k).any())
    }

    fn order_score(&self, mv: Move, tt_move: Option<Move>, ply: usize) -> i32 {
        if Some(mv) == tt_move {
            return 1 << 30;
        }
        if let Some(victim) = self.position.piece_at(mv.to()) {
            let attacker = self.position.piece_at(mv.from()).expect("a moving piece");
            return (1 << 28) + piece_value(victim.kind) * 16 - piece_value(attacker.kind) / 16;
        }
        let killers = &self.killers[ply];
        if killers[0] == Some(mv) {
            return (1 << 27) + 2;
        }
        if killers[1] == Some(mv) {
            return (1 << 27) + 1;
        }
        if let Some(previous) = self.previous_move()
            && self.quiet.counter_moves[previous.from().index()][previous.to().index()] == Some(mv)
        {
            return 1 << 26;
        }
        self.quiet.scores[self.position.side_to_move().index()][mv.from().index()][mv.to().index()]
    }

    /// Generates and scores the node's moves into the buffer of `ply`, which is
    /// reused from node to node so that no node clears or allocates a move list.
    fn score_moves(&mut self, selection: Selection, tt_move: Option<Move>, ply: usize) -> usize {
        let buffer = &mut self.move_buffers[ply];
        buffer.list.clear();
        buffer.banned_tail = false;
        generate_into(&self.position, selection, &mut buffer.list);
        let count = buffer.list.len();
        for index in 0..count {
            let mv = self.move_buffers[ply].list[index];
            self.move_buffers[ply].scores[index] = self.order_score(mv, tt_move, ply);
        }
        count
    }

    fn update_quiet_stats(&mut self, best: Move, depth: i32, ply: usize) {
        let side = self.position.side_to_move().index();
        let bonus = (depth * depth).min(400);
        let clamp = |h: &mut i32, delta: i32| *h += delta - *h * delta.abs() / 16_384;
        clamp(&mut self.quiet.scores[side][best.from().index()][best.to().index()], bonus);
        for &mv in self.quiets_tried[ply].iter() {
            if mv != best {
                clamp(&mut self.quiet.scores[side][mv.from().index()][mv.to().index()], -bonus);
            }
        }
        let killers = &mut self.killers[ply];
        if killers[0] != Some(best) {
            killers[1] = killers[0];
            killers[0] = Some(best);
        }
        if let Some(previous) = self.previous_move() {
            self.quiet.counter_moves[previous.from().index()][previous.to().index()] = Some(best);
        }
    }

    fn negamax(&mut self, mut alpha: i32, mut beta: i32, mut depth: i32, ply: usize, pv_node: bool) -> i32 {
        self.pv[ply].clear();
        if depth <= 0 {
            return self.quiesce(alpha, beta, ply);
        }
        self.nodes += 1;
        self.seldepth = self.seldepth.max(ply);
        if self.should_stop() && ply > 0 {
            return 0;
        }
        if ply > 0 {
            if let Some(score) = self.repetition_score(ply) {
                return score;
            }
            alpha = alpha.max(-(MATE - ply as i32));
            beta = beta.min(MATE - ply as i32 - 1);
            if alpha >= beta {
                return alpha;
            }
            if ply >= MAX_PLY {
                return self.evaluate();
            }
        }
        let in_check = self.position.in_check();
        if in_check {
            depth += 1;
        }
        let key = self.position.hash();
        let entry = self.shared.tt.probe(key);
        // The singular test's search of this node without one move: the table's
        // entry speaks for the node with it, so it neither cuts nor is overwritten.
        let excluded = self.excluded[ply];
        if let Some(e) = entry
            && excluded.is_none()
            && !pv_node
            && e.depth >= depth
            && let Some(score) = table_cutoff(e, alpha, beta, ply)
        {
            return score;
        }
        let static_eval = match (in_check, entry) {
            (true, _) => -INFINITY,
            (false, Some(e)) => e.eval,
            (false, None) => self.evaluate(),
        };
        self.static_evals[ply] = static_eval;
        let improving = !in_check && ply >= 2 && static_eval > self.static_evals[ply - 2];
        let us = self.position.side_to_move();
        if !pv_node && !in_check && beta.abs() < MATE_BOUND {
            let p = self.params;
            if depth <= 6
                && static_eval - p.reverse_futility_margin * depth + p.reverse_futility_improving * i32::from(improving)
                    >= beta
            {
                return static_eval;
            }
            let after_null = self.undos.last().is_some_and(Option::is_none);
            if depth >= 3
                && static_eval >= beta
                && !after_null
                && excluded.is_none()
                && self.has_pieces_beyond_pawns(us)
            {
                let r = p.null_move_base + depth / 4 + ((static_eval - beta) / p.null_move_eval_divisor).min(3);
                self.play_null();
                let score = -self.negamax(-beta, -beta + 1, depth - 1 - r, ply + 1, false);
                self.take_back();
                if self.stopped {
                    return 0;
                }
                if score >= beta {
                    return if score >= MATE_BOUND { beta } else { score };
                }
            }
        }

        let tt_move = entry.and_then(|e| e.mv);
        // Internal iterative reduction: a node with no move from the table is likely
        // new to the search; a shallower look orders it for the next iteration.
        if tt_move.is_none() && depth >= 4 {
            depth -= 1;
        }
        let singular = match tt_move.zip(entry) {
            // Off (the default), the test is not even called: this runs at every node.
            Some((mv, e)) if excluded.is_none() && self.params.singular_depth > 0 => {
                self.singular_extension(mv, e, beta, depth, ply)
            }
            _ => Singular::No,
        };
        let extended = match singular {
            Singular::Cut(score) => return score,
            Singular::Stopped => return 0,
            Singular::Extend => tt_move,
            Singular::No => None,
        };
        let move_count = self.score_moves(Selection::All, tt_move, ply);
        if ply == 0 && !self.root_excluded.is_empty() {
            let moves = &mut self.move_buffers[0];
            let all_banned = moves.list.iter().all(|mv| self.root_excluded.contains(mv));
            if !all_banned {
                for index in 0..moves.list.len() {
                    if self.root_excluded.contains(&moves.list[index]) {
                        moves.scores[index] = i32::MIN;
                    }
                }
                moves.banned_tail = true;
            }
        }
        if move_count == 0 {
            // Checkmated or stalemated: either loses (WXF 3.1.A).
            return -(MATE - ply as i32);
        }
        let original_alpha = alpha;
        let mut best = -INFINITY;
        let mut best_move = None;
        self.quiets_tried[ply].clear();
        let p = self.params;
        // The excluded move does not count: the moves after it are numbered as the
        // node's first, second, ... for pruning and reductions, as in a node without it.
        let mut skipped = 0;
        for index in 0..move_count {
            let Some(mv) = self.move_buffers[ply].pick(index) else {
                break;
            };
            if Some(mv) == excluded {
                skipped = 1;
                continue;
            }
            let move_number = index + 1 - skipped;
            let is_capture = self.position.piece_at(mv.to()).is_some();
            // Whether a move checks matters only to pruning and reductions: ask only then.
            let may_prune = !pv_node && !in_check && depth <= 5 && best > -MATE_BOUND;
            let may_reduce = depth >= 3 && move_number > 3 && !in_check;
            let quiet = !is_capture && (may_prune || may_reduce) && !self.position.gives_check(mv);
            if !pv_node && !in_check && quiet && best > -MATE_BOUND {
                let late = p.late_move_base + 2 * depth * depth + i32::from(improving) * depth * depth;
                if depth <= 3 && move_number > late as usize {
                    continue;
                }
                if depth <= 5 && static_eval + p.futility_base + p.futility_per_depth * depth <= alpha {
                    continue;
                }
            }
            // Captures that lose material by the exchange, near the leaves.
            if may_prune
                && is_capture
                && depth <= 4
                && move_number > 1
                && see(&self.position, mv) < -p.see_prune_per_depth * depth
            {
                continue;
            }
            self.play(mv);
            let new_depth = depth - 1 + i32::from(Some(mv) == extended);
            let score = if move_number == 1 {
                -self.negamax(-beta, -alpha, new_depth, ply + 1, pv_node)
            } else {
                let mut r = 0;
                if depth >= 3 && move_number > 3 && quiet && !in_check {
                    r = p.reduction(depth, move_number) + i32::from(!pv_node) + i32::from(!improving);
                    if self.killers[ply].contains(&Some(mv)) {
                        r -= 1;
                    }
                    r -= self.quiet.scores[us.index()][mv.from().index()][mv.to().index()] / p.lmr_history_divisor;
                    r = r.clamp(0, new_depth - 1);
                }
                let mut score = -self.negamax(-alpha - 1, -alpha, new_depth - r, ply + 1, false);
                if score > alpha && r > 0 {
                    score = -self.negamax(-alpha - 1, -alpha, new_depth, ply + 1, false);
                }
                if score > alpha && score < beta && pv_node {
                    score = -self.negamax(-beta, -alpha, new_depth, ply + 1, true);
                }
                score
            };
            self.take_back();
            if self.stopped && ply > 0 {
                return 0;
            }
            if score > best {
                best = score;
                if score > alpha {
                    alpha = score;
                    best_move = Some(mv);
                    let (head, tail) = self.pv.split_at_mut(ply + 1);
                    head[ply].clear();
                    head[ply].push(mv);
                    head[ply].extend_from_slice(&tail[0]);
                    if score >= beta {
                        if !is_capture {
                            self.update_quiet_stats(mv, depth, ply);
                        }
                        break;
                    }
                }
            }
            if !is_capture {
                self.quiets_tried[ply].push(mv);
            }
            if self.stopped {
                break;
            }
        }
        if excluded.is_some() {
            // The singular test's search answers only whether the other moves reach its
            // bar (alpha when none was searched: the excluded move was the only one),
            // and leaves the table's entry to the node with the excluded move.
            return best.max(alpha);
        }
        if !self.stopped {
            let bound = bound_of(best, original_alpha, beta);
            let eval = if in_check { 0 } else { static_eval };
            self.shared.tt.store(key, TtData { mv: best_move, score: score_to_tt(best, ply), eval, depth, bound });
        }
        best
    }

    /// Whether the table's move `mv` (from `entry`, at a node searched to `depth` with
    /// `beta` the window's top) is singular: every other move, searched at half the
    /// depth, fails below the table's score less a margin. Such a move is extended by a
    /// ply. When even the others reach beta, the node is cut (multi-cut): two moves
    /// refute the line. Called only with "Singular Depth" on.
    fn singular_extension(&mut self, mv: Move, entry: TtData, beta: i32, depth: i32, ply: usize) -> Singular {
        let p = self.params;
        let tt_score = score_from_tt(entry.score, ply);
        let worth_testing = ply > 0
            && depth >= p.singular_depth.max(4)
            && (ply as i32) < 2 * self.root_depth
            && entry.bound != Bound::Upper
            && entry.depth >= depth - 3
            && tt_score.abs() < MATE_BOUND;
        if !worth_testing {
            return Singular::No;
        }
        let singular_beta = tt_score - p.singular_margin * depth;
        self.excluded[ply] = Some(mv);
        let score = self.negamax(singular_beta - 1, singular_beta, (depth - 1) / 2, ply, false);
        self.excluded[ply] = None;
        // The test's search used this ply's line and move buffer; the node starts over.
        self.pv[ply].clear();
        if self.stopped {
            Singular::Stopped
        } else if score < singular_beta {
            Singular::Extend
        } else if singular_beta >= beta {
            Singular::Cut(singular_beta)
        } else {
            Singular::No
        }
    }

    fn quiesce(&mut self, mut alpha: i32, beta: i32, ply: usize) -> i32 {
        self.nodes += 1;
        self.seldepth = self.seldepth.max(ply);
        if self.should_stop() {
            return 0;
        }
        if ply >= MAX_PLY {
            return self.evaluate();
        }
        let key = self.position.hash();
        let entry = self.shared.tt.probe(key);
        if let Some(score) = entry.and_then(|e| table_cutoff(e, alpha, beta, ply)) {
            return score;
        }
        let original_alpha = alpha;
        let in_check = self.position.in_check();
        let mut stand_pat = 0;
        let (mut best, selection) = if in_check {
            (-(MATE - ply as i32), Selection::All)
        } else {
            stand_pat = entry.map_or_else(|| self.evaluate(), |e| e.eval);
            if stand_pat >= beta {
                return stand_pat;
            }
            alpha = alpha.max(stand_pat);
            (stand_pat, Selection::Captures)
        };
        let mut best_move = None;
        let move_count = self.score_moves(selection, entry.and_then(|e| e.mv), ply);
        for index in 0..move_count {
            let Some(mv) = self.move_buffers[ply].pick(index) else {
                break;
            };
            if !in_check {
                let victim = self.position.piece_at(mv.to()).expect("a capture").kind;
                if best + piece_value(victim) + 200 <= alpha || see(&self.position, mv) < 0 {
                    continue;
                }
            }
            self.play(mv);
            let score = -self.quiesce(-beta, -alpha, ply + 1);
            self.take_back();
            if self.stopped {
                return 0;
            }
            if score > best {
                best = score;
                if score > alpha {
                    alpha = score;
                    best_move = Some(mv);
                    if score >= beta {
                        break;
                    }
                }
            }
        }
        let bound = bound_of(best, original_alpha, beta);
        let data = TtData { mv: best_move, score: score_to_tt(best, ply), eval: stand_pat, depth: 0, bound };
        self.shared.tt.store(key, data);
        best
    }
}

/// What the singular test found of a node's table move.
enum Singular {
    /// Not tested, or not singular.
    No,
    /// Singular: extended by a ply.
    Extend,
    /// Other moves reach beta too: the node fails high with this score.
    Cut(i32),
    /// The search was stopped during the test.
    Stopped,
}

/// A node's moves with their ordering scores, on the stack.
struct ScoredMoves {
    list: MoveList,
    scores: [i32; MAX_MOVES],
    /// Moves scored `i32::MIN` are banned and never picked.
    banned_tail: bool,
}

impl ScoredMoves {
    /// Moves the best-scored remaining move to `index` and returns it; `None` when
    /// only banned moves remain.
    fn pick(&mut self, index: usize) -> Option<Move> {
        let best = (index..self.list.len()).max_by_key(|&i| self.scores[i])?;
        if self.banned_tail && self.scores[best] == i32::MIN {
            return None;
        }
        self.list.swap(index, best);
        self.scores.swap(index, best);
        Some(self.list[index])
    }
}

/// The entry's score at `ply` if its bound settles the window (`alpha`, `beta`).
fn table_cutoff(entry: TtData, alpha: i32, beta: i32, ply: usize) -> Option<i32> {
    let score = score_from_tt(entry.score, ply);
    let settles = match entry.bound {
        Bound::Exact => true,
        Bound::Lower => score >= beta,
        Bound::Upper => score <= alpha,
    };
    settles.then_some(score)
}

/// How the best score bounds the true one, given the window it was searched with:
/// above the window's top it is a lower bound, inside the window exact (alpha was
/// raised), at or below its bottom an upper bound.
fn bound_of(best: i32, original_alpha: i32, beta: i32) -> Bound {
    if best >= beta {
        Bound::Lower
    } else if best > original_alpha {
        Bound::Exact
    } else {
        Bound::Upper
    }
}

fn score_to_tt(score: i32, ply: usize) -> i32 {
    if score >= MATE_BOUND {
        score + ply as i32
    } else if score <= -MATE_BOUND {
        score - ply as i32
    } else {
        score
    }
}

fn score_from_tt(score: i32, ply: usize) -> i32 {
    if score >= MATE_BOUND {
        score - ply as i32
    } else if score <= -MATE_BOUND {
        score + ply as i32
    } else {
        score
    }
}

/// Static exchange evaluation of the capture `mv`: the material the mover gains when
/// both sides keep recapturing on its square with their least valuable piece, each
/// free to stop. Recaptures are legal moves, so pins, cannon screens that appear or
/// vanish, and the flying general are all taken into account.
pub fn see(position: &Position, mv: Move) -> i32 {
    let victim = position.piece_at(mv.to()).map_or(0, |p| piece_value(p.kind));
    let attacker = position.piece_at(mv.from()).map_or(0, |p| piece_value(p.kind));
    if attacker <= victim {
        return victim - attacker.min(victim);
    }
    let mut board = position.clone();
    let target = mv.to();
    let mut gains = vec![victim];
    let mut on_square = attacker;
    board.make_move(mv);
    loop {
        let mut captures = MoveList::new();
        generate_into(&board, Selection::Captures, &mut captures);
        let Some(&recapture) = captures
            .iter()
            .filter(|m| m.to() == target)
            .min_by_key(|m| board.piece_at(m.from()).map_or(0, |p| piece_value(p.kind)))
        else {
            break;
        };
        gains.push(on_square - gains.last().copied().unwrap_or(0));
        on_square = board.piece_at(recapture.from()).map_or(0, |p| piece_value(p.kind));
        board.make_move(recapture);
    }
    while gains.len() > 1 {
        let last = gains.pop().expect("a gain");
        let previous = gains.last_mut().expect("a gain");
        *previous = -(-*previous).max(last);
    }
    gains[0]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The singular test's search of a node without its table move leaves the node as
    /// it found it: the table's entry for the node (which speaks for the node with
    /// that move) unwritten, and no move excluded afterwards.
    #[test]
    fn the_singular_test_neither_writes_the_nodes_entry_nor_leaves_a_move_excluded() {
        let start = Position::from_fen(crate::bench::POSITIONS[2]).unwrap();
        let shared = Shared::new(64);
        let mut options = SearchOptions::default();
        options.params.singular_depth = 4;
        let limits = Limits { depth: Some(6), ..Limits::default() };
        let first = search(&shared, &start, &[], &limits, &options, |_| {}).best.expect("a move");
        // The node after the best move, at ply 1, has an entry with a move to test.
        let mut worker =
            Worker::new(&shared, &start, &[], &options, &limits, Deadlines::default(), Instant::now(), true);
        worker.root_depth = 6;
        worker.play(first);
        let key = worker.position.hash();
        let entry = shared.tt.probe(key).expect("the reply's entry");
        let mv = entry.mv.expect("the reply's move");
        // Tested at the deepest node the entry may speak for, the test's search is
        // shallow enough that the table would take its result in place of the entry
        // (it keeps an entry over one more than two plies shallower).
        let depth = entry.depth + 3;
        assert!(entry.bound != Bound::Upper && depth >= 4, "{entry:?} would not be tested");
        assert!(entry.depth <= (depth - 1) / 2 + 2, "{entry:?}: the table would keep it anyway");
        let nodes = worker.nodes;
        let singular = worker.singular_extension(mv, entry, INFINITY, depth, 1);
        assert!(worker.nodes > nodes, "no search without the move");
        assert!(!matches!(singular, Singular::Stopped | Singular::Cut(_)));
        assert_eq!(shared.tt.probe(key), Some(entry), "the node's entry was written");
        assert_eq!(worker.excluded[1], None);
    }
}
