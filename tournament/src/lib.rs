//! Tournaments as the World Xiangqi Rules organise them (Chapter 2 and the Appendix):
//! [`pairing`] makes the rounds (Berger round robins, single or double, gauntlets and
//! knockout brackets) and [`swiss`] a Swiss event's, round by round; [`scoring`] counts points as Article 9 does; [`standings`] places the
//! players with Article 10's tie-breaks. Ratings over all games are
//! `xq_stats::ratings`'.

pub mod pairing;
pub mod scoring;
pub mod standings;
pub mod swiss;
