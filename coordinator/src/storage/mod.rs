//! The database: one schema and one code path for SQLite (embedded, the default) and
//! PostgreSQL (a fleet), through sqlx's `Any` driver. Everything the coordinator must
//! not lose is written here by the [`crate::storage::writer`]; at start the scheduler's state is
//! loaded back from it.

pub mod artifacts;
pub mod books;
pub mod counts;
pub mod disk;
pub mod durable;
pub mod layout;
pub mod writer;

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sqlx::any::AnyPoolOptions;
use sqlx::{AnyConnection, AnyPool, Connection, Executor, Row};

use xq_proto::v1;
use xq_stats::conduct::Leases;

use crate::storage::counts::{OverTheBoard, add_points, slots};

/// The database cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// A query failed.
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
    /// The schema could not be brought up to date.
    #[error("database migration: {0}")]
    Migration(#[from] sqlx::migrate::MigrateError),
    /// A stored value does not read back.
    #[error("stored data is damaged: {0}")]
    Damaged(String),
    /// The writer's threads could not be started.
    #[error("starting the writer: {0}")]
    WriterThread(std::io::Error),
    /// The database did not answer a write within the write timeout.
    #[error("database: no answer within {0:?}")]
    TimedOut(Duration),
    /// The database URL's `write_timeout_ms` is not a positive number of milliseconds.
    #[error("database URL: write_timeout_ms={0} is not a positive number of milliseconds")]
    WriteTimeout(String),
}

impl StorageError {
    /// Whether the database failed rather than the change: it could not be reached,
    /// did not answer, or is shutting down (PostgreSQL's connection exceptions, class
    /// 08, and operator interventions, class 57, which include its statement timeout).
    /// Any other change would fail the same way now.
    pub fn is_unreachable(&self) -> bool {
        match self {
            StorageError::TimedOut(_) => true,
            StorageError::Database(
                sqlx::Error::Io(_)
                | sqlx::Error::Tls(_)
                | sqlx::Error::Protocol(_)
                | sqlx::Error::PoolTimedOut
                | sqlx::Error::PoolClosed
                | sqlx::Error::WorkerCrashed,
            ) => true,
            StorageError::Database(sqlx::Error::Database(error)) => error
                .try_downcast_ref::<sqlx::postgres::PgDatabaseError>()
                .is_some_and(|error| error.code().starts_with("08") || error.code().starts_with("57")),
            _ => false,
        }
    }
}

/// The parameter of a PostgreSQL URL, the coordinator's own (taken out before sqlx
/// reads the URL), that sets [`WRITE_TIMEOUT`] in milliseconds:
/// `postgres://host/db?write_timeout_ms=2000`.
pub const WRITE_TIMEOUT_PARAMETER: &str = "write_timeout_ms";

/// How long PostgreSQL has, by default, to answer a write: to give the writer a
/// connection, and to run a whole batch's transaction. A database that stops answering
/// (a partition, a black-holed route, a hung server) otherwise holds every write until
/// the kernel gives up on the connection, about 15 minutes, while workers wait with
/// their reports. A healthy batch of the largest size commits in well under a second.
/// sqlx sets no TCP keepalive or user timeout on its sockets, so the bound is kept
/// here, per transaction, and told to the server too.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// `url` without the coordinator's own parameter, and the write timeout it names
/// (PostgreSQL only: SQLite's writes wait for a disk, not a peer, and keep no bound).
fn split_write_timeout(url: &str) -> Result<(String, Option<Duration>), StorageError> {
    if Dialect::of(url) == Dialect::Sqlite {
        return Ok((url.to_owned(), None));
    }
    let Some((base, query)) = url.split_once('?') else { return Ok((url.to_owned(), Some(WRITE_TIMEOUT))) };
    let mut timeout = WRITE_TIMEOUT;
    let mut kept = Vec::new();
    for pair in query.split('&') {
        match pair.split_once('=') {
            Some((WRITE_TIMEOUT_PARAMETER, value)) => {
                timeout = value
                    .parse()
                    .ok()
                    .filter(|&ms| ms > 0)
                    .map(Duration::from_millis)
                    .ok_or_else(|| StorageError::WriteTimeout(value.to_owned()))?;
            }
            _ => kept.push(pair),
        }
    }
    let url = if kept.is_empty() { base.to_owned() } else { format!("{base}?{}", kept.join("&")) };
    Ok((url, Some(timeout)))
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// The database URL of the embedded SQLite file in `data_dir`.
pub fn sqlite_url(data_dir: &Path) -> String {
    format!("sqlite://{}?mode=rwc", data_dir.join("coordinator.sqlite").display())
}

/// A pool of connections to the coordinator's database.
#[derive(Clone, Debug)]
pub struct Storage {
    pool: AnyPool,
    dialect: Dialect,
    url: String,
    /// How long the database has to answer a write; none on SQLite.
    write_timeout: Option<Duration>,
}

/// Where the two databases' SQL differs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dialect {
    Sqlite,
    Postgres,
}

