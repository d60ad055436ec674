//! Credit for the CPU volunteers give (#56 part 3), as fishtest's contributors page
//! gives it: core-hours and games per machine and per user, all time and the last 30
//! days. A lease holds some of its worker's cores from when it is taken; each report
//! that brings new units shares its cores' time since the lease's previous report
//! among them, and a unit carries its share into storage with it. Credit is then a sum
//! over counted units alone: a unit another lease already counted is not stored, a
//! refused report stores nothing, and a quarantined worker's units move to
//! `set_aside_units` with their credit. A lease cannot be held past
//! [`crate::scheduler::leases::held_until`], so holding one without playing gains at
//! most that bound, and only if its units are then reported and counted. And the cores
//! a worker declares are only its word: a report is credited at most the cores' worth
//! of work the worker's reports have shown ([`crate::scheduler::pace`]), with the
//! pace's headroom, so that a one-core machine declaring 64 and holding a large lease
//! is credited about what it plays, however long it holds it.

use crate::scheduler::pace::{HEADROOM, Pace};
use crate::scheduler::{LeaseState, Scheduler};
use crate::storage::rows::{Tally, UnitRow, WorkerCredit};
use crate::storage::{Storage, StorageError};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use xq_proto::v1;

/// The recent window of the contributors' list.
pub const RECENT: Duration = Duration::from_secs(30 * 24 * 3600);

/// How long a computed list is served while the fleet's work goes on: the list sums
/// every counted unit, so it is not read again for every page view.
const FRESH_FOR: Duration = Duration::from_secs(10);

/// The longest a list is kept while no job changes: its last 30 days move on, and its
/// `as_of_ms` with them, on an idle coordinator too.
const KEPT_FOR: Duration = Duration::from_secs(3600);

/// Stamps the rows of a report of `lease` that are new to it with their credit: the
/// lease's cores times the milliseconds since its previous report (or its taking),
/// (or its closing, if it is closed) shared out exactly among them, and `games` each.
/// Rows it reported before carry nothing (a resend is not paid twice); a lease already
/// forgotten credits nothing.
pub(super) fn stamp(
    lease: Option<&mut LeaseState>,
    pace: Option<&Pace>,
    rows: &mut [UnitRow],
    now_ms: i64,
    games: u32,
) {
    let Some(lease) = lease else { return };
    let new: Vec<&mut UnitRow> = rows.iter_mut().filter(|row| !lease.acked.contains(&row.unit)).collect();
    if new.is_empty() {
        return;
    }
    // A lease closed (expired, say) earns nothing after: its units may still count
    // when they come late, but the time it was not held is no one's.
    let held_until_ms = lease.closed_at.map_or(now_ms, |closed| now_ms - closed.elapsed().as_millis() as i64);
    // Without a worker's pace (a test's stand-in), the lease's own cores.
    let shown = pace.map_or(i64::MAX, |pace| cores_shown(pace, new.len() as f64 * lease.unit_seconds));
    let held = lease.row.cores.min(shown).saturating_mul((held_until_ms - lease.last_report_ms).max(0));
    lease.last_report_ms = lease.last_report_ms.max(held_until_ms);
    let count = new.len() as i64;
    for (index, row) in new.into_iter().enumerate() {
        // The remainder goes one millisecond each to the first rows.
        row.cpu_ms = held / count + i64::from((index as i64) < held % count);
        row.games = i64::from(games);
    }
}

/// The most cores a worker is credited at when it reports units estimated at
/// `seconds` more: the cores' worth of work its reports show, with the pace's headroom
/// (the estimates can be that far off for an honest worker), and at least one.
fn cores_shown(pace: &Pace, seconds: f64) -> i64 {
    let cores = pace.cores_after(Instant::now(), seconds) * HEADROOM;
    if cores.is_finite() { (cores.ceil() as i64).max(1) } else { 1 }
}

/// A tally as the API shows it.
fn tally_view(tally: Tally) -> v1::Credit {
    v1::Credit {
        cpu_hours: tally.cpu_ms as f64 / 3_600_000.0,
        cpu_ms: tally.cpu_ms.max(0) as u64,
        games: tally.games.max(0) as u64,
        units: tally.units.max(0) as u64,
    }
}

/// A worker's or a user's credit as the API shows it.
fn credit_view(credit: WorkerCredit) -> v1::Contribution {
    v1::Contribution { all_time: Some(tally_view(credit.all_time)), last_30_days: Some(tally_view(credit.recent)) }
}

/// The contributors' list as last computed, and what it was computed at.
#[derive(Default)]
pub struct Contributors {
    last: tokio::sync::Mutex<Option<(Instant, u64, v1::ContributorsReply)>>,
}

impl Contributors {
    /// The list of users and machines by credit, largest first: computed again when
    /// jobs changed since and the last one is older than a few seconds, or after an
    /// hour whatever changed. One caller
    /// computes at a time; the others wait for its answer.
    pub async fn list(&self, storage: &Storage, scheduler: &Scheduler) -> Result<v1::ContributorsReply, StorageError> {
        let mut last = self.last.lock().await;
        let version = *scheduler.watch_all().borrow();
        if let Some((at, seen, reply)) = &*last
            && ((*seen == version && at.elapsed() < KEPT_FOR) || at.elapsed() < FRESH_FOR)
        {
            return Ok(reply.clone());
        }
        let now = crate::storage::now_ms();
        let by_worker = storage.credit_by_worker(now - RECENT.as_millis() as i64).await?;
        let reply = scheduler.contributors(&by_worker, now);
        *last = Some((Instant::now(), version, reply.clone()));
        Ok(reply)
    }
}

