//! Changes applied: each in its statements, a batch in one transaction per database
//! (a failed batch fails only the changes of the database that failed), units inserted
//! in prepared multi-row statements and their counts added to their job's row.

use crate::storage::changes::{Applied, Change, SetAside};
use crate::storage::counts::{OverTheBoard, slots};
use crate::storage::rows::{UnitRow, units_text};
use crate::storage::rows::{job_columns, net_columns};
use crate::storage::{Dialect, Storage, StorageError, now_ms};
use sqlx::{AnyConnection, Connection, Row};
use std::collections::HashMap;

/// The fail point of a new tournament's row written, its first tests not yet, inside
/// the transaction that writes them all (the drills check that a crash there leaves
/// nothing).
const TOURNAMENT_WRITTEN: &str = "tournament-written";

/// Applies a change other than unit rows inside the caller's transaction.
async fn apply(conn: &mut AnyConnection, change: &Change) -> Result<Applied, StorageError> {
    let now = now_ms();
    match change {
        Change::Token(token) => {
            sqlx::query(
                "INSERT INTO tokens (hash, role, worker_id, created_ms, name, expires_ms, revoked_ms, user_name) \
                 VALUES ($1, $2, $3, $4, $5, $6, 0, $7)",
            )
            .bind(&token.hash)
            .bind(&token.role)
            .bind(token.worker_id)
            .bind(token.created_ms)
            .bind(&token.name)
            .bind(token.expires_ms)
            .bind(&token.user)
            .execute(&mut *conn)
            .await?;
        }
        Change::Machine(machine) => {
            sqlx::query("INSERT INTO machines (key_hash, machine_id, worker_id, user_name) VALUES ($1, $2, $3, $4)")
                .bind(&machine.key_hash)
                .bind(&machine.machine_id)
                .bind(machine.worker_id)
                .bind(&machine.user)
                .execute(&mut *conn)
                .await?;
        }
        Change::User(user) => {
            sqlx::query(
                "INSERT INTO users (name, password_hash, role, state, created_ms, changed_ms) \
                 VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (name) DO UPDATE SET \
                 password_hash = excluded.password_hash, role = excluded.role, state = excluded.state, \
                 changed_ms = excluded.changed_ms",
            )
            .bind(&user.name)
            .bind(&user.password_hash)
            .bind(&user.role)
            .bind(&user.state)
            .bind(user.created_ms)
            .bind(user.changed_ms)
            .execute(&mut *conn)
            .await?;
        }
        Change::RevokeToken { hash, at_ms } => {
            sqlx::query("UPDATE tokens SET revoked_ms = $1 WHERE hash = $2 AND revoked_ms = 0")
                .bind(at_ms)
                .bind(hash)
                .execute(&mut *conn)
                .await?;
        }
        Change::Audit(entry) => {
            sqlx::query("INSERT INTO audit_log (at_ms, actor, action, detail) VALUES ($1, $2, $3, $4)")
                .bind(entry.at_ms)
                .bind(&entry.actor)
                .bind(&entry.action)
                .bind(&entry.detail)
                .execute(&mut *conn)
                .await?;
        }
        Change::Worker(worker) => {
            sqlx::query(
                "INSERT INTO workers (id, name, capabilities, last_seen_ms) VALUES ($1, $2, $3, $4) \
                 ON CONFLICT (id) DO UPDATE SET name = excluded.name, capabilities = excluded.capabilities, \
                 last_seen_ms = excluded.last_seen_ms",
            )
            .bind(worker.id)
            .bind(&worker.name)
            .bind(&worker.capabilities)
            .bind(worker.last_seen_ms)
            .execute(&mut *conn)
            .await?;
        }
        Change::Artifact { sha256, name, kind, size, uploader } => {
            sqlx::query(
                "INSERT INTO artifacts (sha256, name, kind, size, created_ms, uploader) VALUES ($1, $2, $3, $4, $5, $6) \
                 ON CONFLICT (sha256) DO UPDATE SET created_ms = excluded.created_ms",
            )
            .bind(sha256)
            .bind(name)
            .bind(kind)
            .bind(size)
            .bind(now)
            .bind(uploader)
            .execute(&mut *conn)
            .await?;
        }
        Change::ArtifactRemoved { sha256 } => {
            sqlx::query("DELETE FROM artifacts WHERE sha256 = $1").bind(sha256).execute(&mut *conn).await?;
        }
        Change::NewJob(job) => {
            let query = sqlx::query(concat!(
                "INSERT INTO jobs (",
                job_columns!(),
                ", updated_ms) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, \
                 $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31, $32, $33, $34, $35, $36)"
            ))
            .bind(job.id)
            .bind(&job.kind)
            .bind(&job.state)
            .bind(&job.outcome)
            .bind(&job.description)
            .bind(job.priority)
            .bind(&job.spec)
            .bind(job.units_total)
            .bind(job.next_unit)
            .bind(job.units_done);
            let query = bind_counts(bind_counts(query, job.wdl), job.pentanomial)
                .bind(job.positions)
                .bind(serde_json::to_string(&job.reasons).expect("a map of strings serialises"))
                .bind(job.created_ms)
                .bind(&job.submitter)
                .bind(job.data_removed_ms)
                .bind(&job.request_id)
                .bind(&job.request_digest);
            bind_counts(query, board_columns(&job.over_the_board))
                .bind(job.ended_ms)
                .bind(now)
                .execute(&mut *conn)
                .await?;
        }
        Change::DataRemoved { job_id, at_ms } => {
            sqlx::query("UPDATE jobs SET data_removed_ms = $1 WHERE id = $2")
                .bind(at_ms)
                .bind(job_id)
                .execute(&mut *conn)
                .await?;
        }
        Change::JobState { id, state, outcome, ended_ms } => {
            sqlx::query("UPDATE jobs SET state = $1, outcome = $2, ended_ms = $3, updated_ms = $4 WHERE id = $5")
                .bind(state)
                .bind(outcome)
                .bind(ended_ms)
                .bind(now)
                .bind(id)
                .execute(&mut *conn)
                .await?;
        }
        Change::JobPriority { id, priority } => {
            sqlx::query("UPDATE jobs SET priority = $1, updated_ms = $2 WHERE id = $3")
                .bind(priority)
                .bind(now)
                .bind(id)
                .execute(&mut *conn)
                .await?;
        }
        Change::NewLease { lease, next_unit } => {
            sqlx::query(
                "INSERT INTO leases (id, job_id, worker_id, units, state, created_ms, probe, cores) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            )
            .bind(lease.id)
            .bind(lease.job_id)
            .bind(lease.worker_id)
            .bind(units_text(&lease.units))
            .bind(&lease.state)
            .bind(lease.created_ms)
            .bind(&lease.probe)
            .bind(lease.cores)
            .execute(&mut *conn)
            .await?;
            sqlx::query("UPDATE jobs SET next_unit = $1 WHERE id = $2 AND next_unit < $1")
                .bind(next_unit)
                .bind(lease.job_id)
                .execute(&mut *conn)
                .await?;
        }
        Change::LeaseState { id, state } => {
            sqlx::query("UPDATE leases SET state = $1 WHERE id = $2").bind(state).bind(id).execute(&mut *conn).await?;
        }
        Change::Tournament(tournament) => {
            sqlx::query(
                "INSERT INTO tournaments (id, spec, job_ids, created_ms, stopped_ms, request_id, request_digest) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7)",
            )
            .bind(tournament.id)
            .bind(&tournament.spec)
            .bind(units_text(&tournament.job_ids))
            .bind(tournament.created_ms)
            .bind(tournament.stopped_ms)
            .bind(&tournament.request_id)
            .bind(&tournament.request_digest)
            .execute(&mut *conn)
            .await?;
            crate::fail_point::reached(TOURNAMENT_WRITTEN);
        }
        Change::Suspicion { job_id, suspicion } => {
            sqlx::query(
                "INSERT INTO suspicions (job_id, worker_id, unit, reason) VALUES ($1, $2, $3, $4) \
                 ON CONFLICT (job_id, worker_id, unit) DO NOTHING",
            )
            .bind(job_id)
            .bind(suspicion.worker_id)
            .bind(suspicion.unit as i64)
            .bind(&suspicion.reason)
            .execute(&mut *conn)
            .await?;
        }
        Change::JobSpec { id, spec, units_total } => {
            sqlx::query("UPDATE jobs SET spec = $1, units_total = $2 WHERE id = $3")
                .bind(spec)
                .bind(units_total)
                .bind(id)
                .execute(&mut *conn)
                .await?;
        }
        Change::FailuresCleared { job_id } => {
            sqlx::query("DELETE FROM failures WHERE job_id = $1").bind(job_id).execute(&mut *conn).await?;
        }
        Change::WorkerRelease(release) => {
            sqlx::query(
                "INSERT INTO worker_releases (published_ms, version, sha256, size, signature) \
                 VALUES ($1, $2, $3, $4, $5)",
            )
            .bind(release.published_ms)
            .bind(&release.version)
            .bind(&release.sha256)
            .bind(release.size as i64)
            .bind(&release.signature)
            .execute(&mut *conn)
            .await?;
        }
        Change::Failure { job_id, failure } => {
            sqlx::query(
                "INSERT INTO failures (job_id, worker_id, kind, engine, detail, time_ms) \
                 VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (job_id, worker_id) DO NOTHING",
            )
            .bind(job_id)
            .bind(failure.worker_id)
            .bind(&failure.kind)
            .bind(&failure.engine)
            .bind(&failure.detail)
            .bind(failure.time_ms)
            .execute(&mut *conn)
            .await?;
        }
        Change::SuspicionsSettled { job_id, worker_id } => {
            sqlx::query("DELETE FROM suspicions WHERE job_id = $1 AND worker_id = $2")
                .bind(job_id)
                .bind(worker_id)
                .execute(&mut *conn)
                .await?;
        }
        Change::Recheck { job_id, recheck } => {
            sqlx::query(
                "INSERT INTO rechecks (job_id, unit, first_worker_id, second_worker_id, second_file) \
                 VALUES ($1, $2, $3, $4, $5) ON CONFLICT (job_id, unit) DO UPDATE SET \
                 first_worker_id = excluded.first_worker_id, second_worker_id = excluded.second_worker_id, \
                 second_file = excluded.second_file",
            )
            .bind(job_id)
            .bind(recheck.unit as i64)
            .bind(recheck.first_worker)
            .bind(recheck.second_worker)
            .bind(&recheck.second_file)
            .execute(&mut *conn)
            .await?;
        }
        Change::RecheckSettled { job_id, unit } => {
            sqlx::query("DELETE FROM rechecks WHERE job_id = $1 AND unit = $2")
                .bind(job_id)
                .bind(*unit as i64)
                .execute(&mut *conn)
                .await?;
        }
        Change::TournamentStopped { id, at_ms } => {
            sqlx::query("UPDATE tournaments SET stopped_ms = $1 WHERE id = $2")
                .bind(at_ms)
                .bind(id)
                .execute(&mut *conn)
                .await?;
        }
        Change::TournamentJobs { id, job_ids } => {
            sqlx::query("UPDATE tournaments SET job_ids = $1 WHERE id = $2")
                .bind(units_text(job_ids))
                .bind(id)
                .execute(&mut *conn)
                .await?;
        }
        Change::Net(net) => {
            sqlx::query(concat!(
                "INSERT INTO nets (",
                net_columns!(),
                ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16) \
                 ON CONFLICT (id) DO UPDATE SET test_job_id = excluded.test_job_id"
            ))
            .bind(net.id)
            .bind(&net.sha256)
            .bind(&net.name)
            .bind(net.size)
            .bind(&net.lineage)
            .bind(net.generation)
            .bind(net.parent_id)
            .bind(net.data_job_id)
            .bind(net.test_job_id)
            .bind(net.train_loss)
            .bind(net.validation_loss)
            .bind(net.positions)
            .bind(net.epochs)
            .bind(&net.description)
            .bind(net.created_ms)
            .bind(&net.owner)
            .execute(&mut *conn)
            .await?;
        }
        Change::WorkerStanding { worker_id, standing, reason, set_aside_jobs } => {
            sqlx::query("UPDATE workers SET standing = $1, standing_reason = $2 WHERE id = $3")
                .bind(standing)
                .bind(reason)
                .bind(worker_id)
                .execute(&mut *conn)
                .await?;
            let mut set_aside = Vec::new();
            for &job_id in set_aside_jobs {
                set_aside.extend(set_aside_units(conn, job_id, *worker_id, now).await?);
            }
            return Ok(Applied { set_aside, ..Applied::default() });
        }
        Change::Together(changes) => {
            for change in changes {
                Box::pin(apply(conn, change)).await?;
            }
        }
        Change::Units { .. } => unreachable!("unit rows are inserted by apply_all"),
    }
    Ok(Applied::default())
}

