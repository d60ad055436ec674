//! A worker's reports, checked before they count: a test's pairs replayed by the
//! arbiter, self-play chunks read, verification reports spot-checked and rechecked.

use crate::api::grpc::{MAX_PAIRS_PER_REPORT, WorkerApi};
use crate::jobs::selfplay::self_play_variant;
use crate::jobs::test::endings::Conditions;
use crate::jobs::test::replay::{PairContext, check_pair};
use crate::jobs::{JobSpec, Scaling};
use crate::scheduler::LeaseContext;
use crate::storage::counts::add_points;
use crate::storage::rows::UnitRow;
use sha2::{Digest, Sha256};
use std::sync::Arc;
use tonic::{Response, Status};
use xq_engine::variant::Variant;
use xq_engine::xiangqi::data::{ChunkError, read_any_chunk, read_header};
use xq_engine::xiangqi::pgn::parse_pgn;
use xq_engine::xiangqi::rules::judge::{JudgeRequest, judge};
use xq_engine::xiangqi::rules::{RuleSet, ViolationTiming};
use xq_proto::v1;
use xq_proto::{self_play_plies, self_play_unit_records};

/// The most PGN bytes of new pairs a report has replayed on the async runtime (some
/// 2,000 plies, about a millisecond and a half); more go to the blocking pool.
const INLINE_REPLAY_BYTES: usize = 16 << 10;

impl WorkerApi {
    /// Counts a refused report against its worker and job (the dashboard shows both),
    /// unless the fault was the coordinator's.
    pub(super) fn counting_refusals(
        &self,
        worker: u64,
        lease_id: u64,
        reply: Result<v1::ReportReply, Status>,
    ) -> Result<Response<v1::ReportReply>, Status> {
        if let Err(status) = &reply
            && !matches!(status.code(), tonic::Code::Unavailable | tonic::Code::Internal | tonic::Code::DataLoss)
        {
            self.0.scheduler.note_refusal(worker, lease_id);
        }
        reply.map(Response::new)
    }

