//! A simulated fleet against one coordinator, both in this process (each on a runtime
//! of its own) and sharing the machine's cores: thousands of lightweight workers over
//! a few HTTP/2 connections register, lease, beat and report a game pair on a fixed
//! schedule (open loop: a slow reply does not delay the next report). Prints the
//! durable reports per second, their latency percentiles, how busy the machine's
//! cores were (the database server included), and the ratio against
//! a reference run in the same process (heartbeats carrying no lease: the cost of an
//! authenticated RPC that touches nothing), then checks that no report was lost or
//! counted twice. Setting up the fleet goes through the tonic clients the real worker
//! and `xq` use; the measured calls go through the lighter client of [`grpc`].
//!
//! With `--followers N`, N browsers follow the dashboard's live stream during the run;
//! with `--tests N`, N - 1 more tests wait beside the reported one; with `--spsa P` the
//! reported job is an SPSA run of P parameters, every pair moving theta (serialised per
//! job). After the run the
//! dashboard's pages are timed over the stored games (a test's page reads its course,
//! its pairs and its view; the tests page lists them all).
//!
//! cargo bench -p xq-coordinator --bench fleet -- [--workers 20000] [--rate 10500]
//!     [--seconds 20] [--connections 64] [--database sqlite|postgres] [--followers 0]
//!     [--tests 1] [--spsa 0]

mod dashboard;
mod grpc;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use sqlx::Connection;
use tokio::net::TcpListener;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, Endpoint};
use xq_coordinator::access::listener::ConnectionCaps;
use xq_coordinator::scheduler::config::SchedulerConfig;
use xq_coordinator::server::{CLIENT_TOKEN_FILE, Coordinator};
use xq_coordinator::storage::rows::Recount;
use xq_proto::v1::client_client::ClientClient;
use xq_proto::v1::worker_client::WorkerClient;
use xq_proto::{BearerToken, v1};

type Worker = WorkerClient<InterceptedService<Channel, BearerToken>>;

const HEARTBEAT: &str = "/xq.v1.Worker/Heartbeat";
const REPORT_PAIRS: &str = "/xq.v1.Worker/ReportPairs";

struct Options {
    workers: usize,
    rate: f64,
    seconds: f64,
    connections: usize,
    database: String,
    followers: usize,
    tests: usize,
    spsa: usize,
}

/// The target is 10,000 durable reports a second: the fleet offers 5% more, as the rate
/// printed counts the time the last acknowledgements take past the window.
fn options() -> Options {
    let mut options = Options {
        workers: 20_000,
        rate: 10_500.0,
        seconds: 20.0,
        connections: 64,
        database: "sqlite".to_owned(),
        followers: 0,
        tests: 1,
        spsa: 0,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut index = 0;
    while index < args.len() {
        let value = args.get(index + 1).cloned().unwrap_or_default();
        match args[index].as_str() {
            "--workers" => options.workers = value.parse().expect("--workers N"),
            "--rate" => options.rate = value.parse().expect("--rate R"),
            "--seconds" => options.seconds = value.parse().expect("--seconds S"),
            "--connections" => options.connections = value.parse().expect("--connections N"),
            "--database" => options.database = value,
            "--followers" => options.followers = value.parse().expect("--followers N"),
            "--tests" => options.tests = value.parse().expect("--tests N"),
            "--spsa" => options.spsa = value.parse().expect("--spsa P"),
            _ => {
                index += 1;
                continue;
            }
        }
        index += 2;
    }
    options
}

async fn database_url(kind: &str, dir: &std::path::Path) -> String {
    match kind {
        "sqlite" => xq_coordinator::storage::sqlite_url(dir),
        "postgres" => {
            let server =
                std::env::var("XQ_TEST_POSTGRES").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432".to_owned());
            let mut admin = sqlx::PgConnection::connect(&format!("{server}/test")).await.expect("PostgreSQL");
            sqlx::query("DROP DATABASE IF EXISTS xq_fleet_bench").execute(&mut admin).await.unwrap();
            sqlx::query("CREATE DATABASE xq_fleet_bench").execute(&mut admin).await.unwrap();
            format!("{server}/xq_fleet_bench")
        }
        other => panic!("--database {other}: sqlite or postgres"),
    }
}

/// The machine's CPU time so far, in clock ticks (`/proc/stat`): the database server
/// runs outside this process.
#[derive(Clone, Copy)]
struct CpuTimes {
    busy: u64,
    /// Time the hypervisor gave to other guests while this one wanted to run: a run
    /// with much of it measured a disturbed machine.
    stolen: u64,
    total: u64,
}

fn machine_cpu() -> CpuTimes {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let times: Vec<u64> =
        stat.lines().next().unwrap_or_default().split_whitespace().skip(1).filter_map(|t| t.parse().ok()).collect();
    let field = |index: usize| times.get(index).copied().unwrap_or(0);
    let total: u64 = times.iter().take(8).sum();
    CpuTimes { busy: total - field(3) - field(4), stolen: field(7), total }
}

fn num_cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

fn percentile(sorted: &[u32], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() - 1) as f64 * p) as usize] as f64 / 1000.0
}

