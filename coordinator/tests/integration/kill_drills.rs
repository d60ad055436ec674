//! Fault drills, the coordinator killed: between a commit and its acknowledgement (of
//! a pair, a chunk, a verification report, a lease) and while creating a tournament,
//! then started again on the same data. What was acknowledged is stored and counted
//! once; what was not is sent again, as a real worker does.

use crate::common::*;
use crate::drills::{Reporter, stored_units};
use sqlx::Row;
use std::time::{Duration, Instant};
use xq_proto::v1;

/// A real coordinator on a fresh database of one kind, which its fail point kills and
/// which starts again on the same data at the same address.
struct Killable {
    dir: TempDir,
    url: String,
    port: u16,
    /// The flags it is started with, `--database` first.
    args: Vec<String>,
}

impl Killable {
    async fn new(backend: Backend, args: &[&str]) -> Killable {
        let dir = TempDir::new("drill-kill");
        let url = fresh_database(backend, &dir.0).await;
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let args = ["--database", url.as_str()].iter().chain(args).map(|arg| (*arg).to_owned()).collect();
        Killable { dir, url, port, args }
    }

    /// Starts the coordinator, with the fail point `armed` (`name:n`) unless it is empty.
    async fn start(&self, armed: &str) -> (tokio::process::Child, std::net::SocketAddr) {
        let args: Vec<&str> = self.args.iter().map(String::as_str).collect();
        let env: Vec<(&str, &str)> = if armed.is_empty() { Vec::new() } else { vec![("XQ_FAIL_POINT", armed)] };
        crate::cluster::start_coordinator_with(&self.dir.0, self.port, &args, &env).await
    }

    /// The admin token the coordinator keeps in its data directory.
    fn token(&self) -> String {
        crate::cluster::token(&self.dir.0)
    }

    /// The database, opened beside the coordinator.
    async fn storage(&self) -> xq_coordinator::storage::Storage {
        xq_coordinator::storage::Storage::open(&self.url).await.unwrap()
    }
}

/// Waits for `coordinator` to die of the SIGKILL its fail point sends.
async fn killed(coordinator: &mut tokio::process::Child, backend: Backend) {
    use std::os::unix::process::ExitStatusExt;
    let status = coordinator.wait().await.unwrap();
    assert_eq!(status.signal(), Some(9), "{backend:?}: killed by SIGKILL at the fail point: {status:?}");
}

/// What a call meets when the coordinator dies under it or is not back yet.
const KILLED: &[tonic::Code] = &[tonic::Code::Unavailable, tonic::Code::Unknown, tonic::Code::Cancelled];

