//! The coordinator as a whole: storage opened and migrated, the scheduler rebuilt, the
//! writer and the lease sweeper started, and both services served on one listener.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tonic::service::Routes;
use tonic::service::interceptor::InterceptedService;
use tower_layer::Layer;
use xq_proto::MAX_MESSAGE_BYTES;
use xq_proto::v1::accounts_server::AccountsServer;
use xq_proto::v1::client_server::ClientServer;
use xq_proto::v1::worker_server::WorkerServer;

use crate::access::connections::{self, Protocols, tls_acceptor};
use crate::access::listener::{AcceptStats, ConnectionCaps, capped_incoming};
use crate::access::places::Places;
use crate::access::streams::followers;
use crate::api::admission::{Admission, AdmissionLimits};
use crate::api::grpc::auth::authenticate;
use crate::api::grpc::downloads::OPEN_DOWNLOADS;
use crate::api::grpc::uploads::load_openings;
use crate::api::grpc::{AccountsApi, ClientApi, Shared, WorkerApi};
use crate::api::http::{self, ReadAccess};
use crate::jobs::tournament::Tournaments;
use crate::jobs::{JobSpec, Unreadable};
use crate::metrics::Metrics;
use crate::nets::Nets;
use crate::scheduler::Scheduler;
use crate::scheduler::config::SchedulerConfig;
use crate::storage::artifacts::ArtifactStore;
use crate::storage::writer::Writer;
use crate::storage::{Storage, sqlite_url};

/// The file in the data directory holding the first client token.
pub const CLIENT_TOKEN_FILE: &str = "client-token";

/// A running coordinator's parts.
pub struct Coordinator {
    pub shared: Shared,
    pub accept_stats: Arc<AcceptStats>,
    /// Who may read the dashboard (open as opened; `serve` chooses with
    /// [`dashboard_access`]).
    pub dashboard_read: ReadAccess,
    /// The bound on requests in flight and their rates.
    pub admission: AdmissionLimits,
}

