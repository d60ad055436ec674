//! Requests their clients give up: a worker's report runs to its end and counts once,
//! a read dies with its client and gives its place back at once. Each is held up on
//! PostgreSQL by a lock the test takes on the table the request needs.

use std::time::{Duration, Instant};

use sqlx::Connection;
use tonic::Code;
use xq_coordinator::api::admission::AdmissionLimits;
use xq_coordinator::scheduler::config::SchedulerConfig;
use xq_coordinator::server::Coordinator;
use xq_proto::v1;

use crate::common::{Backend, Served, TempDir, client, fresh_database, pair, serve_coordinator, totals};
use crate::dashboard::running_test;

/// A coordinator on a fresh PostgreSQL database under `admission`, with the database's
/// address and the data directory (kept while the test runs).
async fn serve_postgres(admission: AdmissionLimits) -> (Served, String, TempDir) {
    let dir = TempDir::new("given-up");
    let url = fresh_database(Backend::Postgres, &dir.0).await;
    let mut coordinator = Coordinator::open(&dir.0, Some(&url), SchedulerConfig::default()).await.unwrap();
    coordinator.admission = admission;
    (serve_coordinator(coordinator, &dir.0).await, url, dir)
}

/// Fault: a worker's report waits on a stalled database and its client gives up (a
/// timeout, a restart). Before, the dropped request left its queued write to be
/// committed without the scheduler counting it. It runs to its end instead: counted
/// once, in memory as in storage, and its resend changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_report_given_up_by_its_client_while_the_database_stalls_is_still_counted_once() {
    let (served, url, _dir) = serve_postgres(AdmissionLimits::default()).await;
    let (mut admin, mut worker, job, lease) = running_test(&served).await;
    let report = v1::ReportPairsRequest {
        lease_id: lease.lease_id,
        pairs: vec![pair(lease.units[0], [2, 1])],
        cumulative: Some(totals(&[[2, 1]])),
        ..Default::default()
    };

    let mut database = sqlx::PgConnection::connect(&url).await.unwrap();
    let mut stall = database.begin().await.unwrap();
    sqlx::query("LOCK TABLE units IN ACCESS EXCLUSIVE MODE").execute(&mut *stall).await.unwrap();
    let given_up = tokio::time::timeout(Duration::from_millis(500), worker.report_pairs(report.clone())).await;
    assert!(given_up.is_err(), "the report was held up by the lock: {given_up:?}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    stall.commit().await.unwrap();

    let counted = |admin: &mut crate::common::Client| {
        let mut admin = admin.clone();
        async move { admin.get_job(v1::JobId { job_id: job }).await.unwrap().into_inner().units_done }
    };
    let started = Instant::now();
    while counted(&mut admin).await == 0 {
        assert!(started.elapsed() < Duration::from_secs(10), "the given-up report was never counted");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let stored = served.coordinator.shared.storage.job(job as i64).await.unwrap().unwrap();
    assert_eq!(stored.units_done, 1, "stored as counted");
    worker.report_pairs(report).await.unwrap();
    assert_eq!(counted(&mut admin).await, 1, "counted once");
}

/// Attack: a client starts a read the coordinator must wait for and gives it up, over
/// and over. The read is cancelled with its client: its place among the requests in
/// flight is free again at once (here the only place), while what it waited for still
/// holds, instead of working on for nobody.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_given_up_by_its_client_is_cancelled_and_gives_its_place_back_at_once() {
    let (served, url, _dir) = serve_postgres(AdmissionLimits { in_flight: 1, ..AdmissionLimits::default() }).await;
    let mut admin = client(served.address, &served.client_token).await;

    let mut database = sqlx::PgConnection::connect(&url).await.unwrap();
    let mut stall = database.begin().await.unwrap();
    sqlx::query("LOCK TABLE audit_log IN ACCESS EXCLUSIVE MODE").execute(&mut *stall).await.unwrap();
    let given_up = tokio::time::timeout(Duration::from_millis(500), admin.list_audit(v1::ListAuditRequest::default()));
    assert!(given_up.await.is_err(), "the read was held up by the lock");
    // The reset reaches the server a moment later; until then the place is still taken.
    let started = Instant::now();
    loop {
        match admin.list_jobs(v1::ListJobsRequest::default()).await {
            Ok(_) => break,
            Err(status) if status.code() == Code::Unavailable => {
                assert!(started.elapsed() < Duration::from_secs(3), "the given-up read kept its place: {status:?}");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(status) => panic!("{status:?}"),
        }
    }
    stall.commit().await.unwrap();
    admin.list_audit(v1::ListAuditRequest::default()).await.unwrap();
}
