//! Fault drills: the database taken away in the middle of a test and given back, the
//! database black-holed (no answer, no reset) and let through again, the disk filled
//! up and freed. A worker keeps reporting as a real one does (what was not
//! acknowledged is sent again); every acknowledged result must be stored once and
//! counted once, and the coordinator must take reports again, unaided, once the fault
//! is gone. (The coordinator killed between a commit and its acknowledgement is drilled
//! in `kill_drills`; workers killed mid-game and cut off past their lease, with real
//! worker processes, in `cluster`.)

use std::process::Command;
use std::time::{Duration, Instant};

use sqlx::Row;
use xq_coordinator::scheduler::config::SchedulerConfig;
use xq_coordinator::storage::WRITE_TIMEOUT_PARAMETER;
use xq_proto::v1;

use crate::common::*;

/// A PostgreSQL cluster of its own (Debian's `pg_createcluster`), so that stopping it
/// disturbs no other test; dropped with the drill.
struct PrivateCluster {
    name: String,
    port: u16,
}

impl PrivateCluster {
    fn create() -> PrivateCluster {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        // Named apart from the other drills' clusters in this process, which may run at once.
        static MADE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let made = MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = format!("xqdrill{}n{made}", std::process::id());
        let version = std::fs::read_dir("/etc/postgresql")
            .expect("Debian's PostgreSQL (scripts/setup installs it)")
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .max_by_key(|v| v.parse::<u32>().unwrap_or(0))
            .expect("a PostgreSQL version");
        let cluster = PrivateCluster { name, port };
        cluster.run("pg_createcluster", &[&version, &cluster.name, "-p", &port.to_string(), "--", "--auth=trust"]);
        cluster.control("start");
        cluster
    }

    fn version(&self) -> String {
        std::fs::read_dir("/etc/postgresql")
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .find(|v| std::path::Path::new(&format!("/etc/postgresql/{v}/{}", self.name)).exists())
            .expect("the drill's cluster")
    }

    fn run(&self, program: &str, args: &[&str]) {
        let output = Command::new(program).args(args).output().unwrap_or_else(|e| panic!("{program}: {e}"));
        assert!(output.status.success(), "{program} {args:?}: {}", String::from_utf8_lossy(&output.stderr));
    }

    /// `pg_ctlcluster VERSION NAME action` (start, or stop at once).
    fn control(&self, action: &str) {
        let version = self.version();
        let mut args = vec![version.as_str(), self.name.as_str(), action];
        if action == "stop" {
            args.extend(["-m", "immediate"]);
        }
        self.run("pg_ctlcluster", &args);
    }

    fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }
}

impl Drop for PrivateCluster {
    fn drop(&mut self) {
        let version = self.version();
        let _ = Command::new("pg_dropcluster").args([&version, &self.name, "--stop"]).output();
    }
}

/// A worker's reporting as `xq-worker connect` does it: pairs not acknowledged are sent
/// again with the next, and the cumulative totals cover every pair played.
pub(crate) struct Reporter {
    pub(crate) lease: v1::Lease,
    /// What each pair scores, in turn, over and over.
    results: &'static [[u8; 2]],
    played: Vec<[u8; 2]>,
    pub(crate) acknowledged: usize,
    refused: usize,
    /// The statuses this drill's fault may cause.
    expected: &'static [tonic::Code],
}

impl Reporter {
    pub(crate) fn new(lease: v1::Lease, expected: &'static [tonic::Code]) -> Reporter {
        let results = &[[2, 1], [1, 1], [0, 1], [1, 2]];
        Reporter { lease, results, played: Vec::new(), acknowledged: 0, refused: 0, expected }
    }

