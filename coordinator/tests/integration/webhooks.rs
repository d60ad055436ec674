//! Webhooks (issue #55, part 5): a test made with `--notify URL` has its end POSTed to
//! the URL as JSON, retried when the receiver fails; the receiver here is a local HTTP
//! server the test runs, which fails its first request. An address that is not http
//! or https is refused at creation.

use crate::cluster::{start_coordinator, xq_at};
use crate::common::{TempDir, binary};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

/// A receiver that answers its first request 503 and the others 204, keeping each
/// request's first line and body.
async fn receiver() -> (String, Arc<Mutex<Vec<(String, String)>>>) {
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
    let job: u64 = submitted.split_whitespace().nth(1).and_then(|w| w.trim_end_matches(':').parse().ok()).unwrap();
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

    let refused = std::process::Command::new(binary("xq"))
        .args(["--coordinator", &format!("http://{address}"), "--token-file"])
        .arg(dir.0.join("client-token"))
        .args(["games", "--games", "2", "--tc", "depth=2", "--no-bench", "--new", engine, "--base", engine])
        .args(["--notify", "file:///etc/passwd"])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("notify_url") && said.contains("http or https"), "{said}");
}
