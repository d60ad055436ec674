//! Training data: records of positions from self-play with their search score, best
//! move and game result, stored in compressed, checksummed chunks. The worker writes
//! them, the coordinator validates and stores them, the trainer reads them: all through
//! this module.
//!
//! # Chunk format, version 1 (all integers little-endian)
//! A 32-byte header, then the zstd-compressed payload:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 8 | magic `XQCHUNK\0` |
//! | 8 | 2 | format version, 1 |
//! | 10 | 1 | variant: 0 Xiangqi, 1 Xiongqi |
//! | 11 | 1 | reserved, 0 |
//! | 12 | 4 | number of records |
//! | 16 | 4 | payload length, uncompressed (records x 40 for Xiangqi, x 72 for Xiongqi) |
//! | 20 | 4 | payload length, compressed |
//! | 24 | 4 | CRC-32 (IEEE) of the uncompressed payload |
//! | 28 | 4 | reserved, 0 |
//!
//! Each record is 40 bytes:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 16 | occupied squares, a `u128` bitboard (bit = rank * 9 + file) |
//! | 16 | 16 | the pieces on them in square order, one nibble each, low nibble first: bit 3 Black, bits 0-2 the kind (0 king, 1 advisor, 2 elephant, 3 horse, 4 chariot, 5 cannon, 6 pawn); unused nibbles 0 |
//! | 32 | 1 | side to move: 0 Red, 1 Black |
//! | 33 | 1 | game result from Red's view: 0 Black won, 1 draw, 2 Red won |
//! | 34 | 2 | search score in centipawns from the side to move's view, `i16` |
//! | 36 | 2 | best move: origin + 128 x destination (square indices) |
//! | 38 | 2 | ply number in the game |
//!
//! A Xiongqi record is 72 bytes (its 18 kinds of piece do not fit a nibble):
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 64 | the squares a1, b1 .. h8 (index = row x 8 + file), one byte each: 0 empty, else 1 + the piece's index (South's kinds 0-8 in `PieceKind::ALL` order, North's 9-17) |
//! | 64 | 1 | side to move: 0 South, 1 North |
//! | 65 | 1 | game result from South's view: 0 North won, 1 draw, 2 South won |
//! | 66 | 2 | search score from the side to move's view, `i16` |
//! | 68 | 2 | best move: origin + 64 x destination + 4096 x (1 + promotion kind index), 0 for no promotion |
//! | 70 | 2 | ply number in the game |
//!
//! # A self-play unit's chunk
//! A unit's chunk holds the records of its games one game after another, in any order
//! of games; a game's records are the positions the engine searched after the random
//! opening plies, so its first record is at ply `random_plies` and the plies rise by
//! one. [`Records::check_games`] checks a chunk against the settings the unit's games
//! were played with, so that made-up positions, moves or results are refused: each
//! record's best move is legal and leads to the next record's position, all of a game's
//! records carry one result, and that result is how the game ended.
//!
//! A Xiangqi game is replayed whole: its random opening is the unit's seeded one
//! ([`random_opening`]), which the game's first position must match (each of the
//! unit's games once; none missing), and the referee that follows the opening and the
//! recorded moves rules as the worker's did, so the result must be its ruling, or a
//! draw at the move limit, and the records must stop where the game ended.
//!
//! A Xiongqi game is replayed from its first record: the worker plays its opening,
//! which the records do not hold. A capture among the recorded moves cuts the game off
//! from the opening (no position after a capture occurred before it, and the capture
//! starts the 50-move count again), so the replay then rules as the worker's game did;
//! so it does when it rules a win. Otherwise an unrecorded position may have made every
//! move of the side to move repetitive (6.3, a loss) or brought the 50-move draw (6.5)
//! early: only a win for the side to move at the end is refused.

pub mod games;

use super::fen::validate;
use super::rules::Outcome;
use super::{Bitboard, Move, Piece, PieceKind, Position};
use crate::color::Color;
use crate::variant::Variant;
use crate::xiongqi;

