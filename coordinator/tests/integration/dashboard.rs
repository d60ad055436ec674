//! The dashboard's JSON API, live stream and metrics, over real HTTP on the gRPC port:
//! the same views as the gRPC API, updates as reports arrive, and a clear 4xx for
//! every kind of bad request.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client as HttpClient;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;
use xq_coordinator::api::http::ReadAccess;
use xq_coordinator::scheduler::config::SchedulerConfig;
use xq_proto::v1;

use crate::common::*;

/// An HTTP/1.1 request: (status, body).
pub async fn request(method: &str, url: &str, headers: &[(&str, &str)], body: &str) -> (u16, String) {
    let client = HttpClient::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let mut builder = http::Request::builder().method(method).uri(url);
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    let response = client.request(builder.body(Full::new(Bytes::from(body.to_owned()))).unwrap()).await.unwrap();
    let status = response.status().as_u16();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&bytes).into_owned())
}

/// A message as the API's JSON reads back (through text, as a browser gets it).
fn as_json(message: &impl serde::Serialize) -> Value {
    serde_json::from_str(&serde_json::to_string(message).unwrap()).unwrap()
}

pub async fn get_json(url: &str) -> Value {
    let (status, body) = request("GET", url, &[], "").await;
    assert_eq!(status, 200, "GET {url}: {body}");
    serde_json::from_str(&body).unwrap()
}

/// A running SPRT with one registered worker holding a lease on it: (client, worker,
/// job, lease).
pub async fn running_test(served: &Served) -> (Client, Worker, u64, v1::Lease) {
    let mut admin = client(served.address, &served.client_token).await;
    let sprt = v1::SprtSpec { elo0: 0.0, elo1: 10.0, alpha: 0.05, beta: 0.05, ..Default::default() };
    let mut request = test_request(&mut admin, 64, Some(sprt)).await;
    request.description = "dashboard test".to_owned();
    let job = admin.create_test(request).await.unwrap().into_inner().job_id;
    let mut worker = registered_worker(served, "w1", &[]).await;
    let lease = worker.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
    (admin, worker, job, lease)
}

/// Reports `pairs` (half points per game) as units `first..` of the lease, the
/// totals cumulative over `all` pairs reported so far including these.
pub async fn report(worker: &mut Worker, lease: &v1::Lease, first: usize, all: &[[u8; 2]]) {
    let pairs = all.iter().enumerate().skip(first).map(|(i, p)| pair(lease.units[i], *p)).collect();
    worker
        .report_pairs(v1::ReportPairsRequest {
            lease_id: lease.lease_id,
            pairs,
            cumulative: Some(totals(all)),
            ..Default::default()
        })
        .await
        .unwrap();
}

