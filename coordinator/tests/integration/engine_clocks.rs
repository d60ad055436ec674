//! The clocks a test's engines play under (issue #55, part 2), with real processes:
//! time odds (`--base-tc`: each engine its own clock, charged and checked side by
//! side, named in the PGN as cutechess-cli names them), and clocks scaled by the
//! tested engines' own speed on the worker against their speed at submission, not by
//! our engine's.

use std::path::Path;
use std::time::Duration;

use crate::cluster::{job_games, job_of, start_coordinator, start_coordinator_with, start_worker_with, token};
use crate::cluster::{wait_for, xq_at, xq_refused};
use crate::common::{TempDir, binary, client, executable};
use xq_engine::xiangqi::pgn::MoveNote;

/// Seconds each engine thought over `games`, by name (book plies aside).
fn thinking(games: &[xq_engine::xiangqi::pgn::PgnGame]) -> std::collections::HashMap<String, f64> {
    let mut seconds = std::collections::HashMap::new();
    for game in games {
        let players = [game.tag("White").unwrap().to_owned(), game.tag("Black").unwrap().to_owned()];
        let first = usize::from(game.tag("FEN").and_then(|fen| fen.split_whitespace().nth(1)) == Some("b"));
        for (ply, note) in game.notes.iter().enumerate() {
            if let Some(MoveNote::Engine { elapsed, .. }) = note.as_deref().and_then(MoveNote::parse) {
                *seconds.entry(players[(ply + first) % 2].clone()).or_insert(0.0) += elapsed.as_secs_f64();
            }
        }
    }
    seconds
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_time_odds_each_engine_plays_and_is_checked_on_its_own_clock() {
    let dir = TempDir::new("time-odds");
    let (_coordinator, address) = start_coordinator(&dir.0, 0, 10).await;
    let mut admin = client(address, &token(&dir.0)).await;
    let engine = binary("xq-engine");
    let engine = engine.to_str().unwrap();
    let games = ["games", "--games", "4", "--max-plies", "40", "--no-bench", "--new", engine, "--base", engine];
    // Time odds are of one kind: a clock against nodes is refused, naming both.
    let refused = xq_refused(address, &dir.0, &[&games[..], &["--tc", "1+0.02", "--base-tc", "nodes=100"]].concat());
    assert!(refused.contains("time odds nodes=100 against 1+0.02"), "{refused}");

    let job = job_of(&xq_at(address, &dir.0, &[&games[..], &["--tc", "1+0.02", "--base-tc", "4+0.08"]].concat()));
    let _worker = start_worker_with(&mut admin, address, dir.0.join("w0"), "w0", &[]).await;
    let done = wait_for(&mut admin, job, Duration::from_secs(300), "the test to end", |j| j.state != "running").await;
    // Every game was replayed by the coordinator against each side's own clock.
    assert_eq!((done.state.as_str(), done.units_done, done.refused_reports), ("finished", 2, 0), "{done:?}");
    assert!(done.summary.starts_with("new vs base, 1+0.02 vs 4+0.08, wxf"), "{}", done.summary);
    // Its clocks were chosen together: a clone at another keeps none of them.
    let refused = xq_refused(address, &dir.0, &["clone", &job.to_string(), "--preset", "ltc"]);
    assert!(refused.contains("plays with time odds"), "{refused}");
    let games = job_games(&mut admin, job).await;
    assert_eq!(games.len(), 4);
    for game in &games {
        let new_is_red = game.tag("White") == Some("new");
        let (red, black) = if new_is_red { ("1+0.02", "4+0.08") } else { ("4+0.08", "1+0.02") };
        assert_eq!((game.tag("WhiteTimeControl"), game.tag("BlackTimeControl")), (Some(red), Some(black)));
        assert_eq!(game.tag("TimeControl"), None, "one clock would say there were no odds");
    }
    // The engine with four times the clock thinks longer (our time manager spends a
    // share of what is left): the base's clock reached it.
    let seconds = thinking(&games);
    assert!(seconds["base"] > 2.0 * seconds["new"], "{seconds:?}");
}

/// An engine that plays as our engine does but whose `bench` prints a fixed signature
/// and the speed written in `speed` (nodes per second): a machine of any speed, chosen
/// by the test.
fn engine_of_speed(dir: &Path, speed: &Path) -> std::path::PathBuf {
    let script = format!(
        "#!/bin/sh\nif [ \"$1\" = bench ]; then\n  echo 'Nodes searched  : 4242'\n  echo \"Nodes/second    : $(cat {speed})\"\n  exit 0\nfi\nexec {engine} \"$@\"\n",
        speed = speed.display(),
        engine = binary("xq-engine").display(),
    );
    executable(dir, "engine-of-speed", &script)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clocks_are_scaled_by_the_tested_engines_speed_on_the_worker() {
    let dir = TempDir::new("engine-speed");
    // A reference no machine reaches: scaled by our engine's speed, every worker
    // would count four times slower and play 4+0.04.
    let args = ["--work-seconds", "15", "--lease-seconds", "10", "--reference-nps", "1000000000000"];
    let (_coordinator, address) = start_coordinator_with(&dir.0, 0, &args, &[]).await;
    let mut admin = client(address, &token(&dir.0)).await;
    let speed = dir.0.join("speed");
    let engine = engine_of_speed(&dir.0, &speed);
    let engine = engine.to_str().unwrap();
    // At submission the engine runs at 2,000,000 nodes a second ...
    std::fs::write(&speed, "2000000\n").unwrap();
    #[rustfmt::skip]
    let job = job_of(&xq_at(address, &dir.0, &[
        "games", "--games", "2", "--tc", "1+0.01", "--max-plies", "20", "--new", engine, "--base", engine,
    ]));
    let submitted = admin.get_job(xq_proto::v1::JobId { job_id: job }).await.unwrap().into_inner();
    assert!(submitted.summary.contains("1+0.01"), "{}", submitted.summary);
    // ... and at half that on the worker: its clocks are twice the test's.
    std::fs::write(&speed, "1000000\n").unwrap();
    // The engine runs this build's engine from where it is, which no sandbox shows.
    let _worker = start_worker_with(&mut admin, address, dir.0.join("w0"), "w0", &["--no-sandbox"]).await;
    let done = wait_for(&mut admin, job, Duration::from_secs(300), "the test to end", |j| j.state != "running").await;
    assert_eq!((done.state.as_str(), done.units_done, done.refused_reports), ("finished", 1, 0), "{done:?}");
    for game in job_games(&mut admin, job).await {
        assert_eq!(game.tag("TimeControl"), Some("2+0.02"), "scaled by the engines' speed, not ours (4+0.04)");
    }
}
