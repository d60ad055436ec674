//! Whole clusters of real processes on loopback: a coordinator, `xq-worker connect`
//! workers and our engine; then faults: a worker killed mid-game (its engines die
//! with it), a worker cut off past its lease that comes back with stale reports, the
//! coordinator killed mid-test.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use xq_proto::v1;

use crate::common::{Client, TempDir, binary, client, collect, upload};

/// Starts `xq-coordinator serve` on `data` at `port` (0: any); returns it and its address.
pub async fn start_coordinator(data: &Path, port: u16, lease_seconds: u32) -> (Child, std::net::SocketAddr) {
    let lease_seconds = lease_seconds.to_string();
    start_coordinator_with(data, port, &["--work-seconds", "15", "--lease-seconds", &lease_seconds], &[]).await
}

/// Starts `xq-coordinator serve` with more arguments and environment variables.
pub async fn start_coordinator_with(
    data: &Path,
    port: u16,
    args: &[&str],
    env: &[(&str, &str)],
) -> (Child, std::net::SocketAddr) {
    // No scaling of clocks unless the test asks for it.
    let reference: &[&str] = if args.contains(&"--reference-nps") { &[] } else { &["--reference-nps", "0"] };
    let mut child = Command::new(binary("xq-coordinator"))
        .args(["serve", "--heartbeat-seconds", "1"])
        .args(reference)
        .args(args)
        .args(["--listen", &format!("127.0.0.1:{port}"), "--data"])
        .arg(data)
        .env("RUST_LOG", "warn")
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let line = tokio::time::timeout(Duration::from_secs(60), lines.next_line()).await.unwrap().unwrap().unwrap();
    let address = line.strip_prefix("listening on http://").unwrap().parse().unwrap();
    (child, address)
}

pub async fn start_worker(admin: &mut Client, address: std::net::SocketAddr, cache: PathBuf, name: &str) -> Child {
    start_worker_with(admin, address, cache, name, &[]).await
}

/// [`start_worker`] with more arguments for `xq-worker connect`.
pub async fn start_worker_with(
    admin: &mut Client,
    address: std::net::SocketAddr,
    cache: PathBuf,
    name: &str,
    args: &[&str],
) -> Child {
    let token = admin
        .create_worker_token(v1::CreateWorkerTokenRequest { name: name.to_owned() })
        .await
        .unwrap()
        .into_inner()
        .token;
    Command::new(binary("xq-worker"))
        .args([
            "connect",
            "--concurrency",
            "1",
            "--name",
            name,
            "--coordinator",
            &format!("http://{address}"),
            "--cache",
        ])
        .arg(cache)
        .args(args)
        .env("XQ_WORKER_TOKEN", token)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

/// Runs `xq` against the coordinator at `address` with the client token of its data
/// directory `data`; returns its output, which must be a success.
pub fn xq_at(address: std::net::SocketAddr, data: &Path, args: &[&str]) -> String {
    let output = run_xq(address, data, args);
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "{args:?}: {text}{}", String::from_utf8_lossy(&output.stderr));
    text
}

