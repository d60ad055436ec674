//! The storage suite, run against SQLite and PostgreSQL alike.

use std::collections::{BTreeMap, HashMap};

use xq_coordinator::storage::Storage;
use xq_coordinator::storage::changes::Change;
use xq_coordinator::storage::counts::OverTheBoard;
use xq_coordinator::storage::rows::{JobRow, LeaseRow, Recount, Tally, TokenRow, UnitRow, WorkerCredit, WorkerRow};
use xq_coordinator::storage::writer::{BATCH_INTERVAL, Writer};

use crate::common::{BACKENDS, Backend, TempDir, fresh_database};

fn admin_token(hash: &str) -> TokenRow {
    TokenRow {
        hash: hash.to_owned(),
        role: "admin".to_owned(),
        worker_id: None,
        name: "admin".to_owned(),
        created_ms: 1,
        expires_ms: 0,
        revoked_ms: 0,
        user: "operator".to_owned(),
    }
}

fn job(id: i64) -> JobRow {
    JobRow {
        id,
        kind: "games".to_owned(),
        state: "running".to_owned(),
        outcome: String::new(),
        description: "d".to_owned(),
        priority: 0,
        spec: "00".to_owned(),
        units_total: 100,
        next_unit: 0,
        units_done: 0,
        wdl: [0; 3],
        pentanomial: [0; 5],
        over_the_board: OverTheBoard::default(),
        positions: 0,
        reasons: HashMap::new(),
        created_ms: 1,
        submitter: "0123456789ab".to_owned(),
        data_removed_ms: 0,
        ended_ms: 0,
        request_id: String::new(),
        request_digest: String::new(),
    }
}

fn unit(unit: u64, points: [i64; 2]) -> UnitRow {
    UnitRow {
        unit,
        points,
        reasons: ["adjudication".to_owned(), "checkmate".to_owned()],
        records: 0,
        pgn: format!("[Round \"{unit}\"]\n\n*\n\n"),
        file: String::new(),
        offset: 0,
        length: 0,
        created_ms: 1_000 + unit as i64,
        cpu_ms: 100 + unit as i64,
        games: 2,
    }
}

async fn open(backend: Backend, dir: &TempDir) -> (Storage, Writer) {
    let url = fresh_database(backend, &dir.0).await;
    let storage = Storage::open(&url).await.unwrap();
    let writer = Writer::start(&storage, dir.0.join("games"), Default::default()).await.unwrap();
    (storage, writer)
}

