//! Self-play chunks are re-read bit for bit, every record a legal position with a
//! legal best move and the game's result, for both games.

use xq_engine::variant::Variant;
use xq_engine::xiangqi::data::{read_chunk, read_xiongqi_chunk, write_chunk, write_xiongqi_chunk};
use xq_engine::xiangqi::pgn::{PgnGame, parse_pgn};
use xq_engine::xiangqi::rules::RuleSet;
use xq_engine::xiangqi::rules::verify::{Tally, check_game};
use xq_engine::xiangqi::selfplay::{PlaySettings, fresh_game};
use xq_worker::selfplay::{SelfPlaySettings, load_self_play_net, run_selfplay};

#[test]
fn selfplay_chunks_reread_bit_for_bit() {
    let out = std::env::temp_dir().join(format!("xq-selfplay-{}", std::process::id()));
    let settings = SelfPlaySettings {
        play: PlaySettings {
            nodes: 300,
            random_plies: 6,
            seed: 11,
            rules: RuleSet::Wxf,
            max_plies: 200,
            network: None,
        },
        games: 6,
        threads: 2,
        chunk_records: 200,
        out: out.clone(),
        variant: Variant::Xiangqi,
        pgn_out: None,
    };
    let report = run_selfplay(&settings).expect("self-play runs");
    assert!(report.positions > 100);
    let mut reread = 0;
    for path in &report.chunks {
        let bytes = std::fs::read(path).expect("chunk file");
        let records = read_chunk(&bytes).expect("a valid chunk");
        assert_eq!(write_chunk(&records), bytes, "{}", path.display());
        assert!(records.iter().all(|r| r.ply >= 6));
        reread += records.len();
    }
    assert_eq!(reread, report.positions);
    std::fs::remove_dir_all(&out).ok();
}

#[test]
fn xiongqi_selfplay_chunks_reread_bit_for_bit() {
    let out = std::env::temp_dir().join(format!("xq-selfplay-xiongqi-{}", std::process::id()));
    let settings = SelfPlaySettings {
        play: PlaySettings { nodes: 300, random_plies: 4, seed: 5, rules: RuleSet::Wxf, max_plies: 200, network: None },
        games: 6,
        threads: 2,
        chunk_records: 150,
        out: out.clone(),
        variant: Variant::Xiongqi,
        pgn_out: None,
    };
    let report = run_selfplay(&settings).expect("self-play runs");
    assert!(report.positions > 50, "{report:?}");
    let mut reread = 0;
    let mut decided = 0;
    for path in &report.chunks {
        let bytes = std::fs::read(path).expect("chunk file");
        let records = read_xiongqi_chunk(&bytes).expect("a valid Xiongqi chunk");
        assert_eq!(write_xiongqi_chunk(&records), bytes, "{}", path.display());
        assert!(read_chunk(&bytes).is_err(), "not readable as Xiangqi");
        assert!(records.iter().all(|r| r.ply >= 4));
        decided += records.iter().filter(|r| r.result != xq_engine::xiangqi::rules::Outcome::Draw).count();
        reread += records.len();
    }
    assert_eq!(reread, report.positions);
    assert!(decided > 0, "some games end by the rules");
    std::fs::remove_dir_all(&out).ok();
}

/// With a net, the searches score with it: the same games (same seed) get other scores
/// than on the handcrafted evaluation, and the net's run is repeatable.
#[test]
fn selfplay_with_a_net_evaluates_with_it() {
    let run = |label: &str, network: Option<std::sync::Arc<xq_engine::xiangqi::nnue::Network>>| {
        let out = std::env::temp_dir().join(format!("xq-selfplay-net-{label}-{}", std::process::id()));
        let settings = SelfPlaySettings {
            play: PlaySettings { nodes: 200, random_plies: 6, seed: 3, rules: RuleSet::Wxf, max_plies: 40, network },
            games: 2,
            threads: 1,
            chunk_records: 10_000,
            out: out.clone(),
            variant: Variant::Xiangqi,
            pgn_out: None,
        };
        let report = run_selfplay(&settings).expect("self-play runs");
        let records: Vec<_> =
            report.chunks.iter().flat_map(|p| read_chunk(&std::fs::read(p).unwrap()).unwrap()).collect();
        std::fs::remove_dir_all(&out).ok();
        records.iter().map(|r| (r.position.to_string(), r.score)).collect::<Vec<_>>()
    };
    let net = std::sync::Arc::new(xq_engine::xiangqi::nnue::Network::random(9));
    let handcrafted = run("hce", None);
    let with_net = run("a", Some(net.clone()));
    assert!(!with_net.is_empty());
    assert_eq!(with_net, run("b", Some(net)), "a net's self-play is repeatable");
    assert_ne!(with_net, handcrafted, "the net, not the handcrafted evaluation, scored the games");
}