/// Sends `request` with `call` until the coordinator answers, as `xq-worker` sends a
/// unit's result or asks for a lease again while the coordinator is away; the answer,
/// and how many tries the fault refused.
async fn send_until_answered<R: Clone, T, Fut>(
    worker: Worker,
    request: R,
    call: impl Fn(Worker, R) -> Fut,
) -> (T, usize)
where
    Fut: std::future::Future<Output = Result<tonic::Response<T>, tonic::Status>>,
{
    let start = Instant::now();
    let mut refused = 0;
    loop {
        match tokio::time::timeout(Duration::from_secs(10), call(worker.clone(), request.clone())).await {
            Ok(Ok(answer)) => return (answer.into_inner(), refused),
            Ok(Err(status)) => assert!(KILLED.contains(&status.code()), "only the fault's refusals: {status:?}"),
            Err(_) => {}
        }
        refused += 1;
        assert!(start.elapsed() < Duration::from_secs(60), "not answered within a minute");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Pairs: the worker sends the pair committed without acknowledgement again with the
/// next one; every pair acknowledged is counted once and stored once. On both
/// databases.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_coordinator_killed_between_commit_and_acknowledgement_loses_and_doubles_nothing() {
    for backend in BACKENDS {
        let coordinator = Killable::new(backend, &["--work-seconds", "100000", "--lease-seconds", "600"]).await;
        let kill_at = 20;
        let (mut first, address) = coordinator.start(&format!("after-units-commit:{kill_at}")).await;
        let token = coordinator.token();
        let mut admin = client(address, &token).await;
        let request = test_request(&mut admin, 1000, None).await;
        let job = admin.create_test(request).await.unwrap().into_inner();
        let (mut worker, _) = registered_worker_at(address, &token, "w", &[], 1).await;
        let lease = worker.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
        assert!(lease.units.len() >= 60, "one lease for the whole drill: {}", lease.units.len());
        let mut reporter = Reporter::new(lease, KILLED);

        for _ in 1..kill_at {
            assert!(reporter.play_and_report(&mut worker).await, "{backend:?}: before the fail point");
        }
        assert!(!reporter.play_and_report(&mut worker).await, "{backend:?}: the coordinator dies before acknowledging");
        killed(&mut first, backend).await;
        assert_eq!(reporter.acknowledged, kill_at as usize - 1);
        let killed_at = Instant::now();
        let (_again, _) = coordinator.start("").await;
        let restarted = Instant::now();
        let recovered = reporter.report_until_taken(&mut worker, Duration::from_secs(60)).await;
        for _ in 0..30 {
            assert!(reporter.play_and_report(&mut worker).await, "{backend:?}: after the restart");
        }
        let mut admin = client(address, &token).await;
        reporter.check_counted_and_stored(&mut admin, coordinator.storage().await.pool(), job.job_id).await;
        println!(
            "drill ({backend:?}): killed after committing report {kill_at}; {} pairs acknowledged = counted = \
             stored; restart took {:.2} s, reports taken again {:.2} s after it",
            reporter.acknowledged,
            (restarted - killed_at).as_secs_f64(),
            recovered.as_secs_f64()
        );
    }
}

/// Self-play chunks: the worker uploads the chunk committed without acknowledgement
/// again; it is stored once (one file, one row), streamed once, and its records are
/// counted once in the job's positions. On both databases.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_coordinator_killed_between_a_chunk_s_commit_and_acknowledgement_stores_and_counts_it_once() {
    for backend in BACKENDS {
        let coordinator = Killable::new(backend, &["--work-seconds", "100000", "--lease-seconds", "600"]).await;
        let kill_at = 5;
        let (mut first, address) = coordinator.start(&format!("after-chunk-commit:{kill_at}")).await;
        let token = coordinator.token();
        let mut admin = client(address, &token).await;
        let spec = v1::SelfPlaySpec { nodes: 1000, games_per_unit: 2, ..Default::default() };
        let request = v1::CreateSelfPlayRequest { spec: Some(spec.clone()), units: 12, ..Default::default() };
        let job = admin.create_self_play(request).await.unwrap().into_inner().job_id;
        let (mut worker, _) = registered_worker_at(address, &token, "w", &[], 1).await;
        let lease = worker.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
        assert_eq!(lease.units, (0..12).collect::<Vec<u64>>(), "{backend:?}: one lease for the whole job");
        // Chunks of games played at different nodes, so that one counted twice shows in
        // the positions.
        let chunks: Vec<Vec<u8>> =
            lease.units.iter().map(|&unit| crate::security::unit_chunk(&spec, unit, 20 + unit)).collect();
        let upload = |unit: u64| v1::UploadChunkRequest {
            lease_id: lease.lease_id,
            unit,
            chunk: chunks[unit as usize].clone(),
            games: 2,
        };

        for unit in 0..kill_at - 1 {
            worker.upload_chunk(upload(unit)).await.unwrap();
        }
        let status = worker.upload_chunk(upload(kill_at - 1)).await.unwrap_err();
        assert!(KILLED.contains(&status.code()), "{backend:?}: the coordinator dies before acknowledging: {status:?}");
        killed(&mut first, backend).await;
        // Sent again and again meanwhile, as the worker does.
        let resend = |mut worker: Worker, request| async move { worker.upload_chunk(request).await };
        let resent = tokio::spawn(send_until_answered(worker.clone(), upload(kill_at - 1), resend));
        let (_again, _) = coordinator.start("").await;
        let restarted = Instant::now();
        let (_, refused) = resent.await.unwrap();
        let recovered = restarted.elapsed();
        let mut stop = false;
        for unit in kill_at..12 {
            stop = worker.upload_chunk(upload(unit)).await.unwrap().into_inner().stop;
        }
        assert!(stop, "{backend:?}: the last chunk finishes the job");

        let mut admin = client(address, &token).await;
        let records: usize = chunks.iter().map(|c| xq_engine::xiangqi::data::read_chunk(c).unwrap().len()).sum();
        let state = admin.get_job(v1::JobId { job_id: job }).await.unwrap().into_inner();
        assert_eq!((state.state.as_str(), state.units_done, state.positions), ("finished", 12, records as u64));
        let streamed = collect(
            admin
                .stream_training_data(v1::TrainingDataRequest { job_id: job, ..Default::default() })
                .await
                .unwrap()
                .into_inner(),
        )
        .await;
        let streamed: Vec<(u64, Vec<u8>)> = streamed.into_iter().map(|c| (c.unit, c.chunk)).collect();
        assert_eq!(streamed, lease.units.iter().copied().zip(chunks).collect::<Vec<_>>(), "{backend:?}: each once");
        assert_eq!(stored_units(coordinator.storage().await.pool(), job).await, 12, "{backend:?}");
        let files = std::fs::read_dir(coordinator.dir.0.join(format!("chunks/{job}"))).unwrap().count();
        assert_eq!(files, 12, "{backend:?}: a file for each chunk, none twice");
        println!(
            "drill ({backend:?}): killed after committing chunk {kill_at}; its upload answered {:.2} s after the \
             restart ({refused} sent while it was down); 12 chunks uploaded = counted = stored, {records} positions",
            recovered.as_secs_f64()
        );
    }
}

