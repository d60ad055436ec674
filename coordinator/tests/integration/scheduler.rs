//! Scheduling through the services: leases, expiry and re-issue, priorities,
//! capabilities, SPRT stops, time-control scaling, restarts and self-play, on both
//! databases.

use std::time::Duration;

use xq_coordinator::scheduler::config::SchedulerConfig;
use xq_proto::v1;

use crate::common::{
    BACKENDS, TempDir, adjudicated_moves, client, collect, fresh_database, game, pair, registered_worker,
    registered_worker_token, registered_worker_with_cores, ruled_test, serve, serve_on, test_request, totals,
};

async fn create(admin: &mut crate::common::Client, pairs: u64, sprt: Option<v1::SprtSpec>) -> v1::Job {
    let request = test_request(admin, pairs, sprt).await;
    admin.create_test(request).await.unwrap().into_inner()
}

/// Leases of 4 pairs at 10+0.1 (a pair is sized at 72 s), expiring after 1 s.
fn config() -> SchedulerConfig {
    SchedulerConfig {
        lease_ttl: Duration::from_millis(1000),
        lease_seconds: 4.0 * 72.0,
        reference_nps: 0,
        ..SchedulerConfig::default()
    }
}

fn units(lease: &v1::Lease) -> Vec<u64> {
    lease.units.clone()
}

/// An SPRT that plays its most pairs without a verdict ends saying so (a loop's log
/// printed an empty outcome for such a test), and a fixed-length test ends as before.
#[tokio::test]
async fn an_sprt_at_its_most_pairs_ends_undecided() {
    let served = serve(BACKENDS[0], config()).await;
    let mut admin = client(served.address, &served.client_token).await;
    let sprt = v1::SprtSpec { elo0: 0.0, elo1: 10.0, alpha: 0.05, beta: 0.05, ..Default::default() };
    let mut worker = registered_worker(&served, "w", &[]).await;
    for (sprt, outcome) in [(Some(sprt), "undecided at its most pairs"), (None, "")] {
        let request = test_request(&mut admin, 1, sprt).await;
        let job = admin.create_test(request).await.unwrap().into_inner();
        let lease = worker.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
        let report = v1::ReportPairsRequest {
            lease_id: lease.lease_id,
            pairs: vec![pair(0, [1, 1])],
            cumulative: Some(totals(&[[1, 1]])),
            ..Default::default()
        };
        worker.report_pairs(report).await.unwrap();
        let ended = admin.get_job(v1::JobId { job_id: job.job_id }).await.unwrap().into_inner();
        assert_eq!((ended.state.as_str(), ended.outcome.as_str()), ("finished", outcome));
    }
    // Its pairs raised, the undecided SPRT plays on from where it stopped.
    let capped = admin.list_jobs(v1::ListJobsRequest { kind: "sprt".to_owned(), ..Default::default() });
    let capped = capped.await.unwrap().into_inner().jobs[0].job_id;
    admin.modify_job(v1::ModifyJobRequest { job_id: capped, pairs: Some(2), ..Default::default() }).await.unwrap();
    let resumed = admin.resume_job(v1::JobId { job_id: capped }).await.unwrap().into_inner();
    assert_eq!((resumed.state.as_str(), resumed.outcome.as_str()), ("running", ""));
    let lease = worker.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
    assert_eq!((lease.job_id, units(&lease)), (capped, vec![1]));
}