/// A game as a worker reports it: two noted moves at 10+0.1, ended by [`ADJUDICATION`]
/// (a draw at 0.00, or Black resigning at -5.00 after Red's +5.00).
fn game(red: &str, black: &str, result: &str) -> String {
    let scores = if result == "1-0" { ["+6.00", "-6.00"] } else { ["+0.50", "+0.00"] };
    format!(
        "[White \"{red}\"]\n[Black \"{black}\"]\n[Result \"{result}\"]\n[Variant \"xiangqi\"]\n\
         [TimeControl \"10+0.1\"]\n[Termination \"adjudication\"]\n\n\
         1. h2e2 {{{} 0.100s}} h9g7 {{{} 0.100s}} {result}\n\n",
        scores[0], scores[1]
    )
}

const ADJUDICATION: v1::Adjudication =
    v1::Adjudication { draw_move_number: 1, draw_plies: 1, draw_score: 0, resign_moves: 1, resign_score: 500 };

/// Request handling allocates many small short-lived buffers (frames, messages, rows)
/// from two threads; mimalloc's thread-local free lists cut the time glibc's allocator
/// spends there (about a fifth of a loaded coordinator's cycles, measured with perf).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let options = options();
    // The coordinator and the fleet each get their own runtime, as separate processes
    // would: in one runtime a coordinator task would queue behind thousands of
    // simulated workers' tasks, a delay no real deployment has. Each has one worker
    // thread per core, tokio's default and what a deployed coordinator runs with.
    let runtime =
        |name: &str| tokio::runtime::Builder::new_multi_thread().thread_name(name).enable_all().build().unwrap();
    // The browsers following the live stream get a runtime of their own too, as they
    // would be other processes, so that their reading does not delay the fleet's reports.
    let (coordinator, fleet, browsers) = (runtime("coordinator"), runtime("fleet"), runtime("browsers"));
    fleet.block_on(run(options, coordinator.handle().clone(), browsers.handle().clone()));
}