impl Dialect {
    /// The dialect of a database URL (anything not SQLite is PostgreSQL, the other
    /// database the migrations are written for).
    fn of(url: &str) -> Self {
        if url.starts_with("sqlite:") { Dialect::Sqlite } else { Dialect::Postgres }
    }
}

/// A job's counters as its unit rows give them ([`Storage::recount`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Recount {
    /// Units stored.
    pub units: u64,
    /// Wins, draws, losses of the new engine.
    pub wdl: [u64; 3],
    pub pentanomial: [u64; 5],
    pub over_the_board: OverTheBoard,
}

/// A job row.
#[derive(Clone, Debug, PartialEq)]
pub struct JobRow {
    pub id: i64,
    pub kind: String,
    pub state: String,
    pub outcome: String,
    pub description: String,
    pub priority: i64,
    /// The creation request, protobuf in hex.
    pub spec: String,
    pub units_total: i64,
    pub next_unit: i64,
    pub units_done: i64,
    /// Wins, draws, losses of the new engine.
    pub wdl: [i64; 3],
    pub pentanomial: [i64; 5],
    /// The pairs and wins of a match as the board alone decided them.
    pub over_the_board: OverTheBoard,
    pub positions: i64,
    pub reasons: HashMap<String, u64>,
    pub created_ms: i64,
    /// The id of the token that created it.
    pub submitter: String,
    /// When its games or training data were removed under the retention settings (0:
    /// still stored).
    pub data_removed_ms: i64,
    /// The client's name for the request that created it (empty: none given) and the
    /// request's SHA-256: a retry of the creation finds this job.
    pub request_id: String,
    pub request_digest: String,
}

/// A lease row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseRow {
    pub id: i64,
    pub job_id: i64,
    pub worker_id: i64,
    pub units: Vec<u64>,
    pub state: String,
    /// An SPSA lease's probe (see `crate::jobs::spsa`); empty for other jobs.
    pub probe: String,
}

/// A worker row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkerRow {
    pub id: i64,
    pub name: String,
    /// The last Capabilities message, protobuf in hex.
    pub capabilities: String,
    pub last_seen_ms: i64,
    /// 'active', 'disabled' or 'quarantined'.
    pub standing: String,
    /// Why, when not active.
    pub standing_reason: String,
}

/// A token row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenRow {
    pub hash: String,
    /// 'admin', 'submitter' or 'worker'.
    pub role: String,
    pub worker_id: Option<i64>,
    /// Who or what it is for.
    pub name: String,
    pub created_ms: i64,
    /// 0: never.
    pub expires_ms: i64,
    /// 0: not revoked.
    pub revoked_ms: i64,
}

/// One entry of the audit log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuditRow {
    pub at_ms: i64,
    /// The acting token's id, or 'coordinator'.
    pub actor: String,
    pub action: String,
    pub detail: String,
}

/// A finished unit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnitRow {
    pub unit: u64,
    /// The new engine's half points in the first and second game (0 for self-play).
    pub points: [i64; 2],
    /// The two games' endings.
    pub reasons: [String; 2],
    /// Self-play positions.
    pub records: i64,
    /// The pair's games as PGN, which the writer appends to the job's games file
    /// (filling `file`, `offset` and `length`); empty for self-play.
    pub pgn: String,
    pub file: String,
    pub offset: i64,
    pub length: i64,
    /// When it counted, in milliseconds since the Unix epoch: set by the scheduler,
    /// so that the course it keeps in memory and the one read back agree.
    pub created_ms: i64,
}

/// Where a stored unit's bytes are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnitFile {
    pub unit: u64,
    pub file: String,
    pub offset: u64,
    pub length: u64,
}

