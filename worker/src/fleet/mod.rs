//! The worker of a coordinator's fleet (`xq-worker connect`). It registers, asks for
//! leases, fetches their engines and books by hash (checked), verifies the engines'
//! bench signatures, plays the lease's game pairs (or self-play units) and reports
//! each finished pair with its games at once, so that a crash loses at most the games
//! in progress. Heartbeats keep the lease alive; the coordinator's answers stop it.
//! When the coordinator is away, every call is retried with a growing, jittered pause;
//! when it no longer knows the worker, the worker registers again. A lease that cannot
//! be worked for the job's sake (an engine that does not start or dies before its first
//! move, a bench signature other than the test's, an artifact that cannot be fetched)
//! is reported to the coordinator as a failure, with what the worker saw; one that
//! cannot be worked for this worker's own (its disk) is abandoned and expires at the
//! coordinator. Either way the worker goes on with the next.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tonic::Code;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};
use xq_proto::failure::{FailureKind, clean_detail};
use xq_proto::v1::worker_client::WorkerClient;
use xq_proto::{BearerToken, v1};

use crate::engine_process::EngineError;
use crate::match_runner::MatchError;
use crate::reference::PYFFISH;
use crate::sandbox::Sandbox;

mod artifacts;
mod engines;
pub mod enrollment;
mod pairs;
mod selfplay;
mod update;
mod verification;

use pairs::play_pairs;
use selfplay::self_play;
use verification::{LastPgn, verify};

type Client = WorkerClient<InterceptedService<Channel, BearerToken>>;

/// Why the worker stopped, or gave up a lease.
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    #[error("--coordinator '{0}' is not a URL")]
    Url(String),
    #[error("TLS settings: {0}")]
    Tls(String),
    #[error("the token is not printable ASCII")]
    Token,
    #[error("{what} {}: {source}", path.display())]
    File {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The coordinator answered a call with an error that retrying cannot mend.
    #[error("{call} refused: {message}{}", refusal_hint(*.code))]
    Refused { call: &'static str, code: Code, message: String },
    #[error("artifact {name}: {reason}")]
    Artifact { name: String, reason: String },
    /// The lease asks for something this worker cannot read or run.
    #[error("the lease: {0}")]
    Lease(String),
    #[error("engine {name}: {reason}")]
    Engine { name: String, reason: String },
    #[error("playing: {0}")]
    Play(String),
    /// The lease cannot be worked for a reason that is the job's, not this worker's
    /// (an engine that does not start, a bench signature other than the test's, an
    /// artifact that cannot be fetched): reported to the coordinator, which stops the
    /// job once enough workers report it.
    #[error("{kind} failure{}: {detail}", engine_note(.engine))]
    Failed { kind: FailureKind, engine: String, detail: String },
}

fn engine_note(engine: &str) -> String {
    if engine.is_empty() { String::new() } else { format!(" of engine {engine}") }
}

/// What usually mends a refusal a newcomer meets: a token the coordinator does not know.
fn refusal_hint(code: Code) -> &'static str {
    match code {
        Code::Unauthenticated => {
            "; an admin makes a worker's token with `xq worker-token NAME`, given to the worker in XQ_WORKER_TOKEN"
        }
        _ => "",
    }
}

impl FleetError {
    fn refused(call: &'static str, status: tonic::Status) -> FleetError {
        FleetError::Refused { call, code: status.code(), message: status.message().to_owned() }
    }

