//! Retention and quotas: a finished job's games (or training data) are removed once
//! its retention has passed, its counts and results kept and its readers told why;
//! running jobs and younger data stay. Submitters are held to their running jobs and
//! stored bytes, admins are not, and removed data no longer counts against a quota.

use std::time::Duration;

use tonic::Code;
use xq_coordinator::retention::{collect_artifacts, remove_expired_data};
use xq_coordinator::scheduler::config::SchedulerConfig;
use xq_coordinator::storage::now_ms;
use xq_proto::v1;

use crate::common::*;

const DAY_MS: i64 = 86_400_000;

fn config() -> SchedulerConfig {
    SchedulerConfig {
        lease_seconds: 1000.0 * 72.0,
        reference_nps: 0,
        keep_games: Some(Duration::from_secs(86_400)),
        keep_training_data: Some(Duration::from_secs(3 * 86_400)),
        ..SchedulerConfig::default()
    }
}

/// Creates a test of `pairs` pairs as `client`.
async fn create(client: &mut Client, pairs: u64) -> Result<v1::Job, tonic::Status> {
    let request = test_request(client, pairs, None).await;
    client.create_test(request).await.map(tonic::Response::into_inner)
}

/// Leases job work for `worker` and reports `pairs` pairs of it; returns the lease.
async fn report(worker: &mut Worker, pairs: usize) -> v1::Lease {
    let lease = worker.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
    let played: Vec<[u8; 2]> = (0..pairs).map(|i| [[2, 1], [1, 1], [0, 1]][i % 3]).collect();
    let request = v1::ReportPairsRequest {
        lease_id: lease.lease_id,
        pairs: lease.units.iter().zip(&played).map(|(&unit, &points)| pair(unit, points)).collect(),
        cumulative: Some(totals(&played)),
        ..Default::default()
    };
    worker.report_pairs(request).await.unwrap();
    lease
}

#[tokio::test]
async fn finished_jobs_lose_their_stored_data_after_its_retention_and_keep_their_counts() {
    for backend in BACKENDS {
        let served = serve(backend, config()).await;
        let shared = &served.coordinator.shared;
        let mut admin = client(served.address, &served.client_token).await;
        let (mut worker, _) = registered_worker_with_cores(&served, "w", &[], 4).await;
        let request = test_request(&mut admin, 2, None).await;
        let finished = admin.create_test(request).await.unwrap().into_inner().job_id;
        report(&mut worker, 2).await;
        let request = test_request(&mut admin, 100, None).await;
        let running = admin.create_test(request).await.unwrap().into_inner().job_id;
        report(&mut worker, 1).await;
        let spec = v1::SelfPlaySpec { nodes: 1000, games_per_unit: 2, ..Default::default() };
        let request = v1::CreateSelfPlayRequest { spec: Some(spec.clone()), units: 1, ..Default::default() };
        let selfplay = admin.create_self_play(request).await.unwrap().into_inner().job_id;
        let lease = worker.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
        let chunk = crate::security::unit_chunk(&spec, 0, 20);
        worker
            .upload_chunk(v1::UploadChunkRequest { lease_id: lease.lease_id, unit: 0, chunk, games: 2 })
            .await
            .unwrap();
        let get = |id| v1::JobId { job_id: id };
        let before = admin.get_job(get(finished)).await.unwrap().into_inner();
        assert_eq!((before.state.as_str(), before.units_done), ("finished", 2), "{backend:?}");
        let games_file = served.data.join(format!("games/{finished}.pgn"));
        assert!(games_file.exists());

        assert!(remove_expired_data(shared, now_ms()).await.unwrap().is_empty(), "nothing is a day old yet");
        // A day later the finished test's games go; the running test's and the
        // self-play job's data (kept three days) stay.
        assert_eq!(remove_expired_data(shared, now_ms() + DAY_MS + 60_000).await.unwrap(), [finished]);
        assert!(!games_file.exists());
        let refused = admin.download_games(get(finished)).await.unwrap_err();
        assert_eq!(refused.code(), Code::NotFound);
        assert!(refused.message().contains("retention") && refused.message().contains("counts"), "{refused:?}");
        let after = admin.get_job(get(finished)).await.unwrap().into_inner();
        assert!(after.data_removed_ms > 0);
        assert_eq!((after.totals, after.sprt, after.units_done), (before.totals, before.sprt, before.units_done));
        let kept = collect(admin.download_games(get(running)).await.unwrap().into_inner()).await;
        let text: String = kept.into_iter().map(|piece| piece.pgn).collect();
        assert_eq!(xq_engine::xiangqi::pgn::parse_pgn(&text).unwrap().len(), 2);
        let chunks = collect(
            admin
                .stream_training_data(v1::TrainingDataRequest { job_id: get(selfplay).job_id, ..Default::default() })
                .await
                .unwrap()
                .into_inner(),
        )
        .await;
        assert_eq!(chunks.len(), 1);

        // Past three days, the training data goes too; a second pass finds nothing.
        assert_eq!(remove_expired_data(shared, now_ms() + 4 * DAY_MS).await.unwrap(), [selfplay]);
        assert!(!served.data.join(format!("chunks/{selfplay}")).exists());
        assert_eq!(
            admin
                .stream_training_data(v1::TrainingDataRequest { job_id: get(selfplay).job_id, ..Default::default() })
                .await
                .unwrap_err()
                .code(),
            Code::NotFound
        );
        assert!(remove_expired_data(shared, now_ms() + 5 * DAY_MS).await.unwrap().is_empty());
        let audit = admin.list_audit(v1::ListAuditRequest::default()).await.unwrap().into_inner();
        assert_eq!(audit.entries.iter().filter(|e| e.action == "job.data_removed").count(), 2, "{backend:?}");
    }
}