#[tokio::test]
async fn the_json_api_serves_the_grpc_views_and_follows_reports() {
    let served = serve(Backend::Sqlite, SchedulerConfig::default()).await;
    let base = format!("http://{}", served.address);
    let (mut admin, mut worker, job, lease) = running_test(&served).await;

    // Followers of the live stream hear of the reports below.
    let client = HttpClient::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let events = client.get(format!("{base}/api/v1/events").parse().unwrap()).await.unwrap();
    assert_eq!(events.status(), 200);
    assert_eq!(events.headers()["content-type"], "text/event-stream");
    let mut events = events.into_body();

    let results = [[2, 1], [2, 2], [1, 1], [0, 2]];
    assert!(lease.units.len() >= results.len());
    report(&mut worker, &lease, 0, &results[..2]).await;
    report(&mut worker, &lease, 2, &results).await;

    // One view of a job: the JSON is the gRPC reply, serialised.
    let view = admin.get_job(v1::JobId { job_id: job }).await.unwrap().into_inner();
    assert_eq!(view.units_done, 4);
    let json = get_json(&format!("{base}/api/v1/jobs/{job}")).await;
    assert_eq!(json, as_json(&view));
    assert_eq!(json["time_control"], "10+0.1");
    assert_eq!(json["new_engine"], "new");
    assert_eq!(json["sprt_spec"]["elo1"], 10.0);
    let listed = get_json(&format!(
        "{base}/api/v1/jobs?state=running&kind=sprt&q=DASHBOARD&tc=10%2B0.1&engine=base&bounds=0,10"
    ))
    .await;
    assert_eq!(listed["jobs"].as_array().unwrap().len(), 1, "{listed}");
    for miss in ["state=finished", "kind=selfplay", "q=nothing", "tc=1%2B0.01", "engine=other", "bounds=0,5"] {
        let listed = get_json(&format!("{base}/api/v1/jobs?{miss}")).await;
        assert!(listed["jobs"].as_array().unwrap().is_empty(), "{miss}: {listed}");
    }

    // The history ends where the job stands, and agrees with the gRPC API's.
    let history = get_json(&format!("{base}/api/v1/jobs/{job}/history")).await;
    let grpc_history = admin.get_job_history(v1::JobId { job_id: job }).await.unwrap().into_inner();
    assert_eq!(history, as_json(&grpc_history));
    let points = history["points"].as_array().unwrap();
    assert_eq!(points.len(), 4, "four pairs: one point each");
    let last = &points[3];
    assert_eq!(last["pairs"], 4);
    let sprt = view.sprt.unwrap();
    assert!((last["llr"].as_f64().unwrap() - sprt.llr).abs() < 1e-9);
    assert!((history["upper"].as_f64().unwrap() - sprt.upper).abs() < 1e-12);
    let elo = view.elo.unwrap();
    assert!((last["elo"].as_f64().unwrap() - elo.elo).abs() < 1e-9);
    assert_eq!(points[0]["pairs"], 1);

    // The games, as PGN: both games of every pair.
    // Every answer says its type is all it is: the JSON API's and the PGN's too.
    for path in ["/api/v1/jobs".to_owned(), format!("/api/v1/jobs/{job}/games.pgn"), "/metrics".to_owned()] {
        let response = client.get(format!("{base}{path}").parse().unwrap()).await.unwrap();
        assert_eq!(response.headers()["x-content-type-options"], "nosniff", "{path}");
    }
    // The page runs its own scripts only: what keeps the token it holds from others'.
    let page = client.get(format!("{base}/").parse().unwrap()).await.unwrap();
    let policy = page.headers()["content-security-policy"].to_str().unwrap().to_owned();
    let scripts = policy.split(';').map(str::trim).find(|d| d.starts_with("script-src")).unwrap_or_default();
    assert_eq!(scripts, "script-src 'self'", "{policy}");
    assert!(policy.contains("frame-ancestors 'none'"), "{policy}");
    let (status, pgn) = request("GET", &format!("{base}/api/v1/jobs/{job}/games.pgn"), &[], "").await;
    assert_eq!(status, 200);
    assert_eq!(pgn.matches("[Event ").count(), 8, "{pgn}");

    // The pairs, and one of them ruled by the judge for the board viewer.
    let pairs = get_json(&format!("{base}/api/v1/jobs/{job}/pairs?limit=3")).await;
    let pairs = pairs["pairs"].as_array().unwrap();
    assert_eq!(pairs.len(), 3);
    assert_eq!(pairs[1]["unit"], lease.units[1]);
    assert_eq!(pairs[1]["points"], serde_json::json!([2, 2]));
    assert_eq!(pairs[1]["reasons"], serde_json::json!(["adjudication", "adjudication"]));
    let after = get_json(&format!("{base}/api/v1/jobs/{job}/pairs?after={}", lease.units[2])).await;
    assert_eq!(after["pairs"].as_array().unwrap().len(), 1);
    let judged = get_json(&format!("{base}/api/v1/jobs/{job}/pairs/{}", lease.units[0])).await;
    assert_eq!(judged["variant"], "xiangqi");
    let first = &judged["games"][0];
    assert_eq!(first["tags"]["White"], "new");
    assert_eq!(first["moves"], serde_json::json!(["h2e2", "h9g7"]));
    let judgement: Value = serde_json::from_str(first["judgement_json"].as_str().unwrap()).unwrap();
    // The position after the cannon to the centre and the horse out, by hand.
    assert_eq!(judgement["plies"][1]["fen"], "rnbakab1r/9/1c4nc1/p1p1p1p1p/9/9/P1P1P1P1P/1C2C4/9/RNBAKABNR w - - 2 2");
    assert_eq!(judgement["result"], "*", "adjudicated: not over by the rules");

    // The live stream carried the job with its new counts.
    let mut seen = String::new();
    let found = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(frame) = events.frame().await {
            if let Ok(data) = frame.unwrap().into_data() {
                seen.push_str(&String::from_utf8_lossy(&data));
                if seen.contains("event: jobs") && seen.contains("\"units_done\":4") {
                    return true;
                }
            }
        }
        false
    })
    .await;
    assert_eq!(found, Ok(true), "{seen}");

    // Workers, and the metrics the reports moved.
    let workers = get_json(&format!("{base}/api/v1/workers")).await;
    assert_eq!(workers["workers"][0]["capabilities"]["name"], "w1");
    assert_eq!(workers["workers"][0]["active_leases"], 1);
    let (status, metrics) = request("GET", &format!("{base}/metrics"), &[], "").await;
    assert_eq!(status, 200);
    for line in
        ["xq_games_total 8", "xq_leases_issued_total 1", "xq_jobs_running{kind=\"sprt\"} 1", "xq_workers_online 1"]
    {
        assert!(metrics.lines().any(|l| l == line), "{line} in\n{metrics}");
    }
    assert!(metrics.contains("xq_request_seconds_count{method=\"/xq.v1.Worker/ReportPairs\"} 2"), "{metrics}");
    assert!(metrics.contains("xq_writer_batch_changes_count"), "{metrics}");

    // Actions with a client token: the priority, then a stop.
    let auth = format!("Bearer {}", served.client_token);
    let headers = [("authorization", auth.as_str()), ("content-type", "application/json")];
    let (status, body) =
        request("POST", &format!("{base}/api/v1/jobs/{job}/priority"), &headers, r#"{"priority": 7}"#).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(admin.get_job(v1::JobId { job_id: job }).await.unwrap().into_inner().priority, 7);
    let (status, body) = request("POST", &format!("{base}/api/v1/jobs/{job}/stop"), &headers, "").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap()["state"], "stopped");
}

