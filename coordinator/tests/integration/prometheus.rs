//! A real Prometheus (Debian's) scrapes a coordinator running a small test, and every
//! query of every panel of the Grafana dashboard in `dashboards/grafana/` returns
//! numbers from it: the dashboards plot exactly the metrics the coordinator exports.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;
use xq_coordinator::scheduler::config::SchedulerConfig;
use xq_proto::v1;

use crate::common::*;
use crate::dashboard::{get_json, report, request, running_test};

const PROMETHEUS: &str = "/usr/bin/prometheus";

/// Every PromQL expression of the Grafana dashboard: (panel title, expression).
fn panel_queries() -> Vec<(String, String)> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../dashboards/grafana/xq-coordinator.json");
    let dashboard: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let mut queries = Vec::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            queries.push((panel["title"].as_str().unwrap().to_owned(), target["expr"].as_str().unwrap().to_owned()));
        }
    }
    queries
}

fn url_encode(text: &str) -> String {
    text.bytes()
        .map(|b| if b.is_ascii_alphanumeric() { (b as char).to_string() } else { format!("%{b:02X}") })
        .collect()
}

/// How many times Prometheus has scraped the coordinator in the last minute.
async fn scrapes(api: &str) -> f64 {
    let query = format!("{api}/query?query={}", url_encode("count_over_time(up[1m])"));
    let Ok((200, body)) = tokio::time::timeout(Duration::from_secs(2), request("GET", &query, &[], "")).await else {
        return 0.0;
    };
    let value: Value = serde_json::from_str(&body).unwrap_or_default();
    value["data"]["result"][0]["value"][1].as_str().and_then(|v| v.parse().ok()).unwrap_or(0.0)
}

#[tokio::test]
async fn prometheus_scrapes_every_metric_the_grafana_panels_plot() {
    assert!(Path::new(PROMETHEUS).exists(), "{PROMETHEUS} is missing: scripts/setup installs Debian's prometheus");
    let served = serve(Backend::Sqlite, SchedulerConfig::default()).await;
    let (mut admin, mut worker, job, lease) = running_test(&served).await;
    let dir = TempDir::new("prometheus");
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let config = dir.0.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: xq\n    metrics_path: /metrics\n    \
             static_configs:\n      - targets: ['{}']\n",
            served.address
        ),
    )
    .unwrap();
    let _prometheus = tokio::process::Command::new(PROMETHEUS)
        .arg(format!("--config.file={}", config.display()))
        .arg(format!("--storage.tsdb.path={}", dir.0.join("data").display()))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let api = format!("http://127.0.0.1:{port}/api/v1");

    // A small test runs while Prometheus scrapes: pairs reported, priorities set,
    // refused requests.
    let base = format!("http://{}", served.address);
    let (status, _) = request("GET", &format!("{base}/api/v1/jobs/12345"), &[], "").await;
    assert_eq!(status, 404);
    let mut results = Vec::new();
    let start = Instant::now();
    let mut scraped = false;
    while start.elapsed() < Duration::from_secs(60) {
        if results.len() < lease.units.len() {
            results.push([2u8, 1u8]);
            report(&mut worker, &lease, results.len() - 1, &results).await;
        }
        // A write on every round, so that the writer's histograms move while scraped.
        admin.set_priority(v1::SetPriorityRequest { job_id: job, priority: results.len() as i32 }).await.unwrap();
        let refused = worker
            .report_pairs(v1::ReportPairsRequest { lease_id: 999_999, pairs: vec![], ..Default::default() })
            .await;
        assert!(refused.is_err());
        tokio::time::sleep(Duration::from_millis(500)).await;
        // Four scrapes at least, so that every rate has samples to work on.
        if scrapes(&api).await >= 4.0 {
            scraped = true;
            break;
        }
    }
    assert!(scraped, "Prometheus did not scrape the coordinator four times within a minute");
    let up = get_json(&format!("{api}/query?query=up")).await;
    assert_eq!(up["data"]["result"][0]["value"][1], "1", "{up}");

    for (title, query) in panel_queries() {
        let answer = get_json(&format!("{api}/query?query={}", url_encode(&query))).await;
        assert_eq!(answer["status"], "success", "{title}: {query}: {answer}");
        let series = answer["data"]["result"].as_array().unwrap();
        assert!(!series.is_empty(), "{title}: {query} returned no series");
        let numbers: Vec<f64> =
            series.iter().filter_map(|s| s["value"][1].as_str().and_then(|v| v.parse::<f64>().ok())).collect();
        assert!(numbers.iter().any(|n| n.is_finite()), "{title}: {query} returned no number: {answer}");
    }
}

const PROMTOOL: &str = "/usr/bin/promtool";

/// `/metrics` passes Prometheus's own lint, `promtool check metrics` (help text on
/// every metric, counters named `_total`, units in names), with every series present.
#[tokio::test]
async fn promtool_check_metrics_passes_on_the_metrics() {
    assert!(Path::new(PROMTOOL).exists(), "{PROMTOOL} is missing: scripts/setup installs Debian's prometheus");
    let served = serve(Backend::Sqlite, SchedulerConfig::default()).await;
    let (_admin, mut worker, _job, lease) = running_test(&served).await;
    report(&mut worker, &lease, 0, &[[2, 1]]).await;
    let refused =
        worker.report_pairs(v1::ReportPairsRequest { lease_id: 999_999, pairs: vec![], ..Default::default() }).await;
    assert!(refused.is_err());
    let (status, text) = request("GET", &format!("http://{}/metrics", served.address), &[], "").await;
    assert_eq!(status, 200);
    for name in ["xq_games_total", "xq_refused_total", "xq_leases_issued_total", "xq_request_seconds_bucket"] {
        assert!(text.contains(name), "{name} in {text}");
    }
    let mut promtool = tokio::process::Command::new(PROMTOOL)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = promtool.stdin.take().unwrap();
    tokio::io::AsyncWriteExt::write_all(&mut stdin, text.as_bytes()).await.unwrap();
    drop(stdin);
    let output = promtool.wait_with_output().await.unwrap();
    let complaints = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success() && complaints.trim().is_empty(), "promtool: {complaints}\non:\n{text}");
}
