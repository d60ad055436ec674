//! A CI job's side of the cluster (issue #55, part 5): a test created over plain HTTP
//! by the script docs/fleet.md gives, run as written with `curl`, and a test's end
//! POSTed to the webhook its submitter named (`--notify URL`), retried when the
//! receiver fails; the receiver is a local HTTP server the test runs, which fails its
//! first request. A webhook that is not http or https is refused at creation.

use crate::cluster::{start_coordinator, xq_at, xq_refused};
use crate::common::{TempDir, binary};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

/// A receiver that answers its first request 503 and the others 204, keeping each
/// request's first line and body.
pub async fn receiver() -> (String, Arc<Mutex<Vec<(String, String)>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hooks/xq", listener.local_addr().unwrap());
    let seen: Arc<Mutex<Vec<(String, String)>>> = Arc::default();
    let kept = seen.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let kept = kept.clone();
            tokio::spawn(async move {
                let mut reader = BufReader::new(stream);
                let mut first = String::new();
                reader.read_line(&mut first).await.unwrap();
                let mut length = 0;
                loop {
                    let mut line = String::new();
                    reader.read_line(&mut line).await.unwrap();
                    if line.trim().is_empty() {
                        break;
                    }
                    if let Some((name, value)) = line.split_once(':')
                        && name.eq_ignore_ascii_case("content-length")
                    {
                        length = value.trim().parse().unwrap();
                    }
                }
                let mut body = vec![0; length];
                reader.read_exact(&mut body).await.unwrap();
                let count = {
                    let mut seen = kept.lock().unwrap();
                    seen.push((first.trim().to_owned(), String::from_utf8(body).unwrap()));
                    seen.len()
                };
                let status = if count == 1 { "503 Service Unavailable" } else { "204 No Content" };
                let answer = format!("HTTP/1.1 {status}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
                reader.get_mut().write_all(answer.as_bytes()).await.unwrap();
            });
        }
    });
    (url, seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_test_s_end_is_posted_to_its_webhook_and_retried_until_taken() {
    let dir = TempDir::new("webhooks");
    let (_coordinator, address) = start_coordinator(&dir.0, 0, 10).await;
    let (url, seen) = receiver().await;
    let engine = binary("xq-engine");
    let engine = engine.to_str().unwrap();
    #[rustfmt::skip]
    let submitted = xq_at(address, &dir.0, &[
        "games", "--games", "2", "--tc", "depth=2", "--no-bench", "--new", engine, "--base", engine,
        "--notify", &url,
    ]);
    let job = crate::cluster::job_of(&submitted);
    assert!(seen.lock().unwrap().is_empty(), "nothing is sent before the test ends");
    xq_at(address, &dir.0, &["stop", &job.to_string()]);
    let start = Instant::now();
    while seen.lock().unwrap().len() < 2 {
        assert!(start.elapsed() < Duration::from_secs(30), "not delivered again: {:?}", seen.lock().unwrap());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2, "refused once, taken once, then no more: {seen:?}");
    for (line, body) in &seen {
        assert_eq!(line, "POST /hooks/xq HTTP/1.1");
        let json: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(json["event"], "test.ended", "{json}");
        assert_eq!((json["job"]["job_id"].as_u64(), json["job"]["state"].as_str()), (Some(job), Some("stopped")));
    }

    #[rustfmt::skip]
    let said = xq_refused(address, &dir.0, &[
        "games", "--games", "2", "--tc", "depth=2", "--no-bench", "--new", engine, "--base", engine,
        "--notify", "file:///etc/passwd",
    ]);
    assert!(said.contains("notify_url") && said.contains("http or https"), "{said}");
}

/// The script docs/fleet.md gives a CI job, run as written with `curl` against a real
/// coordinator and a submitter's token: it uploads two engines over HTTP and creates
/// an SPRT naming them by hash, which the coordinator then holds as `xq sprt` would.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_docs_ci_script_creates_a_test_over_http_as_written() {
    let dir = TempDir::new("ci-script");
    let (_coordinator, address) = start_coordinator(&dir.0, 0, 10).await;
    let mut admin = crate::common::client(address, &crate::cluster::token(&dir.0)).await;
    let submitter = admin
        .create_token(xq_proto::v1::CreateTokenRequest {
            role: "submitter".to_owned(),
            name: "ci".to_owned(),
            expires_seconds: 0,
        })
        .await
        .unwrap()
        .into_inner()
        .token;
    let docs =
        std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/fleet.md")).unwrap();
    let start = docs.find("# A CI job's test:").expect("the docs' CI script");
    let script = &docs[start..start + docs[start..].find("```").unwrap()];
    for side in ["build", "master"] {
        std::fs::create_dir_all(dir.0.join(side)).unwrap();
        std::fs::copy(binary("xq-engine"), dir.0.join(side).join("engine")).unwrap();
    }
    let output = std::process::Command::new("bash")
        .args(["-euo", "pipefail", "-c", script])
        .current_dir(&dir.0)
        .env("XQ_COORDINATOR", format!("http://{address}"))
        .env("XQ_TOKEN", &submitter)
        .env("GIT_COMMIT", "9f1c2ab")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{said}{}", String::from_utf8_lossy(&output.stderr));
    let answer: serde_json::Value = serde_json::from_str(&said).unwrap();
    let job = answer["job_id"].as_u64().unwrap();
    let view = admin.get_job(xq_proto::v1::JobId { job_id: job }).await.unwrap().into_inner();
    assert_eq!((view.kind.as_str(), view.state.as_str(), view.time_control.as_str()), ("sprt", "running", "10+0.1"));
    assert_eq!((view.new_engine.as_str(), view.base_engine.as_str()), ("engine-9f1c2ab", "engine-master"));
    let bounds = view.sprt_spec.as_ref().map(|s| (s.elo0, s.elo1));
    assert_eq!(bounds, Some((0.0, 5.0)));
    assert_eq!(view.source.as_ref().map(|s| s.new_commit.as_str()), Some("9f1c2ab"));
    // The submitter is the token's: its tests are listed as its own.
    let listed = xq_at(address, &dir.0, &["list", "--submitter", &view.submitter]);
    assert!(listed.starts_with(&format!("job {job} ")), "{listed}");
    // Without the token, nothing is stored.
    let refused = std::process::Command::new("curl")
        .args(["-s", "-o", "/dev/null", "-w", "%{http_code}", "--data-binary", "x"])
        .arg(format!("http://{address}/api/v1/artifacts?kind=engine&name=x"))
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&refused.stdout), "401");
}