impl Coordinator {
    /// Opens the data directory and the database (`database_url`, or SQLite in the
    /// data directory), and rebuilds the scheduler. At first start it creates a client
    /// token and writes it to `<data>/client-token`.
    pub async fn open(data_dir: &Path, database_url: Option<&str>, config: SchedulerConfig) -> anyhow::Result<Self> {
        crate::storage::durable::create_dir_all(data_dir)?;
        let url = database_url.map_or_else(|| sqlite_url(data_dir), str::to_owned);
        let storage = Storage::open(&url).await?;
        let artifacts = ArtifactStore::open(&data_dir.join("artifacts"))?;
        let mut snapshot = storage.load().await?;
        let metrics = Arc::new(Metrics::default());
        let writer = Writer::start(&storage, data_dir.join(crate::storage::layout::GAMES_DIR), metrics.clone()).await?;
        // Specs first without books; books need the shared state to be read.
        let mut specs = HashMap::new();
        for row in &snapshot.jobs {
            // One that fails today's checks is kept, shown ended with the reason.
            let spec = JobSpec::decode(&row.kind, &row.spec).unwrap_or_else(|problem| {
                JobSpec::Unreadable(Box::new(Unreadable::new(&row.kind, &row.spec, problem)))
            });
            specs.insert(row.id, spec);
        }
        let partial = Shared {
            scheduler: Arc::new(Scheduler::new(
                Default::default(),
                HashMap::new(),
                writer.clone(),
                config.clone(),
                metrics.clone(),
            )),
            nets: Arc::new(Nets::new(Vec::new(), writer.clone())),
            tournaments: Arc::new(Tournaments::new(Vec::new(), writer.clone())),
            storage: storage.clone(),
            artifacts: artifacts.clone(),
            data_dir: data_dir.to_owned(),
            metrics: metrics.clone(),
            pgn_files: Arc::new(crate::kept::pgn_files()),
            verification_nets: Arc::new(crate::kept::nets()),
            judged_pairs: Arc::new(crate::kept::judged_pairs()),
            followers: followers(config.followers),
            downloads: Places::new(OPEN_DOWNLOADS, "downloads", "token"),
            spot_checks: Arc::new(crate::jobs::verification::spot_checks::SpotChecks::new(
                config.spot_check_plies_per_second,
            )),
            tallies: Arc::default(),
            pair_points: Arc::default(),
            books: Arc::default(),
            default_book: Arc::default(),
            replays: Arc::new(tokio::sync::Semaphore::new(crate::api::grpc::replay_places())),
            login_attempts: Arc::default(),
            password_work: Arc::new(tokio::sync::Semaphore::new(crate::api::grpc::replay_places())),
            contributors: Arc::default(),
        };
        // A book that no longer reads (a stricter parser, a lost file) ends its job,
        // not the start. Jobs sharing a book share one parse, which later creations
        // over the same book find too.
        for (id, spec) in specs.iter_mut() {
            if let JobSpec::Match(job) = spec
                && let Some(book) = job.request.book.clone()
            {
                match load_openings(&partial, &book.sha256, job.variant).await {
                    Ok(openings) => job.openings = Some(openings),
                    Err(problem) => {
                        let row = snapshot.jobs.iter().find(|row| row.id == *id).expect("specs come from rows");
                        let problem = format!("its book {} cannot be read: {problem}", book.sha256);
                        *spec = JobSpec::Unreadable(Box::new(Unreadable::new(&row.kind, &row.spec, problem)));
                    }
                }
            }
        }
        let nets = Arc::new(Nets::new(std::mem::take(&mut snapshot.nets), writer.clone()));
        let tournaments = Arc::new(Tournaments::new(std::mem::take(&mut snapshot.tournaments), writer.clone()));
        let scheduler = Arc::new(Scheduler::new(snapshot, specs, writer, config, metrics.clone()));
        if !scheduler.has_client_token() {
            let token = crate::access::tokens::new_token();
            write_secret(&data_dir.join(CLIENT_TOKEN_FILE), &token)?;
            scheduler.create_client_token(&token).await?;
        }
        let data_dir = data_dir.to_owned();
        let (pgn_files, verification_nets) = (Arc::new(crate::kept::pgn_files()), Arc::new(crate::kept::nets()));
        let shared = Shared {
            scheduler,
            nets,
            tournaments,
            storage,
            artifacts,
            data_dir,
            metrics,
            pgn_files,
            verification_nets,
            judged_pairs: partial.judged_pairs.clone(),
            followers: partial.followers.clone(),
            downloads: partial.downloads.clone(),
            spot_checks: partial.spot_checks.clone(),
            tallies: partial.tallies.clone(),
            pair_points: partial.pair_points.clone(),
            books: partial.books.clone(),
            default_book: partial.default_book.clone(),
            replays: partial.replays.clone(),
            login_attempts: partial.login_attempts.clone(),
            password_work: partial.password_work.clone(),
            contributors: partial.contributors.clone(),
        };
        Ok(Coordinator {
            shared,
            accept_stats: Arc::new(AcceptStats::default()),
            dashboard_read: ReadAccess::Open,
            admission: AdmissionLimits::default(),
        })
    }

