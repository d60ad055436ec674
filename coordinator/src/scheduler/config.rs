//! What the scheduler is set to: lease sizes, expiry, pace, conduct checks, quotas and
//! retention, with their defaults.

use std::time::Duration;
use xq_stats::conduct::Checks;

/// How the scheduler sizes and times leases.
#[derive(Clone, Debug)]
pub struct SchedulerConfig {
    /// A lease expires this long after its last heartbeat.
    pub lease_ttl: Duration,
    /// Workers are asked to beat this often.
    pub heartbeat: Duration,
    /// Work per lease, in seconds at the worker's speed, per concurrent game.
    pub lease_seconds: f64,
    /// The most units in one lease.
    pub max_units_per_lease: usize,
    /// Our engine's bench speed (nodes per second, one core) on the reference machine
    /// the time controls are meant for; 0 turns scaling off.
    pub reference_nps: u64,
    /// How long a closed lease is remembered: late reports on it are taken until
    /// then; after, it is forgotten (memory would otherwise grow with every lease).
    pub closed_lease_memory: Duration,
    /// A worker whose pairs in a test score this many standard errors away from the
    /// other workers' is quarantined (0: never).
    pub quarantine_z: f64,
    /// ... once both it and the others have counted this many pairs in the test.
    pub quarantine_min_pairs: u64,
    /// The other checks of a worker's conduct (`None`: none): its pairs' shape in a
    /// test, its results against an SPSA run's flips, its games ended by an engine's
    /// failure against the other workers', and its expired leases against the fleet's
    /// ([`xq_stats::conduct`]); a worker they flag is quarantined.
    pub conduct: Option<Checks>,
    /// Jobs from submitters' tokens wait for an admin's approval (fishtest's approvers).
    pub require_approval: bool,
    /// Who may make an account.
    pub signup: crate::access::accounts::SignupMode,
    /// Accounts waiting for acceptance at most.
    pub pending_users: usize,
    /// Machines one worker key enrolls at most.
    pub machines_per_key: usize,
    /// Free bytes the data directory's disk keeps for reports of leased work: below
    /// them no new leases and no uploads (0: no reserve).
    pub reserve_bytes: u64,
    /// How long a finished or stopped test's games are kept after its last change
    /// (none: for good); its counts and results stay.
    pub keep_games: Option<Duration>,
    /// The same for a self-play job's training data.
    pub keep_training_data: Option<Duration>,
    /// A submitter whose jobs store this many bytes of games and training data, with
    /// its uploads, creates no more jobs and uploads nothing more (0: no quota). Admins
    /// have none.
    pub submitter_quota_bytes: u64,
    /// How long after its last upload an artifact no job or net names is kept (none:
    /// for good).
    pub keep_unreferenced_artifacts: Option<Duration>,
    /// The most running or pending jobs a submitter may have (0: no limit).
    pub submitter_active_jobs: usize,
    /// The most followers of live streams (the dashboard's, WatchJob), in all and per
    /// client address.
    pub followers: crate::access::streams::FollowerCaps,
    /// Replayed plies a second the coordinator's spot checks of verification reports
    /// may spend, across all jobs (`verification::SpotChecks`).
    pub spot_check_plies_per_second: f64,
    /// One in this many counted units of a verification job with a reference is
    /// reported again by another worker, to check the reference's verdicts (1: every
    /// unit; 0: none; `verification::RECHECK_ONE_IN`).
    pub recheck_one_in: u32,
    /// A job stops as failed when this many workers report the same failure of it
    /// (the same kind, of the same engine); 0: never.
    pub failures_to_stop: usize,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        SchedulerConfig {
            lease_ttl: Duration::from_secs(60),
            heartbeat: Duration::from_secs(10),
            lease_seconds: 300.0,
            max_units_per_lease: 256,
            reference_nps: 1_000_000,
            closed_lease_memory: Duration::from_secs(3600),
            quarantine_z: 5.0,
            quarantine_min_pairs: 200,
            conduct: Some(Checks::default()),
            require_approval: false,
            signup: Default::default(),
            pending_users: crate::access::accounts::MAX_PENDING,
            machines_per_key: crate::scheduler::machines::MACHINES_PER_KEY,
            reserve_bytes: 0,
            keep_games: None,
            keep_training_data: None,
            submitter_quota_bytes: 0,
            keep_unreferenced_artifacts: Some(Duration::from_secs(7 * 24 * 3600)),
            submitter_active_jobs: 0,
            followers: Default::default(),
            spot_check_plies_per_second: crate::jobs::verification::spot_checks::SPOT_CHECK_PLIES_PER_SECOND,
            recheck_one_in: crate::jobs::verification::RECHECK_ONE_IN,
            failures_to_stop: 3,
        }
    }
}

