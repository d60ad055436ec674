//! Verification jobs' counts, kept as their reports are counted: each unit once, read
//! from storage again when forgotten.

use std::collections::{HashMap, HashSet};
use xq_engine::xiangqi::rules::verify::Tally;

/// Each verification job's counts, summed as its reports are counted, so that reading
/// them (the dashboard refetches a job's every few seconds, and for anyone when it is
/// public) is a lookup, not a read and parse of every stored report (finding N4 of the
/// security review). A job's counts are read from its stored reports once, at their
/// first read after the coordinator starts; reports counted during that read wait in
/// the job's entry and join after it. Each unit counts once, whoever reports it.
#[derive(Default)]
pub struct Tallies {
    jobs: std::sync::Mutex<HashMap<u64, JobTally>>,
}

#[derive(Default)]
struct JobTally {
    /// Whether the stored reports have been read into `tally`.
    loaded: bool,
    tally: Tally,
    units: HashSet<u64>,
    /// Units counted while the stored reports were being read.
    pending: Vec<(u64, Tally)>,
    /// Forgotten while they were being read: what that read found is not kept.
    forgotten: bool,
}

impl JobTally {
    pub(super) fn count(&mut self, unit: u64, tally: &Tally) {
        if self.units.insert(unit) {
            self.tally.merge(tally);
        }
    }
}

/// Whether a job's counts are kept already, or who reads them from the stored reports.
pub enum TallyRead {
    /// The job's counts.
    Kept(Tally),
    /// The caller reads the stored reports and gives them to [`Tallies::loaded`].
    Load,
    /// Another caller is reading them: read the stored reports without keeping them.
    Busy,
}

impl Tallies {
    fn jobs(&self) -> std::sync::MutexGuard<'_, HashMap<u64, JobTally>> {
        self.jobs.lock().expect("the tallies' lock is never poisoned")
    }

    /// Counts unit `unit`'s report (its `tally`) in job `job`'s counts, if they are kept
    /// or being read; a unit counted before is not counted again.
    pub fn count(&self, job: u64, unit: u64, tally: &Tally) {
        if let Some(entry) = self.jobs().get_mut(&job) {
            if entry.loaded {
                entry.count(unit, tally);
            } else {
                entry.pending.push((unit, tally.clone()));
            }
        }
    }

    /// Job `job`'s counts if they are kept; else whether the caller should read them.
    pub fn read(&self, job: u64) -> TallyRead {
        let mut jobs = self.jobs();
        match jobs.get(&job) {
            Some(entry) if entry.loaded => TallyRead::Kept(entry.tally.clone()),
            Some(_) => TallyRead::Busy,
            None => {
                jobs.insert(job, JobTally::default());
                TallyRead::Load
            }
        }
    }

    /// Keeps job `job`'s counts as its stored reports give them (`stored`, a tally a
    /// unit), with the units counted while they were read; gives the counts.
    pub fn loaded(&self, job: u64, stored: impl IntoIterator<Item = (u64, Tally)>) -> Tally {
        let mut jobs = self.jobs();
        let entry = jobs.entry(job).or_default();
        for (unit, tally) in stored.into_iter().chain(std::mem::take(&mut entry.pending)) {
            entry.count(unit, &tally);
        }
        entry.loaded = true;
        let tally = entry.tally.clone();
        if entry.forgotten {
            jobs.remove(&job);
        }
        tally
    }

    /// Forgets job `job`'s counts (units of it were set aside): the next read reads the
    /// stored reports again, and a read under way now is not kept.
    pub fn forget(&self, job: u64) {
        let mut jobs = self.jobs();
        match jobs.get_mut(&job) {
            Some(entry) if !entry.loaded => entry.forgotten = true,
            Some(_) => drop(jobs.remove(&job)),
            None => {}
        }
    }

    /// Forgets a read of job `job`'s stored reports that failed: the next read tries again.
    pub fn failed(&self, job: u64) {
        let mut jobs = self.jobs();
        if jobs.get(&job).is_some_and(|entry| !entry.loaded) {
            jobs.remove(&job);
        }
    }
}
