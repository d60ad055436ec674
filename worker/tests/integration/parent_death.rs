//! A worker killed outright (SIGKILL, as a CI timeout or the OOM killer does) takes
//! its unconfined engines with it: they once searched on, orphaned.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The parent and start time of a running process (the start time tells it from a
/// later process given the same id); none for a zombie or a process gone.
fn process(pid: u32) -> Option<(u32, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields: Vec<&str> = stat.rsplit_once(") ")?.1.split(' ').collect();
    (fields[0] != "Z").then_some(())?;
    Some((fields[1].parse().ok()?, fields[19].parse().ok()?))
}

/// The running children of `parent`, with their start times.
fn children(parent: u32) -> Vec<(u32, u64)> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
        .filter_map(|pid| process(pid).filter(|(p, _)| *p == parent).map(|(_, started)| (pid, started)))
        .collect()
}

/// The engines are `sleep`, which (like an engine deep in a search) does not notice
/// that its input closed when the worker died: only the parent-death signal ends it.
#[test]
fn a_killed_worker_leaves_no_engine_behind() {
    let words = |name: &str| [format!("name={name}"), "cmd=/bin/sleep".to_owned(), "arg=600".to_owned()];
    let mut worker = Command::new(env!("CARGO_BIN_EXE_xq-worker"))
        .args(["match", "--games", "1000", "--tc", "60+1", "--engine"])
        .args(words("a"))
        .arg("--engine")
        .args(words("b"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let engines = loop {
        let engines = children(worker.id());
        if engines.len() >= 2 {
            break engines;
        }
        if Instant::now() > deadline {
            let _ = worker.kill();
            panic!("no engines after 30 s: {engines:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    worker.kill().unwrap();
    worker.wait().unwrap();
    let running = || engines.iter().filter(|(pid, started)| process(*pid).is_some_and(|(_, s)| s == *started)).count();
    let deadline = Instant::now() + Duration::from_secs(5);
    while running() > 0 {
        assert!(Instant::now() < deadline, "engines left running 5 s after their worker died: {engines:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}
