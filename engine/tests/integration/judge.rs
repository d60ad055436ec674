//! `xq-engine judge` through its command line.

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::common::engine_binary;

fn judge(args: &[&str], stdin: &str) -> (bool, Vec<Value>, String) {
    run("judge", args, stdin)
}

/// Runs `xq-engine <command> <args>`; whether it succeeded, its JSON lines, its stderr.
fn run(command: &str, args: &[&str], stdin: &str) -> (bool, Vec<Value>, String) {
    let mut child = Command::new(engine_binary())
        .arg(command)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start xq-engine judge");
    child.stdin.take().expect("stdin").write_all(stdin.as_bytes()).expect("write");
    let output = child.wait_with_output().expect("judge output");
    let lines = String::from_utf8(output.stdout)
        .expect("utf-8")
        .lines()
        .map(|line| serde_json::from_str(line).expect("one JSON object per line"))
        .collect();
    (output.status.success(), lines, String::from_utf8_lossy(&output.stderr).into_owned())
}

const PERPETUAL_CHECK_FEN: &str = "c2a1k3/2c1a2R1/b6P1/8p/9/9/9/9/4K4/9 w - - 0 1";

#[test]
fn rules_a_perpetual_check_with_its_article_and_each_ply() {
    let (ok, lines, _) = judge(&["--fen", PERPETUAL_CHECK_FEN, "--moves", "h8h9 f9f8 h9h8 f8f9 h8h9 f9f8"], "");
    assert!(ok);
    let verdict = &lines[0];
    assert_eq!(verdict["result"], "0-1");
    assert_eq!(verdict["reason"], "perpetual check");
    // Black's cannons chase the chariot in turn: a perpetual check against a perpetual
    // chase, the checker's loss.
    assert_eq!(verdict["article"], "WXF 3.1.H");
    let natures: Vec<&str> =
        verdict["plies"].as_array().unwrap().iter().map(|p| p["nature"].as_str().unwrap()).collect();
    assert!(natures.iter().step_by(2).all(|&n| n == "check"), "{natures:?}");
    assert!(natures.iter().skip(1).step_by(2).all(|&n| n != "check"), "{natures:?}");
}

#[test]
fn computer_rules_ignore_chases() {
    // Case #25 of the rule cases: Red chases perpetually and loses under WXF rules.
    let fen = "2c1kab2/4a4/4b4/9/9/9/P1p5P/2r1N1cC1/4A4/3ACK3 w - - 0 1";
    let moves = "e2d4 c2c1 h2h1 g2g1 e1d2 g1g0 d2e1 g0g1 e1d2 g1g0 d2e1";
    let (_, wxf, _) = judge(&["--fen", fen, "--moves", moves], "");
    let (_, computer, _) = judge(&["--rules", "computer", "--fen", fen, "--moves", moves], "");
    assert_eq!(wxf[0]["result"], "0-1");
    assert_eq!(wxf[0]["reason"], "perpetual chase");
    assert_eq!(computer[0]["result"], "1/2-1/2");
    assert_eq!(computer[0]["reason"], "repetition draw");
}

#[test]
fn an_illegal_move_fails_naming_the_ply_and_the_move() {
    let (ok, lines, stderr) = judge(&["--moves", "h2e2 h9g7 e2e9"], "");
    assert!(!ok);
    assert!(lines.is_empty());
    assert!(stderr.contains("ply 3 (e2e9)"), "{stderr}");
}

#[test]
fn nothing_to_rule_is_a_star() {
    let (ok, lines, _) = judge(&["--moves", "h2e2 h9g7"], "");
    assert!(ok);
    assert_eq!(lines[0]["result"], "*");
    assert!(lines[0]["reason"].is_null());
    // Each ply carries the position after it (the dashboard's board viewer checks its
    // replay against these): the cannon to the centre, then the horse out.
    assert_eq!(lines[0]["plies"][0]["fen"], "rnbakabnr/9/1c5c1/p1p1p1p1p/9/9/P1P1P1P1P/1C2C4/9/RNBAKABNR b - - 1 1");
    assert_eq!(lines[0]["plies"][1]["fen"], "rnbakab1r/9/1c4nc1/p1p1p1p1p/9/9/P1P1P1P1P/1C2C4/9/RNBAKABNR w - - 2 2");
}

