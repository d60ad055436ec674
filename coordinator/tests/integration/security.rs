//! Nothing a worker or client sends is trusted: tokens, sizes, ranges, artifacts,
//! totals and games are checked, and every refusal says what was wrong.

use std::time::Duration;

use tokio_stream::StreamExt;
use tonic::Code;
use xq_coordinator::scheduler::config::SchedulerConfig;
use xq_engine::color::Color;
use xq_engine::xiangqi::data::{Record, write_chunk};
use xq_engine::xiangqi::rules::Outcome;
use xq_engine::xiangqi::search::Shared;
use xq_engine::xiangqi::selfplay::play_game;
use xq_proto::v1;

use crate::common::{
    BACKENDS, Client, Random, TempDir, client, fresh_database, game, pair, registered_worker, registered_worker_token,
    serve, serve_on, serve_with, test_request, totals, upload, worker,
};

fn config() -> SchedulerConfig {
    SchedulerConfig { lease_seconds: 4.0 * 72.0, reference_nps: 0, ..SchedulerConfig::default() }
}

async fn create(admin: &mut Client, pairs: u64) -> v1::Job {
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

#[tokio::test]
async fn self_play_chunks_are_checked_then_stored_and_streamed() {
    let served = serve(BACKENDS[1], config()).await;
    let mut admin = client(served.address, &served.client_token).await;
    let spec = v1::SelfPlaySpec { nodes: 1000, games_per_unit: 2, ..Default::default() };
    let job = admin
        .create_self_play(v1::CreateSelfPlayRequest { spec: Some(spec.clone()), units: 2, ..Default::default() })
        .await
        .unwrap()
        .into_inner();
    let mut worker = registered_worker(&served, "w", &[]).await;
    let lease = worker.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
    assert!(matches!(lease.work, Some(v1::lease::Work::SelfPlay(_))));
    let status = worker
        .upload_chunk(v1::UploadChunkRequest {
            lease_id: lease.lease_id,
            unit: 0,
            chunk: b"garbage".to_vec(),
            games: 2,
        })
        .await
        .unwrap_err();
    assert!(status.message().starts_with("chunk:"), "{}", status.message());
    let uploaded = [unit_chunk(&spec, 0, 20), unit_chunk(&spec, 1, 20)];
    for unit in [0, 1] {
        let chunk = uploaded[unit as usize].clone();
        let request = v1::UploadChunkRequest { lease_id: lease.lease_id, unit, chunk, games: 2 };
        let stop = worker.upload_chunk(request.clone()).await.unwrap().into_inner().stop;
        assert_eq!(stop, unit == 1);
        worker.upload_chunk(request).await.unwrap();
    }
    let records: u64 =
        uploaded.iter().map(|chunk| xq_engine::xiangqi::data::read_chunk(chunk).unwrap().len() as u64).sum();
    let state = admin.get_job(v1::JobId { job_id: job.job_id }).await.unwrap().into_inner();
    assert_eq!((state.state.as_str(), state.positions), ("finished", records));
    let chunks = crate::common::collect(
        admin.stream_training_data(v1::JobId { job_id: job.job_id }).await.unwrap().into_inner(),
    )
    .await;
    assert_eq!(chunks.iter().map(|c| c.unit).collect::<Vec<_>>(), [0, 1]);
    assert_eq!(chunks[0].chunk, uploaded[0]);

    // Other bytes for a stored unit change nothing that is stored or streamed.
    let other = unit_chunk(&spec, 0, 30);
    assert_ne!(other, uploaded[0]);
    let request = v1::UploadChunkRequest { lease_id: lease.lease_id, unit: 0, chunk: other, games: 2 };
    worker.upload_chunk(request).await.unwrap();
    let again = crate::common::collect(
        admin.stream_training_data(v1::JobId { job_id: job.job_id }).await.unwrap().into_inner(),
    )
    .await;
    assert_eq!(again, chunks);
    let state = admin.get_job(v1::JobId { job_id: job.job_id }).await.unwrap().into_inner();
    assert_eq!(state.positions, records);

    // A stored chunk damaged on disk is refused on read, naming its file, whether a
    // byte changed or the file was cut short.
    let dir = served.data.join(format!("chunks/{}", job.job_id));
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    let mut bytes = std::fs::read(&files[1]).unwrap();
    bytes[40] ^= 0x10;
    std::fs::write(&files[1], &bytes).unwrap();
    let stream = admin.stream_training_data(v1::JobId { job_id: job.job_id }).await.unwrap().into_inner();
    let damaged = read_until_error(stream).await;
    assert_eq!(damaged.code(), Code::DataLoss, "{damaged:?}");
    assert!(damaged.message().contains("do not hash") && damaged.message().contains("chunks/"), "{damaged:?}");
    std::fs::write(&files[1], &bytes[..bytes.len() / 2]).unwrap();
    let stream = admin.stream_training_data(v1::JobId { job_id: job.job_id }).await.unwrap().into_inner();
    let cut = read_until_error(stream).await;
    assert_eq!(cut.code(), Code::DataLoss, "{cut:?}");
    assert!(cut.message().contains("shorter than"), "{cut:?}");
}

/// Reads a stream until it fails; its error.
async fn read_until_error<T>(mut stream: tonic::Streaming<T>) -> tonic::Status {
    loop {
        match stream.message().await {
            Ok(Some(_)) => continue,
            Ok(None) => panic!("the stream ended without an error"),
            Err(status) => return status,
        }
    }
}

/// A chunk holding more records than its unit's games can make is refused: 2 games of
/// at most 10 plies make at most 20 records.
#[tokio::test]
async fn a_chunk_larger_than_its_unit_can_be_is_refused() {
    let served = serve(BACKENDS[0], config()).await;
    let mut admin = client(served.address, &served.client_token).await;
    let spec = v1::SelfPlaySpec { nodes: 1000, games_per_unit: 2, max_plies: 10, ..Default::default() };
    admin
        .create_self_play(v1::CreateSelfPlayRequest { spec: Some(spec.clone()), units: 1, ..Default::default() })
        .await
        .unwrap();
    let mut worker = registered_worker(&served, "w", &[]).await;
    let lease = worker.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
    let upload = |chunk| v1::UploadChunkRequest { lease_id: lease.lease_id, unit: 0, chunk, games: 2 };
    // The unit's two games of ten plies, one record more.
    let mut records = unit_records(&spec, 0, 20);
    assert_eq!(records.len(), 20);
    records.push(Record { ply: 10, ..records[19].clone() });
    let status = worker.upload_chunk(upload(write_chunk(&records))).await.unwrap_err();
    assert!(status.message().contains("21 records, more than 2 games of at most 10 plies"), "{}", status.message());
    assert!(worker.upload_chunk(upload(unit_chunk(&spec, 0, 20))).await.unwrap().into_inner().stop);
}

/// A self-play chunk is checked beyond its records: its games are played again from
/// the unit's seeded openings by the job's rules. Records that are not the games they
/// claim to be (results flipped, positions shuffled) are refused, naming the game and
/// the record, and neither stored nor counted, though counted against the worker; the
/// unit's honest chunk then counts.
#[tokio::test]
async fn a_chunk_of_forged_games_is_refused_naming_game_and_record_and_the_honest_one_counts() {
    let served = serve(BACKENDS[0], config()).await;
    let mut admin = client(served.address, &served.client_token).await;
    let spec = v1::SelfPlaySpec {
        nodes: 1000,
        games_per_unit: 3,
        random_plies: 6,
        seed: 9,
        max_plies: 60,
        ..Default::default()
    };
    let request = v1::CreateSelfPlayRequest { spec: Some(spec.clone()), units: 1, ..Default::default() };
    let job = admin.create_self_play(request).await.unwrap().into_inner().job_id;
    let mut worker = registered_worker(&served, "w", &[]).await;
    let lease = worker.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
    let upload = |records: &[Record]| v1::UploadChunkRequest {
        lease_id: lease.lease_id,
        unit: 0,
        chunk: write_chunk(records),
        games: 3,
    };
    let honest = unit_records(&spec, 0, 30);
    let first_game = honest.iter().skip(1).position(|r| r.ply == 6).expect("three games") + 1;

    // Every record credited to the side that did not win the first game.
    let flipped_to = match honest[0].result {
        Outcome::Win(Color::Red) => Outcome::Win(Color::Black),
        _ => Outcome::Win(Color::Red),
    };
    let flipped: Vec<Record> = honest.iter().map(|r| Record { result: flipped_to, ..r.clone() }).collect();
    let status = worker.upload_chunk(upload(&flipped)).await.unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    let named = format!("game 0 (from record 0), record {}: result {}", first_game - 1, flipped_to.pgn());
    assert!(status.message().starts_with(&format!("chunk: {named}")), "{}", status.message());
    assert!(status.message().contains("does not fit the game's end"), "{}", status.message());

    // Two positions of the second game swapped, with their best moves.
    let mut shuffled = honest.clone();
    let (a, b) = (first_game + 3, first_game + 4);
    shuffled.swap(a, b);
    (shuffled[a].ply, shuffled[b].ply) = (honest[a].ply, honest[b].ply);
    let status = worker.upload_chunk(upload(&shuffled)).await.unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    let named = format!("game 1 (from record {first_game}), record {a}: its position is not the one");
    assert!(status.message().starts_with(&format!("chunk: {named}")), "{}", status.message());

    let state = admin.get_job(v1::JobId { job_id: job }).await.unwrap().into_inner();
    assert_eq!((state.units_done, state.positions, state.refused_reports), (0, 0, 2));
    assert!(!served.data.join(format!("chunks/{job}")).exists(), "nothing of a refused chunk is stored");

    assert!(worker.upload_chunk(upload(&honest)).await.unwrap().into_inner().stop);
    let state = admin.get_job(v1::JobId { job_id: job }).await.unwrap().into_inner();
    assert_eq!((state.state.as_str(), state.positions), ("finished", honest.len() as u64));
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
async fn connections_beyond_the_cap_are_refused_and_the_server_goes_on() {
    let served = serve_with(BACKENDS[0], config(), 2).await;
    let mut first = client(served.address, &served.client_token).await;
    let mut second = client(served.address, &served.client_token).await;
    first.list_jobs(v1::ListJobsRequest::default()).await.unwrap();
    second.list_jobs(v1::ListJobsRequest::default()).await.unwrap();
    let endpoint = tonic::transport::Endpoint::from_shared(format!("http://{}", served.address)).unwrap();
    let refused = endpoint.connect_timeout(Duration::from_secs(2)).timeout(Duration::from_secs(2)).connect().await;
    let third_failed = match refused {
        Err(_) => true,
        Ok(channel) => {
            let mut third = xq_proto::v1::client_client::ClientClient::with_interceptor(
                channel,
                xq_proto::BearerToken::new(&served.client_token).unwrap(),
            );
            third.list_jobs(v1::ListJobsRequest::default()).await.is_err()
        }
    };
    assert!(third_failed, "a third connection is served");
    assert!(served.coordinator.accept_stats.refused.load(std::sync::atomic::Ordering::Relaxed) >= 1);
    // The first two still work; when one closes, a new connection is served.
    first.list_jobs(v1::ListJobsRequest::default()).await.unwrap();
    drop(second);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut fourth = client(served.address, &served.client_token).await;
    fourth.list_jobs(v1::ListJobsRequest::default()).await.unwrap();
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
    };
    let status = worker.report_pairs(report(vec![])).await.unwrap_err();
    assert_eq!(status.code(), Code::FailedPrecondition);
    assert!(status.message().contains("bench signature 0 verified, 721742 required"), "{}", status.message());
    assert_eq!(worker.report_pairs(report(vec![721741, 0])).await.unwrap_err().code(), Code::FailedPrecondition);
    worker.report_pairs(report(vec![721742, 0])).await.unwrap();
}

/// One address may hold only its share of the connections: past it, its connections
/// are closed at once while other addresses are still served.
#[tokio::test]
async fn one_address_cannot_take_every_connection() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let caps = xq_coordinator::access::listener::ConnectionCaps {
        per_address: 2,
        ..xq_coordinator::access::listener::ConnectionCaps::total(100)
    };
    let served = serve_with(BACKENDS[0], config(), caps).await;
    let port = served.address.port();
    // A connection is served when the server answers the HTTP/2 preface with its own
    // settings; a refused one is closed without a byte.
    let open = |from: &'static str| async move {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind(format!("{from}:0").parse().unwrap()).unwrap();
        let mut stream = socket.connect(format!("127.0.0.1:{port}").parse().unwrap()).await.unwrap();
        stream.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0").await.unwrap();
        let mut buffer = [0u8; 64];
        let served = matches!(
            tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buffer)).await,
            Ok(Ok(n)) if n > 0
        );
        (stream, served)
    };
    let (first, served_first) = open("127.0.0.1").await;
    let (_second, served_second) = open("127.0.0.1").await;
    assert!(served_first && served_second);
    let (_third, served_third) = open("127.0.0.1").await;
    assert!(!served_third, "a third connection from one address");
    let (_other, served_other) = open("127.0.0.2").await;
    assert!(served_other, "another address is still served");
    assert_eq!(served.coordinator.accept_stats.refused_per_address.load(std::sync::atomic::Ordering::Relaxed), 1);
    // A closed connection gives its address's place back.
    drop(first);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(open("127.0.0.1").await.1, "the place is given back");
}