/// A tournament ([`crate::jobs::tournament`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TournamentRow {
    pub id: i64,
    /// The creation request, protobuf in hex.
    pub spec: String,
    /// Its pairings' match tests, in pairing order.
    pub job_ids: Vec<u64>,
    pub created_ms: i64,
    /// When it was stopped as a whole (0: it was not).
    pub stopped_ms: i64,
    /// The client's name for the request that created it (empty: none given) and the
    /// request's SHA-256: a retry of the creation finds this event.
    pub request_id: String,
    pub request_digest: String,
}

/// A net of the registry ([`crate::nets`]).
#[derive(Clone, Debug, PartialEq)]
pub struct NetRow {
    pub id: i64,
    pub sha256: String,
    pub name: String,
    pub size: i64,
    pub lineage: String,
    pub generation: i64,
    /// 0: the handcrafted evaluation.
    pub parent_id: i64,
    pub data_job_id: i64,
    /// 0: not tested yet.
    pub test_job_id: i64,
    pub train_loss: f64,
    pub validation_loss: f64,
    pub positions: i64,
    pub epochs: i64,
    pub description: String,
    pub created_ms: i64,
    /// The token id of the user who recorded it; the lineage's owner is its first
    /// net's. Empty: recorded before owners were kept.
    pub owner: String,
}

/// The net columns, as a literal so that queries stay literal SQL.
macro_rules! net_columns {
    () => {
        "id, sha256, name, size, lineage, generation, parent_id, data_job_id, test_job_id, train_loss, \
         validation_loss, positions, epochs, description, created_ms, owner"
    };
}

fn net_from_row(row: &sqlx::any::AnyRow) -> Result<NetRow, sqlx::Error> {
    Ok(NetRow {
        id: row.try_get("id")?,
        sha256: row.try_get("sha256")?,
        name: row.try_get("name")?,
        size: row.try_get("size")?,
        lineage: row.try_get("lineage")?,
        generation: row.try_get("generation")?,
        parent_id: row.try_get("parent_id")?,
        data_job_id: row.try_get("data_job_id")?,
        test_job_id: row.try_get("test_job_id")?,
        train_loss: row.try_get("train_loss")?,
        validation_loss: row.try_get("validation_loss")?,
        positions: row.try_get("positions")?,
        epochs: row.try_get("epochs")?,
        description: row.try_get("description")?,
        created_ms: row.try_get("created_ms")?,
        owner: row.try_get("owner")?,
    })
}

/// A counted unit of a running job, as the scheduler needs it at start.
#[derive(Clone, Copy, Debug)]
pub struct DoneUnit {
    pub unit: u64,
    /// The lease that stored it, and its worker.
    pub lease_id: i64,
    pub worker_id: i64,
    /// The new engine's half points per game (0 for self-play).
    pub points: [i64; 2],
    pub created_ms: i64,
    /// Its games that ended by an engine's failure.
    pub abandoned: u64,
}

/// Everything the scheduler needs at start.
#[derive(Debug, Default)]
pub struct Snapshot {
    pub tokens: Vec<TokenRow>,
    pub workers: Vec<WorkerRow>,
    pub jobs: Vec<JobRow>,
    /// Leases still active when the coordinator stopped.
    pub active_leases: Vec<LeaseRow>,
    /// The highest lease id ever given.
    pub max_lease_id: i64,
    /// Finished units of running jobs and of SPSA jobs, in the order they counted.
    pub done_units: HashMap<i64, Vec<DoneUnit>>,
    /// SPSA jobs' probes: by job, each lease's id and probe.
    pub probes: HashMap<i64, Vec<(i64, String)>>,
    /// Units counted per worker.
    pub worker_units: HashMap<i64, u64>,
    /// How each worker's leases ended: expired, or every unit reported.
    pub worker_leases: HashMap<i64, Leases>,
    /// The net registry, by id.
    pub nets: Vec<NetRow>,
    /// The tournaments, by id.
    pub tournaments: Vec<TournamentRow>,
    /// Verification jobs' suspects: by job, each worker held suspect with the unit its
    /// false report was of and why.
    pub suspicions: HashMap<i64, Vec<Suspicion>>,
    /// Verification jobs' pending re-checks of a reference's verdicts, by job.
    pub rechecks: HashMap<i64, Vec<Recheck>>,
}