/// Verification reports: the worker sends the report committed without
/// acknowledgement again; its unit counts once, its report is stored once, and the
/// job's tally is one pass over the games. On both databases.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_coordinator_killed_between_a_verification_report_s_commit_and_acknowledgement_counts_it_once() {
    use xq_engine::xiangqi::rules::RuleSet;
    use xq_engine::xiangqi::rules::verify::{Tally, check_game, unit_report};

    let games = xq_engine::xiangqi::pgn::parse_pgn(crate::verification::GAMES).unwrap();
    for backend in BACKENDS {
        let coordinator = Killable::new(backend, &["--work-seconds", "100000", "--lease-seconds", "600"]).await;
        let kill_at = 2;
        let (mut first, address) = coordinator.start(&format!("after-verification-commit:{kill_at}")).await;
        let token = coordinator.token();
        let mut admin = client(address, &token).await;
        let pgn = upload(&mut admin, "chases.pgn", "pgn", crate::verification::GAMES.as_bytes()).await.unwrap();
        let request = v1::CreateVerificationRequest { pgn: Some(pgn), games_per_unit: 1, ..Default::default() };
        let job = admin.create_verification(request).await.unwrap().into_inner().job_id;
        let (mut worker, _) = registered_worker_at(address, &token, "w", &[], 1).await;
        let lease = worker.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
        assert_eq!(lease.units, [0, 1, 2, 3], "{backend:?}: a unit a game, one lease for them all");
        let Some(v1::lease::Work::Verification(spec)) = &lease.work else { panic!("a verification lease: {lease:?}") };
        let rules: Vec<RuleSet> = spec.rules.iter().map(|r| r.parse().unwrap()).collect();
        let report = |unit: u64| {
            let index = unit as usize;
            let report = unit_report(&games[index..index + 1], index + 1, &rules, None).unwrap();
            v1::VerificationReport { lease_id: lease.lease_id, unit, report }
        };

        for unit in 0..kill_at - 1 {
            worker.report_verification(report(unit)).await.unwrap();
        }
        let status = worker.report_verification(report(kill_at - 1)).await.unwrap_err();
        assert!(KILLED.contains(&status.code()), "{backend:?}: the coordinator dies before acknowledging: {status:?}");
        killed(&mut first, backend).await;
        // Sent again and again meanwhile, as the worker does.
        let resend = |mut worker: Worker, request| async move { worker.report_verification(request).await };
        let resent = tokio::spawn(send_until_answered(worker.clone(), report(kill_at - 1), resend));
        let (_again, _) = coordinator.start("").await;
        let restarted = Instant::now();
        let (_, refused) = resent.await.unwrap();
        let recovered = restarted.elapsed();
        for unit in kill_at..4 {
            worker.report_verification(report(unit)).await.unwrap();
        }

        let mut admin = client(address, &token).await;
        let state = admin.get_job(v1::JobId { job_id: job }).await.unwrap().into_inner();
        assert_eq!((state.state.as_str(), state.units_done, state.positions), ("finished", 4, 4), "{backend:?}");
        let mut once = Tally::default();
        for (index, game) in games.iter().enumerate() {
            check_game(game, &rules, &format!("game {}", index + 1), &mut once, None).unwrap();
        }
        let summary = admin.get_verification(v1::JobId { job_id: job }).await.unwrap().into_inner();
        assert_eq!((summary.games, summary.parting, summary.refused), (once.games, once.parting, once.refused));
        assert_eq!(summary.by_kind, once.by_kind.into_iter().collect(), "{backend:?}: one pass over the games");
        assert_eq!(stored_units(coordinator.storage().await.pool(), job).await, 4, "{backend:?}");
        let files = std::fs::read_dir(coordinator.dir.0.join(format!("verification/{job}"))).unwrap().count();
        assert_eq!(files, 4, "{backend:?}: a file for each report, none twice");
        println!(
            "drill ({backend:?}): killed after committing verification report {kill_at}; it was answered {:.2} s \
             after the restart ({refused} sent while it was down); 4 units reported = counted = stored, tally of \
             one pass",
            recovered.as_secs_f64()
        );
    }
}

