//! The two sides. Red (Xiangqi) and South (Xiongqi) move first and sit on ranks 0..;
//! Black and North move second.

use std::ops::{Index, IndexMut, Not};

/// A side. `Red` is the first player (Xiangqi's Red, Xiongqi's South), written `w`
/// in FEN; `Black` is the second (Xiongqi's North), written `b`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Color {
    /// The first player.
    Red,
    /// The second player.
    Black,
}

impl Color {
    /// Both sides, first player first.
    pub const ALL: [Color; 2] = [Color::Red, Color::Black];

    /// 0 for Red, 1 for Black.
    pub const fn index(self) -> usize {
        self as usize
    }

    /// The letter FEN uses for the side to move.
    pub const fn fen_char(self) -> char {
        match self {
            Color::Red => 'w',
            Color::Black => 'b',
        }
    }

    /// Chooses `red` or `black`.
    pub fn fold<T>(self, red: T, black: T) -> T {
        match self {
            Color::Red => red,
            Color::Black => black,
        }
    }
}

impl Not for Color {
    type Output = Color;
    fn not(self) -> Color {
        match self {
            Color::Red => Color::Black,
            Color::Black => Color::Red,
        }
    }
}

/// One value for each side.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ByColor<T> {
    /// Red's value.
    pub red: T,
    /// Black's value.
    pub black: T,
}

impl<T> ByColor<T> {
    /// Builds from a function of the side.
    pub fn new_with(mut f: impl FnMut(Color) -> T) -> Self {
        ByColor { red: f(Color::Red), black: f(Color::Black) }
    }
}

impl<T> Index<Color> for ByColor<T> {
    type Output = T;
    fn index(&self, color: Color) -> &T {
        match color {
            Color::Red => &self.red,
            Color::Black => &self.black,
        }
    }
}

impl<T> IndexMut<Color> for ByColor<T> {
    fn index_mut(&mut self, color: Color) -> &mut T {
        match color {
            Color::Red => &mut self.red,
            Color::Black => &mut self.black,
        }
    }
}
