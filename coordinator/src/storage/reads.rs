//! What is read from the database: the whole state at start, and the queries the
//! services, retention and the dashboard make.

use crate::storage::counts::add_points;
use crate::storage::rows::{
    AuditRow, DoneUnit, IndexedArtifact, JobRow, LeaseRow, MachineRow, Recheck, Recount, ReportedFailure, Snapshot,
    Suspicion, Tally, TokenRow, TournamentRow, UnitFile, UserRow, WorkerCredit, WorkerRow, abandoned_games,
    job_from_row, net_from_row, parse_units,
};
use crate::storage::rows::{job_columns, net_columns};
use crate::storage::{Storage, StorageError};
use sqlx::Row;
use std::collections::BTreeMap;
use xq_proto::v1;

impl Storage {
    /// Reads what the scheduler needs at start.
    pub async fn load(&self) -> Result<Snapshot, StorageError> {
        let mut snapshot = Snapshot {
            tokens: self.tokens().await?,
            users: self.users().await?,
            machines: self.machines().await?,
            ..Snapshot::default()
        };
        let workers =
            sqlx::query("SELECT id, name, capabilities, last_seen_ms, standing, standing_reason FROM workers");
        for row in workers.fetch_all(&self.pool).await? {
            snapshot.workers.push(WorkerRow {
                id: row.try_get("id")?,
                name: row.try_get("name")?,
                capabilities: row.try_get("capabilities")?,
                last_seen_ms: row.try_get("last_seen_ms")?,
                standing: row.try_get("standing")?,
                standing_reason: row.try_get("standing_reason")?,
            });
        }
        for row in
            sqlx::query(concat!("SELECT ", job_columns!(), " FROM jobs ORDER BY id")).fetch_all(&self.pool).await?
        {
            snapshot.jobs.push(job_from_row(&row)?);
        }
        for row in sqlx::query(
            "SELECT id, job_id, worker_id, units, state, probe, cores, created_ms FROM leases WHERE state = 'active'",
        )
        .fetch_all(&self.pool)
        .await?
        {
            let units: String = row.try_get("units")?;
            snapshot.active_leases.push(LeaseRow {
                id: row.try_get("id")?,
                job_id: row.try_get("job_id")?,
                worker_id: row.try_get("worker_id")?,
                units: parse_units(&units)?,
                state: row.try_get("state")?,
                probe: row.try_get("probe")?,
                cores: row.try_get("cores")?,
                created_ms: row.try_get("created_ms")?,
            });
        }
        for row in sqlx::query("SELECT id, job_id, probe FROM leases WHERE probe <> ''").fetch_all(&self.pool).await? {
            let job: i64 = row.try_get("job_id")?;
            snapshot.probes.entry(job).or_default().push((row.try_get("id")?, row.try_get("probe")?));
        }
        let max: Option<i64> =
            sqlx::query("SELECT MAX(id) AS m FROM leases").fetch_one(&self.pool).await?.try_get("m")?;
        snapshot.max_lease_id = max.unwrap_or(0);
        // A finished SPSA job's theta is replayed from its units too.
        for job in snapshot.jobs.iter().filter(|j| j.state == "running" || j.kind == "spsa") {
            snapshot.done_units.insert(job.id, self.done_units(job.id).await?);
        }
        for row in
            sqlx::query("SELECT worker_id, COUNT(*) AS n FROM units GROUP BY worker_id").fetch_all(&self.pool).await?
        {
            snapshot.worker_units.insert(row.try_get("worker_id")?, row.try_get::<i64, _>("n")?.max(0) as u64);
        }
        for row in
            sqlx::query("SELECT job_id, worker_id, unit, reason FROM suspicions ORDER BY job_id, worker_id, unit")
                .fetch_all(&self.pool)
                .await?
        {
            snapshot.suspicions.entry(row.try_get("job_id")?).or_default().push(Suspicion {
                worker_id: row.try_get("worker_id")?,
                unit: row.try_get::<i64, _>("unit")?.max(0) as u64,
                reason: row.try_get("reason")?,
            });
        }
        let failures = "SELECT job_id, worker_id, kind, engine, detail, time_ms FROM failures \
                        ORDER BY job_id, time_ms, worker_id";
        for row in sqlx::query(failures).fetch_all(&self.pool).await? {
            snapshot.failures.entry(row.try_get("job_id")?).or_default().push(ReportedFailure {
                worker_id: row.try_get("worker_id")?,
                kind: row.try_get("kind")?,
                engine: row.try_get("engine")?,
                detail: row.try_get("detail")?,
                time_ms: row.try_get("time_ms")?,
            });
        }
        let release = "SELECT published_ms, version, sha256, size, signature FROM worker_releases \
                       ORDER BY published_ms DESC LIMIT 1";
        if let Some(row) = sqlx::query(release).fetch_optional(&self.pool).await? {
            snapshot.release = Some(v1::WorkerRelease {
                version: row.try_get("version")?,
                sha256: row.try_get("sha256")?,
                size: row.try_get::<i64, _>("size")?.max(0) as u64,
                signature: row.try_get("signature")?,
                published_ms: row.try_get("published_ms")?,
            });
        }
        let rechecks = "SELECT job_id, unit, first_worker_id, second_worker_id, second_file FROM rechecks \
                        ORDER BY job_id, unit";
        for row in sqlx::query(rechecks).fetch_all(&self.pool).await? {
            snapshot.rechecks.entry(row.try_get("job_id")?).or_default().push(Recheck {
                unit: row.try_get::<i64, _>("unit")?.max(0) as u64,
                first_worker: row.try_get("first_worker_id")?,
                second_worker: row.try_get("second_worker_id")?,
                second_file: row.try_get("second_file")?,
            });
        }
        let endings = "SELECT worker_id, state, COUNT(*) AS n FROM leases WHERE state IN ('expired', 'done') \
                       GROUP BY worker_id, state";
        for row in sqlx::query(endings).fetch_all(&self.pool).await? {
            let leases = snapshot.worker_leases.entry(row.try_get("worker_id")?).or_default();
            let n = row.try_get::<i64, _>("n")?.max(0) as u64;
            match row.try_get::<String, _>("state")?.as_str() {
                "expired" => leases.expired = n,
                _ => leases.finished = n,
            }
        }
        for row in
            sqlx::query(concat!("SELECT ", net_columns!(), " FROM nets ORDER BY id")).fetch_all(&self.pool).await?
        {
            snapshot.nets.push(net_from_row(&row)?);
        }
        let tournaments = sqlx::query(
            "SELECT id, spec, job_ids, created_ms, stopped_ms, request_id, request_digest FROM tournaments ORDER BY id",
        );
        for row in tournaments.fetch_all(&self.pool).await? {
            let job_ids: String = row.try_get("job_ids")?;
            snapshot.tournaments.push(TournamentRow {
                id: row.try_get("id")?,
                spec: row.try_get("spec")?,
                job_ids: parse_units(&job_ids)?,
                created_ms: row.try_get("created_ms")?,
                stopped_ms: row.try_get("stopped_ms")?,
                request_id: row.try_get("request_id")?,
                request_digest: row.try_get("request_digest")?,
            });
        }
        Ok(snapshot)
    }

