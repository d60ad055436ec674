//! Nothing a worker or client sends is trusted: tokens, sizes, ranges, artifacts,
//! totals and games are checked, and every refusal says what was wrong.

use std::time::Duration;

use tonic::Code;
use xq_coordinator::scheduler::config::SchedulerConfig;
use xq_engine::xiangqi::data::{Record, write_chunk};
use xq_engine::xiangqi::search::Shared;
use xq_engine::xiangqi::selfplay::play_game;
use xq_proto::v1;

use crate::common::{
    BACKENDS, Client, TempDir, client, fresh_database, game, pair, registered_worker, registered_worker_token, serve,
    serve_on, test_request, totals, upload, worker,
};

pub(crate) fn config() -> SchedulerConfig {
    SchedulerConfig { lease_seconds: 4.0 * 72.0, reference_nps: 0, ..SchedulerConfig::default() }
}

pub(crate) async fn create(admin: &mut Client, pairs: u64) -> v1::Job {
    let request = test_request(admin, pairs, None).await;
    admin.create_test(request).await.unwrap().into_inner()
}

#[tokio::test]
async fn tokens_are_checked_and_roles_kept_apart() {
    let served = serve(BACKENDS[0], config()).await;
    let mut stranger = client(served.address, "not-a-token").await;
    let status = stranger.list_jobs(v1::ListJobsRequest::default()).await.unwrap_err();
    assert_eq!(status.code(), Code::Unauthenticated, "{status:?}");
    let mut worker_posing_as_client = {
        let mut admin = client(served.address, &served.client_token).await;
        let token = admin
            .create_worker_token(v1::CreateWorkerTokenRequest { name: "w".to_owned() })
            .await
            .unwrap()
            .into_inner()
            .token;
        client(served.address, &token).await
    };
    let status = worker_posing_as_client.list_jobs(v1::ListJobsRequest::default()).await.unwrap_err();
    assert_eq!(status.code(), Code::PermissionDenied);
    let mut client_posing_as_worker = worker(served.address, &served.client_token).await;
    let status = client_posing_as_worker.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap_err();
    assert_eq!(status.code(), Code::PermissionDenied);
    // Tokens are stored hashed: the database does not hold the client token.
    let stored = std::fs::read(served.data.join("test.sqlite")).unwrap();
    assert!(!stored.windows(served.client_token.len()).any(|w| w == served.client_token.as_bytes()));
}

#[tokio::test]
async fn bad_requests_are_refused_with_what_was_wrong() {
    let served = serve(BACKENDS[0], config()).await;
    let mut admin = client(served.address, &served.client_token).await;
    let mut request = test_request(&mut admin, 10, None).await;
    request.time_control = "ten minutes".to_owned();
    let status = admin.create_test(request.clone()).await.unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument);
    assert!(status.message().starts_with("time_control:"), "{}", status.message());
    request.time_control = "10+0.1".to_owned();
    request.new_engine.as_mut().unwrap().binary.as_mut().unwrap().sha256 = "b".repeat(64);
    let status = admin.create_test(request).await.unwrap_err();
    assert_eq!(status.code(), Code::FailedPrecondition);
    assert!(status.message().contains("has not been uploaded"), "{}", status.message());
    // Artifacts: kinds, names, books that do not read.
    assert_eq!(upload(&mut admin, "x", "virus", b"1").await.unwrap_err().code(), Code::InvalidArgument);
    assert_eq!(upload(&mut admin, "../x", "engine", b"1").await.unwrap_err().code(), Code::InvalidArgument);
    let status = upload(&mut admin, "book.epd", "book", b"not a fen\n").await.unwrap_err();
    assert!(status.message().contains("the book cannot be read"), "{}", status.message());
    // A message beyond the size limit.
    let huge = v1::CreateWorkerTokenRequest { name: "x".repeat(xq_proto::MAX_MESSAGE_BYTES + 10) };
    let status = admin.create_worker_token(huge).await.unwrap_err();
    assert!(matches!(status.code(), Code::ResourceExhausted | Code::OutOfRange | Code::Internal), "{status:?}");
    let status = admin.get_job(v1::JobId { job_id: 999 }).await.unwrap_err();
    assert_eq!(status.code(), Code::NotFound);
    // The coordinator still serves.
    assert!(admin.list_jobs(v1::ListJobsRequest::default()).await.is_ok());
}