    fn file(what: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> FleetError {
        let path = path.to_owned();
        move |source| FleetError::File { what, path, source }
    }
}

/// A refusal that means the coordinator does not know this worker (any more): a
/// database restored from before it registered, say. Registering again mends it.
fn forgotten(status: &tonic::Status) -> bool {
    matches!(status.code(), Code::NotFound | Code::FailedPrecondition) && status.message().starts_with("worker ")
}

/// A fetch's `error` as a failure of kind `kind` of `engine` ("": no engine's) to
/// report, when it is the job's (an artifact refused or damaged); this worker's own
/// trouble (its disk) stays as it is.
fn failed(kind: FailureKind, engine: &str) -> impl FnOnce(FleetError) -> FleetError {
    let engine = engine.to_owned();
    move |error| match error {
        FleetError::Artifact { .. } | FleetError::Refused { call: "download", .. } => {
            FleetError::Failed { kind, engine, detail: error.to_string() }
        }
        other => other,
    }
}

/// A match that could not go on, as a failure to report when an engine is at fault.
fn match_failure(error: MatchError) -> FleetError {
    match error {
        MatchError::Engine { name, error } => {
            let kind = match error {
                EngineError::Spawn { .. } => FailureKind::Start,
                _ => FailureKind::Handshake,
            };
            FleetError::Failed { kind, engine: name, detail: error.to_string() }
        }
        MatchError::BeforeFirstMove { name, illegal, reason } => {
            let kind = if illegal { FailureKind::IllegalMove } else { FailureKind::Crash };
            FleetError::Failed { kind, engine: name, detail: format!("before its first move of a game: {reason}") }
        }
        other => play_error(other),
    }
}

fn lease_error(error: impl std::fmt::Display) -> FleetError {
    FleetError::Lease(error.to_string())
}

fn play_error(error: impl std::fmt::Display) -> FleetError {
    FleetError::Play(error.to_string())
}

/// How the worker connects and works.
pub struct ConnectSettings {
    pub coordinator: String,
    pub token: String,
    pub concurrency: usize,
    pub cache: PathBuf,
    pub ca_cert: Option<PathBuf>,
    pub name: String,
    /// The sandbox engines run in; none: unconfined.
    pub sandbox: Option<Sandbox>,
    /// A Python with pyffish, for verification jobs that compare with Fairy-Stockfish's
    /// rules (the capability "pyffish").
    pub pyffish: Option<PathBuf>,
    /// The operator's public key, which a worker release must be signed with before
    /// this worker installs it; none: it does not update itself.
    pub release_key: Option<xq_proto::release::VerifyingKey>,
    /// The most bytes the cache of artifacts keeps; the least recently used go first.
    pub cache_bytes: u64,
}

/// The cache's bound when none is given.
pub const DEFAULT_CACHE_BYTES: u64 = 20 << 30;

/// This program's version: the release it was stamped with, else its crate's.
pub fn worker_version() -> String {
    xq_proto::release::stamped_version().unwrap_or_else(|| env!("CARGO_PKG_VERSION").to_owned())
}

/// Sends a unit's result (a self-play chunk, a verification report) with `call`,
/// retried while the coordinator is away; whether the coordinator says to stop.
async fn send_unit<R, Fut>(
    what: &'static str,
    client: &Client,
    request: R,
    call: impl Fn(Client, R) -> Fut,
) -> Result<bool, FleetError>
where
    R: Clone,
    Fut: std::future::Future<Output = Result<tonic::Response<v1::ReportReply>, tonic::Status>>,
{
    let reply = retry(what, || call(client.clone(), request.clone()))
        .await
        .map_err(|status| FleetError::refused(what, status))?;
    Ok(reply.into_inner().stop)
}

/// The first pause after a lease refused otherwise than transiently; it doubles with
/// each refusal in a row up to [`LEASE_REFUSED_LAST_PAUSE`].
pub const LEASE_REFUSED_FIRST_PAUSE: Duration = Duration::from_secs(1);
/// The longest pause between refused leases.
pub const LEASE_REFUSED_LAST_PAUSE: Duration = Duration::from_secs(120);

/// A call's status that says the coordinator is away or busy: retry later.
fn transient(status: &tonic::Status) -> bool {
    matches!(
        status.code(),
        Code::Unavailable
            | Code::DeadlineExceeded
            | Code::Unknown
            | Code::Internal
            | Code::ResourceExhausted
            | Code::Cancelled
    )
}

/// Retries `call` while it fails transiently, pausing 0.5 s, 1 s, 2 s ... up to 30 s
/// (each pause jittered by half).
async fn retry<T, F, Fut>(what: &str, mut call: F) -> Result<T, tonic::Status>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, tonic::Status>>,
{
    let mut pause = Duration::from_millis(500);
    loop {
        match call().await {
            Ok(value) => return Ok(value),
            Err(status) if transient(&status) => {
                // Jittered, so that a fleet cut off together does not come back in step.
                let wait = pause.mul_f64(rand::random_range(0.5..1.5));
                eprintln!(
                    "xq-worker: {what}: {} ({}); retrying in {:.1} s",
                    status.message(),
                    status.code(),
                    wait.as_secs_f64()
                );
                tokio::time::sleep(wait).await;
                pause = (pause * 2).min(Duration::from_secs(30));
            }
            Err(status) => return Err(status),
        }
    }
}

/// Our engine's single-core speed on this machine, from a short bench.
fn bench_nps() -> u64 {
    let result = xq_engine::bench::run(6);
    (result.nodes as f64 / result.elapsed.as_secs_f64().max(1e-6)) as u64
}

/// This machine's capabilities, with our engine's speed from a short bench and the
/// references it can run (pyffish when `settings` name a Python that has it).
pub async fn capabilities(settings: &ConnectSettings) -> v1::Capabilities {
    let bench_nps = tokio::task::spawn_blocking(bench_nps).await.unwrap_or(0);
    v1::Capabilities {
        name: settings.name.clone(),
        cores: settings.concurrency as u32,
        cpu_flags: xq_proto::builds::cpu_flags(),
        version: worker_version(),
        bench_nps,
        references: settings.pyffish.iter().map(|_| PYFFISH.to_owned()).collect(),
        arbiter_build: xq_engine::xiangqi::rules::verify::ARBITER_BUILD.to_owned(),
    }
}

/// Registers `capabilities`; returns the heartbeat period the coordinator asks for.
async fn register(client: &Client, capabilities: &v1::Capabilities) -> Result<Duration, FleetError> {
    let reply = retry("register", || {
        let mut client = client.clone();
        let capabilities = capabilities.clone();
        async move { client.register(v1::RegisterRequest { capabilities: Some(capabilities) }).await }
    })
    .await
    .map_err(|status| FleetError::refused("register", status))?
    .into_inner();
    eprintln!("xq-worker: registered as worker {}", reply.worker_id);
    Ok(Duration::from_secs(u64::from(reply.heartbeat_seconds.max(1))))
}

/// The coordinator at `coordinator`, trusting `ca_cert` for TLS when given.
fn endpoint(coordinator: &str, ca_cert: Option<&Path>) -> Result<Endpoint, FleetError> {
    let mut endpoint = Endpoint::from_shared(coordinator.to_owned())
        .map_err(|_| FleetError::Url(coordinator.to_owned()))?
        .connect_timeout(Duration::from_secs(5))
        .tcp_nodelay(true)
        .http2_keep_alive_interval(Duration::from_secs(30));
    if let Some(ca) = ca_cert {
        let pem = std::fs::read(ca).map_err(FleetError::file("reading the CA certificate", ca))?;
        endpoint = endpoint
            .tls_config(ClientTlsConfig::new().ca_certificate(Certificate::from_pem(pem)))
            .map_err(|e| FleetError::Tls(e.to_string()))?;
    }
    Ok(endpoint)
}

/// Works for the coordinator until an error retrying cannot mend (a revoked token, a
/// disabled worker); returns that error.
pub async fn connect(settings: ConnectSettings, capabilities: v1::Capabilities) -> Result<(), FleetError> {
    let channel = endpoint(&settings.coordinator, settings.ca_cert.as_deref())?.connect_lazy();
    let auth = BearerToken::new(&settings.token).ok_or(FleetError::Token)?;
    let client = WorkerClient::with_interceptor(channel, auth)
        .max_decoding_message_size(xq_proto::MAX_MESSAGE_BYTES)
        .max_encoding_message_size(xq_proto::MAX_MESSAGE_BYTES);
    let artifacts = settings.cache.join("artifacts");
    std::fs::create_dir_all(&artifacts).map_err(FleetError::file("creating the cache directory", &artifacts))?;
    eprintln!("xq-worker: {} cores, bench {} nodes/s", capabilities.cores, capabilities.bench_nps);
    let mut heartbeat = register(&client, &capabilities).await?;
    let mut idle = Duration::from_millis(500);
    let mut refused_pause = LEASE_REFUSED_FIRST_PAUSE;
    let mut refused_release: Option<String> = None;
    let mut last_pgn = LastPgn::default();
    loop {
        let concurrency = settings.concurrency as u32;
        let lease = match retry("lease", || {
            let mut client = client.clone();
            async move { client.lease(v1::LeaseRequest { concurrency }).await }
        })
        .await
        {
            Ok(reply) => match reply.into_inner() {
                v1::LeaseReply { required_release: Some(release), .. } => {
                    // A release other than the one refused last is tried at once.
                    if refused_release.as_ref() != Some(&release.sha256) {
                        refused_pause = LEASE_REFUSED_FIRST_PAUSE;
                    }
                    // Returns only when the release was not installed: the old worker
                    // runs on, and asks again later.
                    let error = update::update(&client, &settings, &release).await;
                    refused_release = Some(release.sha256);
                    let wait = refused_pause.mul_f64(rand::random_range(0.75..1.25));
                    eprintln!("xq-worker: not updated: {error}; asking again in {:.1} s", wait.as_secs_f64());
                    tokio::time::sleep(wait).await;
                    refused_pause = (refused_pause * 2).min(LEASE_REFUSED_LAST_PAUSE);
                    continue;
                }
                reply => reply.lease,
            },
            Err(status) if forgotten(&status) => {
                eprintln!(
                    "xq-worker: the coordinator does not know this worker ({}): registering again",
                    status.message()
                );
                heartbeat = register(&client, &capabilities).await?;
                continue;
            }
            // A token the coordinator does not take will not do later: the worker's
            // own fault, fatal.
            Err(status) if status.code() == Code::Unauthenticated => {
                return Err(FleetError::refused("lease", status));
            }
            // Anything else may be one job's trouble (a reply too large to send) or a
            // coordinator's passing one: ask again later, less often each time, rather
            // than leave the fleet.
            Err(status) => {
                let wait = refused_pause.mul_f64(rand::random_range(0.75..1.25));
                eprintln!(
                    "xq-worker: lease refused: {} ({}); asking again in {:.1} s",
                    status.message(),
                    status.code(),
                    wait.as_secs_f64()
                );
                tokio::time::sleep(wait).await;
                refused_pause = (refused_pause * 2).min(LEASE_REFUSED_LAST_PAUSE);
                continue;
            }
        };
        refused_pause = LEASE_REFUSED_FIRST_PAUSE;
        let Some(lease) = lease else {
            tokio::time::sleep(idle).await;
            idle = (idle * 2).min(Duration::from_secs(10));
            continue;
        };
        idle = Duration::from_millis(500);
        let id = lease.lease_id;
        eprintln!("xq-worker: lease {id} of job {}: {} units", lease.job_id, lease.units.len());
        match work(&client, &settings, lease, heartbeat, &mut last_pgn).await {
            Ok(()) => {}
            Err(FleetError::Failed { kind, engine, detail }) => {
                report_failure(&client, id, kind, &engine, &detail).await;
            }
            Err(error) => {
                // This worker's own trouble: the lease expires at the coordinator and
                // its units go to another worker.
                eprintln!("xq-worker: lease {id} abandoned: {error}");
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
        }
    }
}

/// Tells the coordinator why lease `id` cannot be worked: it ends the lease, gives the
/// worker no more of its job, and stops the job once enough workers said the same.
/// When the report itself is refused, the lease expires as an abandoned one does.
async fn report_failure(client: &Client, id: u64, kind: FailureKind, engine: &str, detail: &str) {
    eprintln!("xq-worker: lease {id}: {kind} failure{}: {detail}", engine_note(engine));
    let report = v1::FailureReport {
        lease_id: id,
        kind: kind.name().to_owned(),
        engine: engine.to_owned(),
        detail: clean_detail(detail),
    };
    let reply = retry("failure report", || {
        let mut client = client.clone();
        let report = report.clone();
        async move { client.report_failure(report).await }
    })
    .await;
    match reply {
        Ok(reply) if reply.get_ref().job_stopped => {
            eprintln!("xq-worker: reported; the job stopped as failed (other workers reported the same)")
        }
        Ok(_) => eprintln!("xq-worker: reported; this worker gets no more of the job"),
        Err(status) => eprintln!("xq-worker: the failure report was refused: {}", status.message()),
    }
}

/// Keeps a lease alive until `done`; raises `stop` when the coordinator cancels it.
fn start_heartbeat(
    client: Client,
    lease: u64,
    every: Duration,
    stop: Arc<AtomicBool>,
    done: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut client = client;
        while !done.load(Ordering::Relaxed) {
            tokio::time::sleep(every).await;
            match client.heartbeat(v1::HeartbeatRequest { lease_ids: vec![lease] }).await {
                Ok(reply) if reply.get_ref().cancelled_lease_ids.contains(&lease) => {
                    stop.store(true, Ordering::Relaxed)
                }
                Ok(_) => {}
                Err(status) => eprintln!("xq-worker: heartbeat: {}", status.message()),
            }
        }
    })
}

async fn work(
    client: &Client,
    settings: &ConnectSettings,
    lease: v1::Lease,
    heartbeat: Duration,
    last_pgn: &mut LastPgn,
) -> Result<(), FleetError> {
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicBool::new(false));
    let beat = start_heartbeat(client.clone(), lease.lease_id, heartbeat, stop.clone(), done.clone());
    let result = match lease.work.clone() {
        Some(v1::lease::Work::MatchSpec(spec)) => play_pairs(client, settings, &lease, spec, stop).await,
        Some(v1::lease::Work::SelfPlay(spec)) => self_play(client, settings, &lease, spec, stop).await,
        Some(v1::lease::Work::Verification(spec)) => verify(client, settings, &lease, spec, stop, last_pgn).await,
        None => Err(FleetError::Lease("it names no work".to_owned())),
    };
    done.store(true, Ordering::Relaxed);
    beat.abort();
    result
}
