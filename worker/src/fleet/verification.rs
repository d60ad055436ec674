//! A verification lease: each unit's games verified under the job's rule sets and
//! reported as soon as it is done.

use super::artifacts::fetch;
use super::selfplay::self_play_settings;
use super::*;
use crate::reference::{PYFFISH, Pyffish};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use xq_engine::variant::Variant;
use xq_engine::xiangqi::pgn::PgnFile;
use xq_engine::xiangqi::rules::RuleSet;
use xq_engine::xiangqi::rules::hard_games::hard_game_pgn;
use xq_engine::xiangqi::rules::verify::{Reference, unit_report_with};
use xq_engine::xiangqi::selfplay::{PlaySettings, fresh_game};
use xq_proto::v1;

/// A verification job's games: a PGN's, fresh self-play games played unit by unit, or
/// rule-hard generated games from the given number on.
enum Games {
    Pgn(Arc<PgnFile>),
    SelfPlay(PlaySettings),
    Generated(u64),
}

/// The last verification PGN read, by its hash: a job's leases read the same file, and
/// reading a large one again for each lease cost more than verifying the lease's games.
#[derive(Default)]
pub(super) struct LastPgn(Option<(String, Arc<PgnFile>)>);

/// Verifies a lease's units: each unit's games (of the job's PGN, or played for it)
/// under its rule sets, with the engine's verification (the judge's code path), on as
/// many threads as the worker has cores (each with its own reference), each thread
/// taking the lease's next unit as it finishes one. Each report is sent as soon as its
/// unit is verified, while the threads go on: the coordinator checks a report (it
/// rules every parting game again) and stores it with two fsyncs, and with the units
/// verified as many at a time and their reports sent between the batches, a 2-core
/// machine running both stood idle about 30% of the time (`scripts/bench-verify-fleet`).
pub(super) async fn verify(
    client: &Client,
    settings: &ConnectSettings,
    lease: &v1::Lease,
    spec: v1::VerificationSpec,
    stop: Arc<AtomicBool>,
    last_pgn: &mut LastPgn,
) -> Result<(), FleetError> {
    let rules: Vec<RuleSet> = spec.rules.iter().map(|r| r.parse()).collect::<Result<_, _>>().map_err(lease_error)?;
    let start_reference = || match (spec.reference.as_str(), &settings.pyffish) {
        ("", _) => Ok(None),
        (PYFFISH, Some(python)) => {
            Pyffish::start(python).map(Some).map_err(FleetError::file("starting pyffish", python))
        }
        (other, _) => Err(FleetError::Lease(format!("it asks for the reference '{other}', which this worker has not"))),
    };
    let threads = settings.concurrency.max(1).min(lease.units.len().max(1));
    let references: Vec<Option<Pyffish>> = (0..threads).map(|_| start_reference()).collect::<Result<_, _>>()?;
    let source = match (&spec.pgn, &spec.selfplay) {
        (Some(pgn), _) => {
            let file = match &last_pgn.0 {
                Some((sha256, file)) if *sha256 == pgn.sha256 => file.clone(),
                _ => {
                    let path = fetch(client, settings, pgn, false).await?;
                    let name = pgn.name.clone();
                    let file = tokio::task::spawn_blocking(move || {
                        let bytes = std::fs::read(&path).map_err(FleetError::file("reading the games", &path))?;
                        PgnFile::read(&bytes).map_err(|e| FleetError::Lease(format!("the PGN {name}: {e}")))
                    })
                    .await
                    .map_err(play_error)??;
                    let file = Arc::new(file);
                    last_pgn.0 = Some((pgn.sha256.clone(), file.clone()));
                    file
                }
            };
            Games::Pgn(file)
        }
        (None, Some(selfplay)) => {
            let played = self_play_settings(client, settings, selfplay).await?;
            if played.variant != Variant::Xiangqi {
                return Err(FleetError::Lease("its self-play games are not Xiangqi".to_owned()));
            }
            // The coordinator plays some of these games again to check the reports: both
            // take the games' settings from the spec through one function.
            Games::SelfPlay(played.play)
        }
        (None, None) if spec.generated => Games::Generated(spec.first_generated),
        (None, None) => return Err(FleetError::Lease("it names no games: no PGN, no self-play".to_owned())),
    };
    let units = UnitsToVerify {
        source,
        rules,
        metamorphic: spec.metamorphic,
        total: spec.games as usize,
        per_unit: spec.games_per_unit.max(1) as usize,
        units: lease.units.clone(),
        next: AtomicUsize::new(0),
    };
    // Room for a report per thread: a thread whose report finds the channel full waits,
    // so that a coordinator slower than the threads holds them back rather than letting
    // reports pile up here.
    let (verified, mut reports) = tokio::sync::mpsc::channel(threads);
    let verifying = {
        let stop = stop.clone();
        tokio::task::spawn_blocking(move || units.verify(references, &verified, &stop))
    };
    let mut sending = tokio::task::JoinSet::new();
    let mut more = true;
    let sent = loop {
        tokio::select! {
            report = reports.recv(), if more && sending.len() < IN_FLIGHT_PER_THREAD * threads => match report {
                Some((unit, Ok(report))) => {
                    let (client, lease_id) = (client.clone(), lease.lease_id);
                    sending.spawn(async move {
                        let request = v1::VerificationReport { lease_id, unit, report };
                        let report = |mut client: Client, r| async move { client.report_verification(r).await };
                        send_unit("report", &client, request, report).await
                    });
                }
                Some((_, Err(error))) => break Err(play_error(error)),
                None => more = false,
            },
            Some(sent) = sending.join_next() => match sent.map_err(play_error).and_then(|sent| sent) {
                // The coordinator says to stop: the job is over, or the lease.
                Ok(true) => break Ok(()),
                Ok(false) => {}
                Err(error) => break Err(error),
            },
            else => break Ok(()),
        }
    };
    // Stopped or failed: the threads finish the unit at hand and take no other.
    stop.store(true, Ordering::Relaxed);
    drop(reports);
    verifying.await.map_err(play_error)?;
    sent
}

