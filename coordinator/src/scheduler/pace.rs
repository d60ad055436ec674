//! A worker's pace: how many cores' worth of work it has shown that it plays, from
//! what it reported rather than from the cores it declared, and so how much work it
//! may hold at once. A worker that declares a thousand cores and reports like one
//! holds about what one core plays, and cannot sit on a test's units until they
//! expire; a new worker starts with [`START_CORES`], and its allowance grows with
//! what it reports.
//!
//! Work is counted in the scheduler's own estimate of a unit's seconds on that worker,
//! so that units of every job kind add up and an estimate that is off cancels out
//! between what a worker holds and what it reported. Time counts only while the worker
//! holds a lease: a worker left without work (an idle fleet) does not look slow for it.
//! The pace lives in memory: after a restart every worker starts again.

use std::time::{Duration, Instant};

/// The cores' worth of work a worker that has shown nothing yet may hold: a few
/// leases of a lease's length each, enough for a small machine's first lease.
pub const START_CORES: f64 = 4.0;

/// How far beyond its measured pace a worker's allowance goes: the scheduler's
/// estimate of a unit's time can be off by this much (games shorter or longer than
/// assumed, a search slower than the worker's bench) before an honest worker is held
/// back, and the tail of a lease (fewer games left than cores) lowers the pace.
pub const HEADROOM: f64 = 4.0;

/// What a worker has reported, and for how long it held work.
#[derive(Clone, Debug, Default)]
pub struct Pace {
    /// Estimated seconds of the units it reported.
    reported: f64,
    /// The time it held leases, until its current stretch.
    busy: Duration,
    /// Since when it holds a lease, if it does.
    busy_since: Option<Instant>,
}

impl Pace {
    /// It took a lease at `now`: its time counts from there unless it already did.
    pub fn lease_taken(&mut self, now: Instant) {
        self.busy_since.get_or_insert(now);
    }

    /// Its last active lease closed at `now`: its time stops counting.
    pub fn idle(&mut self, now: Instant) {
        if let Some(since) = self.busy_since.take() {
            self.busy += now.saturating_duration_since(since);
        }
    }

    /// It reported units estimated at `seconds` of work.
    pub fn reported(&mut self, seconds: f64) {
        self.reported += seconds.max(0.0);
    }

    /// The cores' worth of work it reported per second it held work, by `now`.
    pub fn cores(&self, now: Instant) -> f64 {
        let busy = self.busy + self.busy_since.map_or(Duration::ZERO, |since| now.saturating_duration_since(since));
        if self.reported == 0.0 {
            return 0.0;
        }
        self.reported / busy.as_secs_f64().max(1e-3)
    }

    /// The cores' worth of work it will have shown once units estimated at `seconds`
    /// more are counted: what a report about to be counted shows, [`Self::cores`] after.
    pub fn cores_after(&self, now: Instant, seconds: f64) -> f64 {
        Pace { reported: self.reported + seconds.max(0.0), ..self.clone() }.cores(now)
    }

    /// The most estimated seconds of work it may hold at once, leases being sized at
    /// `lease_seconds` of work per core.
    pub fn allowance(&self, now: Instant, lease_seconds: f64) -> f64 {
        lease_seconds * (HEADROOM * self.cores(now)).max(START_CORES)
    }
}

/// How many units of `unit_seconds` each a worker holding `held` seconds of work may
/// still take under `allowance`: a lease may go past it by less than a unit, as leases
/// are sized, and a worker holding nothing may always take one unit (a unit longer
/// than its allowance would otherwise never be played).
pub fn units_allowed(allowance: f64, held: f64, unit_seconds: f64) -> usize {
    let room = allowance - held;
    // Less a rounding error's worth: a room of exactly one unit is one unit.
    let units = if room > 0.0 { (room / unit_seconds.max(1e-3) - 1e-9).ceil() as usize } else { 0 };
    if held <= 0.0 { units.max(1) } else { units }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_worker_may_hold_its_start_allowance() {
        let pace = Pace::default();
        let now = Instant::now();
        assert_eq!(pace.cores(now), 0.0);
        assert_eq!(pace.allowance(now, 300.0), 300.0 * START_CORES);
    }

    #[test]
    fn the_pace_is_work_reported_per_second_held() {
        let start = Instant::now();
        let mut pace = Pace::default();
        pace.lease_taken(start);
        // A second lease while it holds the first does not restart its time.
        pace.lease_taken(start + Duration::from_secs(5));
        pace.reported(800.0);
        pace.idle(start + Duration::from_secs(10));
        // Ten seconds held, 800 s of work: 80 cores, and the time it held nothing
        // (the hour after) does not count.
        let later = start + Duration::from_secs(3600);
        assert_eq!(pace.cores(later), 80.0);
        assert_eq!(pace.allowance(later, 300.0), 300.0 * 80.0 * HEADROOM);
        // Held again for ten seconds without a report: half the pace.
        pace.lease_taken(later);
        assert_eq!(pace.cores(later + Duration::from_secs(10)), 40.0);
    }

    #[test]
    fn a_worker_that_reports_slowly_keeps_the_start_allowance() {
        let start = Instant::now();
        let mut pace = Pace::default();
        pace.lease_taken(start);
        // A unit of 72 s every two minutes: 0.6 cores, whatever it declared.
        pace.reported(72.0 * 5.0);
        let now = start + Duration::from_secs(600);
        assert!((pace.cores(now) - 0.6).abs() < 1e-9);
        assert_eq!(pace.allowance(now, 300.0), 300.0 * START_CORES);
    }

    #[test]
    fn units_fit_the_allowance_by_less_than_one() {
        assert_eq!(units_allowed(1152.0, 0.0, 72.0), 16);
        assert_eq!(units_allowed(1152.0, 576.0, 72.0), 8);
        assert_eq!(units_allowed(1152.0, 1100.0, 72.0), 1, "past it by less than a unit");
        assert_eq!(units_allowed(1152.0, 1152.0, 72.0), 0);
        assert_eq!(units_allowed(4.0 * 1.28, 15.0 * 0.32, 0.32), 1, "not two for a rounding error");
        assert_eq!(units_allowed(1152.0, 2000.0, 72.0), 0);
        assert_eq!(units_allowed(100.0, 0.0, 500.0), 1, "a unit longer than the allowance");
        assert_eq!(units_allowed(0.0, 0.0, 72.0), 1, "a worker holding nothing takes a unit");
    }
}