#[tokio::test]
async fn expired_leases_come_back_with_the_same_units_and_nothing_counts_twice() {
    for backend in BACKENDS {
        let served = serve(backend, config()).await;
        let mut admin = client(served.address, &served.client_token).await;
        let request = test_request(&mut admin, 6, None).await;
        let job = admin.create_test(request).await.unwrap().into_inner();
        let mut first = registered_worker(&served, "a", &[]).await;
        let mut second = registered_worker(&served, "b", &[]).await;
        let lease_a = first.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
        assert_eq!(units(&lease_a), [0, 1, 2, 3], "{backend:?}");
        let lease_b = second.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
        assert_eq!(units(&lease_b), [4, 5], "{backend:?}: the rest of the job");
        // A reports one pair, then goes silent; B keeps beating.
        let report = v1::ReportPairsRequest {
            lease_id: lease_a.lease_id,
            pairs: vec![pair(0, [2, 1])],
            cumulative: Some(totals(&[[2, 1]])),
            ..Default::default()
        };
        first.report_pairs(report).await.unwrap();
        for _ in 0..6 {
            tokio::time::sleep(Duration::from_millis(300)).await;
            let reply = second
                .heartbeat(v1::HeartbeatRequest { lease_ids: vec![lease_b.lease_id] })
                .await
                .unwrap()
                .into_inner();
            assert!(reply.cancelled_lease_ids.is_empty());
        }
        let reply =
            first.heartbeat(v1::HeartbeatRequest { lease_ids: vec![lease_a.lease_id] }).await.unwrap().into_inner();
        assert_eq!(reply.cancelled_lease_ids, [lease_a.lease_id], "{backend:?}: the expired lease is cancelled");
        // B, one core, finishes its lease before it may take another.
        let report = v1::ReportPairsRequest {
            lease_id: lease_b.lease_id,
            pairs: vec![pair(4, [2, 0]), pair(5, [1, 2])],
            cumulative: Some(totals(&[[2, 0], [1, 2]])),
            ..Default::default()
        };
        assert!(!second.report_pairs(report).await.unwrap().into_inner().stop);
        let reissued = second.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
        assert_eq!(units(&reissued), [1, 2, 3], "{backend:?}: the unfinished units, same indices");
        // The late report of the expired lease still counts (its games are real) ...
        let late = v1::ReportPairsRequest {
            lease_id: lease_a.lease_id,
            pairs: vec![pair(0, [2, 1]), pair(1, [1, 1])],
            cumulative: Some(totals(&[[2, 1], [1, 1]])),
            ..Default::default()
        };
        first.report_pairs(late).await.unwrap();
        // ... and the same unit from the new holder does not count again.
        let pairs = [[1, 1], [0, 0], [2, 2]];
        let report = v1::ReportPairsRequest {
            lease_id: reissued.lease_id,
            pairs: vec![pair(1, [1, 1]), pair(2, [0, 0]), pair(3, [2, 2])],
            cumulative: Some(totals(&pairs)),
            ..Default::default()
        };
        let reply = second.report_pairs(report).await.unwrap().into_inner();
        assert!(reply.stop, "{backend:?}: all pairs played");
        let state = admin.get_job(v1::JobId { job_id: job.job_id }).await.unwrap().into_inner();
        assert_eq!((state.state.as_str(), state.units_done), ("finished", 6), "{backend:?}");
        let t = state.totals.unwrap();
        assert_eq!([t.wins, t.draws, t.losses], [5, 4, 3], "{backend:?}");
        assert_eq!(t.pentanomial, [1, 0, 2, 2, 1]);
        let recount = served.coordinator.shared.storage.recount(job.job_id as i64).await.unwrap();
        assert_eq!((recount.units, recount.wdl, recount.pentanomial), (6, [5, 4, 3], [1, 0, 2, 2, 1]));
        let pgn: String = collect(admin.download_games(v1::JobId { job_id: job.job_id }).await.unwrap().into_inner())
            .await
            .into_iter()
            .map(|b| b.pgn)
            .collect();
        assert_eq!(pgn.matches("[Event ").count(), 12, "{backend:?}: each unit's two games, once");
        assert!(second.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.is_none());
    }
}

/// Closed leases are forgotten after a while (memory grew with every lease): a report
/// on one is then refused, and nothing it reported before is lost.
#[tokio::test]
async fn closed_leases_are_forgotten_and_their_results_kept() {
    let config = SchedulerConfig { closed_lease_memory: Duration::from_millis(300), ..config() };
    let served = serve(BACKENDS[0], config).await;
    let mut admin = client(served.address, &served.client_token).await;
    let job = create(&mut admin, 8, None).await;
    let mut worker = registered_worker(&served, "w", &[]).await;
    let lease = worker.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
    let pairs: Vec<[u8; 2]> = lease.units.iter().map(|_| [2, 1]).collect();
    let report = v1::ReportPairsRequest {
        lease_id: lease.lease_id,
        pairs: lease.units.iter().zip(&pairs).map(|(&u, &p)| pair(u, p)).collect(),
        cumulative: Some(totals(&pairs)),
        ..Default::default()
    };
    worker.report_pairs(report.clone()).await.unwrap();
    // The other lease (the job's rest) is left to expire.
    let mut other = registered_worker(&served, "silent", &[]).await;
    other.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
    assert_eq!(served.coordinator.shared.scheduler.leases_in_memory(), 2);
    let started = std::time::Instant::now();
    while served.coordinator.shared.scheduler.leases_in_memory() > 0 {
        assert!(started.elapsed() < Duration::from_secs(10), "closed leases are still held");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let refused = worker.report_pairs(report).await.unwrap_err();
    assert!(refused.message().contains("not this worker's"), "{}", refused.message());
    let state = admin.get_job(v1::JobId { job_id: job.job_id }).await.unwrap().into_inner();
    assert_eq!(state.units_done, lease.units.len() as u64, "the forgotten lease's results stay counted");
}

/// A worker that asks for far more than it can play gets leases for its cores only:
/// as many games at once as it has cores, and no more active leases than cores.
#[tokio::test]
async fn a_hoarding_worker_gets_no_more_than_its_cores() {
    let served = serve(BACKENDS[0], config()).await;
    let mut admin = client(served.address, &served.client_token).await;
    create(&mut admin, 1000, None).await;
    let (mut hoarder, _) = registered_worker_with_cores(&served, "hoarder", &[], 2).await;
    let mut held = Vec::new();
    for _ in 0..10 {
        if let Some(lease) = hoarder.lease(v1::LeaseRequest { concurrency: 1024 }).await.unwrap().into_inner().lease {
            held.push(lease);
        }
    }
    // Leases are sized at 4 pairs per game at once (config): 2 cores, 8 pairs each.
    assert_eq!(held.iter().map(|l| l.units.len()).collect::<Vec<_>>(), [8, 8], "two leases, each for two cores");
    // An honest worker still finds work.
    let mut honest = registered_worker(&served, "honest", &[]).await;
    let lease = honest.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
    assert_eq!(lease.units.len(), 4);
    // One that never said how many cores it has is sent to register first (the fleet
    // worker then does), rather than leased work sized on a guess.
    let token = admin
        .create_worker_token(v1::CreateWorkerTokenRequest { name: "unregistered".to_owned() })
        .await
        .unwrap()
        .into_inner()
        .token;
    let refused = crate::common::worker(served.address, &token)
        .await
        .lease(v1::LeaseRequest { concurrency: 1 })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::FailedPrecondition, "{refused:?}");
    assert!(refused.message().starts_with("worker ") && refused.message().contains("Register"), "{refused:?}");
}

