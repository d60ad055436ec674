//! An author's day (issue #55), played as one script with real processes: the `sh`
//! blocks of docs/matches.md's and docs/fleet.md's "An author's day", run as written by
//! bash in the author's directory against one coordinator and three `xq-worker`
//! processes. Foreign engines are tried at home (Fairy-Stockfish and Sjaak II, talked to
//! their own ways, and `fox`, which takes nets of its own format through its own option
//! and refuses to search without one); the change runs at the short preset with fox's
//! two CPU builds, one for a flag no worker has, and a webhook; Fairy-Stockfish meets
//! Sjaak II; CI's test of the change over HTTP (nets, names, commit, a preset) meets a
//! master build that dies on every worker, is reported by all three and stops as failed
//! with no worker quarantined; and the change is cloned at the long preset once the
//! author's files are deleted. Each step is checked by what it did.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::cluster::{job_games, job_of, start_coordinator, start_worker_with, token, wait_for};
use crate::common::{Client, TempDir, binary, client, executable};
use serde_json::Value;
use xq_engine::xiangqi::nnue::Network;
use xq_proto::v1;

/// What the webhook receiver was sent: each request's first line and body.
type Deliveries = Arc<Mutex<Vec<(String, String)>>>;

/// The author's shell: bash in the author's directory, with our binaries on its path and
/// the coordinator, a submitter's token and the webhook in the variables the docs name.
struct Shell {
    dir: PathBuf,
    env: Vec<(&'static str, String)>,
}

impl Shell {
    /// Runs the `sh` block of `page` (under docs/) that starts with the comment
    /// `# An author's day, STEP:`, as written; its output, which must be a success.
    async fn run(&self, page: &str, step: &str) -> String {
        let script = day_block(page, step);
        let output = tokio::process::Command::new("bash")
            .args(["-euo", "pipefail", "-c", &script])
            .current_dir(&self.dir)
            .envs(self.env.iter().map(|(name, value)| (*name, value.as_str())))
            .output()
            .await
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{page}, step {step}:\n{script}\n{stdout}{stderr}");
        stdout
    }
}

/// The `sh` block of docs/`page` that starts with `# An author's day, STEP:`.
fn day_block(page: &str, step: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs").join(page);
    let text = std::fs::read_to_string(path).unwrap();
    let opening = "```sh\n";
    let heading = format!("{opening}# An author's day, {step}:");
    let start = text.find(&heading).unwrap_or_else(|| panic!("{page} lost the author's day's step {step}"));
    let start = start + opening.len();
    let end = start + text[start..].find("```").unwrap();
    text[start..end].to_owned()
}

/// The author's files, named as the docs name them: `fox` (another family's engine: our
/// engine behind its own net format and option `NetPath`) and `fox-future`, its build
/// for a flag no processor has, which would die if started; the nets of master and of
/// the change in fox's format; and `fox-master-native`, CI's master build, which dies at
/// its first `go` as a build for another processor does.
fn author_files(dir: &Path) {
    std::fs::rename(crate::foreign_nets::foreign_engine(dir), dir.join("fox")).unwrap();
    executable(dir, "fox-future", "#!/bin/sh\necho 'fox-future: illegal instruction' >&2\nexit 132\n");
    std::fs::rename(crate::failures::dying_engine(dir), dir.join("fox-master-native")).unwrap();
    let [master, kings] = nets();
    for (name, network) in [("fox-master.net", master), ("fox-kings.net", kings)] {
        std::fs::write(dir.join(name), [crate::foreign_nets::HEADER, &network.to_bytes()].concat()).unwrap();
    }
}

/// Master's net and the change's: our engine's trained net, and that net with its output
/// biased a little further. Trained nets, not random ones: a random net's searches are
/// three times the size, and every bench and game of the day pays for it.
fn nets() -> [Network; 2] {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../engine/nets/default.xqnn.zst");
    let bytes = zstd::decode_all(std::fs::File::open(path).unwrap()).unwrap();
    let master = Network::from_bytes(&bytes).unwrap();
    let mut parameters = master.parameters();
    parameters.output_bias += 8;
    let kings = Network::from_parameters("master's net, its output biased by 8".to_owned(), parameters).unwrap();
    [master, kings]
}

fn sha256_of(path: &Path) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(std::fs::read(path).unwrap()))
}