/// Leases: a lease committed and never sent leaves its units with a lease no worker
/// knows of. Read back at the restart as live, it holds them (and its worker's one
/// core: the worker asking again gets nothing) for a lease's lifetime from then, as
/// nobody's heartbeat renews it; then it expires, and its units are the first leased
/// again. Reported on the new lease, each counts once, and the next lease holds none of
/// them. On both databases.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_coordinator_killed_between_a_lease_s_commit_and_its_reply_leases_its_units_again_once_it_expires() {
    let lifetime = Duration::from_secs(3);
    for backend in BACKENDS {
        let args = ["--work-seconds", "720", "--lease-seconds", &lifetime.as_secs().to_string()];
        let coordinator = Killable::new(backend, &args).await;
        let (mut first, address) = coordinator.start("after-lease-commit:1").await;
        let token = coordinator.token();
        let mut admin = client(address, &token).await;
        let request = test_request(&mut admin, 1000, None).await;
        let job = admin.create_test(request).await.unwrap().into_inner().job_id;
        let (mut worker, _) = registered_worker_at(address, &token, "w", &[], 1).await;
        let status = worker.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap_err();
        assert!(KILLED.contains(&status.code()), "{backend:?}: the coordinator dies before answering: {status:?}");
        killed(&mut first, backend).await;

        let (_again, _) = coordinator.start("").await;
        let restarted = Instant::now();
        let ask = |mut worker: Worker, request| async move { worker.lease(request).await };
        let mut nothing = 0;
        let lease = loop {
            let (reply, _) = send_until_answered(worker.clone(), v1::LeaseRequest { concurrency: 1 }, ask).await;
            if let Some(lease) = reply.lease {
                break lease;
            }
            nothing += 1;
            assert!(restarted.elapsed() < 10 * lifetime, "{backend:?}: the stranded units never leased again");
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        let leased_again = restarted.elapsed();
        assert!(nothing > 0, "{backend:?}: the stranded lease holds the worker's one core until it expires");
        let storage = coordinator.storage().await;
        let leases = sqlx::query("SELECT id, units, state FROM leases ORDER BY id").fetch_all(storage.pool()).await;
        let leases: Vec<(i64, String, String)> = leases
            .unwrap()
            .iter()
            .map(|row| (row.try_get("id").unwrap(), row.try_get("units").unwrap(), row.try_get("state").unwrap()))
            .collect();
        let units = lease.units.iter().map(u64::to_string).collect::<Vec<_>>().join(",");
        assert_eq!(
            leases,
            [(1, units.clone(), "expired".to_owned()), (lease.lease_id as i64, units, "active".to_owned())],
            "{backend:?}: the stranded lease expired, and its units were the first leased again"
        );

        let mut reporter = Reporter::new(lease, &[]);
        for _ in 0..reporter.lease.units.len() {
            assert!(reporter.play_and_report(&mut worker).await, "{backend:?}");
        }
        let mut admin = client(address, &token).await;
        reporter.check_counted_and_stored(&mut admin, storage.pool(), job).await;
        let next = worker.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
        assert!(next.units.iter().all(|unit| !reporter.lease.units.contains(unit)), "{backend:?}: {next:?}");
        println!(
            "drill ({backend:?}): killed after committing lease 1; its {} units leased again {:.2} s after the \
             restart (lease lifetime {lifetime:?}; {nothing} asks answered with nothing meanwhile), each counted once",
            reporter.lease.units.len(),
            leased_again.as_secs_f64()
        );
    }
}

