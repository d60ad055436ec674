//! Who plays whom, and with which colour.
//!
//! Round robins follow the Berger tables of the World Xiangqi Rules' Appendix: with
//! players numbered from 1, round 1 pairs 1 with N, 2 with N - 1 and so on; each next
//! round adds N / 2 to every number but N's (counting 1 to N - 1 round again), in the
//! same table order, while N changes colour each round. The smaller number has Red in
//! round 1 and colours alternate from there; an odd field adds an N that is a bye. A
//! double round robin plays the tables twice, colours swapped the second time
//! ("the players would alternate the colors for their two games").

/// A game of a round: players by index from 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Pairing {
    /// The player with Red.
    pub red: usize,
    /// The player with Black.
    pub black: usize,
}

/// One round.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Round {
    /// Its games, in the table's order.
    pub games: Vec<Pairing>,
    /// The player who sits out (an odd field), if any.
    pub bye: Option<usize>,
}

/// The Berger table for `even` players (an even number, at least 2) as the Appendix
/// prints it: each round's pairs (Red, Black), numbered from 1.
pub fn berger_table(even: usize) -> Vec<Vec<(usize, usize)>> {
    assert!(even >= 2 && even.is_multiple_of(2), "a Berger table is for an even number of players");
    let last = even;
    let others = even - 1;
    let half = even / 2;
    let mut round: Vec<(usize, usize)> = (1..=half).map(|i| (i, last + 1 - i)).collect();
    let mut rounds = vec![round.clone()];
    for number in 2..even {
        let shift = |p: usize| if p == last { last } else { (p - 1 + half) % others + 1 };
        round = round
            .iter()
            .map(|&(red, black)| {
                let (red, black) = (shift(red), shift(black));
                // N alternates: Black in odd rounds, Red in even ones.
                match (red == last || black == last, number % 2 == 0) {
                    (true, true) => (last, red.min(black)),
                    (true, false) => (red.min(black), last),
                    (false, _) => (red, black),
                }
            })
            .collect();
        rounds.push(round.clone());
    }
    rounds
}

/// A round robin of `players` (at least 2): one cycle of the Berger tables, or two
/// with colours swapped for a double round robin.
pub fn round_robin(players: usize, double: bool) -> Vec<Round> {
    assert!(players >= 2, "a round robin needs two players");
    let even = players + players % 2;
    let single: Vec<Round> = berger_table(even)
        .into_iter()
        .map(|pairs| {
            let mut round = Round::default();
            for (red, black) in pairs {
                if red > players {
                    round.bye = Some(black - 1);
                } else if black > players {
                    round.bye = Some(red - 1);
                } else {
                    round.games.push(Pairing { red: red - 1, black: black - 1 });
                }
            }
            round
        })
        .collect();
    let mut rounds = single.clone();
    if double {
        rounds.extend(single.into_iter().map(|round| Round {
            games: round.games.iter().map(|g| Pairing { red: g.black, black: g.red }).collect(),
            bye: round.bye,
        }));
    }
    rounds
}

/// A gauntlet: each of the first `challengers` players plays each of the `field`
/// players after them `games_per_opponent` times, the challenger Red in the even
/// repetitions and Black in the odd ones (an even number gives both colours equally).
pub fn gauntlet(challengers: usize, field: usize, games_per_opponent: usize) -> Vec<Pairing> {
    let mut games = Vec::with_capacity(challengers * field * games_per_opponent);
    for repeat in 0..games_per_opponent {
        for challenger in 0..challengers {
            for opponent in challengers..challengers + field {
                games.push(if repeat.is_multiple_of(2) {
                    Pairing { red: challenger, black: opponent }
                } else {
                    Pairing { red: opponent, black: challenger }
                });
            }
        }
    }
    games
}

/// A knockout bracket's first round for `players` seeded 0 (strongest) to `players -
/// 1`: matches of seeds placed so that the two strongest can meet only in the final, the
/// four strongest not before the semi-finals, and so on (Article 10.1 spreads the seeds);
/// when the field is not a power of two the strongest seeds have byes (`None`).
pub fn knockout_bracket(players: usize) -> Vec<(usize, Option<usize>)> {
    let size = players.max(2).next_power_of_two();
    // Seeds by bracket position: [1, 2] grows to [1, 4, 2, 3], then [1, 8, 4, 5, 2, 7,
    // 3, 6]: each seed s is joined by size + 1 - s.
    let mut order = vec![1usize];
    while order.len() < size {
        let width = order.len() * 2;
        order = order.iter().flat_map(|&s| [s, width + 1 - s]).collect();
    }
    order
        .chunks(2)
        .map(|pair| {
            let (a, b) = (pair[0] - 1, pair[1] - 1);
            (a, (b < players).then_some(b))
        })
        .collect()
}