/// Verification reports a worker sends at once, for each thread verifying: each waits
/// for the coordinator's checks (one report at a time) and its fsyncs, and with one a
/// thread the threads waited for them: 100,000 games on 2 cores took 6.4 s from the
/// lease, against 5.2 s with four.
const IN_FLIGHT_PER_THREAD: usize = 4;

/// A lease's units of a verification job, taken one at a time by the threads that
/// verify them.
struct UnitsToVerify {
    source: Games,
    rules: Vec<RuleSet>,
    metamorphic: bool,
    /// Games in the job, and in each of its units.
    total: usize,
    per_unit: usize,
    /// The lease's units, and the index of the next one to take.
    units: Vec<u64>,
    next: AtomicUsize,
}

/// A unit verified: its number and its report, or why its reference failed.
type VerifiedUnit = (u64, Result<String, String>);

impl UnitsToVerify {
    /// Verifies the units on a thread for each of `references`, sending each unit's
    /// report to `verified` as it is made, until the units run out, `stop` is raised or
    /// no one receives the reports any more.
    fn verify(
        &self,
        mut references: Vec<Option<Pyffish>>,
        verified: &tokio::sync::mpsc::Sender<VerifiedUnit>,
        stop: &AtomicBool,
    ) {
        std::thread::scope(|scope| {
            for reference in &mut references {
                scope.spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        let Some(&unit) = self.units.get(self.next.fetch_add(1, Ordering::Relaxed)) else { break };
                        let reference = reference.as_mut().map(|r| r as &mut dyn Reference);
                        if verified.blocking_send((unit, self.report(unit, reference))).is_err() {
                            break;
                        }
                    }
                });
            }
        });
    }

    /// Unit `unit`'s report, with `reference`'s verdicts if the job has one.
    fn report(&self, unit: u64, reference: Option<&mut dyn Reference>) -> Result<String, String> {
        let first = (unit as usize).saturating_mul(self.per_unit).min(self.total);
        let end = first.saturating_add(self.per_unit).min(self.total);
        let games = match &self.source {
            Games::Pgn(file) => file.games(first..end),
            Games::SelfPlay(played) => (first..end).map(|g| fresh_game(played, g)).collect(),
            Games::Generated(from) => (first..end).map(|g| hard_game_pgn(from.saturating_add(g as u64))).collect(),
        };
        unit_report_with(&games, first + 1, &self.rules, self.metamorphic, reference)
    }
}