#[test]
fn batch_rules_each_line_and_reports_bad_lines_in_place() {
    let input = format!(
        "{{\"fen\": \"{PERPETUAL_CHECK_FEN}\", \"moves\": [\"h8h9\", \"f9f8\", \"h9h8\", \"f8f9\"]}}\nnot json\n{{\"moves\": \"h2e2\", \"rules\": \"nonsense\"}}\n"
    );
    let (ok, lines, _) = judge(&["--batch"], &input);
    assert!(ok);
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[0]["result"], "0-1");
    assert!(lines[1]["error"].as_str().unwrap().starts_with("line 2"));
    assert!(lines[2]["error"].as_str().unwrap().contains("unknown rule set 'nonsense'"));
}

#[test]
fn pgn_games_are_ruled_from_their_fen_tag() {
    let path = std::env::temp_dir().join(format!("xq-judge-{}.pgn", std::process::id()));
    let pgn = format!(
        "[Variant \"xiangqi\"]\n[FEN \"{PERPETUAL_CHECK_FEN}\"]\n\n1. h8h9 f9f8 2. h9h8 f8f9 *\n\n[Variant \"xiangqi\"]\n\n1. h2e2 h9g7 *\n"
    );
    std::fs::write(&path, pgn).expect("write PGN");
    let (ok, lines, _) = judge(&["--pgn", path.to_str().unwrap()], "");
    std::fs::remove_file(&path).ok();
    assert!(ok);
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["reason"], "perpetual check");
    assert_eq!(lines[1]["result"], "*");
}

#[test]
fn wxf_20_2_a_perpetual_mating_threat_is_reported_and_drawn() {
    // Rule case #14 ("perpetual kill"): every Red move threatens mate by checks (19.2).
    let fen = "2b2k3/9/4b2P1/3N5/1R6p/6P2/5p2r/8n/4p4/5K3 w - - 0 1";
    let (ok, lines, _) = judge(&["--fen", fen, "--moves", "d6c8 f9f8 c8d6 f8f9 d6c8 f9f8 c8d6"], "");
    assert!(ok);
    assert_eq!(lines[0]["result"], "1/2-1/2");
    let plies = lines[0]["plies"].as_array().unwrap();
    assert!(plies.iter().step_by(2).all(|p| p["nature"] == "kill"), "{plies:?}");
    assert!(plies.iter().skip(1).step_by(2).all(|p| p["nature"] == "idle"), "{plies:?}");
}

/// Each side's natures over a game: for every ply, the list the judge reports.
fn natures_by_side(fen: &str, moves: &str) -> (String, [Vec<Vec<String>>; 2]) {
    let (ok, lines, stderr) = judge(&["--fen", fen, "--moves", moves], "");
    assert!(ok, "{stderr}");
    let plies = lines[0]["plies"].as_array().unwrap();
    let natures = |first: usize| -> Vec<Vec<String>> {
        plies
            .iter()
            .skip(first)
            .step_by(2)
            .map(|p| p["natures"].as_array().unwrap().iter().map(|n| n.as_str().unwrap().to_owned()).collect())
            .collect()
    };
    (lines[0]["result"].as_str().unwrap().to_owned(), [natures(0), natures(1)])
}

fn every(side: &[Vec<String>], nature: &str) -> bool {
    side.iter().all(|natures| natures.iter().any(|n| n == nature))
}

