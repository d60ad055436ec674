//! Score adjudication (cutechess-cli's `-draw` and `-resign`): the one definition the
//! worker ends games by and the coordinator checks reported games against, so that a
//! game counts as adjudicated only where the test's own settings end it.

use crate::color::{ByColor, Color};

/// When games are adjudicated by the engines' scores.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Adjudication {
    /// Draw when, from this move number on, both engines report |score| <= `score`
    /// for `plies` consecutive plies: (move number, plies, score).
    pub draw: Option<(u32, usize, i32)>,
    /// Resign when one engine reports <= -`score` and the other >= `score` for `moves`
    /// consecutive moves each: (moves, score).
    pub resign: Option<(usize, i32)>,
}

/// Settings that cannot be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{option}: {problem}")]
pub struct BadAdjudication {
    /// `--draw` or `--resign`.
    pub option: &'static str,
    /// What is wrong.
    pub problem: String,
}

impl Adjudication {
    /// Reads command-line settings as cutechess-cli takes them: `--draw movenumber=N
    /// movecount=M score=S` and `--resign movecount=M score=S` (scores in centipawns),
    /// each key optional with cutechess-cli's defaults (40, 8, 10; 3, 800).
    pub fn from_words(draw: Option<&[String]>, resign: Option<&[String]>) -> Result<Adjudication, BadAdjudication> {
        fn settings<'a>(
            option: &'static str,
            words: &'a [String],
        ) -> Result<impl Iterator<Item = (&'a str, &'a str)> + 'a, BadAdjudication> {
            let bad = |problem: String| BadAdjudication { option, problem };
            let pairs: Vec<_> = words
                .iter()
                .map(|w| w.split_once('=').ok_or_else(|| bad(format!("'{w}' is not key=value"))))
                .collect::<Result<_, _>>()?;
            Ok(pairs.into_iter())
        }
        fn number<T: std::str::FromStr>(option: &'static str, key: &str, value: &str) -> Result<T, BadAdjudication> {
            value.parse().map_err(|_| BadAdjudication { option, problem: format!("{key}={value} is not a number") })
        }
        let mut rules = Adjudication::default();
        if let Some(words) = draw {
            let (mut from, mut count, mut score) = (40, 8, 10);
            for (key, value) in settings("--draw", words)? {
                match key {
                    "movenumber" => from = number("--draw", key, value)?,
                    "movecount" => count = number("--draw", key, value)?,
                    "score" => score = number("--draw", key, value)?,
                    other => {
                        return Err(BadAdjudication { option: "--draw", problem: format!("unknown key '{other}'") });
                    }
                }
            }
            rules.draw = Some((from, count, score));
        }
        if let Some(words) = resign {
            let (mut count, mut score) = (3, 800);
            for (key, value) in settings("--resign", words)? {
                match key {
                    "movecount" => count = number("--resign", key, value)?,
                    "score" => score = number("--resign", key, value)?,
                    other => {
                        return Err(BadAdjudication { option: "--resign", problem: format!("unknown key '{other}'") });
                    }
                }
            }
            rules.resign = Some((count, score));
        }
        Ok(rules)
    }
}

/// What adjudication decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// A draw by score.
    Draw,
    /// This side resigns.
    Resigns(Color),
}

/// Follows a game's scores ply by ply.
#[derive(Clone, Debug)]
pub struct Adjudicator {
    rules: Adjudication,
    plies: usize,
    previous_score: Option<i32>,
    draw_streak: usize,
    resign_streak: ByColor<usize>,
}

impl Adjudicator {
    /// Before the game's first ply.
    pub fn new(rules: Adjudication) -> Self {
        Adjudicator { rules, plies: 0, previous_score: None, draw_streak: 0, resign_streak: ByColor::default() }
    }

    /// After a book ply: it counts towards move numbers, and no engine scored it.
    pub fn book_ply(&mut self) {
        self.plies += 1;
        self.previous_score = None;
    }

    /// After a ply by `mover`, with its engine's score from the mover's view (`None`
    /// for book moves and engines that gave none): whether the game ends here.
    pub fn after_ply(&mut self, mover: Color, score: Option<i32>) -> Option<Verdict> {
        self.plies += 1;
        let previous = std::mem::replace(&mut self.previous_score, score);
        let score = score?;
        if let Some((from_move, plies, limit)) = self.rules.draw {
            let move_number = self.plies.div_ceil(2) as u32;
            self.draw_streak = if move_number >= from_move && score.abs() <= limit { self.draw_streak + 1 } else { 0 };
            if self.draw_streak >= plies {
                return Some(Verdict::Draw);
            }
        }
        if let Some((count, limit)) = self.rules.resign {
            let streak = &mut self.resign_streak[mover];
            *streak = if score <= -limit { *streak + 1 } else { 0 };
            let winner_agrees = previous.is_some_and(|s| s >= limit);
            if *streak >= count && winner_agrees {
                return Some(Verdict::Resigns(mover));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Plays `scores` from Red's first ply on: the ply (1-based) and verdict that end it.
    fn first_verdict(rules: Adjudication, scores: &[Option<i32>]) -> Option<(usize, Verdict)> {
        let mut adjudicator = Adjudicator::new(rules);
        let mut mover = Color::Red;
        for (ply, &score) in scores.iter().enumerate() {
            if let Some(verdict) = adjudicator.after_ply(mover, score) {
                return Some((ply + 1, verdict));
            }
            mover = !mover;
        }
        None
    }

    #[test]
    fn settings_are_read_as_cutechess_takes_them() {
        let words = |text: &str| text.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
        let both = Adjudication::from_words(Some(&words("movenumber=30 score=5")), Some(&words("movecount=4")));
        assert_eq!(both, Ok(Adjudication { draw: Some((30, 8, 5)), resign: Some((4, 800)) }));
        assert_eq!(Adjudication::from_words(None, None), Ok(Adjudication::default()));
        let bad = Adjudication::from_words(Some(&words("movecount=x")), None).unwrap_err();
        assert_eq!(bad.to_string(), "--draw: movecount=x is not a number");
        assert!(Adjudication::from_words(None, Some(&words("plies=3"))).is_err());
        assert!(Adjudication::from_words(None, Some(&words("score"))).is_err());
    }

    #[test]
    fn a_draw_needs_the_streak_from_the_move_number_on() {
        let rules = Adjudication { draw: Some((3, 4, 10)), resign: None };
        // Plies 1-4 are moves 1-2, before move 3: they do not count.
        let level = vec![Some(0); 8];
        assert_eq!(first_verdict(rules, &level), Some((8, Verdict::Draw)));
        // A score beyond the limit restarts the streak; a book move keeps it.
        let broken = [Some(0), Some(0), Some(0), Some(0), Some(0), Some(50), Some(0), None, Some(0), Some(0), Some(5)];
        assert_eq!(first_verdict(rules, &broken), Some((11, Verdict::Draw)));
    }

    #[test]
    fn a_resignation_needs_both_engines_to_agree() {
        let rules = Adjudication { draw: None, resign: Some((2, 500)) };
        // Black (the second mover) sees itself lost twice, Red winning before each.
        let lost = [Some(600), Some(-600), Some(600), Some(-700)];
        assert_eq!(first_verdict(rules, &lost), Some((4, Verdict::Resigns(Color::Black))));
        // Red does not agree the second time: no resignation yet.
        let disputed = [Some(600), Some(-600), Some(100), Some(-700)];
        assert_eq!(first_verdict(rules, &disputed), None);
        assert_eq!(first_verdict(Adjudication::default(), &lost), None);
    }
}