/// A connection that says nothing is closed after `first_bytes_within`, and its place
/// goes to the next; one that speaks is served.
#[tokio::test]
async fn silent_connections_are_closed_and_give_their_place_back() {
    use tokio::io::AsyncReadExt;
    let caps = xq_coordinator::access::listener::ConnectionCaps {
        total: 1,
        per_address: 1,
        first_bytes_within: Duration::from_millis(500),
    };
    let served = serve_with(BACKENDS[0], config(), caps).await;
    let start = std::time::Instant::now();
    let mut silent = tokio::net::TcpStream::connect(served.address).await.unwrap();
    let mut buffer = [0u8; 16];
    let read = tokio::time::timeout(Duration::from_secs(10), silent.read(&mut buffer)).await;
    assert!(matches!(read, Ok(Ok(0)) | Ok(Err(_))), "closed, not left open: {read:?}");
    assert!(start.elapsed() >= Duration::from_millis(500), "not before its time: {:?}", start.elapsed());
    assert_eq!(served.coordinator.accept_stats.silent.load(std::sync::atomic::Ordering::Relaxed), 1);
    // Its place is free again for a client that speaks.
    let mut admin = client(served.address, &served.client_token).await;
    admin.list_jobs(v1::ListJobsRequest::default()).await.unwrap();
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
        assert_eq!(admin.create_test(request).await.unwrap().into_inner().state, "running");

        // Bob's token expires after its second; revoked tokens, a worker's too, at once.
        tokio::time::sleep(Duration::from_millis(1100)).await;
        let status = as_bob.list_jobs(v1::ListJobsRequest::default()).await.unwrap_err();
        assert_eq!(status.code(), Code::Unauthenticated, "{backend:?}");
        admin.revoke_token(v1::RevokeTokenRequest { id: alice.id.clone() }).await.unwrap();
        let status = as_alice.list_jobs(v1::ListJobsRequest::default()).await.unwrap_err();
        assert_eq!(status.code(), Code::Unauthenticated, "{backend:?}");
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

        // After a restart the revocations hold and the approval stays.
        let second = serve_on(&dir.0, &url, config.clone(), 100).await;
        let mut as_alice = client(second.address, &alice.token).await;
        let status = as_alice.list_jobs(v1::ListJobsRequest::default()).await.unwrap_err();
        assert_eq!(status.code(), Code::Unauthenticated, "{backend:?}");
        let mut admin = client(second.address, &second.client_token).await;
        assert_eq!(admin.get_job(id).await.unwrap().into_inner().state, "running", "{backend:?}");
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

/// The server tells every HTTP/2 client how many requests a connection may carry at once.
#[tokio::test]
async fn http2_connections_are_told_their_stream_limit() {
    let served = serve(BACKENDS[0], config()).await;
    let tcp = tokio::net::TcpStream::connect(served.address).await.unwrap();
    let (_send, mut connection) = h2::client::handshake(tcp).await.unwrap();
    // The server's SETTINGS arrive with the first frames it sends.
    let settings = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            let limit = connection.max_concurrent_send_streams();
            if limit != usize::MAX {
                return limit;
            }
            // Drives the connection for a moment: it reads the server's frames.
            let _ = tokio::time::timeout(Duration::from_millis(50), &mut connection).await;
        }
    })
    .await
    .expect("the server's settings within 5 s");
    assert_eq!(settings, xq_coordinator::server::MAX_STREAMS as usize);
}

