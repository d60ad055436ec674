//! The `xq-engine` binary driven through pipes, as a GUI or match runner would.

use std::io::Write;
use std::process::{Command, Stdio};

use xq_engine::xiangqi::notation::{Dialect, parse_uci};
use xq_engine::xiangqi::{Position, perft};

use crate::common::engine_binary;

fn converse(input: &str) -> String {
    let mut child = Command::new(engine_binary())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start xq-engine");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
        .expect("write");
    let output = child.wait_with_output().expect("xq-engine output");
    assert!(output.status.success());
    String::from_utf8(output.stdout).expect("utf-8")
}

#[test]
fn handshake_and_perft_through_uci() {
    let out = converse(
        "uci\nisready\nsetoption name UCI_Variant value xiangqi\nposition startpos moves h2e2 h9g7\ngo perft 2\nquit\n",
    );
    assert!(out.contains("uciok"));
    assert!(out.contains("readyok"));
    let mut position = Position::startpos();
    for text in ["h2e2", "h9g7"] {
        let mv = parse_uci(&position, text, Dialect::ZeroBased).unwrap();
        position.make_move(mv);
    }
    let expected = format!("Nodes searched: {}", perft::perft(&mut position, 2));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.last(), Some(&expected.as_str()), "{out}");
    assert!(lines.iter().any(|l| l.starts_with("e2e6: ")), "{out}");
}

#[test]
fn garbage_gets_info_string_and_the_engine_carries_on() {
    let out = converse(
        "bogus\nposition fen 9/9 w\nposition startpos moves e2e9\nsetoption name Foo value 1\ngo perft x\nisready\n",
    );
    let infos = out.lines().filter(|l| l.starts_with("info string")).count();
    assert_eq!(infos, 5, "{out}");
    assert!(out.contains("unknown command 'bogus'"));
    assert!(out.contains("move 1 of the list"));
    assert!(out.trim_end().ends_with("readyok"));
}

#[test]
fn perft_command_prints_divide_then_total() {
    let output = Command::new(engine_binary())
        .args(["perft", "--depth", "3", "--divide"])
        .output()
        .expect("run perft");
    let text = String::from_utf8(output.stdout).expect("utf-8");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.last(), Some(&"Nodes searched: 79666"));
    assert_eq!(
        lines
            .iter()
            .filter(|l| l.contains(": ") && !l.starts_with("Nodes"))
            .count(),
        44
    );
    let bad = Command::new(engine_binary())
        .args([
            "perft",
            "--depth",
            "1",
            "--fen",
            "4k4/9/9/9/9/9/9/9/9/4K4 w",
        ])
        .output()
        .expect("run perft");
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("kings face each other"));
}
