//! Whole clusters of real processes for the other job kinds: an SPSA run, tournaments
//! (round robin, Swiss, knockout) and a verification job across two workers.

use crate::cluster::{start_coordinator, start_worker, token, wait_for, xq_at};
use crate::common::{Client, TempDir, binary, client, collect};
use std::path::Path;
use std::time::{Duration, Instant};
use xq_proto::v1;

/// SPSA across a fleet, from the command line: `xq spsa` tunes our engine's Depth
/// Limit (a spin option of every build, where deeper is stronger) with two real
/// workers; theta must climb from its start, `xq spsa-result` prints the values as
/// UCI options and writes the history, and the counts equal the stored games.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_spsa_run_across_two_workers_climbs_towards_the_deeper_search() {
    let dir = TempDir::new("cluster-spsa");
    let (_coordinator, address) = start_coordinator(&dir.0, 0, 10).await;
    let mut admin = client(address, &token(&dir.0)).await;
    let params = dir.0.join("params.txt");
    std::fs::write(&params, "Depth Limit, 2, 1, 4, 1, 0.05\n").unwrap();
    let book = Path::new(env!("CARGO_MANIFEST_DIR")).join("../books/xiangqi-2ply.epd");
    let xq = |args: &[&str]| xq_at(address, &dir.0, args);
    let engine = binary("xq-engine");
    let submitted = xq(&[
        "spsa",
        "--engine",
        engine.to_str().unwrap(),
        "--params",
        params.to_str().unwrap(),
        "--pairs",
        "40",
        "--tc",
        "depth=4",
        "--book",
        book.to_str().unwrap(),
        "--max-plies",
        "160",
    ]);
    let job = crate::cluster::job_of(&submitted);
    let mut workers = Vec::new();
    for i in 0..2 {
        workers.push(start_worker(&mut admin, address, dir.0.join(format!("w{i}")), &format!("w{i}")).await);
    }
    let state =
        wait_for(&mut admin, job, Duration::from_secs(600), "the SPSA run to end", |j| j.state != "running").await;
    for mut worker in workers {
        worker.start_kill().unwrap();
        worker.wait().await.unwrap();
    }
    let spsa = state.spsa.clone().unwrap();
    assert_eq!(spsa.iterations, state.units_done);
    assert!(spsa.iterations >= 40, "{spsa:?}");
    let depth = spsa.parameters[0].value;
    assert!(depth > 2.5, "theta {depth}: plus and minus differ by depth, the deeper side wins, theta climbs");
    let csv = dir.0.join("history.csv");
    let result = xq(&["spsa-result", &job.to_string(), "--csv", csv.to_str().unwrap()]);
    assert!(result.contains(&format!("setoption name Depth Limit value {}", depth.round())), "{result}");
    assert!(result.contains("Depth Limit, "), "{result}");
    let history = std::fs::read_to_string(&csv).unwrap();
    assert!(history.starts_with("pairs,\"Depth Limit\"\n0,2\n"), "{history}");
    // The games were played at plus's and minus's depths, both named in the PGN.
    let text: String = collect(admin.download_games(v1::JobId { job_id: job }).await.unwrap().into_inner())
        .await
        .into_iter()
        .map(|b| b.pgn)
        .collect();
    assert!(text.contains("[White \"plus\"]") && text.contains("[White \"minus\"]"));
    // Pairs in play at the end still count, each once: theta has moved by as many.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let settled = admin.get_job(v1::JobId { job_id: job }).await.unwrap().into_inner();
    assert_eq!(settled.spsa.unwrap().iterations, settled.units_done);
    eprintln!("Depth Limit after {} pairs: {depth:.3}", spsa.iterations);
}

