//! The `xq-engine` binary driven through pipes, as a GUI or match runner would.

use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

use xq_engine::uci::OptionSet;
use xq_engine::xiangqi::search::params::TUNABLES;

use xq_engine::xiangqi::notation::{Dialect, parse_uci};
use xq_engine::xiangqi::{Position, perft};

use crate::common::{converse, engine_binary};

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
    let output = Command::new(engine_binary()).args(["perft", "--depth", "3", "--divide"]).output().expect("run perft");
    let text = String::from_utf8(output.stdout).expect("utf-8");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.last(), Some(&"Nodes searched: 79666"));
    assert_eq!(lines.iter().filter(|l| l.contains(": ") && !l.starts_with("Nodes")).count(), 44);
    let bad = Command::new(engine_binary())
        .args(["perft", "--depth", "1", "--fen", "4k4/9/9/9/9/9/9/9/9/4K4 w"])
        .output()
        .expect("run perft");
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("kings face each other"));
}

/// Runs the engine with `input`, waits for it to end, returns its output.
fn converse_slowly(lines: &[(&str, u64)]) -> String {
    let mut child =
        Command::new(engine_binary()).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("start xq-engine");
    let mut stdin = child.stdin.take().expect("stdin");
    for (line, pause_ms) in lines {
        writeln!(stdin, "{line}").expect("write");
        stdin.flush().expect("flush");
        std::thread::sleep(std::time::Duration::from_millis(*pause_ms));
    }
    drop(stdin);
    let output = child.wait_with_output().expect("output");
    assert!(output.status.success());
    String::from_utf8(output.stdout).expect("utf-8")
}

fn bestmove_is_legal(out: &str, position: &Position) {
    let line = out.lines().rev().find(|l| l.starts_with("bestmove")).unwrap_or_else(|| panic!("no bestmove in {out}"));
    let mv = line.split_whitespace().nth(1).expect("a move");
    parse_uci(position, mv, Dialect::ZeroBased).unwrap_or_else(|e| panic!("{line}: {e}"));
}

#[test]
fn every_go_form_ends_with_a_legal_bestmove() {
    let start = Position::startpos();
    for go in [
        "go depth 5",
        "go nodes 3000",
        "go movetime 50",
        "go wtime 1000 btime 1000 winc 10 binc 10",
        "go wtime 5000 btime 5000 movestogo 3",
    ] {
        let out = converse(&format!("uci\nisready\nposition startpos\n{go}\n"));
        assert!(out.contains("info depth"), "{go}: {out}");
        bestmove_is_legal(&out, &start);
    }
}

#[test]
fn go_infinite_runs_until_stop_and_isready_is_answered_meanwhile() {
    let out = converse_slowly(&[
        ("uci", 0),
        ("position startpos moves h2e2", 0),
        ("go infinite", 300),
        ("isready", 100),
        ("stop", 50),
    ]);
    let ready = out.find("readyok").expect("readyok during the search");
    let best = out.find("bestmove").expect("bestmove after stop");
    assert!(ready < best, "{out}");
    let mut position = Position::startpos();
    position.make_move(parse_uci(&position, "h2e2", Dialect::ZeroBased).unwrap());
    bestmove_is_legal(&out, &position);
}

#[test]
fn a_position_with_hundreds_of_moves_is_accepted() {
    let shuffle = "b0c2 b9c7 c2b0 c7b9 ".repeat(60);
    let out = converse(&format!(
        "uci\nsetoption name Repetition Rule value computer\nposition startpos moves {shuffle}\ngo depth 3\n"
    ));
    assert!(!out.contains("info string"), "{out}");
    bestmove_is_legal(&out, &Position::startpos());
}

#[test]
fn a_mate_in_one_is_found() {
    let position = Position::from_fen("3k5/2R6/9/9/9/9/9/9/9/R3K4 w").unwrap();
    let mates = |out: &str| {
        let best = out.lines().last().unwrap().split_whitespace().nth(1).unwrap().to_owned();
        let mut after = position.clone();
        after.make_move(parse_uci(&position, &best, Dialect::ZeroBased).unwrap());
        after.in_check() && xq_engine::xiangqi::movegen::legal_moves(&after).is_empty()
    };
    let out = converse(&format!("position fen {position}\ngo depth 4\n"));
    assert!(out.contains("score mate 1"), "{out}");
    assert!(mates(&out), "{out}");
    let out = converse(&format!("position fen {position}\ngo mate 1\n"));
    assert!(mates(&out), "go mate stops at the mate: {out}");
}