const MAGIC: &[u8; 8] = b"XQCHUNK\0";
const VERSION: u16 = 1;
const HEADER_LEN: usize = 32;
const RECORD_LEN: usize = 40;
const XIONGQI_RECORD_LEN: usize = 72;
/// A mate in `n` moves is stored as the score `MATE_SCORE - n` when the side to move
/// mates and `-(MATE_SCORE - n)` when it is mated; every other score is centipawns.
pub const MATE_SCORE: i16 = 30_000;
/// Scores of this size or more are mate scores.
pub const MATE_BOUND: i16 = MATE_SCORE - 1_000;
/// Most records one chunk may hold (about 40 MB uncompressed).
pub const MAX_RECORDS: usize = 1 << 20;

/// One Xiongqi training position.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct XiongqiRecord {
    /// The position (its move counters are not stored).
    pub position: xiongqi::Position,
    /// The search score, from the side to move's view.
    pub score: i16,
    /// The move the search chose.
    pub best_move: xiongqi::XiongqiMove,
    /// The ply number in the game.
    pub ply: u16,
    /// How the game ended.
    pub result: Outcome,
}

/// One training position.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// The position (its move counters are not stored).
    pub position: Position,
    /// The search score, centipawns from the side to move's view.
    pub score: i16,
    /// The move the search chose.
    pub best_move: Move,
    /// The ply number in the game.
    pub ply: u16,
    /// How the game ended.
    pub result: Outcome,
}

/// A chunk that cannot be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ChunkError {
    /// Shorter than its header says.
    #[error("the chunk is truncated: {0}")]
    Truncated(&'static str),
    /// Not a chunk.
    #[error("not a training chunk (bad magic)")]
    BadMagic,
    /// A version this reader does not know.
    #[error("chunk format version {0} is not supported (this reader knows version 1)")]
    Version(u16),
    /// An unknown variant, or not the one asked for.
    #[error("variant {0} is not supported here (0 Xiangqi, 1 Xiongqi)")]
    Variant(u8),
    /// Too many records.
    #[error("the chunk claims {0} records, more than allowed")]
    TooLarge(u32),
    /// The payload does not decompress.
    #[error("the payload does not decompress: {0}")]
    Compression(String),
    /// The checksum does not match.
    #[error("checksum mismatch: the payload is corrupt")]
    Checksum,
    /// A record is not a valid position or move.
    #[error("record {index}: {problem}")]
    Record {
        /// 0-based record index.
        index: usize,
        /// What is wrong.
        problem: String,
    },
    /// A game is not one the unit's settings play ([`Records::check_games`]).
    #[error("game {game} (from record {first}), record {record}: {problem}")]
    Game {
        /// 0-based game of the chunk, in the chunk's order.
        game: usize,
        /// 0-based index of the game's first record.
        first: usize,
        /// 0-based index of the record at fault.
        record: usize,
        /// What is wrong.
        problem: GameProblem,
    },
    /// Games of the unit that go on after their random plies have no records.
    #[error("{missing} of the unit's {games} games are missing")]
    MissingGames {
        /// Games without records.
        missing: usize,
        /// Games of the unit.
        games: usize,
    },
    /// More games than the unit has.
    #[error("{found} games, more than the unit's {games}")]
    TooManyGames {
        /// Games in the chunk.
        found: usize,
        /// Games of the unit.
        games: usize,
    },
}

/// What is wrong with a game of a self-play chunk, at one of its records.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GameProblem {
    /// A game's first record is not at the ply after the random opening.
    #[error("ply {ply}, where a game starts at ply {random_plies} (after its random plies)")]
    Start {
        /// The record's ply.
        ply: u16,
        /// The random plies of the settings.
        random_plies: usize,
    },
    /// The plies do not rise by one.
    #[error("ply {ply} does not follow the previous record's ply {previous}")]
    PlyGap {
        /// The previous record's ply.
        previous: u16,
        /// This record's ply.
        ply: u16,
    },
    /// No game of the unit not yet matched stands at this position after its random
    /// plies.
    #[error("no game of the unit (not matched already) stands at its position after the random plies")]
    UnknownOpening,
    /// The position is not the one the previous record's best move leads to.
    #[error("its position is not the one the previous record's best move {previous_move} leads to")]
    NotChained {
        /// The previous record's best move.
        previous_move: String,
    },
    /// The best move is not legal in the game.
    #[error("best move {mv} is not legal: {reason}")]
    Illegal {
        /// The move.
        mv: String,
        /// Why not.
        reason: String,
    },
    /// The result is not the one of the game's first record.
    #[error("result {}, where the game's first record has {}", .result.pgn(), .first.pgn())]
    MixedResults {
        /// This record's result.
        result: Outcome,
        /// The first record's.
        first: Outcome,
    },
    /// The game had already ended before this record.
    #[error("the game had already ended: {ruling}")]
    AfterTheEnd {
        /// The ruling that ended it.
        ruling: String,
    },
    /// The record is at or past the move limit.
    #[error("ply {ply} is past the move limit of {max_plies} plies")]
    PastMoveLimit {
        /// The record's ply.
        ply: u16,
        /// The settings' move limit.
        max_plies: usize,
    },
    /// The result does not fit how the game ended.
    #[error("result {} does not fit the game's end: {end}", .claimed.pgn())]
    WrongResult {
        /// The records' result.
        claimed: Outcome,
        /// How the game ended.
        end: String,
    },
    /// The records stop before the game ended.
    #[error("the game stops after {plies} plies, neither ruled over nor at the move limit of {max_plies}")]
    Unfinished {
        /// Plies played, the last record's move included.
        plies: usize,
        /// The settings' move limit.
        max_plies: usize,
    },
}

