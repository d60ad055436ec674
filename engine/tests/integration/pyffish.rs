//! Differential test of WXF notation against pyffish (Fairy-Stockfish as a Python
//! module), run by the Python the README's test command prepares (`XQ_PYTHON`).

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use xq_engine::xiangqi::movegen;
use xq_engine::xiangqi::notation::{Dialect, format_uci, format_wxf, parse_wxf};

use crate::common::{chapter_5_examples, random_positions};

fn python() -> PathBuf {
    let path = std::env::var_os("XQ_PYTHON")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache/xq-cluster/venv/bin/python")))
        .expect("XQ_PYTHON or HOME");
    assert!(
        path.exists(),
        "{} is missing: the README's test command (scripts/test) makes a venv with pyffish",
        path.display()
    );
    path
}

/// Runs an oracle script on `input` and returns its output lines.
fn oracle(script: &str, input: String) -> Vec<String> {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/oracles").join(script);
    let mut child =
        Command::new(python()).arg(script).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("start python");
    let mut stdin = child.stdin.take().expect("stdin");
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let output = child.wait_with_output().expect("pyffish output");
    writer.join().expect("writer thread").expect("write queries");
    assert!(output.status.success(), "pyffish oracle failed");
    String::from_utf8(output.stdout).expect("utf-8").lines().map(str::to_owned).collect()
}

#[test]
fn wxf_agrees_with_pyffish() {
    let positions: Vec<_> = random_positions(0xA11CE, 12, 100).into_iter().step_by(3).collect();
    let mut queries = Vec::new();
    let mut input = String::new();
    for position in &positions {
        for &mv in movegen::legal_moves(position).iter() {
            input.push_str(&format!("{position}\t{}\n", format_uci(mv, Dialect::OneBased)));
            queries.push((position, mv));
        }
    }
    let answers = oracle("pyffish_wxf.py", input);
    assert_eq!(answers.len(), queries.len());
    assert!(queries.len() > 5000, "only {} moves", queries.len());
    let mut plain = 0;
    for ((position, mv), theirs) in queries.iter().zip(answers) {
        let theirs = theirs.as_str();
        assert_eq!(parse_wxf(position, theirs).as_ref(), Ok(mv), "{position}: pyffish wrote {theirs}");
        // Where a file holds two pieces of the kind, the book marks front and rear
        // (7.5) while pyffish writes the plain form whenever it is unambiguous; where
        // our text is plain, the two must be identical.
        let ours = format_wxf(position, *mv).expect("legal move");
        let ours_is_plain = ours.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
            && ours.chars().nth(1).is_some_and(|c| c.is_ascii_digit());
        if ours_is_plain {
            plain += 1;
            assert_eq!(ours, theirs, "{position} {mv}");
        }
    }
    assert!(plain > queries.len() / 2);
}

/// Examples Fairy-Stockfish rules otherwise than the book, with its ruling: in 36.1 it
/// does not count a capture that a pawn's move made profitable as a new chase (the
/// rule cases' README records the same departure for case #152).
const FAIRY_STOCKFISH_DEPARTS: [(&str, &str); 1] = [("36.1 Example of perpetual chase", "Draw")];

/// The Chapter 5 examples built for the rule tests, ruled by Fairy-Stockfish too: an
/// oracle independent of the rule book's reading here. It rules at the third
/// occurrence, so each game is extended by its last cycle once more.
#[test]
fn chapter_5_examples_agree_with_pyffish() {
    let examples = chapter_5_examples();
    let mut input = String::new();
    for example in &examples {
        let mut position = example.start.clone();
        let mut hashes = vec![position.hash()];
        for &mv in &example.moves {
            position.make_move(mv);
            hashes.push(position.hash());
        }
        let last = *hashes.last().unwrap();
        let first = hashes.iter().position(|&h| h == last).unwrap();
        let mut moves = example.moves.clone();
        moves.extend_from_slice(&example.moves[first..]);
        let text: Vec<String> = moves.iter().map(|&m| format_uci(m, Dialect::OneBased)).collect();
        input.push_str(&format!("{}\t{}\n", example.fen, text.join(" ")));
    }
    let answers = oracle("pyffish_rules.py", input);
    assert_eq!(answers.len(), examples.len());
    for (example, answer) in examples.iter().zip(&answers) {
        let theirs = match answer.as_str() {
            "True 32000" => "Win",
            "True -32000" => "Loss",
            "True 0" => "Draw",
            other => panic!("{}: pyffish answered {other}", example.section),
        };
        let departs = FAIRY_STOCKFISH_DEPARTS.iter().find(|(section, _)| *section == example.section);
        assert_eq!(departs.map_or(example.ruling.as_str(), |(_, ruling)| ruling), theirs, "{}", example.section);
    }
}
