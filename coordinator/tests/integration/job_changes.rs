//! A test after its creation (issue #55, part 5), with real processes and the command
//! line as its author uses it: `xq modify` changes its pairs and info while it waits,
//! `xq stop` and `xq resume` run it on from where it stopped, a finished test resumes
//! only with pairs left, and `xq clone` makes a new test of its stored engines at
//! another time control, with nothing but the coordinator's copies.

use crate::cluster::{job_of, start_coordinator, start_worker, token, wait_for, xq_at, xq_refused};
use crate::common::{TempDir, binary, client};
use std::time::Duration;
use xq_proto::v1;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_test_is_modified_stopped_resumed_and_cloned_from_the_command_line() {
    let dir = TempDir::new("job-changes");
    let (_coordinator, address) = start_coordinator(&dir.0, 0, 10).await;
    let mut admin = client(address, &token(&dir.0)).await;
    let engine = binary("xq-engine");
    let engine = engine.to_str().unwrap();
    #[rustfmt::skip]
    let job = job_of(&xq_at(address, &dir.0, &[
        "games", "--games", "4", "--tc", "depth=2", "--max-plies", "60", "--no-bench",
        "--new", engine, "--base", engine, "--new-name", "deeper", "--base-name", "shallower",
        "--base-option", "Depth Limit=1",
    ]));
    let id = job.to_string();
    let modified = xq_at(address, &dir.0, &["modify", &id, "--pairs", "3", "--info", "three pairs, not two"]);
    assert!(modified.contains("0/3 units") && modified.contains("— three pairs, not two"), "{modified}");
    let refused = xq_refused(address, &dir.0, &["modify", &id]);
    assert!(refused.contains("nothing to change"), "{refused}");
    let stopped = xq_at(address, &dir.0, &["stop", &id]);
    assert!(stopped.contains("[stopped]"), "{stopped}");
    let resumed = xq_at(address, &dir.0, &["resume", &id]);
    assert!(resumed.contains("[running]"), "{resumed}");

    let mut worker = start_worker(&mut admin, address, dir.0.join("w0"), "w0").await;
    let limit = Duration::from_secs(300);
    let done = wait_for(&mut admin, job, limit, "the test to finish", |j| j.state != "running").await;
    assert_eq!((done.state.as_str(), done.units_done, done.units_total), ("finished", 3, 3), "{done:?}");
    // Finished with every pair played: it resumes only with pairs left.
    let refused = xq_refused(address, &dir.0, &["resume", &id]);
    assert!(refused.contains("raise its pairs first"), "{refused}");
    xq_at(address, &dir.0, &["modify", &id, "--pairs", "4"]);
    xq_at(address, &dir.0, &["resume", &id]);
    let done = wait_for(&mut admin, job, limit, "the fourth pair", |j| j.state != "running").await;
    assert_eq!((done.state.as_str(), done.units_done), ("finished", 4), "{done:?}");

    // A clone at another time control, of the stored engines and their options.
    let clone = job_of(&xq_at(address, &dir.0, &["clone", &id, "--tc", "depth=1", "--pairs", "1"]));
    assert_ne!(clone, job);
    let cloned = wait_for(&mut admin, clone, limit, "the clone to finish", |j| j.state != "running").await;
    assert_eq!((cloned.state.as_str(), cloned.units_done, cloned.time_control.as_str()), ("finished", 1, "depth=1"));
    assert_eq!((cloned.new_engine.as_str(), cloned.base_engine.as_str()), ("deeper", "shallower"));
    assert!(cloned.description.starts_with(&format!("clone of {job}: ")), "{}", cloned.description);
    assert_eq!(cloned.source.as_ref().map(|s| s.info.as_str()), Some("three pairs, not two"));
    let refused = xq_refused(address, &dir.0, &["clone", &id, "--elo0", "0", "--elo1", "5"]);
    assert!(refused.contains("has no SPRT"), "{refused}");
    // Rescheduled at a preset: the fixed-length test becomes the preset's SPRT with its
    // adjudication, the flags given still winning (a depth keeps it short here).
    let ltc = job_of(&xq_at(address, &dir.0, &["clone", &id, "--preset", "ltc", "--tc", "depth=1", "--pairs", "1"]));
    let ltc = wait_for(&mut admin, ltc, limit, "the LTC clone to finish", |j| j.state != "running").await;
    let bounds = ltc.sprt_spec.as_ref().map(|s| (s.elo0, s.elo1));
    assert_eq!((ltc.state.as_str(), ltc.time_control.as_str(), bounds), ("finished", "depth=1", Some((0.5, 2.5))));
    let refused = xq_refused(address, &dir.0, &["clone", &id, "--preset", "vltc"]);
    assert!(refused.contains("'vltc' is no preset"), "{refused}");
    // Each change is in the audit log.
    let audit = admin.list_audit(v1::ListAuditRequest::default()).await.unwrap().into_inner();
    let actions: Vec<&str> = audit.entries.iter().map(|e| e.action.as_str()).collect();
    for action in ["job.modify", "job.resume", "job.clone"] {
        assert!(actions.contains(&action), "{action} in {actions:?}");
    }
    worker.start_kill().unwrap();
    worker.wait().await.unwrap();
}