fn result_code(result: Outcome) -> u8 {
    match result {
        Outcome::Win(Color::Black) => 0,
        Outcome::Draw => 1,
        Outcome::Win(Color::Red) => 2,
    }
}

fn result_of(code: u8) -> Result<Outcome, String> {
    match code {
        0 => Ok(Outcome::Win(Color::Black)),
        1 => Ok(Outcome::Draw),
        2 => Ok(Outcome::Win(Color::Red)),
        other => Err(format!("result {other}")),
    }
}

fn encode_xiongqi(record: &XiongqiRecord) -> [u8; XIONGQI_RECORD_LEN] {
    let mut bytes = [0u8; XIONGQI_RECORD_LEN];
    for sq in xiongqi::Square::all() {
        if let Some(piece) = record.position.piece_at(sq) {
            bytes[sq.index()] = 1 + piece.index() as u8;
        }
    }
    bytes[64] = record.position.side_to_move().index() as u8;
    bytes[65] = result_code(record.result);
    bytes[66..68].copy_from_slice(&record.score.to_le_bytes());
    let mv = record.best_move;
    let promotion = mv.promotion.map_or(0, |kind| 1 + kind.index() as u16);
    let code = mv.from.index() as u16 + 64 * mv.to.index() as u16 + 4096 * promotion;
    bytes[68..70].copy_from_slice(&code.to_le_bytes());
    bytes[70..72].copy_from_slice(&record.ply.to_le_bytes());
    bytes
}

fn decode_xiongqi(bytes: &[u8]) -> Result<XiongqiRecord, String> {
    // The board goes through FEN, whose reader checks what a position must be.
    let pieces = all_xiongqi_pieces();
    let mut fen = String::new();
    for rank in (0..8u8).rev() {
        let mut empty = 0;
        for file in 0..8u8 {
            let sq = xiongqi::Square::new(file, rank).expect("on the board");
            match bytes[sq.index()] {
                0 => empty += 1,
                code => {
                    let piece = pieces.get(usize::from(code - 1)).ok_or(format!("piece code {code}"))?;
                    if empty > 0 {
                        fen.push_str(&empty.to_string());
                        empty = 0;
                    }
                    fen.push(piece.fen_char());
                }
            }
        }
        if empty > 0 {
            fen.push_str(&empty.to_string());
        }
        if rank > 0 {
            fen.push('/');
        }
    }
    fen.push_str(match bytes[64] {
        0 => " w",
        1 => " b",
        other => return Err(format!("side to move {other}")),
    });
    let position = xiongqi::fen::parse(&fen).map_err(|e| e.to_string())?;
    let code = u16::from_le_bytes([bytes[68], bytes[69]]);
    let square = |index: u16| xiongqi::Square::from_index(index as u8).expect("6 bits index a square");
    let promotion = match code >> 12 {
        0 => None,
        p => Some(*xiongqi::PieceKind::ALL.get(usize::from(p - 1)).ok_or(format!("promotion code {p}"))?),
    };
    let best_move = xiongqi::XiongqiMove { from: square(code & 63), to: square((code >> 6) & 63), promotion };
    if !xiongqi::Game::new(position.clone()).legal_moves().contains(&best_move) {
        return Err(format!("best move {best_move} is not legal"));
    }
    Ok(XiongqiRecord {
        position,
        score: i16::from_le_bytes([bytes[66], bytes[67]]),
        best_move,
        ply: u16::from_le_bytes([bytes[70], bytes[71]]),
        result: result_of(bytes[65])?,
    })
}

