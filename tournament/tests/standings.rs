//! Placings worked by hand from Articles 9 and 10 of the World Xiangqi Rules (2/1/0
//! points), each example deciding a tie at the article it cites.

use xq_tournament::scoring::GameResult::{self, Draw, Loss, Win};
use xq_tournament::scoring::Points;
use xq_tournament::standings::{Game, Standing, System, TieBreak, standings};

const A: usize = 0;
const B: usize = 1;
const C: usize = 2;
const D: usize = 3;
const E: usize = 4;

fn game(red: usize, black: usize, result: GameResult) -> Game {
    Game { red, black, result }
}

fn order(lines: &[Standing]) -> Vec<(usize, usize)> {
    lines.iter().map(|l| (l.player, l.place)).collect()
}

fn tie_break(line: &Standing, which: TieBreak) -> f64 {
    line.tie_breaks.iter().find(|t| t.0 == which).unwrap().1
}

/// A 5, B 3, D 3, C 1. B and D have equal Neustadtl scores (10.2.A): B beat D (3)
/// and drew C (half of 1) = 3.5; D drew A (half of 5) and beat C (1) = 3.5. B beat D:
/// the direct encounter (10.2.B) places B second.
#[test]
fn article_10_2_b_the_direct_encounter_breaks_an_equal_neustadtl_score() {
    let games =
        [game(A, B, Win), game(A, C, Win), game(A, D, Draw), game(B, C, Draw), game(B, D, Win), game(C, D, Loss)];
    let lines = standings(4, &games, System::RoundRobin, Points::TwoOneZero);
    assert_eq!(order(&lines), [(A, 1), (B, 2), (D, 3), (C, 4)]);
    assert_eq!(lines.iter().map(|l| l.points).collect::<Vec<_>>(), [5.0, 3.0, 3.0, 1.0]);
    assert_eq!(tie_break(&lines[1], TieBreak::Neustadtl), 3.5);
    assert_eq!(tie_break(&lines[2], TieBreak::Neustadtl), 3.5);
    assert_eq!(tie_break(&lines[1], TieBreak::DirectEncounter), 2.0);
    assert_eq!(tie_break(&lines[2], TieBreak::DirectEncounter), 0.0);
    assert_eq!(TieBreak::DirectEncounter.article(System::RoundRobin), "10.2.B");
}

/// A 6, then E and B on 4: E's Neustadtl (10.2.A) is 9.5 (beat A: 6; drew B and D:
/// 2 and 1.5) against B's 6.5 (beat C: 3; drew D and E: 1.5 and 2). C and D on 3 have
/// equal Neustadtl scores (C: beat E 4, drew D 1.5; D: drew B 2, C 1.5, E 2: 5.5 each)
/// and drew each other (10.2.B); C won a game, D none (10.2.C).
#[test]
fn article_10_2_a_and_c_neustadtl_then_wins() {
    let games = [
        game(A, B, Win),
        game(A, C, Win),
        game(A, D, Win),
        game(A, E, Loss),
        game(B, C, Win),
        game(B, D, Draw),
        game(B, E, Draw),
        game(C, D, Draw),
        game(C, E, Win),
        game(D, E, Draw),
    ];
    let lines = standings(5, &games, System::RoundRobin, Points::TwoOneZero);
    assert_eq!(order(&lines), [(A, 1), (E, 2), (B, 3), (C, 4), (D, 5)]);
    assert_eq!(tie_break(&lines[1], TieBreak::Neustadtl), 9.5);
    assert_eq!(tie_break(&lines[2], TieBreak::Neustadtl), 6.5);
    assert_eq!([tie_break(&lines[3], TieBreak::Neustadtl), tie_break(&lines[4], TieBreak::Neustadtl)], [5.5, 5.5]);
    assert_eq!((lines[3].wins, lines[4].wins), (1, 0));
}

/// A and B drew and each beat C: 3 points, Neustadtl 1.5, direct encounter 1, one
/// win each; A won with Black (10.2.D).
#[test]
fn article_10_2_d_wins_with_black() {
    let games = [game(A, B, Draw), game(C, A, Loss), game(B, C, Win)];
    let lines = standings(3, &games, System::RoundRobin, Points::TwoOneZero);
    assert_eq!(order(&lines), [(A, 1), (B, 2), (C, 3)]);
    assert_eq!(tie_break(&lines[0], TieBreak::WinsWithBlack), 1.0);
    assert_eq!(tie_break(&lines[1], TieBreak::WinsWithBlack), 0.0);
}

/// Each won one game of a double round robin, both with Black: nothing in 10.2
/// separates them, and they share first place. Under 1/0.5/0 points (9.1) the same.
#[test]
fn players_no_tie_break_separates_share_a_place() {
    let games = [game(A, B, Loss), game(B, A, Loss)];
    for points in [Points::TwoOneZero, Points::OneHalfZero] {
        let lines = standings(2, &games, System::RoundRobin, points);
        assert_eq!(order(&lines), [(A, 1), (B, 1)]);
        assert_eq!(lines[0].points, points.of(Win));
    }
}

/// A Swiss event of two rounds: A beat B and C; C beat D; D beat B. C and D have 2
/// points; C's opponents scored 2 (D) and 4 (A), D's 2 (C) and 0 (B): Solkoff (10.3.A)
/// places C ahead. B, alone on 0, met A, placed first (10.3.F's value -1).
#[test]
fn article_10_3_a_solkoff() {
    let games = [game(A, B, Win), game(C, D, Win), game(A, C, Win), game(D, B, Win)];
    let lines = standings(4, &games, System::Swiss, Points::TwoOneZero);
    assert_eq!(order(&lines), [(A, 1), (C, 2), (D, 3), (B, 4)]);
    assert_eq!(tie_break(&lines[1], TieBreak::Solkoff), 6.0);
    assert_eq!(tie_break(&lines[2], TieBreak::Solkoff), 2.0);
    assert_eq!(tie_break(&lines[3], TieBreak::StrongestOpponent), -1.0);
    assert_eq!(TieBreak::Solkoff.article(System::Swiss), "10.3.A");
}
