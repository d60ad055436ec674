//! Xiongqi: perft cross-checked against a second, deliberately simple move generator
//! written only for this test (plain arrays, square walking, its own face-to-face and
//! repetition logic), and one test per rule, citing shared/rules/xiongqi-rules.txt.

use xq_engine::color::Color;
use xq_engine::xiangqi::rules::Outcome;
use xq_engine::xiongqi::{Game, PieceKind, Position, Square, XiongqiMove, fen};

/// (South?, kind letter) per square, index = row * 8 + column, row 0 = row 1.
type Board = [Option<(bool, char)>; 64];
type SimpleMove = (usize, usize, Option<char>);

#[derive(Clone)]
struct Simple {
    board: Board,
    south: bool,
    history: Vec<(Board, bool, Option<SimpleMove>)>,
}

fn at(file: i32, row: i32) -> Option<usize> {
    ((0..8).contains(&file) && (0..8).contains(&row)).then(|| (row * 8 + file) as usize)
}

impl Simple {
    fn from_fen(text: &str) -> Simple {
        let mut board = [None; 64];
        let mut fields = text.split_whitespace();
        for (i, row) in fields.next().unwrap().split('/').enumerate() {
            let mut file = 0;
            for c in row.chars() {
                if let Some(n) = c.to_digit(10) {
                    file += n as i32;
                } else {
                    board[at(file, 7 - i as i32).unwrap()] = Some((c.is_ascii_uppercase(), c.to_ascii_uppercase()));
                    file += 1;
                }
            }
        }
        let south = fields.next() == Some("w");
        Simple { board, south, history: vec![(board, south, None)] }
    }

    fn targets(&self, from: usize) -> Vec<usize> {
        let (south, kind) = self.board[from].unwrap();
        let (f, r) = ((from % 8) as i32, (from / 8) as i32);
        let mine = |sq: usize| self.board[sq].is_some_and(|p| p.0 == south);
        let theirs = |sq: usize| self.board[sq].is_some_and(|p| p.0 != south);
        let mut out = Vec::new();
        let orth = [(1, 0), (-1, 0), (0, 1), (0, -1)];
        let diag = [(1, 1), (1, -1), (-1, 1), (-1, -1)];
        let slide = |dirs: &[(i32, i32)], out: &mut Vec<usize>| {
            for &(df, dr) in dirs {
                let mut k = 1;
                while let Some(sq) = at(f + df * k, r + dr * k) {
                    if self.board[sq].is_none() {
                        out.push(sq);
                    } else {
                        if theirs(sq) {
                            out.push(sq);
                        }
                        break;
                    }
                    k += 1;
                }
            }
        };
        match kind {
            'G' | 'A' => {
                let dirs = if kind == 'G' { orth } else { diag };
                for (df, dr) in dirs {
                    if let Some(sq) = at(f + df, r + dr).filter(|&sq| !mine(sq)) {
                        out.push(sq);
                    }
                }
            }
            'R' => slide(&orth, &mut out),
            'B' => slide(&diag, &mut out),
            'E' => {
                slide(&orth, &mut out);
                for (df, dr) in [(1, 2), (2, 1), (2, -1), (1, -2), (-1, -2), (-2, -1), (-2, 1), (-1, 2)] {
                    if let Some(sq) = at(f + df, r + dr).filter(|&sq| !mine(sq)) {
                        out.push(sq);
                    }
                }
            }
            'H' => {
                for (df, dr) in orth {
                    if at(f + df, r + dr).is_some_and(|leg| self.board[leg].is_none()) {
                        let ends = if df == 0 { [(1, 2 * dr), (-1, 2 * dr)] } else { [(2 * df, 1), (2 * df, -1)] };
                        for (ef, er) in ends {
                            if let Some(sq) = at(f + ef, r + er).filter(|&sq| !mine(sq)) {
                                out.push(sq);
                            }
                        }
                    }
                }
            }
            'C' => {
                for (df, dr) in orth {
                    let mut k = 1;
                    let mut screened = false;
                    while let Some(sq) = at(f + df * k, r + dr * k) {
                        match (self.board[sq].is_some(), screened) {
                            (false, false) => out.push(sq),
                            (true, false) => screened = true,
                            (true, true) => {
                                if theirs(sq) {
                                    out.push(sq);
                                }
                                break;
                            }
                            (false, true) => {}
                        }
                        k += 1;
                    }
                }
            }
            'D' => {
                for (df, dr) in orth {
                    if let Some(sq) = at(f + df, r + dr).filter(|&sq| self.board[sq].is_none()) {
                        out.push(sq);
                    }
                    let mut k = 1;
                    while let Some(sq) = at(f + df * k, r + dr * k) {
                        if self.board[sq].is_some() {
                            if theirs(sq) {
                                out.push(sq);
                            }
                            break;
                        }
                        k += 1;
                    }
                }
            }
            'S' => {
                let forward = if south { 1 } else { -1 };
                let crossed = if south { r >= 4 } else { r <= 3 };
                let mut steps = vec![(0, forward)];
                if crossed {
                    steps.extend([(1, 0), (-1, 0)]);
                }
                for (df, dr) in steps {
                    if let Some(sq) = at(f + df, r + dr).filter(|&sq| !mine(sq)) {
                        out.push(sq);
                    }
                }
            }
            other => panic!("unknown piece {other}"),
        }
        out
    }

