//! Attack tables of the Xiangqi pieces, computed at compile time from the movement
//! rules of WXF Article 2, and the lookups that read them.

use super::{Bitboard, Occupancy, Square};
use crate::color::Color;

const FILES: i32 = 9;
const RANKS: i32 = 10;
const SQUARES: usize = 90;

const fn on_board(f: i32, r: i32) -> bool {
    f >= 0 && f < FILES && r >= 0 && r < RANKS
}

const fn bit(f: i32, r: i32) -> u128 {
    if on_board(f, r) { 1 << (r * FILES + f) } else { 0 }
}

const fn in_palace(f: i32, r: i32) -> bool {
    f >= 3 && f <= 5 && (r <= 2 || r >= 7) && r >= 0 && r < RANKS
}

/// Whether ranks `a` and `b` lie on the same side of the river.
const fn same_half(a: i32, b: i32) -> bool {
    (a <= 4) == (b <= 4)
}

/// The four diagonal directions, in the bit order of [`diagonal_index`].
const DIAGONALS: [(i32, i32); 4] = [(-1, -1), (-1, 1), (1, -1), (1, 1)];

/// The four orthogonal directions, in the bit order of [`orthogonal_index`].
const ORTHOGONALS: [(i32, i32); 4] = [(-1, 0), (0, -1), (1, 0), (0, 1)];

const fn bb(bits: u128) -> Bitboard {
    Bitboard::from_bits(bits)
}

const fn step_table(dirs: [(i32, i32); 4], in_palace_only: bool) -> [Bitboard; SQUARES] {
    let mut table = [Bitboard::EMPTY; SQUARES];
    let mut sq = 0;
    while sq < SQUARES {
        let (f, r) = ((sq as i32) % FILES, (sq as i32) / FILES);
        if !in_palace_only || in_palace(f, r) {
            let mut bits = 0;
            let mut d = 0;
            while d < 4 {
                let (tf, tr) = (f + dirs[d].0, r + dirs[d].1);
                if !in_palace_only || in_palace(tf, tr) {
                    bits |= bit(tf, tr);
                }
                d += 1;
            }
            table[sq] = bb(bits);
        }
        sq += 1;
    }
    table
}

static KING: [Bitboard; SQUARES] = step_table(ORTHOGONALS, true);
static ADVISOR: [Bitboard; SQUARES] = step_table(DIAGONALS, true);

/// `[square][blocked eyes]`: bit d of the index set when the eye in `DIAGONALS[d]` is occupied.
static ELEPHANT: [[Bitboard; 16]; SQUARES] = {
    let mut table = [[Bitboard::EMPTY; 16]; SQUARES];
    let mut sq = 0;
    while sq < SQUARES {
        let (f, r) = ((sq as i32) % FILES, (sq as i32) / FILES);
        let mut blocked = 0;
        while blocked < 16 {
            let mut bits = 0;
            let mut d = 0;
            while d < 4 {
                let (tf, tr) = (f + 2 * DIAGONALS[d].0, r + 2 * DIAGONALS[d].1);
                if blocked >> d & 1 == 0 && on_board(tf, tr) && same_half(r, tr) {
                    bits |= bit(tf, tr);
                }
                d += 1;
            }
            table[sq][blocked] = bb(bits);
            blocked += 1;
        }
        sq += 1;
    }
    table
};

/// `[square][blocked legs]`: bit d set when the leg in `ORTHOGONALS[d]` is occupied.
static HORSE: [[Bitboard; 16]; SQUARES] = {
    let mut table = [[Bitboard::EMPTY; 16]; SQUARES];
    let mut sq = 0;
    while sq < SQUARES {
        let (f, r) = ((sq as i32) % FILES, (sq as i32) / FILES);
        let mut blocked = 0;
        while blocked < 16 {
            let mut bits = 0;
            let mut d = 0;
            while d < 4 {
                if blocked >> d & 1 == 0 {
                    let (lf, lr) = ORTHOGONALS[d];
                    // Straight two along the leg's direction, one to either side.
                    let (sf, sr) = (lr, lf);
                    bits |= bit(f + 2 * lf + sf, r + 2 * lr + sr);
                    bits |= bit(f + 2 * lf - sf, r + 2 * lr - sr);
                }
                d += 1;
            }
            table[sq][blocked] = bb(bits);
            blocked += 1;
        }
        sq += 1;
    }
    table
};