    /// Checks a match report's games and totals, then counts its new pairs.
    pub(super) async fn pairs_report(
        &self,
        worker: u64,
        report: v1::ReportPairsRequest,
    ) -> Result<v1::ReportReply, Status> {
        if report.pairs.len() > MAX_PAIRS_PER_REPORT {
            return Err(Status::invalid_argument(format!("more than {MAX_PAIRS_PER_REPORT} pairs in one report")));
        }
        let units: Vec<u64> = report.pairs.iter().map(|p| p.unit).collect();
        let context = self.0.scheduler.lease_context(worker, report.lease_id, &units)?;
        let JobSpec::Match(job) = &*context.spec else {
            return Err(Status::invalid_argument(format!("lease {} is not a match", report.lease_id)));
        };
        let cumulative = report.cumulative.ok_or_else(|| Status::invalid_argument("cumulative totals missing"))?;
        let reported_penta: [u64; 5] = cumulative
            .pentanomial
            .as_slice()
            .try_into()
            .map_err(|_| Status::invalid_argument("the pentanomial needs 5 counts"))?;
        let engines = [job.request.new_engine.as_ref(), job.request.base_engine.as_ref()];
        for (engine, verified) in engines.iter().zip(report.verified_signatures.iter().chain(std::iter::repeat(&0))) {
            let expected = engine.map_or(0, |e| e.bench_signature);
            if expected != 0 && *verified != expected {
                return Err(Status::failed_precondition(format!(
                    "engine {}: bench signature {verified} verified, {expected} required",
                    engine.map_or("", |e| e.name.as_str())
                )));
            }
        }
        let names =
            [engines[0].map_or("", |e| e.name.as_str()), engines[1].map_or("", |e| e.name.as_str())].map(str::to_owned);
        // The clocks the games were played under: scaled by the worker's factor for a
        // lease left to scale by its engines' speed, bounded as the worker bounds it.
        let slowness = match context.scaling {
            Scaling::By(slowness) => slowness,
            Scaling::ByEngines => {
                xq_proto::speed::check_reported(report.engine_slowness).map_err(Status::invalid_argument)?
            }
        };
        let conditions = Conditions::for_lease(&job.lease_spec(Scaling::By(slowness))).map_err(Status::internal)?;
        // A pair this lease reported before is not replayed again: a resent report of
        // 512 accepted pairs cost a third of a second of a runtime thread each time
        // (F8 of the 2026-11-28 review). New pairs of more than a few games are
        // replayed on the blocking pool, as many reports at once as the machine has
        // cores; a report of a pair or two (the fleet's usual) is replayed here, where
        // a hand-off to another thread costs more than the replay.
        let new_pairs: Vec<v1::PairResult> =
            report.pairs.into_iter().filter(|pair| !context.acked.contains(&pair.unit)).collect();
        let bytes: usize = new_pairs.iter().map(|p| p.first_game_pgn.len() + p.second_game_pgn.len()).sum();
        let spec = context.spec.clone();
        let replay = move || {
            let JobSpec::Match(job) = &*spec else { unreachable!("checked above") };
            let names = [names[0].as_str(), names[1].as_str()];
            new_pairs
                .into_iter()
                .map(|pair| {
                    let opening =
                        job.openings.as_ref().map(|o| o.for_unit(pair.unit.wrapping_add(job.request.book_offset)));
                    let pair_context = PairContext {
                        opening: opening.as_ref(),
                        variant: job.variant,
                        rules: job.rules,
                        timing: job.timing,
                        names,
                        conditions: &conditions,
                    };
                    let checked = check_pair([&pair.first_game_pgn, &pair.second_game_pgn], &pair_context)
                        .map_err(|e| Status::invalid_argument(format!("unit {}: {e}", pair.unit)))?;
                    Ok((pair, checked))
                })
                .collect::<Result<Vec<_>, Status>>()
        };
        let replayed = if bytes <= INLINE_REPLAY_BYTES {
            replay()?
        } else {
            let _place = self.0.replays.acquire().await.map_err(|e| Status::internal(e.to_string()))?;
            tokio::task::spawn_blocking(replay)
                .await
                .map_err(|e| Status::internal(format!("replaying the pairs: {e}")))??
        };
        let (mut wdl, mut penta) = (context.acked_wdl, context.acked_penta);
        let mut rows = Vec::new();
        for (pair, [first, second]) in replayed {
            let points = [first.points, second.points];
            add_points(&mut wdl, &mut penta, points);
            rows.push(UnitRow {
                unit: pair.unit,
                points,
                reasons: [first.reason, second.reason],
                records: 0,
                pgn: format!("{}\n\n{}\n\n", pair.first_game_pgn.trim_end(), pair.second_game_pgn.trim_end()),
                file: String::new(),
                offset: 0,
                length: 0,
                created_ms: 0,
                cpu_ms: 0,
                games: 0,
            });
        }
        let reported_wdl = [cumulative.wins, cumulative.draws, cumulative.losses];
        if reported_penta.iter().sum::<u64>() < context.acked_count {
            return Err(Status::invalid_argument(format!(
                "cumulative totals went down: {} pairs reported, {} acknowledged before",
                reported_penta.iter().sum::<u64>(),
                context.acked_count
            )));
        }
        // After a restart, pairs this lease reported of units another lease's row
        // counts are in its totals but in no row of its own.
        let beyond = |reported: &[u64], counted: &[u64]| -> Option<Vec<u64>> {
            reported.iter().zip(counted).map(|(r, c)| r.checked_sub(*c)).collect()
        };
        let adopted = context.reported_unstored > 0
            && (reported_wdl != wdl || reported_penta != penta)
            && match (beyond(&reported_wdl, &wdl), beyond(&reported_penta, &penta)) {
                (Some(extra_wdl), Some(extra_penta)) => self.0.scheduler.adopt_reported_before(
                    context.lease_id,
                    extra_wdl.try_into().expect("three counts"),
                    extra_penta.try_into().expect("five counts"),
                ),
                _ => false,
            };
        if !adopted && (reported_wdl != wdl || reported_penta != penta) {
            return Err(Status::invalid_argument(format!(
                "cumulative totals W/D/L {reported_wdl:?} pentanomial {reported_penta:?} disagree with the games: \
                 W/D/L {wdl:?} pentanomial {penta:?}"
            )));
        }
        let stop = self.0.scheduler.record_units(worker, &context, rows, false).await?;
        Ok(v1::ReportReply { stop })
    }