/// The six-engine event across a fleet, from the command line: `xq tournament`
/// makes a test per pairing of a double round robin of our engine at depths 1 to 3 and
/// on its handcrafted evaluation, Fairy-Stockfish and Sjaak II (both over UCI with ranks
/// 1-10, Sjaak II reading H and E in FEN), two real workers play them, and the
/// standings `xq crosstable` prints equal a recount of the stored games (2-1-0 points,
/// Article 9.1).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tournament_across_two_workers_stands_as_its_games_recount() {
    let dir = TempDir::new("cluster-tournament");
    let (_coordinator, address) = start_coordinator(&dir.0, 0, 10).await;
    let mut admin = client(address, &token(&dir.0)).await;
    let xq = |args: &[&str]| xq_at(address, &dir.0, args);
    let engine = binary("xq-engine");
    let engine = engine.to_str().unwrap();
    let book = Path::new(env!("CARGO_MANIFEST_DIR")).join("../books/xiangqi-2ply.epd");
    let mut args = vec!["tournament".to_owned()];
    let mut flag = |name: &str, value: String| args.extend([name.to_owned(), value]);
    for name in ["d1", "d2", "d3", "handcrafted"] {
        flag("--engine", format!("{name}={engine}"));
    }
    flag("--engine", "fairy-stockfish=/usr/games/fairy-stockfish".to_owned());
    flag("--engine", "sjaakii=/usr/games/sjaakii".to_owned());
    for depth in 1..=3 {
        flag("--engine-option", format!("d{depth}:Depth Limit={depth}"));
    }
    flag("--engine-option", "handcrafted:UseNNUE=false".to_owned());
    flag("--engine-setting", "fairy-stockfish:ranks=1-10".to_owned());
    flag("--engine-setting", "sjaakii:ranks=1-10".to_owned());
    flag("--engine-setting", "sjaakii:fen=he".to_owned());
    // A depth, not a clock: Sjaak II does not honour `go movetime`.
    for (name, value) in [("--games-per-pairing", "2"), ("--tc", "depth=3"), ("--max-plies", "160")] {
        flag(name, value.to_owned());
    }
    flag("--book", book.to_str().unwrap().to_owned());
    let (tournament, recount, games) = play_fleet_event(&mut admin, address, &dir.0, &args).await;
    assert_eq!(games, 30, "fifteen pairings of two games");
    assert_eq!(tournament.standings.len(), 6);
    // Every engine is rated; an engine that won or lost every game needs the prior.
    assert!(tournament.standings.iter().all(|s| s.elo_error > 0.0), "{:?}", tournament.standings);
    let swept = tournament.standings.iter().any(|s| s.points == 0.0 || s.points == 2.0 * f64::from(s.games));
    assert_eq!(tournament.rating_prior_draws > 0.0, swept);
    let crosstable = xq(&["crosstable", &tournament.tournament_id.to_string()]);
    for standing in &tournament.standings {
        assert_eq!(standing.points, recount[&standing.engine], "{}: {crosstable}", standing.engine);
        assert!(crosstable.contains(&format!(" {} ", standing.engine)), "{crosstable}");
    }
    let id = tournament.tournament_id;
    assert!(crosstable.contains(&format!("tournament {id} [finished] double-round-robin")), "{crosstable}");
    let listed = xq(&["tournaments"]);
    assert!(
        listed.contains(&format!("tournament {id} [finished] double-round-robin: 6 engines, 15 pairings")),
        "{listed}"
    );
}