#[test]
fn the_allowed_natures_of_article_19_are_reported_as_the_book_names_them() {
    // Diagram 97 (rule case #141): the cannon threatens to win material after a check;
    // the king's replies are idle. Allowed (20.10): a draw.
    let (result, [red, black]) =
        natures_by_side("C1Na5/3Rak3/4bc3/2p6/n5b2/9/1p6r/4B4/4A4/2B1KA3 w - - 0 1", "a9a8 f8f9 a8a9 f9f8 a9a8 f8f9");
    assert_eq!(result, "1/2-1/2");
    assert!(every(&red, "capture-after-check"), "{red:?}");
    assert!(black.iter().all(|n| n == &["idle"]), "{black:?}");

    // Diagram 98 (rule case #142; Section 33): the chariot threatens to win material
    // after checks, the cannon keeps blocking its file. A draw. The text prints these
    // moves under Diagram 99's heading, but their caption ("in the above two examples,
    // Red has tried to ... threaten to capture material after delivering a check")
    // makes them Diagram 98's; Diagram 99's own moves (C2=1 C9=8 ...) are a perpetual
    // mating threat against a perpetual block (Section 34).
    let (result, [red, black]) = natures_by_side(
        "5k3/1n7/9/3P5/P1r5c/2B5R/6P2/4B4/4A4/3AK4 w - - 0 1",
        "i4h4 i5h5 h4g4 h5g5 g4i4 g5i5 i4h4 i5h5",
    );
    assert_eq!(result, "1/2-1/2");
    assert!(every(&red, "capture-after-check"), "{red:?}");
    assert!(every(&black, "block"), "{black:?}");

    // Diagram 101 (rule case #147): Red's chariot invites the exchange of chariots on
    // every move (Section 35, perpetual exchange); Black's chariot is not limited. A draw.
    let (result, [red, black]) = natures_by_side(
        "2bak4/4a4/4b4/9/2p2r3/r8/1R7/4B4/9/1R2K1B2 w - - 0 1",
        "b3b4 a4a1 b4b1 a1a3 b1b3 a3a6 b3b6 a6a8 b6b8 a8a1 b8b1 a1a3 b1b3",
    );
    assert_eq!(result, "1/2-1/2");
    assert!(every(&red, "exchange"), "{red:?}");
    assert!(!every(&black, "exchange"), "{black:?}");

    // Diagram 104 (rule case #151): Black's chariot threatens mate, Red's pawn offers
    // itself on every move. Both allowed: a draw.
    let (result, [red, black]) =
        natures_by_side("1r1ak4/4aP3/b1P1b4/4C4/9/3R5/9/9/4p4/3K5 w - - 0 1", "c7b7 b9c9 b7c7 c9b9 c7b7 b9c9");
    assert_eq!(result, "1/2-1/2");
    assert!(every(&red, "offer"), "{red:?}");
    assert!(every(&black, "kill"), "{black:?}");
}

#[test]
fn xiongqi_games_are_ruled_by_their_own_rules() {
    let (ok, lines, _) = judge(
        &["--variant", "xiongqi", "--fen", "3g4/8/8/8/8/8/8/R3G3 w - - 0 1", "--moves", "a1a2 d8c8 a2a1 c8d8 a1a2"],
        "",
    );
    assert!(ok);
    assert_eq!(lines[0]["result"], "0-1", "the repetitive move loses for its player (6.3)");
    assert_eq!(lines[0]["article"], "Xiongqi 6.3");
    let (_, lines, _) =
        judge(&["--variant", "xiongqi", "--fen", "3d4/8/8/2s5/4S3/8/8/3D4 w - - 0 1", "--moves", "d1d8"], "");
    assert_eq!((lines[0]["result"].as_str(), lines[0]["article"].as_str()), (Some("1-0"), Some("Xiongqi 6.1")));
    let (ok, _, stderr) = judge(&["--variant", "xiongqi", "--moves", "c3c4 c6c5 c4c6"], "");
    assert!(!ok && stderr.contains("ply 3 (c4c6)"), "{stderr}");
    let (_, lines, _) = judge(&["--batch"], "{\"variant\": \"xiongqi\", \"moves\": [\"c3c4\"]}\n");
    assert_eq!(lines[0]["result"], "*");
}