/// `[square][occupied diagonal neighbours]`: where a Horse stands that attacks the
/// square. A Horse's leg is always the target's diagonal neighbour on its side.
static HORSE_TO: [[Bitboard; 16]; SQUARES] = {
    let mut table = [[Bitboard::EMPTY; 16]; SQUARES];
    let mut sq = 0;
    while sq < SQUARES {
        let (f, r) = ((sq as i32) % FILES, (sq as i32) / FILES);
        let mut blocked = 0;
        while blocked < 16 {
            let mut bits = 0;
            let mut d = 0;
            while d < 4 {
                let (df, dr) = DIAGONALS[d];
                if blocked >> d & 1 == 0 && on_board(f + df, r + dr) {
                    bits |= bit(f + df, r + 2 * dr) | bit(f + 2 * df, r + dr);
                }
                d += 1;
            }
            table[sq][blocked] = bb(bits);
            blocked += 1;
        }
        sq += 1;
    }
    table
};

const fn forward(color: usize) -> i32 {
    if color == 0 { 1 } else { -1 }
}

const fn crossed_river(color: usize, r: i32) -> bool {
    if color == 0 { r >= 5 } else { r <= 4 }
}

/// `[color][square]`: the points a Pawn of that colour attacks.
static PAWN: [[Bitboard; SQUARES]; 2] = {
    let mut table = [[Bitboard::EMPTY; SQUARES]; 2];
    let mut color = 0;
    while color < 2 {
        let mut sq = 0;
        while sq < SQUARES {
            let (f, r) = ((sq as i32) % FILES, (sq as i32) / FILES);
            let mut bits = bit(f, r + forward(color));
            if crossed_river(color, r) {
                bits |= bit(f - 1, r) | bit(f + 1, r);
            }
            table[color][sq] = bb(bits);
            sq += 1;
        }
        color += 1;
    }
    table
};

/// `[color][square]`: where a Pawn of that colour stands that attacks the square.
static PAWN_TO: [[Bitboard; SQUARES]; 2] = {
    let mut table = [[Bitboard::EMPTY; SQUARES]; 2];
    let mut color = 0;
    while color < 2 {
        let mut from = 0;
        while from < SQUARES {
            let mut targets = PAWN[color][from].bits();
            while targets != 0 {
                let to = targets.trailing_zeros() as usize;
                targets &= targets - 1;
                table[color][to] = bb(table[color][to].bits() | 1 << from);
            }
            from += 1;
        }
        color += 1;
    }
    table
};

/// `[a][b]`: the squares strictly between two squares of one rank or file.
static BETWEEN: [[Bitboard; SQUARES]; SQUARES] = {
    let mut table = [[Bitboard::EMPTY; SQUARES]; SQUARES];
    let mut a = 0;
    while a < SQUARES {
        let (f, r) = ((a as i32) % FILES, (a as i32) / FILES);
        let mut d = 0;
        while d < 4 {
            let (df, dr) = ORTHOGONALS[d];
            let mut bits = 0;
            let (mut tf, mut tr) = (f + df, r + dr);
            while on_board(tf, tr) {
                table[a][(tr * FILES + tf) as usize] = bb(bits);
                bits |= bit(tf, tr);
                tf += df;
                tr += dr;
            }
            d += 1;
        }
        a += 1;
    }
    table
};

/// `[square]`: the square's rank and file, without the square.
static LINES: [Bitboard; SQUARES] = {
    let mut table = [Bitboard::EMPTY; SQUARES];
    let mut sq = 0;
    while sq < SQUARES {
        let (f, r) = ((sq as i32) % FILES, (sq as i32) / FILES);
        let mut bits = 0;
        let mut i = 0;
        while i < RANKS {
            bits |= bit(f, i);
            i += 1;
        }
        i = 0;
        while i < FILES {
            bits |= bit(i, r);
            i += 1;
        }
        table[sq] = bb(bits & !bit(f, r));
        sq += 1;
    }
    table
};

/// Bit d set when the diagonal neighbour `DIAGONALS[d]` of `sq` is occupied. Neighbours
/// off the board read as arbitrary bits; every table indexed by this gives the same
/// answer for both values of such a bit, since it only governs moves off the board.
#[inline]
fn diagonal_index(occupied: Bitboard, sq: Square) -> usize {
    let (bits, i) = (occupied.bits(), sq.index() as u32);
    let below = (bits << (FILES + 1)) >> i & 0b101;
    let above = bits >> (i + FILES as u32 - 1) & 0b101;
    (below | above << 1) as usize
}