#[tokio::test]
async fn the_sprt_calculator_agrees_with_the_cli_s_statistics() {
    let served = serve(Backend::Sqlite, SchedulerConfig::default()).await;
    let base = format!("http://{}", served.address);
    let answer =
        get_json(&format!("{base}/api/v1/sprt?elo0=0&elo1=5&alpha=0.05&beta=0.05&penta=10,60,200,70,12")).await;
    let sprt = xq_stats::Sprt::new(0.0, 5.0, 0.05, 0.05, xq_stats::Model::Normalized).unwrap();
    let expected = sprt.state(&[10, 60, 200, 70, 12]).unwrap();
    assert!((answer["llr"].as_f64().unwrap() - expected.llr).abs() < 1e-12, "{answer}");
    assert!((answer["upper"].as_f64().unwrap() - 2.944).abs() < 1e-3, "ln(0.95/0.05)");
    let elo = xq_stats::elo_estimate(&[10, 60, 200, 70, 12]).unwrap();
    assert!((answer["elo"]["elo"].as_f64().unwrap() - elo.elo).abs() < 1e-12);
    let games = get_json(&format!("{base}/api/v1/sprt?model=logistic&trinomial=100,300,140")).await;
    assert!(games["llr"].as_f64().unwrap() > 0.0, "40 more wins than losses lean to H1: {games}");
    assert!((games["elo"]["draw_ratio"].as_f64().unwrap() - 300.0 / 540.0).abs() < 1e-12);
}

/// (method, path, headers, body, the status expected, a part of the error expected).
type BadRequest<'a> = (&'a str, String, Vec<(&'a str, &'a str)>, &'a str, u16, &'a str);