/// A finished verification job's reports go with its retention, as a test's games do,
/// its counts kept (N15 of the review of 2026-11-26: `verification/{id}/` stayed on disk,
/// unreadable and counted against no quota).
#[tokio::test]
async fn a_verification_job_s_reports_are_removed_after_their_retention_and_its_counts_kept() {
    use crate::verification::{GAMES, verify_all};
    let served = serve(BACKENDS[0], config()).await;
    let shared = &served.coordinator.shared;
    let mut admin = client(served.address, &served.client_token).await;
    let pgn = upload(&mut admin, "chases.pgn", "pgn", GAMES.as_bytes()).await.unwrap();
    let request = v1::CreateVerificationRequest { pgn: Some(pgn), games_per_unit: 3, ..Default::default() };
    let job = admin.create_verification(request).await.unwrap().into_inner().job_id;
    let mut worker = registered_worker(&served, "w", &[]).await;
    assert_eq!(verify_all(&mut worker, None, GAMES.as_bytes()).await, 2);
    let get = v1::JobId { job_id: job };
    let before = admin.get_verification(get).await.unwrap().into_inner();
    assert_eq!(before.games, 4);
    let reports = served.data.join(format!("verification/{job}"));
    assert!(reports.read_dir().unwrap().count() >= 2, "a report a unit");

    assert_eq!(remove_expired_data(shared, now_ms() + DAY_MS + 60_000).await.unwrap(), [job]);
    assert!(!reports.exists(), "the reports are removed");
    let refused = admin.download_verification(get).await.unwrap_err();
    assert_eq!(refused.code(), Code::NotFound);
    assert!(refused.message().contains("retention"), "{refused:?}");
    let after = admin.get_verification(get).await.unwrap().into_inner();
    assert_eq!((after.games, after.parting, after.by_kind), (before.games, before.parting, before.by_kind));
}