/// A pair of [`pair`]'s played at 1,000 nodes a move.
fn pair_at_nodes(unit: u64, points: [u8; 2]) -> v1::PairResult {
    let mut pair = pair(unit, points);
    pair.first_game_pgn = pair.first_game_pgn.replace("10+0.1", "nodes=1000");
    pair.second_game_pgn = pair.second_game_pgn.replace("10+0.1", "nodes=1000");
    pair
}

/// A worker's cores are its word. One that declares a thousand and reports a pair
/// every half second (0.32 s of work each: under one core) holds what a new worker
/// may, four cores' worth, and takes more only as its reports free room; before, it
/// held up to a thousand leases of 256 units. An honest worker that reports its first
/// lease at once gets full leases for its cores from the next one on.
#[tokio::test]
async fn a_worker_holds_the_work_its_reports_show_not_the_cores_it_declares() {
    // At 1,000 nodes a move and the workers' 1M nodes/s a pair is sized at 0.32 s: a
    // lease holds 4 pairs per core, and a new worker 16 pairs in all.
    let config = SchedulerConfig { lease_seconds: 4.0 * 0.32, lease_ttl: Duration::from_secs(60), ..config() };
    let served = serve(BACKENDS[0], config).await;
    let mut admin = client(served.address, &served.client_token).await;
    let mut request = test_request(&mut admin, 10_000, None).await;
    request.time_control = "nodes=1000".to_owned();
    admin.create_test(request).await.unwrap();
    let lease = |concurrency: u32| v1::LeaseRequest { concurrency };

    let (mut liar, _) = registered_worker_with_cores(&served, "liar", &[], 1000).await;
    let first = liar.lease(lease(1000)).await.unwrap().into_inner().lease.unwrap();
    assert_eq!(first.units.len(), 16, "a new worker's four cores, not its thousand");
    assert!(liar.lease(lease(1000)).await.unwrap().into_inner().lease.is_none(), "nothing more before it reports");
    let mut held = vec![first.clone()];
    let mut reported: Vec<[u8; 2]> = Vec::new();
    for &unit in first.units.iter().take(5) {
        tokio::time::sleep(Duration::from_millis(500)).await;
        reported.push([1, 1]);
        let report = v1::ReportPairsRequest {
            lease_id: first.lease_id,
            pairs: vec![pair_at_nodes(unit, [1, 1])],
            cumulative: Some(totals(&reported)),
            ..Default::default()
        };
        liar.report_pairs(report).await.unwrap();
        while let Some(more) = liar.lease(lease(1000)).await.unwrap().into_inner().lease {
            held.push(more);
        }
        let unreported = held.iter().map(|l| l.units.len()).sum::<usize>() - reported.len();
        assert_eq!(unreported, 16, "each report frees room for one pair, no more ({} leases)", held.len());
    }

    let (mut honest, _) = registered_worker_with_cores(&served, "honest", &[], 16).await;
    let first = honest.lease(lease(16)).await.unwrap().into_inner().lease.unwrap();
    assert_eq!(first.units.len(), 16, "a new worker's four cores of its sixteen");
    let pairs: Vec<[u8; 2]> = first.units.iter().map(|_| [1, 1]).collect();
    let report = v1::ReportPairsRequest {
        lease_id: first.lease_id,
        pairs: first.units.iter().map(|&unit| pair_at_nodes(unit, [1, 1])).collect(),
        cumulative: Some(totals(&pairs)),
        ..Default::default()
    };
    honest.report_pairs(report).await.unwrap();
    let second = honest.lease(lease(16)).await.unwrap().into_inner().lease.unwrap();
    assert_eq!(second.units.len(), 64, "its sixteen cores' lease, once it showed their pace");
}

#[tokio::test]
async fn priority_first_and_only_work_a_worker_can_run() {
    for backend in BACKENDS {
        let served = serve(backend, config()).await;
        let mut admin = client(served.address, &served.client_token).await;
        let low = create(&mut admin, 100, None).await;
        let mut high_request = test_request(&mut admin, 100, None).await;
        high_request.priority = 5;
        let high = admin.create_test(high_request).await.unwrap().into_inner();
        let mut special = test_request(&mut admin, 100, None).await;
        special.priority = 9;
        special.required_cpu_flags = vec!["avx512f".to_owned()];
        let needs_flag = admin.create_test(special).await.unwrap().into_inner();
        let (mut plain, _) = registered_worker_with_cores(&served, "plain", &["sse2", "avx2"], 4).await;
        let mut wide = registered_worker(&served, "wide", &["avx2", "avx512f"]).await;
        let job_of = |lease: Option<v1::Lease>| lease.unwrap().job_id;
        assert_eq!(
            job_of(plain.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease),
            high.job_id,
            "{backend:?}"
        );
        assert_eq!(
            job_of(wide.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease),
            needs_flag.job_id
        );
        admin.set_priority(v1::SetPriorityRequest { job_id: low.job_id, priority: 7 }).await.unwrap();
        assert_eq!(
            job_of(plain.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease),
            low.job_id
        );
        admin.stop_job(v1::JobId { job_id: low.job_id }).await.unwrap();
        assert_eq!(
            job_of(plain.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease),
            high.job_id
        );
        let workers = admin.list_workers(v1::ListWorkersRequest {}).await.unwrap().into_inner().workers;
        assert_eq!(workers.len(), 2);
        assert_eq!(workers.iter().map(|w| w.active_leases).sum::<u32>(), 4);
    }
}

