//! Fuzzing the dashboard's HTTP surface: thousands of requests built at random from
//! the routes' shapes and hostile fragments (huge and negative numbers, encoded path
//! tricks, bytes that are not UTF-8, malformed JSON, wrong methods and headers), and
//! raw bytes that are not HTTP at all. No answer may be a 5xx, every refusal of the
//! API is JSON naming what was wrong, and the server answers normally afterwards.

use std::io::Write;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use xq_coordinator::scheduler::config::SchedulerConfig;

use crate::common::*;
use crate::dashboard::{get_json, report, request, running_test};

const NUMBERS: &[&str] = &[
    "1",
    "0",
    "2",
    "-1",
    "999",
    "18446744073709551615",
    "18446744073709551616",
    "99999999999999999999999",
    "1e3",
    "0x10",
    "+1",
    "%201",
    "%20",
    "",
    "abc",
    "%00",
    "%FF",
    "..",
    "%2e%2e",
    "%2F",
    "1.5",
    "NaN",
    "inf",
    "-0",
];

const VALUES: &[&str] = &[
    "",
    "running",
    "finished",
    "all",
    "sprt",
    "selfplay",
    "x",
    "%00",
    "%FF%FE",
    "%C3%A9",
    "0,2",
    "0,",
    ",",
    "1,2,3",
    "nan,inf",
    "-1e308,1e308",
    "1,1,1,1,1",
    "0,0,0,0,0",
    "1,2",
    "18446744073709551615,1,1,1,1",
    "10+0.1",
    "%27%22%3C%3E",
    "%22%3Cscript%3E",
    "logistic",
    "normalized",
    "a%26b%3Dc",
];

const NAMES: &[&str] = &[
    "state",
    "name",
    "kind",
    "q",
    "tc",
    "engine",
    "bounds",
    "limit",
    "after",
    "elo0",
    "elo1",
    "alpha",
    "beta",
    "model",
    "penta",
    "trinomial",
    "lineage",
    "x",
    "%FF",
    "",
];

const BODIES: &[&str] = &[
    "",
    "{",
    "}",
    "null",
    "[]",
    "{\"priority\": 1}",
    "{\"priority\": -2147483649}",
    "{\"priority\": \"1\"}",
    "{\"priority\": 1, \"priority\": 2}",
    "{\"priority\": 1e400}",
    "\u{0}\u{1}",
    "{\"priority\": [1]}",
    "{\"new\": {\"sha256\": \"x\"}, \"base\": {\"sha256\": \"y\"}, \"tc\": \"10+0.1\"}",
    "{\"new\": {}, \"base\": {}, \"tc\": 1, \"elo0\": \"a\"}",
    "{\"new\": {\"sha256\": \"ab\", \"options\": {\"%00\": null}}, \"base\": null, \"tc\": \"\", \"pairs\": -1}",
];

/// A random path in the shape of one of the dashboard's routes.
fn path(random: &mut Random, job: u64) -> String {
    let job = if random.below(3) == 0 { job.to_string() } else { random.pick(NUMBERS).to_owned() };
    let unit = random.pick(NUMBERS);
    let base = match random.below(30) {
        0 => "/api/v1/jobs".to_owned(),
        1 => format!("/api/v1/jobs/{job}"),
        2 => format!("/api/v1/jobs/{job}/history"),
        3 => format!("/api/v1/jobs/{job}/games.pgn"),
        4 => format!("/api/v1/jobs/{job}/pairs"),
        5 => format!("/api/v1/jobs/{job}/pairs/{unit}"),
        6 => format!("/api/v1/jobs/{job}/stop"),
        7 => format!("/api/v1/jobs/{job}/priority"),
        8 => "/api/v1/workers".to_owned(),
        9 => "/api/v1/sprt".to_owned(),
        10 => "/api/v1/nets".to_owned(),
        11 => format!("/assets/{}", random.pick(&["app.js", "..%2Fapp.js", "%2e%2e", "x", "uPlot.min.css", "%00"])),
        12 => format!("/tests/{job}/pairs/{unit}"),
        13 => format!("/{}/{}", random.pick(NUMBERS), random.pick(VALUES)),
        14 => "/metrics".to_owned(),
        15 => "/api/v1/tournaments".to_owned(),
        16 => format!("/api/v1/tournaments/{job}"),
        17 => format!("/api/v1/tournaments/{job}/games.pgn"),
        18 => format!("/api/v1/jobs/{job}/verification"),
        19 => format!("/api/v1/jobs/{job}/verification.jsonl"),
        20 => format!("/api/v1/jobs/{job}/parting.pgn"),
        21 => "/api/v1/artifacts".to_owned(),
        22 => "/api/v1/tests".to_owned(),
        23 => "/api/v1/contributors".to_owned(),
        24 => "/api/v1/session".to_owned(),
        25 => "/api/v1/signup".to_owned(),
        26 => format!("/api/v1/users/{}", random.pick(VALUES)),
        27 => "/api/v1/worker-keys".to_owned(),
        28 => format!("/api/v1/workers/{job}/retire"),
        _ => format!("/api/v1/{}", random.pick(VALUES)),
    };
    let mut query = Vec::new();
    for _ in 0..random.below(4) {
        query.push(format!("{}={}", random.pick(NAMES), random.pick(VALUES)));
    }
    if query.is_empty() { base } else { format!("{base}?{}", query.join("&")) }
}

