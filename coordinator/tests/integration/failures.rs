//! Failures that speak (issue #55, part 3), with real processes: a test whose new
//! engine dies at its first `go` on every machine. Each worker that leases it reports a
//! crash failure with the engine's last words instead of letting its lease expire, and
//! gets no more of the test; a reported failure is no mark against its conduct; the
//! third worker's report stops the test as failed, saying why; `xq show` and the JSON
//! API list the reports by kind and engine, each with its worker.

use crate::cluster::{start_coordinator, start_worker, token, wait_for, xq_at};
use crate::common::{TempDir, binary, client, executable};
use crate::dashboard::get_json;
use std::path::Path;
use std::time::Duration;
use xq_proto::v1;

/// An engine that greets and gets ready as a UCI engine does, then dies at its first
/// `go`, as a build for another CPU or a broken upload would.
pub fn dying_engine(dir: &Path) -> std::path::PathBuf {
    let script = r#"#!/usr/bin/env python3
import sys
for line in sys.stdin:
    words = line.split()
    if not words:
        continue
    if words[0] == "uci":
        print("id name dies-at-go")
        print("uciok", flush=True)
    elif words[0] == "isready":
        print("readyok", flush=True)
    elif words[0] == "go":
        sys.stderr.write("dies-at-go: illegal instruction (simulated)\n")
        sys.exit(132)
    elif words[0] == "quit":
        break
"#;
    executable(dir, "dies-at-go", script)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_test_whose_engine_cannot_play_fails_after_three_workers_report_it() {
    let dir = TempDir::new("failures");
    let engine = dying_engine(&dir.0);
    let (_coordinator, address) = start_coordinator(&dir.0, 0, 10).await;
    let mut admin = client(address, &token(&dir.0)).await;
    #[rustfmt::skip]
    let submitted = xq_at(address, &dir.0, &[
        "games", "--games", "20", "--tc", "depth=2", "--max-plies", "60", "--no-bench",
        "--new", engine.to_str().unwrap(), "--base", binary("xq-engine").to_str().unwrap(),
    ]);
    let job = crate::cluster::job_of(&submitted);

    // One worker: it reports, and gets none of the test again (the test waits, its
    // units unplayed, rather than going back to the worker that cannot play it).
    let mut workers = vec![start_worker(&mut admin, address, dir.0.join("w0"), "w0").await];
    let limit = Duration::from_secs(120);
    let first = wait_for(&mut admin, job, limit, "the first report", |j| !j.failures.is_empty()).await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    let later = admin.get_job(v1::JobId { job_id: job }).await.unwrap().into_inner();
    assert_eq!((later.state.as_str(), later.failures.len(), later.active_leases), ("running", 1, 0), "{later:?}");
    assert_eq!(later.units_done, 0, "no pair of an engine that cannot move is counted: {later:?}");
    // Exactly one lease was issued: the worker asked again and again, and got none.
    let metrics = text_of(&format!("http://{address}/metrics")).await;
    let issued = metrics.lines().find(|l| l.starts_with("xq_leases_issued_total")).unwrap_or_default().to_owned();
    assert!(issued.ends_with(" 1"), "{issued}");
    let failure = &first.failures[0];
    assert_eq!((failure.kind.as_str(), failure.engine.as_str(), failure.worker_name.as_str()), ("crash", "new", "w0"));
    assert!(failure.detail.contains("before its first move"), "{}", failure.detail);
    assert!(failure.detail.contains("illegal instruction (simulated)"), "the engine's last words: {}", failure.detail);

    // Two more workers: the third report stops the test as failed.
    for name in ["w1", "w2"] {
        workers.push(start_worker(&mut admin, address, dir.0.join(name), name).await);
    }
    let done = wait_for(&mut admin, job, limit, "the test to stop", |j| j.state != "running").await;
    assert_eq!(done.state, "stopped", "{done:?}");
    assert!(done.outcome.starts_with("failed: 3 workers reported a crash failure of engine new"), "{}", done.outcome);
    let mut reporters: Vec<&str> = done.failures.iter().map(|f| f.worker_name.as_str()).collect();
    reporters.sort();
    assert_eq!(reporters, ["w0", "w1", "w2"]);

    // Honest workers that could not run a broken upload are not quarantined, and no
    // lease of theirs expired.
    let listed = admin.list_workers(v1::ListWorkersRequest::default()).await.unwrap().into_inner().workers;
    assert_eq!(listed.len(), 3);
    for worker in &listed {
        assert_eq!(worker.standing, "active", "{worker:?}");
    }
    let metrics = text_of(&format!("http://{address}/metrics")).await;
    let expired = metrics.lines().find(|l| l.starts_with("xq_leases_expired_total")).unwrap_or_default().to_owned();
    assert!(expired.ends_with(" 0"), "{expired}");

    // What the author reads: xq show and the JSON API.
    let shown = xq_at(address, &dir.0, &["show", &job.to_string()]);
    assert!(shown.contains("failures reported by 3 workers"), "{shown}");
    assert!(shown.contains("    crash of engine new:\n"), "{shown}");
    for name in ["w0", "w1", "w2"] {
        assert!(shown.contains(&format!("({name}): before its first move")), "{shown}");
    }
    let json = get_json(&format!("http://{address}/api/v1/jobs/{job}")).await;
    let listed = json["failures"].as_array().unwrap();
    assert_eq!(listed.len(), 3, "{json}");
    assert!(listed.iter().all(|f| f["kind"] == "crash" && f["engine"] == "new"), "{json}");
    for mut worker in workers {
        worker.start_kill().unwrap();
        worker.wait().await.unwrap();
    }
}

pub async fn text_of(url: &str) -> String {
    let (status, body) = crate::dashboard::request("GET", url, &[], "").await;
    assert_eq!(status, 200, "GET {url}: {body}");
    body
}