    /// Every token, revoked and expired ones too, oldest first.
    pub async fn tokens(&self) -> Result<Vec<TokenRow>, StorageError> {
        let rows = sqlx::query(
            "SELECT hash, role, worker_id, name, created_ms, expires_ms, revoked_ms, user_name FROM tokens \
             ORDER BY created_ms",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                Ok(TokenRow {
                    hash: row.try_get("hash")?,
                    role: row.try_get("role")?,
                    worker_id: row.try_get("worker_id")?,
                    name: row.try_get("name")?,
                    created_ms: row.try_get("created_ms")?,
                    expires_ms: row.try_get("expires_ms")?,
                    revoked_ms: row.try_get("revoked_ms")?,
                    user: row.try_get("user_name")?,
                })
            })
            .collect()
    }

    /// Every machine enrolled.
    pub async fn machines(&self) -> Result<Vec<MachineRow>, StorageError> {
        let rows = sqlx::query("SELECT key_hash, machine_id, worker_id, user_name FROM machines ORDER BY worker_id")
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|row| {
                Ok(MachineRow {
                    key_hash: row.try_get("key_hash")?,
                    machine_id: row.try_get("machine_id")?,
                    worker_id: row.try_get("worker_id")?,
                    user: row.try_get("user_name")?,
                })
            })
            .collect()
    }

    /// Every user, by name.
    pub async fn users(&self) -> Result<Vec<UserRow>, StorageError> {
        let rows =
            sqlx::query("SELECT name, password_hash, role, state, created_ms, changed_ms FROM users ORDER BY name")
                .fetch_all(&self.pool)
                .await?;
        rows.iter()
            .map(|row| {
                Ok(UserRow {
                    name: row.try_get("name")?,
                    password_hash: row.try_get("password_hash")?,
                    role: row.try_get("role")?,
                    state: row.try_get("state")?,
                    created_ms: row.try_get("created_ms")?,
                    changed_ms: row.try_get("changed_ms")?,
                })
            })
            .collect()
    }

    /// The audit log's last `limit` entries, newest first.
    pub async fn audit_log(&self, limit: i64) -> Result<Vec<AuditRow>, StorageError> {
        let rows = sqlx::query("SELECT at_ms, actor, action, detail FROM audit_log ORDER BY at_ms DESC LIMIT $1")
            .bind(limit)
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|row| {
                Ok(AuditRow {
                    at_ms: row.try_get("at_ms")?,
                    actor: row.try_get("actor")?,
                    action: row.try_get("action")?,
                    detail: row.try_get("detail")?,
                })
            })
            .collect()
    }

    /// Job `job`'s counted units in the order they counted (their stamp, then unit).
    pub async fn done_units(&self, job: i64) -> Result<Vec<DoneUnit>, StorageError> {
        let rows = sqlx::query(
            "SELECT unit, lease_id, worker_id, first_points, second_points, created_ms, reasons FROM units \
             WHERE job_id = $1 ORDER BY created_ms, unit",
        )
        .bind(job)
        .fetch_all(&self.pool)
        .await?;
        let units = rows
            .iter()
            .map(|r| -> Result<_, sqlx::Error> {
                Ok(DoneUnit {
                    unit: r.try_get::<i64, _>("unit")? as u64,
                    lease_id: r.try_get("lease_id")?,
                    worker_id: r.try_get("worker_id")?,
                    points: [r.try_get("first_points")?, r.try_get("second_points")?],
                    created_ms: r.try_get("created_ms")?,
                    abandoned: abandoned_games(r.try_get::<String, _>("reasons")?.split('|')),
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(units)
    }

    /// One job as stored.
    pub async fn job(&self, id: i64) -> Result<Option<JobRow>, StorageError> {
        let row = sqlx::query(concat!("SELECT ", job_columns!(), " FROM jobs WHERE id = $1"))
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(job_from_row).transpose()
    }

    /// Where the finished units of a job are stored, in unit order, from `after` on.
    pub async fn unit_files(&self, job: i64, after: Option<u64>, limit: i64) -> Result<Vec<UnitFile>, StorageError> {
        let rows = sqlx::query(
            "SELECT unit, file, file_offset, length FROM units WHERE job_id = $1 AND unit > $2 ORDER BY unit LIMIT $3",
        )
        .bind(job)
        .bind(after.map_or(-1, |u| u as i64))
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(UnitFile {
                    unit: r.try_get::<i64, _>("unit")? as u64,
                    file: r.try_get("file")?,
                    offset: r.try_get::<i64, _>("file_offset")? as u64,
                    length: r.try_get::<i64, _>("length")? as u64,
                })
            })
            .collect()
    }

    /// Finished or stopped jobs whose data is still stored and that ended before
    /// `games_before_ms` (matches) or `data_before_ms` (self-play); a bound of 0
    /// selects none of its kind, and a job with no end stamped is never selected.
    pub async fn jobs_past_retention(
        &self,
        games_before_ms: i64,
        data_before_ms: i64,
    ) -> Result<Vec<i64>, StorageError> {
        let rows = sqlx::query(
            "SELECT id FROM jobs WHERE state IN ('finished', 'stopped') AND data_removed_ms = 0 AND ended_ms > 0 \
             AND ((kind = 'selfplay' AND ended_ms < $1) OR (kind <> 'selfplay' AND ended_ms < $2)) ORDER BY id",
        )
        .bind(data_before_ms)
        .bind(games_before_ms)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(|r| Ok(r.try_get("id")?)).collect()
    }

    /// The jobs whose data was removed.
    pub async fn jobs_with_data_removed(&self) -> Result<Vec<i64>, StorageError> {
        let rows = sqlx::query("SELECT id FROM jobs WHERE data_removed_ms > 0").fetch_all(&self.pool).await?;
        rows.iter().map(|r| Ok(r.try_get("id")?)).collect()
    }

    /// The ids of every token of user `name`, revoked and expired ones too: whose jobs
    /// are the user's.
    pub async fn token_ids_of_user(&self, name: &str) -> Result<Vec<String>, StorageError> {
        let rows = sqlx::query("SELECT hash FROM tokens WHERE user_name = $1").bind(name).fetch_all(&self.pool).await?;
        rows.iter()
            .map(|row| Ok(crate::access::tokens::token_id(&row.try_get::<String, _>("hash")?).to_owned()))
            .collect()
    }

    /// Each worker's counted units summed: core-milliseconds, games and units, all
    /// time and since `recent_ms` ([`crate::scheduler::credit`]).
    pub async fn credit_by_worker(&self, recent_ms: i64) -> Result<BTreeMap<i64, WorkerCredit>, StorageError> {
        let rows = sqlx::query(
            "SELECT worker_id, CAST(SUM(cpu_ms) AS BIGINT) AS cpu_ms, CAST(SUM(games) AS BIGINT) AS games, \
             COUNT(*) AS units, \
             CAST(SUM(CASE WHEN created_ms >= $1 THEN cpu_ms ELSE 0 END) AS BIGINT) AS recent_cpu_ms, \
             CAST(SUM(CASE WHEN created_ms >= $1 THEN games ELSE 0 END) AS BIGINT) AS recent_games, \
             CAST(SUM(CASE WHEN created_ms >= $1 THEN 1 ELSE 0 END) AS BIGINT) AS recent_units \
             FROM units GROUP BY worker_id",
        )
        .bind(recent_ms)
        .fetch_all(&self.pool)
        .await?;
        let mut credit = BTreeMap::new();
        for row in rows {
            let tally = |prefix: &str| -> Result<Tally, sqlx::Error> {
                Ok(Tally {
                    cpu_ms: row.try_get(format!("{prefix}cpu_ms").as_str())?,
                    games: row.try_get(format!("{prefix}games").as_str())?,
                    units: row.try_get(format!("{prefix}units").as_str())?,
                })
            };
            let worker = WorkerCredit { all_time: tally("")?, recent: tally("recent_")? };
            credit.insert(row.try_get("worker_id")?, worker);
        }
        Ok(credit)
    }

    /// Bytes of games and training data stored for the jobs `submitter` created.
    pub async fn stored_bytes_of(&self, submitter: &str) -> Result<u64, StorageError> {
        let units = sqlx::query(
            "SELECT CAST(COALESCE(SUM(u.length), 0) AS BIGINT) AS bytes FROM units u JOIN jobs j ON j.id = u.job_id \
             WHERE j.submitter = $1 AND j.data_removed_ms = 0",
        )
        .bind(submitter)
        .fetch_one(&self.pool)
        .await?;
        let artifacts =
            sqlx::query("SELECT CAST(COALESCE(SUM(size), 0) AS BIGINT) AS bytes FROM artifacts WHERE uploader = $1")
                .bind(submitter)
                .fetch_one(&self.pool)
                .await?;
        let bytes = |row: &sqlx::any::AnyRow| row.try_get::<i64, _>("bytes").map(|b| b.max(0) as u64);
        Ok(bytes(&units)? + bytes(&artifacts)?)
    }

    /// The artifacts last uploaded before `before_ms`, by hash.
    pub async fn artifacts_uploaded_before(&self, before_ms: i64) -> Result<Vec<String>, StorageError> {
        let rows = sqlx::query("SELECT sha256 FROM artifacts WHERE created_ms < $1 ORDER BY sha256")
            .bind(before_ms)
            .fetch_all(&self.pool)
            .await?;
        Ok(rows.iter().map(|row| row.try_get("sha256")).collect::<Result<_, _>>()?)
    }

    /// A job's counters recomputed from its unit rows; the job row's must always equal
    /// them, and tests compare them.
    pub async fn recount(&self, job: i64) -> Result<Recount, StorageError> {
        let rows = sqlx::query("SELECT first_points, second_points, reasons FROM units WHERE job_id = $1")
            .bind(job)
            .fetch_all(&self.pool)
            .await?;
        let mut recount = Recount { units: rows.len() as u64, ..Recount::default() };
        for row in &rows {
            let points = [row.try_get::<i64, _>("first_points")?, row.try_get::<i64, _>("second_points")?];
            let reasons: String = row.try_get("reasons")?;
            add_points(&mut recount.wdl, &mut recount.pentanomial, points);
            recount.over_the_board.count(points, &reasons.split('|').map(str::to_owned).collect::<Vec<_>>(), 1);
        }
        Ok(recount)
    }

    /// A page of a match's counted pairs, in unit order, after unit `after`.
    pub async fn pairs(&self, job: i64, after: Option<u64>, limit: i64) -> Result<Vec<v1::PairSummary>, StorageError> {
        let rows = sqlx::query(
            "SELECT unit, worker_id, created_ms, first_points, second_points, reasons FROM units \
             WHERE job_id = $1 AND unit > $2 ORDER BY unit LIMIT $3",
        )
        .bind(job)
        .bind(after.map_or(-1, |u| u as i64))
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                let points = [r.try_get::<i64, _>("first_points")?, r.try_get::<i64, _>("second_points")?];
                let reasons: String = r.try_get("reasons")?;
                Ok(v1::PairSummary {
                    unit: r.try_get::<i64, _>("unit")? as u64,
                    worker_id: r.try_get::<i64, _>("worker_id")? as u64,
                    time_ms: r.try_get("created_ms")?,
                    points: points.iter().map(|&p| p.clamp(0, 2) as u32).collect(),
                    reasons: reasons.split('|').map(str::to_owned).collect(),
                    // Storage knows workers, not who they are: the scheduler fills it.
                    user: String::new(),
                })
            })
            .collect()
    }

    /// A match's counted pairs in the order they counted: (when, the new engine's
    /// half points in each game).
    pub async fn pair_points(&self, job: i64) -> Result<Vec<(i64, [i64; 2])>, StorageError> {
        let rows = sqlx::query(
            "SELECT created_ms, first_points, second_points FROM units WHERE job_id = $1 ORDER BY created_ms, unit",
        )
        .bind(job)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                let points = [row.try_get::<i64, _>("first_points")?, row.try_get::<i64, _>("second_points")?];
                Ok((row.try_get::<i64, _>("created_ms")?, points))
            })
            .collect()
    }

    /// The newest `limit` artifacts of `kind`, newest first.
    pub async fn artifacts_of_kind(&self, kind: &str, limit: i64) -> Result<Vec<IndexedArtifact>, StorageError> {
        let rows = sqlx::query(
            "SELECT sha256, name, size, uploader, created_ms FROM artifacts WHERE kind = $1 \
             ORDER BY created_ms DESC, sha256 LIMIT $2",
        )
        .bind(kind)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                Ok(IndexedArtifact {
                    sha256: row.try_get("sha256")?,
                    name: row.try_get("name")?,
                    size: row.try_get::<i64, _>("size")?.max(0) as u64,
                    uploader: row.try_get("uploader")?,
                    uploaded_ms: row.try_get("created_ms")?,
                })
            })
            .collect()
    }

    /// Whether an artifact is indexed.
    pub async fn artifact(&self, sha256: &str) -> Result<Option<(String, String, u64)>, StorageError> {
        let row = sqlx::query("SELECT name, kind, size FROM artifacts WHERE sha256 = $1")
            .bind(sha256)
            .fetch_optional(&self.pool)
            .await?;
        row.map(|r| Ok((r.try_get("name")?, r.try_get("kind")?, r.try_get::<i64, _>("size")? as u64))).transpose()
    }
}