/// A worker held suspect in a verification job: a spot check found its report of
/// `unit` false, for `reason`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Suspicion {
    pub worker_id: i64,
    pub unit: u64,
    pub reason: String,
}

/// A unit of a verification job with a reference whose counted report, by
/// `first_worker`, another worker reports again so that the reference's verdicts are
/// checked; when that second report gives them otherwise, its worker and where it is
/// stored, until a third worker's report settles it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recheck {
    pub unit: u64,
    pub first_worker: i64,
    /// 0 until a second report disagreed.
    pub second_worker: i64,
    /// The disagreeing second report's file, under the data directory.
    pub second_file: String,
}

/// How many of a unit's games' reasons say an engine failed.
pub fn abandoned_games<'a>(reasons: impl IntoIterator<Item = &'a str>) -> u64 {
    reasons.into_iter().filter(|reason| *reason == ABANDONED).count() as u64
}

/// The reason of a game ended by an engine's failure (its PGN termination).
const ABANDONED: &str = "abandoned";

fn units_text(units: &[u64]) -> String {
    units.iter().map(u64::to_string).collect::<Vec<_>>().join(",")
}

fn parse_units(text: &str) -> Result<Vec<u64>, StorageError> {
    if text.is_empty() {
        return Ok(Vec::new());
    }
    text.split(',')
        .map(|u| u.parse().map_err(|_| StorageError::Damaged(format!("a list of numbers '{text}'"))))
        .collect()
}

/// The job columns, as a literal so that queries stay literal SQL.
macro_rules! job_columns {
    () => {
        "id, kind, state, outcome, description, priority, spec, units_total, next_unit, units_done, \
         wins, draws, losses, penta0, penta1, penta2, penta3, penta4, positions, reasons, created_ms, submitter, \
         data_removed_ms, request_id, request_digest, board_penta0, board_penta1, board_penta2, board_penta3, \
         board_penta4, ruled_wins_new, ruled_wins_base"
    };
}

fn job_from_row(row: &sqlx::any::AnyRow) -> Result<JobRow, StorageError> {
    let reasons: String = row.try_get("reasons")?;
    Ok(JobRow {
        id: row.try_get("id")?,
        kind: row.try_get("kind")?,
        state: row.try_get("state")?,
        outcome: row.try_get("outcome")?,
        description: row.try_get("description")?,
        priority: row.try_get("priority")?,
        spec: row.try_get("spec")?,
        units_total: row.try_get("units_total")?,
        next_unit: row.try_get("next_unit")?,
        units_done: row.try_get("units_done")?,
        wdl: [row.try_get("wins")?, row.try_get("draws")?, row.try_get("losses")?],
        pentanomial: [
            row.try_get("penta0")?,
            row.try_get("penta1")?,
            row.try_get("penta2")?,
            row.try_get("penta3")?,
            row.try_get("penta4")?,
        ],
        over_the_board: OverTheBoard {
            pentanomial: [
                row.try_get("board_penta0")?,
                row.try_get("board_penta1")?,
                row.try_get("board_penta2")?,
                row.try_get("board_penta3")?,
                row.try_get("board_penta4")?,
            ],
            ruled_wins: [row.try_get("ruled_wins_new")?, row.try_get("ruled_wins_base")?],
        },
        positions: row.try_get("positions")?,
        reasons: serde_json::from_str(&reasons).map_err(|e| StorageError::Damaged(format!("job reasons: {e}")))?,
        created_ms: row.try_get("created_ms")?,
        submitter: row.try_get("submitter")?,
        data_removed_ms: row.try_get("data_removed_ms")?,
        request_id: row.try_get("request_id")?,
        request_digest: row.try_get("request_digest")?,
    })
}

impl Storage {
    /// Connects to `url` (`sqlite://...` or `postgres://...`) and brings the schema up
    /// to date. SQLite runs in WAL mode with full synchronisation: a commit is on disk
    /// when it returns.
    pub async fn open(url: &str) -> Result<Self, StorageError> {
        let (url, write_timeout) = split_write_timeout(url)?;
        let dialect = Dialect::of(&url);
        let connections = match dialect {
            Dialect::Sqlite => 4,
            Dialect::Postgres => 8,
        };
        // No server-side bound on this pool: it runs the migrations and the reads at
        // start, which may rightly take long on a large database.
        let pool = Self::connect(&url, dialect, connections, None).await?;
        sqlx::migrate!("./migrations").run(&pool).await?;
        Ok(Storage { pool, dialect, url, write_timeout })
    }

