//! The worker: plays matches between UCI/UCCI engines under the tournament rules, like
//! cutechess-cli or fastchess but for Xiangqi, with the engine library's arbiter as the
//! referee.
//!
//! Layout: [`engine_process`] talks to one engine; [`time_control`] keeps the clocks;
//! [`game`] plays one game; [`openings`] reads books; [`match_runner`] plays pairs
//! concurrently and keeps the totals, [`resume`] takes a stopped match up again from
//! its PGN; [`pgn_out`] writes the records; [`selfplay`]
//! generates training data; [`spsa`] tunes an engine's parameters with local games;
//! [`tournament`] plays round robins and gauntlets of many engines;
//! [`sandbox`] confines engines a coordinator sends; [`reference`] asks pyffish for
//! Fairy-Stockfish's verdicts in verification jobs; [`fleet`] is the worker of a
//! coordinator's fleet, which puts them to work.

pub mod engine_process;
pub mod fleet;
pub mod game;
pub mod match_runner;
pub mod openings;
pub mod pgn_out;
pub mod reference;
pub mod resume;
pub mod sandbox;
pub mod selfplay;
pub mod spsa;
pub mod time_use;
pub mod tournament;
pub use xq_engine::time_control;