#[tokio::test]
async fn every_bad_request_gets_a_clear_4xx() {
    let served = serve(Backend::Sqlite, SchedulerConfig::default()).await;
    let base = format!("http://{}", served.address);
    let (_admin, _worker, job, _lease) = running_test(&served).await;
    let (_, worker_token) = registered_worker_token(&served, "w2", &[]).await;
    let client = format!("Bearer {}", served.client_token);
    let worker = format!("Bearer {worker_token}");
    let json = ("content-type", "application/json");
    let cases: Vec<BadRequest> = vec![
        ("GET", "/api/v1/jobs/999".into(), vec![], "", 404, "no job 999"),
        ("GET", "/api/v1/jobs/abc".into(), vec![], "", 400, "'abc' is not a job number"),
        ("GET", "/api/v1/jobs/-1".into(), vec![], "", 400, "not a job number"),
        ("GET", "/api/v1/jobs/99999999999999999999999".into(), vec![], "", 400, "not a job number"),
        ("GET", "/api/v1/jobs/999/history".into(), vec![], "", 404, "job 999"),
        ("GET", "/api/v1/jobs/999/games.pgn".into(), vec![], "", 404, "job 999"),
        ("GET", "/api/v1/jobs?limit=99999999999".into(), vec![], "", 400, "limit"),
        ("GET", format!("/api/v1/jobs/{job}/pairs?limit=5000"), vec![], "", 400, "limit"),
        ("GET", format!("/api/v1/jobs/{job}/pairs?after=-3"), vec![], "", 400, "after"),
        ("GET", format!("/api/v1/jobs/{job}/pairs/abc"), vec![], "", 400, "'abc' is not a unit"),
        ("GET", format!("/api/v1/jobs/{job}/pairs/0"), vec![], "", 404, "no pair 0"),
        ("GET", format!("/api/v1/jobs/{job}/pairs/18446744073709551615"), vec![], "", 404, "no pair"),
        ("GET", "/api/v1/jobs/999/pairs/1".into(), vec![], "", 404, "job 999"),
        ("GET", "/api/v1/jobs?state=bogus".into(), vec![], "", 400, "state 'bogus'"),
        ("GET", "/api/v1/jobs?kind=%00".into(), vec![], "", 400, "kind"),
        ("GET", "/api/v1/jobs?bounds=1,2,3".into(), vec![], "", 400, "bounds"),
        ("GET", "/api/v1/jobs?bounds=nan,inf".into(), vec![], "", 400, "bounds"),
        ("GET", "/api/v1/sprt?penta=1,2".into(), vec![], "", 400, "penta"),
        ("GET", "/api/v1/sprt?penta=1,2,3,4,18446744073709551615".into(), vec![], "", 400, "too many games"),
        ("GET", "/api/v1/sprt?trinomial=1,2,x".into(), vec![], "", 400, "trinomial"),
        ("GET", "/api/v1/sprt?penta=1,1,1,1,1&trinomial=1,1,1".into(), vec![], "", 400, "either"),
        ("GET", "/api/v1/sprt?elo0=5&elo1=0&penta=1,1,1,1,1".into(), vec![], "", 400, "bounds"),
        ("GET", "/api/v1/sprt?alpha=2&penta=1,1,1,1,1".into(), vec![], "", 400, "alpha"),
        ("GET", "/api/v1/sprt?model=bayes&penta=1,1,1,1,1".into(), vec![], "", 400, "model 'bayes'"),
        ("GET", "/api/v1/sprt?elo1=1e999&penta=1,1,1,1,1".into(), vec![], "", 400, "elo1"),
        ("GET", "/api/v1/jobs/%FF".into(), vec![], "", 400, "the path"),
        ("GET", "/api/v1/jobs/1/pairs/%C0".into(), vec![], "", 400, "the path"),
        ("GET", "/assets/%FF".into(), vec![], "", 400, "the path"),
        ("GET", "/assets/..%2F..%2FCargo.toml".into(), vec![], "", 404, "no asset"),
        ("GET", "/assets/%2e%2e".into(), vec![], "", 404, "no asset"),
        ("GET", "/../../etc/passwd".into(), vec![], "", 404, "nothing at"),
        ("GET", "/api/v2/jobs".into(), vec![], "", 404, "nothing at"),
        ("DELETE", format!("/api/v1/jobs/{job}"), vec![], "", 405, ""),
        ("POST", format!("/api/v1/jobs/{job}/stop"), vec![], "", 401, "client token"),
        (
            "POST",
            format!("/api/v1/jobs/{job}/stop"),
            vec![("authorization", "Bearer nonsense")],
            "",
            401,
            "unknown, revoked or expired token",
        ),
        ("POST", format!("/api/v1/jobs/{job}/stop"), vec![("authorization", &worker)], "", 403, "client token"),
        ("POST", "/api/v1/jobs/999/stop".into(), vec![("authorization", &client)], "", 404, "job 999"),
        ("POST", format!("/api/v1/jobs/{job}/priority"), vec![("authorization", &client), json], "{", 400, "the body"),
        (
            "POST",
            format!("/api/v1/jobs/{job}/priority"),
            vec![("authorization", &client), json],
            r#"{"priority": 1e99}"#,
            422,
            "the body",
        ),
        (
            "POST",
            format!("/api/v1/jobs/{job}/priority"),
            vec![("authorization", &client), json],
            r#"{"priority": 1, "x": 2}"#,
            422,
            "unknown field",
        ),
        (
            "POST",
            format!("/api/v1/jobs/{job}/priority"),
            vec![("authorization", &client)],
            r#"{"priority": 1}"#,
            415,
            "the body",
        ),
    ];
    for (method, path, headers, body, status, message) in cases {
        let (got, text) = request(method, &format!("{base}{path}"), &headers, body).await;
        assert_eq!(got, status, "{method} {path}: {text}");
        if !message.is_empty() {
            let error: Value = serde_json::from_str(&text).unwrap_or_else(|_| panic!("{method} {path}: {text}"));
            assert!(error["error"].as_str().unwrap().contains(message), "{method} {path}: {text}");
        }
    }
    // The job is still running: no refused action touched it.
    assert_eq!(get_json(&format!("{base}/api/v1/jobs/{job}")).await["state"], "running");
}