    /// The writer's own pool of one connection to the same database, made on the
    /// calling runtime (a connection's I/O is driven by the runtime that made it). On
    /// PostgreSQL its writes are bounded by the write timeout.
    pub async fn for_writes(&self) -> Result<Self, StorageError> {
        let pool = Self::connect(&self.url, self.dialect, 1, self.write_timeout).await?;
        Ok(Storage { pool, dialect: self.dialect, url: self.url.clone(), write_timeout: self.write_timeout })
    }

    /// A pool of `connections`; with a `write_timeout`, its connections get one within
    /// it, and the server ends its statements, and its sessions left idle inside a
    /// transaction, after it: a session whose client gave up on a dead route would
    /// otherwise hold its rows' locks against the next writer until the server's own
    /// TCP keepalive notices, two hours by default.
    async fn connect(
        url: &str,
        dialect: Dialect,
        connections: u32,
        write_timeout: Option<Duration>,
    ) -> Result<AnyPool, StorageError> {
        sqlx::any::install_default_drivers();
        let pool = AnyPoolOptions::new()
            .max_connections(connections)
            // A database that went away fails a write within seconds, so that workers
            // hear Unavailable and send again, instead of waiting sqlx's 30 s (a new
            // connection to a silent peer, or the ping of an idle one, waits this long).
            .acquire_timeout(write_timeout.unwrap_or(Duration::from_secs(5)))
            .after_connect(move |conn, _| {
                Box::pin(async move {
                    if dialect == Dialect::Sqlite {
                        conn.execute("PRAGMA journal_mode = WAL").await?;
                        conn.execute("PRAGMA synchronous = FULL").await?;
                        conn.execute("PRAGMA busy_timeout = 10000").await?;
                    }
                    if let Some(timeout) = write_timeout {
                        let ms = timeout.as_millis();
                        conn.execute(sqlx::AssertSqlSafe(format!(
                            "SET statement_timeout = {ms}; SET idle_in_transaction_session_timeout = {ms}"
                        )))
                        .await?;
                    }
                    Ok(())
                })
            })
            .connect(url)
            .await?;
        Ok(pool)
    }

    /// The pool, for reads.
    pub fn pool(&self) -> &AnyPool {
        &self.pool
    }