/// Xiongqi's pieces by index.
fn all_xiongqi_pieces() -> Vec<xiongqi::Piece> {
    let mut pieces: Vec<xiongqi::Piece> = Color::ALL
        .iter()
        .flat_map(|&color| xiongqi::PieceKind::ALL.iter().map(move |&kind| xiongqi::Piece::new(color, kind)))
        .collect();
    pieces.sort_by_key(|p| p.index());
    pieces
}

fn encode(record: &Record) -> [u8; RECORD_LEN] {
    let mut bytes = [0u8; RECORD_LEN];
    let occupied = record.position.occupied();
    bytes[0..16].copy_from_slice(&occupied.bits().to_le_bytes());
    for (i, sq) in occupied.enumerate() {
        let piece = record.position.piece_at(sq).expect("an occupied square");
        let nibble = piece.kind.index() as u8 | if piece.color == Color::Black { 8 } else { 0 };
        bytes[16 + i / 2] |= nibble << (4 * (i % 2));
    }
    bytes[32] = record.position.side_to_move().index() as u8;
    bytes[33] = result_code(record.result);
    bytes[34..36].copy_from_slice(&record.score.to_le_bytes());
    bytes[36..38].copy_from_slice(&record.best_move.to_u16().to_le_bytes());
    bytes[38..40].copy_from_slice(&record.ply.to_le_bytes());
    bytes
}

fn decode(bytes: &[u8]) -> Result<Record, String> {
    let raw = u128::from_le_bytes(bytes[0..16].try_into().expect("16 bytes"));
    let occupied = Bitboard::from_bits(raw);
    if occupied.bits() != raw {
        return Err("occupied bits beyond the board".to_owned());
    }
    if occupied.count() > 32 {
        return Err(format!("{} pieces on the board", occupied.count()));
    }
    let side = match bytes[32] {
        0 => Color::Red,
        1 => Color::Black,
        other => return Err(format!("side to move {other}")),
    };
    let mut position = Position::empty(side, 0, 1);
    for (i, sq) in occupied.enumerate() {
        let nibble = bytes[16 + i / 2] >> (4 * (i % 2)) & 0xF;
        let kind = *PieceKind::ALL.get(usize::from(nibble & 7)).ok_or_else(|| format!("piece code {nibble}"))?;
        let color = if nibble & 8 != 0 { Color::Black } else { Color::Red };
        position.put(Piece::new(color, kind), sq);
    }
    let kings = [position.count(Color::Red, PieceKind::King), position.count(Color::Black, PieceKind::King)];
    validate(&position, kings).map_err(|e| e.to_string())?;
    let result = result_of(bytes[33])?;
    let best_move = Move::from_u16(u16::from_le_bytes([bytes[36], bytes[37]])).ok_or("best move off the board")?;
    position.check_move(best_move).map_err(|e| format!("best move {best_move}: {e}"))?;
    Ok(Record {
        position,
        score: i16::from_le_bytes([bytes[34], bytes[35]]),
        best_move,
        ply: u16::from_le_bytes([bytes[38], bytes[39]]),
        result,
    })
}

/// Writes encoded records as one chunk of `variant`.
fn write_payload(variant: Variant, count: usize, payload: &[u8]) -> Vec<u8> {
    assert!(count <= MAX_RECORDS, "a chunk holds at most {MAX_RECORDS} records");
    let compressed = zstd::bulk::compress(payload, 3).expect("compressing to memory");
    let mut chunk = Vec::with_capacity(HEADER_LEN + compressed.len());
    chunk.extend_from_slice(MAGIC);
    chunk.extend_from_slice(&VERSION.to_le_bytes());
    chunk.extend_from_slice(&[variant_code(variant), 0]);
    chunk.extend_from_slice(&(count as u32).to_le_bytes());
    chunk.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    chunk.extend_from_slice(&(compressed.len() as u32).to_le_bytes());
    chunk.extend_from_slice(&crc32fast::hash(payload).to_le_bytes());
    chunk.extend_from_slice(&[0; 4]);
    chunk.extend_from_slice(&compressed);
    chunk
}