/// Creates the event `xq ARGS` describes, lets two real workers play it to its end, and
/// returns it with each engine's points recounted from the event's PGN (`xq pgn
/// --tournament`, 2-1-0) and the number of games.
async fn play_fleet_event(
    admin: &mut Client,
    address: std::net::SocketAddr,
    dir: &Path,
    args: &[String],
) -> (v1::Tournament, std::collections::HashMap<String, f64>, usize) {
    let created = xq_at(address, dir, &args.iter().map(String::as_str).collect::<Vec<_>>());
    let id = crate::cluster::job_of(&created);
    let mut workers = Vec::new();
    for i in 0..2 {
        workers.push(start_worker(admin, address, dir.join(format!("w{i}")), &format!("w{i}")).await);
    }
    let start = Instant::now();
    let tournament = loop {
        let t = admin.get_tournament(v1::TournamentId { tournament_id: id }).await.unwrap().into_inner();
        if t.state == "finished" {
            break t;
        }
        assert!(start.elapsed() < Duration::from_secs(600), "the tournament did not finish: {t:?}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    for mut worker in workers {
        worker.start_kill().unwrap();
        worker.wait().await.unwrap();
    }
    // The recount reads the event's PGN as a user downloads it.
    let text = xq_at(address, dir, &["pgn", "--tournament", &id.to_string()]);
    let mut recount = std::collections::HashMap::<String, f64>::new();
    let games = xq_engine::xiangqi::pgn::parse_pgn(&text).unwrap();
    let event =
        if tournament.description.is_empty() { format!("tournament {id}") } else { tournament.description.clone() };
    for game in &games {
        assert_eq!(game.tag("Event"), Some(event.as_str()));
        let (red, black) = (game.tag("White").unwrap().to_owned(), game.tag("Black").unwrap().to_owned());
        let red_points = match game.tag("Result").unwrap() {
            "1-0" => 2.0,
            "0-1" => 0.0,
            _ => 1.0,
        };
        *recount.entry(red).or_default() += red_points;
        *recount.entry(black).or_default() += 2.0 - red_points;
    }
    let games = games.len();
    (tournament, recount, games)
}

/// `xq tournament` arguments for an event of our engine capped at depths 1 to
/// `depths` (named dN), from the two-ply book, with `system`'s settings.
fn depth_event_args(system: &[&str], depths: u32) -> Vec<String> {
    let engine = binary("xq-engine");
    let book = Path::new(env!("CARGO_MANIFEST_DIR")).join("../books/xiangqi-2ply.epd");
    let mut args: Vec<String> = std::iter::once("tournament").chain(system.iter().copied()).map(String::from).collect();
    for depth in 1..=depths {
        args.extend(["--engine".to_owned(), format!("d{depth}={}", engine.display())]);
        args.extend(["--engine-option".to_owned(), format!("d{depth}:Depth Limit={depth}")]);
    }
    args.extend(["--max-plies".to_owned(), "160".to_owned(), "--book".to_owned(), book.display().to_string()]);
    args
}

/// A Swiss event of our engine at five depths across two real workers, three rounds:
/// each round's tests are made when the one before has ended, and the standings equal
/// a recount of the stored games plus a win's points for each game of a round sat out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_swiss_event_across_two_workers_stands_as_its_games_and_byes_recount() {
    let dir = TempDir::new("cluster-swiss");
    let (_coordinator, address) = start_coordinator(&dir.0, 0, 10).await;
    let mut admin = client(address, &token(&dir.0)).await;
    let args = depth_event_args(&["--system", "swiss", "--rounds", "3", "--tc", "depth=3"], 5);
    let (tournament, mut recount, games) = play_fleet_event(&mut admin, address, &dir.0, &args).await;
    assert_eq!(tournament.pairings.len(), 6, "three rounds of two meetings");
    assert_eq!(games, 12);
    for round in tournament.pairings.chunks(2) {
        let sat_out = (1..=5)
            .map(|d| format!("d{d}"))
            .find(|name| !round.iter().any(|p| &p.first == name || &p.second == name))
            .unwrap();
        *recount.entry(sat_out).or_default() += 4.0;
    }
    for standing in &tournament.standings {
        assert_eq!(standing.points, recount[&standing.engine], "{}: {:?}", standing.engine, tournament.standings);
    }
}

/// A knockout of our engine at four depths across two real workers, tie-breaks at a
/// smaller depth: it ends with one champion, and the standings' points equal a recount
/// of the stored games, tie-breaks included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_knockout_across_two_workers_ends_with_one_champion() {
    let dir = TempDir::new("cluster-knockout");
    let (_coordinator, address) = start_coordinator(&dir.0, 0, 10).await;
    let mut admin = client(address, &token(&dir.0)).await;
    let system = ["--system", "knockout", "--tc", "depth=3", "--tie-break-tc", "depth=2", "--tie-break-pairs", "1"];
    let args = depth_event_args(&system, 4);
    let (tournament, recount, games) = play_fleet_event(&mut admin, address, &dir.0, &args).await;
    assert!((3..=5).contains(&tournament.pairings.len()), "three matches and up to two tie-breaks");
    assert_eq!(games, 2 * tournament.pairings.len());
    let places: Vec<u32> = tournament.standings.iter().map(|s| s.place).collect();
    assert_eq!(places, [1, 2, 3, 3], "{:?}", tournament.standings);
    for standing in &tournament.standings {
        assert_eq!(standing.points, recount[&standing.engine], "{}: {:?}", standing.engine, tournament.standings);
    }
}

