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
