//! New names survive a crash (issue #34). Syncing a file keeps its bytes, not its name:
//! a file created or renamed into place, or a folder made, is only safe once its parent
//! directory is synced too. The real coordinator runs under strace on a fresh data
//! directory and is driven through every path that makes names (its start: the
//! directory, the database, the artifact store and the client token; an upload; a
//! test's games; a self-play chunk); the trace must show, for every file and folder
//! left in the data directory, a sync of its parent after it was made and before the
//! request that made it was answered.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use xq_proto::v1;

use crate::cluster::token;
use crate::common::*;

/// A coordinator run under strace, killed if the test fails before it stops.
struct Traced {
    strace: Child,
    /// Until it has stopped.
    coordinator: Option<rustix::process::Pid>,
}

impl Traced {
    /// Starts `xq-coordinator serve` on `data` under strace, which writes the calls
    /// that make and sync names to `trace`: each with its thread, its start (seconds
    /// since the epoch), the paths of its descriptors (`-y`) and its length (`-T`).
    async fn start(data: &Path, trace: &Path) -> (Traced, std::net::SocketAddr) {
        let mut strace = Command::new("strace")
            .args(["-f", "-qq", "-y", "-ttt", "-T", "-o"])
            .arg(trace)
            .args(["-e", "trace=openat,mkdir,mkdirat,rename,renameat,renameat2,fsync,fdatasync"])
            .arg(binary("xq-coordinator"))
            .args(["serve", "--reference-nps", "0", "--work-seconds", "72000", "--listen", "127.0.0.1:0", "--data"])
            .arg(data)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(strace.stdout.take().unwrap()).lines();
        let line = tokio::time::timeout(Duration::from_secs(60), lines.next_line()).await.unwrap().unwrap().unwrap();
        let address = line.strip_prefix("listening on http://").unwrap().parse().unwrap();
        let strace_id = strace.id().unwrap();
        let children = std::fs::read_to_string(format!("/proc/{strace_id}/task/{strace_id}/children")).unwrap();
        let coordinator = children.split_whitespace().next().and_then(|pid| pid.parse().ok()).unwrap();
        (Traced { strace, coordinator: rustix::process::Pid::from_raw(coordinator) }, address)
    }

    /// Stops the coordinator as ctrl-c does, and strace with it.
    async fn stop(mut self) {
        rustix::process::kill_process(self.coordinator.unwrap(), rustix::process::Signal::INT).unwrap();
        tokio::time::timeout(Duration::from_secs(30), self.strace.wait()).await.unwrap().unwrap();
        self.coordinator = None;
    }
}

impl Drop for Traced {
    fn drop(&mut self) {
        // Killing strace alone would let the coordinator run on, untraced.
        if let Some(coordinator) = self.coordinator {
            let _ = rustix::process::kill_process(coordinator, rustix::process::Signal::KILL);
        }
    }
}

/// One system call of the trace: when it started and ended, and its text
/// (`name(arguments) = result`).
struct Call {
    start: f64,
    end: f64,
    text: String,
}

/// The calls of a trace, a call interrupted by another thread's (`<unfinished ...>`,
/// then `<... name resumed>`) joined into one.
fn calls(trace: &str) -> Vec<Call> {
    let mut unfinished: HashMap<&str, (f64, &str)> = HashMap::new();
    let mut calls = Vec::new();
    for line in trace.lines() {
        // The thread (padded to five places), the start, the call.
        let Some((thread, rest)) = line.split_once(' ') else { continue };
        let Some((Ok(at), rest)) = rest.trim_start().split_once(' ').map(|(at, rest)| (at.parse::<f64>(), rest)) else {
            continue;
        };
        if let Some(head) = rest.strip_suffix(" <unfinished ...>") {
            unfinished.insert(thread, (at, head));
            continue;
        }
        let (start, text) = match rest.split_once(" resumed>") {
            Some((_, tail)) if rest.starts_with("<... ") => {
                let (start, head) = unfinished.remove(thread).expect("a resumed call was started");
                (start, format!("{head}{tail}"))
            }
            _ => (at, rest.to_owned()),
        };
        // Signals and exits are not calls.
        let Some((text, length)) = text.rsplit_once(" <").filter(|(text, _)| text.contains('(')) else { continue };
        // A call cut short by its thread's end has no length (`= ? <unavailable>`): it
        // never returned, so nothing it did was acknowledged.
        let Ok(length) = length.trim_end_matches('>').parse::<f64>() else { continue };
        calls.push(Call { start, end: start + length, text: text.to_owned() });
    }
    calls
}

/// What a call did to names.
enum Effect {
    /// Opened a file to be created: the first such open of a name in a fresh data
    /// directory creates it, later ones find it.
    Created(PathBuf),
    /// Made a folder, or gave a file a name by renaming it.
    Named(PathBuf),
    /// Synced a file or directory.
    Synced(PathBuf),
}

/// The quoted strings of a call's arguments (strace escapes a quote in a name; the
/// coordinator's names hold none).
fn quoted(text: &str) -> Vec<&str> {
    text.split('"').skip(1).step_by(2).collect()
}