    /// Reads what the scheduler needs at start.
    pub async fn load(&self) -> Result<Snapshot, StorageError> {
        let mut snapshot = Snapshot { tokens: self.tokens().await?, ..Snapshot::default() };
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
        for row in sqlx::query("SELECT id, job_id, worker_id, units, state, probe FROM leases WHERE state = 'active'")
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
            let rows = sqlx::query(
                "SELECT unit, lease_id, worker_id, first_points, second_points, created_ms, reasons FROM units \
                 WHERE job_id = $1 ORDER BY created_ms, unit",
            )
            .bind(job.id)
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
            snapshot.done_units.insert(job.id, units);
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
            "SELECT hash, role, worker_id, name, created_ms, expires_ms, revoked_ms FROM tokens ORDER BY created_ms",
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

    /// Finished or stopped jobs whose data is still stored and whose last change is
    /// older than `games_before_ms` (matches) or `data_before_ms` (self-play); a bound
    /// of 0 selects none of its kind.
    pub async fn jobs_past_retention(
        &self,
        games_before_ms: i64,
        data_before_ms: i64,
    ) -> Result<Vec<i64>, StorageError> {
        let rows = sqlx::query(
            "SELECT id FROM jobs WHERE state IN ('finished', 'stopped') AND data_removed_ms = 0 \
             AND ((kind = 'selfplay' AND updated_ms < $1) OR (kind <> 'selfplay' AND updated_ms < $2)) ORDER BY id",
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

    /// Whether an artifact is indexed.
    pub async fn artifact(&self, sha256: &str) -> Result<Option<(String, String, u64)>, StorageError> {
        let row = sqlx::query("SELECT name, kind, size FROM artifacts WHERE sha256 = $1")
            .bind(sha256)
            .fetch_optional(&self.pool)
            .await?;
        row.map(|r| Ok((r.try_get("name")?, r.try_get("kind")?, r.try_get::<i64, _>("size")? as u64))).transpose()
    }
}

/// One durable change. The writer applies many in one transaction.
#[derive(Clone, Debug)]
pub enum Change {
    Token(TokenRow),
    /// Revokes a token (its row stays, for the lists).
    RevokeToken {
        hash: String,
        at_ms: i64,
    },
    Audit(AuditRow),
    /// Inserts or updates a worker.
    Worker(WorkerRow),
    /// An artifact uploaded (again: its upload time is renewed, its first uploader kept).
    Artifact {
        sha256: String,
        name: String,
        kind: String,
        size: i64,
        uploader: String,
    },
    /// An artifact collected: no job or net names it.
    ArtifactRemoved {
        sha256: String,
    },
    NewJob(Box<JobRow>),
    /// A finished job's stored games or training data were removed at `at_ms`.
    DataRemoved {
        job_id: i64,
        at_ms: i64,
    },
    JobState {
        id: i64,
        state: String,
        outcome: String,
        priority: i64,
    },
    /// A new lease; moves the job's `next_unit` forward.
    NewLease {
        lease: LeaseRow,
        next_unit: i64,
    },
    LeaseState {
        id: i64,
        state: String,
    },
    /// Inserts a net, or updates the one with its id (only its test can change).
    Net(Box<NetRow>),
    /// Inserts a tournament (with its first tests, in a [`Change::Together`]).
    Tournament(TournamentRow),
    /// A Swiss event's or knockout's tests after a round was added (with the round's
    /// tests, in a [`Change::Together`]).
    TournamentJobs {
        id: i64,
        job_ids: Vec<u64>,
    },
    /// A worker held suspect in job `job_id` (see [`Suspicion`]).
    Suspicion {
        job_id: i64,
        suspicion: Suspicion,
    },
    /// A worker's suspicions in a job settled: its quarantine follows.
    SuspicionsSettled {
        job_id: i64,
        worker_id: i64,
    },
    /// A re-check of a reference's verdicts drawn, or its second report stored (see
    /// [`Recheck`]).
    Recheck {
        job_id: i64,
        recheck: Recheck,
    },
    /// A re-check settled: the reports agreed, or a third decided between them.
    RecheckSettled {
        job_id: i64,
        unit: u64,
    },
    /// A tournament stopped as a whole.
    TournamentStopped {
        id: i64,
        at_ms: i64,
    },
    /// A worker's new standing; its units of `set_aside_jobs` move to `set_aside_units`
    /// and off those jobs' counts.
    WorkerStanding {
        worker_id: i64,
        standing: String,
        reason: String,
        set_aside_jobs: Vec<i64>,
    },
    /// Changes that stand or fall together: applied in one transaction even when the
    /// batch that carries them is retried change by change, so that a crash or a
    /// refusal leaves all of them or none (a tournament and its tests). Never unit
    /// rows, which a batch inserts at its end.
    Together(Vec<Change>),
    /// Finished units of a lease; those already stored are skipped. Units counted
    /// `by_records` (self-play positions, verified games) add their records to the
    /// job's positions, match units game results.
    Units {
        job_id: i64,
        lease_id: i64,
        worker_id: i64,
        by_records: bool,
        rows: Vec<UnitRow>,
    },
}

/// What a change did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Applied {
    /// For [`Change::Units`]: the units that were new.
    pub new_units: Vec<u64>,
    /// For [`Change::WorkerStanding`]: the units set aside.
    pub set_aside: Vec<SetAside>,
}

/// A unit taken off its job's counts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SetAside {
    pub job_id: i64,
    pub unit: u64,
    pub points: [i64; 2],
    pub records: i64,
    pub reasons: Vec<String>,
}

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
                "INSERT INTO tokens (hash, role, worker_id, created_ms, name, expires_ms, revoked_ms) \
                 VALUES ($1, $2, $3, $4, $5, $6, 0)",
            )
            .bind(&token.hash)
            .bind(&token.role)
            .bind(token.worker_id)
            .bind(token.created_ms)
            .bind(&token.name)
            .bind(token.expires_ms)
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
                 $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31, $32, $33)"
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
            bind_counts(query, board_columns(&job.over_the_board)).bind(now).execute(&mut *conn).await?;
        }
        Change::DataRemoved { job_id, at_ms } => {
            sqlx::query("UPDATE jobs SET data_removed_ms = $1 WHERE id = $2")
                .bind(at_ms)
                .bind(job_id)
                .execute(&mut *conn)
                .await?;
        }
        Change::JobState { id, state, outcome, priority } => {
            sqlx::query("UPDATE jobs SET state = $1, outcome = $2, priority = $3, updated_ms = $4 WHERE id = $5")
                .bind(state)
                .bind(outcome)
                .bind(priority)
                .bind(now)
                .bind(id)
                .execute(&mut *conn)
                .await?;
        }
        Change::NewLease { lease, next_unit } => {
            sqlx::query(
                "INSERT INTO leases (id, job_id, worker_id, units, state, created_ms, probe) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7)",
            )
            .bind(lease.id)
            .bind(lease.job_id)
            .bind(lease.worker_id)
            .bind(units_text(&lease.units))
            .bind(&lease.state)
            .bind(now)
            .bind(&lease.probe)
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
/// (W/D/L, the pentanomial's five, the over-the-board seven), written alike by the job
/// insert and the batch delta.
fn bind_counts<'q>(query: AnyQuery<'q>, counts: impl IntoIterator<Item = i64>) -> AnyQuery<'q> {
    counts.into_iter().fold(query, |query, count| query.bind(count))
}