/// The value of the metric line `name` (0 when absent).
fn metric(text: &str, name: &str) -> u64 {
    text.lines().find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.parse().ok()).unwrap_or(0)
}

/// Attack: every request path under `/xq.v1.` became a metric label, before any token
/// was checked, so 3,000 GETs of made-up paths added 17 MB to `/metrics`. Now only the
/// contract's methods and the dashboard's routes are labels; the rest count as one.
#[tokio::test]
async fn made_up_grpc_paths_count_under_one_label_and_do_not_grow_the_metrics() {
    use http_body_util::{BodyExt, Empty};
    use hyper_util::client::legacy::Client as HttpClient;
    use xq_coordinator::api::http::UNMATCHED;

    let served = serve(BACKENDS[0], config()).await;
    let http = HttpClient::builder(hyper_util::rt::TokioExecutor::new()).build_http::<Empty<bytes::Bytes>>();
    let get = |path: String| {
        let uri: http::Uri = format!("http://{}{path}", served.address).parse().unwrap();
        let http = http.clone();
        async move { http.get(uri).await.unwrap().into_body().collect().await.unwrap().to_bytes() }
    };
    let unmatched = format!("xq_request_seconds_count{{method=\"{UNMATCHED}\"}}");
    let before = String::from_utf8(get("/metrics".to_owned()).await.to_vec()).unwrap();

    const SENT: u64 = 3_000;
    let mut random = Random(0x5eed_1abe1);
    let mut made_up = Vec::new();
    for i in 0..SENT {
        let service = ["Worker", "Client", "Nothing"][i as usize % 3];
        let path = format!("/xq.v1.{service}/M{:016x}", random.next());
        get(path.clone()).await;
        made_up.push(path);
    }
    let after = String::from_utf8(get("/metrics".to_owned()).await.to_vec()).unwrap();
    assert_eq!(metric(&after, &unmatched), metric(&before, &unmatched) + SENT, "of {} bytes", after.len());
    // One label's lines (a histogram, the refusals by status) and longer counts: a
    // few kilobytes, where a label per path added 17 MB.
    let grown = after.len().saturating_sub(before.len());
    assert!(grown < 16 * 1024, "/metrics grew by {grown} bytes, from {} to {}", before.len(), after.len());
    assert!(made_up.iter().all(|path| !after.contains(path.as_str())), "a made-up path became a label");

    // A method of the contract still has its own label.
    let mut admin = client(served.address, &served.client_token).await;
    admin.list_jobs(v1::ListJobsRequest::default()).await.unwrap();
    let metrics = String::from_utf8(get("/metrics".to_owned()).await.to_vec()).unwrap();
    assert_eq!(metric(&metrics, "xq_request_seconds_count{method=\"/xq.v1.Client/ListJobs\"}"), 1, "{metrics}");
    assert!(xq_proto::GRPC_METHODS.contains(&"/xq.v1.Worker/Lease"), "{:?}", xq_proto::GRPC_METHODS);
}