#[tokio::test]
async fn a_game_of_threaded_engines_holds_as_many_cores() {
    let served = serve(BACKENDS[0], config()).await;
    let mut admin = client(served.address, &served.client_token).await;
    let plain = create(&mut admin, 100, None).await;
    let mut threaded = test_request(&mut admin, 100, None).await;
    threaded.priority = 5;
    threaded.new_engine.as_mut().unwrap().options.insert("Threads".to_owned(), "4".to_owned());
    let threaded = admin.create_test(threaded).await.unwrap().into_inner();
    let lease = |cores: u32| v1::LeaseRequest { concurrency: cores };
    // Two cores cannot hold a game of four threads: the plain test, whatever the priority.
    let (mut small, _) = registered_worker_with_cores(&served, "small", &[], 2).await;
    let small_lease = small.lease(lease(2)).await.unwrap().into_inner().lease.unwrap();
    assert_eq!(small_lease.job_id, plain.job_id);
    // Eight cores hold two such games at once: as many units as two cores of plain games.
    let (mut large, _) = registered_worker_with_cores(&served, "large", &[], 8).await;
    let large_lease = large.lease(lease(8)).await.unwrap().into_inner().lease.unwrap();
    assert_eq!(large_lease.job_id, threaded.job_id);
    assert_eq!(large_lease.units.len(), small_lease.units.len());
    // A thread count an engine cannot have is refused at submission, naming it.
    let mut bad = test_request(&mut admin, 100, None).await;
    bad.base_engine.as_mut().unwrap().options.insert("threads".to_owned(), "0".to_owned());
    let refused = admin.create_test(bad).await.unwrap_err();
    assert!(refused.message().contains("option threads=0"), "{refused:?}");
}

#[tokio::test]
async fn a_resumed_test_hands_out_again_only_units_no_lease_still_holds() {
    let served = serve(BACKENDS[0], config()).await;
    let mut admin = client(served.address, &served.client_token).await;
    let job = create(&mut admin, 100, None).await.job_id;
    let mut first = registered_worker(&served, "first", &[]).await;
    let held = first.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
    // Stopped while the lease is out (its worker not yet told), then resumed.
    admin.stop_job(v1::JobId { job_id: job }).await.unwrap();
    admin.resume_job(v1::JobId { job_id: job }).await.unwrap();
    let mut second = registered_worker(&served, "second", &[]).await;
    let next = second.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
    assert_eq!(next.job_id, job);
    assert!(next.units.iter().all(|unit| !held.units.contains(unit)), "{:?} and {:?}", held.units, next.units);
}

#[tokio::test]
async fn jobs_of_equal_priority_share_the_fleet_by_throughput() {
    let served = serve(BACKENDS[0], config()).await;
    let mut admin = client(served.address, &served.client_token).await;
    let mut heavy = test_request(&mut admin, 1000, None).await;
    heavy.throughput = 300;
    let heavy = admin.create_test(heavy).await.unwrap().into_inner();
    let light = create(&mut admin, 1000, None).await;
    let mut counts = std::collections::HashMap::new();
    for index in 0..8 {
        let mut worker = registered_worker(&served, &format!("w{index}"), &[]).await;
        let lease = worker.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
        *counts.entry(lease.job_id).or_insert(0) += 1;
    }
    assert_eq!((counts[&heavy.job_id], counts[&light.job_id]), (6, 2), "three times the share: {counts:?}");
}

#[tokio::test]
async fn leases_are_sized_and_time_controls_scaled_by_the_worker_speed() {
    let config = SchedulerConfig { reference_nps: 1_000_000, lease_seconds: 600.0, ..config() };
    let served = serve(BACKENDS[0], config).await;
    let mut admin = client(served.address, &served.client_token).await;
    create(&mut admin, 1000, None).await;
    let mut worker = registered_worker(&served, "slow", &[]).await;
    let capabilities = v1::Capabilities { name: "slow".to_owned(), cores: 4, bench_nps: 500_000, ..Default::default() };
    worker.register(v1::RegisterRequest { capabilities: Some(capabilities) }).await.unwrap();
    let lease = worker.lease(v1::LeaseRequest { concurrency: 4 }).await.unwrap().into_inner().lease.unwrap();
    let Some(v1::lease::Work::MatchSpec(spec)) = lease.work else { panic!("a match") };
    assert_eq!(spec.time_control, "20+0.2", "half the reference speed: twice the time");
    // 600 s of work on each of 4 slots, at 2 x 36 s per game: 17 pairs.
    assert_eq!(lease.units.len(), 17);
}

