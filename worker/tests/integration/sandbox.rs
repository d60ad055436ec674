//! The engine sandbox against a hostile engine: each attack fails inside the sandbox
//! and, as the control that shows the attack is real, succeeds outside it. The files
//! live under cargo's test directory (as a worker's cache does), not under `/tmp`,
//! which the sandbox replaces with its own.

use std::io::Read;
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use xq_worker::engine_process::EngineProcess;
use xq_worker::sandbox::{Sandbox, command_for};

use crate::our_engine;

/// A directory of its own for each test.
fn test_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("sandbox-{name}-{}", std::process::id()));
    std::fs::remove_dir_all(&dir).ok();
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Writes an executable script: bash unless `body` names its interpreter.
fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    let shebang = if body.starts_with("#!") { "" } else { "#!/bin/bash\n" };
    std::fs::write(&path, format!("{shebang}{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// Runs the script with `args`, confined or not, with a worker token in its
/// environment as the worker's own would be; its standard output and error.
fn run(sandbox: Option<&Sandbox>, program: &Path, args: &[String]) -> String {
    let mut command = command_for(sandbox, program, args).unwrap();
    command.env("XQ_WORKER_TOKEN", "worker-secret");
    let output = command.output().unwrap();
    String::from_utf8_lossy(&output.stdout).into_owned() + &String::from_utf8_lossy(&output.stderr)
}

#[test]
fn an_engine_in_the_sandbox_cannot_reach_the_network_the_worker_or_other_binaries() {
    let dir = test_dir("attacks");
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let token_file = dir.join("worker-token");
    std::fs::write(&token_file, "file-secret").unwrap();
    let other_engine = script(&dir, "other-engine", "echo I am another test's engine");
    let attacker = script(
        &dir,
        "attacker",
        r#"(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && echo "socket: connected"
echo "environment: $XQ_WORKER_TOKEN"
echo "token file: $(cat "$2" 2>/dev/null)"
echo swapped > "$3" 2>/dev/null && echo "other binary: overwritten"
echo escaped > "$(dirname "$2")/escaped" 2>/dev/null && echo "outside: written"
echo "appended" >> "$0" 2>/dev/null && echo "own binary: modified"
echo scratch > /tmp/scratch && echo "scratch: $(cat /tmp/scratch)""#,
    );
    let args: Vec<String> =
        [port.to_string(), token_file.display().to_string(), other_engine.display().to_string()].into();

    let confined = run(Some(&Sandbox::default()), &attacker, &args);
    for leak in ["connected", "worker-secret", "file-secret", "overwritten", "written", "modified"] {
        assert!(!confined.contains(leak), "the sandbox let '{leak}' through:\n{confined}");
    }
    assert!(confined.contains("scratch: scratch"), "its private /tmp is writable:\n{confined}");
    assert_eq!(std::fs::read_to_string(&other_engine).unwrap(), "#!/bin/bash\necho I am another test's engine\n");
    assert!(!dir.join("escaped").exists());

    // The control: unconfined, every attack works.
    let free = run(None, &attacker, &args);
    for leak in ["socket: connected", "worker-secret", "file-secret", "overwritten", "outside: written", "modified"] {
        assert!(free.contains(leak), "the attack '{leak}' is not real:\n{free}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// An engine that writes `/dev` (F7 of the 2026-11-28 review: bubblewrap's `/dev` is
/// a writable tmpfs outside every limit), makes a user namespace (where it is root
/// again), sets up io_uring (a call the filter refuses as one of the kernel's least
/// confined), or reads the machine's name. Now `/dev` is read-only but for a 16 MB
/// `/dev/shm`, the seccomp filter refuses the namespace and io_uring, and the host is
/// `sandbox`. Played on both paths: as this (root) process runs workers, its engines
/// users of their own, and as a worker run by an ordinary user (`nobody`), whose
/// engines live in a user namespace; the control is bubblewrap as it was called.
#[test]
fn an_engine_cannot_fill_dev_make_a_user_namespace_or_read_the_host_s_name() {
    // Readable by `nobody`: cargo's test directory is under root's home.
    let dir = Path::new("/var/tmp").join(format!("xq-sandbox-dev-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let attacker = script(
        &dir,
        "attacker",
        r#"echo x > /dev/fill 2>/dev/null && echo "dev: written"
head -c 33554432 /dev/zero > /dev/shm/fill 2>/dev/null
echo "shm: $(stat -c %s /dev/shm/fill 2>/dev/null)"
unshare -U -r true 2>/dev/null && echo "userns: made"
python3 -c "
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall(425, 0, None)  # io_uring_setup, one number on every architecture
print('io_uring:', os.strerror(ctypes.get_errno()))"
echo "host: $(cat /proc/sys/kernel/hostname)""#,
    );
    // The sandbox's own command (its filters' descriptors with it), run as `nobody`.
    let nobody = |mut command: std::process::Command| {
        let output = command.uid(65534).gid(65534).output().unwrap();
        String::from_utf8_lossy(&output.stdout).into_owned() + &String::from_utf8_lossy(&output.stderr)
    };
    let root = run(Some(&Sandbox { worker_is_root: true, ..Sandbox::default() }), &attacker, &[]);
    let user = nobody(Sandbox { worker_is_root: false, ..Sandbox::default() }.command(&attacker, &[]).unwrap());
    for (path, confined) in [("root", &root), ("user", &user)] {
        assert!(!confined.contains("dev: written"), "{path}: /dev written:\n{confined}");
        let shm: u64 = confined.lines().find_map(|l| l.strip_prefix("shm: ")).unwrap().trim().parse().unwrap_or(0);
        assert!(shm > 0 && shm <= 16 << 20, "{path}: {shm} bytes in /dev/shm:\n{confined}");
        assert!(confined.contains("host: sandbox"), "{path}:\n{confined}");
        assert!(!confined.contains("userns: made"), "{path}: a user namespace made:\n{confined}");
        assert!(confined.contains("io_uring: Operation not permitted"), "{path}:\n{confined}");
    }
    // The control: bubblewrap with the options the sandbox had before.
    let mut before = std::process::Command::new("bwrap");
    before.args(["--ro-bind", "/usr", "/usr"]);
    for dir in ["/bin", "/lib", "/lib64"] {
        before.args(["--ro-bind-try", dir, dir]);
    }
    before.args(["--proc", "/proc", "--dev", "/dev", "--ro-bind"]).arg(&attacker).arg(&attacker);
    before.args(["--unshare-pid", "--unshare-user", "--"]).arg(&attacker);
    let free = nobody(before);
    assert!(free.contains("dev: written") && free.contains("shm: 33554432"), "{free}");
    assert!(free.contains("userns: made"), "the namespace attack is not real:\n{free}");
    assert!(free.contains("io_uring: Bad address"), "io_uring is not reached:\n{free}");
    // As root, its own user (the root path's engine without the filter) makes one too.
    let mut as_own_user = std::process::Command::new("bwrap");
    as_own_user.args([
        "--ro-bind",
        "/usr",
        "/usr",
        "--ro-bind-try",
        "/lib64",
        "/lib64",
        "--ro-bind-try",
        "/lib",
        "/lib",
    ]);
    as_own_user.args(["--ro-bind-try", "/bin", "/bin", "--proc", "/proc", "--dev", "/dev", "--unshare-pid"]);
    // At the root, where bubblewrap's own directories above it do not close it to the user.
    as_own_user.args(["--ro-bind"]).arg(&attacker).arg("/attacker");
    as_own_user.args(["--", "/usr/bin/setpriv", "--reuid", "3999999999", "--regid", "3999999999", "--clear-groups"]);
    let output = as_own_user.arg("/attacker").output().unwrap();
    let own_user = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(own_user.contains("userns: made"), "the root path's attack is not real:\n{own_user}");
    std::fs::remove_dir_all(&dir).ok();
}

/// An engine of five processes holding 100 MB each (F7: the address-space limit is
/// each process's): over a bound of 256 MB on them all, the worker kills it and its
/// failure says why; under 1 GiB, it plays on.
#[test]
fn an_engine_whose_processes_together_exceed_the_memory_bound_is_killed_naming_it() {
    let dir = test_dir("resident");
    let hog = script(
        &dir,
        "hog",
        r#"for i in 1 2 3 4 5; do python3 -c "import time; x = b'x' * (100 << 20); time.sleep(60)" & done
while read line; do case $line in uci) echo uciok;; isready) echo readyok;; go*) echo bestmove h2e2;; esac; done"#,
    );
    let play = |resident_bytes: u64| {
        let mut config = our_engine("hog");
        config.command = hog.clone();
        config.options.clear();
        config.sandbox = Some(Sandbox { resident_bytes, ..Sandbox::default() });
        let mut engine = EngineProcess::start(&config).expect("the script answers the handshake");
        std::thread::sleep(Duration::from_secs(3));
        engine.go("position startpos", "depth 1", Duration::from_secs(5)).map(|reply| reply.bestmove)
    };
    let killed = play(256 << 20).expect_err("the engine is killed");
    let reason = killed.to_string();
    assert!(reason.contains("killed: its processes held") && reason.contains("bound of 256 MiB"), "{reason}");
    assert_eq!(play(1 << 30).unwrap(), "h2e2", "the control plays on");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_fork_bomb_and_a_memory_hog_hit_their_limits() {
    let dir = test_dir("limits");
    // Python's fork reports each failure (bash aborts the whole loop at the first).
    let forker = script(
        &dir,
        "forker",
        "#!/usr/bin/python3
import os, time
started = 0
for _ in range(100):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        os.close(1)
        os.close(2)
        time.sleep(2)
        os._exit(0)
    started += 1
print('started', started)",
    );
    let sandbox = Sandbox { processes: 20, ..Sandbox::default() };
    let confined = run(Some(&sandbox), &forker, &[]);
    let started = |text: &str| -> usize {
        text.lines().find_map(|l| l.strip_prefix("started ")).and_then(|n| n.trim().parse().ok()).unwrap_or(0)
    };
    assert!((1..20).contains(&started(&confined)), "it ran, and stopped at its limit: {confined}");
    assert_eq!(started(&run(None, &forker, &[])), 100, "the control forks them all");

    // 128 MB in one string: beyond a 64 MB address space.
    let hog = script(&dir, "hog", "echo hogging; x=$(head -c 134217728 /dev/zero | tr '\\0' a); echo \"held ${#x}\"");
    let confined = run(Some(&Sandbox { memory_bytes: 64 << 20, ..Sandbox::default() }), &hog, &[]);
    assert!(confined.contains("hogging") && !confined.contains("held 134217728"), "{confined}");
    assert!(run(None, &hog, &[]).contains("held 134217728"), "the control holds it");
    std::fs::remove_dir_all(&dir).ok();
}

/// Our engine plays inside the sandbox, with a net it is given read-only; when the
/// worker lets go of it, nothing it started is left running.
#[test]
fn a_real_engine_plays_in_the_sandbox_and_leaves_nothing_behind() {
    let dir = test_dir("engine");
    let net = dir.join("net.xqnn");
    std::fs::write(&net, xq_engine::xiangqi::nnue::Network::random(5).to_bytes()).unwrap();
    let mut config = our_engine("confined");
    config.options.push(("EvalFile".to_owned(), net.display().to_string()));
    // Two threads: made by `clone` once the filter refuses `clone3`.
    config.options.push(("Threads".to_owned(), "2".to_owned()));
    config.sandbox = Some(Sandbox { read_only: vec![net.clone()], ..Sandbox::default() });
    let mut engine = EngineProcess::start(&config).expect("the engine starts in the sandbox");
    let reply = engine.go("position startpos", "depth 6", Duration::from_secs(20)).unwrap();
    assert!(reply.bestmove.len() >= 4, "{reply:?}");
    drop(engine);

    // An engine that leaves a child behind: the sandbox's PID namespace takes it down.
    let marker = format!("{}", 900_000 + std::process::id() % 90_000);
    let lingering = script(
        &dir,
        "lingering",
        &format!(
            "sleep {marker} &\nwhile read line; do case $line in uci) echo uciok;; isready) echo readyok;; esac; done"
        ),
    );
    config.command = lingering;
    config.options.clear();
    let engine = EngineProcess::start(&config).expect("the script answers the handshake");
    wait_until(|| running(&marker), "the child to start");
    drop(engine);
    wait_until(|| !running(&marker), "the child to die with its engine");
    std::fs::remove_dir_all(&dir).ok();
}

fn wait_until(condition: impl Fn() -> bool, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !condition() {
        assert!(Instant::now() < deadline, "waited 5 s for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Whether a `sleep <marker>` runs anywhere on the machine.
fn running(marker: &str) -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().any(|entry| {
        let mut text = String::new();
        std::fs::File::open(entry.path().join("cmdline")).and_then(|mut f| f.read_to_string(&mut text)).is_ok()
            && text == format!("sleep\0{marker}\0")
    })
}
