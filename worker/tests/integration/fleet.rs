//! The fleet worker (`xq_worker::fleet`) against coordinators that misbehave: one that
//! forgets the worker, one that serves an engine whose bytes are not those its hash
//! names, one that refuses reports for a while. A fake coordinator in the test plays
//! each part; the worker is the library's, as `xq-worker connect` runs it.

use std::pin::Pin;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use tonic::{Request, Response, Status};
use xq_proto::v1;
use xq_worker::fleet::{ConnectSettings, FleetError, connect};

use crate::our_engine;

/// What the fake coordinator does, and what it saw.
struct Fake {
    engine: Vec<u8>,
    sha256: String,
    /// Serve the engine with one byte changed.
    tampered: bool,
    /// Reports to refuse (as Unavailable) before taking one.
    refusals: AtomicU32,
    registrations: AtomicU32,
    leases: AtomicU32,
    downloads: AtomicU32,
    report_calls: AtomicU32,
    taken: Mutex<Vec<v1::ReportPairsRequest>>,
    /// Lease refusals to answer first, and when each was answered.
    lease_refusals: Mutex<Vec<Status>>,
    refused_at: Mutex<Vec<Instant>>,
    /// The lease's violation timing (empty: the default).
    violation_timing: &'static str,
    /// The bench signature the lease asks of both engines (0: none).
    bench_signature: u64,
    /// The failures reported.
    failures: Mutex<Vec<v1::FailureReport>>,
}

impl Fake {
    fn new(tampered: bool, refusals: u32) -> Fake {
        let engine = std::fs::read(our_engine("fleet").command).unwrap();
        let sha256 = hex::encode(Sha256::digest(&engine));
        Fake {
            engine,
            sha256,
            tampered,
            refusals: AtomicU32::new(refusals),
            registrations: AtomicU32::new(0),
            leases: AtomicU32::new(0),
            downloads: AtomicU32::new(0),
            report_calls: AtomicU32::new(0),
            taken: Mutex::new(Vec::new()),
            lease_refusals: Mutex::new(Vec::new()),
            refused_at: Mutex::new(Vec::new()),
            violation_timing: "",
            bench_signature: 0,
            failures: Mutex::new(Vec::new()),
        }
    }

    /// One pair of our engine against itself at depth 1.
    fn lease(&self) -> v1::Lease {
        let engine = |name: &str| v1::EngineSpec {
            name: name.to_owned(),
            binary: Some(v1::ArtifactRef {
                sha256: self.sha256.clone(),
                name: "xq-engine".to_owned(),
                ..Default::default()
            }),
            protocol: "uci".to_owned(),
            bench_signature: self.bench_signature,
            ..Default::default()
        };
        let spec = v1::MatchSpec {
            new_engine: Some(engine("new")),
            base_engine: Some(engine("base")),
            time_control: "depth=1".to_owned(),
            rules: "wxf".to_owned(),
            variant: "xiangqi".to_owned(),
            max_plies: 40,
            violation_timing: self.violation_timing.to_owned(),
            ..Default::default()
        };
        v1::Lease {
            lease_id: 1,
            job_id: 1,
            units: vec![0],
            lease_seconds: 60,
            work: Some(v1::lease::Work::MatchSpec(spec)),
        }
    }
}

struct Service(std::sync::Arc<Fake>);

type Pieces = Pin<Box<dyn tokio_stream::Stream<Item = Result<v1::ArtifactPiece, Status>> + Send>>;

#[tonic::async_trait]
impl v1::worker_server::Worker for Service {
    async fn register(&self, _: Request<v1::RegisterRequest>) -> Result<Response<v1::RegisterReply>, Status> {
        self.0.registrations.fetch_add(1, Ordering::SeqCst);
        Ok(Response::new(v1::RegisterReply { worker_id: 1, heartbeat_seconds: 1, lease_seconds: 60 }))
    }

    async fn heartbeat(&self, _: Request<v1::HeartbeatRequest>) -> Result<Response<v1::HeartbeatReply>, Status> {
        Ok(Response::new(v1::HeartbeatReply::default()))
    }

    async fn lease(&self, _: Request<v1::LeaseRequest>) -> Result<Response<v1::LeaseReply>, Status> {
        if let Some(status) = self.0.lease_refusals.lock().unwrap().pop() {
            self.0.refused_at.lock().unwrap().push(Instant::now());
            return Err(status);
        }
        match self.0.leases.fetch_add(1, Ordering::SeqCst) {
            // As a coordinator whose database lost the registration answers.
            0 => Err(Status::failed_precondition("worker 1 has not registered: call Register first")),
            1 => Ok(Response::new(v1::LeaseReply { lease: Some(self.0.lease()), required_release: None })),
            _ => Ok(Response::new(v1::LeaseReply::default())),
        }
    }