#[tokio::test]
async fn an_sprt_stops_itself_at_its_bound() {
    for backend in BACKENDS {
        let served = serve(backend, config()).await;
        let mut admin = client(served.address, &served.client_token).await;
        let sprt = v1::SprtSpec {
            elo0: 0.0,
            elo1: 10.0,
            alpha: 0.05,
            beta: 0.05,
            model: "logistic".to_owned(),
            trinomial: false,
        };
        let job = create(&mut admin, 0, Some(sprt)).await;
        assert_eq!(job.units_total, 100_000);
        let watch = admin.watch_job(v1::JobId { job_id: job.job_id }).await.unwrap().into_inner();
        let mut worker = registered_worker(&served, "w", &[]).await;
        let mut played = Vec::new();
        let mut stopped = false;
        while !stopped {
            let Some(lease) = worker.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease
            else {
                break;
            };
            let mut acked: Vec<[u8; 2]> = Vec::new();
            for &unit in &lease.units {
                // The new engine wins 3 pairs of 4 and splits the fourth.
                let points = if unit % 4 == 3 { [2, 0] } else { [2, 2] };
                acked.push(points);
                let report = v1::ReportPairsRequest {
                    lease_id: lease.lease_id,
                    pairs: vec![pair(unit, points)],
                    cumulative: Some(totals(&acked)),
                    ..Default::default()
                };
                played.push(points);
                if worker.report_pairs(report).await.unwrap().into_inner().stop {
                    stopped = true;
                    break;
                }
            }
        }
        assert!(stopped, "{backend:?}");
        let states = collect(watch).await;
        let last = states.last().unwrap();
        assert_eq!((last.state.as_str(), last.outcome.as_str()), ("finished", "H1 accepted"), "{backend:?}");
        let sprt = last.sprt.unwrap();
        assert!(sprt.llr >= sprt.upper);
        assert_eq!(last.units_done as usize, played.len());
        assert!(worker.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.is_none());
    }
}

#[tokio::test]
async fn a_restart_keeps_jobs_leases_and_results() {
    for backend in BACKENDS {
        let dir = TempDir::new("restart");
        let url = fresh_database(backend, &dir.0).await;
        let config = SchedulerConfig { lease_ttl: Duration::from_secs(30), ..config() };
        let first = serve_on(&dir.0, &url, config.clone(), 100).await;
        let mut admin = client(first.address, &first.client_token).await;
        let job = create(&mut admin, 6, None).await;
        let (mut worker, token) = registered_worker_token(&first, "w", &[]).await;
        let lease = worker.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
        assert_eq!(lease.units, [0, 1, 2, 3]);
        let report = v1::ReportPairsRequest {
            lease_id: lease.lease_id,
            pairs: vec![pair(0, [2, 1])],
            cumulative: Some(totals(&[[2, 1]])),
            ..Default::default()
        };
        worker.report_pairs(report).await.unwrap();
        let history = admin.get_job_history(v1::JobId { job_id: job.job_id }).await.unwrap().into_inner();
        assert_eq!(history.points.len(), 1);
        drop(first);
        // A new coordinator on the same data: tokens, the job, its results, its course
        // and the active lease are back.
        let second = serve_on(&dir.0, &url, config.clone(), 100).await;
        let mut admin = client(second.address, &second.client_token).await;
        let state = admin.get_job(v1::JobId { job_id: job.job_id }).await.unwrap().into_inner();
        assert_eq!((state.units_done, state.active_leases), (1, 1), "{backend:?}");
        assert_eq!(state.totals.unwrap().wins, 1);
        let mut worker = crate::common::worker(second.address, &token).await;
        // The lease goes on: its next cumulative report extends the acknowledged one,
        // and a report that forgets it is refused.
        let forgetful = v1::ReportPairsRequest {
            lease_id: lease.lease_id,
            pairs: vec![pair(1, [1, 1])],
            cumulative: Some(totals(&[[1, 1]])),
            ..Default::default()
        };
        assert_eq!(worker.report_pairs(forgetful).await.unwrap_err().code(), tonic::Code::InvalidArgument);
        let id = v1::JobId { job_id: job.job_id };
        assert_eq!(admin.get_job_history(id).await.unwrap().into_inner(), history, "{backend:?}: the course");
        assert_eq!(admin.get_job(id).await.unwrap().into_inner().refused_reports, 1, "{backend:?}");
        let all = [[2, 1], [1, 1], [1, 1], [1, 1]];
        let pairs = (1..4).map(|u| pair(u, [1, 1])).collect();
        let report = v1::ReportPairsRequest {
            lease_id: lease.lease_id,
            pairs,
            cumulative: Some(totals(&all)),
            ..Default::default()
        };
        worker.report_pairs(report).await.unwrap();
        // Units leased before the restart are not leased again; the rest are.
        let rest = worker.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
        assert_eq!(rest.units, [4, 5], "{backend:?}");
        assert!(rest.lease_id > lease.lease_id, "lease ids are not reused");
        let seen = admin.list_workers(v1::ListWorkersRequest {}).await.unwrap().into_inner().workers;
        assert_eq!((seen[0].units_done, seen[0].refused_reports), (4, 1), "{backend:?}: stored and counted since");
        assert_eq!(seen[0].job_ids, [job.job_id]);
        // A stopped test's course is read back from storage after the next restart.
        admin.stop_job(id).await.unwrap();
        let history = admin.get_job_history(id).await.unwrap().into_inner();
        assert_eq!(history.points.iter().map(|p| p.pairs).collect::<Vec<_>>(), [1, 2, 3, 4]);
        drop(second);
        let third = serve_on(&dir.0, &url, config, 100).await;
        let mut admin = client(third.address, &third.client_token).await;
        assert_eq!(admin.get_job_history(id).await.unwrap().into_inner(), history, "{backend:?}: read back");
    }
}