/// Over HTTP a CI job says all `xq sprt` does for a foreign engine: CPU builds (the
/// worker is leased the one its processor runs), how to talk to it (ranks, FEN
/// letters), a ply limit, and an SPRT capped at a number of pairs with its preset's
/// bounds.
#[tokio::test]
async fn a_ci_job_names_builds_ranks_and_a_capped_preset_over_http() {
    use crate::common::{BACKENDS, registered_worker, serve};
    use crate::dashboard::request;
    let served = serve(BACKENDS[0], xq_coordinator::scheduler::config::SchedulerConfig::default()).await;
    let base = format!("http://{}", served.address);
    let bearer = format!("Bearer {}", served.client_token);
    let auth = [("authorization", bearer.as_str())];
    let mut stored = Vec::new();
    for name in ["engine-future", "engine-here", "engine-generic"] {
        let url = format!("{base}/api/v1/artifacts?kind=engine&name={name}");
        let (status, body) = request("POST", &url, &auth, &format!("#!/bin/sh\n# {name}\n")).await;
        assert_eq!(status, 200, "{body}");
        let answer: serde_json::Value = serde_json::from_str(&body).unwrap();
        stored.push(answer["sha256"].as_str().unwrap().to_owned());
    }
    let test = serde_json::json!({
        "new": {
            "name": "fsf-dev",
            "builds": [
                {"cpu_flags": ["avx2", "xq_future_flag"], "sha256": stored[0]},
                {"cpu_flags": ["avx2"], "sha256": stored[1]},
            ],
            "sha256": stored[2],
            "ranks": "1-10",
            "fen": "he",
            "bench_nps": 1_500_000,
        },
        // Time odds: the base thinks on a clock twice the preset's.
        "base": {"name": "fsf-master", "sha256": stored[2], "ranks": "1-10", "tc": "20+0.2"},
        "preset": "stc",
        "max_pairs": 600,
        "max_plies": 300,
        "start_position": true,
    });
    let headers = [auth[0], ("content-type", "application/json")];
    let (status, body) = request("POST", &format!("{base}/api/v1/tests"), &headers, &test.to_string()).await;
    assert_eq!(status, 200, "{body}");
    let job: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!((job["kind"].as_str(), job["units_total"].as_u64()), (Some("sprt"), Some(600)), "{job}");
    assert_eq!((job["sprt_spec"]["elo0"].as_f64(), job["sprt_spec"]["elo1"].as_f64()), (Some(0.0), Some(2.0)));
    assert!(job["summary"].as_str().unwrap().contains("10+0.1 vs 20+0.2"), "{job}");
    // A worker with avx2 is leased the avx2 build, told how the engines talk.
    let mut worker = registered_worker(&served, "w", &["avx2"]).await;
    let lease = worker.lease(xq_proto::v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
    let Some(xq_proto::v1::lease::Work::MatchSpec(spec)) = lease.work else { panic!("a match") };
    let new = spec.new_engine.clone().unwrap();
    assert_eq!(new.binary.map(|b| b.sha256), Some(stored[1].clone()), "the build its processor runs");
    assert_eq!((new.ranks.as_str(), new.fen_letters.as_str(), spec.max_plies), ("1-10", "he", 300));
    // The engine's bench speed goes to the worker, which scales the clocks by it when
    // the coordinator scales at all; the base's own clock is the preset's doubled.
    assert_eq!(new.bench_nps, 1_500_000);
    let scales = xq_coordinator::scheduler::config::SchedulerConfig::default().reference_nps != 0;
    assert_eq!(spec.scale_by_engine_speed, scales);
    let [new_clock, base_clock] = xq_proto::speed::engine_time_controls(&spec).unwrap();
    assert_eq!(base_clock.scaled(0.5).to_string(), new_clock.to_string(), "{spec:?}");
    // A cap without bounds to cap, or beside a number of pairs, is refused.
    for (field, value, problem) in
        [("preset", serde_json::json!(""), "max_pairs caps an SPRT"), ("pairs", serde_json::json!(10), "not both")]
    {
        let mut wrong = test.clone();
        wrong[field] = value;
        let (status, body) = request("POST", &format!("{base}/api/v1/tests"), &headers, &wrong.to_string()).await;
        assert_eq!(status, 400, "{body}");
        assert!(body.contains(problem), "{body}");
    }
}