    async fn report_pairs(
        &self,
        request: Request<v1::ReportPairsRequest>,
    ) -> Result<Response<v1::ReportReply>, Status> {
        self.0.report_calls.fetch_add(1, Ordering::SeqCst);
        if self.0.refusals.load(Ordering::SeqCst) > 0 {
            self.0.refusals.fetch_sub(1, Ordering::SeqCst);
            return Err(Status::unavailable("the database is away"));
        }
        self.0.taken.lock().unwrap().push(request.into_inner());
        Ok(Response::new(v1::ReportReply { stop: false }))
    }

    async fn upload_chunk(&self, _: Request<v1::UploadChunkRequest>) -> Result<Response<v1::ReportReply>, Status> {
        Err(Status::invalid_argument("no self-play here"))
    }

    async fn report_verification(
        &self,
        _: Request<v1::VerificationReport>,
    ) -> Result<Response<v1::ReportReply>, Status> {
        Err(Status::invalid_argument("no verification here"))
    }

    async fn report_failure(&self, request: Request<v1::FailureReport>) -> Result<Response<v1::FailureReply>, Status> {
        self.0.failures.lock().unwrap().push(request.into_inner());
        Ok(Response::new(v1::FailureReply { job_stopped: false }))
    }

    type DownloadStream = Pieces;

    async fn download(&self, request: Request<v1::DownloadRequest>) -> Result<Response<Pieces>, Status> {
        self.0.downloads.fetch_add(1, Ordering::SeqCst);
        assert_eq!(request.into_inner().sha256, self.0.sha256);
        let mut bytes = self.0.engine.clone();
        if self.0.tampered {
            let middle = bytes.len() / 2;
            bytes[middle] ^= 1;
        }
        let pieces: Vec<_> = bytes
            .chunks(1 << 20)
            .map(|data| Ok(v1::ArtifactPiece { data: data.to_vec(), ..Default::default() }))
            .collect();
        Ok(Response::new(Box::pin(tokio_stream::iter(pieces))))
    }
}

/// Serves `fake` on loopback; returns its URL.
async fn serve(fake: std::sync::Arc<Fake>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
    let service = v1::worker_server::WorkerServer::new(Service(fake)).max_decoding_message_size(32 << 20);
    tokio::spawn(tonic::transport::Server::builder().add_service(service).serve_with_incoming(incoming));
    format!("http://{address}")
}