/// Games won by a repetition ruling (here perpetual checks, WXF 20.1, which the
/// coordinator's replay rules itself) count under the rules and are counted apart:
/// the job's view gives the pairs as the board decided them, those games as draws, on
/// both databases and after a restart.
#[tokio::test]
async fn wins_by_a_repetition_ruling_are_counted_apart_from_the_board() {
    for backend in BACKENDS {
        let dir = TempDir::new("ruled");
        let url = fresh_database(backend, &dir.0).await;
        let first = serve_on(&dir.0, &url, config(), 100).await;
        let mut admin = client(first.address, &first.client_token).await;
        let job = ruled_test(&first, &mut admin).await;
        let id = v1::JobId { job_id: job };
        let view = admin.get_job(id).await.unwrap().into_inner();
        let t = view.totals.clone().unwrap();
        assert_eq!(([t.wins, t.draws, t.losses], &t.pentanomial[..]), ([3, 1, 2], &[0, 1, 1, 0, 1][..]), "{backend:?}");
        assert_eq!(view.reasons.get("perpetual check"), Some(&4), "{backend:?}: {:?}", view.reasons);
        // Over the board: [0, 2] is 1 + 1, [0, 1] is 1 + 1, [2, 2] is 2 + 1.
        let board = view.over_the_board.clone().unwrap();
        assert_eq!((board.new_ruled_wins, board.base_ruled_wins), (2, 2), "{backend:?}");
        assert_eq!(board.pentanomial, [0, 0, 2, 1, 0], "{backend:?}");
        let elo = xq_stats::elo_estimate(&[0, 0, 2, 1, 0]).unwrap();
        let shown = board.elo.unwrap();
        assert!((shown.elo - elo.elo).abs() < 1e-9 && (shown.low - elo.low).abs() < 1e-9, "{shown:?} {elo:?}");
        let storage = &first.coordinator.shared.storage;
        let recounted = storage.recount(job as i64).await.unwrap().over_the_board;
        assert_eq!((recounted.pentanomial, recounted.ruled_wins), ([0, 0, 2, 1, 0], [2, 2]), "{backend:?}");
        drop(first);
        let second = serve_on(&dir.0, &url, config(), 100).await;
        let mut admin = client(second.address, &second.client_token).await;
        let again = admin.get_job(id).await.unwrap().into_inner();
        assert_eq!(again.over_the_board, view.over_the_board, "{backend:?}: read back after a restart");
        // `xq show` gives the same line as `xq-worker match`.
        let shown = tokio::process::Command::new(crate::common::binary("xq"))
            .args(["--coordinator", &format!("http://{}", second.address), "--token", &second.client_token])
            .args(["show", &job.to_string()])
            .output()
            .await
            .unwrap();
        let text = String::from_utf8_lossy(&shown.stdout);
        let line = format!(
            "  won by a repetition ruling: new 2, base 2; over the board (those as draws): pentanomial [0, 0, 2, 1, 0], \
             Elo {:+.1} [{:+.1}, {:+.1}]",
            elo.elo, elo.low, elo.high
        );
        assert!(text.lines().any(|l| l == line), "{backend:?}: {text}{}", String::from_utf8_lossy(&shown.stderr));
        // A test without such games shows none.
        let plain = create(&mut admin, 2, None).await;
        let plain = admin.get_job(v1::JobId { job_id: plain.job_id }).await.unwrap().into_inner();
        let none = plain.over_the_board.unwrap();
        assert_eq!((none.new_ruled_wins, none.base_ruled_wins, none.pentanomial), (0, 0, vec![0; 5]));
    }
}