#[tokio::test]
async fn reports_are_replayed_and_their_totals_checked() {
    for backend in BACKENDS {
        let served = serve(backend, config()).await;
        let mut admin = client(served.address, &served.client_token).await;
        let job = create(&mut admin, 10).await;
        let mut worker = registered_worker(&served, "w", &[]).await;
        let mut intruder = registered_worker(&served, "intruder", &[]).await;
        let lease = worker.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
        let id = lease.lease_id;
        let report = |pairs: Vec<v1::PairResult>, cumulative: v1::Totals| v1::ReportPairsRequest {
            lease_id: id,
            pairs,
            cumulative: Some(cumulative),
            ..Default::default()
        };
        let refused = |status: tonic::Status, needle: &str| {
            assert_eq!(status.code(), Code::InvalidArgument, "{backend:?} {status:?}");
            assert!(status.message().contains(needle), "{backend:?}: '{}' lacks '{needle}'", status.message());
        };
        // An illegal move.
        let mut bad = pair(0, [2, 2]);
        bad.first_game_pgn = game("new", "base", "1. h2e2 h9h5", "1-0");
        refused(worker.report_pairs(report(vec![bad], totals(&[[2, 2]]))).await.unwrap_err(), "cannot be played");
        // Forged endings: a time forfeit by a side with most of its clock left, or with
        // no evidence; an adjudication the test's settings do not make; another clock.
        let forfeit = |over: &str| {
            let moves = "1. h2e2 {+0.10 0.100s} h9g7 {-0.10 0.100s}";
            let text = game("new", "base", moves, "0-1").replace("\"adjudication\"", "\"time forfeit\"");
            if over.is_empty() { text } else { format!("[OverTime \"{over}\"]\n{text}") }
        };
        let forged = |first_game_pgn: String| {
            let mut pair = pair(0, [0, 2]);
            pair.first_game_pgn = first_game_pgn;
            report(vec![pair], totals(&[[0, 2]]))
        };
        refused(worker.report_pairs(forged(forfeit("1.0"))).await.unwrap_err(), "within the 10.100 s it had");
        refused(worker.report_pairs(forged(forfeit(""))).await.unwrap_err(), "without [OverTime]");
        let unearned = game("new", "base", "1. h2e2 {+0.10 0.100s} h9g7 {+4.00 0.100s}", "0-1");
        refused(worker.report_pairs(forged(unearned)).await.unwrap_err(), "neither the test's adjudication");
        let faster = forfeit("11").replace("10+0.1", "1+0.01");
        refused(worker.report_pairs(forged(faster)).await.unwrap_err(), "not the lease's 10+0.1");

        // A unit outside the lease, twice the same unit, totals that disagree.
        refused(
            worker.report_pairs(report(vec![pair(9, [1, 1])], totals(&[[1, 1]]))).await.unwrap_err(),
            "not in lease",
        );
        refused(
            worker
                .report_pairs(report(vec![pair(0, [1, 1]), pair(0, [1, 1])], totals(&[[1, 1], [1, 1]])))
                .await
                .unwrap_err(),
            "twice",
        );
        refused(worker.report_pairs(report(vec![pair(0, [1, 1])], totals(&[[2, 2]]))).await.unwrap_err(), "disagree");
        let mut short = totals(&[[1, 1]]);
        short.pentanomial.pop();
        refused(worker.report_pairs(report(vec![pair(0, [1, 1])], short)).await.unwrap_err(), "5 counts");
        // Another worker's lease.
        let status = intruder.report_pairs(report(vec![pair(0, [1, 1])], totals(&[[1, 1]]))).await.unwrap_err();
        assert_eq!(status.code(), Code::NotFound, "{backend:?}");
        // Nothing of that counted.
        assert_eq!(admin.get_job(v1::JobId { job_id: job.job_id }).await.unwrap().into_inner().units_done, 0);
        // A good report, sent twice (its acknowledgement lost), counts once.
        let good = report(vec![pair(0, [2, 1])], totals(&[[2, 1]]));
        worker.report_pairs(good.clone()).await.unwrap();
        worker.report_pairs(good).await.unwrap();
        // Attack (F8 of the review of 2026-11-28): a pair this lease reported before
        // was replayed again on every resend, on the async runtime (a third of a second
        // a 512-pair report, as often as the token's rate allows). It is now skipped
        // unread: its games resent as a megabyte of junk are not even looked at.
        let mut junk = pair(0, [2, 1]);
        junk.first_game_pgn = "1. h2e2 ".repeat(1 << 17);
        junk.second_game_pgn = "junk".into();
        worker.report_pairs(report(vec![junk], totals(&[[2, 1]]))).await.unwrap();
        let state = admin.get_job(v1::JobId { job_id: job.job_id }).await.unwrap().into_inner();
        assert_eq!(state.units_done, 1, "{backend:?}");
        assert_eq!(state.totals.unwrap().wins, 1);
        // Totals that go down are refused.
        refused(worker.report_pairs(report(vec![], totals(&[]))).await.unwrap_err(), "went down");
        // A report on a lease of another job's kind is refused.
        let status = worker
            .upload_chunk(v1::UploadChunkRequest { lease_id: id, unit: 0, chunk: vec![1, 2, 3], games: 1 })
            .await
            .unwrap_err();
        assert!(status.message().contains("not a self-play job"), "{}", status.message());
    }
}

/// A game ended "abandoned" (an engine crashed or hung) counted for whichever side
/// the worker said: it must now name the side whose engine failed, lose for it, and
/// fail on that side's move, before adjudication ended the game.
#[tokio::test]
async fn a_forged_abandoned_win_is_refused_and_an_honest_one_counts() {
    for backend in BACKENDS {
        let served = serve(backend, config()).await;
        let mut admin = client(served.address, &served.client_token).await;
        let job = create(&mut admin, 10).await;
        let mut worker = registered_worker(&served, "w", &[]).await;
        let lease = worker.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
        // The new engine, Red, wins the first game because the base's engine failed.
        let abandoned = |moves: &str, failed: &str| {
            let text = game("new", "base", moves, "1-0").replace("\"adjudication\"", "\"abandoned\"");
            if failed.is_empty() { text } else { format!("[FailedEngine \"{failed}\"]\n{text}") }
        };
        let report = |first_game_pgn: String| {
            let mut pair = pair(lease.units[0], [2, 1]);
            pair.first_game_pgn = first_game_pgn;
            v1::ReportPairsRequest {
                lease_id: lease.lease_id,
                pairs: vec![pair],
                cumulative: Some(totals(&[[2, 1]])),
                ..Default::default()
            }
        };
        let refused = |status: tonic::Status, needle: &str| {
            assert_eq!(status.code(), Code::InvalidArgument, "{backend:?} {status:?}");
            let unit = format!("unit {}: game 1 of the pair: ", lease.units[0]);
            assert!(status.message().starts_with(&unit), "{backend:?}: '{}' names no game", status.message());
            assert!(status.message().contains(needle), "{backend:?}: '{}' lacks '{needle}'", status.message());
        };
        let black_to_move = "1. h2e2 {+0.10 0.100s}";
        let red_to_move = "1. h2e2 {+0.10 0.100s} h9g7 {-0.10 0.100s}";
        // No engine named; the base blamed on the new engine's move; a failure after
        // the test's adjudication drew the game (at the first 0.00).
        let status = worker.report_pairs(report(abandoned(black_to_move, ""))).await.unwrap_err();
        refused(status, "abandoned without [FailedEngine]");
        let status = worker.report_pairs(report(abandoned(red_to_move, "black"))).await.unwrap_err();
        refused(status, "Black's engine failed after ply 2, where Red was to move");
        let status = worker.report_pairs(report(abandoned("1. h2e2 {+0.00 0.100s}", "black"))).await.unwrap_err();
        refused(status, "abandoned at ply 1, where adjudication had ended it");
        // The new engine's own failure, reported as its win.
        let status = worker.report_pairs(report(abandoned(red_to_move, "red"))).await.unwrap_err();
        refused(status, "Red's engine failed, but the result says otherwise");
        assert_eq!(admin.get_job(v1::JobId { job_id: job.job_id }).await.unwrap().into_inner().units_done, 0);
        // The base's engine failing on its own move counts as the new engine's win.
        worker.report_pairs(report(abandoned(black_to_move, "black"))).await.unwrap();
        let state = admin.get_job(v1::JobId { job_id: job.job_id }).await.unwrap().into_inner();
        assert_eq!(state.units_done, 1, "{backend:?}");
        let t = state.totals.unwrap();
        assert_eq!([t.wins, t.draws, t.losses], [1, 1, 0], "{backend:?}");
        assert_eq!(state.reasons.get("abandoned"), Some(&1), "{backend:?}: {:?}", state.reasons);
    }
}

