//! A test's course: its counts at evenly spaced marks over time, for its charts.

use crate::storage::counts::add_points;

/// The most points of a test's history: enough for a chart's width.
pub const HISTORY_POINTS: usize = 400;

/// A test's counts as they grew, kept as pairs count: a mark every `step` pairs, and
/// when the marks reach [`HISTORY_POINTS`] every other one goes and the step doubles.
/// Counting a pair costs O(1) and a history at most [`HISTORY_POINTS`] SPRT
/// evaluations, however long the test (reading its pairs back would cost a scan of
/// all of them on every look at a live page).
#[derive(Clone, Debug)]
pub struct Course {
    step: u64,
    now: Mark,
    marks: Vec<Mark>,
}

/// A test's counts after some of its pairs.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Mark {
    /// When the last of them counted, in milliseconds since the Unix epoch.
    pub time_ms: i64,
    pub pairs: u64,
    pub wdl: [u64; 3],
    pub penta: [u64; 5],
}

impl Default for Course {
    fn default() -> Self {
        Course { step: 1, now: Mark::default(), marks: Vec::new() }
    }
}

impl Course {
    /// The course of pairs (time counted, the new engine's half points per game) in
    /// the order they counted.
    pub fn of(pairs: &[(i64, [i64; 2])]) -> Course {
        let mut course = Course::default();
        for &(time_ms, points) in pairs {
            course.add(time_ms, points);
        }
        course
    }

    /// Counts a pair.
    pub fn add(&mut self, time_ms: i64, points: [i64; 2]) {
        let now = &mut self.now;
        add_points(&mut now.wdl, &mut now.penta, points);
        now.pairs += 1;
        now.time_ms = time_ms;
        if now.pairs.is_multiple_of(self.step) {
            self.marks.push(*now);
            if self.marks.len() >= HISTORY_POINTS {
                self.step *= 2;
                let step = self.step;
                self.marks.retain(|mark| mark.pairs.is_multiple_of(step));
            }
        }
    }

    /// Pairs counted.
    pub fn pairs(&self) -> u64 {
        self.now.pairs
    }

    /// The marks, evenly spaced, and the counts now: at most [`HISTORY_POINTS`].
    pub fn marks(&self) -> impl Iterator<Item = Mark> + '_ {
        let now = (self.now.pairs > 0 && self.marks.last() != Some(&self.now)).then_some(self.now);
        self.marks.iter().copied().chain(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_course_keeps_evenly_spaced_marks_and_ends_where_the_counts_stand() {
        let pairs: Vec<(i64, [i64; 2])> =
            (0..1_000).map(|i| (i as i64, [(i % 3) as i64, ((i / 3) % 3) as i64])).collect();
        for n in [0, 1, 7, 399, 400, 401, 1_000] {
            let course = Course::of(&pairs[..n]);
            let marks: Vec<Mark> = course.marks().collect();
            assert!(marks.len() <= HISTORY_POINTS, "{n} pairs: {} marks", marks.len());
            assert_eq!(course.pairs(), n as u64);
            let Some(last) = marks.last() else {
                assert_eq!(n, 0);
                continue;
            };
            // The last mark is where the counts stand: recounted from the pairs here.
            let (mut wdl, mut penta) = ([0; 3], [0; 5]);
            for &(_, points) in &pairs[..n] {
                add_points(&mut wdl, &mut penta, points);
            }
            assert_eq!((last.pairs, last.wdl, last.penta, last.time_ms), (n as u64, wdl, penta, n as i64 - 1));
            // Every mark but the last is a multiple of one step, with no gaps.
            let step = marks[0].pairs;
            for (index, mark) in marks.iter().enumerate().take(marks.len() - 1) {
                assert_eq!(mark.pairs, step * (index as u64 + 1), "{n} pairs");
            }
            assert!(n < HISTORY_POINTS || marks.len() >= HISTORY_POINTS / 2, "{n} pairs: {} marks", marks.len());
        }
    }
}