#[test]
fn options_are_set_or_refused_with_a_reason() {
    let out = converse(
        "setoption name Hash value 32\nsetoption name Threads value 2\nsetoption name Move Overhead value 30\nsetoption name Hash value 0\nsetoption name Repetition Rule value nonsense\nsetoption name UCI_Variant value chess\nposition startpos\ngo depth 4\n",
    );
    let infos: Vec<&str> = out.lines().filter(|l| l.starts_with("info string")).collect();
    assert_eq!(infos.len(), 3, "{out}");
    bestmove_is_legal(&out, &Position::startpos());
}

#[test]
fn ucci_speaks_elephanteye_dialect() {
    let out = converse(
        "ucci\nsetoption hashsize 8\nposition startpos moves h2e2\ngo time 1000 increment 0 banmoves h9g7 b9c7\nquit\n",
    );
    assert!(out.contains("ucciok"), "{out}");
    let line = out.lines().find(|l| l.starts_with("bestmove")).expect("bestmove");
    assert!(!line.contains("h9g7") && !line.contains("b9c7"), "banned move played: {line}");
    assert_eq!(out.lines().last(), Some("bye"));
}

#[test]
fn ucci_banmoves_command_bans_moves_from_the_next_search_only() {
    // The UCCI command form (a line of its own before `go`, as a league runner sends
    // it at a repetition warning): the first search keeps clear of both moves, the
    // second may play anything again.
    let out = converse(
        "ucci\nposition startpos\nbanmoves h2e2 b2e2\ngo depth 4\nposition startpos\ngo depth 1 banmoves h0g2\nquit\n",
    );
    let best: Vec<&str> = out.lines().filter(|l| l.starts_with("bestmove")).collect();
    assert_eq!(best.len(), 2, "{out}");
    assert!(!best[0].contains("h2e2") && !best[0].contains("b2e2"), "banned move played: {}", best[0]);
    assert!(!best[1].contains("h0g2"), "{}", best[1]);
}

#[test]
fn uci_searchmoves_limits_the_root_moves() {
    for only in ["a3a4", "i0i1"] {
        let out = converse(&format!("position startpos\ngo depth 4 searchmoves {only}\n"));
        let line = out.lines().find(|l| l.starts_with("bestmove")).expect("bestmove");
        assert_eq!(line.split_whitespace().nth(1), Some(only), "{out}");
    }
    let out = converse("position startpos\ngo depth 2 searchmoves a0a9\n");
    assert!(out.contains("info string searchmoves"), "an illegal move is named: {out}");
}

#[test]
fn multipv_reports_distinct_lines_best_first() {
    let out = converse("setoption name MultiPV value 3\nposition startpos\ngo depth 5\n");
    let last_depth: Vec<&str> = out.lines().filter(|l| l.starts_with("info depth 5 ")).collect();
    assert_eq!(last_depth.len(), 3, "{out}");
    let field = |line: &str, key: &str| -> String {
        let words: Vec<&str> = line.split_whitespace().collect();
        let at = words.iter().position(|w| *w == key).expect("key");
        words[at + 1].to_owned()
    };
    let first_moves: Vec<String> = last_depth.iter().map(|l| field(l, "pv")).collect();
    assert!(first_moves[0] != first_moves[1] && first_moves[1] != first_moves[2] && first_moves[0] != first_moves[2]);
    let scores: Vec<i32> = last_depth.iter().map(|l| field(l, "cp").parse().unwrap()).collect();
    assert!(scores.windows(2).all(|w| w[0] >= w[1]), "{scores:?}");
    assert_eq!(last_depth.iter().map(|l| field(l, "multipv")).collect::<Vec<_>>(), ["1", "2", "3"]);
    let best = out.lines().last().unwrap().split_whitespace().nth(1).unwrap();
    assert_eq!(best, first_moves[0]);
}

#[test]
fn xiongqi_is_played_after_uci_variant() {
    let out = converse(
        "uci\nsetoption name UCI_Variant value xiongqi\nposition startpos moves c3c4 c6c5\ngo depth 3\nisready\n",
    );
    let best = out.lines().find(|l| l.starts_with("bestmove")).expect("bestmove");
    let mv = best.split_whitespace().nth(1).unwrap();
    let mut game = xq_engine::xiongqi::Game::new(xq_engine::xiongqi::Position::startpos());
    for text in ["c3c4", "c6c5", mv] {
        game.play_text(text).unwrap_or_else(|e| panic!("{text}: {e}"));
    }
    let perft = converse("setoption name UCI_Variant value xiongqi\nposition startpos\ngo perft 2\n");
    assert_eq!(perft.lines().last(), Some("Nodes searched: 676"));
    let bad = converse("setoption name UCI_Variant value xiongqi\nposition startpos moves c3c5\n");
    assert!(bad.contains("info string move 1 of the list"), "{bad}");
}

