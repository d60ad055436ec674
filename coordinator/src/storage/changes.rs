//! What is written to the database: each change the writer batches, and what applying
//! one gave back.

use crate::storage::rows::{
    AuditRow, JobRow, LeaseRow, MachineRow, NetRow, Recheck, ReportedFailure, Suspicion, TokenRow, TournamentRow,
    UnitRow, UserRow, WorkerRow,
};

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
    /// Inserts or updates a user.
    User(UserRow),
    /// A machine enrolled.
    Machine(MachineRow),
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
    /// A job's state: its priority apart ([`Change::JobPriority`]), so that neither
    /// write, landing after the other, undoes it.
    JobState {
        id: i64,
        state: String,
        outcome: String,
        /// When it ended; 0 while it runs.
        ended_ms: i64,
    },
    /// A job's priority, changed.
    JobPriority {
        id: i64,
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
    /// A job's request changed after its creation (`xq modify`): its stored spec and
    /// its number of units.
    JobSpec {
        id: i64,
        spec: String,
        units_total: i64,
    },
    /// The failures reported on a job forgotten: it runs again (`xq resume`), and the
    /// workers that reported them may play it.
    FailuresCleared {
        job_id: i64,
    },
    /// A worker release published: the one workers must run from now on.
    WorkerRelease(xq_proto::v1::WorkerRelease),
    /// A failure a worker reported on job `job_id` (see [`ReportedFailure`]).
    Failure {
        job_id: i64,
        failure: ReportedFailure,
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