/// A game won on time (the loser's clock ran out, as the replay checks) counts under
/// the rules and apart, as a draw over the board, as `xq-worker match` counts it: in
/// the view, `xq show` and a recount of the stored units.
#[tokio::test]
async fn wins_on_time_are_counted_apart_from_the_board() {
    let served = serve(BACKENDS[0], config()).await;
    let mut admin = client(served.address, &served.client_token).await;
    let job = create(&mut admin, 2, None).await.job_id;
    let mut worker = registered_worker(&served, "w", &[]).await;
    let lease = worker.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
    // Red (new) moves in a tenth of a second; Black (base) thinks past its 10 s.
    let on_time = game("new", "base", "1. h2e2 {+0.10 0.100s}", "1-0")
        .replace("[Termination \"adjudication\"]", "[Termination \"time forfeit\"]\n[OverTime \"10.500\"]");
    let drawn = game("base", "new", &adjudicated_moves(["h2e2", "h9g7", "h0g2"], "1/2-1/2"), "1/2-1/2");
    let pairs = vec![v1::PairResult { unit: lease.units[0], first_game_pgn: on_time, second_game_pgn: drawn }];
    let cumulative = Some(totals(&[[2, 1]]));
    worker
        .report_pairs(v1::ReportPairsRequest { lease_id: lease.lease_id, pairs, cumulative, ..Default::default() })
        .await
        .unwrap();
    let view = admin.get_job(v1::JobId { job_id: job }).await.unwrap().into_inner();
    assert_eq!(view.totals.unwrap().pentanomial, [0, 0, 0, 1, 0], "a win and a draw under the rules");
    let board = view.over_the_board.unwrap();
    assert_eq!((board.new_forfeit_wins, board.base_forfeit_wins, board.new_ruled_wins), (1, 0, 0));
    assert_eq!(board.pentanomial, [0, 0, 1, 0, 0], "two draws over the board");
    let recounted = served.coordinator.shared.storage.recount(job as i64).await.unwrap().over_the_board;
    assert_eq!((recounted.pentanomial, recounted.forfeit_wins), ([0, 0, 1, 0, 0], [1, 0]));
    let shown = tokio::process::Command::new(crate::common::binary("xq"))
        .args(["--coordinator", &format!("http://{}", served.address), "--token", &served.client_token])
        .args(["show", &job.to_string()])
        .output()
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&shown.stdout);
    let line = "  won on time: new 1, base 0; over the board (those as draws): pentanomial [0, 0, 1, 0, 0]";
    assert!(text.lines().any(|l| l.starts_with(line)), "{text}");
}

/// Leasing, the active list, the quotas and the retries' answers look at the jobs not
/// ended, kept as an index beside every job ever made (N4): the index must follow each
/// change of state (a stop, an approval) and be rebuilt at a restart.
#[tokio::test]
async fn only_jobs_not_ended_are_leased_and_listed_as_active_across_restarts() {
    use xq_proto::client::named;
    async fn active(admin: &mut crate::common::Client) -> Vec<u64> {
        let request = v1::ListJobsRequest { active_only: true, ..Default::default() };
        admin.list_jobs(request).await.unwrap().into_inner().jobs.iter().map(|j| j.job_id).collect()
    }
    async fn leased(served: &crate::common::Served, name: &str) -> u64 {
        let mut worker = registered_worker(served, name, &[]).await;
        worker.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap().job_id
    }
    for backend in BACKENDS {
        let dir = TempDir::new("live");
        let url = fresh_database(backend, &dir.0).await;
        let config = SchedulerConfig { require_approval: true, lease_ttl: Duration::from_secs(30), ..config() };
        let first = serve_on(&dir.0, &url, config.clone(), 100).await;
        let mut admin = client(first.address, &first.client_token).await;
        let stopped = create(&mut admin, 8, None).await;
        let stopped = v1::JobId { job_id: stopped.job_id };
        admin.stop_job(stopped).await.unwrap();
        let request = test_request(&mut admin, 8, None).await;
        let running = admin.create_test(named(request.clone(), "the-running-one")).await.unwrap().into_inner();
        let token = v1::CreateTokenRequest { role: "submitter".to_owned(), name: "s".to_owned(), expires_seconds: 0 };
        let token = admin.create_token(token).await.unwrap().into_inner().token;
        let mut submitter = client(first.address, &token).await;
        let submitted = test_request(&mut submitter, 8, None).await;
        let pending = submitter.create_test(submitted).await.unwrap().into_inner();
        assert_eq!(pending.state, "pending");
        assert_eq!(active(&mut admin).await, [pending.job_id, running.job_id], "{backend:?}: newest first");
        assert_eq!(leased(&first, "a").await, running.job_id, "{backend:?}: neither the stopped nor the pending");
        drop(first);

        let second = serve_on(&dir.0, &url, config.clone(), 100).await;
        let mut admin = client(second.address, &second.client_token).await;
        assert_eq!(active(&mut admin).await, [pending.job_id, running.job_id], "{backend:?}: after a restart");
        let again = admin.create_test(named(request, "the-running-one")).await.unwrap().into_inner();
        assert_eq!(again.job_id, running.job_id, "{backend:?}: a retry after a restart is answered with its job");
        admin.approve_job(v1::JobId { job_id: pending.job_id }).await.unwrap();
        admin.stop_job(v1::JobId { job_id: running.job_id }).await.unwrap();
        assert_eq!(active(&mut admin).await, [pending.job_id], "{backend:?}");
        assert_eq!(leased(&second, "b").await, pending.job_id, "{backend:?}: approved, it is leased");
        drop(second);

        let third = serve_on(&dir.0, &url, config.clone(), 100).await;
        let mut admin = client(third.address, &third.client_token).await;
        assert_eq!(active(&mut admin).await, [pending.job_id], "{backend:?}: after the second restart");
        assert_eq!(leased(&third, "c").await, pending.job_id, "{backend:?}");
    }
}