    /// Checks a self-play chunk, stores it, then counts its unit.
    pub(super) async fn chunk_report(
        &self,
        worker: u64,
        upload: v1::UploadChunkRequest,
    ) -> Result<v1::ReportReply, Status> {
        let context = self.0.scheduler.lease_context(worker, upload.lease_id, &[upload.unit])?;
        let JobSpec::SelfPlay(request) = &*context.spec else {
            return Err(Status::invalid_argument(format!("lease {} is not a self-play job", upload.lease_id)));
        };
        let spec = request.spec.clone().unwrap_or_default();
        let expected = self_play_variant(&spec).unwrap_or_default();
        // The unit's games as its worker plays them.
        let mut settings = xq_proto::self_play_games(&spec, None).map_err(|e| Status::internal(e.to_string()))?;
        settings.seed = xq_proto::self_play_unit_seed(&spec, upload.unit);
        // The header's game and record count are checked before a byte is
        // decompressed: a few KB of zeros may claim a million records (hundreds of MB
        // decoded), and a dozen such uploads at once would exhaust the coordinator.
        let refused = |e: ChunkError| Status::invalid_argument(format!("chunk: {e}"));
        let header = read_header(&upload.chunk).map_err(refused)?;
        if header.variant != expected {
            return Err(Status::invalid_argument(format!(
                "chunk: {} records in a {} job",
                header.variant.name(),
                expected.name()
            )));
        }
        if header.records as u64 > self_play_unit_records(&spec) {
            return Err(Status::invalid_argument(format!(
                "chunk: {} records, more than {} games of at most {} plies can make",
                header.records,
                spec.games_per_unit,
                self_play_plies(&spec)
            )));
        }
        // Decoding a chunk checks every record, and its games are played again from
        // their openings: off the request runtime. A chunk refused is neither stored
        // nor counted.
        let chunk = Arc::new(upload.chunk);
        let checked = chunk.clone();
        let records = tokio::task::spawn_blocking(move || -> Result<usize, Status> {
            let records = read_any_chunk(&checked).map_err(refused)?;
            records.check_games(&settings, spec.games_per_unit as usize).map_err(refused)?;
            Ok(records.len())
        })
        .await
        .map_err(|e| Status::internal(e.to_string()))??;
        let file = UnitFile { dir: crate::storage::layout::CHUNKS_DIR, extension: "xqd", what: "chunk" };
        self.store_unit(worker, &context, upload.unit, file, Arc::unwrap_or_clone(chunk), records as i64).await
    }

    /// Stores a checked unit counted by its `records` (a self-play chunk, a
    /// verification report) in a file of its own, then counts the unit. Each distinct
    /// upload gets its own file, named by its content: a second upload of a unit never
    /// overwrites the file the index points to, and a unit already stored is not
    /// written again.
    pub(super) async fn store_unit(
        &self,
        worker: u64,
        context: &LeaseContext,
        unit: u64,
        file: UnitFile,
        bytes: Vec<u8>,
        records: i64,
    ) -> Result<v1::ReportReply, Status> {
        let relative = file.path(context, unit, &bytes);
        let length = bytes.len() as i64;
        if !self.0.scheduler.unit_done(context.job_id, unit) {
            self.write_unit_file(&relative, bytes, file.what).await?;
        }
        let row = UnitRow {
            unit,
            points: [0, 0],
            reasons: [String::new(), String::new()],
            records,
            pgn: String::new(),
            file: relative,
            offset: 0,
            length,
            created_ms: 0,
            cpu_ms: 0,
            games: 0,
        };
        let stop = self.0.scheduler.record_units(worker, context, vec![row], true).await?;
        Ok(v1::ReportReply { stop })
    }

    /// Writes an upload durably to `relative`, under the data directory.
    pub(super) async fn write_unit_file(&self, relative: &str, bytes: Vec<u8>, what: &str) -> Result<(), Status> {
        let path = self.0.data_dir.join(relative);
        tokio::task::spawn_blocking(move || crate::storage::durable::write_file(&path, &bytes))
            .await
            .map_err(|e| Status::internal(e.to_string()))?
            .map_err(|e| Status::unavailable(format!("storing the {what}: {e}")))
    }