/// A worker can name an engine failure that never happened, within the evidence rules
/// (the side it names was to move and loses). The same engines play on every worker:
/// one whose base engine "fails" far more often than on the others is quarantined by its
/// rate of failures against theirs, its pairs set aside.
#[tokio::test]
async fn a_worker_whose_base_engine_fails_far_more_often_than_on_the_others_is_quarantined() {
    for backend in BACKENDS {
        let served = serve(backend, SchedulerConfig { lease_seconds: 64.0 * 72.0, ..config() }).await;
        let mut admin = client(served.address, &served.client_token).await;
        let job = create(&mut admin, 400).await;
        let mut honest = registered_worker(&served, "honest", &[]).await;
        let (mut forger, _) = registered_worker_token(&served, "forger", &[]).await;
        let honest_lease = honest.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
        let lease = forger.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
        let played = vec![[2u8, 1u8]; 40];
        let request = v1::ReportPairsRequest {
            lease_id: honest_lease.lease_id,
            pairs: honest_lease.units.iter().zip(&played).map(|(&u, &p)| pair(u, p)).collect(),
            cumulative: Some(totals(&played)),
            ..Default::default()
        };
        honest.report_pairs(request).await.unwrap();
        // Each pair's first game won because the base's engine "failed" on its move.
        let forged = |unit: u64| {
            let mut pair = pair(unit, [2, 1]);
            let text = game("new", "base", "1. h2e2 {+0.10 0.100s}", "1-0");
            pair.first_game_pgn =
                format!("[FailedEngine \"black\"]\n{}", text.replace("\"adjudication\"", "\"abandoned\""));
            pair
        };
        let report = |count: usize| v1::ReportPairsRequest {
            lease_id: lease.lease_id,
            pairs: lease.units[count - 5..count].iter().map(|&u| forged(u)).collect(),
            cumulative: Some(totals(&played[..count])),
            ..Default::default()
        };
        // Five pairs are ten games, too few to judge; at ten pairs, half its games
        // failed where the others' never did.
        let reply = forger.report_pairs(report(5)).await.unwrap().into_inner();
        assert!(!reply.stop, "{backend:?}");
        let reply = forger.report_pairs(report(10)).await.unwrap().into_inner();
        assert!(reply.stop, "{backend:?}: told to stop");
        let workers = workers(&mut admin).await;
        let listed = workers.iter().find(|w| w.capabilities.as_ref().unwrap().name == "forger").unwrap();
        assert_eq!(listed.standing, "quarantined", "{backend:?}");
        assert!(listed.standing_reason.contains("10 of its 20 games"), "{backend:?}: {}", listed.standing_reason);
        let state = admin.get_job(v1::JobId { job_id: job.job_id }).await.unwrap().into_inner();
        assert_eq!(state.units_done, 40, "{backend:?}: only the honest pairs count");
        assert_eq!(state.reasons.get("abandoned"), None, "{backend:?}: {:?}", state.reasons);
    }
}

/// The records of `unit` of a self-play job of `spec` as a worker plays them, at
/// `nodes` a move: the coordinator does not search again, so it cannot tell them from
/// the spec's.
pub fn unit_records(spec: &v1::SelfPlaySpec, unit: u64, nodes: u64) -> Vec<Record> {
    let mut settings = xq_proto::self_play_games(spec, None).unwrap();
    settings.nodes = nodes;
    settings.seed = spec.seed.wrapping_add(unit * u64::from(spec.games_per_unit));
    (0..spec.games_per_unit as usize).flat_map(|game| play_game(&settings, game, &Shared::new(1)).records).collect()
}

/// The chunk of [`unit_records`].
pub fn unit_chunk(spec: &v1::SelfPlaySpec, unit: u64, nodes: u64) -> Vec<u8> {
    write_chunk(&unit_records(spec, unit, nodes))
}

