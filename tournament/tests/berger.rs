//! The Berger tables reproduced exactly as the World Xiangqi Rules' Appendix prints them,
//! for 3 to 20 players (an odd field's last number is the bye), round by round, pair
//! by pair, colour by colour (tests/data: the tables transcribed from the book).

use xq_tournament::pairing::{berger_table, round_robin};

/// A table's rounds of (red, black) pairs, numbered from 1.
type Table = Vec<Vec<(usize, usize)>>;

/// The book's tables, by their even number of players.
fn printed() -> Vec<(usize, Table)> {
    let text = include_str!("data/wxf-berger-tables.txt");
    let mut tables: Vec<(usize, Table)> = Vec::new();
    for line in text.lines() {
        if let Some(header) = line.strip_prefix("# ").filter(|h| h.ends_with(" players")) {
            let even: usize = header.split_whitespace().nth(2).unwrap().parse().unwrap();
            tables.push((even, Vec::new()));
        } else if !line.starts_with('#') && !line.is_empty() {
            let mut words = line.split_whitespace();
            let round: usize = words.next().unwrap().parse().unwrap();
            let number = |text: &str| text.trim_matches(['(', ')']).parse::<usize>().unwrap();
            let pairs = words
                .map(|pair| {
                    let (red, black) = pair.split_once('-').unwrap();
                    (number(red), number(black))
                })
                .collect();
            let table = &mut tables.last_mut().unwrap().1;
            assert_eq!(table.len() + 1, round);
            table.push(pairs);
        }
    }
    tables
}

#[test]
fn the_tables_are_the_books() {
    let tables = printed();
    assert_eq!(tables.iter().map(|t| t.0).collect::<Vec<_>>(), [4, 6, 8, 10, 12, 14, 16, 18, 20]);
    for (even, rounds) in tables {
        assert_eq!(berger_table(even), rounds, "{even} players");
    }
}

#[test]
fn an_odd_field_sits_out_the_last_number() {
    for (even, rounds) in printed() {
        let players = even - 1;
        for (round, printed) in round_robin(players, false).iter().zip(&rounds) {
            let bye = printed.iter().find_map(|&(r, b)| {
                if r == even {
                    Some(b)
                } else if b == even {
                    Some(r)
                } else {
                    None
                }
            });
            assert_eq!(round.bye.map(|p| p + 1), bye, "{players} players");
            let games: Vec<(usize, usize)> = round.games.iter().map(|g| (g.red + 1, g.black + 1)).collect();
            let expected: Vec<(usize, usize)> =
                printed.iter().copied().filter(|&(r, b)| r != even && b != even).collect();
            assert_eq!(games, expected, "{players} players");
        }
    }
}