/// The path of a descriptor as `-y` shows it: `3</data/artifacts>`.
fn descriptor_path(text: &str) -> Option<PathBuf> {
    Some(PathBuf::from(text.split_once('<')?.1.split_once('>')?.0))
}

fn effect(call: &Call) -> Option<Effect> {
    let (name, rest) = call.text.split_once('(')?;
    let (arguments, result) = rest.rsplit_once(" = ")?;
    if result.starts_with('-') {
        return None;
    }
    match name {
        "fsync" | "fdatasync" => Some(Effect::Synced(descriptor_path(arguments)?)),
        "mkdir" | "mkdirat" => Some(Effect::Named(PathBuf::from(*quoted(arguments).first()?))),
        "rename" | "renameat" | "renameat2" => Some(Effect::Named(PathBuf::from(*quoted(arguments).get(1)?))),
        "openat" if arguments.contains("O_CREAT") => Some(Effect::Created(descriptor_path(result)?)),
        _ => None,
    }
}

/// Every file and folder under `dir`, and `dir` itself.
fn tree(dir: &Path) -> Vec<PathBuf> {
    let mut paths = vec![dir.to_owned()];
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            paths.extend(tree(&path));
        } else {
            paths.push(path);
        }
    }
    paths
}

fn now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs_f64()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_new_file_and_folder_is_synced_into_its_directory_before_it_is_acknowledged() {
    let dir = TempDir::new("durability");
    let data = dir.0.join("data");
    let trace = dir.0.join("trace");
    let (traced, address) = Traced::start(&data, &trace).await;
    // When each answer came: what a request made must be synced by then.
    let mut answers = vec![("the start", now())];
    let mut admin = client(address, &token(&data)).await;
    let book = std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("../books/xiangqi-2ply.epd")).unwrap();
    upload(&mut admin, "xiangqi-2ply.epd", "book", &book).await.unwrap();
    answers.push(("a book's upload", now()));
    let request = test_request(&mut admin, 1, None).await;
    answers.push(("an engine's upload", now()));
    admin.create_test(request).await.unwrap();
    let (mut worker, _) = registered_worker_at(address, &token(&data), "w", &[], 4).await;
    answers.push(("a worker's registration", now()));
    let lease = worker.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
    let report = v1::ReportPairsRequest {
        lease_id: lease.lease_id,
        pairs: vec![pair(lease.units[0], [2, 1])],
        cumulative: Some(totals(&[[2, 1]])),
        ..Default::default()
    };
    worker.report_pairs(report).await.unwrap();
    answers.push(("a test's first pair", now()));
    let spec = v1::SelfPlaySpec { nodes: 1000, games_per_unit: 2, ..Default::default() };
    let request = v1::CreateSelfPlayRequest { spec: Some(spec.clone()), units: 1, ..Default::default() };
    admin.create_self_play(request).await.unwrap();
    let lease = worker.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
    answers.push(("a self-play lease", now()));
    let chunk = crate::security::unit_chunk(&spec, lease.units[0], 20);
    let upload = v1::UploadChunkRequest { lease_id: lease.lease_id, unit: lease.units[0], chunk, games: 2 };
    worker.upload_chunk(upload).await.unwrap();
    answers.push(("a self-play chunk", now()));
    traced.stop().await;

    let trace = std::fs::read_to_string(&trace).unwrap();
    let effects: Vec<(Call, Effect)> = calls(&trace)
        .into_iter()
        .filter_map(|call| {
            let effect = effect(&call)?;
            Some((call, effect))
        })
        .collect();
    let mut unsynced = Vec::new();
    // SQLite syncs its own journal and WAL, and their directory when it makes them;
    // the database file itself is checked like any other.
    let sqlite_own = |path: &Path| ["-wal", "-shm", "-journal"].iter().any(|s| path.to_string_lossy().ends_with(s));
    for path in tree(&data).into_iter().filter(|path| !sqlite_own(path)) {
        let shown = path.strip_prefix(&dir.0).unwrap().display().to_string();
        // Its last naming, else its first creation.
        let named = effects.iter().rev().find(|(_, effect)| matches!(effect, Effect::Named(named) if *named == path));
        let created =
            || effects.iter().find(|(_, effect)| matches!(effect, Effect::Created(created) if *created == path));
        let made = named.or_else(created).map(|(call, _)| call);
        let Some(made) = made else {
            unsynced.push(format!("{shown}: not made in the trace"));
            continue;
        };
        let Some(&(request, answered)) = answers.iter().find(|(_, at)| *at > made.end) else {
            unsynced.push(format!("{shown}: made after the last answer"));
            continue;
        };
        let parent = path.parent().unwrap();
        let synced = effects.iter().any(|(call, effect)| {
            matches!(effect, Effect::Synced(synced) if synced == parent)
                && call.start > made.start
                && call.end < answered
        });
        if !synced {
            unsynced.push(format!(
                "{shown}: its directory is not synced after it was made and before {request} was answered"
            ));
        }
    }
    assert!(unsynced.is_empty(), "names a crash may lose:\n{}", unsynced.join("\n"));
}