    /// Serves until `shutdown` completes. `tls` is (certificate PEM, key PEM).
    pub async fn serve(
        &self,
        listener: TcpListener,
        tls: Option<(Vec<u8>, Vec<u8>)>,
        caps: ConnectionCaps,
        shutdown: impl std::future::Future<Output = ()> + Send,
    ) -> anyhow::Result<()> {
        let scheduler = self.shared.scheduler.clone();
        let sweeper = tokio::spawn(async move {
            let period = (scheduler.config.lease_ttl / 10).clamp(Duration::from_millis(100), Duration::from_secs(5));
            loop {
                tokio::time::sleep(period).await;
                match scheduler.expire().await {
                    Ok(0) => {}
                    Ok(n) => tracing::info!("{n} leases expired; their units go back to their jobs"),
                    Err(error) => tracing::warn!("expiring leases: {error}"),
                }
            }
        });
        let shared = self.shared.clone();
        let rounds = tokio::spawn(async move {
            loop {
                tokio::time::sleep(ROUNDS_PERIOD).await;
                let (advanced, failed) = shared.advance_staged_events().await;
                if !advanced.is_empty() {
                    tracing::info!("tournaments {advanced:?}: next round or tie-breaks paired");
                }
                for (id, status) in failed {
                    tracing::warn!("tournament {id}: next tests not made: {}", status.message());
                }
            }
        });
        let webhooks = tokio::spawn(crate::notify::deliver_endings(self.shared.scheduler.clone()));
        let config = &self.shared.scheduler.config;
        let retention = (config.keep_games.is_some()
            || config.keep_training_data.is_some()
            || config.keep_unreferenced_artifacts.is_some())
        .then(|| tokio::spawn(crate::retention::keep_removing(self.shared.clone(), RETENTION_PERIOD)));
        let grpc = Routes::new(InterceptedService::new(
            WorkerServer::new(WorkerApi(self.shared.clone()))
                .max_decoding_message_size(MAX_MESSAGE_BYTES)
                .max_encoding_message_size(MAX_MESSAGE_BYTES),
            authenticate(self.shared.scheduler.clone()),
        ))
        .add_service(InterceptedService::new(
            ClientServer::new(ClientApi(self.shared.clone()))
                .max_decoding_message_size(MAX_MESSAGE_BYTES)
                .max_encoding_message_size(MAX_MESSAGE_BYTES),
            authenticate(self.shared.scheduler.clone()),
        ))
        // Sign-up and log-in are the calls a user makes before it has a token.
        .add_service(AccountsServer::new(AccountsApi(self.shared.clone())));
        let dashboard = http::routes(self.shared.clone(), self.dashboard_read, tls.is_some());
        let admission = Admission::new(self.admission, self.shared.scheduler.clone());
        let router = http::with_grpc(dashboard, grpc, &self.shared, admission);
        // HTTP/1.1 for browsers and Prometheus beside gRPC's HTTP/2, on hyper's timers.
        let tls = match tls {
            Some((cert, key)) => Some(tls_acceptor(&cert, &key)?),
            None => None,
        };
        let service = crate::detached::DetachedLayer.layer(router);
        let incoming = capped_incoming(listener, caps, self.accept_stats.clone());
        connections::serve(incoming, service, tls, PROTOCOLS, shutdown, DRAIN_WITHIN).await;
        sweeper.abort();
        rounds.abort();
        webhooks.abort();
        if let Some(retention) = retention {
            retention.abort();
        }
        Ok(())
    }
}

/// How often finished jobs' data is checked against the retention settings.
const RETENTION_PERIOD: Duration = Duration::from_secs(3600);

/// How often Swiss events and knockouts are looked at for tests that have ended.
const ROUNDS_PERIOD: Duration = Duration::from_secs(1);

/// How long a TLS handshake may take.
pub const TLS_HANDSHAKE_WITHIN: Duration = Duration::from_secs(10);

/// How long an HTTP/1 request's head may take to arrive (hyper's default is 30 s;
/// a browser sends a head in one write).
pub const HEADER_READ_WITHIN: Duration = Duration::from_secs(10);

/// The connections' limits: a connection carries at most [`MAX_STREAMS`] requests at
/// once (a client queues the rest), one whose peer stops answering pings is closed,
/// freeing its place under the caps, and so is one that trickles a request's head.
const PROTOCOLS: Protocols = Protocols {
    header_read_within: HEADER_READ_WITHIN,
    max_streams: MAX_STREAMS,
    ping_every: Duration::from_secs(30),
    ping_answer_within: Duration::from_secs(20),
    tls_handshake_within: TLS_HANDSHAKE_WITHIN,
};

/// How long requests under way may go on after a shutdown (live streams never end).
const DRAIN_WITHIN: Duration = Duration::from_secs(5);