    fn after(&self, (from, to, promotion): SimpleMove) -> Board {
        let mut board = self.board;
        let (south, kind) = board[from].take().unwrap();
        board[to] = Some((south, promotion.unwrap_or(kind)));
        let find = |s: bool| (0..64).find(|&sq| board[sq] == Some((s, 'G')));
        if let (Some(g_south), Some(g_north)) = (find(true), find(false)) {
            let same_file = g_south % 8 == g_north % 8;
            let clear = (g_south / 8 + 1..g_north / 8).all(|row| board[row * 8 + g_south % 8].is_none());
            if same_file && g_south / 8 < g_north / 8 && clear {
                board[g_south] = Some((true, 'D'));
                board[g_north] = Some((false, 'D'));
            }
        }
        board
    }

    fn moves(&self) -> Vec<SimpleMove> {
        let has_terminal = self.board.iter().any(|p| matches!(p, Some((s, 'G' | 'D')) if *s == self.south));
        if !has_terminal {
            return Vec::new();
        }
        let mut moves = Vec::new();
        for from in 0..64 {
            if self.board[from].is_none_or(|p| p.0 != self.south) {
                continue;
            }
            let kind = self.board[from].unwrap().1;
            for to in self.targets(from) {
                moves.push((from, to, None));
                let last_row = if self.south { 7 } else { 0 };
                if kind == 'S' && to / 8 == last_row {
                    for p in ['E', 'A', 'C', 'R', 'B', 'H'] {
                        moves.push((from, to, Some(p)));
                    }
                }
            }
        }
        moves.retain(|&m| {
            let board = self.after(m);
            !self.history.iter().any(|(b, s, led)| *b == board && *s != self.south && *led == Some(m))
        });
        moves
    }

    fn perft(&mut self, depth: u32) -> u64 {
        if depth == 0 {
            return 1;
        }
        let moves = self.moves();
        if depth == 1 {
            return moves.len() as u64;
        }
        let mut nodes = 0;
        for m in moves {
            let saved = (self.board, self.south);
            self.board = self.after(m);
            self.south = !self.south;
            self.history.push((self.board, self.south, Some(m)));
            nodes += self.perft(depth - 1);
            self.history.pop();
            (self.board, self.south) = saved;
        }
        nodes
    }
}

