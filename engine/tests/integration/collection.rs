//! A real game collection (tests/data/collection: 2,000 master games as a Chinese
//! collection stores them, Big5-encoded, moves in Chinese notation) read as users'
//! collections reach the product: decoded, parsed, every move read and replayed.

use std::process::Command;

use serde_json::Value;
use xq_engine::xiangqi::Position;
use xq_engine::xiangqi::pgn::{PgnFile, parse_pgn_bytes};
use xq_engine::xiangqi::rules::verify::parse_moves;

use crate::common::engine_binary;

/// The collection's bytes as stored (Big5).
pub fn collection() -> Vec<u8> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/collection/ccpd-2000.big5.pgn.zst");
    zstd::decode_all(std::fs::File::open(path).expect("the collection")).expect("zstd")
}

#[test]
fn every_move_of_a_real_big5_collection_in_chinese_notation_is_read_and_replayed() {
    let bytes = collection();
    assert!(std::str::from_utf8(&bytes).is_err(), "the file is Big5, not UTF-8");
    let games = parse_pgn_bytes(&bytes).unwrap();
    // Counted on the bytes (tags are ASCII in Big5): every game opens with [Game "...
    let tagged = bytes.windows(7).filter(|w| w == b"[Game \"").count();
    assert_eq!((games.len(), tagged), (2000, 2000));
    assert_eq!(games[0].tag("Site"), Some("北京"));
    // Any games read again alone, from where they begin in the decoded text.
    let file = PgnFile::read(&bytes).unwrap();
    assert_eq!(file.len(), 2000);
    for range in [0..1, 1..2, 777..1000, 1998..2000] {
        assert_eq!(file.games(range.clone()), games[range]);
    }
    // The first game's opening, transcribed by hand with WXF Article 7 (files from each
    // side's right): 炮二平五 馬８進７ 馬二進三 車９平８ 車一平二 卒３進１.
    let start = Position::startpos();
    let opening = parse_moves(&start, &games[0].moves[..6]).unwrap();
    let uci: Vec<String> = opening.iter().map(ToString::to_string).collect();
    assert_eq!(uci, ["h2e2", "h9g7", "h0g2", "i9h9", "i0h0", "c6c5"]);
    let mut plies = 0;
    let mut tandem = 0;
    for (index, game) in games.iter().enumerate() {
        let moves =
            parse_moves(&start, &game.moves).unwrap_or_else(|e| panic!("game {}: ply {}: {}", index + 1, e.0, e.1));
        plies += moves.len();
        tandem += game.moves.iter().filter(|m| m.starts_with(['前', '後'])).count();
        assert!(matches!(game.result.as_deref(), Some("1-0" | "0-1" | "1/2-1/2" | "*")), "game {}", index + 1);
    }
    assert!(plies > 150_000, "{plies} plies");
    assert!(tandem > 100, "tandem pieces (前, 後) read: {tandem}");
}

#[test]
fn xq_engine_verify_reads_the_collection_as_stored() {
    let dir = std::env::temp_dir().join(format!("xq-collection-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("ccpd.pgn");
    std::fs::write(&path, collection()).unwrap();
    let output = Command::new(engine_binary()).arg("verify").arg(&path).output().expect("xq-engine verify");
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let stdout = String::from_utf8(output.stdout).unwrap();
    let summary: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!((summary["summary"]["games"].as_u64(), summary["summary"]["refused"].as_u64()), (Some(2000), Some(0)));
    // Masters' games do end in repetitions the rule sets rule on differently.
    let parting = summary["summary"]["parting"].as_u64().unwrap();
    assert_eq!(stdout.lines().count() as u64, parting + 1);
    assert!(parting > 0, "{stdout}");
}