/// A test stopped, then the coordinator restarted: its counted pairs are read back when
/// it is resumed, so it plays on from where it stopped, each pair once, rather than
/// being refused (or playing every pair again).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_test_stopped_before_a_restart_resumes_from_its_stored_pairs() {
    let dir = TempDir::new("resume-after-restart");
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let (mut coordinator, address) = start_coordinator(&dir.0, port, 10).await;
    let mut admin = client(address, &token(&dir.0)).await;
    let engine = binary("xq-engine");
    let engine = engine.to_str().unwrap();
    #[rustfmt::skip]
    let job = job_of(&xq_at(address, &dir.0, &[
        "games", "--games", "24", "--tc", "depth=3", "--max-plies", "60", "--no-bench",
        "--new", engine, "--base", engine, "--base-option", "Depth Limit=2",
    ]));
    let id = job.to_string();
    let mut worker = start_worker(&mut admin, address, dir.0.join("w0"), "w0").await;
    let limit = Duration::from_secs(300);
    wait_for(&mut admin, job, limit, "two pairs", |j| j.units_done >= 2).await;
    xq_at(address, &dir.0, &["stop", &id]);
    worker.start_kill().unwrap();
    worker.wait().await.unwrap();
    let stopped = admin.get_job(v1::JobId { job_id: job }).await.unwrap().into_inner();
    // The pair in play when it stopped still counts; the test is far from its end.
    assert!(stopped.units_done < 12, "stopped before its end: {stopped:?}");
    // Resumed and stopped again without a restart, it keeps its course: a point a pair.
    let id_message = v1::JobId { job_id: job };
    xq_at(address, &dir.0, &["resume", &id]);
    xq_at(address, &dir.0, &["stop", &id]);
    // Each end is stamped: the second stop after the first, and after the job began.
    let ended_ms = admin.get_job(id_message).await.unwrap().into_inner().ended_ms;
    assert!(stopped.created_ms > 0 && stopped.ended_ms >= stopped.created_ms, "{stopped:?}");
    assert!(ended_ms > stopped.ended_ms, "{ended_ms} after {}", stopped.ended_ms);
    let history = admin.get_job_history(id_message).await.unwrap().into_inner();
    assert_eq!(history.points.last().map(|p| p.pairs), Some(stopped.units_done), "{history:?}");
    coordinator.start_kill().unwrap();
    coordinator.wait().await.unwrap();

    let (_coordinator, address) = start_coordinator(&dir.0, port, 10).await;
    let mut admin = client(address, &token(&dir.0)).await;
    let kept = admin.get_job(id_message).await.unwrap().into_inner();
    assert_eq!(kept.ended_ms, ended_ms, "the end survives the restart");
    let resumed = xq_at(address, &dir.0, &["resume", &id]);
    assert!(resumed.contains("[running]"), "{resumed}");
    assert_eq!(admin.get_job(id_message).await.unwrap().into_inner().ended_ms, 0, "running again: no end");
    let mut worker = start_worker(&mut admin, address, dir.0.join("w1"), "w1").await;
    let done = wait_for(&mut admin, job, limit, "the test to finish", |j| j.state != "running").await;
    worker.start_kill().unwrap();
    worker.wait().await.unwrap();
    assert_eq!((done.state.as_str(), done.units_done), ("finished", 12), "{done:?}");
    assert!(done.ended_ms > ended_ms, "finished after its last stop: {done:?}");
    let shown = xq_at(address, &dir.0, &["show", &id]);
    let lasted = (done.ended_ms - done.created_ms) as f64 / 60_000.0;
    assert!(shown.contains(&format!("\n  ended {lasted:.1} min after its creation\n")), "{shown}");
    let history = admin.get_job_history(id_message).await.unwrap().into_inner();
    let course: Vec<u64> = history.points.iter().map(|p| p.pairs).collect();
    assert_eq!(course, (1..=12).collect::<Vec<u64>>(), "the course of all twelve");
    // Each pair once: 24 games, each round once, the totals theirs.
    let games = crate::cluster::job_games(&mut admin, job).await;
    let mut rounds: Vec<&str> = games.iter().map(|g| g.tag("Round").unwrap()).collect();
    rounds.sort();
    rounds.dedup();
    assert_eq!((games.len(), rounds.len()), (24, 24), "{rounds:?}");
    let totals = done.totals.unwrap_or_default();
    assert_eq!(totals.wins + totals.draws + totals.losses, 24, "{totals:?}");
    // Each unit once, the first worker's pairs still its own.
    let request = v1::ListPairsRequest { job_id: job, after: None, limit: 100 };
    let pairs = admin.list_pairs(request).await.unwrap().into_inner().pairs;
    assert_eq!(pairs.iter().map(|p| p.unit).collect::<Vec<_>>(), (0..12).collect::<Vec<u64>>());
    let first_worker = pairs.iter().map(|p| p.worker_id).min().unwrap();
    let by_first = pairs.iter().filter(|p| p.worker_id == first_worker).count() as u64;
    assert_eq!(by_first, stopped.units_done, "{pairs:?}");
}