/// A public coordinator's protections (`xq-coordinator serve --public`), each filling
/// what its setting leaves off: submitters' jobs wait for approval, a submitter stores
/// at most [`PUBLIC_QUOTA_BYTES`] and runs at most [`PUBLIC_ACTIVE_JOBS`] jobs at once,
/// and ended jobs' games and training data go after [`PUBLIC_KEEP_DAYS`] days.
pub const PUBLIC_QUOTA_BYTES: u64 = 20 << 30;

/// The running or pending jobs a submitter may have on a public coordinator.
pub const PUBLIC_ACTIVE_JOBS: usize = 10;

/// Days a public coordinator keeps an ended job's games and training data.
pub const PUBLIC_KEEP_DAYS: u64 = 90;

impl SchedulerConfig {
    /// Turns on a public coordinator's protections that are off.
    pub fn make_public(&mut self) {
        let days = Duration::from_secs(PUBLIC_KEEP_DAYS * 24 * 3600);
        self.require_approval = true;
        if self.submitter_quota_bytes == 0 {
            self.submitter_quota_bytes = PUBLIC_QUOTA_BYTES;
        }
        if self.submitter_active_jobs == 0 {
            self.submitter_active_jobs = PUBLIC_ACTIVE_JOBS;
        }
        self.keep_games.get_or_insert(days);
        self.keep_training_data.get_or_insert(days);
        self.keep_unreferenced_artifacts.get_or_insert(Duration::from_secs(7 * 24 * 3600));
    }

    /// The protections a coordinator others reach should have and this one has off,
    /// each with the setting that turns it on: the start-up warns of each (review of
    /// 2026-11-28, F12: all were off by default and nothing said so).
    pub fn protections_off(&self) -> Vec<&'static str> {
        let mut off = Vec::new();
        if !self.require_approval {
            off.push("submitters' jobs run without an admin's approval (--require-approval)");
        }
        if self.submitter_quota_bytes == 0 {
            off.push("submitters may store without bound (--submitter-quota-mb)");
        }
        if self.submitter_active_jobs == 0 {
            off.push("submitters may run any number of jobs at once (--submitter-active-jobs)");
        }
        if self.keep_games.is_none() || self.keep_training_data.is_none() {
            off.push("ended jobs' games or training data are kept for good (--keep-games-days, --keep-data-days)");
        }
        if self.keep_unreferenced_artifacts.is_none() {
            off.push("uploads no job names are kept for good (--keep-unreferenced-artifacts-days)");
        }
        off
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_public_profile_turns_on_every_protection_and_keeps_the_ones_set() {
        let defaults = SchedulerConfig::default();
        assert_eq!(defaults.protections_off().len(), 4, "{:?}", defaults.protections_off());
        let mut public = SchedulerConfig { submitter_active_jobs: 3, ..SchedulerConfig::default() };
        public.make_public();
        assert!(public.protections_off().is_empty(), "{:?}", public.protections_off());
        assert!(public.require_approval);
        assert_eq!((public.submitter_quota_bytes, public.submitter_active_jobs), (PUBLIC_QUOTA_BYTES, 3));
        assert_eq!(public.keep_games, Some(Duration::from_secs(90 * 24 * 3600)));
    }
}