#[tokio::test]
async fn rows_round_trip_and_the_snapshot_holds_what_was_written() {
    for backend in BACKENDS {
        let dir = TempDir::new("storage");
        let (storage, writer) = open(backend, &dir).await;
        writer.write(Change::Token(admin_token("h1"))).await.unwrap();
        writer
            .write(Change::Worker(WorkerRow {
                id: 3,
                name: "w".to_owned(),
                capabilities: "0a".to_owned(),
                last_seen_ms: 5,
                standing: "active".to_owned(),
                standing_reason: String::new(),
            }))
            .await
            .unwrap();
        writer
            .write(Change::Worker(WorkerRow {
                id: 3,
                name: "w2".to_owned(),
                capabilities: "0b".to_owned(),
                last_seen_ms: 6,
                standing: "active".to_owned(),
                standing_reason: String::new(),
            }))
            .await
            .unwrap();
        writer.write(Change::NewJob(Box::new(job(7)))).await.unwrap();
        let lease = LeaseRow {
            id: 11,
            job_id: 7,
            worker_id: 3,
            units: vec![0, 1, 2],
            state: "active".to_owned(),
            probe: "0:+-".to_owned(),
            cores: 2,
            created_ms: 500,
        };
        writer.write(Change::NewLease { lease: lease.clone(), next_unit: 3 }).await.unwrap();
        writer.write(Change::JobPriority { id: 7, priority: 4 }).await.unwrap();
        writer
            .write(Change::Artifact {
                sha256: "a".repeat(64),
                name: "e".to_owned(),
                kind: "engine".to_owned(),
                size: 9,
                uploader: "0123456789ab".to_owned(),
            })
            .await
            .unwrap();
        // The worker release last published is the one required after a restart.
        for (version, published_ms) in [("0.1.0", 10), ("0.2.0", 20)] {
            let release = xq_proto::v1::WorkerRelease {
                version: version.to_owned(),
                sha256: "c".repeat(64),
                size: 7,
                signature: "d".repeat(128),
                published_ms,
            };
            writer.write(Change::WorkerRelease(release)).await.unwrap();
        }
        let units = vec![unit(0, [2, 1]), unit(2, [0, 0])];
        let applied = writer
            .write(Change::Units { job_id: 7, lease_id: 11, worker_id: 3, by_records: false, rows: units })
            .await
            .unwrap();
        assert_eq!(applied.new_units, [0, 2], "{backend:?}");
        let snapshot = storage.load().await.unwrap();
        assert_eq!(snapshot.tokens, [admin_token("h1")]);
        assert_eq!(snapshot.workers[0].name, "w2", "{backend:?}: upsert");
        let stored = &snapshot.jobs[0];
        assert_eq!((stored.next_unit, stored.priority, stored.units_done), (3, 4, 2), "{backend:?}");
        assert_eq!(stored.wdl, [1, 1, 2]);
        assert_eq!(stored.pentanomial, [1, 0, 0, 1, 0]);
        assert_eq!(stored.reasons, HashMap::from([("adjudication".to_owned(), 2), ("checkmate".to_owned(), 2)]));
        assert_eq!(snapshot.active_leases, [lease]);
        assert_eq!(snapshot.probes[&7], [(11, "0:+-".to_owned())]);
        assert_eq!(snapshot.max_lease_id, 11);
        let release = snapshot.release.clone().unwrap();
        assert_eq!((release.version.as_str(), release.published_ms, release.size), ("0.2.0", 20, 7), "{backend:?}");
        // In the order they counted (one batch here: by unit), each with its lease.
        let done: Vec<_> = snapshot.done_units[&7].iter().map(|d| (d.unit, d.lease_id, d.points)).collect();
        assert_eq!(done, [(0, 11, [2, 1]), (2, 11, [0, 0])]);
        assert_eq!(snapshot.worker_units.values().sum::<u64>(), 2, "units counted per worker");
        assert_eq!(storage.artifact(&"a".repeat(64)).await.unwrap(), Some(("e".to_owned(), "engine".to_owned(), 9)));
        // The games are on disk where the rows say.
        let files = storage.unit_files(7, None, 10).await.unwrap();
        assert_eq!(files.len(), 2);
        let text = std::fs::read(dir.0.join(&files[1].file)).unwrap();
        let slice = &text[files[1].offset as usize..(files[1].offset + files[1].length) as usize];
        assert_eq!(slice, b"[Round \"2\"]\n\n*\n\n");
        assert_eq!(storage.unit_files(7, Some(0), 10).await.unwrap().len(), 1);
        // Credit sums the counted units' (#56 part 3): unit 2 counted at 1,002 ms.
        let units = |cpu_ms, games, units| Tally { cpu_ms, games, units };
        let credit = storage.credit_by_worker(1_001).await.unwrap();
        let expected = WorkerCredit { all_time: units(202, 4, 2), recent: units(102, 2, 1) };
        assert_eq!(credit, BTreeMap::from([(3, expected)]), "{backend:?}");
        // An ending keeps its time; a priority changed after it keeps the ending.
        let ending =
            Change::JobState { id: 7, state: "finished".to_owned(), outcome: "H1 accepted".to_owned(), ended_ms: 1234 };
        writer.write(ending).await.unwrap();
        writer.write(Change::JobPriority { id: 7, priority: 9 }).await.unwrap();
        let ended = storage.job(7).await.unwrap().unwrap();
        assert_eq!((ended.state.as_str(), ended.ended_ms, ended.priority), ("finished", 1234, 9), "{backend:?}");
    }
}