/// Bit d set when the orthogonal neighbour `ORTHOGONALS[d]` of `sq` is occupied, with
/// the same convention for neighbours off the board as [`diagonal_index`].
#[inline]
fn orthogonal_index(occupied: Bitboard, sq: Square) -> usize {
    let (bits, i) = (occupied.bits(), sq.index() as u32);
    let sideways = (bits << 1) >> i & 0b101;
    let below = (bits << FILES) >> i & 1;
    let above = bits >> (i + FILES as u32) & 1;
    (sideways | below << 1 | above << 3) as usize
}

/// Points a King on `sq` moves to (inside its palace).
#[inline]
pub fn king_attacks(sq: Square) -> Bitboard {
    KING[sq.index()]
}

/// Points an Advisor on `sq` moves to (inside its palace).
#[inline]
pub fn advisor_attacks(sq: Square) -> Bitboard {
    ADVISOR[sq.index()]
}

/// Points an Elephant on `sq` moves to, on its own side of the river, given the
/// occupied points (the eyes).
#[inline]
pub fn elephant_attacks(sq: Square, occupied: Bitboard) -> Bitboard {
    ELEPHANT[sq.index()][diagonal_index(occupied, sq)]
}

/// Points a Horse on `sq` moves to, given the occupied points (the legs).
#[inline]
pub fn horse_attacks(sq: Square, occupied: Bitboard) -> Bitboard {
    HORSE[sq.index()][orthogonal_index(occupied, sq)]
}

/// Points from which a Horse attacks `sq`, given the occupied points.
#[inline]
pub fn horse_attackers_from(sq: Square, occupied: Bitboard) -> Bitboard {
    HORSE_TO[sq.index()][diagonal_index(occupied, sq)]
}

/// The leg of a Horse on `horse` that attacks `target`: the target's diagonal
/// neighbour towards the Horse.
#[inline]
pub fn horse_leg_towards(target: Square, horse: Square) -> Square {
    let df = (horse.file() as i8 - target.file() as i8).signum();
    let dr = (horse.rank() as i8 - target.rank() as i8).signum();
    target.offset(df, dr).expect("the leg lies between a horse and its target")
}

/// Points a Pawn of `color` on `sq` attacks.
#[inline]
pub fn pawn_attacks(color: Color, sq: Square) -> Bitboard {
    PAWN[color.index()][sq.index()]
}

/// Points from which a Pawn of `color` attacks `sq`.
#[inline]
pub fn pawn_attackers_from(color: Color, sq: Square) -> Bitboard {
    PAWN_TO[color.index()][sq.index()]
}

/// Points a Chariot on `sq` reaches.
#[inline]
pub fn rook_attacks(sq: Square, occupancy: &Occupancy) -> Bitboard {
    occupancy.slide_attacks(sq)
}

/// Points a Cannon on `sq` could capture on (see [`Occupancy::jump_attacks`]).
#[inline]
pub fn cannon_attacks(sq: Square, occupancy: &Occupancy) -> Bitboard {
    occupancy.jump_attacks(sq)
}

/// Squares strictly between `a` and `b` when they share a rank or file; else none.
#[inline]
pub fn between(a: Square, b: Square) -> Bitboard {
    BETWEEN[a.index()][b.index()]
}

/// The rank and file through `sq`, without `sq`.
#[inline]
pub fn lines_through(sq: Square) -> Bitboard {
    LINES[sq.index()]
}

/// `[file]`: the points of the file.
static FILE_POINTS: [Bitboard; FILES as usize] = {
    let mut table = [Bitboard::EMPTY; FILES as usize];
    let mut f = 0;
    while f < FILES {
        let mut bits = 0;
        let mut r = 0;
        while r < RANKS {
            bits |= bit(f, r);
            r += 1;
        }
        table[f as usize] = bb(bits);
        f += 1;
    }
    table
};

/// The points of `sq`'s file, `sq` included.
#[inline]
pub fn file_of(sq: Square) -> Bitboard {
    FILE_POINTS[usize::from(sq.file())]
}

/// A side's palace.
pub const fn palace(color: Color) -> Bitboard {
    let red = bit(3, 0) | bit(4, 0) | bit(5, 0) | bit(3, 1) | bit(4, 1) | bit(5, 1);
    let red = red | bit(3, 2) | bit(4, 2) | bit(5, 2);
    match color {
        Color::Red => bb(red),
        Color::Black => bb(red << (7 * FILES)),
    }
}

/// A side's half of the board, up to its bank of the river.
pub const fn home_half(color: Color) -> Bitboard {
    let red = (1u128 << (5 * FILES)) - 1;
    match color {
        Color::Red => bb(red),
        Color::Black => bb(red << (5 * FILES)),
    }
}