    /// Checks a verification unit's report (its lines and tally against the unit's
    /// games: `check_report`, then `spot_check` under the coordinator's budget), stores
    /// it, then counts its unit; the job's `positions` count the games. A report the
    /// spot check finds false is refused and its unit goes to another worker; the
    /// worker is quarantined once that other worker's report of the unit passes
    /// (`Scheduler::suspect`), so that one disagreement alone (the coordinator's own
    /// fault, say) quarantines no one. A report of a unit drawn for a re-check of the
    /// reference's verdicts, by a worker that has not reported it before, is checked
    /// the same way, then goes to [`Self::recheck_report`].
    pub(super) async fn verification_report(
        &self,
        worker: u64,
        report: v1::VerificationReport,
    ) -> Result<v1::ReportReply, Status> {
        let context = self.0.scheduler.lease_context(worker, report.lease_id, &[report.unit])?;
        let JobSpec::Verify(job) = &*context.spec else {
            return Err(Status::invalid_argument(format!("lease {} is not a verification job", report.lease_id)));
        };
        let text = Arc::new(report.report);
        let (checked, unit_job) = (text.clone(), job.clone());
        let checked = tokio::task::spawn_blocking(move || {
            crate::jobs::verification::reports::check_report(&checked, &unit_job.scope(report.unit))
        })
        .await
        .map_err(|e| Status::internal(e.to_string()))?
        .map_err(|problem| Status::invalid_argument(format!("report of unit {}: {problem}", report.unit)))?;
        let records = checked.tally.games as i64;
        let recheck = self.0.scheduler.recheck(context.job_id, report.unit, worker);
        // A unit already counted (a resend) is not checked again: nothing of it is kept.
        if recheck.is_none() && self.0.scheduler.unit_done(context.job_id, report.unit) {
            let bytes = Arc::unwrap_or_clone(text).into_bytes();
            return self.store_unit(worker, &context, report.unit, REPORT_FILE, bytes, records).await;
        }
        let lines = if recheck.is_some() { checked.lines.clone() } else { Vec::new() };
        let spot = self.spot_check(context.job_id, job, report.unit, checked.lines).await?;
        if let Err(problem) = spot {
            let problem: String = problem.chars().filter(|c| !c.is_control()).take(300).collect();
            let reason = format!("its report of unit {} of job {} misstates {problem}", report.unit, context.job_id);
            let lease = Some(context.lease_id);
            self.0.scheduler.suspect(worker, context.job_id, report.unit, lease, &reason).await?;
            return Err(Status::invalid_argument(format!(
                "report of unit {}: a spot check finds {problem}; the unit goes to another worker, and this worker is \
                 quarantined if that one's report passes",
                report.unit
            )));
        }
        let bytes = Arc::unwrap_or_clone(text).into_bytes();
        // A re-check settles before the report is stored: a counted report it outvotes
        // is set aside first, so that this one counts the unit in its place.
        if let Some(recheck) = recheck {
            self.recheck_report(worker, &context, job, recheck, &bytes, lines).await?;
        }
        let reply = self.store_unit(worker, &context, report.unit, REPORT_FILE, bytes, records).await?;
        self.0.tallies.count(context.job_id, report.unit, &checked.tally);
        self.confirm_suspects(context.job_id, report.unit, worker).await?;
        Ok(reply)
    }

    /// Quarantines in job `job_id` the workers held suspect of `unit` whom `reporter`'s
    /// report of it, found true, confirms; the job's kept counts are read again from
    /// the reports still counted.
    pub(super) async fn confirm_suspects(&self, job_id: u64, unit: u64, reporter: u64) -> Result<(), Status> {
        for (suspect, reason) in self.0.scheduler.confirm_suspects(job_id, unit, reporter).await? {
            let reason = format!("{reason} (worker {reporter} verified the unit)");
            self.0.scheduler.quarantine_in_job(suspect, job_id, &reason).await?;
            self.0.tallies.forget(job_id);
        }
        Ok(())
    }

