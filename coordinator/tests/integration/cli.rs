//! The `xq` client as users run it: the SPRT calculator against fishtest's reference
//! values, and `xq local`, the main command, from start to decision.

use std::process::Command;

use crate::common::{TempDir, binary};

fn xq(args: &[&str]) -> std::process::Output {
    Command::new(binary("xq")).args(args).output().unwrap()
}

#[test]
fn llr_matches_fishtest_and_prints_json() {
    let output = xq(&["llr", "--penta", "39,8843,26675,9240,44", "--elo0", "0.5", "--elo1", "2.5", "--json"]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let object: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    for key in ["llr", "lower", "upper", "elo", "elo_low", "elo_high"] {
        assert!(object[key].is_f64(), "{key} in {object}");
    }
    assert!((object["llr"].as_f64().unwrap() - 2.941675).abs() < 1e-3, "{object}");
    assert!((object["upper"].as_f64().unwrap() - 2.944439).abs() < 1e-5);
    let output = xq(&[
        "llr",
        "--penta",
        "10789,19328,33806,19402,10543",
        "--elo0",
        "-3",
        "--elo1",
        "1",
        "--model",
        "logistic",
        "--json",
    ]);
    let object: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert!((object["llr"].as_f64().unwrap() - 2.131068).abs() < 1e-3, "{object}");
    let text = String::from_utf8(xq(&["llr", "--trinomial", "20,50,30", "--elo0", "0", "--elo1", "5"]).stdout).unwrap();
    assert!(text.starts_with("LLR ") && text.contains("Elo +"), "{text}");
}

#[test]
fn llr_refuses_bad_input_with_a_reason() {
    for (args, needle) in [
        (vec!["llr", "--penta", "1,2,3", "--elo0", "0", "--elo1", "2"], "needs 5 counts"),
        (vec!["llr", "--penta", "1,2,x,4,5", "--elo0", "0", "--elo1", "2"], "'x' is not a count"),
        (vec!["llr", "--penta", "1,2,3,4,5", "--elo0", "0", "--elo1", "2", "--alpha", "2"], "alpha"),
        (vec!["llr", "--elo0", "0", "--elo1", "2"], "--penta"),
    ] {
        let output = xq(&args);
        assert!(!output.status.success(), "{args:?}");
        let message = String::from_utf8_lossy(&output.stderr);
        assert!(message.contains(needle), "{args:?}: {message}");
    }
}

#[test]
fn xq_local_runs_an_sprt_to_its_end() {
    let dir = TempDir::new("local");
    let book = concat!(env!("CARGO_MANIFEST_DIR"), "/../books/xiangqi-2ply.epd");
    let data = dir.0.join("data");
    let output = xq(&[
        "local",
        "--tc",
        "depth=3",
        "--base-option",
        "Depth Limit=1",
        "--elo1",
        "30",
        "--workers",
        "2",
        "--book",
        book,
        "--data",
        data.to_str().unwrap(),
    ]);
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{text}\n{}", String::from_utf8_lossy(&output.stderr));
    assert!(text.contains("H1 accepted"), "{text}");
    let games: u64 = text.lines().find_map(|l| l.strip_prefix("games ")).unwrap().parse().unwrap();
    assert!(games >= 2 && games.is_multiple_of(2), "{text}");
    assert!(text.contains("LLR ") && text.contains("Elo "), "{text}");
}

/// Without TLS the coordinator will not listen where other machines reach it.
#[test]
fn the_coordinator_refuses_plaintext_on_a_public_address() {
    let dir = TempDir::new("plaintext");
    let output = Command::new(binary("xq-coordinator"))
        .args(["serve", "--listen", "0.0.0.0:0", "--data"])
        .arg(&dir.0)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success() && stderr.contains("--allow-plaintext"), "{stderr}");
    assert!(output.stdout.is_empty(), "it never listened");
}

