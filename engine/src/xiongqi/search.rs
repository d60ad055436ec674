//! A compact search for Xiongqi: iterative deepening alpha-beta with a capture-only
//! quiescence and an evaluation made for its pieces. Check is no restriction here, so
//! a terminal piece left en prise is simply captured: capturing it scores as mate.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use super::movegen::pseudo_legal_moves;
use super::{Game, PieceKind, Position, XiongqiMove};
use crate::color::Color;
use crate::xiangqi::search::limits::{Limits, TimePlan};

const MATE: i32 = 30_000;
const INFINITY: i32 = 32_000;
const MAX_DEPTH: i32 = 64;

/// Material by kind, in [`PieceKind::ALL`] order; terminal pieces are priceless and
/// scored by the search instead.
const VALUE: [i32; 9] = [0, 150, 900, 500, 350, 400, 100, 0, 1_250];

fn piece_value(kind: PieceKind) -> i32 {
    VALUE[kind.index()]
}

/// The evaluation from the side to move's view: material, soldiers' progress, and
/// the exposure of each terminal piece to enemy attack.
pub fn evaluate(position: &Position) -> i32 {
    let us = position.side_to_move();
    let mut score = 0;
    for color in Color::ALL {
        let sign = if color == us { 1 } else { -1 };
        for (sq, piece) in position.pieces_of(color) {
            let mut value = piece_value(piece.kind);
            if piece.kind == PieceKind::Soldier {
                let progress = if color == Color::Red { sq.rank() as i32 - 2 } else { 5 - sq.rank() as i32 };
                value += 12 * progress + if progress >= 2 { 40 } else { 0 };
            }
            score += sign * value;
        }
    }
    score + 10
}

/// What a search found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct XiongqiSearchResult {
    /// The move to play; `None` when there is none.
    pub best: Option<XiongqiMove>,
    /// Its score, from the mover's view (beyond ±29,000: a forced win or loss).
    pub score: i32,
    /// The last depth completed.
    pub depth: i32,
    /// Nodes searched.
    pub nodes: u64,
}

struct Searcher<'a> {
    game: &'a mut Game,
    stop: &'a AtomicBool,
    limits: &'a Limits,
    started: Instant,
    hard: Option<std::time::Duration>,
    nodes: u64,
    stopped: bool,
    /// The best root move of the iteration in progress.
    best_root: Option<XiongqiMove>,
}

impl Searcher<'_> {
    fn out_of_budget(&mut self) -> bool {
        if self.nodes & 1023 == 0 {
            self.stopped |=
                self.stop.load(Ordering::Relaxed) || self.hard.is_some_and(|hard| self.started.elapsed() >= hard);
        }
        self.stopped |= self.limits.nodes.is_some_and(|n| self.nodes >= n);
        self.stopped
    }

    fn ordered(&self, mut moves: Vec<XiongqiMove>) -> Vec<XiongqiMove> {
        let position = self.game.position();
        moves.sort_by_key(|mv| {
            let victim = position
                .piece_at(mv.to)
                .map_or(-1, |p| if p.kind.is_terminal() { 10_000 } else { piece_value(p.kind) });
            let promotion = mv.promotion.map_or(0, piece_value);
            std::cmp::Reverse(victim * 4 + promotion)
        });
        moves
    }

    fn negamax(&mut self, depth: i32, mut alpha: i32, beta: i32, ply: i32) -> i32 {
        self.nodes += 1;
        let us = self.game.position().side_to_move();
        if self.game.position().terminal(us).is_none() {
            return -(MATE - ply);
        }
        if ply > 0 && self.out_of_budget() {
            return 0;
        }
        if ply > 0 && self.game.position().halfmove_clock() >= 100 {
            return 0;
        }
        if depth <= 0 {
            return self.quiesce(alpha, beta, ply);
        }
        let moves = self.game.legal_moves();
        if moves.is_empty() {
            return -(MATE - ply);
        }
        let mut best = -INFINITY;
        for mv in self.ordered(moves) {
            self.game.push(mv);
            let score = -self.negamax(depth - 1, -beta, -alpha, ply + 1);
            self.game.undo();
            if self.stopped && (ply > 0 || depth > 1) {
                return 0;
            }
            if score > best {
                best = score;
                if ply == 0 {
                    self.best_root = Some(mv);
                }
                alpha = alpha.max(score);
                if alpha >= beta {
                    break;
                }
            }
        }
        best
    }

    fn quiesce(&mut self, mut alpha: i32, beta: i32, ply: i32) -> i32 {
        self.nodes += 1;
        let stand_pat = evaluate(self.game.position());
        if stand_pat >= beta || ply >= MAX_DEPTH * 2 {
            return stand_pat;
        }
        alpha = alpha.max(stand_pat);
        let mut best = stand_pat;
        // A capture changes the material, so it never recreates a position: every
        // capture the movement rules allow is legal.
        let captures: Vec<XiongqiMove> = pseudo_legal_moves(self.game.position())
            .into_iter()
            .filter(|mv| self.game.position().piece_at(mv.to).is_some())
            .collect();
        for mv in self.ordered(captures) {
            self.game.push(mv);
            let score = -self.negamax(0, -beta, -alpha, ply + 1);
            self.game.undo();
            if score > best {
                best = score;
                alpha = alpha.max(score);
                if alpha >= beta {
                    break;
                }
            }
        }
        best
    }
}

/// Searches the game's current position within `limits` (depth, nodes, movetime or
/// clock), until `stop` is raised.
pub fn search(
    game: &mut Game,
    limits: &Limits,
    stop: &AtomicBool,
    overhead: std::time::Duration,
) -> XiongqiSearchResult {
    let deadlines = limits.deadlines(overhead, &TimePlan::default());
    let max_depth = limits.depth.unwrap_or(MAX_DEPTH).clamp(1, MAX_DEPTH);
    let mut searcher = Searcher {
        game,
        stop,
        limits,
        started: Instant::now(),
        hard: deadlines.hard,
        nodes: 0,
        stopped: false,
        best_root: None,
    };
    let mut result = XiongqiSearchResult { best: None, score: 0, depth: 0, nodes: 0 };
    for depth in 1..=max_depth {
        searcher.best_root = None;
        let score = searcher.negamax(depth, -INFINITY, INFINITY, 0);
        if searcher.stopped && depth > 1 {
            break;
        }
        let Some(mv) = searcher.best_root else {
            break;
        };
        result = XiongqiSearchResult { best: Some(mv), score, depth, nodes: searcher.nodes };
        let past_soft = deadlines.soft.is_some_and(|soft| searcher.started.elapsed() >= soft);
        if searcher.stopped || past_soft || score.abs() >= MATE - MAX_DEPTH {
            break;
        }
    }
    result.nodes = searcher.nodes;
    result
}
