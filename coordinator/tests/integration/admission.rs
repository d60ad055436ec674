//! Attacks on the one port's capacity, each played against a coordinator whose limits
//! are small: a flood from one address, from one token, and past the bound on requests
//! in flight. Each is refused before any of its work, with a status the worker retries,
//! while everyone else is served; nothing acknowledged is lost or counted twice.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use tonic::Code;
use xq_coordinator::api::admission::{AdmissionLimits, Rate};
use xq_coordinator::scheduler::config::SchedulerConfig;
use xq_proto::{BearerToken, v1};

use crate::common::{Random, Served, client, pair, registered_worker, serve_set, totals};
use crate::dashboard::running_test;

/// A rate that refills nothing while a test runs: only the burst counts.
fn burst_only(burst: u32) -> Option<Rate> {
    Some(Rate { per_second: 0.001, burst })
}

async fn serve_limited(limits: AdmissionLimits) -> Served {
    serve_set(SchedulerConfig::default(), |coordinator| coordinator.admission = limits).await
}

/// An HTTP/1.1 GET of `path` from the local address `from`: its status, its
/// `Retry-After` and its body.
async fn get_from(served: &Served, from: &str, path: &str) -> (u16, Option<String>, String) {
    let mut connector = hyper_util::client::legacy::connect::HttpConnector::new();
    connector.set_local_address(Some(from.parse().unwrap()));
    let http = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build::<_, Full<Bytes>>(connector);
    let uri = format!("http://{}{path}", served.address).parse().unwrap();
    let response = http.get(uri).await.unwrap();
    let status = response.status().as_u16();
    let retry_after = response.headers().get("retry-after").map(|v| v.to_str().unwrap().to_owned());
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, retry_after, String::from_utf8_lossy(&body).into_owned())
}

/// A gRPC client from the local address `from` with `token`.
async fn client_from(address: SocketAddr, from: &str, token: &str) -> crate::common::Client {
    let endpoint = tonic::transport::Endpoint::from_shared(format!("http://{address}"))
        .unwrap()
        .local_address(Some(from.parse().unwrap()));
    v1::client_client::ClientClient::with_interceptor(
        endpoint.connect().await.unwrap(),
        BearerToken::new(token).unwrap(),
    )
}

/// The units a job has counted.
async fn units_done(served: &Served, job: u64) -> u64 {
    let mut admin = client(served.address, &served.client_token).await;
    admin.get_job(v1::JobId { job_id: job }).await.unwrap().into_inner().units_done
}

/// Attack: one address floods the dashboard's API without a token. Past its burst it
/// gets 429 with `Retry-After` and the API's JSON error; made-up tokens from it are
/// counted as it (each would otherwise bring a bucket of its own); and a worker with
/// its token on the same address, an admin, and another address are served meanwhile.
#[tokio::test]
async fn a_flood_without_a_token_from_one_address_is_limited_while_others_are_served() {
    const BURST: u32 = 20;
    let limits = AdmissionLimits { per_address: burst_only(BURST), limit_loopback: true, ..AdmissionLimits::default() };
    let served = serve_limited(limits).await;
    let (mut admin, mut worker, job, lease) = running_test(&served).await;

    let mut answers = Vec::new();
    for _ in 0..100 {
        answers.push(get_from(&served, "127.0.0.1", "/api/v1/jobs").await);
    }
    let served_count = answers.iter().filter(|(status, ..)| *status == 200).count();
    assert_eq!(served_count, BURST as usize, "the burst, then nothing");
    for (status, retry_after, body) in answers.iter().filter(|(status, ..)| *status != 200) {
        assert_eq!(*status, 429, "{body}");
        assert!(retry_after.as_deref().is_some_and(|s| s.parse::<u64>().unwrap() >= 1), "{retry_after:?}");
        let error: serde_json::Value = serde_json::from_str(body).unwrap();
        assert!(error["error"].as_str().unwrap().contains("without a token from 127.0.0.1"), "{body}");
    }
    // Made-up tokens from the flooding address are that address's requests.
    let mut random = Random(0xAD_5EED);
    for _ in 0..10 {
        let made_up = format!("{:016x}{:016x}", random.next(), random.next());
        let status = client_from(served.address, "127.0.0.1", &made_up)
            .await
            .list_jobs(v1::ListJobsRequest::default())
            .await
            .unwrap_err();
        assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    }
    // From a fresh address a made-up token is refused as such, within that address's burst.
    let mut fresh = client_from(served.address, "127.0.0.3", "made-up").await;
    let status = fresh.list_jobs(v1::ListJobsRequest::default()).await.unwrap_err();
    assert_eq!(status.code(), Code::Unauthenticated, "{status:?}");

    // Everyone else is served: the worker on the same address, the admin, another address.
    worker
        .report_pairs(v1::ReportPairsRequest {
            lease_id: lease.lease_id,
            pairs: vec![pair(lease.units[0], [2, 1])],
            cumulative: Some(totals(&[[2, 1]])),
            ..Default::default()
        })
        .await
        .unwrap();
    worker.heartbeat(v1::HeartbeatRequest { lease_ids: vec![lease.lease_id] }).await.unwrap();
    assert_eq!(admin.list_jobs(v1::ListJobsRequest::default()).await.unwrap().into_inner().jobs.len(), 1);
    assert_eq!(get_from(&served, "127.0.0.2", "/api/v1/jobs").await.0, 200);
    assert_eq!(units_done(&served, job).await, 1);
}