/// A chariot chasing a lone cannon: the chaser's loss at the third occurrence (ply 8)
/// under WXF and the Asian rules; a draw at the fourth (ply 12) under the computer rules.
const CHASE_FEN: &str = "4k4/9/9/9/9/9/9/9/1R7/c2K5 w - - 0 1";
const CHASE_CYCLE: &str = "b1a1 a0b0 a1b1 b0a0";

#[test]
fn the_judge_says_where_a_referee_would_have_ended_the_game() {
    let moves = [CHASE_CYCLE; 4].join(" ");
    let (ok, lines, stderr) = judge(&["--fen", CHASE_FEN, "--moves", &moves], "");
    assert!(ok, "{stderr}");
    let ended = &lines[0]["ended"];
    assert_eq!((ended["ply"].as_u64(), ended["article"].as_str()), (Some(8), Some("WXF 20.3")), "{ended}");
    assert_eq!(ended["result"], "0-1");
}

/// `--violation-timing` applies to every game that does not name its own timing: a
/// PGN's games without a `[ViolationTiming]` tag and batch lines without "timing"; a
/// tag or a line's own timing still rules its game (review of 2026-11-28: the flag was
/// ignored for PGN files, every untagged game ruled at the threefold).
#[test]
fn the_violation_timing_flag_rules_every_game_that_does_not_name_its_own() {
    let moves = [CHASE_CYCLE; 8].join(" ");
    let game = |tag: &str| format!("{tag}[FEN \"{CHASE_FEN}\"]\n\n{moves} *\n\n");
    let pgn = game("") + &game("[ViolationTiming \"threefold\"]\n") + &game("[ViolationTiming \"after-warning\"]\n");
    let path = std::env::temp_dir().join(format!("xq-judge-timing-{}.pgn", std::process::id()));
    std::fs::write(&path, pgn).expect("write PGN");
    let ended = |args: &[&str], stdin: &str| -> Vec<u64> {
        let (ok, lines, stderr) = judge(args, stdin);
        assert!(ok, "{stderr}");
        lines.iter().map(|line| line["ended"]["ply"].as_u64().expect("ended")).collect()
    };
    let pgn_path = path.to_str().unwrap();
    let plain = ended(&["--pgn", pgn_path], "");
    let warned = plain[2];
    assert_eq!(&plain[..2], [8, 8], "at the threefold, untagged or tagged so");
    assert!(warned > 8, "the books' timing rules the loss later: ply {warned}");
    let flagged = ended(&["--pgn", pgn_path, "--violation-timing", "after-warning"], "");
    std::fs::remove_file(&path).ok();
    assert_eq!(flagged, [warned, 8, warned], "the flag rules the untagged game; tags rule their own");
    let line = |timing: &str| format!("{{\"fen\": \"{CHASE_FEN}\", \"moves\": \"{moves}\"{timing}}}\n");
    let batch = line("") + &line(", \"timing\": \"threefold\"");
    assert_eq!(ended(&["--batch", "--violation-timing", "after-warning"], &batch), [warned, 8]);
}