async fn run(options: Options, server: tokio::runtime::Handle, browsers: tokio::runtime::Handle) {
    let dir = std::env::temp_dir().join(format!("xq-fleet-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let url = database_url(&options.database, &dir).await;
    std::fs::create_dir_all(&dir).unwrap();
    // Leases of 256 pairs, living through the run without heartbeats cut short.
    let config = SchedulerConfig {
        lease_ttl: Duration::from_secs(600),
        lease_seconds: 72.0 * 256.0,
        reference_nps: 0,
        ..SchedulerConfig::default()
    };
    let (coordinator, address) = {
        let dir = dir.clone();
        server
            .spawn(async move {
                let coordinator = Arc::new(Coordinator::open(&dir, Some(&url), config).await.unwrap());
                let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
                let address = listener.local_addr().unwrap();
                let serving = coordinator.clone();
                tokio::spawn(async move {
                    serving.serve(listener, None, ConnectionCaps::total(10_000), std::future::pending()).await.unwrap()
                });
                (coordinator, address)
            })
            .await
            .unwrap()
    };
    let client_token = std::fs::read_to_string(dir.join(CLIENT_TOKEN_FILE)).unwrap();
    let mut channels = Vec::new();
    for _ in 0..options.connections {
        channels.push(
            Endpoint::from_shared(format!("http://{address}")).unwrap().tcp_nodelay(true).connect().await.unwrap(),
        );
    }
    let mut light = Vec::new();
    for _ in 0..options.connections {
        light.push(grpc::Connection::open(address).await.unwrap());
    }
    let mut admin = ClientClient::with_interceptor(channels[0].clone(), BearerToken::new(&client_token).unwrap());
    let engine = {
        let piece =
            v1::ArtifactPiece { name: "engine".to_owned(), kind: "engine".to_owned(), data: b"#!/bin/sh\n".to_vec() };
        admin.upload_artifact(tokio_stream::iter(vec![piece])).await.unwrap().into_inner()
    };
    let spec = |name: &str| v1::EngineSpec {
        name: name.to_owned(),
        binary: Some(engine.clone()),
        protocol: "uci".to_owned(),
        ..Default::default()
    };
    let request = v1::CreateTestRequest {
        new_engine: Some(spec("new")),
        base_engine: Some(spec("base")),
        time_control: "10+0.1".to_owned(),
        pairs: 10_000_000,
        adjudication: Some(ADJUDICATION),
        // The simulated workers play their canned games from the start position, not
        // the default book's openings.
        start_position: true,
        ..Default::default()
    };
    let (job, names) = if options.spsa > 0 {
        let params: String = (0..options.spsa).map(|i| format!("P{i}, 100, 0, 200, 10, 0.002\n")).collect();
        let test = v1::CreateTestRequest { base_engine: None, ..request.clone() };
        let spsa = v1::SpsaSpec { params, ..Default::default() };
        let created = admin.create_spsa(v1::CreateSpsaRequest { test: Some(test), spsa: Some(spsa) }).await;
        (created.unwrap().into_inner(), ["plus", "minus"])
    } else {
        (admin.create_test(request.clone()).await.unwrap().into_inner(), ["new", "base"])
    };

    // The fleet: tokens, registration and a lease each, all at once.
    let started = Instant::now();
    let mut setups = tokio::task::JoinSet::new();
    let in_flight = Arc::new(tokio::sync::Semaphore::new(256));
    for index in 0..options.workers {
        let channel = channels[index % channels.len()].clone();
        let caller = light[index % light.len()].clone();
        let mut admin = ClientClient::with_interceptor(channel.clone(), BearerToken::new(&client_token).unwrap());
        let in_flight = in_flight.clone();
        setups.spawn(async move {
            let _place = in_flight.acquire().await.unwrap();
            let token = admin
                .create_worker_token(v1::CreateWorkerTokenRequest { name: format!("sim-{index}") })
                .await
                .unwrap()
                .into_inner()
                .token;
            let mut worker: Worker = WorkerClient::with_interceptor(channel, BearerToken::new(&token).unwrap());
            let capabilities =
                v1::Capabilities { name: format!("sim-{index}"), cores: 1, bench_nps: 1_000_000, ..Default::default() };
            worker.register(v1::RegisterRequest { capabilities: Some(capabilities) }).await.unwrap();
            let lease = worker.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
            (caller.caller(&token), lease)
        });
    }
    let fleet: Vec<(grpc::Caller, v1::Lease)> = setups.join_all().await;
    println!(
        "fleet of {} workers on {} connections ({}) set up in {:.1} s: tokens, registrations and leases",
        fleet.len(),
        channels.len(),
        options.database,
        started.elapsed().as_secs_f64()
    );

    // Reference: authenticated RPCs that touch nothing, as fast as they go.
    let reference = {
        let done = Arc::new(AtomicU64::new(0));
        let until = Instant::now() + Duration::from_secs(3);
        let mut tasks = tokio::task::JoinSet::new();
        for (worker, _) in fleet.iter().take(512) {
            let (mut worker, done) = (worker.clone(), done.clone());
            tasks.spawn(async move {
                while Instant::now() < until {
                    let _: v1::HeartbeatReply =
                        worker.call(HEARTBEAT, &v1::HeartbeatRequest { lease_ids: vec![] }).await.unwrap();
                    done.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        tasks.join_all().await;
        done.load(Ordering::Relaxed) as f64 / 3.0
    };
    println!("reference: {reference:.0} empty heartbeats/s (512 callers, closed loop)");

    // The other tests, made after the fleet took its leases: they wait, as queued tests do.
    let started = Instant::now();
    for index in 1..options.tests {
        let waiting = v1::CreateTestRequest { description: format!("waiting test {index}"), ..request.clone() };
        admin.create_test(waiting).await.unwrap();
    }
    if options.tests > 1 {
        println!("{} more tests made in {:.1} s", options.tests - 1, started.elapsed().as_secs_f64());
    }
    let followers = if options.followers > 0 {
        let followers = dashboard::Followers::start(&browsers, address, options.followers).await;
        println!("{} browsers follow the live stream", followers.connected);
        Some(followers)
    } else {
        None
    };

    // The run: each worker reports one pair every `period`, and beats every 10 periods,
    // at a report of its own, so that the beats spread over time as independent
    // workers' do (all beating after the same report doubled the load for a period).
    // The schedule starts once every worker's task is spawned, so that the window holds
    // exactly `rate * seconds` reports.
    let period = Duration::from_secs_f64(options.workers as f64 / options.rate);
    let start = Instant::now() + Duration::from_secs(1);
    let until = start + Duration::from_secs_f64(options.seconds);
    let acked = Arc::new(AtomicU64::new(0));
    let heartbeats = Arc::new(AtomicU64::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for (index, (worker, lease)) in fleet.into_iter().enumerate() {
        let (acked, heartbeats) = (acked.clone(), heartbeats.clone());
        tasks.spawn(async move {
            let mut worker = worker;
            let mut latencies = Vec::new();
            let phase = period.mul_f64(index as f64 / options.workers as f64);
            let mut next = start + phase;
            let mut cumulative = v1::Totals { pentanomial: vec![0; 5], ..Default::default() };
            for (sent, &unit) in lease.units.iter().enumerate() {
                // The schedule, not the clock, decides: a report due inside the window
                // is sent even when the worker wakes late for it.
                if next >= until {
                    break;
                }
                tokio::time::sleep_until(next.into()).await;
                next += period;
                // The new engine wins the first game and draws the second.
                cumulative.wins += 1;
                cumulative.draws += 1;
                cumulative.pentanomial[3] += 1;
                let pair = v1::PairResult {
                    unit,
                    first_game_pgn: game(names[0], names[1], "1-0"),
                    second_game_pgn: game(names[1], names[0], "1/2-1/2"),
                };
                let report = v1::ReportPairsRequest {
                    lease_id: lease.lease_id,
                    pairs: vec![pair],
                    cumulative: Some(cumulative.clone()),
                    ..Default::default()
                };
                let start = Instant::now();
                let _: v1::ReportReply = worker.call(REPORT_PAIRS, &report).await.expect("a report");
                latencies.push(start.elapsed().as_micros().min(u32::MAX as u128) as u32);
                acked.fetch_add(1, Ordering::Relaxed);
                if sent % 10 == index % 10 {
                    let beat = v1::HeartbeatRequest { lease_ids: vec![lease.lease_id] };
                    let _: v1::HeartbeatReply = worker.call(HEARTBEAT, &beat).await.unwrap();
                    heartbeats.fetch_add(1, Ordering::Relaxed);
                }
            }
            latencies
        });
    }
    tokio::time::sleep_until(start.into()).await;
    let run_start = Instant::now();
    let cpu_start = machine_cpu();
    let mut latencies: Vec<u32> = tasks.join_all().await.into_iter().flatten().collect();
    let elapsed = run_start.elapsed().as_secs_f64();
    let cpu_end = machine_cpu();
    let share = |ticks: u64| ticks as f64 / (cpu_end.total - cpu_start.total).max(1) as f64;
    let (busy, stolen) = (share(cpu_end.busy - cpu_start.busy), share(cpu_end.stolen - cpu_start.stolen));
    latencies.sort_unstable();
    let reports = acked.load(Ordering::Relaxed);
    // Over the window, or over the time the acknowledgements took when they ran past
    // it: every scheduled report is sent however late, so a coordinator that falls
    // behind shows a longer run, not fewer reports.
    let rate = reports as f64 / elapsed.max(options.seconds);
    println!(
        "{} of {:.0} scheduled reports acknowledged in {:.1} s (+{} heartbeats): {:.0} durable reports/s at a target of {:.0}/s",
        reports,
        options.rate * options.seconds,
        elapsed,
        heartbeats.load(Ordering::Relaxed),
        rate,
        options.rate
    );
    println!(
        "report latency ms: p50 {:.2}, p90 {:.2}, p99 {:.2}, max {:.2}",
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.9),
        percentile(&latencies, 0.99),
        percentile(&latencies, 1.0)
    );
    println!(
        "machine CPU busy during the run: {:.0}% of {} cores, of which stolen by the hypervisor {:.1}%",
        busy * 100.0,
        num_cores(),
        stolen * 100.0
    );
    println!("ratio: reports/s / reference RPCs/s = {:.3}", rate / reference);

    // Nothing lost, nothing counted twice: the job, its rows and the acknowledgements agree.
    let state = admin.get_job(v1::JobId { job_id: job.job_id }).await.unwrap().into_inner();
    let storage = coordinator.shared.storage.clone();
    let job_id = job.job_id as i64;
    let (units, wdl, penta, stored) = server
        .spawn(async move {
            let Recount { units, wdl, pentanomial: penta, .. } = storage.recount(job_id).await.unwrap();
            (units, wdl, penta, storage.job(job_id).await.unwrap().unwrap())
        })
        .await
        .unwrap();
    assert_eq!(state.units_done, reports, "every acknowledged report counted once");
    assert_eq!(units, reports, "every acknowledged report has its row");
    assert_eq!(stored.units_done as u64, reports, "the stored counters agree");
    assert_eq!(wdl, [reports, reports, 0]);
    assert_eq!(penta, [0, 0, 0, reports, 0]);
    println!("check: {reports} acknowledged = {} counted = {units} stored rows; W/D/L {wdl:?}", state.units_done);
    if let Some(spsa) = &state.spsa {
        assert_eq!(spsa.iterations, reports, "every counted pair moved theta once");
        println!("spsa: {} parameters, theta moved by {} pairs", spsa.parameters.len(), spsa.iterations);
    }

    if let Some(followers) = followers {
        let events = followers.events();
        println!(
            "live: {} followers received {events} updates ({:.1} per follower per second of the run)",
            followers.connected,
            events as f64 / followers.connected.max(1) as f64 / elapsed
        );
        followers.stop();
    }
    let id = job.job_id;
    println!("dashboard pages with {} tests and {} stored games:", options.tests, reports * 2);
    let pages = [
        ("the tests page", vec!["/".to_owned(), "/api/v1/jobs".to_owned()]),
        (
            "a test's page",
            vec![
                format!("/tests/{id}"),
                format!("/api/v1/jobs/{id}"),
                format!("/api/v1/jobs/{id}/history"),
                format!("/api/v1/jobs/{id}/pairs?limit=100"),
            ],
        ),
    ];
    dashboard::time_pages(address, &pages, 200).await;
    let _ = std::fs::remove_dir_all(&dir);
}
