//! `xq-coordinator serve`: the coordinator service.

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};
use tokio::net::TcpListener;
use xq_coordinator::access::accounts::SignupMode;
use xq_coordinator::access::listener::ConnectionCaps;
use xq_coordinator::access::streams::FollowerCaps;
use xq_coordinator::api::admission::{self, AdmissionLimits, Rate};
use xq_coordinator::api::http::ReadAccess;
use xq_coordinator::scheduler::config::SchedulerConfig;
use xq_coordinator::server::{CLIENT_TOKEN_FILE, Coordinator, check_transport, dashboard_access};

#[derive(Parser)]
#[command(name = "xq-coordinator", version, about = "Runs SPRT tests and self-play jobs across a fleet of workers")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serves the Worker and Client gRPC services.
    Serve(ServeArgs),
}

#[derive(clap::Args)]
struct ServeArgs {
    /// The data directory: the SQLite database (unless --database), artifacts, games,
    /// training chunks and the first client token.
    #[arg(long)]
    data: PathBuf,
    /// A database URL (postgres://...) instead of the embedded SQLite. Its
    /// `write_timeout_ms=N` parameter bounds how long PostgreSQL has to answer a write
    /// before it fails as unavailable (default 10000).
    #[arg(long)]
    database: Option<String>,
    /// The address to listen on (port 0: any free port; the address is printed).
    #[arg(long, default_value = "127.0.0.1:7420")]
    listen: SocketAddr,
    /// TLS certificate chain (PEM); with --tls-key, serve TLS only.
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// TLS private key (PEM).
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Serve without TLS on an address other machines reach (tokens then cross the
    /// network in the clear: only inside a network you trust).
    #[arg(long)]
    allow_plaintext: bool,
    /// Connections served at once; more are closed at once. Keep it below the
    /// process's file limit (ulimit -n).
    #[arg(long, default_value_t = 16_000)]
    max_connections: usize,
    /// Connections served at once from one address (workers behind one NAT share it).
    #[arg(long, default_value_t = 1_000)]
    max_connections_per_address: usize,
    /// Seconds after a worker's last heartbeat at which its leases expire.
    #[arg(long, default_value_t = 60)]
    lease_seconds: u64,
    /// Seconds between heartbeats asked of workers.
    #[arg(long, default_value_t = 10)]
    heartbeat_seconds: u64,
    /// Seconds of work per lease and concurrent game, at the worker's speed.
    #[arg(long, default_value_t = 300.0)]
    work_seconds: f64,
    /// Our engine's bench nodes per second on the machine the time controls are meant
    /// for; workers' time controls are scaled by their speed against it. 0: no scaling.
    #[arg(long, default_value_t = 1_000_000)]
    reference_nps: u64,
    /// The dashboard's pages' data, JSON API, live stream and /metrics only for holders
    /// of a client token, on any address. This is the default on an address other
    /// machines reach; on loopback anyone on this machine may read them. Actions always
    /// need a token.
    #[arg(long, conflicts_with = "public_dashboard")]
    private_dashboard: bool,
    /// Let anyone who reaches the port read the dashboard, JSON API, live stream and
    /// /metrics, even on an address other machines reach (actions still need a token).
    #[arg(long)]
    public_dashboard: bool,
    /// The most live streams (dashboard pages, `xq watch`) followed at once.
    #[arg(long, default_value_t = FollowerCaps::default().total)]
    max_followers: usize,
    /// The most live streams followed at once from one address.
    #[arg(long, default_value_t = FollowerCaps::default().per_address)]
    max_followers_per_address: usize,
    /// Requests (gRPC, dashboard, /metrics) worked on at once; more are refused at
    /// once, not queued: UNAVAILABLE, which workers retry with backoff, or HTTP 503
    /// with Retry-After.
    #[arg(long, default_value_t = admission::IN_FLIGHT)]
    max_requests_in_flight: usize,
    /// Requests a second each worker's or submitter's token may send on average
    /// (admins' are not limited; 0: no limit); past it RESOURCE_EXHAUSTED or HTTP 429
    /// with Retry-After.
    #[arg(long, default_value_t = admission::TOKEN_RATE.per_second)]
    token_rate: f64,
    /// Requests a token may send at once after a quiet spell, above --token-rate.
    #[arg(long, default_value_t = admission::TOKEN_RATE.burst)]
    token_burst: u32,
    /// Requests a second one address may send without a token in force (page loads,
    /// scrapes, refused calls; an IPv6 address counts by its /64; 0: no limit).
    /// Addresses of this machine are not limited unless --limit-loopback.
    #[arg(long, default_value_t = admission::ADDRESS_RATE.per_second)]
    address_rate: f64,
    /// Requests one address may send at once without a token, above --address-rate.
    #[arg(long, default_value_t = admission::ADDRESS_RATE.burst)]
    address_burst: u32,
    /// Hold this machine's own addresses to --address-rate too. They are not by
    /// default: they are the operator's tools, or a reverse proxy speaking for many
    /// clients, which should limit them itself.
    #[arg(long)]
    limit_loopback: bool,
    /// Tests and self-play jobs from submitters' tokens wait for an admin's `xq approve`.
    #[arg(long)]
    require_approval: bool,
    /// Who may make an account (`xq signup`): open (active at once), approval
    /// (waiting for an admin's or an approver's `xq users accept`) or closed.
    #[arg(long, default_value = "approval")]
    signup: SignupMode,
    /// A coordinator open to the public: submitters' jobs wait for approval, and the
    /// settings below left at 0 (off) take a public coordinator's values: a 20 GiB
    /// quota and 10 active jobs a submitter, ended jobs' games and training data kept
    /// 90 days; the dashboard asks for a client token even on loopback (behind a
    /// reverse proxy) unless --public-dashboard. Without it, a coordinator on an
    /// address other machines reach warns of each of these that is off.
    #[arg(long)]
    public: bool,
    /// Megabytes of free disk kept for reports of leased work: below them, no new
    /// leases and no uploads (0: none).
    #[arg(long, default_value_t = 512)]
    reserve_mb: u64,
    /// Days a finished or stopped test's games are kept after its last change (0: for
    /// good); its counts and results stay.
    #[arg(long, default_value_t = 0)]
    keep_games_days: u64,
    /// Days a finished or stopped self-play job's training data is kept (0: for good).
    #[arg(long, default_value_t = 0)]
    keep_data_days: u64,
    /// Days an uploaded artifact (engine, book, net, PGN) that no job or net names is
    /// kept after its last upload (0: for good).
    #[arg(long, default_value_t = 7)]
    keep_unreferenced_artifacts_days: u64,
    /// Megabytes of games and training data a submitter's jobs may store, with its
    /// uploads, before it can create and upload no more (0: no quota; admins have none).
    #[arg(long, default_value_t = 0)]
    submitter_quota_mb: u64,
    /// Running or pending jobs a submitter may have at once (0: no limit).
    #[arg(long, default_value_t = 0)]
    submitter_active_jobs: usize,
    /// Plies a second the spot checks of verification reports may replay, across all
    /// jobs (a ply ruled under one rule set, or a node searched, counts one; the
    /// arbiter rules about a million a second on a core). Every reported line is
    /// verified again regardless; only the games drawn at random wait for the budget.
    #[arg(long, default_value_t = xq_coordinator::jobs::verification::spot_checks::SPOT_CHECK_PLIES_PER_SECOND)]
    spot_check_plies: f64,
    /// Of a verification job with a reference, one counted unit in this many (drawn
    /// after its report) is reported again by another worker offering the reference,
    /// and a difference in the reference's verdicts decided by a third (0: none).
    #[arg(long, default_value_t = xq_coordinator::jobs::verification::RECHECK_ONE_IN)]
    recheck_one_in: u32,
    /// A job stops as failed when this many workers report the same failure of it (an
    /// engine that does not start, a bench signature other than the test's, ...): the
    /// same kind, of the same engine (0: never; each worker that reports one gets no
    /// more of the job either way).
    #[arg(long, default_value_t = 3)]
    failures_to_stop: usize,
}

/// Request handling allocates many small short-lived buffers (frames, messages, rows)
/// from two threads; mimalloc's thread-local free lists cut the time glibc's allocator
/// spends there (about a fifth of a loaded coordinator's cycles, measured with perf).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()))
        .with_writer(std::io::stderr)
        .init();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("xq-coordinator: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(xq_cli::parse(&["serve"]))) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("xq-coordinator: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// `days` as a duration; 0: none.
fn days(days: u64) -> Option<Duration> {
    (days > 0).then(|| Duration::from_secs(days.saturating_mul(86_400)))
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let Command::Serve(args) = cli.command;
    let config = SchedulerConfig {
        lease_ttl: Duration::from_secs(args.lease_seconds.max(1)),
        heartbeat: Duration::from_secs(args.heartbeat_seconds.max(1)),
        lease_seconds: args.work_seconds.max(1.0),
        reference_nps: args.reference_nps,
        require_approval: args.require_approval,
        signup: args.signup,
        reserve_bytes: args.reserve_mb.saturating_mul(1 << 20),
        keep_games: days(args.keep_games_days),
        keep_training_data: days(args.keep_data_days),
        submitter_quota_bytes: args.submitter_quota_mb.saturating_mul(1 << 20),
        keep_unreferenced_artifacts: days(args.keep_unreferenced_artifacts_days),
        submitter_active_jobs: args.submitter_active_jobs,
        followers: FollowerCaps { total: args.max_followers, per_address: args.max_followers_per_address },
        spot_check_plies_per_second: args.spot_check_plies,
        recheck_one_in: args.recheck_one_in,
        failures_to_stop: args.failures_to_stop,
        ..SchedulerConfig::default()
    };
    let mut config = config;
    if args.public {
        config.make_public();
    } else if !args.listen.ip().is_loopback() {
        for protection in config.protections_off() {
            tracing::warn!("{} is reachable from other machines and {protection}; --public turns each on", args.listen);
        }
    }
    check_transport(args.listen, args.tls_cert.is_some(), args.allow_plaintext)?;
    let mut coordinator = Coordinator::open(&args.data, args.database.as_deref(), config).await?;
    coordinator.dashboard_read =
        dashboard_access(args.listen, args.private_dashboard, args.public_dashboard, args.public);
    if args.public && args.listen.ip().is_loopback() && !args.limit_loopback {
        tracing::warn!(
            "--public on {}: behind a reverse proxy every request comes from this machine, whose addresses the \
             address rate limits leave alone (--limit-loopback); the proxy should limit its clients itself",
            args.listen
        );
    }
    coordinator.admission = AdmissionLimits {
        in_flight: args.max_requests_in_flight.max(1),
        per_token: Rate::new(args.token_rate, args.token_burst),
        per_address: Rate::new(args.address_rate, args.address_burst),
        limit_loopback: args.limit_loopback,
        ..AdmissionLimits::default()
    };
    if coordinator.dashboard_read == ReadAccess::Token && !args.private_dashboard {
        tracing::info!(
            "{} is public: the dashboard asks for a client token (--public-dashboard opens it)",
            args.listen
        );
    }
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some((
            std::fs::read(cert).with_context(|| format!("reading {}", cert.display()))?,
            std::fs::read(key).with_context(|| format!("reading {}", key.display()))?,
        )),
        _ => None,
    };
    let listener = TcpListener::bind(args.listen).await.with_context(|| format!("listening on {}", args.listen))?;
    let address = listener.local_addr()?;
    let scheme = if tls.is_some() { "https" } else { "http" };
    // The first line on stdout is the address: `xq local` and the tests read it.
    println!("listening on {scheme}://{address}");
    std::io::stdout().flush()?;
    tracing::info!("client token in {}", args.data.join(CLIENT_TOKEN_FILE).display());
    tracing::info!("dashboard on {scheme}://{address}/, metrics on {scheme}://{address}/metrics");
    let shutdown = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let caps = ConnectionCaps {
        total: args.max_connections,
        per_address: args.max_connections_per_address,
        first_bytes_within: ConnectionCaps::FIRST_BYTES_WITHIN,
    };
    coordinator.serve(listener, tls, caps, shutdown).await
}
