//! Placings (Article 10): points first, then the book's tie-breaks in the book's order
//! for the tournament system. A tie-break that looks at the tied players' own games
//! (their direct encounter) is taken among the players still tied when it is reached,
//! and every criterion splits the tied group for the next.
//!
//! Technical fouls (10.2.G, 10.3.G) are not part of an engine's record and are not
//! counted. 10.3.F's "highest placing of the player's opponent" is taken as the best
//! placing by points alone among the opponents met (placings by the full order would be
//! circular).

use crate::scoring::{GameResult, Points};

/// A played game; the result is Red's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Game {
    pub red: usize,
    pub black: usize,
    pub result: GameResult,
}

/// The tournament system, which chooses the tie-breaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum System {
    /// 10.2: Neustadtl, direct encounter, wins, wins with Black, games with Black,
    /// direct encounter won with Black.
    RoundRobin,
    /// 10.3: Solkoff, direct encounter, wins, wins with Black, games with Black, the
    /// strongest opponent met.
    Swiss,
}

/// A tie-break.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TieBreak {
    /// 10.2.A: the opponents' scores, in full for a win and half for a draw.
    Neustadtl,
    /// 10.3.A: the opponents' scores added up.
    Solkoff,
    /// 10.2.B, 10.3.B: the points scored against the other players still tied.
    DirectEncounter,
    /// 10.2.C, 10.3.C.
    Wins,
    /// 10.2.D, 10.3.D.
    WinsWithBlack,
    /// 10.2.E, 10.3.E.
    GamesWithBlack,
    /// 10.2.F: the games won with Black against the other players still tied.
    DirectEncounterWithBlack,
    /// 10.3.F: the best placing by points among the opponents met (as minus the place,
    /// so that more is better).
    StrongestOpponent,
}

impl TieBreak {
    /// The article that defines it (10.2 for a round robin's, 10.3 for a Swiss').
    pub fn article(self, system: System) -> &'static str {
        match (system, self) {
            (System::RoundRobin, TieBreak::Neustadtl) => "10.2.A",
            (System::RoundRobin, TieBreak::DirectEncounter) => "10.2.B",
            (System::RoundRobin, TieBreak::Wins) => "10.2.C",
            (System::RoundRobin, TieBreak::WinsWithBlack) => "10.2.D",
            (System::RoundRobin, TieBreak::GamesWithBlack) => "10.2.E",
            (System::RoundRobin, TieBreak::DirectEncounterWithBlack) => "10.2.F",
            (System::Swiss, TieBreak::Solkoff) => "10.3.A",
            (System::Swiss, TieBreak::DirectEncounter) => "10.3.B",
            (System::Swiss, TieBreak::Wins) => "10.3.C",
            (System::Swiss, TieBreak::WinsWithBlack) => "10.3.D",
            (System::Swiss, TieBreak::GamesWithBlack) => "10.3.E",
            (System::Swiss, TieBreak::StrongestOpponent) => "10.3.F",
            _ => "not in this system",
        }
    }
}

impl System {
    /// Its tie-breaks in the book's order.
    pub fn tie_breaks(self) -> &'static [TieBreak] {
        match self {
            System::RoundRobin => &[
                TieBreak::Neustadtl,
                TieBreak::DirectEncounter,
                TieBreak::Wins,
                TieBreak::WinsWithBlack,
                TieBreak::GamesWithBlack,
                TieBreak::DirectEncounterWithBlack,
            ],
            System::Swiss => &[
                TieBreak::Solkoff,
                TieBreak::DirectEncounter,
                TieBreak::Wins,
                TieBreak::WinsWithBlack,
                TieBreak::GamesWithBlack,
                TieBreak::StrongestOpponent,
            ],
        }
    }
}

/// A player's line of the standings.
#[derive(Clone, Debug, PartialEq)]
pub struct Standing {
    pub player: usize,
    /// 1 for the winner; players no tie-break separates share a place.
    pub place: usize,
    pub points: f64,
    pub games: usize,
    pub wins: usize,
    pub draws: usize,
    pub losses: usize,
    /// The system's tie-breaks, in its order, as computed over the whole field (the
    /// direct encounters among all players tied on points).
    pub tie_breaks: Vec<(TieBreak, f64)>,
}