/// Who goes on from a knockout match of seeds `a` and `b` (lower numbers are stronger)
/// that scored `points` over all its games, tie-breaks included: the one with more, or
/// the higher seed when still level (Article 10.1's last resort). The second value says
/// whether the seed decided.
pub fn knockout_winner(a: usize, b: usize, points: (f64, f64)) -> (usize, bool) {
    if points.0 == points.1 {
        (a.min(b), true)
    } else if points.1 > points.0 {
        (b, false)
    } else {
        (a, false)
    }
}

/// A knockout's next round from the last round's winners in bracket order: neighbours
/// meet, the higher seed named first; a winner left alone goes on with a bye.
pub fn next_knockout_round(winners: &[usize]) -> Vec<(usize, Option<usize>)> {
    winners
        .chunks(2)
        .map(|c| match c {
            [a, b] => ((*a).min(*b), Some((*a).max(*b))),
            _ => (c[0], None),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pair_meets_once_per_cycle_and_colours_balance() {
        for players in 2..=21 {
            let rounds = round_robin(players, false);
            assert_eq!(rounds.len(), players - 1 + players % 2);
            let mut met = std::collections::HashSet::new();
            let mut reds = vec![0i64; players];
            for round in &rounds {
                let mut seen = std::collections::HashSet::new();
                for g in &round.games {
                    assert!(met.insert((g.red.min(g.black), g.red.max(g.black))), "{players}: {g:?} twice");
                    assert!(seen.insert(g.red) && seen.insert(g.black), "{players}: a player twice in a round");
                    reds[g.red] += 1;
                    reds[g.black] -= 1;
                }
                assert_eq!(seen.len() + usize::from(round.bye.is_some()), players);
            }
            assert_eq!(met.len(), players * (players - 1) / 2);
            // A single cycle cannot give everyone equal colours, but nobody is more
            // than one game off.
            assert!(reds.iter().all(|r| r.abs() <= 1), "{players}: {reds:?}");
            let double = round_robin(players, true);
            let mut reds = vec![0i64; players];
            for g in double.iter().flat_map(|r| &r.games) {
                reds[g.red] += 1;
                reds[g.black] -= 1;
            }
            assert!(reds.iter().all(|&r| r == 0), "{players}: a double round robin balances colours");
        }
    }

    #[test]
    fn knockout_seeds_meet_as_late_as_their_rank_allows() {
        assert_eq!(knockout_bracket(4), [(0, Some(3)), (1, Some(2))]);
        assert_eq!(knockout_bracket(8), [(0, Some(7)), (3, Some(4)), (1, Some(6)), (2, Some(5))]);
        // Six players: the two strongest have byes.
        assert_eq!(knockout_bracket(6), [(0, None), (3, Some(4)), (1, None), (2, Some(5))]);
        for players in 2..=64 {
            let bracket = knockout_bracket(players);
            let mut seen: Vec<usize> = bracket.iter().flat_map(|&(a, b)| std::iter::once(a).chain(b)).collect();
            seen.sort();
            assert_eq!(seen, (0..players).collect::<Vec<_>>());
            // Seeds 0 and 1 are in different halves (in a final when there are two).
            let half = bracket.len() / 2;
            if half > 0 {
                assert!(bracket[..half].iter().any(|m| m.0 == 0) && bracket[half..].iter().any(|m| m.0 == 1));
            }
        }
    }

    #[test]
    fn a_knockout_goes_on_with_the_winners_and_the_higher_seed_when_level() {
        assert_eq!(knockout_winner(0, 3, (1.0, 3.0)), (3, false));
        assert_eq!(knockout_winner(0, 3, (3.0, 1.0)), (0, false));
        assert_eq!(knockout_winner(2, 1, (2.0, 2.0)), (1, true), "level: the higher seed, named second here");
        // Eight players, seeds 0 and 1 win through: they meet in the final.
        let mut round = knockout_bracket(8);
        for _ in 0..2 {
            let winners: Vec<usize> =
                round.iter().map(|&(a, b)| knockout_winner(a, b.unwrap(), (1.0, 0.0)).0).collect();
            round = next_knockout_round(&winners);
        }
        assert_eq!(round, [(0, Some(1))]);
        assert_eq!(next_knockout_round(&[4, 2, 7]), [(2, Some(4)), (7, None)]);
    }

    #[test]
    fn a_gauntlet_gives_each_side_both_colours() {
        let games = gauntlet(2, 3, 2);
        assert_eq!(games.len(), 12);
        for challenger in 0..2 {
            for opponent in 2..5 {
                let red = games.iter().filter(|g| g.red == challenger && g.black == opponent).count();
                let black = games.iter().filter(|g| g.black == challenger && g.red == opponent).count();
                assert_eq!((red, black), (1, 1));
            }
        }
    }
}