fn variant_code(variant: Variant) -> u8 {
    match variant {
        Variant::Xiangqi => 0,
        Variant::Xiongqi => 1,
    }
}

fn record_len(variant: Variant) -> usize {
    match variant {
        Variant::Xiangqi => RECORD_LEN,
        Variant::Xiongqi => XIONGQI_RECORD_LEN,
    }
}

/// Writes Xiangqi `records` as one chunk.
pub fn write_chunk(records: &[Record]) -> Vec<u8> {
    let payload: Vec<u8> = records.iter().flat_map(encode).collect();
    write_payload(Variant::Xiangqi, records.len(), &payload)
}

/// Writes Xiongqi `records` as one chunk.
pub fn write_xiongqi_chunk(records: &[XiongqiRecord]) -> Vec<u8> {
    let payload: Vec<u8> = records.iter().flat_map(encode_xiongqi).collect();
    write_payload(Variant::Xiongqi, records.len(), &payload)
}

fn u32_at(bytes: &[u8], offset: usize) -> u32 {
    u32::from_le_bytes(bytes[offset..offset + 4].try_into().expect("4 bytes"))
}

/// What a chunk's header says, read without its payload: a reader that bounds what it
/// holds checks the game and the record count here, before the payload is decompressed
/// and decoded (a few KB of zeros can claim a million records, hundreds of MB decoded).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkHeader {
    /// The game of its records.
    pub variant: Variant,
    /// The records it claims (at most [`MAX_RECORDS`]).
    pub records: usize,
    payload_len: usize,
    compressed_len: usize,
    checksum: u32,
}

/// Reads and checks a chunk's header alone.
pub fn read_header(chunk: &[u8]) -> Result<ChunkHeader, ChunkError> {
    let header = chunk.get(..HEADER_LEN).ok_or(ChunkError::Truncated("no complete header"))?;
    if &header[..8] != MAGIC {
        return Err(ChunkError::BadMagic);
    }
    let version = u16::from_le_bytes([header[8], header[9]]);
    if version != VERSION {
        return Err(ChunkError::Version(version));
    }
    let variant = match header[10] {
        0 => Variant::Xiangqi,
        1 => Variant::Xiongqi,
        other => return Err(ChunkError::Variant(other)),
    };
    let count = u32_at(header, 12);
    if count as usize > MAX_RECORDS {
        return Err(ChunkError::TooLarge(count));
    }
    let payload_len = u32_at(header, 16) as usize;
    if payload_len != count as usize * record_len(variant) {
        return Err(ChunkError::Truncated("payload length does not match the record count"));
    }
    Ok(ChunkHeader {
        variant,
        records: count as usize,
        payload_len,
        compressed_len: u32_at(header, 20) as usize,
        checksum: u32_at(header, 24),
    })
}

/// Checks a chunk's header and checksum; returns its variant and payload.
fn read_payload(chunk: &[u8]) -> Result<(Variant, Vec<u8>), ChunkError> {
    let header = read_header(chunk)?;
    let compressed = chunk
        .get(HEADER_LEN..HEADER_LEN + header.compressed_len)
        .ok_or(ChunkError::Truncated("payload shorter than the header says"))?;
    let payload =
        zstd::bulk::decompress(compressed, header.payload_len).map_err(|e| ChunkError::Compression(e.to_string()))?;
    if payload.len() != header.payload_len {
        return Err(ChunkError::Truncated("payload decompresses to the wrong length"));
    }
    if crc32fast::hash(&payload) != header.checksum {
        return Err(ChunkError::Checksum);
    }
    Ok((header.variant, payload))
}

fn decode_all<T>(
    payload: &[u8],
    len: usize,
    decode: impl Fn(&[u8]) -> Result<T, String>,
) -> Result<Vec<T>, ChunkError> {
    payload
        .chunks_exact(len)
        .enumerate()
        .map(|(index, bytes)| decode(bytes).map_err(|problem| ChunkError::Record { index, problem }))
        .collect()
}

/// Reads a Xiangqi chunk, checking its header, checksum and every record.
pub fn read_chunk(chunk: &[u8]) -> Result<Vec<Record>, ChunkError> {
    match read_payload(chunk)? {
        (Variant::Xiangqi, payload) => decode_all(&payload, RECORD_LEN, decode),
        (other, _) => Err(ChunkError::Variant(variant_code(other))),
    }
}