/// Attack (F9 of the review of 2026-11-28): a worker that reports only its good pairs
/// and keeps beating for the lease holding the rest kept that lease alive for as long
/// as the test ran, so it never counted as expired and the expiry check never saw it.
/// Now heartbeats keep a lease for at most three times its estimated length (plus the
/// time-to-live); past that the worker is told to drop it and it expires, counted.
#[tokio::test]
async fn heartbeats_keep_a_lease_only_until_three_times_its_estimated_length() {
    // One pair a lease at 10+0.1 (72 s a pair), estimated 1 s: held at most 3 s + 1 s.
    let config = SchedulerConfig {
        lease_ttl: Duration::from_millis(1000),
        lease_seconds: 1.0,
        reference_nps: 0,
        ..SchedulerConfig::default()
    };
    let served = serve(BACKENDS[0], SchedulerConfig { max_units_per_lease: 1, ..config }).await;
    let mut admin = client(served.address, &served.client_token).await;
    let mut request = test_request(&mut admin, 4, None).await;
    request.time_control = "st=0.001".to_owned();
    admin.create_test(request).await.unwrap();
    let mut worker = registered_worker(&served, "beater", &[]).await;
    let lease = worker.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
    let start = std::time::Instant::now();
    let dropped_after = loop {
        let reply =
            worker.heartbeat(v1::HeartbeatRequest { lease_ids: vec![lease.lease_id] }).await.unwrap().into_inner();
        if reply.cancelled_lease_ids == [lease.lease_id] {
            break start.elapsed();
        }
        assert!(start.elapsed() < Duration::from_secs(30), "a lease kept by heartbeats for 30 s");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let metrics = &served.coordinator.shared.metrics;
    assert_eq!(metrics.leases_expired.get(), 0, "not expired before its time-to-live has passed");
    let dropped = std::time::Instant::now();
    while metrics.leases_expired.get() == 0 {
        assert!(dropped.elapsed() < Duration::from_secs(10), "the dropped lease never expired");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(metrics.leases_expired.get(), 1, "the dropped lease expired and was counted");
    // Its age is set by the estimate: a pair at st=0.001 is far under the 1 s a lease
    // is sized for, so 3 x 1 s + 1 s.
    assert!(
        dropped_after >= Duration::from_millis(3_800) && dropped_after <= Duration::from_millis(5_500),
        "dropped after {dropped_after:?}"
    );
}

/// Item 17 of the review of 2026-11-28: a lease's acknowledged pairs are rebuilt at a
/// restart from the rows stored under it, and a unit is stored once. A unit of a
/// re-issued lease first counted from the expired lease's late report, then reported
/// by the new holder too, left that holder's totals one pair above its rows after a
/// restart, and its next honest report was refused as totals that disagree. Now such
/// pairs (at most as many as its units other leases' rows count) are taken from its
/// totals, while only stored rows count; a report past them is still refused.
#[tokio::test]
async fn a_re_issued_lease_whose_unit_another_lease_counted_reports_on_after_a_restart() {
    for backend in BACKENDS {
        let dir = TempDir::new("restart-re-issued");
        let url = fresh_database(backend, &dir.0).await;
        let first = serve_on(&dir.0, &url, config(), 100).await;
        let mut admin = client(first.address, &first.client_token).await;
        let job = create(&mut admin, 4, None).await;
        let mut late = registered_worker(&first, "late", &[]).await;
        let (mut holder, token) = registered_worker_token(&first, "holder", &[]).await;
        let expired = late.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
        assert_eq!(expired.units, [0, 1, 2, 3]);
        // The first holder goes silent; its lease expires and its units are leased again.
        let start = std::time::Instant::now();
        let reissued = loop {
            if let Some(lease) = holder.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease {
                break lease;
            }
            assert!(start.elapsed() < Duration::from_secs(10), "the silent lease never expired");
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        assert_eq!(reissued.units, [0, 1, 2, 3], "{backend:?}");
        let report = |lease: &v1::Lease, units: &[u64], all: &[[u8; 2]]| v1::ReportPairsRequest {
            lease_id: lease.lease_id,
            pairs: units
                .iter()
                .zip(&all[all.len() - units.len()..])
                .map(|(&unit, &points)| pair(unit, points))
                .collect(),
            cumulative: Some(totals(all)),
            ..Default::default()
        };
        // Unit 0 counted from the late report; the new holder's report of it counts
        // nothing more.
        late.report_pairs(report(&expired, &[0], &[[2, 1]])).await.unwrap();
        holder.report_pairs(report(&reissued, &[0], &[[1, 1]])).await.unwrap();
        drop(first);

        let config = SchedulerConfig { lease_ttl: Duration::from_secs(30), ..config() };
        let second = serve_on(&dir.0, &url, config, 100).await;
        let mut admin = client(second.address, &second.client_token).await;
        let mut holder = crate::common::worker(second.address, &token).await;
        // Totals two pairs past its rows: more than the one unit another lease counted.
        let overdone = holder.report_pairs(report(&reissued, &[1], &[[1, 1], [2, 2], [1, 1]])).await.unwrap_err();
        assert_eq!(overdone.code(), tonic::Code::InvalidArgument, "{backend:?}: {overdone:?}");
        holder.report_pairs(report(&reissued, &[1], &[[1, 1], [2, 2]])).await.unwrap();
        holder.report_pairs(report(&reissued, &[2, 3], &[[1, 1], [2, 2], [0, 1], [1, 0]])).await.unwrap();
        let state = admin.get_job(v1::JobId { job_id: job.job_id }).await.unwrap().into_inner();
        assert_eq!((state.state.as_str(), state.units_done), ("finished", 4), "{backend:?}");
        let t = state.totals.unwrap();
        assert_eq!(t.pentanomial, [0, 2, 0, 1, 1], "{backend:?}: unit 0 as the late report's, the rest the holder's");
    }
}