/// The tournaments and jobs stored in the database at `url`: each event's number with
/// its tests' numbers, and every job's number.
async fn stored_events_and_jobs(url: &str) -> (Vec<(u64, Vec<u64>)>, Vec<u64>) {
    let storage = xq_coordinator::storage::Storage::open(url).await.unwrap();
    let events =
        sqlx::query("SELECT id, job_ids FROM tournaments ORDER BY id").fetch_all(storage.pool()).await.unwrap();
    let events = events
        .iter()
        .map(|row| {
            let job_ids: String = row.try_get("job_ids").unwrap();
            let tests = job_ids.split(',').filter(|id| !id.is_empty()).map(|id| id.parse().unwrap()).collect();
            (row.try_get::<i64, _>("id").unwrap() as u64, tests)
        })
        .collect();
    let jobs = sqlx::query("SELECT id FROM jobs ORDER BY id").fetch_all(storage.pool()).await.unwrap();
    (events, jobs.iter().map(|row| row.try_get::<i64, _>("id").unwrap() as u64).collect())
}

/// A tournament is written with its first tests in one transaction (N11): the
/// coordinator killed with the event's row written and its tests not yet leaves
/// nothing; killed after the commit and before the answer, the whole event; and the
/// client's retry under the same name then gets that event and makes nothing more. On
/// both databases.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_coordinator_killed_while_creating_a_tournament_leaves_the_whole_event_or_nothing() {
    use xq_proto::client::named;

    for backend in BACKENDS {
        let coordinator = Killable::new(backend, &[]).await;
        let url = &coordinator.url;
        let (mut first, address) = coordinator.start("tournament-written:1").await;
        let token = coordinator.token();
        let mut admin = client(address, &token).await;
        let request = crate::creations::cup_request(&mut admin).await;
        admin.create_tournament(named(request.clone(), "cup")).await.unwrap_err();
        killed(&mut first, backend).await;
        assert_eq!(stored_events_and_jobs(url).await, (vec![], vec![]), "{backend:?}: nothing of the event");

        let (mut second, address) = coordinator.start("after-tournament-commit:1").await;
        let mut admin = client(address, &token).await;
        admin.create_tournament(named(request.clone(), "cup")).await.unwrap_err();
        killed(&mut second, backend).await;
        let (events, jobs) = stored_events_and_jobs(url).await;
        assert_eq!(events.len(), 1, "{backend:?}: {events:?}");
        assert_eq!((events[0].1.len(), &events[0].1), (3, &jobs), "{backend:?}: the whole event");

        let (_third, address) = coordinator.start("").await;
        let mut admin = client(address, &token).await;
        let retried = admin.create_tournament(named(request, "cup")).await.unwrap().into_inner();
        assert_eq!(crate::creations::event_and_tests(&retried), events[0], "{backend:?}");
        assert_eq!(stored_events_and_jobs(url).await, (events, jobs), "{backend:?}: nothing more");
    }
}