#[tokio::test]
async fn a_private_dashboard_reads_only_for_client_tokens() {
    let dir = TempDir::new("private");
    let url = fresh_database(Backend::Sqlite, &dir.0).await;
    let mut coordinator =
        xq_coordinator::server::Coordinator::open(&dir.0, Some(&url), SchedulerConfig::default()).await.unwrap();
    coordinator.dashboard_read = ReadAccess::Token;
    let served = serve_coordinator(coordinator, &dir.0).await;
    let base = format!("http://{}", served.address);
    let cookie = format!("theme=dark; xq_session=t:{}", served.client_token);
    let bearer = format!("Bearer {}", served.client_token);
    for path in ["/api/v1/jobs", "/api/v1/workers", "/metrics", "/api/v1/events"] {
        let (status, body) = request("GET", &format!("{base}{path}"), &[], "").await;
        assert_eq!(status, 401, "{path}: {body}");
        let (status, _) = request("GET", &format!("{base}{path}"), &[("cookie", "xq_session=t:wrong")], "").await;
        assert_eq!(status, 401, "{path}");
    }
    for path in ["/api/v1/jobs", "/api/v1/workers", "/metrics"] {
        assert_eq!(request("GET", &format!("{base}{path}"), &[("cookie", &cookie)], "").await.0, 200, "{path}");
        assert_eq!(request("GET", &format!("{base}{path}"), &[("authorization", &bearer)], "").await.0, 200, "{path}");
    }
    // The page shell holds no data: it is served, and asks for the token.
    assert_eq!(request("GET", &format!("{base}/"), &[], "").await.0, 200);
    // A session's cookie alone never authorises an action: its CSRF token must come too.
    let (status, body) = request("POST", &format!("{base}/api/v1/jobs/1/stop"), &[("cookie", &cookie)], "").await;
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("CSRF"), "{body}");
}
