//! Verification jobs through the services: created over a PGN, a test's games or fresh
//! self-play; their summaries and reports read back.

use crate::access::caller::Caller;
use crate::api::grpc::downloads::{Stored, read_slice};
use crate::api::grpc::jobs::may_prioritise;
use crate::api::grpc::{DEFAULT_PRIORITY, Shared};
use crate::jobs::JobSpec;
use crate::kept::ReadError;
use crate::scheduler::RequestKey;
use std::sync::Arc;
use tokio_stream::{Stream, StreamExt};
use tonic::Status;
use xq_engine::xiangqi::nnue::Network;
use xq_engine::xiangqi::pgn::PgnFile;
use xq_engine::xiangqi::rules::verify::Tally;
use xq_proto::v1;

/// The most bytes of a test's games a verification copies: a verification PGN is
/// parsed whole and kept for the spot checks (about twice its size in memory).
pub const MAX_TEST_GAMES_BYTES: u64 = 128 << 20;

impl Shared {
    /// Creates a verification job over an uploaded PGN, a test's stored games (copied
    /// into a PGN artifact, so that workers fetch them as any artifact), its games
    /// counted here as workers will cut them, or fresh self-play games the workers play.
    pub async fn create_verification(
        &self,
        caller: &Caller,
        key: Option<&RequestKey>,
        request: v1::CreateVerificationRequest,
    ) -> Result<v1::Job, Status> {
        let invalid = |e: crate::jobs::checks::SpecError| Status::invalid_argument(e.to_string());
        crate::jobs::checks::check_name("description", &request.description, 200).map_err(invalid)?;
        let rules = crate::jobs::verification::rule_sets(&request.rules).map_err(invalid)?;
        may_prioritise(caller, request.priority, DEFAULT_PRIORITY)?;
        crate::api::grpc::quotas::check_quota(self, caller, 1).await?;
        self.check_reserve()?;
        let sources =
            [request.pgn.is_some() || request.test_job_id != 0, request.selfplay.is_some(), request.generated];
        if sources.iter().filter(|&&named| named).count() > 1 {
            return Err(Status::invalid_argument(
                "selfplay: games from a PGN or a test, self-play games, or generated games: one of them",
            ));
        }
        let pgn = match (request.pgn, request.test_job_id, &request.selfplay) {
            (Some(pgn), _, _) => Some(self.uploaded(("pgn", "pgn", "a PGN"), &pgn.sha256).await?),
            (None, test, _) if test != 0 => Some(self.store_test_games(caller, test).await?),
            (None, _, Some(_)) => None,
            (None, _, None) if request.generated => None,
            (None, _, None) => {
                return Err(Status::invalid_argument(
                    "pgn: name an uploaded PGN, test_job_id a test whose games to verify, selfplay games to play, or \
                     generated games",
                ));
            }
        };
        if let Some(net) = request.selfplay.as_ref().and_then(|selfplay| selfplay.net.as_ref()) {
            self.our_net("selfplay.net", net).await?;
        }
        let (games, selfplay) = match &pgn {
            Some(pgn) => (self.pgn_file(pgn).await?.len() as u64, None),
            None => (request.games, request.selfplay),
        };
        let games_per_unit = match request.games_per_unit {
            0 if request.generated => crate::jobs::verification::DEFAULT_GENERATED_PER_UNIT,
            0 => crate::jobs::verification::DEFAULT_GAMES_PER_UNIT,
            n => n,
        };
        let rules = rules.iter().map(|r| r.name().to_owned()).collect();
        let spec = v1::VerificationSpec {
            pgn,
            rules,
            games_per_unit,
            games,
            reference: request.reference,
            selfplay,
            generated: request.generated,
            first_generated: request.first_generated,
            metamorphic: request.metamorphic,
        };
        let job = crate::jobs::verification::check_spec(&spec).map_err(invalid)?;
        let units = job.units();
        let job = JobSpec::Verify(Box::new(job));
        let identity = (request.priority, request.description.as_str());
        Ok(self.scheduler.create_job("verify", job, units, identity, self.origin(caller, key)).await?)
    }

