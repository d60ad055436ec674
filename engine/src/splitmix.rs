//! SplitMix64 and the compile-time Zobrist keys of both games drawn from it.

/// Advances `state` and returns the new state and the next 64-bit output.
pub(crate) const fn splitmix64(state: u64) -> (u64, u64) {
    let state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (state, z ^ (z >> 31))
}

/// Zobrist keys for `PIECES` kinds of piece on `SQUARES` squares, and one for the
/// second player to move, drawn from SplitMix64 seeded with `seed`.
pub(crate) const fn zobrist_keys<const PIECES: usize, const SQUARES: usize>(
    seed: u64,
) -> ([[u64; SQUARES]; PIECES], u64) {
    let mut keys = [[0; SQUARES]; PIECES];
    let mut state = seed;
    let mut piece = 0;
    while piece < PIECES {
        let mut square = 0;
        while square < SQUARES {
            let (next, key) = splitmix64(state);
            state = next;
            keys[piece][square] = key;
            square += 1;
        }
        piece += 1;
    }
    (keys, splitmix64(state).1)
}