/// A new submitter's client of `served`, and its token.
async fn submitter(served: &crate::common::Served, name: &str) -> (Client, String) {
    let mut admin = client(served.address, &served.client_token).await;
    let request = v1::CreateTokenRequest { role: "submitter".to_owned(), name: name.to_owned(), expires_seconds: 0 };
    let token = admin.create_token(request).await.unwrap().into_inner().token;
    (client(served.address, &token).await, token)
}

/// The workers as an admin's list shows them.
async fn workers(admin: &mut Client) -> Vec<v1::WorkerInfo> {
    admin.list_workers(v1::ListWorkersRequest {}).await.unwrap().into_inner().workers
}

async fn job_ids(client: &mut Client) -> Vec<u64> {
    let jobs = client.list_jobs(v1::ListJobsRequest::default()).await.unwrap().into_inner().jobs;
    jobs.iter().map(|job| job.job_id).collect()
}

/// Attack: a submitter's SPSA run of 20,000 parameters was taken, and every lease of it
/// (each carrying every parameter twice) was over the 8 MiB reply limit, so each
/// worker that leased it exited. Now the parameters are bounded, and any job whose
/// leases could pass the limit is refused when it is created.
#[tokio::test]
async fn an_spsa_run_or_test_whose_leases_would_not_fit_a_reply_is_refused_and_nothing_stored() {
    use xq_coordinator::jobs::spsa::{MAX_NAME_CHARS, MAX_PARAMETERS};

    // Leases of up to 3,000,000 units, so that a test of as many pairs makes one too big.
    let config = SchedulerConfig { max_units_per_lease: 3_000_000, ..config() };
    let served = serve(BACKENDS[0], config).await;
    let (mut mallory, _) = submitter(&served, "mallory").await;
    let mut test = test_request(&mut mallory, 10, None).await;
    test.base_engine = None;
    let spsa = |params: String| v1::CreateSpsaRequest {
        test: Some(test.clone()),
        spsa: Some(v1::SpsaSpec { params, ..Default::default() }),
    };
    let jobs = job_ids(&mut mallory).await;

    let many: String = (0..20_000).map(|i| format!("P{i}, 100, 0, 200, 10, 0.002\n")).collect();
    let long = format!("{}, 100, 0, 200, 10, 0.002", "P".repeat(MAX_NAME_CHARS + 1));
    let cases = [
        (many, format!("20000 parameters: at most {MAX_PARAMETERS}")),
        (long, format!("a name is at most {MAX_NAME_CHARS} characters")),
        ("A\tB, 100, 0, 200, 10, 0.002".to_owned(), "letters, digits and '_'".to_owned()),
        ("Margin value 3, 100, 0, 200, 10, 0.002".to_owned(), "neither 'name' nor 'value'".to_owned()),
    ];
    for (params, bound) in cases {
        let status = mallory.create_spsa(spsa(params)).await.unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
        assert!(status.message().starts_with("spsa.params: "), "{}", status.message());
        assert!(status.message().contains(&bound), "{bound}: {}", status.message());
    }
    // A test whose leases could hold 3,000,000 unit numbers of 3 bytes each.
    let mut huge = test_request(&mut mallory, 3_000_000, None).await;
    let status = mallory.create_test(huge.clone()).await.unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    let limit = format!("over the {}-byte limit of a reply", xq_proto::MAX_MESSAGE_BYTES);
    assert!(status.message().contains(&limit), "{}", status.message());
    assert_eq!(job_ids(&mut mallory).await, jobs, "nothing stored");

    // A run of sensible size, and a test of fewer pairs, are taken.
    let params = (0..MAX_PARAMETERS).map(|i| format!("Search Param_{i}, 100, 0, 200, 10, 0.002\n")).collect();
    let job = mallory.create_spsa(spsa(params)).await.unwrap().into_inner();
    assert_eq!(job.spsa.as_ref().unwrap().parameters.len(), MAX_PARAMETERS);
    huge.pairs = 1_000;
    mallory.create_test(huge).await.unwrap();
    // The run's leases reach a worker, every parameter in them.
    let mut worker = registered_worker(&served, "w", &[]).await;
    let lease = worker.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
    let Some(v1::lease::Work::MatchSpec(spec)) = &lease.work else { panic!("a match lease: {lease:?}") };
    assert_eq!((lease.job_id, spec.new_engine.as_ref().unwrap().options.len()), (job.job_id, MAX_PARAMETERS));
}