#[tokio::test]
async fn a_unit_counts_once_however_often_it_arrives() {
    for backend in BACKENDS {
        let dir = TempDir::new("storage");
        let (storage, writer) = open(backend, &dir).await;
        writer.write(Change::NewJob(Box::new(job(1)))).await.unwrap();
        // The same units from two leases (a re-issued lease) and twice from one (a resend),
        // written concurrently so that they share transactions.
        let mut tasks = Vec::new();
        for round in 0..4 {
            for u in 0..50u64 {
                let writer = writer.clone();
                let points = [(u % 3) as i64, ((u + round) % 3) as i64];
                tasks.push(tokio::spawn(async move {
                    let change = Change::Units {
                        job_id: 1,
                        lease_id: round as i64 % 2,
                        worker_id: 1,
                        by_records: false,
                        rows: vec![unit(u, points)],
                    };
                    writer.write(change).await.unwrap().new_units
                }));
            }
        }
        let mut counted = 0;
        for task in tasks {
            counted += task.await.unwrap().len();
        }
        assert_eq!(counted, 50, "{backend:?}: each unit new exactly once");
        let stored = storage.job(1).await.unwrap().unwrap();
        let Recount { units, wdl, pentanomial, over_the_board } = storage.recount(1).await.unwrap();
        assert_eq!(units, 50);
        assert_eq!(stored.units_done, 50, "{backend:?}");
        assert_eq!(stored.wdl.map(|c| c as u64), wdl, "{backend:?}: the job's counters equal its rows");
        assert_eq!(stored.pentanomial.map(|c| c as u64), pentanomial);
        assert_eq!(stored.over_the_board, over_the_board, "{backend:?}");
        assert_eq!(stored.reasons.values().sum::<u64>(), 100);
    }
}

/// A unit whose two games ended for `reasons`.
fn ended(unit_number: u64, points: [i64; 2], reasons: [&str; 2]) -> UnitRow {
    UnitRow { reasons: reasons.map(str::to_owned), ..unit(unit_number, points) }
}

/// Three pairs, their games ended by the arbiter's names for the endings: unit 0 lost
/// by the new engine's perpetual chase then drawn, unit 1 drawn by repetition then won
/// by the base engine's perpetual check, unit 2 (another worker's) won by a perpetual
/// chase and on time. Over the board the three wins by ruling and the win on time are
/// draws.
fn ruled_units() -> [(i64, UnitRow); 3] {
    [
        (1, ended(0, [0, 1], ["perpetual chase", "natural move count"])),
        (1, ended(1, [1, 2], ["repetition draw", "perpetual check"])),
        (2, ended(2, [2, 2], ["perpetual chase", "time forfeit"])),
    ]
}

/// Pentanomial [0, 1, 0, 1, 1] as the arbiter ruled; over the board each unit is 1 + 1
/// half points; the new engine won units 1 and 2's ruled games and unit 2's second game
/// on time, the base engine unit 0's ruled game.
const RULED_OVER_THE_BOARD: OverTheBoard =
    OverTheBoard { pentanomial: [0, 0, 3, 0, 0], ruled_wins: [2, 1], forfeit_wins: [1, 0] };

#[tokio::test]
async fn wins_by_a_repetition_ruling_or_on_time_are_counted_apart_and_leave_with_a_set_aside_worker() {
    for backend in BACKENDS {
        let dir = TempDir::new("storage");
        let (storage, writer) = open(backend, &dir).await;
        writer.write(Change::NewJob(Box::new(job(4)))).await.unwrap();
        for (worker_id, row) in ruled_units() {
            let change =
                Change::Units { job_id: 4, lease_id: worker_id, worker_id, by_records: false, rows: vec![row] };
            writer.write(change).await.unwrap();
        }
        let stored = storage.job(4).await.unwrap().unwrap();
        assert_eq!(stored.pentanomial, [0, 1, 0, 1, 1], "{backend:?}");
        assert_eq!(stored.over_the_board, RULED_OVER_THE_BOARD, "{backend:?}");
        assert_eq!(storage.recount(4).await.unwrap().over_the_board, RULED_OVER_THE_BOARD, "{backend:?}");
        let reloaded = storage.load().await.unwrap();
        assert_eq!(reloaded.jobs[0].over_the_board, RULED_OVER_THE_BOARD, "{backend:?}: read back at a start");
        // Worker 2's unit leaves the counts with it: unit 2 was 1 + 1 over the board,
        // one win by ruling and one on time of the new engine's.
        let standing = Change::WorkerStanding {
            worker_id: 2,
            standing: "quarantined".to_owned(),
            reason: "test".to_owned(),
            set_aside_jobs: vec![4],
        };
        writer.write(standing).await.unwrap();
        let stored = storage.job(4).await.unwrap().unwrap();
        let left = OverTheBoard { pentanomial: [0, 0, 2, 0, 0], ruled_wins: [1, 1], forfeit_wins: [0, 0] };
        assert_eq!(stored.over_the_board, left, "{backend:?}");
        assert_eq!(storage.recount(4).await.unwrap().over_the_board, left, "{backend:?}");
    }
}