#[tokio::test]
async fn submitters_are_held_to_their_quotas_and_admins_are_not() {
    for backend in BACKENDS {
        // 100 bytes: its engine's upload (10 bytes) fits, a pair of games does not.
        let config = SchedulerConfig { submitter_quota_bytes: 100, submitter_active_jobs: 2, ..config() };
        let served = serve(backend, config).await;
        let mut admin = client(served.address, &served.client_token).await;
        let request =
            v1::CreateTokenRequest { role: "submitter".to_owned(), name: "alice".to_owned(), expires_seconds: 0 };
        let alice = admin.create_token(request).await.unwrap().into_inner();
        let mut as_alice = client(served.address, &alice.token).await;

        // At most two running jobs; stopping one makes room.
        let first = create(&mut as_alice, 1).await.unwrap();
        let second = create(&mut as_alice, 100).await.unwrap();
        let refused = create(&mut as_alice, 1).await.unwrap_err();
        assert_eq!(refused.code(), Code::ResourceExhausted, "{backend:?}");
        assert!(refused.message().contains("2 running or pending jobs"), "{refused:?}");
        as_alice.stop_job(v1::JobId { job_id: second.job_id }).await.unwrap();

        // Past its stored bytes (one pair of games is more than the 100-byte quota).
        let mut worker = registered_worker(&served, "w", &[]).await;
        report(&mut worker, 1).await;
        let state = admin.get_job(v1::JobId { job_id: first.job_id }).await.unwrap().into_inner();
        assert_eq!(state.state, "finished");
        // (The request's engine uploaded by the admin: alice's own upload is refused too.)
        let request = test_request(&mut admin, 1, None).await;
        let refused = as_alice.create_test(request).await.unwrap_err();
        assert_eq!(refused.code(), Code::ResourceExhausted);
        assert!(refused.message().contains("quota"), "{refused:?}");
        create(&mut admin, 1).await.unwrap();

        // Once retention removes the finished job's games, they count no more.
        remove_expired_data(&served.coordinator.shared, now_ms() + 2 * DAY_MS).await.unwrap();
        create(&mut as_alice, 1).await.unwrap();
    }
}

/// The artifact files of `served`, by name (their hashes), and the temporary ones.
fn artifact_files(served: &Served) -> (Vec<String>, usize) {
    let dir = served.data.join("artifacts");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name != "tmp")
        .collect();
    names.sort();
    (names, std::fs::read_dir(dir.join("tmp")).unwrap().count())
}

/// Attack (review N12): a submitter uploads blobs the checks refuse, or blobs no job
/// uses, until the disk reaches its reserve and the fleet stops. A refused upload now
/// leaves nothing on disk, a submitter's uploads count against its quota, and an
/// artifact no job or net names is collected after its grace period.
#[tokio::test]
async fn refused_uploads_leave_nothing_uploads_count_against_quotas_and_unused_ones_are_collected() {
    let config = SchedulerConfig { submitter_quota_bytes: 3_000, ..config() };
    let served = serve(BACKENDS[0], config).await;
    let mut admin = client(served.address, &served.client_token).await;
    for (name, kind, bytes) in
        [("bad.xqnn", "net", &b""[..]), ("bad.pgn", "pgn", b"\n"), ("bad.epd", "book", b"no fen")]
    {
        let refused = upload(&mut admin, name, kind, bytes).await.unwrap_err();
        assert!(refused.message().contains(name) || refused.message().contains("book"), "{refused:?}");
        assert_eq!(artifact_files(&served), (Vec::new(), 0), "nothing of {name} is kept");
    }

    // A submitter's uploads count: 2,000 bytes pass, 2,000 more pass (under 3,000 when
    // asked), then nothing more, neither an upload nor a job.
    let request = v1::CreateTokenRequest { role: "submitter".to_owned(), name: "s".to_owned(), expires_seconds: 0 };
    let token = admin.create_token(request).await.unwrap().into_inner().token;
    let mut submitter = client(served.address, &token).await;
    upload(&mut submitter, "a", "engine", &[1; 2_000]).await.unwrap();
    upload(&mut submitter, "b", "engine", &[2; 2_000]).await.unwrap();
    let over = upload(&mut submitter, "c", "engine", &[3; 10]).await.unwrap_err();
    assert_eq!(over.code(), Code::ResourceExhausted, "{over:?}");
    assert!(over.message().contains("jobs and uploads store"), "{}", over.message());
    let request = test_request(&mut admin, 2, None).await;
    assert_eq!(submitter.create_test(request).await.unwrap_err().code(), Code::ResourceExhausted);

    // Collected: what no job or net names, once its grace period has passed.
    let used = create(&mut admin, 2).await.unwrap();
    let net = upload(&mut admin, "net.xqnn", "net", &xq_engine::xiangqi::nnue::Network::random(1).to_bytes()).await;
    let net = net.unwrap();
    let spec = v1::SelfPlaySpec { nodes: 100, games_per_unit: 1, net: Some(net.clone()), ..Default::default() };
    admin
        .create_self_play(v1::CreateSelfPlayRequest { spec: Some(spec), units: 1, ..Default::default() })
        .await
        .unwrap();
    let shared = &served.coordinator.shared;
    let week = 7 * DAY_MS;
    assert!(collect_artifacts(shared, now_ms() + week - DAY_MS).await.unwrap().is_empty(), "within the grace");
    let collected = collect_artifacts(shared, now_ms() + week + DAY_MS).await.unwrap();
    assert_eq!(collected.len(), 2, "the submitter's two unused engines: {collected:?}");
    let (kept, temporary) = artifact_files(&served);
    assert_eq!(temporary, 0);
    assert_eq!(kept.len(), 2, "the test's engine and the self-play job's net: {kept:?}");
    assert!(kept.contains(&net.sha256), "{kept:?}");
    assert!(shared.storage.artifact(&collected[0]).await.unwrap().is_none(), "forgotten by the index");
    // The submitter's quota is free again, and the used test goes on.
    upload(&mut submitter, "c", "engine", &[3; 10]).await.unwrap();
    assert_eq!(admin.get_job(v1::JobId { job_id: used.job_id }).await.unwrap().into_inner().state, "running");
}