/// A query of the `Any` driver, as the job insert and the batch delta build them.
type AnyQuery<'q> = sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments>;

/// Binds `counts` one after the other: a job's counters are columns in a fixed order
/// (W/D/L, the pentanomial's five, the over-the-board nine), written alike by the job
/// insert and the batch delta.
fn bind_counts<'q>(query: AnyQuery<'q>, counts: impl IntoIterator<Item = i64>) -> AnyQuery<'q> {
    counts.into_iter().fold(query, |query, count| query.bind(count))
}

/// The over-the-board columns' values in their order: `board_penta0..4`,
/// `ruled_wins_new`, `ruled_wins_base`, `forfeit_wins_new`, `forfeit_wins_base`.
fn board_columns(counts: &OverTheBoard) -> impl Iterator<Item = i64> {
    counts.pentanomial.into_iter().chain(counts.ruled_wins).chain(counts.forfeit_wins)
}

/// What a batch's new units add to a job.
#[derive(Debug, Default)]
struct JobDelta {
    units: i64,
    wdl: [i64; 3],
    penta: [i64; 5],
    over_the_board: OverTheBoard,
    positions: i64,
    reasons: HashMap<String, i64>,
}

impl JobDelta {
    /// Counts a unit (`sign` 1) or takes it off (`sign` -1).
    pub(super) fn count(&mut self, by_records: bool, points: [i64; 2], records: i64, reasons: &[String], sign: i64) {
        self.units += sign;
        if by_records {
            self.positions += sign * records;
            return;
        }
        let (games, pair) = slots(points);
        for game in games {
            self.wdl[game] += sign;
        }
        self.penta[pair] += sign;
        self.over_the_board.count(points, reasons, sign);
        for reason in reasons {
            *self.reasons.entry(reason.clone()).or_default() += sign;
        }
    }
}

