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
//! | 10 | 1 | variant: 0 Xiangqi |
//! | 11 | 1 | reserved, 0 |
//! | 12 | 4 | number of records |
//! | 16 | 4 | payload length, uncompressed (records x 40) |
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

use super::fen::validate;
use super::{Bitboard, Move, Piece, PieceKind, Position};
use crate::color::Color;
use crate::xiangqi::rules::Outcome;

const MAGIC: &[u8; 8] = b"XQCHUNK\0";
const VERSION: u16 = 1;
const HEADER_LEN: usize = 32;
const RECORD_LEN: usize = 40;
/// Most records one chunk may hold (about 40 MB uncompressed).
pub const MAX_RECORDS: usize = 1 << 20;

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
    /// An unknown variant.
    #[error("variant {0} is not supported")]
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
    bytes[33] = match record.result {
        Outcome::Win(Color::Black) => 0,
        Outcome::Draw => 1,
        Outcome::Win(Color::Red) => 2,
    };
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
    let result = match bytes[33] {
        0 => Outcome::Win(Color::Black),
        1 => Outcome::Draw,
        2 => Outcome::Win(Color::Red),
        other => return Err(format!("result {other}")),
    };
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

/// Writes `records` as one chunk.
pub fn write_chunk(records: &[Record]) -> Vec<u8> {
    assert!(records.len() <= MAX_RECORDS, "a chunk holds at most {MAX_RECORDS} records");
    let mut payload = Vec::with_capacity(records.len() * RECORD_LEN);
    for record in records {
        payload.extend_from_slice(&encode(record));
    }
    let compressed = zstd::bulk::compress(&payload, 3).expect("compressing to memory");
    let mut chunk = Vec::with_capacity(HEADER_LEN + compressed.len());
    chunk.extend_from_slice(MAGIC);
    chunk.extend_from_slice(&VERSION.to_le_bytes());
    chunk.extend_from_slice(&[0, 0]);
    chunk.extend_from_slice(&(records.len() as u32).to_le_bytes());
    chunk.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    chunk.extend_from_slice(&(compressed.len() as u32).to_le_bytes());
    chunk.extend_from_slice(&crc32fast::hash(&payload).to_le_bytes());
    chunk.extend_from_slice(&[0; 4]);
    chunk.extend_from_slice(&compressed);
    chunk
}

fn u32_at(bytes: &[u8], offset: usize) -> u32 {
    u32::from_le_bytes(bytes[offset..offset + 4].try_into().expect("4 bytes"))
}

/// Reads a chunk, checking its header, checksum and every record.
pub fn read_chunk(chunk: &[u8]) -> Result<Vec<Record>, ChunkError> {
    let header = chunk.get(..HEADER_LEN).ok_or(ChunkError::Truncated("no complete header"))?;
    if &header[..8] != MAGIC {
        return Err(ChunkError::BadMagic);
    }
    let version = u16::from_le_bytes([header[8], header[9]]);
    if version != VERSION {
        return Err(ChunkError::Version(version));
    }
    if header[10] != 0 {
        return Err(ChunkError::Variant(header[10]));
    }
    let count = u32_at(header, 12);
    if count as usize > MAX_RECORDS {
        return Err(ChunkError::TooLarge(count));
    }
    let payload_len = u32_at(header, 16) as usize;
    if payload_len != count as usize * RECORD_LEN {
        return Err(ChunkError::Truncated("payload length does not match the record count"));
    }
    let compressed_len = u32_at(header, 20) as usize;
    let compressed = chunk
        .get(HEADER_LEN..HEADER_LEN + compressed_len)
        .ok_or(ChunkError::Truncated("payload shorter than the header says"))?;
    let payload =
        zstd::bulk::decompress(compressed, payload_len).map_err(|e| ChunkError::Compression(e.to_string()))?;
    if payload.len() != payload_len {
        return Err(ChunkError::Truncated("payload decompresses to the wrong length"));
    }
    if crc32fast::hash(&payload) != u32_at(header, 24) {
        return Err(ChunkError::Checksum);
    }
    payload
        .chunks_exact(RECORD_LEN)
        .enumerate()
        .map(|(index, bytes)| decode(bytes).map_err(|problem| ChunkError::Record { index, problem }))
        .collect()
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

    #[test]
    fn chunks_round_trip_bit_for_bit() {
        let records = sample();
        let chunk = write_chunk(&records);
        let back = read_chunk(&chunk).unwrap();
        same_records(&records, &back);
        assert_eq!(write_chunk(&back), chunk);
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