/// Reads a Xiongqi chunk, checking its header, checksum and every record.
pub fn read_xiongqi_chunk(chunk: &[u8]) -> Result<Vec<XiongqiRecord>, ChunkError> {
    match read_payload(chunk)? {
        (Variant::Xiongqi, payload) => decode_all(&payload, XIONGQI_RECORD_LEN, decode_xiongqi),
        (other, _) => Err(ChunkError::Variant(variant_code(other))),
    }
}

/// A chunk's records, of the game it holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Records {
    /// Xiangqi records.
    Xiangqi(Vec<Record>),
    /// Xiongqi records.
    Xiongqi(Vec<XiongqiRecord>),
}

impl Records {
    /// The game the records are of.
    pub fn variant(&self) -> Variant {
        match self {
            Records::Xiangqi(_) => Variant::Xiangqi,
            Records::Xiongqi(_) => Variant::Xiongqi,
        }
    }

    /// The number of records.
    pub fn len(&self) -> usize {
        match self {
            Records::Xiangqi(records) => records.len(),
            Records::Xiongqi(records) => records.len(),
        }
    }

    /// Whether there are no records.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Reads a chunk of either game, checking its header, checksum and every record.
pub fn read_any_chunk(chunk: &[u8]) -> Result<Records, ChunkError> {
    match read_payload(chunk)? {
        (Variant::Xiangqi, payload) => decode_all(&payload, RECORD_LEN, decode).map(Records::Xiangqi),
        (Variant::Xiongqi, payload) => decode_all(&payload, XIONGQI_RECORD_LEN, decode_xiongqi).map(Records::Xiongqi),
    }
}

/// Checks a chunk of either game whole (header, checksum, every record); returns its
/// game and number of records.
pub fn check_chunk(chunk: &[u8]) -> Result<(Variant, usize), ChunkError> {
    read_any_chunk(chunk).map(|records| (records.variant(), records.len()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xiangqi::movegen::legal_moves;

    fn sample() -> Vec<Record> {
        let mut position = Position::startpos();
        let mut records = Vec::new();
        for ply in 0..30u16 {
            let moves = legal_moves(&position);
            let mv = moves[(ply as usize * 7) % moves.len()];
            records.push(Record {
                position: position.clone(),
                score: ply as i16 * 3 - 40,
                best_move: mv,
                ply,
                result: Outcome::Win(Color::Black),
            });
            position.make_move(mv);
        }
        records
    }

    fn same_records(a: &[Record], b: &[Record]) {
        assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(b) {
            assert_eq!(x.position.hash(), y.position.hash());
            assert_eq!((x.score, x.best_move, x.ply, x.result), (y.score, y.best_move, y.ply, y.result));
        }
    }

    /// Xiongqi records along a game of varied moves, promotions included.
    fn xiongqi_sample() -> Vec<XiongqiRecord> {
        let fens = ["rhb1gbhr/2c2c2/s1ss1sss/3a4/1S2S3/S1S2SSS/2C2C2/RHBAGBHR b", "r2g4/1S4S1/8/8/8/8/8/4G2R w"];
        let mut records = Vec::new();
        for fen in fens {
            let mut game = xiongqi::Game::new(xiongqi::fen::parse(fen).unwrap());
            for ply in 0..20u16 {
                let moves = game.legal_moves();
                if moves.is_empty() || game.ruling().is_some() {
                    break;
                }
                // Promotions first when there are any, else a spread of moves.
                let mv = moves
                    .iter()
                    .copied()
                    .find(|m| m.promotion.is_some())
                    .unwrap_or(moves[(ply as usize * 5) % moves.len()]);
                records.push(XiongqiRecord {
                    position: game.position().clone(),
                    score: 7 - ply as i16,
                    best_move: mv,
                    ply,
                    result: Outcome::Win(Color::Red),
                });
                game.play(mv).unwrap();
            }
        }
        assert!(records.iter().any(|r| r.best_move.promotion.is_some()));
        records
    }

    #[test]
    fn xiongqi_chunks_round_trip_bit_for_bit_and_are_told_apart() {
        let records = xiongqi_sample();
        let chunk = write_xiongqi_chunk(&records);
        let back = read_xiongqi_chunk(&chunk).unwrap();
        assert_eq!(back.len(), records.len());
        for (x, y) in records.iter().zip(&back) {
            assert_eq!(x.position.hash(), y.position.hash());
            assert_eq!((x.score, x.best_move, x.ply, x.result), (y.score, y.best_move, y.ply, y.result));
        }
        assert_eq!(write_xiongqi_chunk(&back), chunk);
        assert_eq!(check_chunk(&chunk), Ok((Variant::Xiongqi, records.len())));
        assert_eq!(read_chunk(&chunk), Err(ChunkError::Variant(1)), "a Xiongqi chunk is not read as Xiangqi");
        let xiangqi = write_chunk(&sample());
        assert_eq!(read_xiongqi_chunk(&xiangqi), Err(ChunkError::Variant(0)));
        assert_eq!(check_chunk(&xiangqi), Ok((Variant::Xiangqi, 30)));
        // A best move that is not legal in its position is refused.
        let mut bad = records.clone();
        bad[0].best_move = bad[1].best_move;
        let error = read_xiongqi_chunk(&write_xiongqi_chunk(&bad)).unwrap_err();
        assert!(matches!(error, ChunkError::Record { index: 0, .. }), "{error}");
    }

    #[test]
    fn random_records_behind_a_valid_header_are_refused_not_panicked_on() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for round in 0..2000 {
            let variant = if round % 2 == 0 { Variant::Xiangqi } else { Variant::Xiongqi };
            let count = rng.random_range(1..4);
            // Bytes drawn mostly small, so that some fields land in range.
            let payload: Vec<u8> = (0..count * record_len(variant))
                .map(|_| if rng.random_bool(0.8) { rng.random_range(0..20) } else { rng.random() })
                .collect();
            let chunk = write_payload(variant, count, &payload);
            if let Ok((read_variant, read_count)) = check_chunk(&chunk) {
                assert_eq!((read_variant, read_count), (variant, count));
            }
        }
    }

    #[test]
    fn chunks_round_trip_bit_for_bit() {
        let records = sample();
        let chunk = write_chunk(&records);
        let back = read_chunk(&chunk).unwrap();
        same_records(&records, &back);
        assert_eq!(write_chunk(&back), chunk);
    }

    /// The header alone says a chunk's game and count, and refuses what the whole read
    /// refuses of the header, without touching the payload (here cut off entirely).
    #[test]
    fn a_header_is_read_alone_and_agrees_with_the_whole_chunk() {
        let chunk = write_chunk(&sample());
        let header = read_header(&chunk[..HEADER_LEN]).unwrap();
        assert_eq!((header.variant, header.records), (Variant::Xiangqi, 30));
        let xiongqi = write_xiongqi_chunk(&xiongqi_sample());
        let header = read_header(&xiongqi).unwrap();
        assert_eq!(Ok((header.variant, header.records)), check_chunk(&xiongqi));
        let mut claims_too_many = chunk[..HEADER_LEN].to_vec();
        claims_too_many[12..16].copy_from_slice(&(MAX_RECORDS as u32 + 1).to_le_bytes());
        assert_eq!(read_header(&claims_too_many), Err(ChunkError::TooLarge(MAX_RECORDS as u32 + 1)));
        let mut length_disagrees = chunk[..HEADER_LEN].to_vec();
        length_disagrees[12..16].copy_from_slice(&31u32.to_le_bytes());
        assert!(matches!(read_header(&length_disagrees), Err(ChunkError::Truncated(_))));
        assert_eq!(read_header(&chunk[..HEADER_LEN - 1]), Err(ChunkError::Truncated("no complete header")));
    }

    #[test]
    fn damage_is_detected() {
        let chunk = write_chunk(&sample());
        assert_eq!(read_chunk(&chunk[..20]), Err(ChunkError::Truncated("no complete header")));
        let mut bad = chunk.clone();
        bad[0] = b'Y';
        assert_eq!(read_chunk(&bad), Err(ChunkError::BadMagic));
        let mut bad = chunk.clone();
        bad[8] = 2;
        assert_eq!(read_chunk(&bad), Err(ChunkError::Version(2)));
        let mut bad = chunk.clone();
        bad[24] ^= 1;
        assert_eq!(read_chunk(&bad), Err(ChunkError::Checksum));
        assert!(read_chunk(&chunk[..chunk.len() - 1]).is_err());
    }
}