/// Attack: a worker's registration was bounded in its strings' lengths and its number
/// of CPU flags, but not in each flag's length nor in its references, so one
/// registration could keep megabytes with the worker's row, listed to every client and
/// looked through at each lease. Now every field is bounded, a refusal names the field
/// and its bound, nothing of a refused registration is kept, and the server goes on
/// serving the other workers.
#[tokio::test]
async fn a_registration_past_a_bound_is_refused_naming_it_and_nothing_of_it_is_kept() {
    use xq_coordinator::jobs::checks::MAX_CPU_FLAG_CHARS;
    use xq_coordinator::scheduler::registration::{
        MAX_ARBITER_BUILD_CHARS, MAX_BENCH_NPS, MAX_CORES, MAX_CPU_FLAGS, MAX_NAME_CHARS, MAX_REFERENCE_CHARS,
        MAX_REFERENCES, MAX_VERSION_CHARS,
    };

    let served = serve(BACKENDS[0], config()).await;
    let mut admin = client(served.address, &served.client_token).await;
    let mut mallory = registered_worker(&served, "mallory", &["avx2"]).await;
    let [listed] = <[v1::WorkerInfo; 1]>::try_from(workers(&mut admin).await).unwrap();
    let (id, registered) = (listed.worker_id, listed.capabilities.unwrap());
    let at_bounds = v1::Capabilities {
        name: "m".repeat(MAX_NAME_CHARS),
        cores: MAX_CORES,
        cpu_flags: (0..MAX_CPU_FLAGS).map(|i| format!("{i:0>MAX_CPU_FLAG_CHARS$}")).collect(),
        version: "v".repeat(MAX_VERSION_CHARS),
        bench_nps: MAX_BENCH_NPS,
        references: (0..MAX_REFERENCES).map(|i| format!("{i:0>MAX_REFERENCE_CHARS$}")).collect(),
        arbiter_build: "b".repeat(MAX_ARBITER_BUILD_CHARS),
    };
    let past = |change: &dyn Fn(&mut v1::Capabilities)| {
        let mut capabilities = at_bounds.clone();
        change(&mut capabilities);
        Some(capabilities)
    };
    let text = |field: &str, most: usize| format!("capabilities.{field}: at most {most} bytes of UTF-8");
    let cases = [
        (None, "capabilities: missing".to_owned()),
        (past(&|c| c.name.push('y')), text("name", MAX_NAME_CHARS)),
        (past(&|c| c.name = "mal\nlory".to_owned()), text("name", MAX_NAME_CHARS) + " and no control characters"),
        (past(&|c| c.cores = 0), format!("capabilities.cores: 0: between 1 and {MAX_CORES}")),
        (
            past(&|c| c.cores = MAX_CORES + 1),
            format!("capabilities.cores: {}: between 1 and {MAX_CORES}", MAX_CORES + 1),
        ),
        (
            past(&|c| c.cpu_flags.push("avx2".to_owned())),
            format!("capabilities.cpu_flags: {} flags: at most {MAX_CPU_FLAGS}", MAX_CPU_FLAGS + 1),
        ),
        // One flag of 4 MiB, within the message limit, as the coordinator used to keep.
        (past(&|c| c.cpu_flags[0] = "f".repeat(4 << 20)), text("cpu_flags", MAX_CPU_FLAG_CHARS)),
        (past(&|c| c.version.push('v')), text("version", MAX_VERSION_CHARS)),
        (
            past(&|c| c.bench_nps = MAX_BENCH_NPS + 1),
            format!("capabilities.bench_nps: {}: at most {MAX_BENCH_NPS}", MAX_BENCH_NPS + 1),
        ),
        // A hundred thousand references, each of them short.
        (
            past(&|c| c.references = vec!["pyffish".to_owned(); 100_000]),
            format!("capabilities.references: 100000 references: at most {MAX_REFERENCES}"),
        ),
        (past(&|c| c.references[0].push('r')), text("references", MAX_REFERENCE_CHARS)),
        (past(&|c| c.arbiter_build.push('b')), text("arbiter_build", MAX_ARBITER_BUILD_CHARS)),
    ];
    for (capabilities, bound) in cases {
        let status = mallory.register(v1::RegisterRequest { capabilities }).await.unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument, "{bound}: {status:?}");
        assert!(status.message().starts_with(&bound), "'{}' does not name '{bound}'", status.message());
    }
    let kept = |workers: Vec<v1::WorkerInfo>| workers.into_iter().find(|w| w.worker_id == id).unwrap().capabilities;
    assert_eq!(kept(workers(&mut admin).await), Some(registered), "nothing of a refused registration is kept");
    // At every bound, a registration is taken and kept as sent.
    mallory.register(v1::RegisterRequest { capabilities: Some(at_bounds.clone()) }).await.unwrap();
    assert_eq!(kept(workers(&mut admin).await), Some(at_bounds));
    // The other workers are served: one registers, leases a test's unit and reports it.
    create(&mut admin, 4).await;
    let mut honest = registered_worker(&served, "honest", &[]).await;
    let lease = honest.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
    let report = v1::ReportPairsRequest {
        lease_id: lease.lease_id,
        pairs: vec![pair(lease.units[0], [1, 1])],
        cumulative: Some(totals(&[[1, 1]])),
        ..Default::default()
    };
    honest.report_pairs(report).await.unwrap();
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

