//! A search thread's iterative deepening: its worker made, moves played and taken back
//! on its stack, its stop checked, each iteration searched in an aspiration window.

use crate::xiangqi::movegen::{MAX_MOVES, MoveList};
use crate::xiangqi::nnue::AccumulatorStack;
use crate::xiangqi::search::ScoredMoves;
use crate::xiangqi::search::limits::{Deadlines, Limits};
use crate::xiangqi::search::{
    INFINITY, MATE, MATE_BOUND, MAX_PLY, Score, SearchInfo, SearchOptions, SearchResult, Shared, Worker,
};
use crate::xiangqi::{Move, Position};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

impl<'a> Worker<'a> {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new(
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

    pub(super) fn play(&mut self, mv: Move) {
        let undo = self.position.make_move(mv);
        self.undos.push(Some(undo));
        self.keys.push(self.position.hash());
        if let Some(nnue) = &mut self.nnue {
            nnue.push(&self.position, &undo);
        }
    }

    pub(super) fn play_null(&mut self) {
        self.position.make_null_move();
        self.undos.push(None);
        self.keys.push(self.position.hash());
        if let Some(nnue) = &mut self.nnue {
            nnue.push_null();
        }
    }

    pub(super) fn take_back(&mut self) {
        if let Some(nnue) = &mut self.nnue {
            nnue.pop();
        }
        self.keys.pop();
        match self.undos.pop().expect("a move to take back") {
            Some(undo) => self.position.unmake_move(undo),
            None => self.position.unmake_null_move(),
        }
    }

    pub(super) fn previous_move(&self) -> Option<Move> {
        self.undos.last().copied().flatten().map(|u| u.mv())
    }

    /// Checks the stop flag, the clock and the node budget.
    pub(super) fn should_stop(&mut self) -> bool {
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

    pub(super) fn total_nodes(&self) -> u64 {
        self.shared.nodes.load(Ordering::Relaxed) + self.nodes - self.reported_nodes
    }

    /// Searches one principal variation at `depth` with aspiration windows around
    /// `previous`; `None` when stopped before it completed.
    pub(super) fn aspiration(&mut self, depth: i32, previous: i32) -> Option<i32> {
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

    pub(super) fn iterate(&mut self, thread: usize, on_info: &mut dyn FnMut(&SearchInfo)) -> SearchResult {
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

    pub(super) fn iteration_limits_reached(&self, score: i32) -> bool {
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
}