/// A reader that has gone (`xq show 3 | head -1`) ends `xq` quietly: no panic.
#[test]
fn output_to_a_closed_pipe_ends_quietly() {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let output = Command::new(binary("xq"))
        .args(["llr", "--trinomial", "20,50,30", "--elo0", "0", "--elo1", "5"])
        .stdout(writer)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{:?}: {stderr}", output.status);
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// The status of a GET (the body, a live stream's perhaps, is not read).
async fn status_of(url: &str, headers: &[(&str, &str)]) -> u16 {
    use http_body_util::Full;
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<Full<bytes::Bytes>>();
    let mut builder = http::Request::builder().uri(url);
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    client.request(builder.body(Full::default()).unwrap()).await.unwrap().status().as_u16()
}

/// `xq-coordinator serve` on `listen` with `flags`, killed at drop; its port.
struct Serving(std::process::Child, u16);

impl Serving {
    fn start(dir: &TempDir, listen: &str, flags: &[&str]) -> Serving {
        use std::io::BufRead;
        let mut child = Command::new(binary("xq-coordinator"))
            .args(["serve", "--listen", listen, "--data"])
            .arg(&dir.0)
            .args(flags)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let port = line.trim().rsplit(':').next().and_then(|p| p.parse().ok());
        Serving(child, port.unwrap_or_else(|| panic!("no address in {line:?}")))
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// On an address other machines reach, the dashboard's reads need a client token
/// unless `--public-dashboard` says otherwise; on loopback they are open unless
/// `--private-dashboard` (still accepted) says otherwise.
#[tokio::test]
async fn the_dashboard_is_private_off_loopback_unless_made_public() {
    let dir = TempDir::new("dashboard-default");
    let token = std::fs::read_to_string;
    for (listen, flags, open) in [
        ("0.0.0.0:0", &["--allow-plaintext"][..], false),
        ("0.0.0.0:0", &["--allow-plaintext", "--public-dashboard"][..], true),
        ("127.0.0.1:0", &[][..], true),
        ("127.0.0.1:0", &["--private-dashboard"][..], false),
    ] {
        let serving = Serving::start(&dir, listen, flags);
        let client_token = token(dir.0.join("client-token")).unwrap().trim().to_owned();
        let bearer = format!("Bearer {client_token}");
        for path in ["/api/v1/jobs", "/api/v1/workers", "/metrics", "/api/v1/events"] {
            let url = format!("http://127.0.0.1:{}{path}", serving.1);
            let status = status_of(&url, &[]).await;
            assert_eq!(status, if open { 200 } else { 401 }, "{listen} {flags:?} {path}");
            assert_eq!(status_of(&url, &[("authorization", &bearer)]).await, 200, "{listen} {flags:?} {path}");
        }
    }
    // Both at once is a contradiction, refused.
    let output = Command::new(binary("xq-coordinator"))
        .args(["serve", "--private-dashboard", "--public-dashboard", "--data"])
        .arg(&dir.0)
        .output()
        .unwrap();
    assert!(!output.status.success() && String::from_utf8_lossy(&output.stderr).contains("cannot be used with"));
}

/// Off loopback, a coordinator without `--public` warns of each protection a public
/// one should have and it has off (review of 2026-11-28, F12); with `--public` none is
/// off, and on loopback (the operator's own machine) it says nothing.
#[test]
fn a_reachable_coordinator_names_each_protection_it_has_off_unless_public() {
    use std::io::BufRead;
    let dir = TempDir::new("public-profile");
    let warnings = |listen: &str, flags: &[&str]| -> Vec<String> {
        let log = dir.0.join("stderr.log");
        let mut child = Command::new(binary("xq-coordinator"))
            .args(["serve", "--listen", listen, "--data"])
            .arg(dir.0.join("data"))
            .args(flags)
            .env("RUST_LOG", "warn")
            .stdout(std::process::Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        assert!(line.starts_with("listening on"), "{line}");
        let _ = child.kill();
        let _ = child.wait();
        let text = std::fs::read_to_string(&log).unwrap();
        text.lines().filter(|l| l.contains("--public turns each on")).map(str::to_owned).collect()
    };
    let open = warnings("0.0.0.0:0", &["--allow-plaintext"]);
    for setting in ["--require-approval", "--submitter-quota-mb", "--submitter-active-jobs", "--keep-games-days"] {
        assert!(open.iter().any(|w| w.contains(setting)), "{setting} in {open:?}");
    }
    assert_eq!(open.len(), 4, "{open:?}");
    assert_eq!(warnings("0.0.0.0:0", &["--allow-plaintext", "--public"]), Vec::<String>::new());
    assert_eq!(warnings("127.0.0.1:0", &[]), Vec::<String>::new());

    // Behind a reverse proxy on its machine (F12): public on loopback, the dashboard's
    // reads need a token, and the log says whose the address limits are.
    let mut proxied = Command::new(binary("xq-coordinator"))
        .args(["serve", "--listen", "127.0.0.1:0", "--public", "--data"])
        .arg(dir.0.join("proxied"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(proxied.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let url = line.trim().strip_prefix("listening on ").unwrap().to_owned();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let anonymous = runtime.block_on(status_of(&format!("{url}/api/v1/jobs"), &[]));
    let token = std::fs::read_to_string(dir.0.join("proxied/client-token")).unwrap();
    let bearer = format!("Bearer {}", token.trim());
    let with_token = runtime.block_on(status_of(&format!("{url}/api/v1/jobs"), &[("authorization", &bearer)]));
    let _ = proxied.kill();
    let output = proxied.wait_with_output().unwrap();
    assert_eq!((anonymous, with_token), (401, 200));
    let log = String::from_utf8_lossy(&output.stderr);
    assert!(log.contains("the proxy should limit its clients itself"), "{log}");
}

/// First contact: the mistakes a newcomer makes with `xq` are said in one line with
/// their fix: no coordinator at the address, no token, a token it does not know.
#[test]
fn xq_names_a_missing_coordinator_and_a_wrong_token_with_the_fix() {
    let one_line = |output: std::process::Output| {
        assert!(!output.status.success());
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
        stderr
    };
    // A port nothing listens on: the reason from the system, and where to look.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = format!("http://127.0.0.1:{closed}");
    let stderr = one_line(xq(&["--coordinator", &url, "--token", "t", "list"]));
    assert!(stderr.contains("Connection refused") && stderr.contains("is `xq-coordinator serve` running"), "{stderr}");

    let dir = TempDir::new("first-contact");
    let serving = Serving::start(&dir, "127.0.0.1:0", &[]);
    let url = format!("http://127.0.0.1:{}", serving.1);
    let stderr = one_line(
        Command::new(binary("xq")).args(["--coordinator", &url, "list"]).env_remove("XQ_TOKEN").output().unwrap(),
    );
    assert!(stderr.contains("--token, XQ_TOKEN or --token-file"), "{stderr}");
    let stderr = one_line(xq(&["--coordinator", &url, "--token", "wrong", "list"]));
    assert!(stderr.contains("refused the token") && stderr.contains("xq token create"), "{stderr}");
    // A worker with a token the coordinator does not know stops, saying how to get one.
    let worker = Command::new(binary("xq-worker"))
        .args(["connect", "--coordinator", &url, "--name", "w", "--cache"])
        .arg(dir.0.join("cache"))
        .env("XQ_WORKER_TOKEN", "wrong")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&worker.stderr);
    assert!(!worker.status.success() && stderr.contains("`xq worker-token NAME`"), "{stderr}");
}