/// The row counts of the multi-row inserts. A batch goes in as statements of the
/// largest size, then one statement for the rest, of the smallest size that holds it,
/// padded with copies of its last row (the copies conflict with it and are skipped).
/// So only a few statement shapes exist and each stays prepared in the connection's
/// cache (a new shape per batch size would be parsed and planned every time), and a
/// batch takes one round trip per 256 rows (cutting it into exact sizes took up to a
/// dozen, each a round trip to PostgreSQL).
const INSERT_SIZES: [usize; 9] = [1, 2, 4, 8, 16, 32, 64, 128, 256];

/// `INSERT INTO units ... VALUES` with `rows` rows of placeholders. The Any driver
/// leaves placeholders to the SQL. PostgreSQL needs them numbered (`$n`); SQLite gets
/// anonymous ones (`?`), because sqlx's SQLite driver looks each numbered parameter up
/// by name in a list as long as the statement's parameters, which made a statement's
/// binding grow with the square of its rows.
fn units_insert(dialect: Dialect, rows: usize) -> String {
    const UNIT_COLUMNS: usize = 14;
    let mut sql = String::from(
        "INSERT INTO units (job_id, unit, lease_id, worker_id, first_points, second_points, reasons, records, \
         file, file_offset, length, created_ms, cpu_ms, games) VALUES ",
    );
    for index in 0..rows {
        let first = index * UNIT_COLUMNS;
        let placeholders: Vec<String> = match dialect {
            Dialect::Sqlite => vec!["?".to_owned(); UNIT_COLUMNS],
            Dialect::Postgres => (first + 1..=first + UNIT_COLUMNS).map(|n| format!("${n}")).collect(),
        };
        sql.push_str(if index == 0 { "(" } else { ", (" });
        sql.push_str(&placeholders.join(", "));
        sql.push(')');
    }
    sql.push_str(" ON CONFLICT (job_id, unit) DO NOTHING RETURNING job_id, unit, lease_id");
    sql
}

