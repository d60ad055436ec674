//! Integration tests of the engine library and the `xq-engine` binary.

mod asian_chases;
mod asian_rules;
mod collection;
mod common;
mod fairy_stockfish;
mod judge;
mod nnue;
mod perft;
mod properties;
mod pyffish;
mod repetition_window;
mod rules;
mod search_levers;
mod self_play;
mod uci;
mod violation_timing;
mod xiongqi;
