//! The principal variation search at a node: the table's cut-offs, repetitions ruled
//! by the arbiter, pruning, reductions and extensions (singular ones among them), and
//! scores as the table keeps them.

use crate::color::Color;
use crate::xiangqi::eval::evaluate;
use crate::xiangqi::movegen::Selection;
use crate::xiangqi::rules::{Outcome, rule_cycle};
use crate::xiangqi::search::cutoffs::{bound_of, score_from_tt, score_to_tt, table_cutoff};
use crate::xiangqi::search::ordering::see;
use crate::xiangqi::search::tt::{Bound, TtData};
use crate::xiangqi::search::{INFINITY, MATE, MATE_BOUND, MAX_PLY, Worker};
use crate::xiangqi::{Move, PieceKind};

impl<'a> Worker<'a> {
    /// The score of the repetition the last move closed, if it closed one.
    pub(super) fn repetition_score(&mut self, ply: usize) -> Option<i32> {
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

    pub(super) fn score_cycle(&mut self, from: usize, ply: usize) -> i32 {
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
    pub(super) fn evaluate(&self) -> i32 {
        match &self.nnue {
            Some(nnue) => nnue.evaluate(self.position.side_to_move()),
            None => evaluate(&self.position),
        }
    }

    pub(super) fn has_pieces_beyond_pawns(&self, color: Color) -> bool {
        [PieceKind::Rook, PieceKind::Horse, PieceKind::Cannon].iter().any(|&k| self.position.pieces(color, k).any())
    }

    pub(super) fn negamax(&mut self, mut alpha: i32, mut beta: i32, mut depth: i32, ply: usize, pv_node: bool) -> i32 {
        self.pv[ply].clear();
        if depth <= 0 {
            return self.quiesce(alpha, beta, ply, self.params.qs_quiet_checks > 0);
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
    pub(super) fn singular_extension(
        &mut self,
        mv: Move,
        entry: TtData,
        beta: i32,
        depth: i32,
        ply: usize,
    ) -> Singular {
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
}

/// What the singular test found of a node's table move.
pub(super) enum Singular {
    /// Not tested, or not singular.
    No,
    /// Singular: extended by a ply.
    Extend,
    /// Other moves reach beta too: the node fails high with this score.
    Cut(i32),
    /// The search was stopped during the test.
    Stopped,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xiangqi::Position;
    use crate::xiangqi::search::limits::{Deadlines, Limits};
    use crate::xiangqi::search::tt::Bound;
    use crate::xiangqi::search::{INFINITY, SearchOptions, Shared, Worker, search};
    use std::time::Instant;

    /// The singular test's search of a node without its table move leaves the node as
    /// it found it: the table's entry for the node (which speaks for the node with
    /// that move) unwritten, and no move excluded afterwards.
    #[test]
    fn the_singular_test_neither_writes_the_nodes_entry_nor_leaves_a_move_excluded() {
        let start = Position::from_fen(crate::bench::positions::POSITIONS[2]).unwrap();
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