/// Attack: one worker's token floods the coordinator. Past its burst its calls get
/// RESOURCE_EXHAUSTED, and a report refused so did nothing; another worker on the
/// same address, and the admin (never counted), are served.
#[tokio::test]
async fn a_flood_from_one_token_is_limited_while_other_tokens_on_its_address_are_served() {
    const BURST: u32 = 10;
    let served = serve_limited(AdmissionLimits { per_token: burst_only(BURST), ..AdmissionLimits::default() }).await;
    // The flooding worker has spent two of its burst: its registration and its lease.
    let (mut admin, mut flooder, job, lease) = running_test(&served).await;
    let mut answered = 0;
    let refused = loop {
        match flooder.heartbeat(v1::HeartbeatRequest { lease_ids: vec![lease.lease_id] }).await {
            Ok(_) => answered += 1,
            Err(status) => break status,
        }
        assert!(answered <= BURST, "never limited");
    };
    assert_eq!(answered, BURST - 2);
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    assert!(refused.message().contains("this token's requests are over its rate"), "{}", refused.message());
    let report = v1::ReportPairsRequest {
        lease_id: lease.lease_id,
        pairs: vec![pair(lease.units[0], [1, 1])],
        cumulative: Some(totals(&[[1, 1]])),
        ..Default::default()
    };
    assert_eq!(flooder.report_pairs(report).await.unwrap_err().code(), Code::ResourceExhausted);

    let mut other = registered_worker(&served, "w2", &[]).await;
    let other_lease = other.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
    other
        .report_pairs(v1::ReportPairsRequest {
            lease_id: other_lease.lease_id,
            pairs: vec![pair(other_lease.units[0], [2, 2])],
            cumulative: Some(totals(&[[2, 2]])),
            ..Default::default()
        })
        .await
        .unwrap();
    for _ in 0..3 * BURST {
        admin.list_jobs(v1::ListJobsRequest::default()).await.unwrap();
    }
    assert_eq!(units_done(&served, job).await, 1, "the other worker's pair, not the refused one");
}

/// Attack: more requests at once than the coordinator works on. Two uploads that
/// stall hold both places; everything past them (reports, reads, pages) is refused at
/// once with UNAVAILABLE or 503, not queued, and does nothing. When the uploads go, the
/// coordinator serves again, and the worker's report, resent as the worker does after
/// a transient refusal, counts once however often it is sent.
#[tokio::test]
async fn requests_past_the_bound_in_flight_are_shed_and_a_shed_report_counts_once_when_resent() {
    let served = serve_limited(AdmissionLimits { in_flight: 2, ..AdmissionLimits::default() }).await;
    let (mut admin, mut worker, job, lease) = running_test(&served).await;

    let stall = || {
        let (address, token) = (served.address, served.client_token.clone());
        tokio::spawn(async move {
            let piece = v1::ArtifactPiece { name: "engine".to_owned(), kind: "engine".to_owned(), data: vec![7; 1024] };
            let pieces = tokio_stream::StreamExt::chain(tokio_stream::iter([piece]), tokio_stream::pending());
            client(address, &token).await.upload_artifact(pieces).await
        })
    };
    let stalled = [stall(), stall()];
    // Each upload has its temporary file once it holds its place.
    let temporary = served.data.join("artifacts/tmp");
    let started = std::time::Instant::now();
    while std::fs::read_dir(&temporary).map_or(0, Iterator::count) < 2 {
        assert!(started.elapsed() < Duration::from_secs(10), "the uploads never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let report = v1::ReportPairsRequest {
        lease_id: lease.lease_id,
        pairs: vec![pair(lease.units[0], [2, 1])],
        cumulative: Some(totals(&[[2, 1]])),
        ..Default::default()
    };
    let shed = |status: tonic::Status| {
        assert_eq!(status.code(), Code::Unavailable, "{status:?}");
        assert!(status.message().contains("already working on 2 requests"), "{}", status.message());
    };
    for _ in 0..20 {
        shed(worker.report_pairs(report.clone()).await.unwrap_err());
        shed(admin.list_jobs(v1::ListJobsRequest::default()).await.unwrap_err());
        let (status, retry_after, body) = get_from(&served, "127.0.0.1", "/api/v1/jobs").await;
        assert_eq!((status, retry_after.as_deref()), (503, Some("1")), "{body}");
    }
    let stored = served.coordinator.shared.storage.job(job as i64).await.unwrap().unwrap();
    assert_eq!(stored.units_done, 0, "a shed report did nothing");

    for upload in stalled {
        upload.abort();
    }
    // The worker's rule: UNAVAILABLE and RESOURCE_EXHAUSTED are retried after a pause.
    let mut attempts = 0;
    loop {
        attempts += 1;
        match worker.report_pairs(report.clone()).await {
            Ok(_) => break,
            Err(status) if matches!(status.code(), Code::Unavailable | Code::ResourceExhausted) => {
                assert!(attempts < 100, "still refused: {status:?}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(status) => panic!("{status:?}"),
        }
    }
    assert_eq!(units_done(&served, job).await, 1);
    // A resend (its acknowledgement lost) is harmless.
    worker.report_pairs(report).await.unwrap();
    let shown = admin.get_job(v1::JobId { job_id: job }).await.unwrap().into_inner();
    assert_eq!(shown.units_done, 1, "counted once");
    assert_eq!(shown.totals.unwrap().pentanomial.iter().sum::<u64>(), 1);
    assert_eq!(get_from(&served, "127.0.0.1", "/api/v1/jobs").await.0, 200);
}