#[tokio::test]
async fn a_report_without_the_required_bench_signatures_is_refused() {
    let served = serve(BACKENDS[0], config()).await;
    let mut admin = client(served.address, &served.client_token).await;
    let mut request = test_request(&mut admin, 4, None).await;
    request.new_engine.as_mut().unwrap().bench_signature = 721742;
    admin.create_test(request).await.unwrap();
    let mut worker = registered_worker(&served, "w", &[]).await;
    let lease = worker.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
    let Some(v1::lease::Work::MatchSpec(spec)) = &lease.work else { panic!("a match") };
    assert_eq!(spec.new_engine.as_ref().unwrap().bench_signature, 721742, "the worker is told what to verify");
    let report = |signatures: Vec<u64>| v1::ReportPairsRequest {
        lease_id: lease.lease_id,
        pairs: vec![pair(0, [1, 1])],
        cumulative: Some(totals(&[[1, 1]])),
        verified_signatures: signatures,
        ..Default::default()
    };
    let status = worker.report_pairs(report(vec![])).await.unwrap_err();
    assert_eq!(status.code(), Code::FailedPrecondition);
    assert!(status.message().contains("bench signature 0 verified, 721742 required"), "{}", status.message());
    assert_eq!(worker.report_pairs(report(vec![721741, 0])).await.unwrap_err().code(), Code::FailedPrecondition);
    worker.report_pairs(report(vec![721742, 0])).await.unwrap();
}

/// A lease left to scale its clocks by its engines' speed is checked against the
/// factor its report names, which must be one a worker can reach: none, or a worker
/// claiming to be a hundred times slower for a clock a hundred times longer, is refused.
#[tokio::test]
async fn a_report_scaled_by_the_engines_speed_names_a_factor_within_the_bounds() {
    let served = serve(BACKENDS[0], SchedulerConfig { reference_nps: 1_000_000, ..config() }).await;
    let mut admin = client(served.address, &served.client_token).await;
    let mut request = test_request(&mut admin, 4, None).await;
    request.new_engine.as_mut().unwrap().bench_nps = 2_000_000;
    admin.create_test(request).await.unwrap();
    let mut worker = registered_worker(&served, "w", &[]).await;
    let lease = worker.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
    let Some(v1::lease::Work::MatchSpec(spec)) = &lease.work else { panic!("a match") };
    assert!(spec.scale_by_engine_speed, "left to the worker: {spec:?}");
    assert_eq!(spec.time_control, "10+0.1", "the test's own clock");
    let report = |engine_slowness: f64| v1::ReportPairsRequest {
        lease_id: lease.lease_id,
        pairs: vec![pair(0, [1, 1])],
        cumulative: Some(totals(&[[1, 1]])),
        engine_slowness,
        ..Default::default()
    };
    for unreachable in [0.0, 100.0, f64::NAN] {
        let status = worker.report_pairs(report(unreachable)).await.unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument, "{unreachable}");
        assert!(status.message().contains("a worker scales by 0.25 to 4"), "{}", status.message());
    }
    // At 2 the games' clocks must be 20+0.2: these say 10+0.1.
    let status = worker.report_pairs(report(2.0)).await.unwrap_err();
    assert!(status.message().contains("not the lease's 20+0.2"), "{}", status.message());
    worker.report_pairs(report(1.0)).await.unwrap();
}