    /// Reports until one is acknowledged (within `limit`); returns how long it took.
    pub(crate) async fn report_until_taken(&mut self, worker: &mut Worker, limit: Duration) -> Duration {
        let start = Instant::now();
        while start.elapsed() < limit {
            if self.play_and_report(worker).await {
                return start.elapsed();
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("no report was taken within {limit:?}");
    }

    /// Every acknowledged pair counted once and stored once; nothing else.
    pub(crate) async fn check_counted_and_stored(&self, admin: &mut Client, pool: &sqlx::AnyPool, job: u64) {
        let state = admin.get_job(v1::JobId { job_id: job }).await.unwrap().into_inner();
        assert_eq!(state.units_done as usize, self.acknowledged);
        assert_eq!(state.totals.as_ref().unwrap().pentanomial, totals(&self.played).pentanomial);
        assert_eq!(stored_units(pool, job).await, self.acknowledged);
    }

    /// Plays the lease's next pair and reports all that is not acknowledged yet.
    pub(crate) async fn play_and_report(&mut self, worker: &mut Worker) -> bool {
        if self.played.len() < self.lease.units.len() {
            self.played.push(self.results[self.played.len() % self.results.len()]);
        }
        let pairs = (self.acknowledged..self.played.len()).map(|i| pair(self.lease.units[i], self.played[i])).collect();
        let request = v1::ReportPairsRequest {
            lease_id: self.lease.lease_id,
            pairs,
            cumulative: Some(totals(&self.played)),
            ..Default::default()
        };
        match tokio::time::timeout(Duration::from_secs(10), worker.report_pairs(request)).await {
            Ok(Ok(_)) => {
                self.acknowledged = self.played.len();
                true
            }
            Ok(Err(status)) => {
                assert!(self.expected.contains(&status.code()), "only the fault's refusals: {status:?}");
                self.refused += 1;
                false
            }
            Err(_) => {
                self.refused += 1;
                false
            }
        }
    }
}

/// How many units of job `job` are stored (counted, not set aside).
pub(crate) async fn stored_units(pool: &sqlx::AnyPool, job: u64) -> usize {
    let row = sqlx::query("SELECT COUNT(*) AS n FROM units WHERE job_id = $1").bind(job as i64).fetch_one(pool).await;
    row.unwrap().try_get::<i64, _>("n").unwrap() as usize
}

#[tokio::test]
async fn postgresql_stopped_mid_test_and_restarted_loses_and_doubles_nothing() {
    let cluster = PrivateCluster::create();
    let dir = TempDir::new("drill-postgres");
    let config = SchedulerConfig { lease_seconds: 1000.0 * 72.0, reference_nps: 0, ..SchedulerConfig::default() };
    let served = serve_on(&dir.0, &cluster.url(), config.clone(), 100).await;
    let mut admin = client(served.address, &served.client_token).await;
    let request = test_request(&mut admin, 1000, None).await;
    let job = admin.create_test(request).await.unwrap().into_inner();
    let (mut worker, _) = registered_worker_token(&served, "w", &[]).await;
    let lease = worker.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
    let mut reporter = Reporter::new(lease, &[tonic::Code::Unavailable]);

    for _ in 0..50 {
        assert!(reporter.play_and_report(&mut worker).await, "before the outage");
    }
    cluster.control("stop");
    let outage = Instant::now();
    for _ in 0..4 {
        reporter.play_and_report(&mut worker).await;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(reporter.refused > 0, "reports while the database is away are refused");
    let refused_in_outage = reporter.refused;
    cluster.control("start");
    let back = Instant::now();
    let recovered = reporter.report_until_taken(&mut worker, Duration::from_secs(60)).await;
    for _ in 0..30 {
        assert!(reporter.play_and_report(&mut worker).await, "after the outage");
    }

    reporter.check_counted_and_stored(&mut admin, served.coordinator.shared.storage.pool(), job.job_id).await;
    println!(
        "drill: {} pairs acknowledged = counted = stored; {refused_in_outage} reports refused in a {:.1} s outage; \
         reports taken again {:.2} s after the database was back",
        reporter.acknowledged,
        (back - outage).as_secs_f64(),
        recovered.as_secs_f64()
    );

    // And a coordinator started afresh on the same data reads the same counts back.
    drop(served);
    let again = serve_on(&dir.0, &cluster.url(), config, 100).await;
    let mut admin = client(again.address, &again.client_token).await;
    let reread = admin.get_job(v1::JobId { job_id: job.job_id }).await.unwrap().into_inner();
    assert_eq!(reread.units_done as usize, reporter.acknowledged);
}

/// Changes the scheduler makes in memory before it writes them, and that nobody sends
/// again, wait out an outage instead of failing: an admin's stop during an outage is
/// answered once the database is back, and holds after a restart. Before, the stop
/// failed with UNAVAILABLE while memory held the job stopped, the admin's retry was
/// answered "stopped" without a write, and a restart ran the job again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_s_stop_during_a_postgresql_outage_is_stored_once_the_database_is_back() {
    let cluster = PrivateCluster::create();
    let dir = TempDir::new("drill-stop");
    let config = SchedulerConfig { reference_nps: 0, ..SchedulerConfig::default() };
    // A write timeout well within the outage: the write fails in it, at least once.
    let url = format!("{}?{WRITE_TIMEOUT_PARAMETER}=1000", cluster.url());
    let served = serve_on(&dir.0, &url, config.clone(), 100).await;
    let mut admin = client(served.address, &served.client_token).await;
    let request = test_request(&mut admin, 100, None).await;
    let job = v1::JobId { job_id: admin.create_test(request).await.unwrap().into_inner().job_id };
    cluster.control("stop");
    let outage = Instant::now();
    let stop = tokio::spawn({
        let mut admin = admin.clone();
        async move { admin.stop_job(job).await.map(|reply| reply.into_inner().state) }
    });
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(!stop.is_finished(), "the stop waits for the database instead of failing: {:?}", stop.await);
    cluster.control("start");
    let back = Instant::now();
    let stopped = tokio::time::timeout(Duration::from_secs(60), stop).await.expect("answered").unwrap();
    assert_eq!(stopped.expect("stopped once the database is back"), "stopped");
    println!(
        "drill: an admin's stop during a {:.1} s outage answered {:.2} s after the database was back",
        (back - outage).as_secs_f64(),
        back.elapsed().as_secs_f64()
    );
    drop(served);
    let again = serve_on(&dir.0, &url, config, 100).await;
    let mut admin = client(again.address, &again.client_token).await;
    assert_eq!(admin.get_job(job).await.unwrap().into_inner().state, "stopped", "after a restart");
}

/// A worker quarantined as PostgreSQL goes away stays quarantined. The outage lands
/// after the forger's judged report is committed and before its quarantine is: the
/// drill holds a row the quarantine writes locked, as a long transaction would, and
/// stops the database while the write waits on it; caught at each of the quarantine's
/// writes in turn (the worker's lease cancelled, then its standing). Meanwhile the
/// forger gets no work and its reports are refused; once the database is back the
/// quarantine is stored and the forger's pairs set aside with nothing sent again, and
/// a restart reads both back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quarantine_caught_by_a_postgresql_outage_is_stored_once_the_database_is_back_and_holds_across_a_restart() {
    for locked in ["leases", "workers"] {
        quarantine_caught_by_an_outage(locked).await;
    }
}

/// The quarantine drill, with the forger's row of the table `locked` held while the
/// database stops.
async fn quarantine_caught_by_an_outage(locked: &str) {
    use sqlx::Connection;
    use tonic::Code;

    let cluster = PrivateCluster::create();
    let dir = TempDir::new("drill-quarantine");
    // Leases of 256 pairs; a worker's residual is judged from 40 pairs on.
    let config = SchedulerConfig {
        lease_seconds: 256.0 * 72.0,
        reference_nps: 0,
        quarantine_min_pairs: 40,
        ..SchedulerConfig::default()
    };
    // A short write timeout, so that the reports refused in the outage (and the drill) are quick.
    let url = format!("{}?{WRITE_TIMEOUT_PARAMETER}=2000", cluster.url());
    let served = serve_on(&dir.0, &url, config.clone(), 100).await;
    let mut admin = client(served.address, &served.client_token).await;
    let request = test_request(&mut admin, 1000, None).await;
    let job = admin.create_test(request).await.unwrap().into_inner().job_id;
    let mut honest = Vec::new();
    for name in ["a", "b"] {
        let (mut worker, _) = registered_worker_token(&served, name, &[]).await;
        let lease = worker.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
        let mut reporter = Reporter::new(lease, &[Code::Unavailable]);
        for _ in 0..60 {
            assert!(reporter.play_and_report(&mut worker).await, "{locked}: before the outage");
        }
        honest.push((reporter, worker));
    }
    // The forger wins every game; its 40th pair has it judged.
    let (mut forger, forger_token) = registered_worker_token(&served, "forger", &[]).await;
    let lease = forger.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
    let forged = |n: usize| v1::ReportPairsRequest {
        lease_id: lease.lease_id,
        pairs: vec![pair(lease.units[n - 1], [2, 2])],
        cumulative: Some(totals(&vec![[2, 2]; n])),
        ..Default::default()
    };
    for n in 1..40 {
        assert!(!forger.report_pairs(forged(n)).await.unwrap().into_inner().stop, "{locked}: too few to judge");
    }
    let workers = admin.list_workers(v1::ListWorkersRequest {}).await.unwrap().into_inner().workers;
    let forger_id = workers.iter().find(|w| w.capabilities.as_ref().unwrap().name == "forger").unwrap().worker_id;

    let mut holder = sqlx::PgConnection::connect(&cluster.url()).await.unwrap();
    let row = if locked == "leases" { lease.lease_id } else { forger_id };
    sqlx::query("BEGIN").execute(&mut holder).await.unwrap();
    let lock = format!("SELECT id FROM {locked} WHERE id = $1 FOR UPDATE");
    sqlx::query(sqlx::AssertSqlSafe(lock)).bind(row as i64).execute(&mut holder).await.unwrap();
    let judged = tokio::spawn({
        let (mut forger, report) = (forger.clone(), forged(40));
        async move { forger.report_pairs(report).await }
    });
    let mut watcher = sqlx::PgConnection::connect(&cluster.url()).await.unwrap();
    let waiting = Instant::now();
    loop {
        let row = sqlx::query("SELECT COUNT(*) AS n FROM pg_locks WHERE NOT granted").fetch_one(&mut watcher).await;
        if row.unwrap().try_get::<i64, _>("n").unwrap() > 0 {
            break;
        }
        assert!(waiting.elapsed() < Duration::from_secs(10), "{locked}: the quarantine's write never waited");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    cluster.control("stop");
    let outage = Instant::now();
    drop((holder, watcher));

    // Meanwhile the forger gets nothing and is told so, and the honest workers' reports
    // are refused as a passing outage.
    let status = forger.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap_err();
    assert_eq!(status.code(), Code::PermissionDenied, "{locked}: {status:?}");
    let status = forger.report_pairs(forged(40)).await.unwrap_err();
    assert_eq!(status.code(), Code::PermissionDenied, "{locked}: {status:?}");
    for (reporter, worker) in &mut honest {
        assert!(!reporter.play_and_report(worker).await, "{locked}: the database is away");
    }
    let back = Instant::now();
    cluster.control("start");
    let answer = tokio::time::timeout(Duration::from_secs(60), judged).await.expect("the judged report answered");
    let stored = back.elapsed();
    assert!(answer.unwrap().unwrap().into_inner().stop, "{locked}: the forger told to stop");
    for (reporter, worker) in &mut honest {
        reporter.report_until_taken(worker, Duration::from_secs(60)).await;
    }

    let check = |admin: &Client, pool: &sqlx::AnyPool, honest: &[(Reporter, Worker)]| {
        let (mut admin, pool) = (admin.clone(), pool.clone());
        let played: Vec<[u8; 2]> = honest.iter().flat_map(|(reporter, _)| reporter.played.clone()).collect();
        async move {
            let workers = admin.list_workers(v1::ListWorkersRequest {}).await.unwrap().into_inner().workers;
            let listed = workers.iter().find(|w| w.worker_id == forger_id).unwrap();
            assert_eq!(listed.standing, "quarantined", "{locked}");
            assert!(listed.standing_reason.contains("standard errors"), "{locked}: {}", listed.standing_reason);
            let state = admin.get_job(v1::JobId { job_id: job }).await.unwrap().into_inner();
            assert_eq!(state.units_done as usize, played.len(), "{locked}: only the honest pairs count");
            assert_eq!(state.totals.unwrap().pentanomial, totals(&played).pentanomial, "{locked}");
            assert_eq!(stored_units(&pool, job).await, played.len(), "{locked}: only the honest pairs stored");
            let aside = sqlx::query("SELECT COUNT(*) AS n FROM set_aside_units WHERE worker_id = $1")
                .bind(forger_id as i64)
                .fetch_one(&pool)
                .await;
            assert_eq!(aside.unwrap().try_get::<i64, _>("n").unwrap(), 40, "{locked}: the forged pairs set aside");
        }
    };
    check(&admin, served.coordinator.shared.storage.pool(), &honest).await;
    let status = forger.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap_err();
    assert_eq!(status.code(), Code::PermissionDenied, "{locked}: {status:?}");

    drop(served);
    let again = serve_on(&dir.0, &url, config, 100).await;
    let admin = client(again.address, &again.client_token).await;
    check(&admin, again.coordinator.shared.storage.pool(), &honest).await;
    let mut forger = worker(again.address, &forger_token).await;
    let status = forger.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap_err();
    assert_eq!(status.code(), Code::PermissionDenied, "{locked}: {status:?}");
    assert!(status.message().contains("quarantined"), "{locked}: {}", status.message());
    println!(
        "drill: the forger's quarantine caught by a {:.1} s outage at its write to {locked}: stored {:.2} s after the \
         database was started, its 40 pairs set aside, {} honest pairs counted; held across a restart",
        (back - outage).as_secs_f64(),
        stored.as_secs_f64(),
        honest.iter().map(|(reporter, _)| reporter.acknowledged).sum::<usize>()
    );
}

/// A TCP relay between the coordinator and PostgreSQL that the drill can black-hole:
/// then it passes nothing on in either direction yet closes nothing, so the coordinator
/// hears neither an answer nor a reset, as across a route that drops packets. Bytes
/// sent meanwhile pass once it forwards again, as TCP's retransmissions would deliver
/// them.
struct BlackHole {
    address: std::net::SocketAddr,
    forwarding: tokio::sync::watch::Sender<bool>,
    /// The database's URL, straight to the server.
    direct: String,
}

impl BlackHole {
    /// A relay to the server of the PostgreSQL URL `direct`.
    async fn start(direct: &str) -> BlackHole {
        use std::net::ToSocketAddrs;
        let to = server_of(direct).to_socket_addrs().unwrap().next().unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let (forwarding, open) = tokio::sync::watch::channel(true);
        tokio::spawn(async move {
            while let Ok((inbound, _)) = listener.accept().await {
                let mut open = open.clone();
                tokio::spawn(async move {
                    // A connection made in the hole reaches the server only after it.
                    if open.wait_for(|open| *open).await.is_err() {
                        return;
                    }
                    let Ok(outbound) = tokio::net::TcpStream::connect(to).await else { return };
                    let (from_client, to_client) = inbound.into_split();
                    let (from_server, to_server) = outbound.into_split();
                    tokio::join!(
                        Self::pass(from_client, to_server, open.clone()),
                        Self::pass(from_server, to_client, open)
                    );
                });
            }
        });
        BlackHole { address, forwarding, direct: direct.to_owned() }
    }

    /// Passes bytes on while forwarding; holds them, reading no more, while not.
    async fn pass(
        mut from: tokio::net::tcp::OwnedReadHalf,
        mut to: tokio::net::tcp::OwnedWriteHalf,
        mut open: tokio::sync::watch::Receiver<bool>,
    ) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut buffer = vec![0; 1 << 16];
        loop {
            if open.wait_for(|open| *open).await.is_err() {
                return;
            }
            let read = match from.read(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(read) => read,
            };
            if open.wait_for(|open| *open).await.is_err() || to.write_all(&buffer[..read]).await.is_err() {
                return;
            }
        }
        let _ = to.shutdown().await;
    }

    fn set_forwarding(&self, forwarding: bool) {
        self.forwarding.send_replace(forwarding);
    }

    /// The database's URL through this relay, with the coordinator's `write_timeout`.
    fn url(&self, write_timeout: Duration) -> String {
        let through = self.direct.replacen(server_of(&self.direct), &self.address.to_string(), 1);
        format!("{through}?{WRITE_TIMEOUT_PARAMETER}={}", write_timeout.as_millis())
    }
}

/// The `host:port` of a PostgreSQL `url` (`postgres://user@host:port/db`).
fn server_of(url: &str) -> &str {
    url.split_once('@').and_then(|(_, rest)| rest.split_once('/')).expect("postgres://user@host:port/db").0
}

/// Each worker reports once, all at the same moment, so that the writer gathers their
/// changes into batches of several; returns them with whether each report was taken
/// and how long it took.
async fn report_together(fleet: Vec<(Reporter, Worker)>) -> (Vec<(Reporter, Worker)>, Vec<(bool, Duration)>) {
    let reports: Vec<_> = fleet
        .into_iter()
        .map(|(mut reporter, mut worker)| {
            tokio::spawn(async move {
                let start = Instant::now();
                let taken = reporter.play_and_report(&mut worker).await;
                ((reporter, worker), (taken, start.elapsed()))
            })
        })
        .collect();
    let mut outcomes = Vec::new();
    for report in reports {
        outcomes.push(report.await.unwrap());
    }
    outcomes.into_iter().unzip()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_black_holed_postgresql_refuses_reports_within_seconds_and_resumes_losing_and_doubling_nothing() {
    // Short, so that the drill is; the default is WRITE_TIMEOUT.
    let write_timeout = Duration::from_secs(2);
    let dir = TempDir::new("drill-black-hole");
    let relay = BlackHole::start(&fresh_database(Backend::Postgres, &dir.0).await).await;
    let config = SchedulerConfig { lease_seconds: 1000.0 * 72.0, reference_nps: 0, ..SchedulerConfig::default() };
    let served = serve_on(&dir.0, &relay.url(write_timeout), config, 100).await;
    let mut admin = client(served.address, &served.client_token).await;
    let mut fleet = Vec::new();
    for name in ["w1", "w2", "w3", "w4"] {
        let request = test_request(&mut admin, 200, None).await;
        admin.create_test(request).await.unwrap();
        let (mut worker, _) = registered_worker_token(&served, name, &[]).await;
        let lease = worker.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
        assert!(lease.units.len() >= 40, "a lease for the whole drill: {} units", lease.units.len());
        fleet.push((Reporter::new(lease, &[tonic::Code::Unavailable]), worker));
    }
    let jobs: std::collections::HashSet<u64> = fleet.iter().map(|(reporter, _)| reporter.lease.job_id).collect();
    assert_eq!(jobs.len(), fleet.len(), "a job for each worker");

    for _ in 0..10 {
        let taken;
        (fleet, taken) = report_together(fleet).await;
        assert!(taken.iter().all(|&(taken, _)| taken), "before the black hole");
    }

    // Every report fails fast, batch after batch: a batch waits out at most the one
    // before it, and fails whole, not retried change by change. Getting a connection
    // and the transaction are bounded apart, so a batch takes at most two timeouts and
    // a report at most four (seen: two when the machine is idle, three under a full
    // test suite).
    relay.set_forwarding(false);
    let cut = Instant::now();
    let bound = 4 * write_timeout + Duration::from_secs(1);
    let mut slowest = Duration::ZERO;
    for _ in 0..3 {
        let taken;
        (fleet, taken) = report_together(fleet).await;
        for (taken, took) in taken {
            assert!(!taken, "a black-holed database takes no report");
            assert!(took < bound, "a report refused within {bound:?}, not {took:?}");
            slowest = slowest.max(took);
        }
        // And the coordinator answers what it serves from memory meanwhile.
        let listed = Instant::now();
        let jobs = tokio::time::timeout(Duration::from_secs(1), admin.list_jobs(v1::ListJobsRequest::default()))
            .await
            .expect("jobs listed while the database is away")
            .unwrap();
        assert_eq!(jobs.into_inner().jobs.len(), fleet.len(), "listed in {:?}", listed.elapsed());
    }
    relay.set_forwarding(true);
    let hole = cut.elapsed();

    let mut recovered = Duration::ZERO;
    for (reporter, worker) in &mut fleet {
        recovered = recovered.max(reporter.report_until_taken(worker, Duration::from_secs(30)).await);
    }
    for _ in 0..10 {
        let taken;
        (fleet, taken) = report_together(fleet).await;
        assert!(taken.iter().all(|&(taken, _)| taken), "after the black hole");
    }
    let pool = served.coordinator.shared.storage.pool();
    for (reporter, _) in &fleet {
        reporter.check_counted_and_stored(&mut admin, pool, reporter.lease.job_id).await;
    }
    println!(
        "drill: {} pairs acknowledged = counted = stored; {} reports refused in a {:.1} s black hole, the slowest \
         after {:.2} s (write timeout {write_timeout:?}); every worker's report taken again within {:.2} s",
        fleet.iter().map(|(reporter, _)| reporter.acknowledged).sum::<usize>(),
        fleet.iter().map(|(reporter, _)| reporter.refused).sum::<usize>(),
        hole.as_secs_f64(),
        slowest.as_secs_f64(),
        recovered.as_secs_f64()
    );
}

/// A tmpfs of its own (root only), so that the drill can fill a disk without filling
/// the machine's; unmounted with the drill.
struct SmallDisk(std::path::PathBuf);

impl SmallDisk {
    fn mount(at: &std::path::Path, megabytes: u64) -> SmallDisk {
        std::fs::create_dir_all(at).unwrap();
        let output = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={megabytes}m"), "xq-drill"])
            .arg(at)
            .output()
            .expect("mount");
        assert!(output.status.success(), "mounting a tmpfs (the drill runs as root): {output:?}");
        SmallDisk(at.to_owned())
    }

    /// Writes a file of zeros until it is `bytes` long or the disk is full.
    fn balloon(&self, name: &str, bytes: u64) {
        use std::io::Write;
        let mut file = std::fs::File::create(self.0.join(name)).unwrap();
        let block = vec![0u8; 1 << 16];
        let mut written = 0;
        while written < bytes {
            let size = block.len().min((bytes - written) as usize);
            match file.write(&block[..size]) {
                Ok(0) | Err(_) => break,
                Ok(n) => written += n as u64,
            }
        }
        let _ = file.sync_all();
    }

    fn free(&self) -> u64 {
        xq_coordinator::storage::disk::free_bytes(&self.0).unwrap()
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("--lazy").arg(&self.0).output();
    }
}

#[tokio::test]
async fn a_full_disk_refuses_new_work_then_reports_and_loses_and_doubles_nothing() {
    let dir = TempDir::new("drill-disk");
    let disk = SmallDisk::mount(&dir.0.join("data"), 64);
    let data = disk.0.clone();
    let reserve = 8 << 20;
    let config = SchedulerConfig {
        lease_seconds: 1000.0 * 72.0,
        reference_nps: 0,
        reserve_bytes: reserve,
        ..SchedulerConfig::default()
    };
    let url = xq_coordinator::storage::sqlite_url(&data);
    let served = serve_on(&data, &url, config.clone(), 100).await;
    let mut admin = client(served.address, &served.client_token).await;
    let request = test_request(&mut admin, 1000, None).await;
    let job = admin.create_test(request).await.unwrap().into_inner();
    let (mut worker, _) = registered_worker_with_cores(&served, "w", &[], 2).await;
    let lease = worker.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
    let mut reporter = Reporter::new(lease, &[tonic::Code::Unavailable]);
    for _ in 0..30 {
        assert!(reporter.play_and_report(&mut worker).await, "with room");
    }

    // Below the reserve: no new work, but the leased work's reports are stored.
    disk.balloon("below-reserve", disk.free() - reserve / 2);
    let refused = worker.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::ResourceExhausted, "{refused:?}");
    for _ in 0..10 {
        assert!(reporter.play_and_report(&mut worker).await, "within the reserve");
    }

    // Full: reports are refused as a passing outage, and nothing half-written counts.
    disk.balloon("full", u64::MAX);
    let full = Instant::now();
    assert!(disk.free() < 4096, "the disk is full: {} bytes free", disk.free());
    for _ in 0..5 {
        assert!(!reporter.play_and_report(&mut worker).await, "a full disk takes no report");
    }
    std::fs::remove_file(data.join("full")).unwrap();
    std::fs::remove_file(data.join("below-reserve")).unwrap();
    let freed = Instant::now();
    let recovered = reporter.report_until_taken(&mut worker, Duration::from_secs(60)).await;
    for _ in 0..20 {
        assert!(reporter.play_and_report(&mut worker).await, "after the disk was freed");
    }
    reporter.check_counted_and_stored(&mut admin, served.coordinator.shared.storage.pool(), job.job_id).await;
    println!(
        "drill: {} pairs acknowledged = counted = stored; {} reports refused on a full disk ({:.1} s); \
         reports taken again {:.2} s after space was freed",
        reporter.acknowledged,
        reporter.refused,
        (freed - full).as_secs_f64(),
        recovered.as_secs_f64()
    );

    // What is stored reads back whole: the database's own check, and every game.
    let integrity: String = sqlx::query("PRAGMA integrity_check")
        .fetch_one(served.coordinator.shared.storage.pool())
        .await
        .unwrap()
        .try_get(0)
        .unwrap();
    assert_eq!(integrity, "ok");
    drop(served);
    let again = serve_on(&data, &url, config, 100).await;
    let mut admin = client(again.address, &again.client_token).await;
    let games = collect(admin.download_games(v1::JobId { job_id: job.job_id }).await.unwrap().into_inner()).await;
    let text: String = games.into_iter().map(|piece| piece.pgn).collect();
    let parsed = xq_engine::xiangqi::pgn::parse_pgn(&text).unwrap();
    assert_eq!(parsed.len(), 2 * reporter.acknowledged, "every counted pair's two games read back");
    drop(again);
    drop(disk);
}