/// Positions and their perft counts, agreed by both generators (depth 1 onwards).
const PERFT: [(&str, [u64; 5]); 6] = [
    ("rhbagbhr/2c2c2/ssssssss/8/8/SSSSSSSS/2C2C2/RHBAGBHR w - - 0 1", [26, 676, 17585, 458226, 12060275]),
    ("r2g4/1S4S1/8/8/8/8/8/4G2R w - - 0 1", [30, 348, 10611, 148549, 4544052]),
    ("4g3/8/2e5/8/8/3E4/8/R2G4 b - - 0 1", [25, 811, 17358, 536711, 11345386]),
    ("4g3/8/8/4C3/8/8/8/4G3 w - - 0 1", [15, 52, 725, 2604, 38613]),
    ("3d4/8/8/2s5/4S3/8/8/3D4 w - - 0 1", [5, 18, 84, 411, 2197]),
    ("rhb1gbhr/2c2c2/s1ss1sss/3a4/1S2S3/S1S2SSS/2C2C2/RHBAGBHR b - - 0 5", [30, 988, 29626, 963030, 29002095]),
];

fn check_perft(max_nodes: u64) {
    for (text, counts) in PERFT {
        let mut game = Game::new(fen::parse(text).unwrap());
        let mut simple = Simple::from_fen(text);
        for (depth, &expected) in counts.iter().enumerate().filter(|(_, n)| **n > 0 && **n <= max_nodes) {
            let depth = depth as u32 + 1;
            assert_eq!(simple.perft(depth), expected, "simple generator, {text} depth {depth}");
            assert_eq!(game.perft(depth), expected, "engine, {text} depth {depth}");
        }
    }
}

#[test]
fn perft_agrees_with_the_simple_generator() {
    check_perft(60_000);
}

#[test]
#[ignore = "millions of nodes through the simple generator: run in release"]
fn perft_agrees_with_the_simple_generator_to_depth_5() {
    check_perft(u64::MAX);
}

fn mv(text: &str) -> XiongqiMove {
    let promotion = text[4..].chars().next().and_then(PieceKind::from_letter);
    XiongqiMove {
        from: Square::parse_with_label(&text[..2], 1).unwrap(),
        to: Square::parse_with_label(&text[2..4], 1).unwrap(),
        promotion,
    }
}

fn game(text: &str) -> Game {
    Game::new(fen::parse(text).unwrap())
}

#[test]
fn rule_4_face_to_face_turns_both_generals_into_dragons() {
    let mut g = game("4g3/8/8/4C3/8/8/8/4G3 w - - 0 1");
    g.play(mv("e5a5")).unwrap();
    assert_eq!(g.position().to_string(), "4d3/8/8/C7/8/8/8/4D3 b - - 1 1");
    assert!(fen::parse("4g3/8/8/8/8/8/8/4G3 w").is_err(), "a FEN with facing generals is refused");
    // North's general below South's is no face-to-face.
    assert!(fen::parse("8/4G3/8/8/8/8/4g3/8 w").is_ok());
}

#[test]
fn rule_3_2_4_the_dragon_captures_along_its_lines_but_steps_one() {
    let mut g = game("3d4/8/8/2s5/4S3/8/8/3D4 w - - 0 1");
    let moves: Vec<String> = g.legal_moves().iter().map(ToString::to_string).collect();
    assert!(moves.contains(&"d1d8".to_owned()), "capture at any distance: {moves:?}");
    assert!(moves.contains(&"d1d2".to_owned()) && !moves.contains(&"d1d3".to_owned()), "{moves:?}");
}

#[test]
fn rule_5_promotion_is_offered_optional_and_may_come_later() {
    let mut g = game("r2g4/1S4S1/8/8/8/8/8/4G2R w - - 0 1");
    let moves: Vec<String> = g.legal_moves().iter().map(ToString::to_string).collect();
    for choice in ["b7b8", "b7b8e", "b7b8a", "b7b8c", "b7b8r", "b7b8b", "b7b8h"] {
        assert!(moves.contains(&choice.to_owned()), "{choice}: {moves:?}");
    }
    assert!(!moves.contains(&"b7b8g".to_owned()) && !moves.contains(&"b7b8d".to_owned()));
    g.play(mv("b7b8")).unwrap();
    g.play(mv("d8d7")).unwrap();
    let later: Vec<String> = g.legal_moves().iter().map(ToString::to_string).collect();
    assert!(later.contains(&"b8c8e".to_owned()), "a soldier on the last row promotes when it moves: {later:?}");
}