/// A self-play net is loaded for Xiangqi only, and a file that is not a net is named.
#[test]
fn a_self_play_net_must_be_a_xiangqi_net() {
    let dir = std::env::temp_dir().join(format!("xq-selfplay-net-load-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (net, junk) = (dir.join("a.xqnn"), dir.join("junk.xqnn"));
    std::fs::write(&net, xq_engine::xiangqi::nnue::Network::random(1).to_bytes()).unwrap();
    std::fs::write(&junk, b"not a net").unwrap();
    assert!(load_self_play_net(&net, "a.xqnn", Variant::Xiangqi).is_ok());
    let xiongqi = load_self_play_net(&net, "a.xqnn", Variant::Xiongqi).unwrap_err().to_string();
    assert!(xiongqi.contains("a.xqnn") && xiongqi.contains("Xiangqi only"), "{xiongqi}");
    let unreadable = load_self_play_net(&junk, "junk.xqnn", Variant::Xiangqi).unwrap_err().to_string();
    assert!(unreadable.starts_with("the net junk.xqnn: "), "{unreadable}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn fresh_verification_games_are_the_same_whoever_plays_them() {
    let settings =
        PlaySettings { nodes: 20, random_plies: 8, seed: 5, rules: RuleSet::Wxf, max_plies: 400, network: None };
    let whole: Vec<PgnGame> = (0..8).map(|g| fresh_game(&settings, g)).collect();
    // Two workers, each with a unit of the job, on threads of their own, the later unit
    // first, after other games: the same games, numbered by their place in the job.
    let (later, earlier) = std::thread::scope(|scope| {
        let later = scope.spawn(|| (4..8).map(|g| fresh_game(&settings, g)).collect::<Vec<_>>());
        let earlier = scope.spawn(|| {
            fresh_game(&PlaySettings { seed: 99, ..settings.clone() }, 0);
            (0..4).map(|g| fresh_game(&settings, g)).collect::<Vec<_>>()
        });
        (later.join().unwrap(), earlier.join().unwrap())
    });
    assert_eq!([earlier, later].concat(), whole);
    assert_eq!(whole[5].tag("Round"), Some("6"));
    // The worker's self-play run plays the same game from the same seed when its table
    // starts empty: one game, one thread.
    let dir = std::env::temp_dir().join(format!("xq-fresh-{}", std::process::id()));
    let run = SelfPlaySettings {
        play: PlaySettings { nodes: 20, random_plies: 8, seed: 5, rules: RuleSet::Wxf, max_plies: 400, network: None },
        games: 1,
        threads: 1,
        chunk_records: 1000,
        out: dir.join("chunks"),
        variant: Variant::Xiangqi,
        pgn_out: Some(dir.join("games.pgn")),
    };
    std::fs::create_dir_all(&dir).unwrap();
    run_selfplay(&run).unwrap();
    let written = parse_pgn(&std::fs::read_to_string(dir.join("games.pgn")).unwrap()).unwrap();
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(written[0].moves, whole[0].moves);
    // Each game seeded apart, each a legal game that ends where WXF rules or at 400 plies.
    assert!(whole.windows(2).all(|pair| pair[0].moves[..8] != pair[1].moves[..8]));
    let mut tally = Tally::default();
    for game in &whole {
        check_game(game, &[RuleSet::Wxf, RuleSet::Cxq], "g", &mut tally, None).unwrap();
        assert!(game.moves.len() > 8, "{game:?}");
    }
    assert_eq!((tally.games, tally.refused), (8, 0));
}
