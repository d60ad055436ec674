//! Quiescence: captures (and evasions in check) searched to a quiet position, losing
//! captures cut by static exchange evaluation; at its first ply, when the search's
//! "QS Quiet Checks" is on, quiet checks that lose nothing by exchange too.

use crate::xiangqi::eval::piece_value;
use crate::xiangqi::movegen::Selection;
use crate::xiangqi::search::cutoffs::{bound_of, score_to_tt, table_cutoff};
use crate::xiangqi::search::ordering::see;
use crate::xiangqi::search::tt::TtData;
use crate::xiangqi::search::{MATE, MAX_PLY, Worker};

impl<'a> Worker<'a> {
    /// `checks`: whether quiet checks are searched here (the first ply only: deeper,
    /// checks and evasions could go on without end).
    pub(super) fn quiesce(&mut self, mut alpha: i32, beta: i32, ply: usize, checks: bool) -> i32 {
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
        let tt_move = entry.and_then(|e| e.mv);
        let mut move_count = self.score_moves(selection, tt_move, ply);
        if checks && !in_check {
            move_count = self.add_quiet_checks(tt_move, ply);
        }
        for index in 0..move_count {
            let Some(mv) = self.move_buffers[ply].pick(index) else {
                break;
            };
            if !in_check {
                // A capture that cannot lift the score to alpha even unanswered is not
                // searched (delta pruning); a quiet check gains no material to count.
                let hopeless = self
                    .position
                    .piece_at(mv.to())
                    .is_some_and(|victim| best + piece_value(victim.kind) + 200 <= alpha);
                if hopeless || see(&self.position, mv) < 0 {
                    continue;
                }
            }
            self.play(mv);
            let score = -self.quiesce(-beta, -alpha, ply + 1, false);
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