#[test]
fn rule_6_3_a_repetitive_move_is_not_legal_but_another_road_is() {
    let mut g = game("3g4/8/8/8/8/8/8/R3G3 w - - 0 1");
    for text in ["a1a2", "d8c8", "a2a1", "c8d8"] {
        g.play(mv(text)).unwrap();
    }
    // a1a2 now recreates the position after the first move by the same move.
    assert!(g.is_repetitive(mv("a1a2")));
    assert!(g.play(mv("a1a2")).is_err());
    // Reaching that position by another road is allowed: a1a3 then a3a2.
    g.play(mv("a1a3")).unwrap();
    g.play(mv("d8c8")).unwrap();
    g.play(mv("a3a2")).unwrap();
    assert_eq!(g.position().to_string().split(' ').next(), Some("2g5/8/8/8/8/8/R7/4G3"));
}

#[test]
fn rule_6_2_no_legal_move_loses_even_without_check() {
    // North's general on a1 and its soldiers on the last two rows block each other:
    // nothing can move, and nothing is in check.
    let mut g = game("8/8/8/4G3/8/8/ssssssss/gsssssss b - - 0 1");
    let ruling = g.ruling().expect("stalemate");
    assert_eq!((ruling.outcome, ruling.article), (Outcome::Win(Color::Red), "Xiongqi 6.2"));
}

#[test]
fn rule_6_1_capturing_the_terminal_piece_wins_at_once() {
    let mut g = game("3d4/8/8/2s5/4S3/8/8/3D4 w - - 0 1");
    g.play(mv("d1d8")).unwrap();
    let ruling = g.ruling().expect("captured");
    assert_eq!((ruling.outcome, ruling.article), (Outcome::Win(Color::Red), "Xiongqi 6.1"));
}

#[test]
fn rule_6_4_bare_terminal_pieces_draw() {
    let mut g = game("3g4/8/8/8/8/8/8/4G3 w - - 0 1");
    assert_eq!(g.ruling().map(|r| r.article), Some("Xiongqi 6.4"));
}

#[test]
fn rule_6_5_fifty_moves_each_without_capture_or_soldier_move_draw() {
    let mut g = game("3g4/8/8/8/8/8/8/R3G3 w - - 99 60");
    assert!(g.ruling().is_none());
    g.play(mv("a1a2")).unwrap();
    assert_eq!(g.ruling().map(|r| r.article), Some("Xiongqi 6.5"));
    let mut claimed = game("3g4/8/8/8/8/8/8/R3G3 w - - 99 60");
    claimed.set_fifty_moves(xq_engine::xiongqi::game::FiftyMoves::Claimed);
    claimed.play(mv("a1a2")).unwrap();
    assert!(claimed.ruling().is_none() && claimed.can_claim_fifty_moves(), "claimed, not automatic");
}

