//! Tests (SPRT and fixed-games matches): the arbiter's replay of their reported games
//! and the evidence of endings the rules did not make.

pub mod endings;
pub mod replay;