impl Scheduler {
    /// The contributors' list from each worker's credit: a machine for each worker
    /// that has any, a user for each user with credited machines (a worker made with a
    /// bare worker token belongs to no user and is listed as a machine only).
    fn contributors(&self, by_worker: &BTreeMap<i64, WorkerCredit>, now_ms: i64) -> v1::ContributorsReply {
        let state = self.lock();
        let mut machines = Vec::new();
        let mut users: BTreeMap<&str, (WorkerCredit, u32)> = BTreeMap::new();
        for (&worker_id, &credit) in by_worker {
            let worker = state.workers.get(&(worker_id as u64));
            let user = worker.map_or("", |w| w.user.as_str());
            if !user.is_empty() {
                let (total, count) = users.entry(user).or_default();
                total.add(credit);
                *count += 1;
            }
            machines.push((
                credit,
                v1::MachineCredit {
                    worker_id: worker_id as u64,
                    name: worker.map_or_else(String::new, |w| w.name().to_owned()),
                    user: user.to_owned(),
                    credit: Some(credit_view(credit)),
                },
            ));
        }
        let mut users: Vec<(WorkerCredit, v1::ContributorInfo)> = users
            .into_iter()
            .map(|(user, (credit, machines))| {
                (credit, v1::ContributorInfo { user: user.to_owned(), credit: Some(credit_view(credit)), machines })
            })
            .collect();
        users.sort_by_key(|(credit, _)| std::cmp::Reverse(credit.all_time.cpu_ms));
        machines.sort_by_key(|(credit, _)| std::cmp::Reverse(credit.all_time.cpu_ms));
        v1::ContributorsReply {
            users: users.into_iter().map(|(_, user)| user).collect(),
            machines: machines.into_iter().map(|(_, machine)| machine).collect(),
            as_of_ms: now_ms,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::rows::LeaseRow;
    use std::collections::HashSet;

    /// A lease of `units` holding `cores` cores, taken at `taken_ms`.
    fn lease_of(cores: i64, taken_ms: i64, units: &[u64]) -> LeaseState {
        let now = Instant::now();
        LeaseState {
            row: LeaseRow {
                id: 1,
                job_id: 1,
                worker_id: 1,
                units: units.to_vec(),
                state: "active".to_owned(),
                probe: String::new(),
                cores,
                created_ms: taken_ms,
            },
            units: units.iter().copied().collect(),
            slowness: 1.0,
            unit_seconds: 1.0,
            deadline: now,
            held_until: now,
            acked: HashSet::new(),
            acked_wdl: [0; 3],
            acked_penta: [0; 5],
            reported_unstored: 0,
            active: true,
            closed_at: None,
            last_report_ms: taken_ms,
        }
    }

    fn row(unit: u64) -> UnitRow {
        UnitRow {
            unit,
            points: [0, 0],
            reasons: Default::default(),
            records: 0,
            pgn: String::new(),
            file: String::new(),
            offset: 0,
            length: 0,
            created_ms: 0,
            cpu_ms: 0,
            games: 0,
        }
    }

    #[test]
    fn a_report_shares_its_lease_s_core_time_exactly_and_a_resend_earns_nothing() {
        let mut lease = lease_of(3, 1_000, &[0, 1, 2, 3]);
        let mut first = vec![row(0), row(1)];
        stamp(Some(&mut lease), None, &mut first, 2_001, 2);
        // 3 cores for 1,001 ms: 3,003 core-ms, split 1,502 and 1,501.
        assert_eq!(first.iter().map(|r| r.cpu_ms).collect::<Vec<_>>(), [1_502, 1_501]);
        assert!(first.iter().all(|r| r.games == 2));
        lease.acked.extend([0, 1]);
        // Sent again with a new unit: only the new one is paid, for the time since.
        let mut second = vec![row(0), row(1), row(2)];
        stamp(Some(&mut lease), None, &mut second, 3_001, 2);
        assert_eq!(second.iter().map(|r| r.cpu_ms).collect::<Vec<_>>(), [0, 0, 3_000]);
        assert_eq!(second[0].games, 0);
        // A closed lease pays only up to its closing.
        lease.acked.insert(2);
        lease.closed_at = Some(Instant::now() - Duration::from_millis(500));
        let mut after = vec![row(3)];
        stamp(Some(&mut lease), None, &mut after, 10_000, 2);
        let paid = after[0].cpu_ms;
        assert!((3 * 6_300..=3 * 6_499).contains(&paid), "{paid}: 3 cores from 3,001 ms to about 9,500");
        // A worker whose reports show less than the lease's cores is paid what they show:
        // one unit of 1 s of work in 1 s held, with the headroom, is 4 cores, not 30.
        let mut big = lease_of(30, 0, &[0, 1]);
        let mut pace = Pace::default();
        pace.lease_taken(Instant::now() - Duration::from_secs(1));
        let mut shown = vec![row(0)];
        stamp(Some(&mut big), Some(&pace), &mut shown, 1_000, 2);
        assert!((4 * 1_000..=5 * 1_000).contains(&shown[0].cpu_ms), "{}", shown[0].cpu_ms);
        // A forgotten lease pays nothing.
        let mut late = vec![row(3)];
        stamp(None, None, &mut late, 4_000, 2);
        assert_eq!(late[0].cpu_ms, 0);
    }
}