#[test]
fn rule_6_5_a_soldier_move_or_a_capture_starts_the_count_again() {
    // 99 half-moves without capture or soldier move: the 100th would draw (above), but
    // a soldier's move or a capture is the 100th here, and the count starts again.
    let clock = |g: &Game| g.position().to_string().split(' ').nth(4).map(str::to_owned);
    let mut soldier = game("3g4/8/8/8/8/S7/8/R3G3 w - - 99 60");
    soldier.play(mv("a3a4")).unwrap();
    assert_eq!((soldier.ruling(), clock(&soldier).as_deref()), (None, Some("0")), "a soldier move");
    let mut capture = game("3g4/h7/8/8/8/8/8/R3G3 w - - 99 60");
    capture.play(mv("a1a7")).unwrap();
    assert_eq!((capture.ruling(), clock(&capture).as_deref()), (None, Some("0")), "a capture");
    // Counted again from there: 99 more half-moves of chariot and generals do not
    // draw, the 100th does.
    let mut again = game("3g4/8/8/8/8/S7/8/R3G3 w - - 99 60");
    again.play(mv("a3a4")).unwrap();
    let mut played = 0;
    while again.ruling().is_none() {
        let moves = again.legal_moves();
        // Neither a soldier's move nor a capture, nor a repetitive move (6.3).
        // Chosen in turn by a fixed stride, so that the pieces wander.
        let quiet: Vec<XiongqiMove> = moves
            .iter()
            .copied()
            .filter(|m| {
                let piece = again.position().piece_at(m.from).map(|p| p.kind);
                piece != Some(PieceKind::Soldier)
                    && again.position().piece_at(m.to).is_none()
                    && !again.is_repetitive(*m)
            })
            .collect();
        assert!(!quiet.is_empty(), "a quiet move at {}", again.position());
        again.play(quiet[(played * 31 + 7) % quiet.len()]).unwrap();
        played += 1;
    }
    assert_eq!((played, again.ruling().map(|r| r.article)), (100, Some("Xiongqi 6.5")));
}

#[test]
fn rule_6_3_a_repetitive_move_is_the_same_move_with_the_same_promotion_choice() {
    // A soldier on the last row moves b8-c8, and back; b8-c8 again recreates the
    // position by the same move, forbidden; b8-c8 promoting to a chariot is another
    // move to another position, allowed.
    let mut g = game("1S1g4/8/8/8/8/8/8/4G3 w - - 0 1");
    for text in ["b8c8", "d8d7", "c8b8", "d7d8"] {
        g.play(mv(text)).unwrap();
    }
    assert!(g.is_repetitive(mv("b8c8")));
    assert!(!g.is_repetitive(mv("b8c8r")), "another promotion choice");
    g.play(mv("b8c8r")).unwrap();
    assert!(g.ruling().is_none());
}

#[test]
fn check_does_not_restrict_moves_rule_1_1() {
    // South's general may step next to North's chariot's line.
    let mut g = game("r2g4/8/8/8/8/8/8/4G3 w - - 0 1");
    let moves: Vec<String> = g.legal_moves().iter().map(ToString::to_string).collect();
    assert!(moves.contains(&"e1e2".to_owned()) && moves.contains(&"e1d1".to_owned()));
    let _ = Position::startpos();
}

/// Plays fast self-play games under the referee; any illegal move or panic fails.
fn xiongqi_self_play(games: usize, nodes: u64) -> usize {
    use std::sync::atomic::AtomicBool;
    use xq_engine::xiangqi::search::limits::Limits;
    let limits = Limits { nodes: Some(nodes), ..Limits::default() };
    let stop = AtomicBool::new(false);
    let mut plies = 0;
    for index in 0..games {
        let mut g = Game::new(Position::startpos());
        // Vary the games: the first ply cycles through the legal moves.
        let first = g.legal_moves()[index % 26];
        g.play(first).unwrap();
        while g.ruling().is_none() && plies < usize::MAX {
            let result = xq_engine::xiongqi::search::search(&mut g, &limits, &stop, std::time::Duration::ZERO);
            let mv = result.best.expect("a game not yet ruled has a move");
            g.play(mv).unwrap_or_else(|e| panic!("game {index}: {e} in {}", g.position()));
            plies += 1;
        }
    }
    plies
}

#[test]
fn a_few_fast_self_play_games() {
    assert!(xiongqi_self_play(3, 300) > 10);
}

#[test]
#[ignore = "a thousand games: run in release"]
fn a_thousand_fast_self_play_games_without_an_illegal_move_or_a_panic() {
    println!("{} plies", xiongqi_self_play(1000, 200));
}
