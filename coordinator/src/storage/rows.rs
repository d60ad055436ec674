//! The rows the database gives back, and how a row's columns read into them.

use crate::storage::StorageError;
use crate::storage::counts::OverTheBoard;
use sqlx::Row;
use std::collections::HashMap;
use xq_stats::conduct::Leases;

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

/// An artifact's row in the index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexedArtifact {
    pub sha256: String,
    pub name: String,
    pub size: u64,
    /// The token that uploaded it first.
    pub uploader: String,
    /// When it was last uploaded, in milliseconds since the Unix epoch.
    pub uploaded_ms: i64,
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
    /// When it ended (finished or stopped; 0: it has not).
    pub ended_ms: i64,
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
    /// The cores of its worker it holds: what its time is credited at.
    pub cores: i64,
    /// When it was taken, in milliseconds since the Unix epoch: set by the scheduler,
    /// so that credit measured in memory and the row agree.
    pub created_ms: i64,
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
    /// The user it belongs to ('' for a worker's).
    pub user: String,
}

/// A machine enrolled with a worker key: its worker, credited to the key's user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MachineRow {
    pub key_hash: String,
    pub machine_id: String,
    pub worker_id: i64,
    pub user: String,
}

/// A user row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserRow {
    pub name: String,
    /// argon2id as a PHC string; '' for none (it cannot log in).
    pub password_hash: String,
    /// 'submitter', 'approver' or 'admin'.
    pub role: String,
    /// 'pending', 'active' or 'revoked'.
    pub state: String,
    pub created_ms: i64,
    pub changed_ms: i64,
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
    /// The core-milliseconds its worker is credited with for it, and the games it
    /// played: set by the scheduler when it counts ([`crate::scheduler::credit`]).
    pub cpu_ms: i64,
    pub games: i64,
}

/// Counted units summed: their core-milliseconds, games and number.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    pub cpu_ms: i64,
    pub games: i64,
    pub units: i64,
}

/// A worker's (or a user's) counted units summed: all time, and recent ones.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WorkerCredit {
    pub all_time: Tally,
    pub recent: Tally,
}

impl WorkerCredit {
    pub fn add(&mut self, other: WorkerCredit) {
        for (total, more) in [(&mut self.all_time, other.all_time), (&mut self.recent, other.recent)] {
            total.cpu_ms += more.cpu_ms;
            total.games += more.games;
            total.units += more.units;
        }
    }
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
pub(super) use net_columns;

pub(super) fn net_from_row(row: &sqlx::any::AnyRow) -> Result<NetRow, sqlx::Error> {
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
    pub users: Vec<UserRow>,
    pub machines: Vec<MachineRow>,
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
    /// The failures workers reported, by job, oldest first.
    pub failures: HashMap<i64, Vec<ReportedFailure>>,
    /// The worker release last published, which workers must run.
    pub release: Option<xq_proto::v1::WorkerRelease>,
}

/// A failure a worker reported on one of a job's leases (`xq_proto::failure`): the
/// worker gets no more of the job, and enough workers reporting the same failure stop
/// it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReportedFailure {
    pub worker_id: i64,
    /// Its kind's name ([`xq_proto::failure::FailureKind::name`]).
    pub kind: String,
    /// The engine's name in the job; empty when it is no engine's.
    pub engine: String,
    pub detail: String,
    pub time_ms: i64,
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

pub(super) fn units_text(units: &[u64]) -> String {
    units.iter().map(u64::to_string).collect::<Vec<_>>().join(",")
}

pub(super) fn parse_units(text: &str) -> Result<Vec<u64>, StorageError> {
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
         board_penta4, ruled_wins_new, ruled_wins_base, forfeit_wins_new, forfeit_wins_base, ended_ms"
    };
}
pub(super) use job_columns;

pub(super) fn job_from_row(row: &sqlx::any::AnyRow) -> Result<JobRow, StorageError> {
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
            forfeit_wins: [row.try_get("forfeit_wins_new")?, row.try_get("forfeit_wins_base")?],
        },
        positions: row.try_get("positions")?,
        reasons: serde_json::from_str(&reasons).map_err(|e| StorageError::Damaged(format!("job reasons: {e}")))?,
        created_ms: row.try_get("created_ms")?,
        submitter: row.try_get("submitter")?,
        data_removed_ms: row.try_get("data_removed_ms")?,
        ended_ms: row.try_get("ended_ms")?,
        request_id: row.try_get("request_id")?,
        request_digest: row.try_get("request_digest")?,
    })
}