/// A database of the schema before the over-the-board counts (migration 14) holding a
/// match with ruled games and a game won on time, and a self-play job: brought up to
/// date (the board counts of migration 15, the forfeits of 22), the match's counts are
/// those the coordinator keeps for new units, the self-play job's stay empty.
#[tokio::test]
async fn the_migration_counts_the_matches_stored_before_it() {
    for backend in BACKENDS {
        let dir = TempDir::new("storage");
        let url = fresh_database(backend, &dir.0).await;
        let pool = migrated_before(&url, &dir, "0015").await;
        for (id, kind) in [(4, "sprt"), (5, "selfplay")] {
            insert_old_job(&pool, id, kind, "finished", 1).await;
            for (worker_id, row) in ruled_units() {
                sqlx::query(
                    "INSERT INTO units (job_id, unit, lease_id, worker_id, first_points, second_points, reasons, \
                     records, file, file_offset, length, created_ms) VALUES ($1, $2, 1, $3, $4, $5, $6, 0, '', 0, 0, 1)",
                )
                .bind(id)
                .bind(row.unit as i64)
                .bind(worker_id)
                .bind(if kind == "selfplay" { 0 } else { row.points[0] })
                .bind(if kind == "selfplay" { 0 } else { row.points[1] })
                .bind(if kind == "selfplay" { String::new() } else { row.reasons.join("|") })
                .execute(&pool)
                .await
                .unwrap();
            }
        }
        pool.close().await;
        let storage = Storage::open(&url).await.unwrap();
        let migrated = storage.job(4).await.unwrap().unwrap();
        assert_eq!(migrated.over_the_board, RULED_OVER_THE_BOARD, "{backend:?}");
        assert_eq!(storage.recount(4).await.unwrap().over_the_board, RULED_OVER_THE_BOARD, "{backend:?}");
        let self_play = storage.job(5).await.unwrap().unwrap();
        assert_eq!(self_play.over_the_board, OverTheBoard::default(), "{backend:?}");
    }
}

/// A database of the schema before job ends were kept (migration 23) holding a
/// finished, a stopped and a running job: brought up to date, the ended ones ended at
/// their last change, the running one has not ended.
#[tokio::test]
async fn the_jobs_ended_before_their_ends_were_kept_ended_at_their_last_change() {
    for backend in BACKENDS {
        let dir = TempDir::new("storage");
        let url = fresh_database(backend, &dir.0).await;
        let pool = migrated_before(&url, &dir, "0023").await;
        for (id, state, updated_ms) in [(1, "finished", 500), (2, "stopped", 600), (3, "running", 700)] {
            insert_old_job(&pool, id, "games", state, updated_ms).await;
        }
        pool.close().await;
        let storage = Storage::open(&url).await.unwrap();
        for (id, ended_ms) in [(1, 500), (2, 600), (3, 0)] {
            assert_eq!(storage.job(id).await.unwrap().unwrap().ended_ms, ended_ms, "{backend:?}: job {id}");
        }
    }
}

/// Inserts a job of three counted units, created at 1 ms, by the columns the schema
/// had before migration 15 (those added since take their defaults).
async fn insert_old_job(pool: &sqlx::AnyPool, id: i64, kind: &str, state: &str, updated_ms: i64) {
    sqlx::query(
        "INSERT INTO jobs (id, kind, state, outcome, description, priority, spec, units_total, next_unit, \
         units_done, wins, draws, losses, penta0, penta1, penta2, penta3, penta4, positions, reasons, \
         created_ms, updated_ms) VALUES ($1, $2, $3, '', '', 0, '00', 3, 3, 3, 0, 0, 0, 0, 0, 0, 0, 0, \
         0, '{}', 1, $4)",
    )
    .bind(id)
    .bind(kind)
    .bind(state)
    .bind(updated_ms)
    .execute(pool)
    .await
    .unwrap();
}