/// Attack (F10 of the review of 2026-11-28): a verification over another submitter's
/// running test copied its stored games into a new artifact on every call (the games
/// grow with each report, so every copy was new bytes, each parsed whole), counted
/// against no one. Now only an ended test's games are copied, the copy is the same
/// artifact however often it is asked for, and it counts against the caller's bytes.
#[tokio::test]
async fn a_verification_copies_only_an_ended_test_s_games_once_and_counts_them_against_its_caller() {
    let served = serve(BACKENDS[0], config()).await;
    let mut admin = client(served.address, &served.client_token).await;
    let test = create(&mut admin, 2).await.unwrap();
    let mut worker = registered_worker(&served, "w", &[]).await;
    report(&mut worker, 1).await;
    let request = v1::CreateTokenRequest { role: "submitter".to_owned(), name: "s".to_owned(), expires_seconds: 0 };
    let made = admin.create_token(request).await.unwrap().into_inner();
    let mut submitter = client(served.address, &made.token).await;
    let verify = v1::CreateVerificationRequest { test_job_id: test.job_id, ..Default::default() };
    let (files_before, _) = artifact_files(&served);
    for _ in 0..3 {
        let refused = submitter.create_verification(verify.clone()).await.unwrap_err();
        assert_eq!(refused.code(), Code::FailedPrecondition, "{refused:?}");
        assert!(refused.message().contains("still running"), "{}", refused.message());
    }
    assert_eq!(artifact_files(&served).0, files_before, "nothing copied while the test runs");
    assert_eq!(served.coordinator.shared.storage.stored_bytes_of(&made.id).await.unwrap(), 0);

    admin.stop_job(v1::JobId { job_id: test.job_id }).await.unwrap();
    let jobs = [
        submitter.create_verification(verify.clone()).await.unwrap().into_inner(),
        submitter.create_verification(verify).await.unwrap().into_inner(),
    ];
    assert!(jobs.iter().all(|job| job.summary.contains(&format!("2 games of job-{}.pgn", test.job_id))));
    let (files_after, _) = artifact_files(&served);
    assert_eq!(files_after.len(), files_before.len() + 1, "one copy for both: {files_after:?}");
    let copied = files_after.iter().find(|name| !files_before.contains(name)).unwrap();
    let size = std::fs::metadata(served.data.join("artifacts").join(copied)).unwrap().len();
    assert_eq!(served.coordinator.shared.storage.stored_bytes_of(&made.id).await.unwrap(), size);
}