#[tokio::test]
async fn random_and_hostile_requests_never_get_a_5xx() {
    let served = serve(Backend::Sqlite, SchedulerConfig::default()).await;
    let base = format!("http://{}", served.address);
    let (_admin, mut worker, job, lease) = running_test(&served).await;
    report(&mut worker, &lease, 0, &[[2, 1], [1, 1]]).await;
    let client = format!("Bearer {}", served.client_token);
    let seed = 0x5EED_F00D_DA5B;
    let mut random = Random(seed);
    for case in 0..1500 {
        let method = random.pick(&["GET", "GET", "GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS"]);
        let path = path(&mut random, job);
        let mut headers = Vec::new();
        match random.below(4) {
            0 => headers.push(("authorization", client.as_str())),
            1 => headers.push(("authorization", random.pick(&["Bearer", "Bearer x", "Basic abc", "bearer  "]))),
            2 => headers.push((
                "cookie",
                random.pick(&["xq_session=", "xq_session=s:x; xq_session=t:y", "xq_session=t:", ";;;=", "a"]),
            )),
            _ => {}
        }
        if random.below(2) == 0 {
            headers.push(("content-type", random.pick(&["application/json", "text/plain", "application/json; x"])));
        }
        let body = random.pick(BODIES);
        // Stopping the test would end the fuzz's interest in it; every other action may land.
        if path.split('?').next().is_some_and(|p| p.ends_with("/stop")) && headers.iter().any(|h| h.1 == client) {
            continue;
        }
        let (status, text) = request(method, &format!("{base}{path}"), &headers, body).await;
        let what = format!("case {case} (seed {seed:#x}): {method} {path} {headers:?} {body:?}");
        assert!(status < 500, "{what}: {status} {text}");
        if status >= 400 && path.starts_with("/api/") && method != "HEAD" && status != 405 {
            let error: Value = serde_json::from_str(&text).unwrap_or_else(|_| panic!("{what}: not JSON: {text}"));
            assert!(error["error"].as_str().is_some_and(|e| !e.is_empty()), "{what}: {text}");
        }
    }

    // Bytes that are not HTTP, on raw connections.
    let garbage: [&[u8]; 6] = [
        b"\x00\x01\x02\x03\r\n\r\n",
        b"GET / HTTP/9.9\r\n\r\n",
        b"GET /api/v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n",
        b"POST /api/v1/jobs/1/priority HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x04\x08\x00\x00\x00\x00\x00",
        b"GET /\xff\xfe HTTP/1.1\r\nHost: x\r\n\r\n",
    ];
    for bytes in garbage {
        let mut stream = tokio::net::TcpStream::connect(served.address).await.unwrap();
        stream.write_all(bytes).await.unwrap();
        let mut answer = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(2), stream.read_to_end(&mut answer)).await;
        let text = String::from_utf8_lossy(&answer);
        assert!(!text.starts_with("HTTP/1.1 5"), "{:?} got {text}", String::from_utf8_lossy(bytes));
    }
    let mut long_line = Vec::new();
    write!(long_line, "GET /api/v1/jobs?q={} HTTP/1.1\r\nHost: x\r\n\r\n", "a".repeat(1 << 20)).unwrap();
    let mut stream = tokio::net::TcpStream::connect(served.address).await.unwrap();
    let _ = stream.write_all(&long_line).await;
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut answer)).await;
    assert!(!String::from_utf8_lossy(&answer).starts_with("HTTP/1.1 5"));

    // Still serving, and the test still counts its pairs.
    let shown = get_json(&format!("{base}/api/v1/jobs/{job}")).await;
    assert_eq!(shown["units_done"], 2);
    assert_eq!(shown["state"], "running");
}
