//! The database: one schema and one code path for SQLite (embedded, the default) and
//! PostgreSQL (a fleet), through sqlx's `Any` driver. Everything the coordinator must
//! not lose is written here by the [`writer`] as [`changes`], [`apply`]'d in batches;
//! at start the scheduler's state is loaded back from it ([`reads`], as [`rows`]).

pub mod apply;
pub mod artifacts;
pub mod books;
pub mod changes;
pub mod counts;
pub mod disk;
pub mod durable;
pub mod layout;
pub mod reads;
pub mod rows;
pub mod writer;

use sqlx::any::AnyPoolOptions;
use sqlx::{AnyPool, Executor};
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

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
pub(super) enum Dialect {
    Sqlite,
    Postgres,
}

impl Dialect {
    /// The dialect of a database URL (anything not SQLite is PostgreSQL, the other
    /// database the migrations are written for).
    pub(super) fn of(url: &str) -> Self {
        if url.starts_with("sqlite:") { Dialect::Sqlite } else { Dialect::Postgres }
    }
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
    pub(super) async fn connect(
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
