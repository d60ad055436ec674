//! Attacks along ranks and files for sliding pieces (Chariot) and screen-jumping pieces
//! (Cannon), shared by every board shape.
//!
//! Occupancy is kept twice ([`Occupancy`]): rank-major, where a rank's points are
//! adjacent bits, and file-major, where a file's points are adjacent bits. The points of
//! any line are then one shift and mask away, so a line attack is a single table lookup
//! with no bit-gathering instruction (PEXT) needed: the same code is fast on every CPU.
//! Edge points are left out of the index: whether an edge point is occupied never
//! changes which points a piece reaches (it is the last point of its ray either way),
//! which halves the file tables.

use crate::bitboard::Bitboard;
use crate::geometry::{Geometry, Square};

/// Largest board supported by the fixed-size tables.
const MAX_FILES: usize = 9;
const MAX_RANKS: usize = 10;
const MAX_SQUARES: usize = MAX_FILES * MAX_RANKS;
const MAX_RANK_INDEX: usize = 1 << (MAX_FILES - 2);
const MAX_FILE_INDEX: usize = 1 << (MAX_RANKS - 2);

/// How a piece moves along a line.
#[derive(Clone, Copy)]
enum LineMove {
    /// Up to and including the first occupied point (Chariot).
    Slide,
    /// Over exactly one occupied point (the screen), to the next occupied point (Cannon).
    Jump,
}

/// Points reached along a line of `len` points from position `pos`, with `inner` the
/// occupancy of the line's interior points (bit 0 = point 1). Edge points count as
/// occupied: see the module documentation.
const fn line_reach(len: usize, pos: usize, inner: usize, kind: LineMove) -> u16 {
    let occupied = ((inner << 1) | 1 | (1 << (len - 1))) & !(1 << pos);
    let mut reach = 0u16;
    let mut dir = 0;
    while dir < 2 {
        let mut p = pos as isize;
        let mut screened = false;
        loop {
            p += if dir == 0 { -1 } else { 1 };
            if p < 0 || p >= len as isize {
                break;
            }
            let is_occupied = occupied >> p & 1 != 0;
            match kind {
                LineMove::Slide => {
                    reach |= 1 << p;
                    if is_occupied {
                        break;
                    }
                }
                LineMove::Jump => {
                    if is_occupied {
                        if screened {
                            reach |= 1 << p;
                            break;
                        }
                        screened = true;
                    }
                }
            }
        }
        dir += 1;
    }
    reach
}

/// Rank and file attack tables for one board shape and one way of moving.
pub struct LineTable {
    /// `[file][interior rank occupancy]`: reached points of the rank, bit = file.
    rank: [[u16; MAX_RANK_INDEX]; MAX_FILES],
    /// `[square][interior file occupancy]`: reached squares of the file.
    file: [[u128; MAX_FILE_INDEX]; MAX_SQUARES],
}

impl LineTable {
    const fn build(files: usize, ranks: usize, kind: LineMove) -> Self {
        let mut table = LineTable { rank: [[0; MAX_RANK_INDEX]; MAX_FILES], file: [[0; MAX_FILE_INDEX]; MAX_SQUARES] };
        let mut f = 0;
        while f < files {
            let mut inner = 0;
            while inner < 1 << (files - 2) {
                table.rank[f][inner] = line_reach(files, f, inner, kind);
                inner += 1;
            }
            f += 1;
        }
        let mut sq = 0;
        while sq < files * ranks {
            let (f, r) = (sq % files, sq / files);
            let mut inner = 0;
            while inner < 1 << (ranks - 2) {
                let reach = line_reach(ranks, r, inner, kind);
                let mut bits = 0u128;
                let mut rr = 0;
                while rr < ranks {
                    if reach >> rr & 1 != 0 {
                        bits |= 1 << (rr * files + f);
                    }
                    rr += 1;
                }
                table.file[sq][inner] = bits;
                inner += 1;
            }
            sq += 1;
        }
        table
    }
}

/// The Chariot-like and Cannon-like tables of one board shape.
pub struct LineTables {
    slide: LineTable,
    jump: LineTable,
}

impl LineTables {
    /// Builds the tables for a board of `files` x `ranks` (at most 9 x 10).
    pub const fn build(files: usize, ranks: usize) -> Self {
        assert!(files <= MAX_FILES && ranks <= MAX_RANKS && files >= 3 && ranks >= 3);
        LineTables {
            slide: LineTable::build(files, ranks, LineMove::Slide),
            jump: LineTable::build(files, ranks, LineMove::Jump),
        }
    }
}

/// A board shape whose line-attack tables exist.
pub trait LineGeometry: Geometry {
    /// This shape's tables.
    fn line_tables() -> &'static LineTables;
}

static XIANGQI_LINES: LineTables = LineTables::build(9, 10);

