//! Swiss pairings (Article 5.3 names the system; Article 10.3 places its players).
//!
//! The book gives no pairing rules, so these follow the common Swiss principles:
//! players are ranked by points, then by their seed; each round pairs them from the top
//! down within their score group, dropping a player to the next group when the group
//! cannot pair him; two players never meet twice; colours keep each player's
//! difference between Red and Black games within ±2 and never give anyone the same
//! colour three times running; with an odd number of players the lowest-ranked player
//! who has not had one gets the bye. A depth-first search with backtracking finds the
//! first pairing, in that order of preference, that keeps every rule.

use crate::pairing::{Pairing, Round};

/// The most rounds a Swiss event of `players` can play without two players meeting
/// twice (an odd field sits one out each round).
pub fn max_rounds(players: usize) -> usize {
    players.saturating_sub(1) + players % 2
}

/// A Swiss event's rounds when none are named: enough for one player to win them all
/// and stand alone (log2 of the field, rounded up), plus two, within [`max_rounds`].
pub fn default_rounds(players: usize) -> usize {
    ((usize::BITS - (players.max(2) - 1).leading_zeros()) as usize + 2).min(max_rounds(players))
}

/// A player's record so far.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Entrant {
    /// Points so far (in any unit: only the order matters).
    pub points: f64,
    /// Opponents met, by index.
    pub opponents: Vec<usize>,
    /// Colours played, in order: `true` for Red.
    pub colours: Vec<bool>,
    /// Whether the player has had a bye.
    pub had_bye: bool,
}

impl Entrant {
    fn difference(&self) -> i32 {
        self.colours.iter().map(|&red| if red { 1 } else { -1 }).sum()
    }

    /// Whether the player may have Red (`true`) or Black next.
    fn may_play(&self, red: bool) -> bool {
        let difference = self.difference() + if red { 1 } else { -1 };
        let last_two = self.colours.len() >= 2 && self.colours[self.colours.len() - 2..].iter().all(|&c| c == red);
        difference.abs() <= 2 && !last_two
    }

    /// How much the player wants Red: positive for Red, negative for Black.
    fn wants_red(&self) -> i32 {
        let difference = self.difference();
        if difference != 0 {
            return -difference * 2;
        }
        match self.colours.last() {
            Some(&last) => {
                if last {
                    -1
                } else {
                    1
                }
            }
            None => 0,
        }
    }
}

/// The colours of a game between `a` (ranked higher) and `b`, if some are allowed.
fn colours(a: &Entrant, b: &Entrant) -> Option<(bool, bool)> {
    // The one who wants Red more gets it; the higher-ranked player decides a tie.
    let a_red = a.wants_red() >= b.wants_red();
    for a_red in [a_red, !a_red] {
        if a.may_play(a_red) && b.may_play(!a_red) {
            return Some((a_red, !a_red));
        }
    }
    None
}

/// The next round's pairings of `entrants` (their seeds are their indices: lower is
/// stronger), or `None` when no pairing keeps every rule (the event has run out of
/// rounds).
pub fn pair_round(entrants: &[Entrant]) -> Option<Round> {
    let mut ranked: Vec<usize> = (0..entrants.len()).collect();
    ranked.sort_by(|&a, &b| entrants[b].points.total_cmp(&entrants[a].points).then(a.cmp(&b)));
    let bye_candidates: Vec<Option<usize>> = if entrants.len() % 2 == 1 {
        ranked.iter().rev().filter(|&&p| !entrants[p].had_bye).map(|&p| Some(p)).collect()
    } else {
        vec![None]
    };
    for bye in bye_candidates {
        let players: Vec<usize> = ranked.iter().copied().filter(|&p| Some(p) != bye).collect();
        let mut games = Vec::with_capacity(players.len() / 2);
        if search(entrants, &players, &mut vec![false; entrants.len()], &mut games) {
            return Some(Round { games, bye });
        }
    }
    None
}

/// The order in which `top`'s opponents are tried: first its own score group's
/// unpaired players, the top half meeting the bottom half (the player half a group
/// below first, then those nearest to it), then the lower groups in rank order.
fn candidates(entrants: &[Entrant], players: &[usize], paired: &[bool], top: usize) -> Vec<usize> {
    let unpaired: Vec<usize> = players.iter().copied().filter(|&p| !paired[p] && p != top).collect();
    let (group, lower): (Vec<usize>, Vec<usize>) =
        unpaired.iter().partition(|&&p| entrants[p].points == entrants[top].points);
    let ideal = group.len() / 2;
    let mut order: Vec<(usize, usize)> = group.iter().enumerate().map(|(i, &p)| (i.abs_diff(ideal), p)).collect();
    order.sort();
    order.into_iter().map(|(_, p)| p).chain(lower).collect()
}

/// Pairs the unpaired players of `players` (in rank order), depth first.
fn search(entrants: &[Entrant], players: &[usize], paired: &mut Vec<bool>, games: &mut Vec<Pairing>) -> bool {
    let Some(position) = players.iter().position(|&p| !paired[p]) else { return true };
    let top = players[position];
    let order = candidates(entrants, players, paired, top);
    paired[top] = true;
    for other in order {
        if paired[other] || entrants[top].opponents.contains(&other) {
            continue;
        }
        let Some((top_red, _)) = colours(&entrants[top], &entrants[other]) else { continue };
        paired[other] = true;
        games.push(if top_red { Pairing { red: top, black: other } } else { Pairing { red: other, black: top } });
        if search(entrants, players, paired, games) {
            return true;
        }
        games.pop();
        paired[other] = false;
    }
    paired[top] = false;
    false
}

/// Records a round's games and bye in `entrants`; `red_points` gives Red's points in
/// each game (in order) and the bye's points are `bye_points`.
pub fn record_round(entrants: &mut [Entrant], round: &Round, red_points: &[(f64, f64)], bye_points: f64) {
    for (game, &(red, black)) in round.games.iter().zip(red_points) {
        entrants[game.red].points += red;
        entrants[game.black].points += black;
        entrants[game.red].opponents.push(game.black);
        entrants[game.black].opponents.push(game.red);
        entrants[game.red].colours.push(true);
        entrants[game.black].colours.push(false);
    }
    if let Some(bye) = round.bye {
        entrants[bye].points += bye_points;
        entrants[bye].had_bye = true;
    }
}