#[test]
fn depth_limit_caps_every_search() {
    let out = converse("setoption name Depth Limit value 3\nposition startpos\ngo depth 9\nisready\n");
    let depths: Vec<u32> = out
        .lines()
        .filter_map(|l| l.strip_prefix("info depth "))
        .map(|rest| rest.split_whitespace().next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(depths.iter().max(), Some(&3), "{out}");
    assert!(out.contains("bestmove"), "{out}");
}

/// The protocol loop run in-process with `option_set`; returns its output.
fn converse_in_process(input: &str, option_set: OptionSet) -> String {
    #[derive(Clone, Default)]
    struct Sink(Arc<Mutex<Vec<u8>>>);
    impl Write for Sink {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let sink = Sink::default();
    xq_engine::uci::run(std::io::Cursor::new(input.to_owned()), sink.clone(), option_set);
    String::from_utf8(sink.0.lock().unwrap().clone()).unwrap()
}

fn nodes_of_last_info(out: &str) -> u64 {
    let line = out.lines().rfind(|l| l.starts_with("info depth")).expect("an info line");
    let words: Vec<&str> = line.split_whitespace().collect();
    let at = words.iter().position(|w| *w == "nodes").expect("nodes");
    words[at + 1].parse().unwrap()
}

/// Built for tuning, the engine declares every search number as a spin option that
/// SPSA can read (fishtest's format), takes values in range, refuses the others, and
/// searches differently with them; the standard build neither declares nor takes them.
#[test]
fn a_tuning_build_declares_and_takes_the_search_numbers() {
    let out = converse_in_process("uci\nquit\n", OptionSet::Tuning);
    for tunable in TUNABLES {
        let line = out.lines().find(|l| l.starts_with(&format!("option name {} type", tunable.name)));
        let parameter = xq_stats::spsa::Parameter::from_uci_option(line.expect(tunable.name)).expect("a spin option");
        assert_eq!(parameter.start, f64::from(tunable.default), "{}", tunable.name);
        assert_eq!((parameter.min, parameter.max), (f64::from(tunable.min), f64::from(tunable.max)));
    }
    assert!(out.lines().last() == Some("uciok"), "{out}");
    let standard = converse_in_process("uci\nsetoption name Futility Base value 150\nquit\n", OptionSet::Standard);
    assert!(!standard.contains("Futility Base type"), "{standard}");
    assert!(standard.contains("unknown option 'Futility Base'"), "{standard}");

    let search = "position startpos moves h2e2 h9g7 h0g2\ngo depth 7\nisready\n";
    let default = converse_in_process(search, OptionSet::Tuning);
    let tuned = converse_in_process(
        &format!("setoption name Futility Per Depth value 20\nsetoption name LMR Base value 200\n{search}"),
        OptionSet::Tuning,
    );
    let refused =
        converse_in_process(&format!("setoption name Futility Per Depth value 9999\n{search}"), OptionSet::Tuning);
    assert!(refused.contains("Futility Per Depth: '9999' is not a number in 20..=200"), "{refused}");
    assert_eq!(nodes_of_last_info(&refused), nodes_of_last_info(&default), "a refused value changes nothing");
    assert_ne!(nodes_of_last_info(&tuned), nodes_of_last_info(&default), "{tuned}");
}

#[test]
fn a_bench_over_stdin_is_the_bench_of_the_options_set() {
    // The signature a test records for an engine with a net: asked over the engine's
    // input after `setoption`, it is the command line's bench of that net (one thread,
    // whatever Threads says), and another net's or the handcrafted evaluation's differs.
    use xq_engine::bench::bench_of;
    let directory = std::env::temp_dir().join(format!("xq-bench-net-{}", std::process::id()));
    std::fs::create_dir_all(&directory).unwrap();
    let net = directory.join("random.nnue");
    xq_engine::xiangqi::nnue::Network::random(7).save(&net).unwrap();
    let binary = crate::common::engine_binary();
    let with = |protocol: &str, options: &[(&str, &str)]| {
        let options: Vec<(String, String)> = options.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        bench_of(&binary, protocol, &options).unwrap().signature
    };
    let net_text = net.display().to_string();
    let over_stdin = with("uci", &[("EvalFile", &net_text), ("Threads", "2")]);
    let output = std::process::Command::new(&binary).args(["bench", "--eval-file", &net_text]).output().unwrap();
    let on_command_line = xq_engine::bench::parse_signature(&String::from_utf8_lossy(&output.stdout)).unwrap();
    assert_eq!(over_stdin, on_command_line);
    assert_eq!(with("ucci", &[("EvalFile", &net_text)]), over_stdin, "UCCI's setoption too");
    assert_ne!(with("uci", &[("UseNNUE", "false")]), over_stdin);
    assert_ne!(with("uci", &[]), over_stdin, "no options: the embedded net's bench, on the command line");
    std::fs::remove_dir_all(&directory).ok();
}
