//! Another engine's net through the whole cluster (issue #55): an engine whose nets are
//! files of its own format, taken by an option of its own name, tested with its net
//! from the command line by real processes: the coordinator keeps the net as it is,
//! the submitter's bench and the worker's are taken with the net set over the engine's
//! input, and the worker passes the file's path through the option the test names.

use crate::cluster::{start_coordinator, start_worker_with, token, wait_for, xq_at};
use crate::common::{TempDir, binary, client, executable};
use std::path::Path;
use std::time::Duration;

/// What the foreign engine's nets start with: our net behind it reads as no net of ours.
pub const HEADER: &[u8] = b"FOREIGN-NET-v1\n\0";

/// A foreign engine: our engine behind a `NetPath` option and a net format of its own
/// (our net behind [`HEADER`]), as another author's engine and nets would come. It
/// exits on a net that is not its own, and at a `go` before it was given one, failing
/// the lease: it plays only with the net its test names. It hands our engine the net
/// through a file in `dir`, so that what it leaves is removed with the test's directory.
pub fn foreign_engine(dir: &Path) -> std::path::PathBuf {
    let script = format!(
        r#"#!/usr/bin/env python3
import os, subprocess, sys, tempfile
header = b{header:?}
netted = False
child = subprocess.Popen([{engine:?}] + sys.argv[1:], stdin=subprocess.PIPE, text=True, bufsize=1)
for line in sys.stdin:
    words = line.split()
    if words[:3] == ["setoption", "name", "NetPath"] and len(words) > 4:
        data = open(" ".join(words[4:]), "rb").read()
        if not data.startswith(header):
            sys.exit("NetPath: not a net of this engine")
        handle, plain = tempfile.mkstemp(dir={scratch:?})
        os.write(handle, data[len(header):])
        os.close(handle)
        line = "setoption name EvalFile value " + plain + "\n"
        netted = True
    if words[:1] == ["go"] and not netted:
        sys.exit("go: no net of this engine was set through NetPath")
    child.stdin.write(line)
    child.stdin.flush()
child.stdin.close()
child.wait()
"#,
        header = String::from_utf8_lossy(HEADER).into_owned(),
        engine = binary("xq-engine").display().to_string(),
        scratch = dir.display().to_string(),
    );
    executable(dir, "foreign-engine", &script)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_engine_s_net_is_tested_through_its_own_option_with_its_bench_checked() {
    let dir = TempDir::new("foreign-nets");
    let engine = foreign_engine(&dir.0);
    let network = xq_engine::xiangqi::nnue::Network::random(3).to_bytes();
    let (plain, foreign) = (dir.0.join("plain.nnue"), dir.0.join("foreign.nnue"));
    std::fs::write(&plain, &network).unwrap();
    std::fs::write(&foreign, [HEADER, &network].concat()).unwrap();
    // The signature of that net: our engine's own bench of it, on its command line.
    let output = std::process::Command::new(binary("xq-engine"))
        .args(["bench", "--eval-file", plain.to_str().unwrap()])
        .output()
        .unwrap();
    let expected = xq_engine::bench::parse_signature(&String::from_utf8_lossy(&output.stdout)).unwrap();
    let asked = [("NetPath".to_owned(), foreign.display().to_string())];
    assert_eq!(xq_engine::bench::bench_of(&engine, "uci", &asked).unwrap().signature, expected, "the bench over stdin");

    let (_coordinator, address) = start_coordinator(&dir.0, 0, 10).await;
    let mut admin = client(address, &token(&dir.0)).await;
    let book = Path::new(env!("CARGO_MANIFEST_DIR")).join("../books/xiangqi-2ply.epd");
    #[rustfmt::skip]
    let submitted = xq_at(address, &dir.0, &[
        "games", "--games", "4", "--tc", "depth=2", "--max-plies", "60",
        "--new", engine.to_str().unwrap(), "--new-net", foreign.to_str().unwrap(), "--net-option", "NetPath",
        "--base", binary("xq-engine").to_str().unwrap(), "--book", book.to_str().unwrap(),
    ]);
    let job = crate::cluster::job_of(&submitted);
    // The foreign engine calls our engine from where this build keeps it, which no
    // engine sandbox shows: the worker runs its own engines here.
    let mut worker = start_worker_with(&mut admin, address, dir.0.join("w0"), "w0", &["--no-sandbox"]).await;
    let done = wait_for(&mut admin, job, Duration::from_secs(300), "the test to end", |j| j.state != "running").await;
    worker.start_kill().unwrap();
    worker.wait().await.unwrap();
    // Every pair was played: the worker's bench of the engine with its net matched the
    // submitter's, and the engine read its net through NetPath in every game.
    assert_eq!((done.state.as_str(), done.units_done), ("finished", 2), "{done:?}");
    let totals = done.totals.clone().unwrap_or_default();
    assert_eq!(totals.wins + totals.draws + totals.losses, 4, "{done:?}");
    assert_eq!(done.refused_reports, 0, "{done:?}");
    // Lists, the dashboard's among them, name the engine's net; the net files' list
    // gives its hash, its uploader and the test naming it.
    assert!(done.summary.starts_with("new (net foreign.nnue) vs base, depth=2"), "{}", done.summary);
    let sha256 = {
        use sha2::Digest;
        hex::encode(sha2::Sha256::digest(std::fs::read(&foreign).unwrap()))
    };
    let files = xq_at(address, &dir.0, &["nets", "--files"]);
    let size = std::fs::metadata(&foreign).unwrap().len();
    let line = format!("{sha256} foreign.nnue {size} bytes, uploaded by {}: jobs {job}", done.submitter);
    assert_eq!(files.trim(), line);
}