/// An upload whose client goes away mid-stream leaves no temporary file behind.
#[tokio::test]
async fn an_abandoned_upload_leaves_nothing_behind() {
    let served = serve(BACKENDS[0], config()).await;
    let mut admin = client(served.address, &served.client_token).await;
    let first = v1::ArtifactPiece { name: "engine".to_owned(), kind: "engine".to_owned(), data: vec![7; 1 << 20] };
    // One piece, then a stream that never ends, given up after a moment.
    let pieces = tokio_stream::StreamExt::chain(tokio_stream::iter([first]), tokio_stream::pending());
    let abandoned = admin.upload_artifact(pieces);
    assert!(tokio::time::timeout(Duration::from_millis(500), abandoned).await.is_err(), "the upload is still open");
    let temporary = served.data.join("artifacts/tmp");
    let started = std::time::Instant::now();
    while std::fs::read_dir(&temporary).unwrap().count() > 0 {
        assert!(started.elapsed() < Duration::from_secs(5), "a temporary file outlived its upload");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The server goes on.
    upload(&mut admin, "engine", "engine", b"#!/bin/sh\n").await.unwrap();
}

#[tokio::test]
async fn roles_keep_submitters_to_their_own_jobs_and_tokens_expire_and_are_revoked() {
    use xq_coordinator::access::tokens::{token_hash, token_id};
    for backend in BACKENDS {
        let dir = TempDir::new("roles");
        let url = fresh_database(backend, &dir.0).await;
        let config = SchedulerConfig { require_approval: true, ..config() };
        let first = serve_on(&dir.0, &url, config.clone(), 100).await;
        let mut admin = client(first.address, &first.client_token).await;
        let submitter = |name: &str, expires_seconds| v1::CreateTokenRequest {
            role: "submitter".to_owned(),
            name: name.to_owned(),
            expires_seconds,
        };
        let alice = admin.create_token(submitter("alice", 0)).await.unwrap().into_inner();
        let bob = admin.create_token(submitter("bob", 1)).await.unwrap().into_inner();
        let mut as_alice = client(first.address, &alice.token).await;
        let mut as_bob = client(first.address, &bob.token).await;

        // A submitter's test waits for an admin's approval, and gets no worker till then.
        let request = test_request(&mut as_alice, 4, None).await;
        let job = as_alice.create_test(request).await.unwrap().into_inner();
        assert_eq!((job.state.as_str(), job.submitter.as_str()), ("pending", alice.id.as_str()), "{backend:?}");
        let id = v1::JobId { job_id: job.job_id };
        let (mut player, player_token) = registered_worker_token(&first, "w", &[]).await;
        assert!(player.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.is_none());
        // Submitters cannot do an admin's work.
        let denied = [
            as_alice.approve_job(id).await.unwrap_err(),
            as_alice.create_token(submitter("mallory", 0)).await.unwrap_err(),
            as_alice.list_tokens(v1::ListTokensRequest {}).await.unwrap_err(),
            as_alice.list_audit(v1::ListAuditRequest::default()).await.unwrap_err(),
            as_alice.create_worker_token(v1::CreateWorkerTokenRequest { name: "x".to_owned() }).await.unwrap_err(),
            as_alice
                .set_worker_standing(v1::SetWorkerStandingRequest {
                    worker_id: 1,
                    standing: "disabled".to_owned(),
                    ..Default::default()
                })
                .await
                .unwrap_err(),
            // Nor change another submitter's job.
            as_bob.stop_job(id).await.unwrap_err(),
        ];
        for status in denied {
            assert_eq!(status.code(), Code::PermissionDenied, "{backend:?}: {status:?}");
        }
        assert_eq!(admin.approve_job(id).await.unwrap().into_inner().state, "running");
        assert!(player.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.is_some());
        let priority = v1::SetPriorityRequest { job_id: job.job_id, priority: -5 };
        assert_eq!(as_alice.set_priority(priority).await.unwrap().into_inner().priority, -5, "her own job");
        // An admin's test runs at once.
        let request = test_request(&mut admin, 4, None).await;
        let admins = admin.create_test(request).await.unwrap().into_inner();
        assert_eq!(admins.state, "running");
        // Another test of Alice's waits for approval when she is revoked below.
        let request = test_request(&mut as_alice, 4, None).await;
        let waiting = as_alice.create_test(request).await.unwrap().into_inner();
        assert_eq!(waiting.state, "pending");

        // Bob's token expires after its second; revoked tokens, a worker's too, at once.
        tokio::time::sleep(Duration::from_millis(1100)).await;
        let status = as_bob.list_jobs(v1::ListJobsRequest::default()).await.unwrap_err();
        assert_eq!(status.code(), Code::Unauthenticated, "{backend:?}");
        admin.revoke_token(v1::RevokeTokenRequest { id: alice.id.clone() }).await.unwrap();
        let status = as_alice.list_jobs(v1::ListJobsRequest::default()).await.unwrap_err();
        assert_eq!(status.code(), Code::Unauthenticated, "{backend:?}");
        // What she set going ends with her token (review of 2026-11-28, F11): her
        // running and her waiting test stop, saying why; the admin's plays on.
        for job in [job.job_id, waiting.job_id] {
            let ended = admin.get_job(v1::JobId { job_id: job }).await.unwrap().into_inner();
            assert_eq!(
                (ended.state.as_str(), ended.outcome.as_str()),
                ("stopped", "its submitter's token was revoked")
            );
        }
        assert_eq!(admin.get_job(v1::JobId { job_id: admins.job_id }).await.unwrap().into_inner().state, "running");
        let player_id = token_id(&token_hash(&player_token)).to_owned();
        admin.revoke_token(v1::RevokeTokenRequest { id: player_id.clone() }).await.unwrap();
        let status = player.heartbeat(v1::HeartbeatRequest::default()).await.unwrap_err();
        assert_eq!(status.code(), Code::Unauthenticated, "{backend:?}");
        let unknown = admin.revoke_token(v1::RevokeTokenRequest { id: "nope".to_owned() }).await.unwrap_err();
        assert_eq!(unknown.code(), Code::NotFound);

        // Lists show every token, never the token itself; the audit log what was done.
        let tokens = admin.list_tokens(v1::ListTokensRequest {}).await.unwrap().into_inner().tokens;
        let find = |id: &str| tokens.iter().find(|t| t.id == id).unwrap().clone();
        assert!(find(&alice.id).revoked_ms > 0 && find(&bob.id).expires_ms > 0, "{tokens:?}");
        assert_eq!((find(&player_id).role.as_str(), find(&player_id).worker_id), ("worker", 1));
        assert!(tokens.iter().all(|t| t.id.len() == 12), "{tokens:?}");
        let entries = admin.list_audit(v1::ListAuditRequest::default()).await.unwrap().into_inner().entries;
        let actions: Vec<(&str, &str)> = entries.iter().rev().map(|e| (e.actor.as_str(), e.action.as_str())).collect();
        let admin_id = token_id(&token_hash(&first.client_token)).to_owned();
        for expected in [
            ("coordinator", "token.create"),
            (admin_id.as_str(), "token.create"),
            (alice.id.as_str(), "job.create"),
            (admin_id.as_str(), "worker.create"),
            (admin_id.as_str(), "job.approve"),
            (alice.id.as_str(), "job.priority"),
            (admin_id.as_str(), "token.revoke"),
        ] {
            assert!(actions.contains(&expected), "{backend:?}: {expected:?} not in {actions:?}");
        }
        drop(first);

        // After a restart the revocations hold, and so do the stops they made.
        let second = serve_on(&dir.0, &url, config.clone(), 100).await;
        let mut as_alice = client(second.address, &alice.token).await;
        let status = as_alice.list_jobs(v1::ListJobsRequest::default()).await.unwrap_err();
        assert_eq!(status.code(), Code::Unauthenticated, "{backend:?}");
        let mut admin = client(second.address, &second.client_token).await;
        assert_eq!(admin.get_job(id).await.unwrap().into_inner().state, "stopped", "{backend:?}");
        let admins = v1::JobId { job_id: admins.job_id };
        assert_eq!(admin.get_job(admins).await.unwrap().into_inner().state, "running", "{backend:?}");
    }
}

/// Below its disk reserve the coordinator takes no new work and no uploads, saying why,
/// and still stores the reports of work it leased before.
#[tokio::test]
async fn below_its_disk_reserve_the_coordinator_takes_no_new_work_but_keeps_results() {
    let dir = TempDir::new("reserve");
    let url = fresh_database(BACKENDS[0], &dir.0).await;
    let roomy = serve_on(&dir.0, &url, config(), 100).await;
    let mut admin = client(roomy.address, &roomy.client_token).await;
    let job = create(&mut admin, 10).await;
    let (mut player, token) = registered_worker_token(&roomy, "w", &[]).await;
    let lease = player.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
    drop(roomy);

    // The same data with a reserve no disk has.
    let full = serve_on(&dir.0, &url, SchedulerConfig { reserve_bytes: u64::MAX, ..config() }, 100).await;
    let mut admin = client(full.address, &full.client_token).await;
    let mut player = worker(full.address, &token).await;
    let report = v1::ReportPairsRequest {
        lease_id: lease.lease_id,
        pairs: vec![pair(lease.units[0], [2, 1])],
        cumulative: Some(totals(&[[2, 1]])),
        ..Default::default()
    };
    player.report_pairs(report).await.unwrap();
    assert_eq!(admin.get_job(v1::JobId { job_id: job.job_id }).await.unwrap().into_inner().units_done, 1);
    let mut other = registered_worker(&full, "other", &[]).await;
    let status = other.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert!(status.message().contains("MB free, below its reserve"), "{}", status.message());
    let status = upload(&mut admin, "e", "engine", b"#!/bin/sh\n").await.unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
}

/// A new submitter's client of `served`, and its token.
pub(crate) async fn submitter(served: &crate::common::Served, name: &str) -> (Client, String) {
    let mut admin = client(served.address, &served.client_token).await;
    let request = v1::CreateTokenRequest { role: "submitter".to_owned(), name: name.to_owned(), expires_seconds: 0 };
    let token = admin.create_token(request).await.unwrap().into_inner().token;
    (client(served.address, &token).await, token)
}

/// The workers as an admin's list shows them.
pub(crate) async fn workers(admin: &mut Client) -> Vec<v1::WorkerInfo> {
    admin.list_workers(v1::ListWorkersRequest {}).await.unwrap().into_inner().workers
}

pub(crate) async fn job_ids(client: &mut Client) -> Vec<u64> {
    let jobs = client.list_jobs(v1::ListJobsRequest::default()).await.unwrap().into_inner().jobs;
    jobs.iter().map(|job| job.job_id).collect()
}

/// Attack: workers lease by priority first, and a submitter's `xq priority N 1000000`
/// on its own job was taken, putting it before every other job. Now raising a priority
/// above the default is an admin's, at creation too; a submitter may still lower its own.
#[tokio::test]
async fn only_an_admin_raises_a_job_s_priority_above_the_default() {
    use xq_coordinator::api::grpc::DEFAULT_PRIORITY;

    let served = serve(BACKENDS[0], config()).await;
    let mut admin = client(served.address, &served.client_token).await;
    let (mut alice, token) = submitter(&served, "alice").await;
    let request = test_request(&mut alice, 4, None).await;
    let job = alice.create_test(request).await.unwrap().into_inner().job_id;
    let priority_of = |client: &mut Client| {
        let mut client = client.clone();
        async move { client.get_job(v1::JobId { job_id: job }).await.unwrap().into_inner().priority }
    };
    let set = |priority| v1::SetPriorityRequest { job_id: job, priority };
    let denied = |status: tonic::Status| {
        assert_eq!(status.code(), Code::PermissionDenied, "{status:?}");
        let rule = format!("only an admin may raise a job's priority above the default ({DEFAULT_PRIORITY})");
        assert!(status.message().contains(&rule), "{}", status.message());
    };

    denied(alice.set_priority(set(1_000_000)).await.unwrap_err());
    assert_eq!(priority_of(&mut admin).await, DEFAULT_PRIORITY, "unchanged");
    // Through the dashboard's action too.
    let url = format!("http://{}/api/v1/jobs/{job}/priority", served.address);
    let headers = [("authorization", format!("Bearer {token}")), ("content-type", "application/json".to_owned())];
    let headers: Vec<(&str, &str)> = headers.iter().map(|(name, value)| (*name, value.as_str())).collect();
    let (status, body) = crate::dashboard::request("POST", &url, &headers, r#"{"priority": 1000000}"#).await;
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("only an admin may raise"), "{body}");
    assert_eq!(priority_of(&mut admin).await, DEFAULT_PRIORITY, "unchanged");
    // Lowered, and back up to the default: hers to do.
    assert_eq!(alice.set_priority(set(-3)).await.unwrap().into_inner().priority, -3);
    assert_eq!(alice.set_priority(set(DEFAULT_PRIORITY)).await.unwrap().into_inner().priority, DEFAULT_PRIORITY);
    denied(alice.set_priority(set(DEFAULT_PRIORITY + 1)).await.unwrap_err());
    // An admin raises it; she may lower it again, not raise it back.
    assert_eq!(admin.set_priority(set(1_000_000)).await.unwrap().into_inner().priority, 1_000_000);
    assert_eq!(alice.set_priority(set(10)).await.unwrap().into_inner().priority, 10);
    denied(alice.set_priority(set(11)).await.unwrap_err());
    assert_eq!(priority_of(&mut admin).await, 10);

    // Nor may she create a job above the default: a test, an SPSA run, a tournament's
    // tests, a self-play or a verification job.
    let jobs = job_ids(&mut admin).await;
    let test = v1::CreateTestRequest { priority: 5, ..test_request(&mut alice, 4, None).await };
    denied(alice.create_test(test.clone()).await.unwrap_err());
    let spsa = v1::CreateSpsaRequest {
        test: Some(v1::CreateTestRequest { base_engine: None, ..test.clone() }),
        spsa: Some(v1::SpsaSpec { params: "A, 100, 0, 200, 10, 0.002".to_owned(), ..Default::default() }),
    };
    denied(alice.create_spsa(spsa).await.unwrap_err());
    let tournament = v1::CreateTournamentRequest {
        engines: vec![test.new_engine.clone().unwrap(), test.base_engine.clone().unwrap()],
        settings: Some(v1::CreateTestRequest { time_control: "10+0.1".to_owned(), priority: 5, ..Default::default() }),
        ..Default::default()
    };
    denied(alice.create_tournament(tournament.clone()).await.unwrap_err());
    let self_play = v1::CreateSelfPlayRequest {
        spec: Some(v1::SelfPlaySpec { games_per_unit: 1, nodes: 100, ..Default::default() }),
        units: 1,
        priority: 5,
        ..Default::default()
    };
    denied(alice.create_self_play(self_play.clone()).await.unwrap_err());
    let verification = v1::CreateVerificationRequest {
        selfplay: Some(v1::SelfPlaySpec { games_per_unit: 1, nodes: 100, ..Default::default() }),
        games: 10,
        priority: 5,
        ..Default::default()
    };
    denied(alice.create_verification(verification).await.unwrap_err());
    assert_eq!(job_ids(&mut admin).await, jobs, "nothing stored");
    let listed = admin.list_tournaments(v1::ListTournamentsRequest::default()).await.unwrap().into_inner();
    assert!(listed.tournaments.is_empty(), "{listed:?}");

    // At the default or below, hers are taken; an admin's above it too.
    let lower = v1::CreateSelfPlayRequest { priority: -1, ..self_play.clone() };
    assert_eq!(alice.create_self_play(lower).await.unwrap().into_inner().priority, -1);
    assert_eq!(admin.create_test(test).await.unwrap().into_inner().priority, 5);
    assert_eq!(admin.create_tournament(tournament).await.unwrap().into_inner().pairings.len(), 1);
}

/// The review's throughput grab (2026-11-28, F5): a submitter's test asking a share of
/// 4,294,967,295 took 7 of 8 leases at the default priority. A share past
/// `MAX_THROUGHPUT` is refused to anyone; above the default (100) only an admin's is
/// taken, on every creation path, and nothing refused is stored; the most a submitter
/// may ask shares eight workers' leases evenly with another submitter's default.
#[tokio::test]
async fn only_an_admin_asks_a_share_of_the_fleet_above_the_default_and_nobody_past_the_bound() {
    use xq_coordinator::jobs::{DEFAULT_THROUGHPUT, MAX_THROUGHPUT};

    let served = serve(BACKENDS[0], config()).await;
    let mut admin = client(served.address, &served.client_token).await;
    let (mut alice, _) = submitter(&served, "alice").await;
    let (mut bob, _) = submitter(&served, "bob").await;
    let test = test_request(&mut alice, 1000, None).await;
    let jobs = job_ids(&mut admin).await;
    let grab = v1::CreateTestRequest { throughput: u32::MAX, ..test.clone() };
    for status in [alice.create_test(grab.clone()).await.unwrap_err(), admin.create_test(grab).await.unwrap_err()] {
        assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
        assert!(status.message().contains(&format!("at most {MAX_THROUGHPUT}")), "{}", status.message());
    }
    let denied = |status: tonic::Status| {
        assert_eq!(status.code(), Code::PermissionDenied, "{status:?}");
        let rule = format!("only an admin may ask more than the default share ({DEFAULT_THROUGHPUT})");
        assert!(status.message().contains(&rule), "{}", status.message());
    };
    let above = v1::CreateTestRequest { throughput: DEFAULT_THROUGHPUT + 1, ..test.clone() };
    denied(alice.create_test(above.clone()).await.unwrap_err());
    let spsa = v1::CreateSpsaRequest {
        test: Some(v1::CreateTestRequest { base_engine: None, ..above.clone() }),
        spsa: Some(v1::SpsaSpec { params: "A, 100, 0, 200, 10, 0.002".to_owned(), ..Default::default() }),
    };
    denied(alice.create_spsa(spsa).await.unwrap_err());
    let tournament = v1::CreateTournamentRequest {
        engines: vec![test.new_engine.clone().unwrap(), test.base_engine.clone().unwrap()],
        settings: Some(v1::CreateTestRequest {
            time_control: "10+0.1".to_owned(),
            throughput: DEFAULT_THROUGHPUT + 1,
            ..Default::default()
        }),
        ..Default::default()
    };
    denied(alice.create_tournament(tournament).await.unwrap_err());
    let self_play = v1::CreateSelfPlayRequest {
        spec: Some(v1::SelfPlaySpec { games_per_unit: 1, nodes: 100, ..Default::default() }),
        units: 1,
        throughput: DEFAULT_THROUGHPUT + 1,
        ..Default::default()
    };
    denied(alice.create_self_play(self_play).await.unwrap_err());
    assert_eq!(job_ids(&mut admin).await, jobs, "nothing refused is stored");

    // Hers at the most she may ask against Bob's at the default: an even split.
    let hers = alice.create_test(v1::CreateTestRequest { throughput: DEFAULT_THROUGHPUT, ..test }).await;
    let hers = hers.unwrap().into_inner().job_id;
    let his = test_request(&mut bob, 1000, None).await;
    let his = bob.create_test(his).await.unwrap().into_inner().job_id;
    let mut leases = std::collections::HashMap::new();
    for index in 0..8 {
        let mut worker = crate::common::registered_worker(&served, &format!("w{index}"), &[]).await;
        let lease = worker.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
        *leases.entry(lease.job_id).or_insert(0) += 1;
    }
    assert_eq!((leases[&hers], leases[&his]), (4, 4), "{leases:?}");
    // An admin's share above the default, up to the bound, is taken.
    assert!(admin.create_test(above.clone()).await.is_ok());
    assert!(admin.create_test(v1::CreateTestRequest { throughput: MAX_THROUGHPUT, ..above }).await.is_ok());
}

/// Writes a token row as another version, or a hand edit, may leave it.
async fn store_token_row(pool: &sqlx::AnyPool, token: &str, role: &str, worker_id: Option<i64>) {
    sqlx::query(
        "INSERT INTO tokens (hash, role, worker_id, created_ms, name, expires_ms, revoked_ms) \
         VALUES ($1, $2, $3, 0, 'stored', 0, 0)",
    )
    .bind(xq_coordinator::access::tokens::token_hash(token))
    .bind(role.to_owned())
    .bind(worker_id)
    .execute(pool)
    .await
    .unwrap();
}

/// Roles fail closed: a stored token whose role this version does not know (a newer
/// version's, a hand edit, a case typo), or a worker token without its worker, grants
/// nothing, where it used to load as an admin's. Its holder is told why, the
/// coordinator starts and serves everyone else, and an admin can revoke it.
#[tokio::test]
async fn a_token_of_an_unknown_role_or_a_worker_token_without_its_worker_grants_nothing() {
    use xq_coordinator::access::tokens::{token_hash, token_id};
    for backend in BACKENDS {
        let dir = TempDir::new("roles-closed");
        let url = fresh_database(backend, &dir.0).await;
        let first = serve_on(&dir.0, &url, config(), 100).await;
        let pool = first.coordinator.shared.storage.pool().clone();
        store_token_row(&pool, "superuser-token", "superuser", None).await;
        store_token_row(&pool, "capital-admin-token", "Admin", None).await;
        store_token_row(&pool, "workerless-token", "worker", None).await;
        drop(first);
        let served = serve_on(&dir.0, &url, config(), 100).await;
        for token in ["superuser-token", "capital-admin-token", "workerless-token"] {
            let mut as_client = client(served.address, token).await;
            let refused = [
                as_client.list_jobs(v1::ListJobsRequest::default()).await.unwrap_err(),
                as_client
                    .create_token(v1::CreateTokenRequest {
                        role: "admin".to_owned(),
                        name: "escalated".to_owned(),
                        expires_seconds: 0,
                    })
                    .await
                    .unwrap_err(),
                as_client.list_tokens(v1::ListTokensRequest {}).await.unwrap_err(),
            ];
            for status in refused {
                assert_eq!(status.code(), Code::PermissionDenied, "{backend:?} {token}: {status:?}");
                assert!(status.message().contains("this token grants nothing"), "{}", status.message());
            }
            let mut as_worker = worker(served.address, token).await;
            let status = as_worker.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap_err();
            assert_eq!(status.code(), Code::PermissionDenied, "{backend:?} {token}");
            // The dashboard's actions too, naming the problem.
            let url = format!("http://{}/api/v1/jobs/1/stop", served.address);
            let bearer = format!("Bearer {token}");
            let (status, body) = crate::dashboard::request("POST", &url, &[("authorization", &bearer)], "").await;
            assert_eq!(status, 403, "{backend:?} {token}: {body}");
            assert!(body.contains("this token grants nothing"), "{body}");
        }
        let mut admin = client(served.address, &served.client_token).await;
        let status = client(served.address, "superuser-token")
            .await
            .list_jobs(v1::ListJobsRequest::default())
            .await
            .unwrap_err();
        assert!(status.message().contains("'superuser' is not one this coordinator knows"), "{}", status.message());
        let status = client(served.address, "workerless-token")
            .await
            .list_jobs(v1::ListJobsRequest::default())
            .await
            .unwrap_err();
        assert!(status.message().contains("without its worker"), "{}", status.message());
        // Everyone else is served, and an admin revokes what grants nothing.
        assert!(admin.list_jobs(v1::ListJobsRequest::default()).await.is_ok(), "{backend:?}");
        let id = token_id(&token_hash("superuser-token")).to_owned();
        admin.revoke_token(v1::RevokeTokenRequest { id }).await.unwrap();
        let status = client(served.address, "superuser-token")
            .await
            .list_jobs(v1::ListJobsRequest::default())
            .await
            .unwrap_err();
        assert_eq!(status.code(), Code::Unauthenticated, "{backend:?}");
    }
}

/// The book of job `id` as the scheduler holds it.
fn openings(served: &crate::common::Served, id: u64) -> std::sync::Arc<xq_engine::book::Book> {
    let spec = served.coordinator.shared.scheduler.spec(id).unwrap();
    let xq_coordinator::jobs::JobSpec::Match(job) = &*spec else { panic!("job {id} is a match") };
    job.openings.clone().expect("a book")
}

/// Attack: a submitter creates test after test over one large book. Each creation
/// parsed the book again on the request runtime; now a book is parsed once per content
/// (off the runtime, by construction: `coordinator/src/books.rs`), its jobs share it,
/// and the book parsed at start-up is the one later creations find.
#[tokio::test]
async fn tests_over_one_book_share_one_parse_from_start_up_on() {
    let dir = TempDir::new("books");
    let url = fresh_database(crate::common::Backend::Sqlite, &dir.0).await;
    let served = serve_on(&dir.0, &url, config(), 100).await;
    let mut admin = client(served.address, &served.client_token).await;
    let book = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../books/xiangqi-4ply.epd");
    let book = upload(&mut admin, "4ply.epd", "book", &std::fs::read(book).unwrap()).await.unwrap();
    let mut request = test_request(&mut admin, 4, None).await;
    request.book = Some(book);
    let mut jobs = Vec::new();
    for _ in 0..3 {
        jobs.push(admin.create_test(request.clone()).await.unwrap().into_inner().job_id);
    }
    let books = &served.coordinator.shared.books;
    assert_eq!(books.parses(), 1);
    assert!(jobs.iter().all(|&id| std::sync::Arc::ptr_eq(&openings(&served, id), &openings(&served, jobs[0]))));

    drop(served);
    let restarted = serve_on(&dir.0, &url, config(), 100).await;
    let mut admin = client(restarted.address, &restarted.client_token).await;
    jobs.push(admin.create_test(request).await.unwrap().into_inner().job_id);
    assert_eq!(restarted.coordinator.shared.books.parses(), 1, "parsed once at start-up, for every job");
    assert!(jobs.iter().all(|&id| std::sync::Arc::ptr_eq(&openings(&restarted, id), &openings(&restarted, jobs[0]))));
}