/// An HTTP/1.1 GET of the live stream from the local address `from`: its status, and
/// its body while it is open.
async fn follow(served: &crate::common::Served, from: &str, headers: &[(&str, &str)]) -> (u16, hyper::body::Incoming) {
    use http_body_util::Full;
    let mut connector = hyper_util::client::legacy::connect::HttpConnector::new();
    connector.set_local_address(Some(from.parse().unwrap()));
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build::<_, Full<bytes::Bytes>>(connector);
    let mut builder = http::Request::builder().uri(format!("http://{}/api/v1/events", served.address));
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    let response = client.request(builder.body(Full::default()).unwrap()).await.unwrap();
    (response.status().as_u16(), response.into_body())
}

/// The text a live stream sends until it ends, or `None` if it is still open after
/// `within`.
async fn until_end(mut body: hyper::body::Incoming, within: Duration) -> Option<String> {
    use http_body_util::BodyExt;
    let mut text = String::new();
    tokio::time::timeout(within, async {
        while let Some(Ok(frame)) = body.frame().await {
            if let Ok(data) = frame.into_data() {
                text.push_str(&String::from_utf8_lossy(&data));
            }
        }
    })
    .await
    .ok()
    .map(|()| text)
}

/// A WatchJob stream's next item, or `None` if it has none within `within`.
async fn next_within(
    stream: &mut tonic::Streaming<v1::Job>,
    within: Duration,
) -> Option<Option<Result<v1::Job, tonic::Status>>> {
    tokio::time::timeout(within, stream.next()).await.ok()
}

