//! `xq-trainer loop` against a real coordinator and worker: a generation from the
//! handcrafted evaluation to a tested, registered net, then a loop killed in its
//! second generation's self-play and started again, which goes on with the same job;
//! and a lineage seeded with the engine's embedded net.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::process::Command;
use xq_proto::v1;

use crate::cluster::{start_coordinator, start_worker, token, wait_for};
use crate::common::{Client, TempDir, binary, client};

/// `xq-trainer loop` with tiny settings, up to `generations`, with `extra` arguments.
fn loop_command(address: std::net::SocketAddr, data: &Path, out: &Path, generations: u32, extra: &[&str]) -> Command {
    let book = Path::new(env!("CARGO_MANIFEST_DIR")).join("../books/xiangqi-2ply.epd");
    let mut command = Command::new(binary("xq-trainer"));
    command
        .args(["loop", "--coordinator", &format!("http://{address}"), "--token", &token(data)])
        .arg("--out")
        .arg(out)
        .args(["--lineage", "tiny", "--generations", &generations.to_string(), "--engine"])
        .arg(binary("xq-engine"))
        .args(["--units", "2", "--games-per-unit", "2", "--nodes", "300", "--random-plies", "6"])
        .args(["--tc", "depth=2", "--max-pairs", "2", "--book"])
        .arg(book)
        .args(["--epochs", "1", "--batch-size", "16", "--validation-share", "0.5", "--keep-captures"])
        .args(["--keep-in-check", "--device", "cpu", "--poll-seconds", "0.2"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    command
}

/// The `factorise` setting a net's description records (absent when off).
fn factorised(net: &v1::Net) -> Option<bool> {
    let description: serde_json::Value = serde_json::from_str(&net.description).expect("a net's description is JSON");
    description["settings"].get("factorise").map(|value| value == true)
}

async fn nets(admin: &mut Client) -> Vec<v1::Net> {
    admin.list_nets(v1::ListNetsRequest { lineage: "tiny".to_owned() }).await.unwrap().into_inner().nets
}

/// The self-play jobs the loop made for `generation`: those of its lineage, as the
/// coordinator filters them, with the generation's label.
async fn self_play_jobs(admin: &mut Client, generation: u32) -> Vec<v1::Job> {
    let request = v1::ListJobsRequest { lineage: "tiny".to_owned(), kind: "selfplay".to_owned(), ..Default::default() };
    let jobs = admin.list_jobs(request).await.unwrap().into_inner().jobs;
    let label = format!("lineage tiny generation {generation} self-play");
    jobs.into_iter().filter(|j| j.description == label).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_loop_trains_tests_and_records_a_generation_and_resumes_after_a_kill() {
    let dir = TempDir::new("loop");
    let (_coordinator, address) = start_coordinator(&dir.0, 0, 10).await;
    let mut admin = client(address, &token(&dir.0)).await;
    let _worker = start_worker(&mut admin, address, dir.0.join("w"), "w").await;
    let out = dir.0.join("loop");

    // Generation 1: self-play on the handcrafted evaluation, a net, its test.
    let first = loop_command(address, &dir.0, &out, 1, &[]).output().await.unwrap();
    let stderr = String::from_utf8_lossy(&first.stderr);
    assert!(first.status.success(), "{stderr}");
    let [net] = nets(&mut admin).await.try_into().expect("one net");
    assert_eq!((net.generation, net.parent_id), (1, 0), "{net:?}");
    assert!(matches!(net.state.as_str(), "promoted" | "rejected"), "the test ended: {net:?}");
    assert!(net.validation_loss > 0.0 && net.positions > 0 && net.epochs == 1, "{net:?}");
    assert_eq!(factorised(&net), Some(true), "a fresh net trains factorised by default");
    let [data] = self_play_jobs(&mut admin, 1).await.try_into().expect("one self-play job");
    assert_eq!((net.data_job_id, data.state.as_str()), (data.job_id, "finished"));
    assert!(data.summary.ends_with("handcrafted"), "{}", data.summary);
    let test = admin.get_job(v1::JobId { job_id: net.test_job_id }).await.unwrap().into_inner();
    assert_eq!((test.kind.as_str(), test.state.as_str()), ("sprt", "finished"), "{test:?}");
    assert_eq!((data.lineage.as_str(), test.lineage.as_str()), ("tiny", "tiny"), "the loop's jobs are its lineage's");
    let stdout = String::from_utf8_lossy(&first.stdout);
    assert!(stdout.contains(&format!("generation 1: net {} {}", net.net_id, net.state)), "{stdout}");
    let stages = stdout.lines().find(|line| line.starts_with("generation 1: self-play ")).expect("stage times");
    assert!(stages.contains(", training ") && stages.contains("; the fleet idle "), "{stages}");
    let listed = Command::new(binary("xq"))
        .args(["--coordinator", &format!("http://{address}"), "--token", &token(&dir.0), "nets"])
        .output()
        .await
        .unwrap();
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert!(listed.contains(&format!("net {} tiny generation 1 [{}", net.net_id, net.state)), "{listed}");
    let file = std::fs::read(out.join("generation1/net.xqnn")).unwrap();
    assert_eq!(net.artifact.unwrap().size, file.len() as u64, "the uploaded net is the generation's");
    xq_engine::xiangqi::nnue::Network::from_bytes(&file).expect("the engine reads the generation's net");

    // Generation 2, killed once its self-play job exists, then started again.
    let mut second = loop_command(address, &dir.0, &out, 2, &[]).spawn().unwrap();
    let started = Instant::now();
    while self_play_jobs(&mut admin, 2).await.is_empty() {
        assert!(started.elapsed() < Duration::from_secs(300), "no self-play job for generation 2");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    second.kill().await.unwrap();
    // The self-play ends while the loop is down, which stays down 12 s more: that time
    // is the training stage's (the fleet had no job of the loop's), not the self-play's.
    let [data2] = self_play_jobs(&mut admin, 2).await.try_into().expect("one self-play job");
    let limit = Duration::from_secs(300);
    let played = wait_for(&mut admin, data2.job_id, limit, "self-play 2", |j| j.state != "running").await;
    assert!(played.ended_ms >= played.created_ms && played.created_ms > 0, "{played:?}");
    tokio::time::sleep(Duration::from_secs(12)).await;
    let resumed = loop_command(address, &dir.0, &out, 2, &[]).output().await.unwrap();
    assert!(resumed.status.success(), "{}", String::from_utf8_lossy(&resumed.stderr));
    let [data2] = self_play_jobs(&mut admin, 2).await.try_into().expect("the resumed loop made no second job");
    let all = nets(&mut admin).await;
    assert_eq!(all.len(), 2, "{all:?}");
    let net2 = &all[0];
    assert_eq!((net2.generation, net2.data_job_id), (2, data2.job_id));
    // Generation 2 plays with, trains from and is tested against the best net so far:
    // net 1 if its test promoted it, else the handcrafted evaluation.
    let promoted = net.state == "promoted";
    assert_eq!(net2.parent_id, if promoted { net.net_id } else { 0 });
    assert_eq!(factorised(net2), Some(true), "from net 1's factorised checkpoint or a fresh net: factorised");
    let played = wait_for(&mut admin, data2.job_id, Duration::from_secs(5), "job 2", |j| j.state == "finished").await;
    assert_eq!(played.summary.ends_with("handcrafted"), !promoted, "{}", played.summary);
    let test2 = admin.get_job(v1::JobId { job_id: net2.test_job_id }).await.unwrap().into_inner();
    assert_eq!(test2.summary.contains("handcrafted"), !promoted, "{}", test2.summary);
    let state: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("loop-state.json")).unwrap()).unwrap();
    assert_eq!(state["generation"], 3, "{state}");
    // The generation killed in its self-play still reports its stages (read from its
    // jobs), its self-play as long as the job lasted and the loop's downtime in its
    // training.
    let stdout = String::from_utf8_lossy(&resumed.stdout);
    let stages = stdout.lines().find(|line| line.starts_with("generation 2: self-play ")).expect("stage times");
    let minutes = |stage: &str| -> f64 {
        let after = stages.split(&format!("{stage} ")).nth(1).unwrap_or_else(|| panic!("{stage} in {stages}"));
        after.split(" min").next().unwrap().parse().unwrap_or_else(|_| panic!("{stage}'s minutes in {stages}"))
    };
    let job_minutes = (played.ended_ms - played.created_ms) as f64 / 60_000.0;
    assert!((minutes("self-play") - job_minutes).abs() <= 0.06, "{stages}: the job lasted {job_minutes:.3} min");
    assert!(minutes("training") >= 0.2, "{stages}: 12 s down after the self-play count as training");
}

/// A coordinator restarted while the loop waits for its self-play (#59: the loop used
/// to exit at the first call that found no coordinator): the loop waits, says so, and
/// finishes its generation once the coordinator is back on its address.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_loop_waits_out_a_coordinator_restart() {
    let dir = TempDir::new("loop-restart");
    let (coordinator, address) = start_coordinator(&dir.0, 0, 10).await;
    let mut admin = client(address, &token(&dir.0)).await;
    let _worker = start_worker(&mut admin, address, dir.0.join("w"), "w").await;
    let out = dir.0.join("loop");
    let running = loop_command(address, &dir.0, &out, 1, &[]).spawn().unwrap();
    let started = Instant::now();
    while self_play_jobs(&mut admin, 1).await.is_empty() {
        assert!(started.elapsed() < Duration::from_secs(300), "no self-play job");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop(coordinator);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (_coordinator, again) = start_coordinator(&dir.0, address.port(), 10).await;
    assert_eq!(again, address);
    let finished = running.wait_with_output().await.unwrap();
    let stderr = String::from_utf8_lossy(&finished.stderr);
    assert!(finished.status.success(), "{stderr}");
    assert!(stderr.contains("the coordinator does not answer") && stderr.contains("answers again"), "{stderr}");
    let mut admin = client(address, &token(&dir.0)).await;
    let [net] = nets(&mut admin).await.try_into().expect("one net");
    assert!(matches!(net.state.as_str(), "promoted" | "rejected"), "the generation ended: {net:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lineage_seeded_with_the_embedded_net_plays_trains_from_and_tests_against_it() {
    let dir = TempDir::new("loop-seeded");
    let (_coordinator, address) = start_coordinator(&dir.0, 0, 10).await;
    let mut admin = client(address, &token(&dir.0)).await;
    let _worker = start_worker(&mut admin, address, dir.0.join("w"), "w").await;
    let out = dir.0.join("loop");

    // A net the test promotes plays a fixed-length confirmation from the openings after
    // the test's; the tiny test's outcome is chance, so both paths are checked.
    let args = ["--seed-net", "embedded", "--confirm-pairs", "2"];
    let run = loop_command(address, &dir.0, &out, 1, &args).output().await.unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    let [net, seed] = nets(&mut admin).await.try_into().expect("the seed and one net");
    assert_eq!((seed.generation, seed.state.as_str(), seed.parent_id), (0, "seed", 0), "{seed:?}");
    let embedded = xq_engine::xiangqi::nnue::embedded::embedded();
    assert_eq!(seed.description, embedded.description());
    assert_eq!(std::fs::read(out.join("seed.xqnn")).unwrap(), embedded.to_bytes());
    assert_eq!((net.generation, net.parent_id), (1, seed.net_id), "{net:?}");
    assert_eq!(factorised(&net), None, "trained from the seed's net, which has no factor, without one");
    // A seeded generation trains with the recipe of the generations shipped: the rate
    // 5e-4 over every epoch (a run of 2026-12-07 stopped by patience at its third epoch
    // gained nothing measurable).
    let description: serde_json::Value = serde_json::from_str(&net.description).unwrap();
    assert_eq!(description["settings"]["rate"]["rate"], 5e-4, "{description}");
    assert_eq!(description["settings"]["patience"], serde_json::Value::Null, "{description}");
    // It played the seed, trained from it, and was tested against it.
    let [data] = self_play_jobs(&mut admin, 1).await.try_into().expect("one self-play job");
    assert!(data.summary.contains("net tiny-seed.xqnn"), "{}", data.summary);
    assert!(stderr.contains(&format!("from {}", out.join("seed.xqnn").display())), "{stderr}");
    let test = admin.get_job(v1::JobId { job_id: net.test_job_id }).await.unwrap().into_inner();
    assert!(test.summary.contains("gen0"), "{}", test.summary);
    let jobs = admin.list_jobs(v1::ListJobsRequest::default()).await.unwrap().into_inner().jobs;
    let confirmations: Vec<_> = jobs.iter().filter(|j| j.description.ends_with("fixed-length confirmation")).collect();
    let stdout = String::from_utf8_lossy(&run.stdout);
    if net.state == "promoted" {
        let [confirmation] = confirmations[..] else { panic!("one confirmation: {jobs:?}") };
        assert_eq!((confirmation.kind.as_str(), confirmation.units_done), ("games", 2), "{confirmation:?}");
        assert!(stdout.contains("confirmation") && stdout.contains("Elo"), "{stdout}");
    } else {
        assert!(confirmations.is_empty(), "a rejected net is not confirmed: {jobs:?}");
    }

    // Run again, the loop is done; with another seed it is refused, naming the clash.
    let again = loop_command(address, &dir.0, &out, 1, &["--seed-net", "embedded"]).output().await.unwrap();
    assert!(again.status.success(), "{}", String::from_utf8_lossy(&again.stderr));
    let other = dir.0.join("other.xqnn");
    xq_engine::xiangqi::nnue::Network::random(3).save(&other).unwrap();
    let clash =
        loop_command(address, &dir.0, &out, 2, &["--seed-net", other.to_str().unwrap()]).output().await.unwrap();
    assert!(!clash.status.success());
    let stderr = String::from_utf8_lossy(&clash.stderr);
    assert!(stderr.contains("already has generation 0"), "{stderr}");
}