/// A pool on the database at `url` with the migrations before `first` applied only.
async fn migrated_before(url: &str, dir: &TempDir, first: &str) -> sqlx::AnyPool {
    let migrations = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations");
    let before = dir.0.join("migrations-before");
    std::fs::create_dir(&before).unwrap();
    for entry in std::fs::read_dir(&migrations).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_owned();
        if name.as_str() < first {
            std::fs::copy(&path, before.join(&name)).unwrap();
        }
    }
    sqlx::any::install_default_drivers();
    let pool = sqlx::AnyPool::connect(url).await.unwrap();
    sqlx::migrate::Migrator::new(before.as_path()).await.unwrap().run(&pool).await.unwrap();
    pool
}

/// A database of the schema before users (migration 17) holding an admin's, a
/// submitter's and a worker's token: brought up to date, the user tokens belong to
/// 'operator', an active admin made by the migration, and the worker's to no user.
#[tokio::test]
async fn the_tokens_made_before_users_belong_to_the_operator() {
    for backend in BACKENDS {
        let dir = TempDir::new("storage");
        let url = fresh_database(backend, &dir.0).await;
        let pool = migrated_before(&url, &dir, "0017").await;
        for (hash, role, worker_id) in [("a", "admin", None), ("s", "submitter", None), ("w", "worker", Some(1i64))] {
            sqlx::query(
                "INSERT INTO tokens (hash, role, worker_id, created_ms, name, expires_ms, revoked_ms) \
                 VALUES ($1, $2, $3, 1, 'before', 0, 0)",
            )
            .bind(hash)
            .bind(role)
            .bind(worker_id)
            .execute(&pool)
            .await
            .unwrap();
        }
        pool.close().await;
        let storage = Storage::open(&url).await.unwrap();
        let mut users: Vec<(String, String)> =
            storage.tokens().await.unwrap().into_iter().map(|t| (t.hash, t.user)).collect();
        users.sort();
        let expected = [("a", "operator"), ("s", "operator"), ("w", "")].map(|(h, u)| (h.to_owned(), u.to_owned()));
        assert_eq!(users, expected, "{backend:?}");
        let operator = storage.users().await.unwrap();
        assert_eq!(operator.len(), 1);
        assert_eq!((operator[0].name.as_str(), operator[0].role.as_str()), ("operator", "admin"));
        assert_eq!((operator[0].state.as_str(), operator[0].password_hash.as_str()), ("active", ""));
    }
}

#[tokio::test]
async fn a_failing_change_fails_alone() {
    for backend in BACKENDS {
        let dir = TempDir::new("storage");
        let (storage, writer) = open(backend, &dir).await;
        let token = admin_token("same");
        let (a, b, c) = tokio::join!(
            writer.write(Change::Token(token.clone())),
            writer.write(Change::Token(token.clone())),
            writer.write(Change::NewJob(Box::new(job(2)))),
        );
        assert!(a.is_ok() != b.is_ok(), "{backend:?}: one of the duplicate tokens is refused");
        assert!(c.is_ok(), "{backend:?}: the job in the same batch is stored");
        assert!(storage.job(2).await.unwrap().is_some());
    }
}

#[tokio::test]
async fn self_play_units_add_positions() {
    for backend in BACKENDS {
        let dir = TempDir::new("storage");
        let (storage, writer) = open(backend, &dir).await;
        writer.write(Change::NewJob(Box::new(JobRow { kind: "selfplay".to_owned(), ..job(5) }))).await.unwrap();
        let row = UnitRow {
            records: 321,
            pgn: String::new(),
            file: "chunks/5/0-1.xqd".to_owned(),
            length: 10,
            ..unit(0, [0, 0])
        };
        writer
            .write(Change::Units {
                job_id: 5,
                lease_id: 1,
                worker_id: 1,
                by_records: true,
                rows: vec![row.clone(), UnitRow { unit: 1, ..row }],
            })
            .await
            .unwrap();
        let stored = storage.job(5).await.unwrap().unwrap();
        assert_eq!((stored.positions, stored.units_done, stored.wdl), (642, 2, [0, 0, 0]), "{backend:?}");
    }
}