/// Returns once `count` workers have registered (each benches its engine first).
async fn registered(admin: &mut Client, count: usize) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let workers = admin.list_workers(v1::ListWorkersRequest::default()).await.unwrap().into_inner().workers;
        if workers.iter().filter(|w| w.last_seen_ms > 0).count() == count {
            return;
        }
        assert!(Instant::now() < deadline, "{count} workers did not register: {workers:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The webhook's last body about `job`, once one has come (within 60 s).
async fn delivered(deliveries: &Deliveries, job: u64) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let about: Vec<Value> = deliveries
            .lock()
            .unwrap()
            .iter()
            .map(|(line, body)| {
                assert_eq!(line, "POST /hooks/xq HTTP/1.1");
                serde_json::from_str::<Value>(body).unwrap()
            })
            .filter(|body| body["job"]["job_id"].as_u64() == Some(job))
            .collect();
        if let Some(last) = about.last() {
            assert_eq!(last["event"], "test.ended", "{last}");
            return last.clone();
        }
        assert!(Instant::now() < deadline, "no webhook for job {job}: {:?}", deliveries.lock().unwrap());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The games the PGN of `job` holds, by pairing of names (Red first).
async fn pairings(admin: &mut Client, job: u64) -> HashMap<(String, String), usize> {
    let mut count = HashMap::new();
    for game in job_games(admin, job).await {
        let (red, black) = (game.tag("White").unwrap().to_owned(), game.tag("Black").unwrap().to_owned());
        *count.entry((red, black)).or_default() += 1;
    }
    count
}

fn pairing(red: &str, black: &str, games: usize) -> ((String, String), usize) {
    ((red.to_owned(), black.to_owned()), games)
}

fn total_games(job: &v1::Job) -> u64 {
    let totals = job.totals.clone().unwrap_or_default();
    totals.wins + totals.draws + totals.losses
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_author_s_day_goes_as_the_docs_tell_it() {
    let started = Instant::now();
    let dir = TempDir::new("authors-day");
    let author = dir.0.join("author");
    std::fs::create_dir_all(&author).unwrap();
    author_files(&author);
    let (fox, fox_future) = (sha256_of(&author.join("fox")), sha256_of(&author.join("fox-future")));
    // Leases long enough that a loaded machine's heartbeats keep every one: any that
    // expires is a fault of the day, not of the machine.
    let (_coordinator, address) = start_coordinator(&dir.0, 0, 30).await;
    let mut admin = client(address, &token(&dir.0)).await;
    let request =
        v1::CreateTokenRequest { role: "submitter".to_owned(), name: "author".to_owned(), expires_seconds: 0 };
    let submitter = admin.create_token(request).await.unwrap().into_inner().token;
    let (hook, deliveries) = crate::ci::receiver().await;
    let path = format!("{}:{}", binary("xq").parent().unwrap().display(), std::env::var("PATH").unwrap_or_default());
    let shell = Shell {
        dir: author.clone(),
        env: vec![
            ("PATH", path),
            ("XQ_COORDINATOR", format!("http://{address}")),
            ("XQ_TOKEN", submitter),
            ("HOOK", hook),
        ],
    };

    // At home: each match plays its two games to the end.
    let home = shell.run("matches.md", "0").await;
    for names in ["fairy-stockfish vs sjaakii: games 2,", "fox-kings vs fox-master: games 2,"] {
        assert!(home.contains(names), "{names} in {home}");
    }

    // The fleet: three workers, each registered before the day's first test (fox calls
    // our engine where this build keeps it, which no engine sandbox shows).
    let mut workers = Vec::new();
    for name in ["w0", "w1", "w2"] {
        workers.push(start_worker_with(&mut admin, address, dir.0.join(name), name, &["--no-sandbox"]).await);
    }
    registered(&mut admin, 3).await;

    // Morning: the change at the short preset, Fairy-Stockfish against Sjaak II.
    let morning = shell.run("fleet.md", "1").await;
    let created: Vec<u64> = morning.lines().map(job_of).collect();
    assert_eq!(created, [1, 2], "{morning}");
    // CI's test over HTTP answers the job's view.
    let answer: Value = serde_json::from_str(&shell.run("fleet.md", "2").await).unwrap();
    assert_eq!(answer["job_id"], 3, "{answer}");

    // The change: the preset's bounds with the author's depth, played to its end with
    // fox's net set on every worker (fox searches with no other), its bench checked.
    let limit = Duration::from_secs(300);
    let change = wait_for(&mut admin, 1, limit, "the change's test to end", |j| j.state != "running").await;
    assert_eq!((change.kind.as_str(), change.state.as_str(), change.units_done), ("sprt", "finished", 2), "{change:?}");
    assert_eq!(change.sprt_spec.as_ref().map(|s| (s.elo0, s.elo1)), Some((0.0, 2.0)), "the preset's bounds");
    assert_eq!(change.time_control, "depth=2");
    assert!(
        change.summary.starts_with("fox-kings (net fox-kings.net) vs fox-master (net fox-master.net), depth=2"),
        "{}",
        change.summary
    );
    assert_eq!((total_games(&change), change.refused_reports), (4, 0), "{change:?}");
    assert!(change.failures.is_empty(), "the future build was started, or fox had no net: {:?}", change.failures);
    let played = pairings(&mut admin, 1).await;
    assert_eq!(played, HashMap::from([pairing("fox-kings", "fox-master", 2), pairing("fox-master", "fox-kings", 2)]));
    // The webhook has the result.
    let posted = delivered(&deliveries, 1).await;
    let job = &posted["job"];
    assert_eq!((job["state"].as_str(), job["units_done"].as_u64()), (Some("finished"), Some(2)), "{posted}");
    assert_eq!(
        (job["new_engine"].as_str(), job["source"]["new_commit"].as_str()),
        (Some("fox-kings"), Some("9f1c2ab"))
    );
    let wdl = ["wins", "draws", "losses"].map(|count| job["totals"][count].as_u64().unwrap_or(0));
    assert_eq!(wdl.iter().sum::<u64>(), 4, "{posted}");

    // Fairy-Stockfish against Sjaak II: both games, each engine's moves read its way.
    let foreign = wait_for(&mut admin, 2, limit, "Fairy-Stockfish against Sjaak II", |j| j.state != "running").await;
    assert_eq!((foreign.state.as_str(), foreign.units_done, total_games(&foreign)), ("finished", 1, 2), "{foreign:?}");
    assert!(foreign.failures.is_empty(), "{:?}", foreign.failures);
    assert!(foreign.reasons.keys().all(|reason| !reason.contains("illegal")), "{:?}", foreign.reasons);
    let played = pairings(&mut admin, 2).await;
    assert_eq!(
        played,
        HashMap::from([pairing("fairy-stockfish", "sjaakii", 1), pairing("sjaakii", "fairy-stockfish", 1)])
    );

    // CI's test: what the request named, the preset's time control and bounds; stopped
    // as failed once all three workers reported master's build, whose pairs never count.
    let ci = wait_for(&mut admin, 3, limit, "CI's test to stop", |j| j.state != "running").await;
    assert_eq!((ci.state.as_str(), ci.units_done), ("stopped", 0), "{ci:?}");
    let failed = "failed: 3 workers reported a crash failure of engine fox-master";
    assert!(ci.outcome.starts_with(failed), "{}", ci.outcome);
    assert_eq!(
        (ci.time_control.as_str(), ci.sprt_spec.as_ref().map(|s| (s.elo0, s.elo1))),
        ("10+0.1", Some((0.0, 2.0)))
    );
    assert!(
        ci.summary.starts_with("fox-kings (net fox-kings.net) vs fox-master (net fox-master.net)"),
        "{}",
        ci.summary
    );
    assert_eq!(ci.source.as_ref().map(|s| s.new_commit.as_str()), Some("9f1c2ab"));
    let mut reporters: Vec<&str> = ci.failures.iter().map(|f| f.worker_name.as_str()).collect();
    reporters.sort();
    assert_eq!(reporters, ["w0", "w1", "w2"]);
    for failure in &ci.failures {
        assert_eq!((failure.kind.as_str(), failure.engine.as_str()), ("crash", "fox-master"), "{failure:?}");
        assert!(failure.detail.contains("illegal instruction (simulated)"), "its last words: {}", failure.detail);
    }
    let posted = delivered(&deliveries, 3).await;
    assert_eq!(posted["job"]["state"], "stopped", "{posted}");
    assert!(posted["job"]["outcome"].as_str().unwrap_or_default().starts_with(failed), "{posted}");

    // Evening: what the author reads of it.
    let shown = shell.run("fleet.md", "3").await;
    assert!(shown.starts_with(&format!("job 3 [stopped, {failed}")), "{shown}");
    assert!(shown.contains("failures reported by 3 workers") && shown.contains("    crash of engine fox-master:\n"));
    for name in ["w0", "w1", "w2"] {
        assert!(shown.contains(&format!("({name}): before its first move")), "{shown}");
    }

    // The change at the long preset (its depth the author's), with nothing left on the
    // author's disk.
    let cloned = shell.run("fleet.md", "4").await;
    assert_eq!(job_of(&cloned), 4, "{cloned}");
    for file in ["fox", "fox-future", "fox-master-native", "fox-kings.net", "fox-master.net"] {
        assert!(!author.join(file).exists(), "{file} is still on the author's disk");
    }
    let presets = admin.list_presets(v1::ListPresetsRequest {}).await.unwrap().into_inner().presets;
    let ltc = presets.iter().find(|p| p.name == "ltc").and_then(|p| p.sprt.as_ref()).map(|s| (s.elo0, s.elo1));
    let clone = wait_for(&mut admin, 4, limit, "the clone to end", |j| j.state != "running").await;
    assert_eq!((clone.kind.as_str(), clone.state.as_str(), clone.units_done), ("sprt", "finished", 1), "{clone:?}");
    assert_eq!(clone.sprt_spec.as_ref().map(|s| (s.elo0, s.elo1)), ltc, "the long preset's bounds");
    assert_eq!((clone.time_control.as_str(), total_games(&clone)), ("depth=3", 2));
    assert!(clone.summary.starts_with("fox-kings (net fox-kings.net) vs fox-master (net fox-master.net)"));
    assert!(clone.description.starts_with("clone of 1: "), "{}", clone.description);
    assert!(clone.failures.is_empty(), "{:?}", clone.failures);
    // A clone keeps its test's webhook.
    let posted = delivered(&deliveries, 4).await;
    assert_eq!(posted["job"]["state"], "finished", "{posted}");

    // The fleet at the day's end: the workers that could not run master's build are all
    // active, no lease expired, and no worker ever fetched fox's build it cannot run,
    // while each fetched the one it can (CI's test leased it to all three).
    let listed = admin.list_workers(v1::ListWorkersRequest::default()).await.unwrap().into_inner().workers;
    assert_eq!(listed.len(), 3);
    assert!(listed.iter().all(|w| w.standing == "active"), "{listed:?}");
    let metrics = crate::failures::text_of(&format!("http://{address}/metrics")).await;
    let expired = metrics.lines().find(|l| l.starts_with("xq_leases_expired_total")).unwrap_or_default();
    assert!(expired.ends_with(" 0"), "{expired}");
    let cached = |worker: &str, sha256: &str| dir.0.join(worker).join("artifacts").join(sha256).exists();
    assert!(["w0", "w1", "w2"].iter().all(|w| !cached(w, &fox_future)), "a worker fetched the future build");
    assert!(["w0", "w1", "w2"].iter().all(|w| cached(w, &fox)), "a worker never fetched fox's build");
    for mut worker in workers {
        worker.start_kill().unwrap();
        worker.wait().await.unwrap();
    }
    eprintln!("the author's day took {:.0?}", started.elapsed());
}
