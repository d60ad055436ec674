//! The default book (issue #55, part 5), with real processes: a Xiangqi test that
//! names no book plays the coordinator's built-in openings (the PGN's `[FEN]` tags are
//! lines of `books/xiangqi-8ply.epd.zst`), both games of a pair the same opening and
//! each pair another, read off the book by the coordinator's replay of every game
//! (`xq show` and the view name the book);
//! `--no-book` plays the start position; `xq presets` names the book.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use crate::cluster::{job_games, job_of, start_coordinator, start_worker, token, wait_for, xq_at};
use crate::common::{Client, TempDir, binary, client};
use xq_proto::v1;

/// Each game's round and `[FEN]` tag (`None`: the start position).
async fn openings(admin: &mut Client, job: u64) -> Vec<(String, Option<String>)> {
    let games = job_games(admin, job).await;
    games.iter().map(|g| (g.tag("Round").unwrap().to_owned(), g.tag("FEN").map(str::to_owned))).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_test_without_a_book_plays_the_default_book_and_no_book_the_start_position() {
    let dir = TempDir::new("default-book");
    let (_coordinator, address) = start_coordinator(&dir.0, 0, 10).await;
    let mut admin = client(address, &token(&dir.0)).await;
    let engine = binary("xq-engine");
    let engine = engine.to_str().unwrap();
    let games = ["games", "--games", "6", "--tc", "depth=1", "--max-plies", "40", "--no-bench"];
    let booked = job_of(&xq_at(address, &dir.0, &[&games[..], &["--new", engine, "--base", engine]].concat()));
    let start =
        job_of(&xq_at(address, &dir.0, &[&games[..], &["--new", engine, "--base", engine, "--no-book"]].concat()));
    let presets = xq_at(address, &dir.0, &["presets"]);
    assert!(presets.contains("default book xiangqi-8ply.epd"), "{presets}");

    let _worker = start_worker(&mut admin, address, dir.0.join("w0"), "w0").await;
    let limit = Duration::from_secs(300);
    for job in [booked, start] {
        let done = wait_for(&mut admin, job, limit, "the games", |j| j.state != "running").await;
        assert_eq!(done.state, "finished", "{done:?}");
    }
    let view = admin.get_job(v1::JobId { job_id: booked }).await.unwrap().into_inner();
    assert_eq!(view.book.as_ref().map(|b| b.name.as_str()), Some("xiangqi-8ply.epd"), "{view:?}");
    let shown = xq_at(address, &dir.0, &["show", &booked.to_string()]);
    assert!(shown.contains("\n  book: xiangqi-8ply.epd ("), "{shown}");

    let book = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../books/xiangqi-8ply.epd.zst");
    let text = String::from_utf8(zstd::stream::decode_all(std::fs::File::open(book).unwrap()).unwrap()).unwrap();
    let lines: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
    let played = openings(&mut admin, booked).await;
    assert_eq!(played.len(), 6);
    let mut by_pair: HashMap<u64, HashSet<String>> = HashMap::new();
    for (round, fen) in played {
        let fen = fen.expect("a booked game starts from its opening");
        // Pair p (rounds 2p+1 and 2p+2) plays the book's line p.
        let pair = (round.parse::<u64>().unwrap() - 1) / 2;
        assert_eq!(fen, lines[pair as usize], "round {round}");
        by_pair.entry(pair).or_default().insert(fen);
    }
    assert_eq!(by_pair.len(), 3);
    assert!(by_pair.values().all(|fens| fens.len() == 1));
    assert!(openings(&mut admin, start).await.iter().all(|(_, fen)| fen.is_none()));
}