    /// Takes `worker`'s report of a unit drawn for a re-check (`report`, whose game
    /// lines `lines` the spot checks passed) a step towards settling it, comparing it
    /// with the unit's counted report on the reference's verdicts
    /// (`verification::reference_verdicts`):
    ///
    /// - as the second report, agreeing, it settles the re-check; disagreeing, it is
    ///   stored, and a third worker (neither of the two) reports the unit;
    /// - as the third, it sides with one of the two: the other's worker, whom two
    ///   workers contradict, is suspected and at once confirmed (`Scheduler::suspect`,
    ///   as a spot check's suspect is), which quarantines it in the job and sets its
    ///   units aside; when that was the counted report, the caller counts the unit from
    ///   this one in its place. Siding with neither, it settles the re-check and no
    ///   one is suspected.
    ///
    /// The caller then stores the report as a resend (the unit counts once) or, its
    /// counted report set aside, as the unit's.
    pub(super) async fn recheck_report(
        &self,
        worker: u64,
        context: &LeaseContext,
        job: &crate::jobs::verification::VerificationJob,
        recheck: crate::storage::rows::Recheck,
        report: &[u8],
        lines: Vec<serde_json::Value>,
    ) -> Result<(), Status> {
        use crate::jobs::verification::reference::{reference_difference, reference_verdicts};
        use crate::jobs::verification::reports::check_report;
        let (job_id, unit) = (context.job_id, recheck.unit);
        let counted = self.0.counted_report(job_id, unit).await?;
        let second = match recheck.second_worker {
            0 => None,
            _ => Some(
                tokio::fs::read(self.0.data_dir.join(&recheck.second_file))
                    .await
                    .map_err(|e| Status::unavailable(format!("{}: {e}", recheck.second_file)))?,
            ),
        };
        let job_copy = job.clone();
        let compared = tokio::task::spawn_blocking(move || {
            let (scope, reference) = (job_copy.scope(unit), job_copy.spec.reference.as_str());
            let stored = |report: &[u8]| -> Result<_, String> {
                let checked = check_report(&String::from_utf8_lossy(report), &scope)?;
                Ok(reference_verdicts(&checked.lines, reference))
            };
            let ours = reference_verdicts(&lines, reference);
            let from_counted = reference_difference(&stored(counted.as_bytes())?, &ours);
            let from_second = second.map(|second| stored(&second).map(|theirs| reference_difference(&theirs, &ours)));
            let from_second = from_second.transpose()?;
            Ok::<_, String>((from_counted, from_second))
        })
        .await
        .map_err(|e| Status::internal(e.to_string()))?
        .map_err(|e| Status::data_loss(format!("job {job_id}'s stored reports of unit {unit}: {e}")))?;
        let (first, second) = (recheck.first_worker as u64, recheck.second_worker as u64);
        let odd = match compared {
            (None, None | Some(None)) => None,
            (Some(game), None) => {
                let relative = REPORT_FILE.path(context, unit, report);
                self.write_unit_file(&relative, report.to_vec(), REPORT_FILE.what).await?;
                self.0.scheduler.recheck_disputed(job_id, unit, worker, &relative).await?;
                tracing::warn!(
                    job_id,
                    unit,
                    first,
                    worker,
                    game,
                    "the reference's verdicts disputed: a third worker decides"
                );
                return Ok(());
            }
            (None, Some(Some(game))) => Some((second, first, game)),
            (Some(game), Some(None)) => Some((first, second, game)),
            (Some(game), Some(Some(_))) => {
                tracing::warn!(
                    job_id,
                    unit,
                    first,
                    second,
                    worker,
                    game,
                    "three reports of the reference's verdicts, none alike"
                );
                None
            }
        };
        if let Some((odd, other, game)) = odd {
            let reason = format!(
                "its report of unit {unit} of job {job_id} gives the reference's verdicts on game {game} otherwise \
                 than workers {other} and {worker}"
            );
            self.0.scheduler.suspect(odd, job_id, unit, None, &reason).await?;
        }
        self.confirm_suspects(job_id, unit, worker).await?;
        self.0.scheduler.recheck_settled(job_id, unit).await?;
        Ok(())
    }