/// The over-the-board columns' values in their order: `board_penta0..4`,
/// `ruled_wins_new`, `ruled_wins_base`.
fn board_columns(counts: &OverTheBoard) -> impl Iterator<Item = i64> {
    counts.pentanomial.into_iter().chain(counts.ruled_wins)
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
    fn count(&mut self, by_records: bool, points: [i64; 2], records: i64, reasons: &[String], sign: i64) {
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
    let mut sql = String::from(
        "INSERT INTO units (job_id, unit, lease_id, worker_id, first_points, second_points, reasons, records, \
         file, file_offset, length, created_ms) VALUES ",
    );
    for index in 0..rows {
        let first = index * 12;
        let placeholders: Vec<String> = match dialect {
            Dialect::Sqlite => vec!["?".to_owned(); 12],
            Dialect::Postgres => (first + 1..=first + 12).map(|n| format!("${n}")).collect(),
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
                .bind(row.created_ms);
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
async fn set_aside_units(
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
                           file_offset, length, created_ms";
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
         ruled_wins_new = ruled_wins_new + $18, ruled_wins_base = ruled_wins_base + $19 WHERE id = $20",
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_write_timeout_is_taken_out_of_a_postgresql_url_and_defaults_when_absent() {
        let split = |url| split_write_timeout(url).unwrap();
        assert_eq!(split("postgres://h/db"), ("postgres://h/db".to_owned(), Some(WRITE_TIMEOUT)));
        assert_eq!(
            split("postgres://h/db?write_timeout_ms=1500"),
            ("postgres://h/db".to_owned(), Some(Duration::from_millis(1500)))
        );
        assert_eq!(
            split("postgres://h/db?sslmode=disable&write_timeout_ms=20&application_name=x"),
            ("postgres://h/db?sslmode=disable&application_name=x".to_owned(), Some(Duration::from_millis(20)))
        );
        assert_eq!(split("sqlite://d/c.sqlite?mode=rwc"), ("sqlite://d/c.sqlite?mode=rwc".to_owned(), None));
        for bad in ["0", "-1", "2s", ""] {
            let refused = split_write_timeout(&format!("postgres://h/db?write_timeout_ms={bad}")).unwrap_err();
            assert!(matches!(refused, StorageError::WriteTimeout(ref value) if value == bad), "{refused}");
        }
    }

    #[test]
    fn only_a_database_that_failed_fails_a_whole_batch() {
        let io = || sqlx::Error::Io(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
        assert!(StorageError::TimedOut(WRITE_TIMEOUT).is_unreachable());
        assert!(StorageError::Database(io()).is_unreachable());
        assert!(StorageError::Database(sqlx::Error::PoolTimedOut).is_unreachable());
        assert!(!StorageError::Database(sqlx::Error::RowNotFound).is_unreachable());
        assert!(!StorageError::Damaged("a unit list".to_owned()).is_unreachable());
    }
}
