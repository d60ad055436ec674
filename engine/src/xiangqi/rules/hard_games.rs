//! Rule-hard games: a source of games for verification where the repetition rules are
//! tested hardest, which self-play seldom reaches: positions revisited by other routes,
//! shuttles, checks and chases by one piece and by several in turn, on boards thinned by
//! captures so that unprotected pieces, pins and discovered attacks are common.
//!
//! Game `n` is the same on every build and machine (its moves are drawn from SplitMix64
//! seeded with `n`, not from a library generator whose algorithm may change), so a
//! verification job can name its games by number and any worker can play them again.

use crate::splitmix::splitmix64;
use crate::xiangqi::movegen::legal_moves;
use crate::xiangqi::pgn::PgnGame;
use crate::xiangqi::{Move, PieceKind, Position, fen};

/// Random numbers from SplitMix64.
struct Draw(u64);

impl Draw {
    fn below(&mut self, bound: usize) -> usize {
        let (state, value) = splitmix64(self.0);
        self.0 = state;
        (value % bound as u64) as usize
    }

    fn pick(&mut self, moves: &[Move]) -> Move {
        moves[self.below(moves.len())]
    }
}

/// Plies of random play, captures preferred, that thin the board before the game.
const THINNING_PLIES: (usize, usize) = (10, 60);
/// Plies of the game itself.
const GAME_PLIES: (usize, usize) = (60, 160);

/// The rule-hard game `number` as a game record (its start as the FEN tag, its moves in
/// the product's coordinates): what a verification job of generated games verifies, as
/// it verifies a PGN's games.
pub fn hard_game_pgn(number: u64) -> PgnGame {
    let (start, moves) = hard_game(number);
    PgnGame {
        tags: vec![("FEN".to_owned(), fen::to_fen(&start))],
        notes: vec![None; moves.len()],
        moves: moves.iter().map(ToString::to_string).collect(),
        result: None,
        comment: None,
    }
}

/// The rule-hard game number `number`: its start position (the standard one thinned by
/// random captures) and its moves.
pub fn hard_game(number: u64) -> (Position, Vec<Move>) {
    let mut draw = Draw(number ^ 0x5851_F42D_4C95_7F2D);
    let mut start = Position::startpos();
    for _ in 0..THINNING_PLIES.0 + draw.below(THINNING_PLIES.1 - THINNING_PLIES.0) {
        let legal = legal_moves(&start);
        if legal.is_empty() {
            break;
        }
        let captures: Vec<Move> = legal.iter().copied().filter(|mv| start.piece_at(mv.to()).is_some()).collect();
        let mv = if !captures.is_empty() && draw.below(10) < 6 { draw.pick(&captures) } else { draw.pick(&legal) };
        start.make_move(mv);
    }
    let mut position = start.clone();
    let mut moves = Vec::new();
    // Each side's moves that can be taken back (quiet moves of pieces that can step back),
    // latest last: taking one back other than the latest returns by another route.
    let mut outings: [Vec<Move>; 2] = [Vec::new(), Vec::new()];
    // Whether each move checked or attacked.
    let mut attacking = Vec::new();
    for ply in 0..GAME_PLIES.0 + draw.below(GAME_PLIES.1 - GAME_PLIES.0) {
        let legal = legal_moves(&position);
        if legal.is_empty() {
            break;
        }
        let side = position.side_to_move().index();
        let back = |mv: &Move| Move::new(mv.to(), mv.from());
        // The mover's previous move taken back, or made again: shuttles, and after a
        // checking or attacking move, perpetuals; kept up more often after one.
        let shuttle = ply.checked_sub(2).map(|previous| back(&moves[previous])).filter(|mv| legal.contains(mv));
        let after_forcing = ply >= 2 && attacking[ply - 2];
        let chosen = match draw.below(100) {
            0..45 => shuttle,
            45..75 if after_forcing && shuttle.is_some() => shuttle,
            75..82 if !outings[side].is_empty() => {
                let older = outings[side][draw.below(outings[side].len())];
                Some(back(&older)).filter(|mv| legal.contains(mv))
            }
            45..75 | 82..92 => {
                let forcing: Vec<Move> = legal.iter().copied().filter(|&mv| forcing(&mut position, mv)).collect();
                (!forcing.is_empty()).then(|| draw.pick(&forcing))
            }
            _ => None,
        };
        let mv = chosen.unwrap_or_else(|| draw.pick(&legal));
        if let Some(index) = outings[side].iter().position(|outing| back(outing) == mv) {
            outings[side].remove(index);
        } else if position.piece_at(mv.to()).is_none()
            && position.piece_at(mv.from()).is_some_and(|piece| piece.kind != PieceKind::Pawn)
        {
            outings[side].push(mv);
        }
        attacking.push(forcing(&mut position, mv));
        position.make_move(mv);
        moves.push(mv);
    }
    (start, moves)
}

/// Whether `mv` checks, or leaves the moved piece attacking an enemy piece: a candidate
/// chase, protected target or not (the arbiter decides which are chases).
fn forcing(position: &mut Position, mv: Move) -> bool {
    if position.gives_check(mv) {
        return true;
    }
    let mover = position.side_to_move();
    let undo = position.make_move(mv);
    let piece = position.piece_at(mv.to()).expect("the moved piece");
    let attacked = position.pseudo_targets(piece, mv.to()) & position.pieces_of(!mover);
    position.unmake_move(undo);
    attacked.any()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xiangqi::rules::verdicts::verdicts;
    use crate::xiangqi::rules::{Reason, RuleSet};

    #[test]
    fn a_game_number_gives_the_same_game_every_time() {
        assert_eq!(hard_game(7), hard_game(7));
        assert_ne!(hard_game(7), hard_game(8));
    }

    #[test]
    fn the_games_reach_the_repetition_rulings() {
        let mut reasons = std::collections::BTreeSet::new();
        for number in 0..300 {
            let (start, moves) = hard_game(number);
            for verdict in verdicts(&start, &moves, &[RuleSet::Wxf]) {
                reasons.extend(verdict.ended.map(|(_, ruling)| ruling.reason.to_string()));
            }
        }
        for reason in [Reason::PerpetualCheck, Reason::PerpetualChase, Reason::Repetition] {
            assert!(reasons.contains(&reason.to_string()), "{reason} missing from {reasons:?}");
        }
    }
}