/// A verification job of 1,730 games (the 173 ruled repetition cases, ten times over)
/// cut into 18 units and verified by two real workers, with Fairy-Stockfish's rules
/// (pyffish, which the test command installs) as the reference: `xq verification`
/// prints the counts one pass of the engine over the whole file gives; where the
/// reference parts from WXF, it is always for a documented difference (here the six
/// cases whose last position occurs a third time: the reference draws there, the
/// books at the fourth); the downloads hold every game where anything parts (JSON
/// lines, and PGN that reads back).
#[tokio::test]
async fn a_verification_job_across_two_workers_counts_what_one_pass_over_the_games_does() {
    use xq_engine::xiangqi::rules::verify::{report_tally, unit_report};
    let dir = TempDir::new("cluster");
    let (_coordinator, address) = start_coordinator(&dir.0, 0, 10).await;
    let mut admin = client(address, &token(&dir.0)).await;
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("../engine/tests/data/wxf-repetition-cases.json");
    let cases: Vec<serde_json::Value> = serde_json::from_str(&std::fs::read_to_string(data).unwrap()).unwrap();
    let once: String = cases
        .iter()
        .map(|case| {
            let moves: Vec<&str> = case["moves"].as_array().unwrap().iter().map(|m| m.as_str().unwrap()).collect();
            format!("[FEN \"{}\"]\n\n{} *\n\n", case["fen"].as_str().unwrap(), moves.join(" "))
        })
        .collect();
    let text = once.repeat(10);
    let path = dir.0.join("cases.pgn");
    std::fs::write(&path, &text).unwrap();
    let args = ["verify", "--pgn", path.to_str().unwrap(), "--games-per-unit", "100", "--reference", "pyffish"];
    let created = xq_at(address, &dir.0, &args);
    let id = crate::cluster::job_of(&created);
    assert!(created.contains("(18 units)"), "{created}");
    let mut workers = Vec::new();
    for i in 0..2 {
        workers.push(start_worker(&mut admin, address, dir.0.join(format!("w{i}")), &format!("w{i}")).await);
    }
    let state =
        wait_for(&mut admin, id, Duration::from_secs(300), "a verification job", |j| j.state != "running").await;
    assert_eq!((state.state.as_str(), state.units_done, state.positions), ("finished", 18, 1730));

    let games = xq_engine::xiangqi::pgn::parse_pgn(&text).unwrap();
    let expected =
        report_tally(&unit_report(&games, 1, &xq_coordinator::jobs::verification::DEFAULT_RULES, None).unwrap())
            .unwrap();
    assert!(expected.parting > 0, "the cases part the rule sets somewhere");
    let printed = xq_at(address, &dir.0, &["verification", &id.to_string()]);
    // Six cases, ten times each, part from the reference alone.
    let with_reference = expected.parting + 60;
    let head = format!(
        "1730 of 1730 games verified under wxf, asian, cxq; {with_reference} where the rule sets part, {} that could \
         not be replayed",
        expected.refused
    );
    assert!(printed.contains(&head), "{printed}\nwanted: {head}");
    for (kind, count) in &expected.by_kind {
        assert!(printed.contains(&format!("{count:>8}  {kind}\n")), "{kind}: {count} in\n{printed}");
    }
    let why = "wxf vs fairy-stockfish, why: the reference draws a repetition at its third occurrence";
    assert!(printed.contains(&format!("      60  {why}")), "{printed}");
    assert!(!printed.contains("unexplained"), "{printed}");
    let lines_path = dir.0.join("report.jsonl");
    xq_at(address, &dir.0, &["verification", &id.to_string(), "--jsonl", lines_path.to_str().unwrap()]);
    let lines = std::fs::read_to_string(&lines_path).unwrap();
    assert_eq!(lines.lines().count() as u64, with_reference + expected.refused);
    let pgn_path = dir.0.join("parting.pgn");
    xq_at(address, &dir.0, &["verification", &id.to_string(), "--pgn", pgn_path.to_str().unwrap()]);
    let parting = xq_engine::xiangqi::pgn::parse_pgn(&std::fs::read_to_string(&pgn_path).unwrap()).unwrap();
    assert_eq!(parting.len() as u64, with_reference);

    // Fresh self-play games, played by the workers for the job, twice over: the two
    // jobs' units fall to the workers as they come, and the counts are the same, since
    // every game is played the same wherever it is played. Where the reference parts
    // from WXF on these games, a documented difference explains it.
    let mut summaries = Vec::new();
    for _ in 0..2 {
        let args = ["verify", "--selfplay", "400", "--games-per-unit", "25", "--reference", "pyffish"];
        let created = xq_at(address, &dir.0, &args);
        assert!(created.contains("verification of 400 self-play games (20 nodes, 8 random plies)"), "{created}");
        let id = crate::cluster::job_of(&created);
        let state =
            wait_for(&mut admin, id, Duration::from_secs(300), "a self-play verification", |j| j.state != "running")
                .await;
        assert_eq!((state.state.as_str(), state.units_done, state.positions), ("finished", 16, 400));
        let summary = admin.get_verification(v1::JobId { job_id: id }).await.unwrap().into_inner();
        assert_eq!((summary.games, summary.refused), (400, 0));
        assert!(summary.parting > 0, "repetitions the rule sets part on: {summary:?}");
        assert!(summary.by_kind.keys().all(|kind| !kind.contains("unexplained")), "{:?}", summary.by_kind);
        summaries.push((summary.parting, summary.by_kind, summary.by_articles));
    }
    assert_eq!(summaries[0], summaries[1]);
    // Played with a net (`--net`): the workers fetch it and play with it; the
    // coordinator's spot checks play some games again with it and accept every report.
    let net = dir.0.join("default.xqnn");
    let net_path = concat!(env!("CARGO_MANIFEST_DIR"), "/../engine/nets/default.xqnn.zst");
    std::fs::write(&net, zstd::decode_all(std::fs::File::open(net_path).unwrap()).unwrap()).unwrap();
    let args = ["verify", "--selfplay", "100", "--games-per-unit", "25", "--net", net.to_str().unwrap()];
    let created = xq_at(address, &dir.0, &args);
    assert!(created.contains("(20 nodes, 8 random plies, net default.xqnn)"), "{created}");
    let id = crate::cluster::job_of(&created);
    let state =
        wait_for(&mut admin, id, Duration::from_secs(300), "a verification with a net", |j| j.state != "running").await;
    assert_eq!((state.state.as_str(), state.units_done, state.refused_reports), ("finished", 4, 0));

    // Generated rule-hard games with the metamorphic properties: the workers report
    // what one pass of the engine over the same games gives, and the arbiter keeps
    // every property on them (the build with the window bug does not: scripts/test).
    let args = ["verify", "--generate", "600", "--first", "5000", "--metamorphic", "--games-per-unit", "150"];
    let created = xq_at(address, &dir.0, &args);
    assert!(
        created.contains("generated rule-hard games (from hard game 5000) under wxf, asian, cxq with the metamorphic"),
        "{created}"
    );
    let id = crate::cluster::job_of(&created);
    let state =
        wait_for(&mut admin, id, Duration::from_secs(300), "a generated verification", |j| j.state != "running").await;
    assert_eq!((state.state.as_str(), state.units_done, state.refused_reports), ("finished", 4, 0));
    let mut expected = xq_engine::xiangqi::rules::verify::Tally::default();
    for number in 5000..5600 {
        let game = xq_engine::xiangqi::rules::hard_games::hard_game_pgn(number);
        let rules = xq_coordinator::jobs::verification::DEFAULT_RULES;
        xq_engine::xiangqi::rules::verify::check_game_with(&game, &rules, "g", &mut expected, None, true).unwrap();
    }
    let summary = admin.get_verification(v1::JobId { job_id: id }).await.unwrap().into_inner();
    assert_eq!((summary.games, summary.parting, summary.metamorphic), (600, expected.parting, 0));
    assert_eq!(summary.by_kind, expected.by_kind.into_iter().collect());
    assert!(summary.parting > 0 && summary.rechecked_lines > 0, "{summary:?}");
    for mut worker in workers {
        worker.start_kill().unwrap();
        worker.wait().await.unwrap();
    }
}