#[test]
fn verify_reports_the_games_where_rule_sets_part_and_counts_them() {
    let path = std::env::temp_dir().join(format!("xq-verify-{}.pgn", std::process::id()));
    let cycles = [CHASE_CYCLE; 4].join(" ");
    let pgn = format!(
        "[FEN \"{CHASE_FEN}\"]\n\n{cycles} *\n\n[Event \"quiet\"]\n\n1. h2e2 h9g7 *\n\n[Event \"bad\"]\n\n1. h2e2 e2e9 *\n"
    );
    std::fs::write(&path, pgn).expect("write PGN");
    let (ok, lines, stderr) = run("verify", &["--rules", "wxf,asian,computer", path.to_str().unwrap()], "");
    std::fs::remove_file(&path).ok();
    assert!(ok, "{stderr}");
    assert_eq!(lines.len(), 3, "{lines:?}");
    let parting = &lines[0];
    let kinds: Vec<&str> = parting["kinds"].as_array().unwrap().iter().map(|k| k.as_str().unwrap()).collect();
    assert_eq!(kinds, ["wxf vs computer: different ply", "asian vs computer: different ply"]);
    let verdicts = parting["verdicts"].as_array().unwrap();
    let seen: Vec<(u64, &str)> =
        verdicts.iter().map(|v| (v["ply"].as_u64().unwrap(), v["article"].as_str().unwrap())).collect();
    assert_eq!(seen, [(8, "WXF 20.3"), (8, "Asian Section 3 rule 3"), (12, "WXF 3.2.B")]);
    // Each verdict shows the window it ruled on, the threefold repetition: the
    // chariot's moves chasing the cannon, the cannon's idle.
    let cycle = verdicts[0]["cycle"].as_array().unwrap();
    let plies: Vec<(u64, &str)> =
        cycle.iter().map(|p| (p["ply"].as_u64().unwrap(), p["nature"].as_str().unwrap())).collect();
    let expected: Vec<(u64, &str)> = (1..=8).map(|ply| (ply, if ply % 2 == 1 { "chase" } else { "idle" })).collect();
    assert_eq!(plies, expected);
    // The computer rules draw at the fourth occurrence, ply 12: plies 5 to 12.
    assert_eq!(verdicts[2]["cycle"].as_array().unwrap().len(), 8, "{}", verdicts[2]);
    assert!(lines[1]["error"].as_str().unwrap().contains("ply 2"), "{}", lines[1]);
    let summary = &lines[2]["summary"];
    assert_eq!(
        (summary["games"].as_u64(), summary["refused"].as_u64(), summary["parting"].as_u64()),
        (Some(3), Some(1), Some(1))
    );
    assert_eq!(summary["by_kind"]["wxf vs computer: different ply"], 1);
    assert_eq!(summary["by_articles"]["WXF 20.3 / WXF 3.2.B"], 1);
}

#[test]
fn verify_checks_the_metamorphic_properties_of_files_and_generated_games() {
    // The review's F1 game in a file: the kings' detour, then Red's perpetual check. It
    // keeps every property (the verdict, Red's loss at ply 12, survives mirroring, the
    // colours swapped, the detour dropped and a detour added).
    let path = std::env::temp_dir().join(format!("xq-metamorphic-{}.pgn", std::process::id()));
    let game = "d0d1 e9e8 d1d0 e8e9 f0e0 e9f9 e0f0 f9e9 f0e0 e9f9 e0f0 f9e9";
    std::fs::write(&path, format!("[FEN \"4k4/9/9/9/9/9/9/9/9/3K1R3 w - - 0 1\"]\n\n{game} *\n")).expect("write PGN");
    let (ok, lines, stderr) =
        run("verify", &["--rules", "wxf,asian,computer", "--metamorphic", path.to_str().unwrap()], "");
    std::fs::remove_file(&path).ok();
    assert!(ok, "{stderr}");
    assert_eq!(lines.len(), 1, "only the summary: {lines:?}");
    assert_eq!(
        (lines[0]["summary"]["games"].as_u64(), lines[0]["summary"]["metamorphic"].as_u64()),
        (Some(1), Some(0))
    );

    // Generated rule-hard games, numbered: every property holds under every rule set,
    // and the games part where the rule sets differ (CXQ's counters from the others).
    let (ok, lines, stderr) = run(
        "verify",
        &["--rules", "wxf,asian,cxq,computer", "--generate", "300", "--first", "1000", "--metamorphic"],
        "",
    );
    assert!(ok, "{stderr}");
    let summary = &lines.last().unwrap()["summary"];
    assert_eq!((summary["games"].as_u64(), summary["metamorphic"].as_u64()), (Some(300), Some(0)), "{summary}");
    assert!(summary["parting"].as_u64().unwrap() > 0, "{summary}");
    assert!(lines[..lines.len() - 1].iter().all(|line| line["game"].as_str().unwrap().starts_with("hard game 1")));

    // Without files or --generate there is nothing to verify: refused by the parser.
    let (ok, _, stderr) = run("verify", &["--metamorphic"], "");
    assert!(!ok && stderr.contains("<PGN>"), "{stderr}");
}