    /// Copies test `id`'s stored games into a PGN artifact, counted against `caller`'s
    /// stored bytes. Only an ended test's: a running one's games change with every
    /// report, so each call made a new copy (and a new parse of it), counted against
    /// no one (F10 of the 2026-11-28 review); an ended test's copy is the same bytes
    /// each time, one artifact and one parse. At most [`MAX_TEST_GAMES_BYTES`].
    pub(super) async fn store_test_games(&self, caller: &Caller, id: u64) -> Result<v1::ArtifactRef, Status> {
        let running = self.scheduler.job(id).is_some_and(|job| crate::scheduler::is_live(&job.state));
        if running {
            return Err(Status::failed_precondition(format!(
                "test {id} is still running: verify its games once it has ended (xq stop {id}, or wait)"
            )));
        }
        let mut units = self.unit_bytes(id, Stored::Games)?;
        let mut upload = self.artifacts.begin().await.map_err(|e| Status::unavailable(e.to_string()))?;
        let mut size = 0u64;
        while let Some(unit) = units.next().await {
            let (_, bytes) = unit?;
            size += bytes.len() as u64;
            if size > MAX_TEST_GAMES_BYTES {
                return Err(Status::invalid_argument(format!(
                    "test {id}'s games are over the {} a verification copies: download them (xq pgn {id}) and \
                     verify a part of them as an uploaded PGN",
                    crate::api::grpc::quotas::bytes(MAX_TEST_GAMES_BYTES)
                )));
            }
            upload.write(&bytes).await.map_err(|e| Status::unavailable(e.to_string()))?;
        }
        let sealed = self.artifacts.seal(upload).await.map_err(|e| Status::unavailable(e.to_string()))?;
        let (sha256, size) = self.artifacts.keep(sealed).await.map_err(|e| Status::unavailable(e.to_string()))?;
        let name = format!("job-{id}.pgn");
        self.scheduler.index_artifact(&sha256, (&name, "pgn", size), &caller.token_id).await?;
        Ok(v1::ArtifactRef { sha256, name, size })
    }

    /// A verification job's report lines (each parting or unplayable game), a unit's at
    /// a time, without the units' tallies.
    pub fn verification_lines(&self, id: u64) -> Result<impl Stream<Item = Result<String, Status>> + use<>, Status> {
        let reports = self.unit_bytes(id, Stored::Reports)?;
        Ok(reports.map(|r| {
            r.map(|(_, bytes)| crate::jobs::verification::parting::report_games(&String::from_utf8_lossy(&bytes)))
        }))
    }

    /// A verification PGN, decoded and cut into games (kept for the spot checks of the
    /// job's reports).
    pub async fn pgn_file(&self, pgn: &v1::ArtifactRef) -> Result<Arc<PgnFile>, Status> {
        let path = self.artifacts.path(&pgn.sha256).map_err(|e| Status::internal(e.to_string()))?;
        let read = move || {
            let bytes = std::fs::read(&path).map_err(|e| e.to_string())?;
            PgnFile::read(&bytes).map_err(|e| e.to_string())
        };
        self.pgn_files.get_or_read(&pgn.sha256, read).await.map_err(|error| match error {
            ReadError::Refused(problem) => Status::invalid_argument(format!("pgn {}: {problem}", pgn.name)),
            ReadError::Failed(problem) => Status::internal(format!("pgn {}: {problem}", pgn.name)),
        })
    }

    /// The uploaded net `net` that request field `field` names for our engine (a
    /// self-play or verification job's), which must be in our engine's format: nets
    /// are kept as any engine's files, and only these jobs read them here.
    pub async fn our_net(&self, field: &str, net: &v1::ArtifactRef) -> Result<(), Status> {
        self.uploaded((field, "net", "a net"), &net.sha256).await?;
        let path = self.artifacts.path(&net.sha256).map_err(|e| Status::internal(e.to_string()))?;
        let read = move || Network::load(&path).map_err(|e| e.to_string());
        match self.verification_nets.get_or_read(&net.sha256, read).await {
            Ok(_) => Ok(()),
            Err(ReadError::Refused(problem)) => Err(Status::invalid_argument(format!(
                "{field}: the net {} is not in this engine's format ({problem}); self-play and verification play \
                 xq-engine, which reads only its own nets",
                net.name
            ))),
            Err(ReadError::Failed(problem)) => Err(Status::internal(format!("{field}: net {}: {problem}", net.name))),
        }
    }

