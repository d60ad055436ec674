//! The NNUE evaluation through the search and through the binary: random nets exercise
//! every path alike, and the binary's embedded net is its default evaluation.

use std::process::Command;
use std::sync::Arc;

use xq_engine::xiangqi::Position;
use xq_engine::xiangqi::movegen::legal_moves;
use xq_engine::xiangqi::nnue::Network;
use xq_engine::xiangqi::nnue::simd::Simd;
use xq_engine::xiangqi::search::limits::Limits;
use xq_engine::xiangqi::search::{SearchOptions, Shared, search};

use crate::common::{converse, engine_binary};

/// A search to a fixed depth is deterministic, so every kernel path must walk the
/// very same tree: same node count, same move, same score.
#[test]
fn every_kernel_path_searches_the_same_tree() {
    let network = Network::random(21);
    let fen = "r1ba1a3/4kn3/2n1b4/pNp1p1p1p/4c4/6P2/P1P2R2P/1CcC5/9/2BAKAB2 w";
    let position = Position::from_fen(fen).unwrap();
    let limits = Limits { depth: Some(6), ..Limits::default() };
    let run = |simd: Simd| {
        let options = SearchOptions { network: Some(Arc::new(network.clone().with_simd(simd))), ..Default::default() };
        let result = search(&Shared::new(4), &position, &[], &limits, &options, |_| {});
        (result.nodes, result.best, result.score)
    };
    let expected = run(Simd::SCALAR);
    assert!(legal_moves(&position).contains(&expected.1.expect("a move")));
    let handcrafted = search(&Shared::new(4), &position, &[], &limits, &SearchOptions::default(), |_| {});
    assert_ne!(handcrafted.nodes, expected.0, "the net must have been used");
    for simd in Simd::available() {
        assert_eq!(run(simd), expected, "{}", simd.name());
    }
}

#[test]
fn evalfile_loads_a_net_and_refuses_a_bad_one_with_the_reason() {
    let dir = std::env::temp_dir().join(format!("xq-nnue-uci-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let good = dir.join("random.xqnn");
    let status = Command::new(engine_binary())
        .args(["net", "random", "--seed", "4", "--out"])
        .arg(&good)
        .status()
        .expect("xq-engine net random");
    assert!(status.success());
    let damaged = dir.join("damaged.xqnn");
    let mut bytes = std::fs::read(&good).unwrap();
    bytes[1000] ^= 1;
    std::fs::write(&damaged, bytes).unwrap();

    let out = converse(&format!(
        "uci\nsetoption name EvalFile value {}\nsetoption name EvalFile value {}\n\
         setoption name EvalFile value /nonexistent/net.xqnn\nposition startpos\ngo depth 4\nisready\n",
        good.display(),
        damaged.display()
    ));
    assert!(out.contains("loaded (random network, seed 4)"), "{out}");
    assert!(
        out.contains("the net file is damaged") && out.contains("the evaluation stays the net loaded before"),
        "{out}"
    );
    assert!(out.contains("/nonexistent/net.xqnn"), "{out}");
    let best = out.lines().find_map(|l| l.strip_prefix("bestmove ")).expect("a best move");
    let mv = best.split_whitespace().next().unwrap();
    let position = Position::startpos();
    assert!(legal_moves(&position).iter().any(|m| m.to_string() == mv), "{mv}");

    let info = Command::new(engine_binary()).arg("net").arg("info").arg(&damaged).output().unwrap();
    assert!(!info.status.success());
    assert!(String::from_utf8_lossy(&info.stderr).contains("damaged"));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The binary plays with its embedded net; EvalFile loads another and `<embedded>`
/// returns to it; UseNNUE false switches to the handcrafted evaluation whatever net is
/// loaded, and true back to the net: each fixed-depth search walks that evaluation's
/// tree.
#[test]
fn evalfile_and_usennue_choose_the_evaluation() {
    let dir = std::env::temp_dir().join(format!("xq-nnue-usennue-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let net = dir.join("random.xqnn");
    let status = Command::new(engine_binary())
        .args(["net", "random", "--seed", "5", "--out"])
        .arg(&net)
        .status()
        .expect("xq-engine net random");
    assert!(status.success());
    // The node count of a session's one search, its last command (a command sent
    // during a search would stop it).
    let nodes = |setup: &str| -> String {
        let out = converse(&format!("uci\n{setup}position startpos moves h2e2 h9g7\ngo depth 5\n"));
        assert!(!out.contains("UseNNUE: '") && !out.contains("EvalFile '"), "{out}");
        let last = out.lines().rfind(|l| l.contains(" nodes ")).expect("a search report");
        last.split(" nodes ").nth(1).unwrap().split_whitespace().next().unwrap().to_owned()
    };
    let off = "setoption name UseNNUE value false\n";
    let load = format!("setoption name EvalFile value {}\n", net.display());
    let embedded = nodes("");
    let handcrafted = nodes(off);
    let random = nodes(&load);
    assert_ne!(embedded, handcrafted, "the embedded net searched by default");
    assert_ne!(random, embedded, "EvalFile's net searched");
    assert_eq!(nodes(&format!("{load}{off}")), handcrafted, "UseNNUE false with a net loaded");
    assert_eq!(nodes(&format!("{load}{off}setoption name UseNNUE value true\n")), random, "UseNNUE true");
    assert_eq!(nodes(&format!("{load}setoption name EvalFile value <embedded>\n")), embedded, "<embedded>");
    let refused = converse("uci\nsetoption name UseNNUE value maybe\nisready\n");
    assert!(refused.contains("UseNNUE: 'maybe' is not true or false"), "{refused}");
    std::fs::remove_dir_all(&dir).unwrap();
}