/// A private dashboard (as by default off loopback), served in this process.
async fn serve_private(config: SchedulerConfig) -> crate::common::Served {
    crate::common::serve_set(config, |coordinator| {
        coordinator.dashboard_read = xq_coordinator::api::http::ReadAccess::Token
    })
    .await
}

/// Streams check their token while they stay open: revoking a token ends the live
/// stream and the WatchJob streams it opened within a couple of seconds (where they
/// used to run for as long as the client liked), and an expiring token's too; streams
/// of other tokens go on.
#[tokio::test]
async fn a_revoked_or_expired_token_ends_the_streams_it_opened() {
    let served = serve_private(config()).await;
    let mut admin = client(served.address, &served.client_token).await;
    let job = create(&mut admin, 100).await.job_id;
    let token = |name: &str, expires_seconds| v1::CreateTokenRequest {
        role: "submitter".to_owned(),
        name: name.to_owned(),
        expires_seconds,
    };
    let alice = admin.create_token(token("alice", 0)).await.unwrap().into_inner();
    let brief = admin.create_token(token("brief", 1)).await.unwrap().into_inner();
    let bearer = format!("Bearer {}", alice.token);
    let (status, alice_live) = follow(&served, "127.0.0.1", &[("authorization", &bearer)]).await;
    assert_eq!(status, 200);
    let cookie = format!("xq_token={}", served.client_token);
    let (status, admin_live) = follow(&served, "127.0.0.1", &[("cookie", &cookie)]).await;
    assert_eq!(status, 200);
    let watch = |token: String| async move {
        let mut watcher = client(served.address, &token).await;
        watcher.watch_job(v1::JobId { job_id: job }).await.unwrap().into_inner()
    };
    let mut alice_watch = watch(alice.token.clone()).await;
    let mut brief_watch = watch(brief.token.clone()).await;
    let mut admin_watch = watch(served.client_token.clone()).await;
    for stream in [&mut alice_watch, &mut brief_watch, &mut admin_watch] {
        let first = next_within(stream, Duration::from_secs(5)).await.expect("the job at once");
        assert_eq!(first.unwrap().unwrap().job_id, job);
    }

    admin.revoke_token(v1::RevokeTokenRequest { id: alice.id.clone() }).await.unwrap();
    let revoked_at = std::time::Instant::now();
    let text = until_end(alice_live, Duration::from_secs(2)).await.expect("the live stream ends");
    assert!(text.contains("event: revoked"), "{text:?}");
    let last = next_within(&mut alice_watch, Duration::from_secs(2)).await.expect("WatchJob ends");
    let status = last.expect("a last status").unwrap_err();
    assert_eq!(status.code(), Code::Unauthenticated, "{status:?}");
    assert!(status.message().contains("revoked"), "{}", status.message());
    assert!(matches!(next_within(&mut alice_watch, Duration::from_secs(2)).await, Some(None)), "then it ends");
    assert!(revoked_at.elapsed() < Duration::from_secs(3));
    // The expiring token's stream ends at its expiry.
    let last = next_within(&mut brief_watch, Duration::from_secs(4)).await.expect("the expired stream ends");
    assert_eq!(last.expect("a last status").unwrap_err().code(), Code::Unauthenticated);
    // The admin's streams go on.
    assert!(until_end(admin_live, Duration::from_millis(1500)).await.is_none(), "the admin's live stream is open");
    assert!(next_within(&mut admin_watch, Duration::from_millis(500)).await.is_none(), "the admin's WatchJob too");
    admin.stop_job(v1::JobId { job_id: job }).await.unwrap();
    let stopped = next_within(&mut admin_watch, Duration::from_secs(5)).await.unwrap().unwrap().unwrap();
    assert_eq!(stopped.state, "stopped");
}

