//! The storage suite, run against SQLite and PostgreSQL alike.

use std::collections::HashMap;

use xq_coordinator::storage::{Change, JobRow, LeaseRow, Storage, TokenRow, UnitRow, WorkerRow};
use xq_coordinator::writer::{BATCH_INTERVAL, Writer};

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
        positions: 0,
        reasons: HashMap::new(),
        created_ms: 1,
        submitter: "0123456789ab".to_owned(),
        data_removed_ms: 0,
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
        };
        writer.write(Change::NewLease { lease: lease.clone(), next_unit: 3 }).await.unwrap();
        writer
            .write(Change::JobState { id: 7, state: "running".to_owned(), outcome: String::new(), priority: 4 })
            .await
            .unwrap();
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
        let (units, wdl, penta) = storage.recount(1).await.unwrap();
        assert_eq!(units, 50);
        assert_eq!(stored.units_done, 50, "{backend:?}");
        assert_eq!(stored.wdl.map(|c| c as u64), wdl, "{backend:?}: the job's counters equal its rows");
        assert_eq!(stored.pentanomial.map(|c| c as u64), penta);
        assert_eq!(stored.reasons.values().sum::<u64>(), 100);
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
        let (units, wdl, penta) = storage.recount(1).await.unwrap();
        assert_eq!((units, stored.units_done as u64), (next, next), "{backend:?}");
        assert_eq!(stored.wdl.map(|c| c as u64), wdl, "{backend:?}: the job's counters equal its rows");
        assert_eq!(stored.pentanomial.map(|c| c as u64), penta, "{backend:?}");
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