/// Each game from each side: (player, opponent, result, played Black).
fn sides(games: &[Game]) -> impl Iterator<Item = (usize, usize, GameResult, bool)> + '_ {
    games.iter().flat_map(|g| [(g.red, g.black, g.result, false), (g.black, g.red, g.result.reversed(), true)])
}

struct Table<'a> {
    games: &'a [Game],
    scoring: Points,
    points: Vec<f64>,
}

impl Table<'_> {
    fn value(&self, tie_break: TieBreak, player: usize, tied: &[usize]) -> f64 {
        let mine = sides(self.games).filter(|s| s.0 == player);
        let win_share = |r: GameResult| self.scoring.of(r) / self.scoring.of(GameResult::Win);
        match tie_break {
            TieBreak::Neustadtl => mine.map(|(_, o, r, _)| win_share(r) * self.points[o]).sum(),
            TieBreak::Solkoff => mine.map(|(_, o, _, _)| self.points[o]).sum(),
            TieBreak::DirectEncounter => {
                mine.filter(|s| tied.contains(&s.1)).map(|(_, _, r, _)| self.scoring.of(r)).sum()
            }
            TieBreak::Wins => mine.filter(|s| s.2 == GameResult::Win).count() as f64,
            TieBreak::WinsWithBlack => mine.filter(|s| s.2 == GameResult::Win && s.3).count() as f64,
            TieBreak::GamesWithBlack => mine.filter(|s| s.3).count() as f64,
            TieBreak::DirectEncounterWithBlack => {
                mine.filter(|s| s.2 == GameResult::Win && s.3 && tied.contains(&s.1)).count() as f64
            }
            TieBreak::StrongestOpponent => {
                let place = |p: usize| 1 + self.points.iter().filter(|&&q| q > self.points[p]).count();
                -(mine.map(|(_, o, _, _)| place(o)).min().unwrap_or(self.points.len() + 1) as f64)
            }
        }
    }

    /// `group` (tied so far) in order, as classes still tied after `criteria`.
    fn order(&self, group: Vec<usize>, criteria: &[TieBreak]) -> Vec<Vec<usize>> {
        let Some((&first, rest)) = criteria.split_first() else { return vec![group] };
        if group.len() < 2 {
            return vec![group];
        }
        let mut valued: Vec<(f64, usize)> = group.iter().map(|&p| (self.value(first, p, &group), p)).collect();
        valued.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        let mut classes = Vec::new();
        for chunk in valued.chunk_by(|a, b| a.0 == b.0) {
            classes.extend(self.order(chunk.iter().map(|&(_, p)| p).collect(), rest));
        }
        classes
    }
}

/// The standings of `players` after `games`, placed by points and `system`'s
/// tie-breaks.
pub fn standings(players: usize, games: &[Game], system: System, scoring: Points) -> Vec<Standing> {
    standings_with_byes(players, games, &[], system, scoring)
}

/// [`standings`] of a Swiss event whose `byes` (a player a round sat out) each score a
/// win's points without being a game.
pub fn standings_with_byes(
    players: usize,
    games: &[Game],
    byes: &[usize],
    system: System,
    scoring: Points,
) -> Vec<Standing> {
    let mut points = vec![0.0; players];
    for (player, _, result, _) in sides(games) {
        points[player] += scoring.of(result);
    }
    for &player in byes {
        points[player] += scoring.of(GameResult::Win);
    }
    let table = Table { games, scoring, points };
    let mut by_points: Vec<usize> = (0..players).collect();
    by_points.sort_by(|&a, &b| table.points[b].total_cmp(&table.points[a]).then(a.cmp(&b)));
    let groups: Vec<Vec<usize>> =
        by_points.chunk_by(|&a, &b| table.points[a] == table.points[b]).map(<[usize]>::to_vec).collect();
    let mut lines = Vec::with_capacity(players);
    for group in groups {
        for class in table.order(group.clone(), system.tie_breaks()) {
            let place = lines.len() + 1;
            for player in class {
                let mine: Vec<_> = sides(games).filter(|s| s.0 == player).collect();
                let count = |r: GameResult| mine.iter().filter(|s| s.2 == r).count();
                lines.push(Standing {
                    player,
                    place,
                    points: table.points[player],
                    games: mine.len(),
                    wins: count(GameResult::Win),
                    draws: count(GameResult::Draw),
                    losses: count(GameResult::Loss),
                    tie_breaks: system.tie_breaks().iter().map(|&t| (t, table.value(t, player, &group))).collect(),
                });
            }
        }
    }
    lines
}