/// Runs the library's worker against `fake` until `done` holds (or 120 s pass).
async fn work_until(fake: &std::sync::Arc<Fake>, label: &str, done: impl Fn(&Fake) -> bool) {
    let cache = std::env::temp_dir().join(format!("xq-fleet-{label}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&cache);
    let settings = ConnectSettings {
        coordinator: serve(fake.clone()).await,
        token: "worker-token".to_owned(),
        concurrency: 1,
        cache: cache.clone(),
        ca_cert: None,
        name: label.to_owned(),
        sandbox: None,
        pyffish: None,
        release_key: None,
        cache_bytes: xq_worker::fleet::DEFAULT_CACHE_BYTES,
    };
    let capabilities = v1::Capabilities { name: label.to_owned(), cores: 1, ..Default::default() };
    let worker = tokio::spawn(connect(settings, capabilities));
    let start = Instant::now();
    while !done(fake) {
        assert!(!worker.is_finished(), "the worker stopped: {:?}", worker.await);
        assert!(start.elapsed() < Duration::from_secs(120), "the worker did not get there in 120 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    worker.abort();
    let cached = cache.join("artifacts").join(&fake.sha256);
    assert_eq!(cached.exists(), !fake.tampered, "only the engine its hash names is kept");
    let _ = std::fs::remove_dir_all(&cache);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forgotten_worker_registers_again_and_a_tampered_engine_is_never_run() {
    let fake = std::sync::Arc::new(Fake::new(true, 0));
    // Forgotten at its first lease, it registers again, gets the lease, refuses the
    // engine, reports a download failure of the new engine and asks for work again.
    work_until(&fake, "tampered", |f| f.leases.load(Ordering::SeqCst) >= 3).await;
    assert_eq!(fake.registrations.load(Ordering::SeqCst), 2, "registered again when forgotten");
    assert_eq!(fake.downloads.load(Ordering::SeqCst), 1);
    assert_eq!(fake.report_calls.load(Ordering::SeqCst), 0, "nothing played on a tampered engine");
    let failures = fake.failures.lock().unwrap();
    assert_eq!(failures.len(), 1, "{failures:?}");
    let failure = &failures[0];
    assert_eq!((failure.lease_id, failure.kind.as_str(), failure.engine.as_str()), (1, "download", "new"));
    assert!(failure.detail.contains(&format!("not {}", fake.sha256)), "{}", failure.detail);
}

/// The review's flooding bench (2026-11-28, F4): a test whose engine's `bench` prints
/// without end took down every worker that leased it. The worker stops the bench at its
/// output's bound, fails that lease's engine, and goes on asking for work; nothing of
/// the lease is reported as played.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bench_that_floods_fails_its_lease_and_the_worker_goes_on() {
    let mut fake = Fake::new(false, 0);
    fake.engine = b"#!/bin/sh\nyes 'Nodes searched: 1'\n".to_vec();
    fake.sha256 = hex::encode(Sha256::digest(&fake.engine));
    fake.bench_signature = 1;
    let fake = std::sync::Arc::new(fake);
    // The lease is the second answer; three more asked after it show the worker alive.
    work_until(&fake, "flooding-bench", |fake| fake.leases.load(Ordering::SeqCst) >= 5).await;
    assert!(fake.downloads.load(Ordering::SeqCst) >= 1, "the engine was fetched to be benched");
    assert!(fake.taken.lock().unwrap().is_empty(), "nothing played is reported");
    // Reported as the test's bench failure, saying what the bench did.
    let failures = fake.failures.lock().unwrap();
    assert_eq!(failures.iter().map(|f| (f.kind.as_str(), f.engine.as_str())).collect::<Vec<_>>(), [("bench", "new")]);
    assert!(failures[0].detail.contains("bench printed more than"), "{}", failures[0].detail);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_reports_are_sent_again_until_taken_once() {
    let fake = std::sync::Arc::new(Fake::new(false, 2));
    work_until(&fake, "refusals", |f| !f.taken.lock().unwrap().is_empty()).await;
    assert_eq!(fake.report_calls.load(Ordering::SeqCst), 3, "two refusals, then taken");
    let taken = fake.taken.lock().unwrap();
    assert_eq!(taken.len(), 1);
    let report = &taken[0];
    assert_eq!(report.pairs.iter().map(|p| p.unit).collect::<Vec<_>>(), [0]);
    let totals = report.cumulative.as_ref().unwrap();
    assert_eq!(totals.wins + totals.draws + totals.losses, 2, "one pair's two games: {totals:?}");
    for pgn in [&report.pairs[0].first_game_pgn, &report.pairs[0].second_game_pgn] {
        let games = xq_engine::xiangqi::pgn::parse_pgn(pgn).unwrap();
        assert_eq!(games.len(), 1, "{pgn}");
    }
}

/// A lease's violation timing is the one its games are played and recorded under (the
/// coordinator replays them under the same and refuses a game that names another).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_s_violation_timing_is_played_and_recorded() {
    let fake = std::sync::Arc::new(Fake { violation_timing: "after-warning", ..Fake::new(false, 0) });
    work_until(&fake, "timing", |f| !f.taken.lock().unwrap().is_empty()).await;
    let taken = fake.taken.lock().unwrap();
    for pgn in [&taken[0].pairs[0].first_game_pgn, &taken[0].pairs[0].second_game_pgn] {
        let games = xq_engine::xiangqi::pgn::parse_pgn(pgn).unwrap();
        assert_eq!(games[0].tag("ViolationTiming"), Some("after-warning"), "{pgn}");
    }
}

/// A lease refused otherwise than transiently (as when a job's lease reply would pass
/// the message limit, which made every worker that leased it exit) is asked for again
/// after pauses that double, and the worker goes on to play once leases come.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_lease_is_asked_again_after_growing_pauses_and_the_worker_goes_on() {
    let fake = std::sync::Arc::new(Fake::new(false, 0));
    *fake.lease_refusals.lock().unwrap() = vec![
        Status::permission_denied("this worker is disabled"),
        Status::invalid_argument("concurrency 1: out of range"),
        Status::out_of_range("Error, encoded message length too large"),
    ];
    work_until(&fake, "refused-lease", |f| !f.taken.lock().unwrap().is_empty()).await;
    let refused_at = fake.refused_at.lock().unwrap().clone();
    assert_eq!(refused_at.len(), 3);
    let after_first = refused_at[1] - refused_at[0];
    let after_second = refused_at[2] - refused_at[1];
    // 1 s then 2 s, each within a quarter either way.
    assert!(after_first >= Duration::from_millis(700), "{after_first:?}");
    assert!(after_second > after_first && after_second >= Duration::from_millis(1400), "{after_second:?}");
    assert_eq!(fake.taken.lock().unwrap().len(), 1, "then it leased and played");
}

#[test]
fn a_malformed_address_is_a_clear_error() {
    let settings = ConnectSettings {
        coordinator: "not a url".to_owned(),
        token: "t".to_owned(),
        concurrency: 1,
        cache: std::env::temp_dir(),
        ca_cert: None,
        name: "w".to_owned(),
        sandbox: None,
        pyffish: None,
        release_key: None,
        cache_bytes: xq_worker::fleet::DEFAULT_CACHE_BYTES,
    };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let error = runtime.block_on(connect(settings, v1::Capabilities::default())).unwrap_err();
    assert!(matches!(&error, FleetError::Url(url) if url == "not a url"), "{error}");
}
