//! Test helpers: fresh databases of both kinds, an in-process coordinator, and the
//! workspace's binaries.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use sqlx::Connection;
use tokio::net::TcpListener;
use tokio_stream::StreamExt;
use xq_coordinator::access::listener::ConnectionCaps;
use xq_coordinator::scheduler::config::SchedulerConfig;
use xq_coordinator::server::{CLIENT_TOKEN_FILE, Coordinator};
use xq_proto::v1::client_client::ClientClient;
use xq_proto::v1::worker_client::WorkerClient;
use xq_proto::{BearerToken, v1};

pub type Client = ClientClient<tonic::service::interceptor::InterceptedService<tonic::transport::Channel, BearerToken>>;
pub type Worker = WorkerClient<tonic::service::interceptor::InterceptedService<tonic::transport::Channel, BearerToken>>;

/// The PostgreSQL server the tests use (trust auth on this machine).
fn postgres_server() -> String {
    std::env::var("XQ_TEST_POSTGRES").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432".to_owned())
}

static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// A fresh, empty database: `sqlite` in `dir`, or a new PostgreSQL database (named
/// after this process, so that a later run can drop it).
pub async fn fresh_database(backend: Backend, dir: &Path) -> String {
    match backend {
        Backend::Sqlite => format!("sqlite://{}?mode=rwc", dir.join("test.sqlite").display()),
        Backend::Postgres => {
            let server = postgres_server();
            let mut admin = sqlx::PgConnection::connect(&format!("{server}/test"))
                .await
                .expect("PostgreSQL at 127.0.0.1:5432 (scripts/test starts it): is it running?");
            // Databases of earlier runs (processes that are gone) are dropped; test
            // processes running beside this one (nextest runs one per test) keep theirs.
            let pid = std::process::id();
            let gone = |name: &str| {
                let owner = name.strip_prefix("xqt_").and_then(|rest| rest.split('_').next());
                owner.is_some_and(|owner| !Path::new("/proc").join(owner).exists())
            };
            let old: Vec<(String,)> = sqlx::query_as("SELECT datname FROM pg_database WHERE datname LIKE 'xqt\\_%'")
                .fetch_all(&mut admin)
                .await
                .unwrap();
            for (name,) in old {
                if !name.starts_with(&format!("xqt_{pid}_")) && gone(&name) {
                    let _ = sqlx::query(sqlx::AssertSqlSafe(format!("DROP DATABASE IF EXISTS {name}")))
                        .execute(&mut admin)
                        .await;
                }
            }
            let name = format!("xqt_{pid}_{}", COUNTER.fetch_add(1, Ordering::Relaxed));
            sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}"))).execute(&mut admin).await.unwrap();
            format!("{server}/{name}")
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

pub const BACKENDS: [Backend; 2] = [Backend::Sqlite, Backend::Postgres];

/// A temporary directory removed at drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(label: &str) -> Self {
        let path = std::env::temp_dir().join(format!(
            "xq-coord-{label}-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A coordinator served in this process.
pub struct Served {
    pub address: SocketAddr,
    pub data: PathBuf,
    pub coordinator: std::sync::Arc<Coordinator>,
    pub client_token: String,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    _dir: Option<TempDir>,
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
    }
}

/// Serves a coordinator on a fresh database of `backend`.
pub async fn serve(backend: Backend, config: SchedulerConfig) -> Served {
    serve_with(backend, config, 1000).await
}

pub async fn serve_with(backend: Backend, config: SchedulerConfig, caps: impl Into<ConnectionCaps>) -> Served {
    let dir = TempDir::new("served");
    let url = fresh_database(backend, &dir.0).await;
    let mut served = serve_on(&dir.0, &url, config, caps).await;
    served._dir = Some(dir);
    served
}

/// Serves a coordinator on an existing data directory and database.
pub async fn serve_on(data: &Path, url: &str, config: SchedulerConfig, caps: impl Into<ConnectionCaps>) -> Served {
    let coordinator = Coordinator::open(data, Some(url), config).await.unwrap();
    serve_opened(coordinator, data, caps.into()).await
}

/// Serves a coordinator on a fresh SQLite database, `set` after it is opened (its
/// dashboard's access, its admission limits: what `serve`'s flags choose).
pub async fn serve_set(config: SchedulerConfig, set: impl FnOnce(&mut Coordinator)) -> Served {
    let dir = TempDir::new("served");
    let url = fresh_database(Backend::Sqlite, &dir.0).await;
    let mut coordinator = Coordinator::open(&dir.0, Some(&url), config).await.unwrap();
    set(&mut coordinator);
    let mut served = serve_opened(coordinator, &dir.0, ConnectionCaps::total(1000)).await;
    served._dir = Some(dir);
    served
}

/// Serves an opened coordinator whose data directory is `data`.
pub async fn serve_coordinator(coordinator: Coordinator, data: &Path) -> Served {
    serve_opened(coordinator, data, ConnectionCaps::total(1000)).await
}

async fn serve_opened(coordinator: Coordinator, data: &Path, caps: ConnectionCaps) -> Served {
    let coordinator = std::sync::Arc::new(coordinator);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let (shutdown, signal) = tokio::sync::oneshot::channel();
    let running = coordinator.clone();
    tokio::spawn(async move {
        running
            .serve(listener, None, caps, async {
                let _ = signal.await;
            })
            .await
            .unwrap();
    });
    let client_token = std::fs::read_to_string(data.join(CLIENT_TOKEN_FILE)).unwrap().trim().to_owned();
    Served { address, data: data.to_owned(), coordinator, client_token, shutdown: Some(shutdown), _dir: None }
}

pub async fn channel(address: SocketAddr) -> tonic::transport::Channel {
    tonic::transport::Endpoint::from_shared(format!("http://{address}")).unwrap().connect().await.unwrap()
}

pub async fn client(address: SocketAddr, token: &str) -> Client {
    ClientClient::with_interceptor(channel(address).await, BearerToken::new(token).unwrap())
        .max_encoding_message_size(64 << 20)
}

pub async fn worker(address: SocketAddr, token: &str) -> Worker {
    WorkerClient::with_interceptor(channel(address).await, BearerToken::new(token).unwrap())
        .max_encoding_message_size(64 << 20)
}

/// A registered worker's client.
pub async fn registered_worker(served: &Served, name: &str, flags: &[&str]) -> Worker {
    registered_worker_token(served, name, flags).await.0
}

/// A registered worker's client and its token.
pub async fn registered_worker_token(served: &Served, name: &str, flags: &[&str]) -> (Worker, String) {
    registered_worker_with_cores(served, name, flags, 1).await
}

/// A registered worker of `cores` cores, and its token.
pub async fn registered_worker_with_cores(served: &Served, name: &str, flags: &[&str], cores: u32) -> (Worker, String) {
    registered_worker_at(served.address, &served.client_token, name, flags, cores).await
}

/// [`registered_worker_with_cores`] on the coordinator at `address`, whose client
/// token is `client_token` (one served in another process).
pub async fn registered_worker_at(
    address: SocketAddr,
    client_token: &str,
    name: &str,
    flags: &[&str],
    cores: u32,
) -> (Worker, String) {
    registered_as(address, client_token, test_capabilities(name, flags, cores)).await
}

/// What a test's worker called `name` says of itself: `cores` cores, CPU `flags`, this
/// build's arbiter, no reference.
pub fn test_capabilities(name: &str, flags: &[&str], cores: u32) -> v1::Capabilities {
    v1::Capabilities {
        name: name.to_owned(),
        cores,
        cpu_flags: flags.iter().map(|f| (*f).to_owned()).collect(),
        version: "test".to_owned(),
        bench_nps: 1_000_000,
        references: Vec::new(),
        arbiter_build: xq_engine::xiangqi::rules::verify::ARBITER_BUILD.to_owned(),
    }
}

/// A worker given a token of its own (named as `capabilities` name it) and registered
/// with `capabilities`, on the coordinator at `address`: its client and its token.
pub async fn registered_as(
    address: SocketAddr,
    client_token: &str,
    capabilities: v1::Capabilities,
) -> (Worker, String) {
    let mut admin = client(address, client_token).await;
    let request = v1::CreateWorkerTokenRequest { name: capabilities.name.clone() };
    let token = admin.create_worker_token(request).await.unwrap().into_inner().token;
    let mut worker = worker(address, &token).await;
    worker.register(v1::RegisterRequest { capabilities: Some(capabilities) }).await.unwrap();
    (worker, token)
}

pub use xq_proto::client::upload_artifact as upload;

/// A field of a process's /proc status in bytes, such as its peak resident memory
/// (`VmHWM`): what an attack on a coordinator process cost it.
pub fn process_memory(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.split(':').next() == Some(field)).unwrap();
    line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024
}

/// A test request between two uploaded engines.
pub async fn test_request(client: &mut Client, pairs: u64, sprt: Option<v1::SprtSpec>) -> v1::CreateTestRequest {
    let binary = upload(client, "engine", "engine", b"#!/bin/sh\n").await.unwrap();
    let engine = |name: &str| v1::EngineSpec {
        name: name.to_owned(),
        binary: Some(binary.clone()),
        protocol: "uci".to_owned(),
        ..Default::default()
    };
    v1::CreateTestRequest {
        new_engine: Some(engine("new")),
        base_engine: Some(engine("base")),
        time_control: "10+0.1".to_owned(),
        rules: "wxf".to_owned(),
        variant: "xiangqi".to_owned(),
        sprt,
        pairs,
        adjudication: Some(ADJUDICATION),
        // The games these tests write by hand start from the start position, not
        // from the default book's openings.
        start_position: true,
        ..Default::default()
    }
}

/// What [`pair`]'s games end by: a draw at the first 0.00 from move 1 on, a
/// resignation at the first -5.00 after the other engine's +5.00.
pub const ADJUDICATION: v1::Adjudication =
    v1::Adjudication { draw_move_number: 1, draw_plies: 1, draw_score: 0, resign_moves: 1, resign_score: 500 };

/// One game's PGN as a worker writes it, at 10+0.1: `moves` (with their notes) from
/// the start position, ended by adjudication with `result`.
pub fn game(red: &str, black: &str, moves: &str, result: &str) -> String {
    format!(
        "[Event \"t\"]\n[White \"{red}\"]\n[Black \"{black}\"]\n[Result \"{result}\"]\n[Variant \"xiangqi\"]\n\
         [TimeControl \"10+0.1\"]\n[Termination \"adjudication\"]\n\n{moves} {result}\n\n"
    )
}

/// Three opening moves, noted so that [`ADJUDICATION`] ends the game with `result`.
pub fn adjudicated_moves(moves: [&str; 3], result: &str) -> String {
    let [first, second, third] = moves;
    match result {
        "1/2-1/2" => format!("1. {first} {{+0.50 0.100s}} {second} {{+0.00 0.100s}}"),
        "1-0" => format!("1. {first} {{+6.00 0.100s}} {second} {{-6.00 0.100s}}"),
        _ => format!("1. {first} {{+0.50 0.100s}} {second} {{+6.00 0.100s}} 2. {third} {{-6.00 0.100s}}"),
    }
}

/// A bare black king against Red's king and rook, where Red can check for ever: the
/// rook from e0 and from f0 in turn, the king stepping between e9 and f9.
pub const CHECKING_FEN: &str = "4k4/9/9/9/9/9/9/9/9/3K1R3 w - - 0 1";

/// A game from [`CHECKING_FEN`] at 10+0.1, each move a tenth of a second with no score.
fn game_from_checking_fen(red: &str, black: &str, moves: &str, result: &str, termination: &str) -> String {
    let noted: Vec<String> = moves
        .split_whitespace()
        .map(|t| if t.ends_with('.') { t.to_owned() } else { format!("{t} {{0.100s}}") })
        .collect();
    format!(
        "[Event \"t\"]\n[White \"{red}\"]\n[Black \"{black}\"]\n[Result \"{result}\"]\n[Variant \"xiangqi\"]\n\
         [SetUp \"1\"]\n[FEN \"{CHECKING_FEN}\"]\n[TimeControl \"10+0.1\"]\n[Termination \"{termination}\"]\n\n\
         {} {result}\n\n",
        noted.join(" ")
    )
}

/// Red checks on from [`CHECKING_FEN`] and, under the WXF rules, loses by perpetual
/// check (WXF 20.1) when the position comes a third time, at ply 8.
fn perpetual_check_game(red: &str, black: &str) -> String {
    game_from_checking_fen(red, black, "1. f0e0 e9f9 2. e0f0 f9e9 3. f0e0 e9f9 4. e0f0 f9e9", "0-1", "normal")
}

/// A game from [`CHECKING_FEN`] that [`ADJUDICATION`] ends after two plies: Red wins
/// (`1-0`: Black resigns at -6.00 after Red's +6.00) or draws (`1/2-1/2`: a 0.00).
fn adjudicated_game_from_checking_fen(red: &str, black: &str, result: &str) -> String {
    let scores = if result == "1-0" { ["+6.00", "-6.00"] } else { ["+0.50", "+0.00"] };
    let moves = format!("1. f0e0 {{{} 0.100s}} e9f9 {{{} 0.100s}}", scores[0], scores[1]);
    format!(
        "[Event \"t\"]\n[White \"{red}\"]\n[Black \"{black}\"]\n[Result \"{result}\"]\n[Variant \"xiangqi\"]\n\
         [SetUp \"1\"]\n[FEN \"{CHECKING_FEN}\"]\n[TimeControl \"10+0.1\"]\n[Termination \"adjudication\"]\n\n\
         {moves} {result}\n\n"
    )
}

/// A test between the uploaded engines "new" and "base" whose one opening is
/// [`CHECKING_FEN`].
async fn test_from_the_checking_fen(client: &mut Client, pairs: u64) -> v1::CreateTestRequest {
    let book = upload(client, "checks.epd", "book", CHECKING_FEN.as_bytes()).await.unwrap();
    v1::CreateTestRequest { book: Some(book), ..test_request(client, pairs, None).await }
}

/// A test of three pairs from [`CHECKING_FEN`], played by a worker "w" and reported,
/// each pair with games won by a repetition ruling; the new engine's half points:
/// both engines lose by perpetual check ([0, 2]); the new engine does, then draws
/// ([0, 1]); the new engine wins on the board, then by the base engine's perpetual
/// check ([2, 2]). Gives the job's id.
pub async fn ruled_test(served: &Served, admin: &mut Client) -> u64 {
    let request = test_from_the_checking_fen(admin, 3).await;
    let job = admin.create_test(request).await.unwrap().into_inner().job_id;
    let mut worker = registered_worker(served, "w", &[]).await;
    let lease = worker.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
    let units = &lease.units;
    let pairs = vec![
        v1::PairResult {
            unit: units[0],
            first_game_pgn: perpetual_check_game("new", "base"),
            second_game_pgn: perpetual_check_game("base", "new"),
        },
        v1::PairResult {
            unit: units[1],
            first_game_pgn: perpetual_check_game("new", "base"),
            second_game_pgn: adjudicated_game_from_checking_fen("base", "new", "1/2-1/2"),
        },
        v1::PairResult {
            unit: units[2],
            first_game_pgn: adjudicated_game_from_checking_fen("new", "base", "1-0"),
            second_game_pgn: perpetual_check_game("base", "new"),
        },
    ];
    let cumulative = Some(totals(&[[0, 2], [0, 1], [2, 2]]));
    let report = v1::ReportPairsRequest { lease_id: lease.lease_id, pairs, cumulative, ..Default::default() };
    worker.report_pairs(report).await.unwrap();
    job
}

/// A pair in which the new engine scores `points` half points in each game.
pub fn pair(unit: u64, points: [u8; 2]) -> v1::PairResult {
    named_pair(unit, points, ["new", "base"])
}

/// [`pair`] between engines named `names` (the new engine's first).
pub fn named_pair(unit: u64, points: [u8; 2], names: [&str; 2]) -> v1::PairResult {
    let [new, base] = names;
    let red_result = |p: u8| ["0-1", "1/2-1/2", "1-0"][p as usize];
    let black_result = |p: u8| ["1-0", "1/2-1/2", "0-1"][p as usize];
    v1::PairResult {
        unit,
        first_game_pgn: {
            let result = red_result(points[0]);
            game(new, base, &adjudicated_moves(["h2e2", "h9g7", "h0g2"], result), result)
        },
        second_game_pgn: {
            let result = black_result(points[1]);
            game(base, new, &adjudicated_moves(["b2e2", "b9c7", "b0c2"], result), result)
        },
    }
}

/// Cumulative totals of pairs.
pub fn totals(pairs: &[[u8; 2]]) -> v1::Totals {
    let mut t = v1::Totals { pentanomial: vec![0; 5], ..Default::default() };
    for p in pairs {
        for g in p {
            match g {
                2 => t.wins += 1,
                1 => t.draws += 1,
                _ => t.losses += 1,
            }
        }
        t.pentanomial[(p[0] + p[1]) as usize] += 1;
    }
    t
}

/// Collects a server stream.
pub async fn collect<T>(mut stream: tonic::Streaming<T>) -> Vec<T> {
    let mut items = Vec::new();
    while let Some(item) = stream.next().await {
        items.push(item.unwrap());
    }
    items
}

/// A workspace binary built beside the tests (`cargo test --workspace` builds them).
/// Writes `text` to `dir/name` as a program anyone may run (an engine the test
/// scripts); returns its path.
pub fn executable(dir: &Path, name: &str, text: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

pub fn binary(name: &str) -> PathBuf {
    let coordinator = PathBuf::from(env!("CARGO_BIN_EXE_xq-coordinator"));
    let path = coordinator.parent().unwrap().join(name);
    assert!(path.exists(), "{} is missing: run the tests with `cargo test --workspace`", path.display());
    path
}

/// A small deterministic generator (xorshift64*): a failure names its seed and case.
pub struct Random(pub u64);

impl Random {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    pub fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}