/// The seven points an Elephant of `color` can ever stand on.
pub const fn elephant_points(color: Color) -> Bitboard {
    let red = bit(2, 0) | bit(6, 0) | bit(0, 2) | bit(4, 2) | bit(8, 2) | bit(2, 4) | bit(6, 4);
    match color {
        Color::Red => bb(red),
        Color::Black => bb(red.reverse_bits() >> (128 - SQUARES)),
    }
}

/// The points a Pawn of `color` can ever stand on: its start points and the point in
/// front of each, and every point across the river.
pub const fn pawn_points(color: Color) -> Bitboard {
    let mut red = 0;
    let mut f = 0;
    while f < FILES {
        if f % 2 == 0 {
            red |= bit(f, 3) | bit(f, 4);
        }
        f += 1;
    }
    red |= !((1u128 << (5 * FILES)) - 1) & ((1u128 << SQUARES) - 1);
    match color {
        Color::Red => bb(red),
        Color::Black => bb(red.reverse_bits() >> (128 - SQUARES)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sq(name: &str) -> Square {
        Square::parse_with_label(name, 0).unwrap()
    }

    fn set(names: &[&str]) -> Bitboard {
        names.iter().map(|n| sq(n)).collect()
    }

    #[test]
    fn horse_is_blocked_at_its_leg_wxf_2_5() {
        assert_eq!(horse_attacks(sq("b0"), Bitboard::EMPTY), set(&["a2", "c2", "d1"]));
        let leg = set(&["b1"]);
        assert_eq!(horse_attacks(sq("b0"), leg), set(&["d1"]));
        assert_eq!(horse_attacks(sq("e4"), Bitboard::EMPTY).count(), 8);
    }

    #[test]
    fn horse_attackers_agree_with_horse_attacks() {
        let occupied = set(&["d4", "e5", "f6", "c3"]);
        for target in Square::all() {
            let expected: Bitboard = Square::all().filter(|&h| horse_attacks(h, occupied).has(target)).collect();
            assert_eq!(horse_attackers_from(target, occupied), expected, "{target}");
            for h in expected {
                assert!(!occupied.has(horse_leg_towards(target, h)));
            }
        }
    }

    #[test]
    fn elephant_stays_home_and_is_blocked_at_its_eye_wxf_2_3() {
        assert_eq!(elephant_attacks(sq("c4"), Bitboard::EMPTY), set(&["a2", "e2"]));
        assert_eq!(elephant_attacks(sq("c4"), set(&["d3"])), set(&["a2"]));
        assert_eq!(elephant_attacks(sq("g5"), Bitboard::EMPTY), set(&["e7", "i7"]));
        assert_eq!(elephant_points(Color::Black).count(), 7);
        assert!(elephant_points(Color::Black).has(sq("c9")));
    }

    #[test]
    fn pawns_go_sideways_only_after_the_river_wxf_2_7() {
        assert_eq!(pawn_attacks(Color::Red, sq("e3")), set(&["e4"]));
        assert_eq!(pawn_attacks(Color::Red, sq("e5")), set(&["e6", "d5", "f5"]));
        assert_eq!(pawn_attacks(Color::Red, sq("e9")), set(&["d9", "f9"]));
        assert_eq!(pawn_attacks(Color::Black, sq("e6")), set(&["e5"]));
        assert_eq!(pawn_attacks(Color::Black, sq("e4")), set(&["e3", "d4", "f4"]));
        assert_eq!(pawn_attackers_from(Color::Red, sq("e6")), set(&["e5", "d6", "f6"]));
    }

    #[test]
    fn king_and_advisor_stay_in_the_palace_wxf_2_1_2_2() {
        assert_eq!(king_attacks(sq("e0")), set(&["d0", "f0", "e1"]));
        assert_eq!(advisor_attacks(sq("e8")), set(&["d9", "f9", "d7", "f7"]));
        assert_eq!(advisor_attacks(sq("d0")), set(&["e1"]));
        assert!(king_attacks(sq("e4")).is_empty());
    }

    #[test]
    fn between_and_lines() {
        assert_eq!(between(sq("e0"), sq("e9")).count(), 8);
        assert_eq!(between(sq("a0"), sq("c0")), set(&["b0"]));
        assert!(between(sq("a0"), sq("b1")).is_empty());
        assert_eq!(lines_through(sq("a0")).count(), 17);
    }
}