/// The statements of [`INSERT_SIZES`] in `dialect`, built once.
fn units_inserts(dialect: Dialect) -> &'static [String; INSERT_SIZES.len()] {
    static STATEMENTS: std::sync::OnceLock<[[String; INSERT_SIZES.len()]; 2]> = std::sync::OnceLock::new();
    let [sqlite, postgres] = STATEMENTS.get_or_init(|| {
        [Dialect::Sqlite, Dialect::Postgres].map(|dialect| INSERT_SIZES.map(|rows| units_insert(dialect, rows)))
    });
    match dialect {
        Dialect::Sqlite => sqlite,
        Dialect::Postgres => postgres,
    }
}

/// A unit row with the ids it is stored under.
struct Keyed<'a> {
    job_id: i64,
    lease_id: i64,
    worker_id: i64,
    by_records: bool,
    row: &'a UnitRow,
}

/// Inserts unit rows in multi-row statements, skipping those already stored (a resend,
/// or a unit a re-issued lease also played); returns the (job, unit, lease) keys of
/// the rows that went in, and adds what they count to their jobs' deltas.
async fn insert_units(
    conn: &mut AnyConnection,
    dialect: Dialect,
    rows: &[Keyed<'_>],
    deltas: &mut std::collections::BTreeMap<i64, JobDelta>,
) -> Result<std::collections::HashSet<(i64, u64, i64)>, StorageError> {
    let mut inserted = std::collections::HashSet::new();
    let largest = INSERT_SIZES.len() - 1;
    for chunk in rows.chunks(INSERT_SIZES[largest]) {
        let shape = INSERT_SIZES.iter().position(|&size| size >= chunk.len()).unwrap_or(largest);
        let sql = units_inserts(dialect)[shape].as_str();
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
        let last = chunk.last().expect("chunks are not empty");
        for keyed in chunk.iter().chain(std::iter::repeat_n(last, INSERT_SIZES[shape] - chunk.len())) {
            let row = keyed.row;
            query = query
                .bind(keyed.job_id)
                .bind(row.unit as i64)
                .bind(keyed.lease_id)
                .bind(keyed.worker_id)
                .bind(row.points[0])
                .bind(row.points[1])
                .bind(row.reasons.join("|"))
                .bind(row.records)
                .bind(row.file.clone())
                .bind(row.offset)
                .bind(row.length)
                .bind(row.created_ms)
                .bind(row.cpu_ms)
                .bind(row.games);
        }
        for returned in query.fetch_all(&mut *conn).await? {
            let key: (i64, i64, i64) = (returned.try_get(0)?, returned.try_get(1)?, returned.try_get(2)?);
            inserted.insert((key.0, key.1 as u64, key.2));
        }
    }
    // Each row that went in counts once, even if the batch carried copies of it.
    let mut uncounted = inserted.clone();
    for keyed in rows.iter().filter(|k| uncounted.remove(&(k.job_id, k.row.unit, k.lease_id))) {
        let row = keyed.row;
        deltas.entry(keyed.job_id).or_default().count(keyed.by_records, row.points, row.records, &row.reasons, 1);
    }
    Ok(inserted)
}

/// Moves a worker's units of a job to `set_aside_units` and takes them off the job's
/// counts.
pub(super) async fn set_aside_units(
    conn: &mut AnyConnection,
    job_id: i64,
    worker_id: i64,
    now: i64,
) -> Result<Vec<SetAside>, StorageError> {
    let kind: String =
        sqlx::query("SELECT kind FROM jobs WHERE id = $1").bind(job_id).fetch_one(&mut *conn).await?.try_get(0)?;
    let by_records = matches!(kind.as_str(), "selfplay" | "verify");
    let rows = sqlx::query(
        "SELECT unit, first_points, second_points, records, reasons FROM units WHERE job_id = $1 AND worker_id = $2",
    )
    .bind(job_id)
    .bind(worker_id)
    .fetch_all(&mut *conn)
    .await?;
    if rows.is_empty() {
        return Ok(Vec::new());
    }
    const COLUMNS: &str = "job_id, unit, lease_id, worker_id, first_points, second_points, reasons, records, file, \
                           file_offset, length, created_ms, cpu_ms, games";
    let copy = format!(
        "INSERT INTO set_aside_units ({COLUMNS}, set_aside_ms) SELECT {COLUMNS}, $1 FROM units \
         WHERE job_id = $2 AND worker_id = $3 ON CONFLICT DO NOTHING"
    );
    sqlx::query(sqlx::AssertSqlSafe(copy)).bind(now).bind(job_id).bind(worker_id).execute(&mut *conn).await?;
    sqlx::query("DELETE FROM units WHERE job_id = $1 AND worker_id = $2")
        .bind(job_id)
        .bind(worker_id)
        .execute(&mut *conn)
        .await?;
    // Their re-checks with them: each unit is verified and drawn again.
    sqlx::query("DELETE FROM rechecks WHERE job_id = $1 AND first_worker_id = $2")
        .bind(job_id)
        .bind(worker_id)
        .execute(&mut *conn)
        .await?;
    let mut delta = JobDelta::default();
    let mut set_aside = Vec::with_capacity(rows.len());
    for row in &rows {
        let reasons: String = row.try_get("reasons")?;
        let unit = SetAside {
            job_id,
            unit: row.try_get::<i64, _>("unit")? as u64,
            points: [row.try_get("first_points")?, row.try_get("second_points")?],
            records: row.try_get("records")?,
            reasons: if reasons.is_empty() { Vec::new() } else { reasons.split('|').map(str::to_owned).collect() },
        };
        delta.count(by_records, unit.points, unit.records, &unit.reasons, -1);
        set_aside.push(unit);
    }
    add_to_job(conn, job_id, &delta).await?;
    Ok(set_aside)
}

/// Adds a batch's new units to their job's counters (or takes set-aside ones off): one
/// update per job per batch.
async fn add_to_job(conn: &mut AnyConnection, job_id: i64, delta: &JobDelta) -> Result<(), StorageError> {
    let stored: String =
        sqlx::query("SELECT reasons FROM jobs WHERE id = $1").bind(job_id).fetch_one(&mut *conn).await?.try_get(0)?;
    let mut reasons: HashMap<String, u64> =
        serde_json::from_str(&stored).map_err(|e| StorageError::Damaged(format!("job reasons: {e}")))?;
    for (reason, &count) in &delta.reasons {
        let total = reasons.entry(reason.clone()).or_default();
        *total = total.saturating_add_signed(count);
        if *total == 0 {
            reasons.remove(reason);
        }
    }
    let query = sqlx::query(
        "UPDATE jobs SET units_done = units_done + $1, wins = wins + $2, draws = draws + $3, losses = losses + $4, \
         penta0 = penta0 + $5, penta1 = penta1 + $6, penta2 = penta2 + $7, penta3 = penta3 + $8, \
         penta4 = penta4 + $9, positions = positions + $10, reasons = $11, updated_ms = $12, \
         board_penta0 = board_penta0 + $13, board_penta1 = board_penta1 + $14, board_penta2 = board_penta2 + $15, \
         board_penta3 = board_penta3 + $16, board_penta4 = board_penta4 + $17, \
         ruled_wins_new = ruled_wins_new + $18, ruled_wins_base = ruled_wins_base + $19, \
         forfeit_wins_new = forfeit_wins_new + $20, forfeit_wins_base = forfeit_wins_base + $21 WHERE id = $22",
    )
    .bind(delta.units);
    let query = bind_counts(bind_counts(query, delta.wdl), delta.penta)
        .bind(delta.positions)
        .bind(serde_json::to_string(&reasons).expect("a map of strings serialises"))
        .bind(now_ms());
    bind_counts(query, board_columns(&delta.over_the_board)).bind(job_id).execute(&mut *conn).await?;
    Ok(())
}

/// Applies `changes` in one transaction: the other changes in order, then every unit
/// row at once, then one counter update per job. With a write timeout, a transaction
/// not done within it fails with [`StorageError::TimedOut`]; whether it committed is
/// then unknown (its COMMIT may have reached the server), as after any connection lost
/// while committing.
pub async fn apply_all(storage: &Storage, changes: &[&Change]) -> Result<Vec<Applied>, StorageError> {
    let mut conn = storage.pool.acquire().await?;
    let transaction = apply_in_transaction(&mut conn, storage.dialect, changes);
    let applied = match storage.write_timeout {
        None => transaction.await,
        Some(timeout) => match tokio::time::timeout(timeout, transaction).await {
            Ok(applied) => applied,
            Err(_) => {
                // A graceful close would wait on the silent peer as the transaction
                // did, holding the pool's only place meanwhile: the socket is dropped
                // instead, and the server rolls back when it hears of it, or at its
                // idle-in-transaction timeout.
                drop(conn.detach());
                return Err(StorageError::TimedOut(timeout));
            }
        },
    };
    if applied.is_err() {
        // A failed transaction can leave the connection inside a transaction sqlx no
        // longer knows of: on a full disk SQLite rolls back by itself, sqlx's own
        // ROLLBACK then fails and its transaction depth stays up, so every later
        // "commit" on the connection only released a savepoint of a transaction that
        // was never committed (the disk drill lost acknowledged results so). Such a
        // connection is closed, never reused.
        conn.close_on_drop();
    }
    applied
}

async fn apply_in_transaction(
    conn: &mut AnyConnection,
    dialect: Dialect,
    changes: &[&Change],
) -> Result<Vec<Applied>, StorageError> {
    let mut tx = conn.begin().await?;
    let mut results = Vec::with_capacity(changes.len());
    let mut rows = Vec::new();
    for change in changes {
        match change {
            Change::Units { job_id, lease_id, worker_id, by_records, rows: units } => {
                rows.extend(units.iter().map(|row| Keyed {
                    job_id: *job_id,
                    lease_id: *lease_id,
                    worker_id: *worker_id,
                    by_records: *by_records,
                    row,
                }));
                results.push(Applied::default());
            }
            other => results.push(apply(&mut tx, other).await?),
        }
    }
    let mut deltas = std::collections::BTreeMap::new();
    let inserted = insert_units(&mut tx, dialect, &rows, &mut deltas).await?;
    for (job_id, delta) in &deltas {
        add_to_job(&mut tx, *job_id, delta).await?;
    }
    tx.commit().await?;
    // A row that went in is new for the first change that carried it; a copy in a
    // later change (a resend racing the original) is not.
    let mut inserted = inserted;
    for (change, applied) in changes.iter().zip(&mut results) {
        if let Change::Units { job_id, lease_id, rows, .. } = change {
            applied.new_units =
                rows.iter().map(|r| r.unit).filter(|u| inserted.remove(&(*job_id, *u, *lease_id))).collect();
        }
    }
    Ok(results)
}