/// Live-stream followers (the dashboard's and WatchJob's together) are capped in all
/// and per client address: one past a cap is refused with 429 or ResourceExhausted,
/// saying which cap, while those already following and every other request are
/// served; a follower who leaves gives its place back.
#[tokio::test]
async fn live_stream_followers_are_capped_in_all_and_per_address() {
    let followers = xq_coordinator::access::streams::FollowerCaps { total: 3, per_address: 2 };
    let served = serve(BACKENDS[0], SchedulerConfig { followers, ..config() }).await;
    let mut admin = client(served.address, &served.client_token).await;
    let job = create(&mut admin, 100).await.job_id;
    let (status, first) = follow(&served, "127.0.0.1", &[]).await;
    assert_eq!(status, 200);
    let (status, _second) = follow(&served, "127.0.0.1", &[]).await;
    assert_eq!(status, 200);
    // A third from the same address: refused, on either kind of stream.
    let (status, body) = follow(&served, "127.0.0.1", &[]).await;
    let text = until_end(body, Duration::from_secs(5)).await.unwrap();
    assert_eq!(status, 429, "{text}");
    assert!(text.contains("127.0.0.1 already follows 2 live streams"), "{text}");
    let status = admin.watch_job(v1::JobId { job_id: job }).await.unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    // Another address gets the last place in all.
    let endpoint = tonic::transport::Endpoint::from_shared(format!("http://{}", served.address))
        .unwrap()
        .local_address(Some("127.0.0.2".parse().unwrap()));
    let token = xq_proto::BearerToken::new(&served.client_token).unwrap();
    let mut elsewhere =
        xq_proto::v1::client_client::ClientClient::with_interceptor(endpoint.connect().await.unwrap(), token);
    let mut watching = elsewhere.watch_job(v1::JobId { job_id: job }).await.unwrap().into_inner();
    assert_eq!(watching.next().await.unwrap().unwrap().job_id, job);
    let (status, body) = follow(&served, "127.0.0.3", &[]).await;
    let text = until_end(body, Duration::from_secs(5)).await.unwrap();
    assert_eq!(status, 429, "{text}");
    assert!(text.contains("already serves 3 live streams"), "{text}");
    // Everything else is served.
    assert!(admin.list_jobs(v1::ListJobsRequest::default()).await.is_ok());
    let url = format!("http://{}/api/v1/jobs", served.address);
    assert_eq!(crate::dashboard::request("GET", &url, &[], "").await.0, 200);
    // A follower who leaves gives its place back.
    drop(first);
    let start = std::time::Instant::now();
    loop {
        let (status, _again) = follow(&served, "127.0.0.1", &[]).await;
        if status == 200 {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(5), "the place was not given back");
        tokio::time::sleep(Duration::from_millis(100)).await;
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