/// The most requests one HTTP/2 connection carries at once: room for a connection
/// shared by hundreds of workers (the fleet bench puts 300 on one), not for one client
/// to hold unbounded request state.
pub const MAX_STREAMS: u32 = 1024;

/// Why the coordinator will not serve on an address.
#[derive(Debug, thiserror::Error)]
#[error(
    "{0} is reachable from other machines, and without TLS every token crosses the network in the clear: \
     give --tls-cert and --tls-key, listen on a loopback address, or say --allow-plaintext"
)]
pub struct PlaintextRefused(pub std::net::SocketAddr);

/// Plaintext is served on loopback addresses only, unless `allow_plaintext`: bearer
/// tokens (a client's can upload engines that every worker runs) must not cross a
/// network in the clear by default.
pub fn check_transport(listen: std::net::SocketAddr, tls: bool, allow_plaintext: bool) -> Result<(), PlaintextRefused> {
    if tls || allow_plaintext || listen.ip().is_loopback() { Ok(()) } else { Err(PlaintextRefused(listen)) }
}

/// Who may read the dashboard served on `listen`. `private` (`--private-dashboard`)
/// asks a client token everywhere; `public` (`--public-dashboard`) opens reads to
/// anyone who reaches the port. Without either, reads are open on a loopback address
/// only: on an address other machines reach they need a client token, since the
/// pages show every test, engine and worker, and their reads cost the coordinator work.
/// A coordinator made `--public` (`public_profile`) on loopback is behind a reverse
/// proxy on its machine (F12 of the 2026-11-28 review): every reader then comes from
/// loopback, so its reads need a token there too.
pub fn dashboard_access(listen: std::net::SocketAddr, private: bool, public: bool, public_profile: bool) -> ReadAccess {
    let reachable = public_profile || !listen.ip().is_loopback();
    if private || (!public && reachable) { ReadAccess::Token } else { ReadAccess::Open }
}

/// Writes a secret readable by its owner only, its name synced into its directory: the
/// database holds the token from now on, and a lost file would leave no admin token to
/// read.
pub fn write_secret(path: &Path, secret: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new().create(true).write(true).truncate(true).mode(0o600).open(path)?;
    writeln!(file, "{secret}")?;
    file.sync_all()?;
    crate::storage::durable::sync_dir(path.parent().expect("a file in the data directory"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plaintext_is_served_on_loopback_only_unless_allowed() {
        let address = |text: &str| text.parse::<std::net::SocketAddr>().unwrap();
        for local in ["127.0.0.1:7420", "[::1]:7420"] {
            assert!(check_transport(address(local), false, false).is_ok());
        }
        for public in ["0.0.0.0:7420", "[::]:7420", "192.168.1.5:7420"] {
            let refused = check_transport(address(public), false, false).unwrap_err().to_string();
            assert!(refused.starts_with(public) && refused.contains("--allow-plaintext"), "{refused}");
            assert!(check_transport(address(public), true, false).is_ok(), "with TLS");
            assert!(check_transport(address(public), false, true).is_ok(), "allowed");
        }
    }

    #[test]
    fn the_dashboard_is_private_off_loopback_unless_made_public() {
        let address = |text: &str| text.parse::<std::net::SocketAddr>().unwrap();
        for local in ["127.0.0.1:7420", "[::1]:7420"] {
            assert_eq!(dashboard_access(address(local), false, false, false), ReadAccess::Open);
            assert_eq!(dashboard_access(address(local), true, false, false), ReadAccess::Token, "asked private");
            assert_eq!(dashboard_access(address(local), false, false, true), ReadAccess::Token, "behind a proxy");
            assert_eq!(dashboard_access(address(local), false, true, true), ReadAccess::Open, "proxied, made public");
        }
        for public in ["0.0.0.0:7420", "[::]:7420", "192.168.1.5:7420"] {
            assert_eq!(dashboard_access(address(public), false, false, false), ReadAccess::Token, "{public}");
            assert_eq!(dashboard_access(address(public), false, true, false), ReadAccess::Open, "{public} made public");
        }
    }
}
