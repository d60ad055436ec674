//! Fault drills: the database taken away in the middle of a test and given back. A
//! worker keeps reporting as a real one does (what was not acknowledged is sent again);
//! every acknowledged result must be stored once and counted once, and the coordinator
//! must take reports again, unaided, once the database is back.

use std::process::Command;
use std::time::{Duration, Instant};

use sqlx::Row;
use xq_coordinator::scheduler::SchedulerConfig;
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
        let name = format!("xqdrill{}", std::process::id());
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
struct Reporter {
    lease: v1::Lease,
    played: Vec<[u8; 2]>,
    acknowledged: usize,
    refused: usize,
}

impl Reporter {
    /// Plays the lease's next pair and reports all that is not acknowledged yet.
    async fn play_and_report(&mut self, worker: &mut Worker) -> bool {
        if self.played.len() < self.lease.units.len() {
            self.played.push([[2, 1], [1, 1], [0, 1], [1, 2]][self.played.len() % 4]);
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
                assert_eq!(status.code(), tonic::Code::Unavailable, "only the database's absence: {status:?}");
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
    let mut reporter = Reporter { lease, played: Vec::new(), acknowledged: 0, refused: 0 };

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
    let mut recovered = None;
    while back.elapsed() < Duration::from_secs(60) {
        if reporter.play_and_report(&mut worker).await {
            recovered = Some(back.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let recovered = recovered.expect("reports are taken again within a minute of the database's return");
    for _ in 0..30 {
        assert!(reporter.play_and_report(&mut worker).await, "after the outage");
    }

    // Every acknowledged pair counted once, stored once; nothing else.
    let state = admin.get_job(v1::JobId { job_id: job.job_id }).await.unwrap().into_inner();
    assert_eq!(state.units_done as usize, reporter.acknowledged);
    assert_eq!(state.totals.as_ref().unwrap().pentanomial, totals(&reporter.played).pentanomial);
    let stored: i64 = sqlx::query("SELECT COUNT(*) AS n FROM units WHERE job_id = $1")
        .bind(job.job_id as i64)
        .fetch_one(served.coordinator.shared.storage.pool())
        .await
        .unwrap()
        .try_get("n")
        .unwrap();
    assert_eq!(stored as usize, reporter.acknowledged);
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
