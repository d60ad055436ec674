//! Wall-clock steps (issue #34): a real `xq-coordinator` under Debian's libfaketime,
//! its wall clock stepped forward and back by days and hours while it runs and across
//! restarts, as NTP or an operator's `date -s` steps a machine's clock.
//!
//! libfaketime reads the offset from a file on every clock call (`FAKETIME_NO_CACHE`),
//! so a drill steps the clock by rewriting the file. `CLOCK_MONOTONIC` is left alone
//! (`FAKETIME_DONT_FAKE_MONOTONIC=1`), as a real step leaves it: the coordinator times
//! leases, heartbeats, rates and its sweeps on it, and faking it too would play a
//! machine that slept for days, not a clock that was set.
//!
//! Played:
//! - a token's expiry is a date on the wall clock: a step past it refuses the token at
//!   once and ends the streams opened with it, a step back before it gives the token
//!   its remaining time back (revocation is what ends a token whatever the clock),
//!   while leases, on the monotonic clock, neither expire en masse nor lose or double
//!   a pair;
//! - retention reads ages on the wall clock, the one clock that spans restarts: a step
//!   forward ages finished jobs' games early, never a running job's games nor an
//!   artifact a job names, and a step back removes nothing;
//! - an SPSA job's theta and its history are replayed in the order its pairs counted,
//!   whatever the clock did between reports and across restarts.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tokio::process::Child;
use tokio_stream::StreamExt;
use xq_proto::v1;
use xq_stats::spsa::{History, Schedule, Tuner, parse_parameters};

use crate::cluster::{start_coordinator_with, token};
use crate::common::*;

/// The wall clock of the coordinators a drill starts: an offset from the real one.
struct FakeClock {
    file: PathBuf,
}

impl FakeClock {
    /// A clock at the real time, its file in `dir`.
    fn new(dir: &Path) -> FakeClock {
        let clock = FakeClock { file: dir.join("faketime") };
        clock.set("+0");
        clock
    }

    /// Steps the clock to `offset` from the real time, in libfaketime's relative form
    /// ("+2d", "-1h"). Renamed into place: a clock call never reads half a file.
    fn set(&self, offset: &str) {
        let next = self.file.with_extension("next");
        std::fs::write(&next, offset).unwrap();
        std::fs::rename(&next, &self.file).unwrap();
    }

    /// Starts `xq-coordinator serve` on `data` with this clock.
    async fn start(&self, data: &Path, args: &[&str]) -> (Child, std::net::SocketAddr) {
        let file = self.file.to_str().unwrap();
        let env = [
            ("LD_PRELOAD", "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"),
            ("FAKETIME_TIMESTAMP_FILE", file),
            ("FAKETIME_NO_CACHE", "1"),
            ("FAKETIME_DONT_FAKE_MONOTONIC", "1"),
        ];
        start_coordinator_with(data, 0, args, &env).await
    }
}

const DAY_SECONDS: u64 = 86_400;