impl LineGeometry for crate::geometry::XiangqiBoard {
    fn line_tables() -> &'static LineTables {
        &XIANGQI_LINES
    }
}

static XIONGQI_LINES: LineTables = LineTables::build(8, 8);

impl LineGeometry for crate::geometry::XiongqiBoard {
    fn line_tables() -> &'static LineTables {
        &XIONGQI_LINES
    }
}

/// The occupied squares of a board, in both bit orders.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct Occupancy<G: Geometry> {
    squares: Bitboard<G>,
    /// Bit `file * RANKS + rank` set for each occupied square.
    file_major: u128,
}

/// The file-major bit of `sq`.
const fn file_major_bit<G: Geometry>(sq: Square<G>) -> u128 {
    1 << (sq.file() as u32 * G::RANKS as u32 + sq.rank() as u32)
}

impl<G: LineGeometry> Occupancy<G> {
    /// The occupancy of the squares in `squares`.
    pub fn from_squares(squares: Bitboard<G>) -> Self {
        let mut occ = Self::default();
        for sq in squares {
            occ.toggle(sq);
        }
        occ
    }

    /// The occupied squares.
    pub const fn squares(&self) -> Bitboard<G> {
        self.squares
    }

    /// Flips the occupancy of `sq`.
    #[inline]
    pub fn toggle(&mut self, sq: Square<G>) {
        self.squares.toggle(sq);
        self.file_major ^= file_major_bit(sq);
    }

    /// The occupancy after a piece leaves `from` for `to` (which may hold a piece
    /// being captured).
    #[inline]
    pub fn after_move(mut self, from: Square<G>, to: Square<G>) -> Self {
        self.toggle(from);
        if !self.squares.has(to) {
            self.toggle(to);
        }
        self
    }

    #[inline]
    fn lookup(&self, table: &LineTable, sq: Square<G>) -> Bitboard<G> {
        let (files, ranks) = (G::FILES as u32, G::RANKS as u32);
        let (file, rank) = (sq.file() as u32, sq.rank() as u32);
        let rank_inner = (self.squares.bits() >> (rank * files + 1)) as usize & ((1 << (files - 2)) - 1);
        let file_inner = (self.file_major >> (file * ranks + 1)) as usize & ((1 << (ranks - 2)) - 1);
        let along_rank = (table.rank[file as usize][rank_inner] as u128) << (rank * files);
        Bitboard::from_bits(along_rank | table.file[sq.index()][file_inner])
    }

    /// Squares a Chariot on `sq` reaches: along its rank and file up to and including
    /// the first occupied square in each direction.
    #[inline]
    pub fn slide_attacks(&self, sq: Square<G>) -> Bitboard<G> {
        self.lookup(&G::line_tables().slide, sq)
    }

    /// Squares a Cannon on `sq` attacks: the first occupied square beyond exactly one
    /// occupied square (the screen), along its rank and file. Also the edge square
    /// beyond a screen when no piece stands between them, whether or not it is
    /// occupied: intersect with the enemy's pieces to get captures.
    #[inline]
    pub fn jump_attacks(&self, sq: Square<G>) -> Bitboard<G> {
        self.lookup(&G::line_tables().jump, sq)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::geometry::{XiangqiBoard, XiongqiBoard};

    /// The definition, walked point by point: the independent reference for the tables.
    fn walk<G: Geometry>(occ: Bitboard<G>, from: Square<G>, jump: bool) -> Bitboard<G> {
        let mut reach = Bitboard::EMPTY;
        for (df, dr) in [(1, 0), (-1, 0), (0, 1), (0, -1)] {
            let mut screened = false;
            let mut sq = from;
            while let Some(next) = sq.offset(df, dr) {
                sq = next;
                let occupied = occ.has(sq);
                if !jump {
                    reach.insert(sq);
                    if occupied {
                        break;
                    }
                } else if occupied {
                    if screened {
                        reach.insert(sq);
                        break;
                    }
                    screened = true;
                }
            }
        }
        reach
    }

    fn tables_match_walk<G: LineGeometry>() {
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for _ in 0..20_000 {
            let (a, b) = (next(), next());
            let bits = (a as u128) << 64 | b as u128;
            let occ_bb = Bitboard::<G>::from_bits(bits & bits.rotate_left(37));
            let occ = Occupancy::from_squares(occ_bb);
            let from = Square::<G>::from_index((a % G::SQUARES as u64) as u8).unwrap();
            assert_eq!(occ.slide_attacks(from), walk(occ_bb, from, false), "{from}");
            assert_eq!(occ.jump_attacks(from) & occ_bb, walk(occ_bb, from, true), "{from}");
        }
    }

    #[test]
    fn xiangqi_tables_match_a_point_by_point_walk() {
        tables_match_walk::<XiangqiBoard>();
    }

    #[test]
    fn xiongqi_tables_match_a_point_by_point_walk() {
        tables_match_walk::<XiongqiBoard>();
    }
}
