//! `xq local` as a script or CI job runs it: off a terminal its output is its own lines
//! only, and killed outright it takes every process it started with it.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{TempDir, binary};

/// A process as /proc shows it: its parent, its name, and its start time (which
/// tells it from a later process given the same id).
#[derive(Clone, Debug, PartialEq)]
struct Process {
    parent: u32,
    name: String,
    started: u64,
    zombie: bool,
}

fn process(pid: u32) -> Option<Process> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (name, rest) = stat.split_once(" (")?.1.rsplit_once(") ")?;
    let fields: Vec<&str> = rest.split(' ').collect();
    Some(Process {
        parent: fields[1].parse().ok()?,
        name: name.to_owned(),
        started: fields[19].parse().ok()?,
        zombie: fields[0] == "Z",
    })
}

/// Every living process descended from `root`, by id.
fn descendants(root: u32) -> BTreeMap<u32, Process> {
    let all: BTreeMap<u32, Process> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
        .filter_map(|pid| Some((pid, process(pid)?)))
        .collect();
    let mut found = BTreeMap::new();
    let mut frontier = vec![root];
    while let Some(parent) = frontier.pop() {
        for (pid, p) in all.iter().filter(|(_, p)| p.parent == parent && !p.zombie) {
            found.insert(*pid, p.clone());
            frontier.push(*pid);
        }
    }
    found
}

/// Those of `processes` still running (a zombie is not).
fn survivors(processes: &BTreeMap<u32, Process>) -> Vec<(u32, String)> {
    processes
        .iter()
        .filter(|&(&pid, p)| process(pid).is_some_and(|now| now.started == p.started && !now.zombie))
        .map(|(pid, p)| (*pid, p.name.clone()))
        .collect()
}

#[test]
fn xq_local_off_a_terminal_prints_only_its_own_lines() {
    let dir = TempDir::new("local-output");
    let book = concat!(env!("CARGO_MANIFEST_DIR"), "/../books/xiangqi-2ply.epd");
    let data = dir.0.join("data");
    let started = Instant::now();
    let output = Command::new(binary("xq"))
        .args(["local", "--tc", "depth=3", "--base-option", "Depth Limit=1", "--elo1", "30", "--book", book])
        .arg("--data")
        .arg(&data)
        .output()
        .unwrap();
    let elapsed = started.elapsed();
    let (stdout, stderr) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("LLR ") && stdout.lines().any(|l| l.starts_with("games ")), "{stdout}");
    for text in [&stdout, &stderr] {
        assert!(!text.contains('\x1b'), "a colour code off a terminal: {text:?}");
        // The coordinator's tracing lines ("2026-...Z  INFO xq_coordinator::...") and the
        // workers' own ("xq-worker: ...") belong in their logs.
        for foreign in [" INFO ", " WARN ", " ERROR ", "xq_coordinator::", "xq-worker:"] {
            assert!(!text.contains(foreign), "{foreign:?} in xq local's output: {text}");
        }
    }
    assert!(stderr.contains(&data.display().to_string()), "the data directory is named: {stderr}");
    for log in ["coordinator.log", "worker-1.log", "worker-2.log"] {
        let text = std::fs::read_to_string(data.join(log)).unwrap_or_else(|e| panic!("{log}: {e}"));
        assert!(!text.is_empty() && !text.contains('\x1b'), "{log}: {text:?}");
    }
    let coordinator_log = std::fs::read_to_string(data.join("coordinator.log")).unwrap();
    assert!(coordinator_log.contains("INFO"), "{coordinator_log}");
    // A status line at most every 10 s, and the last one.
    let status_lines = stderr.lines().filter(|l| l.starts_with("job ") && l.contains(" units, ")).count();
    let bound = elapsed.as_secs() / 10 + 2;
    assert!((1..=bound as usize).contains(&status_lines), "{status_lines} status lines in {elapsed:?}: {stderr}");
}

/// A child killed when the test ends, passed or not.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A CI timeout kills `xq local` with SIGKILL: its coordinator, workers and their
/// engines once played on for 20 minutes, orphaned.
#[test]
fn a_killed_xq_local_leaves_no_process_behind() {
    let dir = TempDir::new("local-killed");
    let book = concat!(env!("CARGO_MANIFEST_DIR"), "/../books/xiangqi-2ply.epd");
    let mut xq = Killed(
        Command::new(binary("xq"))
            .args(["local", "--tc", "10+0.1", "--book", book])
            .arg("--data")
            .arg(dir.0.join("data"))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let xq = &mut xq.0;
    // The job is submitted once the workers are started.
    let mut stderr = BufReader::new(xq.stderr.take().unwrap());
    let mut said = String::new();
    while !said.lines().any(|l| l.starts_with("job ")) {
        assert!(stderr.read_line(&mut said).unwrap() > 0, "xq local ended before its job: {said}");
    }
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    let deadline = Instant::now() + Duration::from_secs(120);
    let children = loop {
        let children = descendants(xq.id());
        let count = |name: &str| children.values().filter(|p| p.name == name).count();
        // Engines are named by the hash of the uploaded binary, and run in bubblewrap.
        let engines =
            children.values().filter(|p| !["xq-coordinator", "xq-worker", "bwrap"].contains(&p.name.as_str()));
        if count("xq-coordinator") == 1 && count("xq-worker") == 2 && engines.count() >= 2 {
            break children;
        }
        assert!(Instant::now() < deadline, "no engines playing after 120 s: {children:?}");
        std::thread::sleep(Duration::from_millis(200));
    };
    xq.kill().unwrap();
    xq.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while !survivors(&children).is_empty() {
        assert!(Instant::now() < deadline, "left running 5 s after xq local died: {:?}", survivors(&children));
        std::thread::sleep(Duration::from_millis(100));
    }
}
