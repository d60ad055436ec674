//! The transposition table, shared by all search threads without locks.
//!
//! Each entry is two atomic words: the data and the key XOR the data. A reader that
//! sees halves of two different writes finds the key check failing and ignores the
//! entry, so torn reads cost a miss, never a wrong answer.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::xiangqi::Move;

/// How a stored score bounds the true score.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bound {
    /// The score is exact.
    Exact,
    /// The true score is at least this (a beta cutoff).
    Lower,
    /// The true score is at most this (no move reached alpha).
    Upper,
}

/// What an entry holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TtData {
    /// The best move found, if any.
    pub mv: Option<Move>,
    /// The score, with mate scores relative to the entry's node.
    pub score: i32,
    /// The static evaluation.
    pub eval: i32,
    /// The depth searched.
    pub depth: i32,
    /// The bound.
    pub bound: Bound,
}

#[derive(Default)]
struct Entry {
    check: AtomicU64,
    data: AtomicU64,
}

/// A fixed-size table indexed by the position hash.
pub struct TranspositionTable {
    entries: Box<[Entry]>,
}

fn pack(data: TtData) -> u64 {
    let mv = data.mv.map_or(0, |m| m.to_u16()) as u64;
    let score = data.score as i16 as u16 as u64;
    let eval = data.eval as i16 as u16 as u64;
    let depth = data.depth.clamp(-1, 254) as i16 as u8 as u64;
    let bound = match data.bound {
        Bound::Exact => 1,
        Bound::Lower => 2,
        Bound::Upper => 3,
    };
    mv | score << 16 | eval << 32 | depth << 48 | bound << 56
}

fn unpack(bits: u64) -> Option<TtData> {
    let bound = match bits >> 56 & 0xFF {
        1 => Bound::Exact,
        2 => Bound::Lower,
        3 => Bound::Upper,
        _ => return None,
    };
    let mv_bits = bits as u16;
    Some(TtData {
        mv: if mv_bits == 0 { None } else { Move::from_u16(mv_bits) },
        score: (bits >> 16) as u16 as i16 as i32,
        eval: (bits >> 32) as u16 as i16 as i32,
        depth: (bits >> 48) as u8 as i8 as i32,
        bound,
    })
}

impl TranspositionTable {
    /// A table of about `megabytes` MiB (at least one entry).
    pub fn new(megabytes: usize) -> Self {
        let count = (megabytes.max(1) << 20) / std::mem::size_of::<Entry>();
        TranspositionTable { entries: (0..count.max(1)).map(|_| Entry::default()).collect() }
    }

    fn entry(&self, key: u64) -> &Entry {
        let index = ((key as u128 * self.entries.len() as u128) >> 64) as usize;
        &self.entries[index]
    }

    /// The entry for `key`, if stored and intact.
    pub fn probe(&self, key: u64) -> Option<TtData> {
        let entry = self.entry(key);
        let data = entry.data.load(Ordering::Relaxed);
        let check = entry.check.load(Ordering::Relaxed);
        if check ^ data == key { unpack(data) } else { None }
    }

    /// Stores `data` for `key`, replacing what was there unless that was the same
    /// position searched deeper without a better move to offer.
    pub fn store(&self, key: u64, mut data: TtData) {
        let entry = self.entry(key);
        if let Some(old) = self.probe(key) {
            if data.mv.is_none() {
                data.mv = old.mv;
            }
            if old.depth > data.depth + 2 && data.bound != Bound::Exact {
                return;
            }
        }
        let bits = pack(data);
        entry.data.store(bits, Ordering::Relaxed);
        entry.check.store(key ^ bits, Ordering::Relaxed);
    }

    /// Empties the table.
    pub fn clear(&self) {
        for entry in self.entries.iter() {
            entry.data.store(0, Ordering::Relaxed);
            entry.check.store(0, Ordering::Relaxed);
        }
    }

    /// Permille of a sample of entries in use, for `info hashfull`.
    pub fn hashfull(&self) -> u32 {
        let sample = self.entries.len().min(1000);
        let used = self.entries[..sample].iter().filter(|e| e.data.load(Ordering::Relaxed) != 0).count();
        (used * 1000 / sample.max(1)) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xiangqi::Square;

    #[test]
    fn entries_round_trip_and_other_keys_miss() {
        let table = TranspositionTable::new(1);
        let mv = Move::new(Square::from_index(7).unwrap(), Square::from_index(70).unwrap());
        let data = TtData { mv: Some(mv), score: -29_950, eval: 31, depth: 17, bound: Bound::Lower };
        table.store(0xDEAD_BEEF, data);
        assert_eq!(table.probe(0xDEAD_BEEF), Some(data));
        assert_eq!(table.probe(0xDEAD_BEEE), None);
    }
}