    /// A verification job's net for its fresh self-play games, loaded (and kept for
    /// the spot checks of the job's reports).
    pub async fn verification_net(&self, net: &v1::ArtifactRef) -> Result<Arc<Network>, Status> {
        let path = self.artifacts.path(&net.sha256).map_err(|e| Status::internal(e.to_string()))?;
        let read = move || Network::load(&path).map_err(|e| e.to_string());
        let loaded = self.verification_nets.get_or_read(&net.sha256, read).await;
        loaded.map_err(|problem| Status::internal(format!("net {}: {problem}", net.name)))
    }

    /// A verification job's counts: the tallies of its stored reports, summed.
    pub async fn verification(&self, id: u64) -> Result<v1::VerificationSummary, Status> {
        let spec = self.scheduler.spec(id).ok_or_else(|| Status::not_found(format!("job {id}")))?;
        let JobSpec::Verify(job) = &*spec else {
            return Err(Status::invalid_argument(format!("job {id} is not a verification job")));
        };
        use crate::jobs::verification::tallies::TallyRead;
        let tally = match self.tallies.read(id) {
            TallyRead::Kept(tally) => tally,
            TallyRead::Load => match self.stored_tallies(id).await {
                Ok(stored) => self.tallies.loaded(id, stored),
                Err(status) => {
                    self.tallies.failed(id);
                    return Err(status);
                }
            },
            TallyRead::Busy => {
                let mut tally = Tally::default();
                for (_, unit) in self.stored_tallies(id).await? {
                    tally.merge(&unit);
                }
                tally
            }
        };
        Ok(v1::VerificationSummary {
            job_id: id,
            rules: job.rules.iter().map(|r| r.name().to_owned()).collect(),
            games_total: job.spec.games,
            games: tally.games,
            refused: tally.refused,
            parting: tally.parting,
            by_kind: tally.by_kind.into_iter().collect(),
            by_articles: tally.by_articles.into_iter().collect(),
            spot_checked_games: self.spot_checks.of_job(id).games,
            rechecked_lines: self.spot_checks.of_job(id).lines,
            metamorphic: tally.metamorphic,
        })
    }

    /// Where job `id`'s `unit` is stored, if it is counted.
    pub(super) async fn counted_unit(
        &self,
        id: u64,
        unit: u64,
    ) -> Result<Option<crate::storage::rows::UnitFile>, Status> {
        let page = self.storage.unit_files(id as i64, unit.checked_sub(1), 1).await;
        Ok(page.map_err(|e| Status::unavailable(e.to_string()))?.into_iter().find(|u| u.unit == unit))
    }

    /// Verification job `id`'s counted report of `unit`, as stored.
    pub(super) async fn counted_report(&self, id: u64, unit: u64) -> Result<String, Status> {
        // Set aside since the report came (its worker quarantined): sent again, the
        // report counts the unit.
        let stored = self.counted_unit(id, unit).await?.ok_or_else(|| {
            Status::unavailable(format!("job {id}'s unit {unit} is no longer counted: send the report again"))
        })?;
        let bytes = read_slice(self.data_dir.join(&stored.file), stored.offset, stored.length)
            .await
            .map_err(|e| Status::unavailable(format!("{}: {e}", stored.file)))?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// The tallies of verification job `id`'s stored reports, a unit each.
    pub(super) async fn stored_tallies(&self, id: u64) -> Result<Vec<(u64, Tally)>, Status> {
        let mut tallies = Vec::new();
        let mut reports = self.unit_bytes(id, Stored::Reports)?;
        while let Some(report) = reports.next().await {
            let (unit, bytes) = report?;
            let tally = xq_engine::xiangqi::rules::verify::report_tally(&String::from_utf8_lossy(&bytes))
                .ok_or_else(|| Status::data_loss(format!("job {id}'s report of unit {unit} has no tally")))?;
            tallies.push((unit, tally));
        }
        Ok(tallies)
    }
}