/// Runs `xq` as [`xq_at`] does, which must fail; returns what it said on stderr.
pub fn xq_refused(address: std::net::SocketAddr, data: &Path, args: &[&str]) -> String {
    let output = run_xq(address, data, args);
    assert!(!output.status.success(), "{args:?} succeeded");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn run_xq(address: std::net::SocketAddr, data: &Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(binary("xq"))
        .args(["--coordinator", &format!("http://{address}"), "--token-file"])
        .arg(data.join("client-token"))
        .args(args)
        .output()
        .unwrap()
}

pub fn token(data: &Path) -> String {
    std::fs::read_to_string(data.join("client-token")).unwrap().trim().to_owned()
}

/// Our engine uploaded, as "new", and as "base" capped at depth 1.
pub async fn our_engine_against_depth_1(admin: &mut Client) -> (v1::EngineSpec, v1::EngineSpec) {
    let engine = std::fs::read(binary("xq-engine")).unwrap();
    let binary = upload(admin, "xq-engine", "engine", &engine).await.unwrap();
    let new = v1::EngineSpec {
        name: "new".to_owned(),
        binary: Some(binary),
        protocol: "uci".to_owned(),
        ..Default::default()
    };
    let mut base = v1::EngineSpec { name: "base".to_owned(), ..new.clone() };
    base.options.insert("Depth Limit".to_owned(), "1".to_owned());
    (new, base)
}

/// Our engine at depth 3 against itself capped at depth 1, from the 2-ply book.
async fn engines_test(admin: &mut Client, sprt: Option<v1::SprtSpec>, pairs: u64) -> v1::Job {
    let (new, base) = our_engine_against_depth_1(admin).await;
    let book_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../books/xiangqi-2ply.epd");
    let book = upload(admin, "xiangqi-2ply.epd", "book", &std::fs::read(book_path).unwrap()).await.unwrap();
    let request = v1::CreateTestRequest {
        new_engine: Some(new),
        base_engine: Some(base),
        time_control: "depth=3".to_owned(),
        rules: "wxf".to_owned(),
        variant: "xiangqi".to_owned(),
        book: Some(book),
        max_plies: 160,
        sprt,
        pairs,
        ..Default::default()
    };
    admin.create_test(request).await.unwrap().into_inner()
}

pub async fn wait_for(
    admin: &mut Client,
    job: u64,
    limit: Duration,
    what: &str,
    done: impl Fn(&v1::Job) -> bool,
) -> v1::Job {
    let start = Instant::now();
    let mut last = None;
    loop {
        if let Ok(reply) = admin.get_job(v1::JobId { job_id: job }).await {
            let state = reply.into_inner();
            if done(&state) {
                return state;
            }
            last = Some(state);
        }
        assert!(start.elapsed() < limit, "timed out waiting for {what}; the job then: {last:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The job number in `xq sprt` or `xq games`'s first line ("job N: ...").
pub fn job_of(line: &str) -> u64 {
    line.split_whitespace().nth(1).and_then(|w| w.trim_end_matches(':').parse().ok()).unwrap()
}

/// A job's games, as its PGN (DownloadGames).
pub async fn job_games(admin: &mut Client, job: u64) -> Vec<xq_engine::xiangqi::pgn::PgnGame> {
    let text: String = collect(admin.download_games(v1::JobId { job_id: job }).await.unwrap().into_inner())
        .await
        .into_iter()
        .map(|b| b.pgn)
        .collect();
    xq_engine::xiangqi::pgn::parse_pgn(&text).unwrap()
}

/// The games of a job from its PGN, from the new engine's view: (wins, draws, losses).
async fn games_in_pgn(admin: &mut Client, job: u64) -> (usize, [u64; 3]) {
    let games = job_games(admin, job).await;
    let mut wdl = [0; 3];
    for game in &games {
        let new_is_red = game.tag("White") == Some("new");
        match (game.tag("Result").unwrap(), new_is_red) {
            ("1/2-1/2", _) => wdl[1] += 1,
            ("1-0", true) | ("0-1", false) => wdl[0] += 1,
            _ => wdl[2] += 1,
        }
    }
    (games.len(), wdl)
}

async fn check_counts(admin: &mut Client, data: &Path, state: &v1::Job) {
    let totals = state.totals.clone().unwrap();
    let (games, wdl) = games_in_pgn(admin, state.job_id).await;
    assert_eq!(games as u64, 2 * state.units_done, "every counted pair has its two games stored");
    assert_eq!(wdl, [totals.wins, totals.draws, totals.losses], "the counts equal the stored games' results");
    // And the job's counters equal its unit rows.
    let storage = xq_coordinator::storage::Storage::open(&xq_coordinator::storage::sqlite_url(data)).await.unwrap();
    let xq_coordinator::storage::rows::Recount { units, wdl: row_wdl, pentanomial: penta, .. } =
        storage.recount(state.job_id as i64).await.unwrap();
    assert_eq!(units, state.units_done);
    assert_eq!(row_wdl, wdl);
    assert_eq!(penta.to_vec(), totals.pentanomial);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_workers_finish_an_sprt_and_its_counts_equal_the_stored_games() {
    let dir = TempDir::new("cluster");
    let (_coordinator, address) = start_coordinator(&dir.0, 0, 10).await;
    let mut admin = client(address, &token(&dir.0)).await;
    let sprt = v1::SprtSpec {
        elo0: 0.0,
        elo1: 30.0,
        alpha: 0.05,
        beta: 0.05,
        model: "normalized".to_owned(),
        trinomial: false,
    };
    let job = engines_test(&mut admin, Some(sprt), 400).await;
    let mut workers = Vec::new();
    for i in 0..3 {
        workers.push(start_worker(&mut admin, address, dir.0.join(format!("w{i}")), &format!("w{i}")).await);
    }
    let state =
        wait_for(&mut admin, job.job_id, Duration::from_secs(600), "the SPRT to end", |j| j.state != "running").await;
    assert_eq!((state.state.as_str(), state.outcome.as_str()), ("finished", "H1 accepted"), "{state:?}");
    let sprt = state.sprt.unwrap();
    assert!(sprt.llr >= sprt.upper);
    let workers_seen = admin.list_workers(v1::ListWorkersRequest {}).await.unwrap().into_inner().workers;
    assert_eq!(workers_seen.iter().filter(|w| w.last_seen_ms > 0).count(), 3, "all three registered");
    // Pairs in play when the SPRT ended are still reported and count (their games are
    // real): the counts are compared once the workers are gone.
    for mut worker in workers {
        worker.start_kill().unwrap();
        worker.wait().await.unwrap();
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let settled = admin.get_job(v1::JobId { job_id: job.job_id }).await.unwrap().into_inner();
    assert!(settled.units_done >= state.units_done);
    check_counts(&mut admin, &dir.0, &settled).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_worker_s_units_are_played_elsewhere_and_counted_once() {
    let dir = TempDir::new("cluster");
    let (_coordinator, address) = start_coordinator(&dir.0, 0, 3).await;
    let mut admin = client(address, &token(&dir.0)).await;
    let job = engines_test(&mut admin, None, 8).await;
    let mut first = start_worker(&mut admin, address, dir.0.join("first"), "first").await;
    wait_for(&mut admin, job.job_id, Duration::from_secs(300), "a first pair", |j| j.units_done >= 1).await;
    // Killed while its engines play (between leases it runs none).
    let cache = dir.0.join("first");
    while_engines_play(&cache).await;
    first.start_kill().unwrap();
    first.wait().await.unwrap();
    // SIGKILL leaves the worker no chance to stop its engines: the sandbox's
    // --die-with-parent and PID namespace must.
    let deadline = Instant::now() + Duration::from_secs(5);
    while !engines_under(&cache).is_empty() {
        assert!(Instant::now() < deadline, "engines outlived their worker: {:?}", engines_under(&cache));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let killed_at = admin.get_job(v1::JobId { job_id: job.job_id }).await.unwrap().into_inner().units_done;
    assert!(killed_at < 8, "the worker was killed mid-job");
    let _second = start_worker(&mut admin, address, dir.0.join("second"), "second").await;
    let state =
        wait_for(&mut admin, job.job_id, Duration::from_secs(600), "the test to end", |j| j.state != "running").await;
    assert_eq!((state.state.as_str(), state.units_done), ("finished", 8));
    check_counts(&mut admin, &dir.0, &state).await;
    let storage = xq_coordinator::storage::Storage::open(&xq_coordinator::storage::sqlite_url(&dir.0)).await.unwrap();
    let expired: (i64,) =
        sqlx::query_as("SELECT COUNT(*) FROM leases WHERE state = 'expired'").fetch_one(storage.pool()).await.unwrap();
    assert!(expired.0 >= 1, "the killed worker's lease expired");
}

/// The processes running a binary from under `dir` (a worker's cache of engines).
fn engines_under(dir: &Path) -> Vec<u32> {
    let prefix = dir.as_os_str().as_encoded_bytes();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|entry| {
            let pid = entry.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            cmdline.starts_with(prefix).then_some(pid)
        })
        .collect()
}

/// Returns once a binary from under `cache` runs (within 30 s).
async fn while_engines_play(cache: &Path) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while engines_under(cache).is_empty() {
        assert!(Instant::now() < deadline, "the worker's engines never ran");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A TCP relay that the drill can cut: cut, it drops every connection it carries and
/// refuses new ones, as a network that went away would.
struct Relay {
    address: std::net::SocketAddr,
    open: std::sync::Arc<std::sync::atomic::AtomicBool>,
    carried: std::sync::Arc<std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>>,
}

impl Relay {
    async fn start(to: std::net::SocketAddr) -> Relay {
        use std::sync::atomic::Ordering;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let relay = Relay {
            address: listener.local_addr().unwrap(),
            open: std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true)),
            carried: Default::default(),
        };
        let (open, carried) = (relay.open.clone(), relay.carried.clone());
        tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                if !open.load(Ordering::SeqCst) {
                    continue;
                }
                let task = tokio::spawn(async move {
                    if let Ok(mut outbound) = tokio::net::TcpStream::connect(to).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
                carried.lock().unwrap().push(task);
            }
        });
        relay
    }

    fn set_open(&self, open: bool) {
        self.open.store(open, std::sync::atomic::Ordering::SeqCst);
        if !open {
            self.carried.lock().unwrap().drain(..).for_each(|task| task.abort());
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_cut_off_past_its_lease_returns_with_stale_reports_counted_once() {
    let dir = TempDir::new("cluster");
    let lease_seconds = 3;
    let (_coordinator, address) = start_coordinator(&dir.0, 0, lease_seconds).await;
    let mut admin = client(address, &token(&dir.0)).await;
    let job = engines_test(&mut admin, None, 12).await;
    let relay = Relay::start(address).await;
    let _worker = start_worker(&mut admin, relay.address, dir.0.join("w"), "w").await;
    wait_for(&mut admin, job.job_id, Duration::from_secs(300), "a first pair", |j| j.units_done >= 1).await;
    // Cut while its engines play: it holds a lease with a pair in progress.
    while_engines_play(&dir.0.join("w")).await;
    relay.set_open(false);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = admin.get_job(v1::JobId { job_id: job.job_id }).await.unwrap().into_inner();
    // The worker plays on, holding what it cannot report, while its lease expires.
    tokio::time::sleep(Duration::from_secs(3 * u64::from(lease_seconds))).await;
    let during = admin.get_job(v1::JobId { job_id: job.job_id }).await.unwrap().into_inner();
    assert_eq!(during.units_done, before.units_done, "nothing arrives while the worker is cut off");
    let storage = xq_coordinator::storage::Storage::open(&xq_coordinator::storage::sqlite_url(&dir.0)).await.unwrap();
    // The sweeper marks it within a period, and the writer stores the mark in its next
    // batch: on a loaded machine that can come after the three lease times slept above.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let expired: (i64,) = sqlx::query_as("SELECT COUNT(*) FROM leases WHERE state = 'expired'")
            .fetch_one(storage.pool())
            .await
            .unwrap();
        if expired.0 >= 1 {
            break;
        }
        assert!(Instant::now() < deadline, "the cut-off worker's lease expired");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    relay.set_open(true);
    let state =
        wait_for(&mut admin, job.job_id, Duration::from_secs(600), "the test to end", |j| j.state != "running").await;
    assert_eq!((state.state.as_str(), state.units_done), ("finished", 12), "the worker came back");
    check_counts(&mut admin, &dir.0, &state).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_coordinator_restarts_and_the_test_goes_on_without_losing_a_result() {
    let dir = TempDir::new("cluster");
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let (mut coordinator, address) = start_coordinator(&dir.0, port, 20).await;
    let mut admin = client(address, &token(&dir.0)).await;
    let job = engines_test(&mut admin, None, 10).await;
    let _workers = [
        start_worker(&mut admin, address, dir.0.join("a"), "a").await,
        start_worker(&mut admin, address, dir.0.join("b"), "b").await,
    ];
    let before = wait_for(&mut admin, job.job_id, Duration::from_secs(300), "two pairs", |j| j.units_done >= 2).await;
    coordinator.start_kill().unwrap();
    coordinator.wait().await.unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (_coordinator, address) = start_coordinator(&dir.0, port, 20).await;
    let mut admin = client(address, &token(&dir.0)).await;
    let after_restart = admin.get_job(v1::JobId { job_id: job.job_id }).await.unwrap().into_inner();
    assert!(
        after_restart.units_done >= before.units_done,
        "acknowledged results survive: {} then {}",
        before.units_done,
        after_restart.units_done
    );
    let state =
        wait_for(&mut admin, job.job_id, Duration::from_secs(600), "the test to end", |j| j.state != "running").await;
    assert_eq!((state.state.as_str(), state.units_done), ("finished", 10), "the workers came back");
    check_counts(&mut admin, &dir.0, &state).await;
}

/// CPU seconds a process has used (user + system), from /proc.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat.rsplit(')').next().unwrap().split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line, 12 and 13 after the name.
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    ticks / 100.0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_of_file_descriptors_the_coordinator_waits_instead_of_spinning() {
    let dir = TempDir::new("cluster");
    // A coordinator allowed 64 files, with a connection cap above that: accept fails
    // for want of descriptors before the cap refuses anything.
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -n 64 && exec {} serve --listen 127.0.0.1:0 --max-connections 1000 --data {}",
            binary("xq-coordinator").display(),
            dir.0.display()
        ))
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let line = tokio::time::timeout(Duration::from_secs(60), lines.next_line()).await.unwrap().unwrap().unwrap();
    let address: std::net::SocketAddr = line.strip_prefix("listening on http://").unwrap().parse().unwrap();
    let pid = child.id().unwrap();
    let mut log = BufReader::new(child.stderr.take().unwrap()).lines();
    let hogs: Vec<std::net::TcpStream> = (0..100).filter_map(|_| std::net::TcpStream::connect(address).ok()).collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = cpu_seconds(pid);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let used = cpu_seconds(pid) - before;
    assert!(used < 0.5, "{used} CPU seconds in 2 s while out of descriptors: a busy loop");
    let warning = tokio::time::timeout(Duration::from_secs(5), log.next_line()).await.unwrap().unwrap().unwrap();
    assert!(warning.contains("accept failed"), "the descriptors ran out: {warning}");
    // Once the connections close, it serves again.
    drop(hogs);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut admin = client(address, &token(&dir.0)).await;
    admin.list_jobs(v1::ListJobsRequest::default()).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_plays_self_play_jobs_of_both_games_and_the_trainer_can_stream_their_data() {
    let dir = TempDir::new("cluster");
    let (_coordinator, address) = start_coordinator(&dir.0, 0, 10).await;
    let mut admin = client(address, &token(&dir.0)).await;
    let mut jobs = Vec::new();
    for variant in ["xiangqi", "xiongqi"] {
        let spec = v1::SelfPlaySpec {
            nodes: 300,
            games_per_unit: 2,
            random_plies: 6,
            seed: 7,
            rules: "wxf".to_owned(),
            max_plies: 120,
            variant: variant.to_owned(),
            net: None,
        };
        let request = v1::CreateSelfPlayRequest { spec: Some(spec), units: 2, ..Default::default() };
        jobs.push((variant, admin.create_self_play(request).await.unwrap().into_inner()));
    }
    let _worker = start_worker(&mut admin, address, dir.0.join("w"), "w").await;
    for (variant, job) in jobs {
        let state =
            wait_for(&mut admin, job.job_id, Duration::from_secs(600), "a self-play job", |j| j.state != "running")
                .await;
        assert_eq!((state.state.as_str(), state.units_done), ("finished", 2), "{variant}");
        let chunks = collect(
            admin
                .stream_training_data(v1::TrainingDataRequest { job_id: job.job_id, ..Default::default() })
                .await
                .unwrap()
                .into_inner(),
        )
        .await;
        assert_eq!(chunks.iter().map(|c| c.unit).collect::<Vec<_>>(), [0, 1]);
        let mut records = 0;
        for chunk in &chunks {
            let (game, count) = xq_engine::xiangqi::data::check_chunk(&chunk.chunk).unwrap();
            assert_eq!(game.name(), variant, "the chunks hold the job's game");
            records += count;
        }
        assert_eq!(records as u64, state.positions, "{variant}: the stored chunks hold the positions counted");
        assert!(records > 0);
        if variant == "xiangqi" {
            trains_on_the_job(&mut admin, address, &dir.0, job.job_id).await;
        }
    }
}

/// The trainer takes a finished self-play job's data from the coordinator and
/// exports a net; the download behind it saves whole chunks and, run again, only
/// what is new.
async fn trains_on_the_job(admin: &mut Client, address: std::net::SocketAddr, dir: &Path, job: u64) {
    let run = dir.join("run");
    let output = Command::new(binary("xq-trainer"))
        .args(["train", "--job", &job.to_string(), "--coordinator", &format!("http://{address}")])
        .args(["--token", &token(dir), "--out", run.to_str().unwrap(), "--epochs", "1", "--batch-size", "16"])
        .args(["--validation-share", "0.5", "--keep-captures", "--keep-in-check", "--quiet", "--device", "cpu"])
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains(&format!("job {job}: 2 chunks downloaded")), "{stderr}");
    let net = std::fs::read(run.join("net.xqnn")).unwrap();
    let net = xq_engine::xiangqi::nnue::Network::from_bytes(&net).expect("the engine reads the net");
    assert!(net.description().contains(&format!("job {job} of http://{address}")), "{}", net.description());

    let data = run.join("data").join(format!("job{job}"));
    let again = xq_proto::client::download_training_data(admin, job, &data).await.unwrap();
    assert_eq!((again.written, again.present), (0, 2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_xiongqi_test_is_leased_played_from_its_book_and_replayed_by_xiongqi_rules() {
    let dir = TempDir::new("cluster");
    let (_coordinator, address) = start_coordinator(&dir.0, 0, 10).await;
    let mut admin = client(address, &token(&dir.0)).await;
    let (new, base) = our_engine_against_depth_1(&mut admin).await;
    let openings = [
        xq_engine::xiongqi::Position::startpos().to_string(),
        "r2g4/1S4S1/8/8/8/8/8/4G2R w - - 0 1".to_owned(),
        "4g3/8/2e5/8/8/3E4/8/R2G4 b - - 0 1".to_owned(),
    ];
    let book = upload(&mut admin, "xiongqi.fen", "book", openings.join("\n").as_bytes()).await.unwrap();
    let request = v1::CreateTestRequest {
        new_engine: Some(new),
        base_engine: Some(base),
        time_control: "depth=2".to_owned(),
        variant: "xiongqi".to_owned(),
        book: Some(book),
        max_plies: 120,
        pairs: 3,
        ..Default::default()
    };
    let job = admin.create_test(request).await.unwrap().into_inner();
    let _worker = start_worker(&mut admin, address, dir.0.join("w"), "w").await;
    let state =
        wait_for(&mut admin, job.job_id, Duration::from_secs(300), "the Xiongqi test", |j| j.state != "running").await;
    assert_eq!((state.state.as_str(), state.units_done), ("finished", 3), "{state:?}");
    // Played as Xiongqi by engines told so: none lost by a move of the other game (the
    // fleet's workers once sent Xiongqi's start position without the variant).
    assert!(!state.reasons.contains_key("rules infraction"), "{:?}", state.reasons);
    check_counts(&mut admin, &dir.0, &state).await;
    let text: String = collect(admin.download_games(v1::JobId { job_id: job.job_id }).await.unwrap().into_inner())
        .await
        .into_iter()
        .map(|b| b.pgn)
        .collect();
    let games = xq_engine::xiangqi::pgn::parse_pgn(&text).unwrap();
    assert!(games.iter().all(|g| g.tag("Variant") == Some("xiongqi")));
    let mut starts: Vec<String> = games.iter().map(|g| g.tag("FEN").unwrap_or("startpos").to_owned()).collect();
    starts.sort();
    starts.dedup();
    assert_eq!(starts.len(), 3, "each unit plays its own opening: {starts:?}");
}
