//! Balanced openings for a book: the default book every test plays when its author
//! names none (`books/xiangqi-8ply.epd.zst`, written by `xq-engine openings`).
//!
//! A test's openings must be many (a 100,000-pair SPRT plays each once), varied (a few
//! openings replayed make the pairs' games alike, and the test learns less from each)
//! and balanced (an opening that decides its pair's games tells nothing of the
//! engines). Each opening is a walk of a few plies from the start position in which
//! each move is drawn at random among the moves a shallow search finds close to the
//! best, so that no side throws material away, and it is kept when a deeper search
//! scores its last position within a small margin. Opening `n` depends only on the
//! settings and `n`, so that ranges of openings can be made apart and joined.

use std::collections::HashSet;
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::movegen::legal_moves;
use super::nnue::Network;
use super::search::limits::Limits;
use super::search::{Score, SearchOptions, Shared, search};
use super::{Move, Position, fen};

/// How openings are drawn and kept.
#[derive(Clone, Debug)]
pub struct OpeningSettings {
    /// Plies from the start position.
    pub plies: usize,
    /// The depth of the search that scores each ply's moves.
    pub pick_depth: i32,
    /// A move may be drawn when it scores within this many centipawns of the best.
    pub pick_margin: i32,
    /// The depth of the search that scores the opening's last position.
    pub depth: i32,
    /// An opening is kept when that search scores it within this many centipawns.
    pub balance: i32,
    /// Opening `n` draws its moves seeded `seed + n`.
    pub seed: u64,
    /// The net that evaluates; `None`: the handcrafted evaluation.
    pub network: Option<Arc<Network>>,
}

/// A candidate opening drawn by [`draw`], before the balance check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Drawn {
    /// The moves from the start position.
    pub moves: Vec<Move>,
    /// The position they lead to.
    pub position: Position,
}

/// What became of one candidate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Kept: its FEN.
    Kept(String),
    /// A position already kept or refused (transpositions are one opening).
    Repeated,
    /// Scored outside the balance, centipawns from the side to move (mates as ±100,000).
    Unbalanced(i32),
    /// The walk met a position without a move, or the side to move is in check at its end.
    Unfit,
}

/// Draws opening `n`: each ply's move at random among those within `pick_margin` of
/// the best at `pick_depth`. `None` when a position on the way has no legal move.
pub fn draw(settings: &OpeningSettings, n: u64) -> Option<Drawn> {
    let mut rng = StdRng::seed_from_u64(settings.seed.wrapping_add(n));
    let start = Position::startpos();
    let mut position = start.clone();
    let mut moves = Vec::with_capacity(settings.plies);
    // A table of its own per opening: opening `n` is the same whatever came before it.
    let shared = Shared::new(1);
    for _ in 0..settings.plies {
        let legal = legal_moves(&position);
        if legal.is_empty() {
            return None;
        }
        let options =
            SearchOptions { multipv: legal.len(), network: settings.network.clone(), ..SearchOptions::default() };
        let limits = Limits { depth: Some(settings.pick_depth), ..Limits::default() };
        let mut scored: Vec<(Move, i32)> = Vec::with_capacity(legal.len());
        search(&shared, &start, &moves, &limits, &options, |info| {
            if info.multipv == 1 {
                scored.clear();
            }
            if let Some(&first) = info.pv.first()
                && info.depth == settings.pick_depth
            {
                scored.push((first, centipawns(info.score)));
            }
        });
        let best = scored.iter().map(|&(_, score)| score).max()?;
        let near: Vec<Move> =
            scored.iter().filter(|&&(_, score)| score >= best - settings.pick_margin).map(|&(mv, _)| mv).collect();
        let mv = near[rng.random_range(0..near.len())];
        position.play(mv).expect("searched moves are legal");
        moves.push(mv);
    }
    Some(Drawn { moves, position })
}

/// Judges a drawn opening: kept when it is new (by its board and side to move, in
/// `seen`), not in check and scored within the balance at `depth`.
pub fn judge(settings: &OpeningSettings, drawn: &Drawn, seen: &mut HashSet<String>) -> Verdict {
    let text = fen::to_fen(&drawn.position);
    let key: String = text.split(' ').take(2).collect::<Vec<_>>().join(" ");
    if !seen.insert(key) {
        return Verdict::Repeated;
    }
    if drawn.position.in_check() || legal_moves(&drawn.position).is_empty() {
        return Verdict::Unfit;
    }
    let options = SearchOptions { network: settings.network.clone(), ..SearchOptions::default() };
    let limits = Limits { depth: Some(settings.depth), ..Limits::default() };
    let result = search(&Shared::new(1), &Position::startpos(), &drawn.moves, &limits, &options, |_| {});
    match centipawns(result.score) {
        score if score.abs() <= settings.balance => Verdict::Kept(text),
        score => Verdict::Unbalanced(score),
    }
}

/// Centipawns, a mate as ±100,000.
fn centipawns(score: Score) -> i32 {
    match score {
        Score::Centipawns(cp) => cp,
        Score::Mate(moves) if moves > 0 => 100_000,
        Score::Mate(_) => -100_000,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xiangqi::eval::evaluate;

    fn settings() -> OpeningSettings {
        OpeningSettings { plies: 6, pick_depth: 2, pick_margin: 30, depth: 4, balance: 80, seed: 7, network: None }
    }

    #[test]
    fn an_opening_is_the_same_whenever_it_is_drawn() {
        let settings = settings();
        let later = draw(&settings, 5).unwrap();
        for n in 0..5 {
            draw(&settings, n);
        }
        assert_eq!(draw(&settings, 5).unwrap(), later);
        assert_ne!(draw(&settings, 6).unwrap().moves, later.moves, "another seed draws another walk");
    }

    #[test]
    fn openings_are_legal_walks_that_keep_the_material_even() {
        let settings = settings();
        for n in 0..20 {
            let drawn = draw(&settings, n).unwrap();
            assert_eq!(drawn.moves.len(), settings.plies);
            let mut replayed = Position::startpos();
            for &mv in &drawn.moves {
                replayed.play(mv).unwrap();
            }
            assert_eq!(replayed, drawn.position);
            // Near-best moves never give a piece away: the handcrafted material stays
            // within a pawn or so after six plies.
            assert!(evaluate(&drawn.position).abs() < 200, "opening {n}: {}", fen::to_fen(&drawn.position));
        }
    }

    #[test]
    fn kept_openings_are_new_and_within_the_balance() {
        let settings = settings();
        let mut seen = HashSet::new();
        let mut kept = 0;
        for n in 0..20 {
            let drawn = draw(&settings, n).unwrap();
            match judge(&settings, &drawn, &mut seen) {
                Verdict::Kept(text) => {
                    kept += 1;
                    assert_eq!(fen::parse(&text).unwrap(), drawn.position);
                    assert_eq!(judge(&settings, &drawn, &mut seen), Verdict::Repeated);
                }
                Verdict::Unbalanced(score) => assert!(score.abs() > settings.balance),
                Verdict::Repeated | Verdict::Unfit => {}
            }
        }
        assert!(kept >= 10, "only {kept} of 20 openings kept");
    }
}