/// Waits until `done` holds, for at most `limit`.
async fn eventually<F: Future<Output = bool>>(what: &str, limit: Duration, mut done: impl FnMut() -> F) {
    let start = Instant::now();
    while !done().await {
        assert!(start.elapsed() < limit, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A lease of `worker`'s on the next job with work.
async fn lease(worker: &mut Worker) -> v1::Lease {
    worker.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.expect("work to lease")
}

/// Reports `played` as the pairs of `units` of `lease`, every pair of it so far,
/// between the engines `names`.
async fn report(worker: &mut Worker, lease: &v1::Lease, units: &[u64], played: &[[u8; 2]], names: [&str; 2]) {
    let pairs = units.iter().zip(played).map(|(&unit, &points)| named_pair(unit, points, names)).collect();
    let request = v1::ReportPairsRequest {
        lease_id: lease.lease_id,
        pairs,
        cumulative: Some(totals(played)),
        ..Default::default()
    };
    worker.report_pairs(request).await.unwrap();
}

async fn job(admin: &mut Client, id: u64) -> v1::Job {
    admin.get_job(v1::JobId { job_id: id }).await.unwrap().into_inner()
}

/// The games stored for job `id`, or why they cannot be read.
async fn games(admin: &mut Client, id: u64) -> Result<usize, tonic::Status> {
    let stream = admin.download_games(v1::JobId { job_id: id }).await?.into_inner();
    let text: String = collect(stream).await.into_iter().map(|batch| batch.pgn).collect();
    Ok(xq_engine::xiangqi::pgn::parse_pgn(&text).unwrap().len())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_expires_by_the_wall_clock_while_leases_run_on_the_monotonic_one() {
    let dir = TempDir::new("clock-tokens");
    let clock = FakeClock::new(&dir.0);
    let data = dir.0.join("data");
    // Leases of 10 s, swept every second.
    let (_coordinator, address) = clock.start(&data, &["--lease-seconds", "10", "--work-seconds", "72000"]).await;
    let mut admin = client(address, &token(&data)).await;
    let request =
        v1::CreateTokenRequest { role: "submitter".to_owned(), name: "day".to_owned(), expires_seconds: DAY_SECONDS };
    let day = admin.create_token(request).await.unwrap().into_inner();
    let mut submitter = client(address, &day.token).await;
    submitter.list_jobs(v1::ListJobsRequest::default()).await.unwrap();

    let request = test_request(&mut admin, 6, None).await;
    let test = admin.create_test(request).await.unwrap().into_inner().job_id;
    let (mut worker, _) = registered_worker_at(address, &token(&data), "w", &[], 1).await;
    let held = lease(&mut worker).await;
    assert!(held.units.len() >= 3, "{held:?}");
    let played = [[2, 1], [1, 1], [0, 1]];
    report(&mut worker, &held, &held.units[..1], &played[..1], ["new", "base"]).await;
    let mut watch = submitter.watch_job(v1::JobId { job_id: test }).await.unwrap().into_inner();
    worker.heartbeat(v1::HeartbeatRequest { lease_ids: vec![held.lease_id] }).await.unwrap();

    // Two days on: past the token's date, refused at once, its stream ended within a
    // recheck.
    clock.set("+2d");
    let refused = submitter.list_jobs(v1::ListJobsRequest::default()).await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::Unauthenticated, "{refused:?}");
    let ended = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match watch.next().await {
                Some(Ok(_)) => continue,
                other => return other,
            }
        }
    });
    let ended = ended.await.expect("the stream ends within seconds of the expiry");
    assert_eq!(ended.map(|e| e.unwrap_err().code()), Some(tonic::Code::Unauthenticated));
    // The lease, timed on the monotonic clock, outlives two sweeps after the step: the
    // worker is not told to drop it, and its next pair counts.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let beat = worker.heartbeat(v1::HeartbeatRequest { lease_ids: vec![held.lease_id] }).await.unwrap();
    assert!(beat.into_inner().cancelled_lease_ids.is_empty(), "a step of the wall clock expired the lease");
    report(&mut worker, &held, &held.units[..2], &played[..2], ["new", "base"]).await;

    // Back to an hour before the real time, before the token's date: in force again.
    clock.set("-1h");
    submitter.list_jobs(v1::ListJobsRequest::default()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let beat = worker.heartbeat(v1::HeartbeatRequest { lease_ids: vec![held.lease_id] }).await.unwrap();
    assert!(beat.into_inner().cancelled_lease_ids.is_empty(), "a step back expired the lease");
    // Every pair resent with the third: each counts once.
    report(&mut worker, &held, &held.units[..3], &played, ["new", "base"]).await;
    let state = job(&mut admin, test).await;
    assert_eq!((state.state.as_str(), state.units_done), ("running", 3));
    assert_eq!(state.totals.unwrap().pentanomial, totals(&played).pentanomial);
    let storage = xq_coordinator::storage::Storage::open(&xq_coordinator::storage::sqlite_url(&data)).await.unwrap();
    let xq_coordinator::storage::rows::Recount { units, wdl, .. } = storage.recount(test as i64).await.unwrap();
    let expected = totals(&played);
    assert_eq!((units, wdl), (3, [expected.wins, expected.draws, expected.losses]), "each pair stored once");

    // Revoked, the token is refused whatever the clock says.
    admin.revoke_token(v1::RevokeTokenRequest { id: day.id.clone() }).await.unwrap();
    clock.set("-2h");
    let refused = submitter.list_jobs(v1::ListJobsRequest::default()).await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::Unauthenticated, "{refused:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_ages_on_the_wall_clock_and_never_takes_what_a_rule_keeps() {
    let dir = TempDir::new("clock-retention");
    let clock = FakeClock::new(&dir.0);
    let data = dir.0.join("data");
    // Finished tests' games kept a day, unnamed uploads a week (the default). The
    // retention pass runs at start (then hourly): each step is played across a restart.
    let args = ["--keep-games-days", "1", "--work-seconds", "72000"];
    let (mut coordinator, address) = clock.start(&data, &args).await;
    let mut admin = client(address, &token(&data)).await;
    let (mut worker, worker_token) = registered_worker_at(address, &token(&data), "w", &[], 4).await;
    let request = test_request(&mut admin, 1, None).await;
    let engine = request.new_engine.clone().unwrap().binary.unwrap().sha256;
    let finished = admin.create_test(request).await.unwrap().into_inner().job_id;
    let held = lease(&mut worker).await;
    report(&mut worker, &held, &held.units, &[[2, 1]], ["new", "base"]).await;
    let request = test_request(&mut admin, 8, None).await;
    let running = admin.create_test(request).await.unwrap().into_inner().job_id;
    let held = lease(&mut worker).await;
    report(&mut worker, &held, &held.units[..1], &[[1, 1]], ["new", "base"]).await;
    let unnamed = upload(&mut admin, "unnamed", "engine", b"#!/bin/sh\n# named by no job\n").await.unwrap().sha256;
    let finished_before = job(&mut admin, finished).await;
    assert_eq!(finished_before.state, "finished");
    let artifact = |sha256: &str| data.join("artifacts").join(sha256);
    coordinator.kill().await.unwrap();

    // Two days on: the finished test's games are past their day and go, its counts
    // stay; the running test's games stay, and so does the unnamed upload, within its
    // week.
    clock.set("+2d");
    let (mut coordinator, address) = clock.start(&data, &args).await;
    let mut admin = client(address, &token(&data)).await;
    eventually("the finished test's games are removed", Duration::from_secs(30), || {
        let mut admin = admin.clone();
        async move { job(&mut admin, finished).await.data_removed_ms > 0 }
    })
    .await;
    let after = job(&mut admin, finished).await;
    assert_eq!((after.totals, after.units_done), (finished_before.totals, finished_before.units_done));
    assert_eq!(games(&mut admin, finished).await.unwrap_err().code(), tonic::Code::NotFound);
    assert_eq!(games(&mut admin, running).await.unwrap(), 2);
    assert!(artifact(&unnamed).exists() && artifact(&engine).exists());
    // A test finished now, two days ahead of the real time.
    let mut worker = crate::common::worker(address, &worker_token).await;
    let request = test_request(&mut admin, 1, None).await;
    let ahead = admin.create_test(request).await.unwrap().into_inner().job_id;
    let held = lease(&mut worker).await;
    report(&mut worker, &held, &held.units, &[[1, 2]], ["new", "base"]).await;
    assert_eq!(job(&mut admin, ahead).await.state, "finished");
    coordinator.kill().await.unwrap();

    // Three days behind the real time, five behind the last run: nothing looks old.
    // The finished test's games file, as a crash between marking and deleting leaves
    // it, is deleted again: the pass has run.
    let left = data.join(format!("games/{finished}.pgn"));
    std::fs::write(&left, "left by a crash").unwrap();
    clock.set("-3d");
    let (mut coordinator, address) = clock.start(&data, &args).await;
    let mut admin = client(address, &token(&data)).await;
    eventually("the pass deletes the left file", Duration::from_secs(30), || {
        let gone = !left.exists();
        async move { gone }
    })
    .await;
    assert_eq!(job(&mut admin, ahead).await.data_removed_ms, 0);
    assert_eq!(games(&mut admin, ahead).await.unwrap(), 2);
    assert_eq!(games(&mut admin, running).await.unwrap(), 2);
    assert!(artifact(&unnamed).exists() && artifact(&engine).exists());
    coordinator.kill().await.unwrap();

    // Nine days on: the upload no job names is past its week and collected; the engine
    // the tests name stays, however old its upload, and so do the running test's games.
    clock.set("+9d");
    let (_coordinator, address) = clock.start(&data, &args).await;
    let mut admin = client(address, &token(&data)).await;
    eventually("the unnamed upload is collected", Duration::from_secs(30), || {
        let gone = !artifact(&unnamed).exists();
        async move { gone }
    })
    .await;
    assert!(artifact(&engine).exists());
    assert!(job(&mut admin, ahead).await.data_removed_ms > 0, "seven days after it finished");
    let state = job(&mut admin, running).await;
    assert_eq!((state.state.as_str(), state.units_done, state.data_removed_ms), ("running", 1, 0));
    assert_eq!(games(&mut admin, running).await.unwrap(), 2);
}

/// Two parameters far from their bounds: plus's value above minus's is a flip of +1.
const PARAMS: &str = "A, 100, 0, 200, 10, 0.002\nB, 50, 0, 100, 5, 0.002";

/// The flips of an SPSA lease's probe.
fn flips_of(lease: &v1::Lease) -> Vec<i8> {
    let Some(v1::lease::Work::MatchSpec(spec)) = &lease.work else { panic!("a match lease: {lease:?}") };
    let value = |engine: &Option<v1::EngineSpec>, name: &str| -> f64 {
        engine.as_ref().unwrap().options[name].parse().unwrap()
    };
    ["A", "B"]
        .iter()
        .map(|name| if value(&spec.new_engine, name) > value(&spec.base_engine, name) { 1 } else { -1 })
        .collect()
}

/// Theta and its history as the coordinator shows them.
async fn theta_and_history(admin: &mut Client, id: u64) -> (Vec<f64>, Vec<(u64, Vec<f64>)>) {
    let state = job(admin, id).await;
    let theta = state.spsa.unwrap().parameters.iter().map(|p| p.value).collect();
    let history = admin.get_job_history(v1::JobId { job_id: id }).await.unwrap().into_inner();
    (theta, history.spsa.into_iter().map(|s| (s.pairs, s.theta)).collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spsa_theta_replays_in_the_order_its_pairs_counted_whatever_the_clock_did() {
    let dir = TempDir::new("clock-spsa");
    let clock = FakeClock::new(&dir.0);
    let data = dir.0.join("data");
    // Leases of a few pairs each.
    let args = ["--work-seconds", "100"];
    let (mut coordinator, address) = clock.start(&data, &args).await;
    let mut admin = client(address, &token(&data)).await;
    let (mut worker, worker_token) = registered_worker_at(address, &token(&data), "w", &[], 1).await;
    let pairs = 24;
    let mut test = test_request(&mut admin, pairs, None).await;
    test.base_engine = None;
    let spsa = v1::SpsaSpec { params: PARAMS.to_owned(), ..Default::default() };
    let request = v1::CreateSpsaRequest { test: Some(test), spsa: Some(spsa) };
    let id = admin.create_spsa(request).await.unwrap().into_inner().job_id;

    // The run without any step: each lease's pairs applied with its probe, in the
    // order they were reported.
    let mut expected = Tuner::new(parse_parameters(PARAMS).unwrap(), Schedule::fishtest(pairs)).unwrap();
    let mut history = History::of(&expected);
    let results: [[u8; 2]; 4] = [[2, 2], [0, 1], [2, 1], [0, 0]];
    let mut played = 0;
    // Each step sets the clock, then plays a lease or restarts the coordinator (which
    // must come back with theta and its history as they were): a lease on time, one an
    // hour back, a restart there, a lease two hours back, a restart a day ahead.
    let steps = [("+0", false), ("-1h", false), ("-1h", true), ("-2h", false), ("+1d", true)];
    for (offset, restart) in steps {
        if restart {
            let before = theta_and_history(&mut admin, id).await;
            coordinator.kill().await.unwrap();
            clock.set(offset);
            let address;
            (coordinator, address) = clock.start(&data, &args).await;
            admin = client(address, &token(&data)).await;
            worker = crate::common::worker(address, &worker_token).await;
            assert_eq!(theta_and_history(&mut admin, id).await, before, "replayed after a restart at {offset}");
            continue;
        }
        clock.set(offset);
        let held = lease(&mut worker).await;
        let probe = expected.probe(&flips_of(&held)).unwrap();
        let mine: Vec<[u8; 2]> = (0..held.units.len()).map(|i| results[(played + i) % results.len()]).collect();
        report(&mut worker, &held, &held.units, &mine, ["plus", "minus"]).await;
        for [first, second] in &mine {
            expected.apply(&probe, i64::from(first + second) - 2, 1);
            history.observe(&expected);
        }
        played += mine.len();
    }
    assert!(played >= 3, "three leases of pairs: {played}");
    let samples: Vec<(u64, Vec<f64>)> = history.samples.into_iter().map(|s| (s.pairs, s.theta)).collect();
    assert_eq!(theta_and_history(&mut admin, id).await, (expected.theta().to_vec(), samples));
}