#[tokio::test]
async fn large_batches_are_stored_whole() {
    for backend in BACKENDS {
        let dir = TempDir::new("storage");
        let (storage, writer) = open(backend, &dir).await;
        writer.write(Change::NewJob(Box::new(JobRow { units_total: 5000, ..job(1) }))).await.unwrap();
        let rows: Vec<UnitRow> = (0..2500).map(|u| unit(u, [2, 1])).collect();
        let applied = writer
            .write(Change::Units { job_id: 1, lease_id: 1, worker_id: 1, by_records: false, rows })
            .await
            .unwrap();
        assert_eq!(applied.new_units.len(), 2500, "{backend:?}");
        assert_eq!(storage.job(1).await.unwrap().unwrap().units_done, 2500);
    }
}

#[tokio::test]
async fn batches_of_every_size_count_exactly_their_rows() {
    // Inserts are padded up to a few statement sizes with copies of a row: the copies
    // must neither count nor come back as new.
    for backend in BACKENDS {
        let dir = TempDir::new("storage");
        let (storage, writer) = open(backend, &dir).await;
        writer.write(Change::NewJob(Box::new(JobRow { units_total: 5000, ..job(1) }))).await.unwrap();
        let mut next = 0u64;
        for size in (1..=33).chain([127, 129, 255, 257, 600]) {
            let units: Vec<u64> = (next..next + size).collect();
            next += size;
            let rows = units.iter().map(|&u| unit(u, [(u % 3) as i64, 2])).collect();
            let change = Change::Units { job_id: 1, lease_id: 1, worker_id: 1, by_records: false, rows };
            let mut new_units = writer.write(change).await.unwrap().new_units;
            new_units.sort_unstable();
            assert_eq!(new_units, units, "{backend:?}: a batch of {size}");
        }
        let stored = storage.job(1).await.unwrap().unwrap();
        let Recount { units, wdl, pentanomial, over_the_board } = storage.recount(1).await.unwrap();
        assert_eq!((units, stored.units_done as u64), (next, next), "{backend:?}");
        assert_eq!(stored.wdl.map(|c| c as u64), wdl, "{backend:?}: the job's counters equal its rows");
        assert_eq!(stored.pentanomial.map(|c| c as u64), pentanomial, "{backend:?}");
        assert_eq!(stored.over_the_board, over_the_board, "{backend:?}");
        assert_eq!(wdl[0] + wdl[1] + wdl[2], 2 * next, "{backend:?}: two games a unit");
    }
}

#[tokio::test]
async fn a_steady_stream_of_changes_is_gathered_into_one_batch_per_interval() {
    // Changes coming faster than the interval wait for the next batch instead of each
    // starting one: however fast or slow the machine, no more batches start than
    // intervals pass.
    for backend in BACKENDS {
        let dir = TempDir::new("storage");
        let (_storage, writer) = open(backend, &dir).await;
        let before = writer.batches();
        let started = std::time::Instant::now();
        let mut writes = tokio::task::JoinSet::new();
        for index in 0..400u64 {
            let writer = writer.clone();
            writes.spawn(async move {
                tokio::time::sleep(std::time::Duration::from_micros(250 * index)).await;
                let worker = WorkerRow {
                    id: index as i64,
                    name: "w".to_owned(),
                    capabilities: String::new(),
                    last_seen_ms: 1,
                    standing: "active".to_owned(),
                    standing_reason: String::new(),
                };
                writer.write(Change::Worker(worker)).await.unwrap();
            });
        }
        writes.join_all().await;
        let intervals = started.elapsed().as_secs_f64() / BATCH_INTERVAL.as_secs_f64();
        let batches = writer.batches() - before;
        assert!(batches as f64 <= intervals + 1.0, "{backend:?}: {batches} batches in {intervals:.1} intervals");
        assert!(batches > 1, "{backend:?}: the stream spans several intervals");
    }
}
