//! Move ordering: each move's score (the table's move, captures by exchange, killers,
//! history and counter-moves), picked best first, and the quiet history updated.

use crate::xiangqi::eval::piece_value;
use crate::xiangqi::movegen::{MoveList, Selection, generate_into, quiet_checks_into};
use crate::xiangqi::search::{ScoredMoves, Worker};
use crate::xiangqi::{Move, Position};

impl<'a> Worker<'a> {
    pub(super) fn order_score(&self, mv: Move, tt_move: Option<Move>, ply: usize) -> i32 {
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
    pub(super) fn score_moves(&mut self, selection: Selection, tt_move: Option<Move>, ply: usize) -> usize {
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

    /// Appends the node's quiet checks to the moves scored into the buffer of `ply`,
    /// scored as quiet moves are (below every capture): quiescence's first ply.
    pub(super) fn add_quiet_checks(&mut self, tt_move: Option<Move>, ply: usize) -> usize {
        let start = self.move_buffers[ply].list.len();
        quiet_checks_into(&self.position, &mut self.move_buffers[ply].list);
        let count = self.move_buffers[ply].list.len();
        for index in start..count {
            let mv = self.move_buffers[ply].list[index];
            self.move_buffers[ply].scores[index] = self.order_score(mv, tt_move, ply);
        }
        count
    }

    pub(super) fn update_quiet_stats(&mut self, best: Move, depth: i32, ply: usize) {
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
}

impl ScoredMoves {
    /// Moves the best-scored remaining move to `index` and returns it; `None` when
    /// only banned moves remain.
    pub(super) fn pick(&mut self, index: usize) -> Option<Move> {
        let best = (index..self.list.len()).max_by_key(|&i| self.scores[i])?;
        if self.banned_tail && self.scores[best] == i32::MIN {
            return None;
        }
        self.list.swap(index, best);
        self.scores.swap(index, best);
        Some(self.list[index])
    }
}

/// Static exchange evaluation of the capture `mv`: the material the mover gains when
/// both sides keep recapturing on its square with their least valuable piece, each
/// free to stop. Recaptures are legal moves, so pins, cannon screens that appear or
/// vanish, and the flying general are all taken into account.
pub(super) fn see(position: &Position, mv: Move) -> i32 {
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