    /// Verifies a unit's report lines again, and games of the unit drawn under the
    /// spot-check budget (`SpotChecks`), one check at a time; counts what it replayed.
    pub(super) async fn spot_check(
        &self,
        job_id: u64,
        job: &crate::jobs::verification::VerificationJob,
        unit: u64,
        lines: Vec<serde_json::Value>,
    ) -> Result<Result<(), String>, Status> {
        use crate::jobs::verification::spot_checks::{SPOT_CHECKED_GAMES, UnitGames, spot_check};
        let (first, count) = (job.unit_first_game(unit), job.unit_games(unit) as usize);
        let file = match &job.spec.pgn {
            Some(pgn) => Some(self.0.pgn_file(pgn).await?),
            None => None,
        };
        let network = match job.spec.selfplay.as_ref().and_then(|s| s.net.as_ref()) {
            Some(net) => Some(self.0.verification_net(net).await?),
            None => None,
        };
        let _permit = self.0.spot_checks.running.acquire().await.map_err(|e| Status::internal(e.to_string()))?;
        let (job, checks) = (job.clone(), self.0.spot_checks.clone());
        let check = tokio::task::spawn_blocking(move || -> Result<Result<_, String>, Status> {
            let mut rng = rand::rng();
            let settings;
            let games = match &file {
                Some(file) => UnitGames::pgn(file, first, count),
                None if job.spec.generated => {
                    UnitGames::Generated { first: job.spec.first_generated + first as u64, count }
                }
                None => {
                    let spec =
                        job.spec.selfplay.as_ref().ok_or_else(|| Status::internal("a verification without games"))?;
                    settings = xq_proto::self_play_games(spec, network).map_err(|e| Status::internal(e.to_string()))?;
                    UnitGames::SelfPlay { settings: &settings, count }
                }
            };
            let cost = games.game_cost(job.rulings());
            let draws = checks.draw(SPOT_CHECKED_GAMES.min(count), cost);
            let check = spot_check(&lines, &job.scope(unit), games, draws, &mut rng);
            if let Ok(done) = &check {
                checks.charge(done.plies as f64 - draws as f64 * cost);
                checks.record(job_id, *done);
            }
            Ok(check)
        })
        .await
        .map_err(|e| Status::internal(e.to_string()))??;
        Ok(check.map(drop))
    }
}

/// Where a unit counted by records is stored: `dir/JOB/UNIT-LEASE-DIGEST.extension`;
/// `what` names it in errors.
pub(super) struct UnitFile {
    dir: &'static str,
    extension: &'static str,
    what: &'static str,
}

impl UnitFile {
    /// The file, under the data directory, of `bytes` uploaded for `unit` on a lease:
    /// each distinct upload its own.
    pub(super) fn path(&self, context: &LeaseContext, unit: u64, bytes: &[u8]) -> String {
        let UnitFile { dir, extension, .. } = self;
        format!("{dir}/{}/{unit}-{}-{}.{extension}", context.job_id, context.lease_id, chunk_digest(bytes))
    }
}

/// Where a verification unit's report is stored.
const REPORT_FILE: UnitFile =
    UnitFile { dir: crate::storage::layout::VERIFICATION_DIR, extension: "jsonl", what: "report" };

/// Each game of `pgn`, ruled by the judge under `rules`.
pub(super) fn judge_games(pgn: &str, rules: RuleSet) -> Result<Vec<v1::JudgedGame>, String> {
    let games = parse_pgn(pgn).map_err(|e| e.to_string())?;
    games
        .iter()
        .map(|game| {
            // A match's games carry the timing they were played with as a tag.
            let request = JudgeRequest::from_pgn(game, rules, ViolationTiming::default());
            let (judgement, _) = judge(&request).map_err(|e| e.to_string())?;
            Ok(v1::JudgedGame {
                tags: game.tags.iter().cloned().collect(),
                start_fen: request.fen.clone().unwrap_or_else(|| start_fen(request.variant)),
                moves: request.moves,
                judgement_json: judgement.to_string(),
            })
        })
        .collect()
}

/// The standard start position of `variant`.
fn start_fen(variant: Variant) -> String {
    match variant {
        Variant::Xiangqi => xq_engine::xiangqi::fen::to_fen(&xq_engine::xiangqi::Position::startpos()),
        Variant::Xiongqi => xq_engine::xiongqi::fen::to_fen(&xq_engine::xiongqi::Position::startpos()),
    }
}

/// The first 16 hex digits of a chunk's SHA-256: the end of its file's name, so that
/// two uploads of a unit never share a file and a stored chunk can be checked on read.
fn chunk_digest(chunk: &[u8]) -> String {
    hex::encode(&Sha256::digest(chunk)[..8])
}

/// Refuses a stored chunk whose bytes no longer hash to the digest in its file's name.
pub(super) fn check_stored_chunk(file: &str, bytes: &[u8]) -> Result<(), Status> {
    let named = file.strip_suffix(".xqd").and_then(|stem| stem.rsplit('-').next()).unwrap_or_default();
    if named == chunk_digest(bytes) {
        return Ok(());
    }
    Err(Status::data_loss(format!("{file}: its bytes do not hash to the digest in its name: damaged on disk")))
}
