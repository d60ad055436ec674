//! Rule verification jobs: a PGN's games (uploaded, or a test's stored games) cut into
//! units, each verified by a worker with the engine's `unit_report` and reported; the
//! coordinator refuses reports that do not account for their unit's games, sums the
//! tallies to what one pass over the whole file gives, serves the parting games, and
//! keeps the job across a restart; with a reference, units are reported again by other
//! workers, and a forger of the reference's verdicts outvoted and quarantined.

use std::collections::BTreeMap;

use xq_coordinator::jobs::verification::DEFAULT_RULES;
use xq_coordinator::scheduler::config::SchedulerConfig;
use xq_engine::xiangqi::pgn::{parse_pgn, parse_pgn_bytes};
use xq_engine::xiangqi::rules::RuleSet;
use xq_engine::xiangqi::rules::verify::{Tally, check_game, unit_report};
use xq_engine::xiangqi::selfplay::fresh_game;
use xq_proto::v1;

use crate::common::*;

/// A chariot chasing a lone cannon (WXF and Asian: the chaser's loss at ply 8; CXQ
/// allows six chasing moves before it rules), a quiet game, one with an illegal second
/// move, and a Black chariot shuffling beside a Red cannon that CXQ does not rule on
/// within the game.
pub const GAMES: &str = "[FEN \"4k4/9/9/9/9/9/9/9/1R7/c2K5 w - - 0 1\"]\n\n\
    b1a1 a0b0 a1b1 b0a0 b1a1 a0b0 a1b1 b0a0 b1a1 a0b0 a1b1 b0a0 b1a1 a0b0 a1b1 b0a0 *\n\n\
    [Event \"quiet\"]\n\n1. h2e2 h9g7 *\n\n\
    [Event \"bad\"]\n\n1. h2e2 e2e9 *\n\n\
    [FEN \"5k2C/1r7/9/9/9/9/9/9/9/4K4 b - - 0 1\"]\n\n\
    b8a8 i9h9 a8b8 h9i9 b8a8 i9h9 a8b8 h9i9 b8a8 i9h9 a8b8 h9i9 b8a8 i9h9 a8b8 h9i9 *\n";

/// Self-play settings for a verification's fresh games.
fn fresh(nodes: u64) -> v1::SelfPlaySpec {
    v1::SelfPlaySpec { nodes, random_plies: 8, seed: 3, ..Default::default() }
}

fn config() -> SchedulerConfig {
    SchedulerConfig { lease_seconds: 1000.0, reference_nps: 0, ..SchedulerConfig::default() }
}

/// Plays a worker's part: verifies each unit of `text` as `xq-worker` does, for the
/// lease it holds (if any) and then each it is given; returns the units reported.
pub async fn verify_all(worker: &mut Worker, mut held: Option<v1::Lease>, pgn: &[u8]) -> usize {
    let games = parse_pgn_bytes(pgn).unwrap();
    let mut reported = 0;
    loop {
        let lease = match held.take() {
            Some(lease) => lease,
            None => match worker.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease {
                Some(lease) => lease,
                None => return reported,
            },
        };
        let Some(v1::lease::Work::Verification(spec)) = &lease.work else { panic!("a verification lease: {lease:?}") };
        let rules: Vec<RuleSet> = spec.rules.iter().map(|r| r.parse().unwrap()).collect();
        for &unit in &lease.units {
            let per_unit = spec.games_per_unit as usize;
            let first = unit as usize * per_unit;
            let end = (first + per_unit).min(games.len());
            let report = unit_report(&games[first..end], first + 1, &rules, None).unwrap();
            let request = v1::VerificationReport { lease_id: lease.lease_id, unit, report };
            worker.report_verification(request.clone()).await.unwrap();
            // Resent, it counts once.
            worker.report_verification(request).await.unwrap();
            reported += 1;
        }
    }
}

/// A verification job's report lines, downloaded.
async fn report_lines(admin: &mut Client, job_id: u64) -> String {
    let stream = admin.download_verification(v1::JobId { job_id }).await.unwrap().into_inner();
    collect(stream).await.into_iter().map(|b| b.jsonl).collect()
}

#[tokio::test]
async fn a_verification_job_sums_its_units_to_one_pass_over_the_games_and_serves_the_parting_ones() {
    for backend in BACKENDS {
        let dir = TempDir::new("verification");
        let url = fresh_database(backend, &dir.0).await;
        let served = serve_on(&dir.0, &url, config(), 100).await;
        let mut admin = client(served.address, &served.client_token).await;
        let pgn = upload(&mut admin, "chases.pgn", "pgn", GAMES.as_bytes()).await.unwrap();
        let request = v1::CreateVerificationRequest {
            pgn: Some(pgn.clone()),
            games_per_unit: 3,
            description: "chases".to_owned(),
            ..Default::default()
        };
        let job = admin.create_verification(request.clone()).await.unwrap().into_inner();
        assert_eq!((job.kind.as_str(), job.units_total, job.rules.as_str()), ("verify", 2, "wxf,asian,cxq"));
        assert!(job.summary.contains("verification of 4 games of chases.pgn"), "{}", job.summary);

        // A report that leaves out a parting game with its tally made to agree passes
        // the shape checks; the coordinator's spot check verifies the unit's games
        // again and refuses it naming the game; the forger's lease goes back to the
        // queue, and it gets no more of the job until another worker's report of the
        // unit settles it.
        let mut forger = registered_worker(&served, "forger", &[]).await;
        let lease = forger.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
        let games = parse_pgn(GAMES).unwrap();
        let honest = unit_report(&games[..3], 1, &DEFAULT_RULES, None).unwrap();
        let kept = honest.lines().nth(1).unwrap();
        let mut tally = Tally::default();
        tally.count(Some(&serde_json::from_str(kept).unwrap()));
        tally.games = 3;
        let forged = format!("{kept}\n{}\n", serde_json::json!({ "tally": tally.to_json() }));
        let forged = v1::VerificationReport { lease_id: lease.lease_id, unit: lease.units[0], report: forged };
        let refused = forger.report_verification(forged).await.unwrap_err();
        assert!(
            refused.message().contains("a spot check finds game 1: left out, where the rule sets part"),
            "{backend:?}: {}",
            refused.message()
        );
        let standing = |workers: Vec<v1::WorkerInfo>| {
            let listed = workers.into_iter().find(|w| w.capabilities.as_ref().unwrap().name == "forger").unwrap();
            (listed.standing, listed.standing_reason)
        };
        let workers = admin.list_workers(v1::ListWorkersRequest {}).await.unwrap().into_inner().workers;
        assert_eq!(standing(workers).0, "active", "{backend:?}: not quarantined on the coordinator's word alone");
        assert!(forger.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.is_none());

        // A report that leaves out a parting game, or covers the wrong games, is refused
        // and counts nothing.
        let mut worker = registered_worker(&served, "w", &[]).await;
        let lease = worker.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
        let short = honest.lines().skip(1).map(|l| format!("{l}\n")).collect::<String>();
        let forged = v1::VerificationReport { lease_id: lease.lease_id, unit: lease.units[0], report: short };
        let refused = worker.report_verification(forged).await.unwrap_err();
        assert_eq!(refused.code(), tonic::Code::InvalidArgument, "{backend:?}");
        assert!(
            refused.message().contains("report of unit 0: a tally other than its lines give: 1 refused and 1 parting"),
            "{}",
            refused.message()
        );
        let wrong_games = unit_report(&games[..2], 1, &[RuleSet::Wxf], None).unwrap();
        let forged = v1::VerificationReport { lease_id: lease.lease_id, unit: lease.units[0], report: wrong_games };
        assert!(worker.report_verification(forged).await.unwrap_err().message().contains("a unit of 3"));
        let state = admin.get_job(v1::JobId { job_id: job.job_id }).await.unwrap().into_inner();
        assert_eq!((state.units_done, state.positions), (0, 0));

        // Honest reports: the units' tallies sum to one pass over the whole file.
        let mut all = Tally::default();
        for (index, game) in games.iter().enumerate() {
            let label = format!("game {}", index + 1);
            check_game(game, &DEFAULT_RULES, &label, &mut all, None).unwrap();
        }
        assert_eq!(lease.units[0], 0, "the forger's unit, leased again");
        assert_eq!(verify_all(&mut worker, Some(lease), GAMES.as_bytes()).await, 2);
        // The second worker's report of unit 0 passed: the forger is quarantined.
        let workers = admin.list_workers(v1::ListWorkersRequest {}).await.unwrap().into_inner().workers;
        let (standing, reason) = standing(workers);
        assert_eq!(standing, "quarantined", "{backend:?}");
        assert!(reason.contains("report of unit 0 of job") && reason.contains("verified the unit"), "{reason}");
        let state = admin.get_job(v1::JobId { job_id: job.job_id }).await.unwrap().into_inner();
        assert_eq!((state.state.as_str(), state.units_done, state.positions), ("finished", 2, 4), "{backend:?}");
        let summary = admin.get_verification(v1::JobId { job_id: job.job_id }).await.unwrap().into_inner();
        assert_eq!((summary.games, summary.games_total, summary.parting, summary.refused), (4, 4, 2, 1));
        assert_eq!((all.games, all.parting, all.refused), (4, 2, 1));
        assert_eq!(summary.by_kind, all.by_kind.clone().into_iter().collect());
        assert_eq!(summary.by_articles, all.by_articles.clone().into_iter().collect());
        // WXF and the Asian rules agree on every game; CXQ parts from both.
        assert!(
            summary.by_kind.keys().all(|kind| kind.ends_with("cxq") || kind.contains(" vs cxq:")),
            "{:?}",
            summary.by_kind
        );
        assert_eq!(summary.by_kind["wxf vs cxq: different ply"], 1, "{:?}", summary.by_kind);

        // The report's lines: both chases (games 1 and 4) and the unplayable game 3.
        let lines = report_lines(&mut admin, job.job_id).await;
        let named: Vec<String> = lines
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["game"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(named, ["game 1", "game 3", "game 4"]);

        // Restarted, the coordinator still has the job and its counts.
        drop(worker);
        drop(served);
        let served = serve_on(&dir.0, &url, config(), 100).await;
        let mut admin = client(served.address, &served.client_token).await;
        let again = admin.get_verification(v1::JobId { job_id: job.job_id }).await.unwrap().into_inner();
        // What the spot checks replayed is counted since the coordinator started.
        assert_eq!((again.spot_checked_games, again.rechecked_lines), (0, 0));
        assert_eq!(v1::VerificationSummary { spot_checked_games: 0, rechecked_lines: 0, ..summary }, again);

        // A test's stored games as the source: two games of a reported pair.
        let test_spec = test_request(&mut admin, 1, None).await;
        let test = admin.create_test(test_spec).await.unwrap().into_inner();
        let mut worker = registered_worker(&served, "w3", &[]).await;
        let lease = worker.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
        let report = v1::ReportPairsRequest {
            lease_id: lease.lease_id,
            pairs: vec![pair(lease.units[0], [2, 1])],
            cumulative: Some(totals(&[[2, 1]])),
            ..Default::default()
        };
        worker.report_pairs(report).await.unwrap();
        let from_test = v1::CreateVerificationRequest { test_job_id: test.job_id, ..Default::default() };
        let job = admin.create_verification(from_test).await.unwrap().into_inner();
        assert_eq!(job.units_total, 1);
        assert!(job.summary.contains(&format!("2 games of job-{}.pgn", test.job_id)), "{}", job.summary);
        let stored: String =
            collect(admin.download_games(v1::JobId { job_id: test.job_id }).await.unwrap().into_inner())
                .await
                .into_iter()
                .map(|b| b.pgn)
                .collect();
        assert_eq!(verify_all(&mut worker, None, stored.as_bytes()).await, 1);
        let summary = admin.get_verification(v1::JobId { job_id: job.job_id }).await.unwrap().into_inner();
        assert_eq!((summary.games, summary.refused), (2, 0), "{backend:?}");

        // Bad requests name what is wrong.
        let engine = upload(&mut admin, "engine", "engine", b"#!/bin/sh\n").await.unwrap();
        let cases = [
            (v1::CreateVerificationRequest { pgn: Some(engine), ..Default::default() }, "is a engine, not a PGN"),
            (v1::CreateVerificationRequest::default(), "name an uploaded PGN"),
            (v1::CreateVerificationRequest { rules: vec!["wxf".to_owned()], ..request.clone() }, "two or more"),
            (v1::CreateVerificationRequest { test_job_id: job.job_id, ..Default::default() }, "a verification job"),
            (v1::CreateVerificationRequest { selfplay: Some(fresh(20)), ..request.clone() }, "one of them"),
            (
                v1::CreateVerificationRequest { selfplay: Some(fresh(20)), generated: true, ..Default::default() },
                "one of them",
            ),
            (
                v1::CreateVerificationRequest { generated: true, games: 10, games_per_unit: 501, ..Default::default() },
                "games_per_unit: between 1 and 500 for generated games",
            ),
            (
                v1::CreateVerificationRequest {
                    generated: true,
                    first_generated: u64::MAX,
                    games: 10,
                    ..Default::default()
                },
                "first_generated: the games' numbers pass 2^64",
            ),
            (v1::CreateVerificationRequest { selfplay: Some(fresh(20)), ..Default::default() }, "games: no games"),
            (v1::CreateVerificationRequest { games: 10, selfplay: Some(fresh(0)), ..Default::default() }, "spec.nodes"),
            (
                v1::CreateVerificationRequest { games: 10, selfplay: Some(fresh(10_001)), ..Default::default() },
                "selfplay.nodes: at most 10000",
            ),
            (
                v1::CreateVerificationRequest {
                    games: 10,
                    selfplay: Some(v1::SelfPlaySpec { variant: "xiongqi".to_owned(), ..fresh(20) }),
                    ..Default::default()
                },
                "rule sets are Xiangqi's",
            ),
        ];
        for (request, message) in cases {
            let error = admin.create_verification(request).await.unwrap_err();
            assert!(error.message().contains(message), "{backend:?}: {} (wanted {message})", error.message());
        }
        let not_pgn = upload(&mut admin, "x.pgn", "pgn", b"1. h2e2 {unclosed").await.unwrap_err();
        assert!(not_pgn.message().contains("cannot be read"), "{}", not_pgn.message());
        let empty = upload(&mut admin, "empty.pgn", "pgn", b"\n").await.unwrap_err();
        assert!(empty.message().contains("holds no games"), "{}", empty.message());
        let test_summary = admin.get_verification(v1::JobId { job_id: test.job_id }).await.unwrap_err();
        assert!(test_summary.message().contains("not a verification job"));
    }
}

#[tokio::test]
async fn a_real_collection_uploaded_as_stored_is_verified_and_fresh_self_play_games_are_leased() {
    let backend = BACKENDS[0];
    let dir = TempDir::new("verification-collection");
    let url = fresh_database(backend, &dir.0).await;
    let served = serve_on(&dir.0, &url, config(), 100).await;
    let mut admin = client(served.address, &served.client_token).await;
    // 2,000 master games, Big5, moves in Chinese notation (engine/tests/data/collection).
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../engine/tests/data/collection/ccpd-2000.big5.pgn.zst");
    let bytes = zstd::decode_all(std::fs::File::open(path).unwrap()).unwrap();
    let pgn = upload(&mut admin, "ccpd.pgn", "pgn", &bytes).await.unwrap();
    let request = v1::CreateVerificationRequest { pgn: Some(pgn), games_per_unit: 500, ..Default::default() };
    let job = admin.create_verification(request).await.unwrap().into_inner();
    assert_eq!(job.units_total, 4);
    assert!(job.summary.contains("verification of 2000 games of ccpd.pgn"), "{}", job.summary);
    let mut worker = registered_worker(&served, "w", &[]).await;
    assert_eq!(verify_all(&mut worker, None, &bytes).await, 4);
    let summary = admin.get_verification(v1::JobId { job_id: job.job_id }).await.unwrap().into_inner();
    assert_eq!((summary.games, summary.refused), (2000, 0), "every move of every game read");
    let mut all = Tally::default();
    for (index, game) in parse_pgn_bytes(&bytes).unwrap().iter().enumerate() {
        check_game(game, &DEFAULT_RULES, &format!("game {}", index + 1), &mut all, None).unwrap();
    }
    assert_eq!(summary.parting, all.parting);
    assert!(summary.parting > 0);
    // The parting games come back as PGN in the product's notation (UCI), still
    // replaying to the same verdicts.
    let lines = report_lines(&mut admin, job.job_id).await;
    let parting = parse_pgn(&xq_coordinator::jobs::verification::parting::parting_pgns(&lines, job.job_id)).unwrap();
    assert_eq!(parting.len() as u64, summary.parting);
    let mut again = Tally::default();
    for game in &parting {
        assert!(game.moves.iter().all(|m| m.is_ascii() && m.len() == 4), "{:?}", game.moves);
        check_game(game, &DEFAULT_RULES, "again", &mut again, None).unwrap();
    }
    assert_eq!((again.parting, again.by_kind), (summary.parting, all.by_kind));

    // Fresh self-play games: the job counts them and leases the settings to play them by.
    let request = v1::CreateVerificationRequest {
        selfplay: Some(fresh(20)),
        games: 1000,
        games_per_unit: 100,
        priority: 1,
        ..Default::default()
    };
    let job = admin.create_verification(request).await.unwrap().into_inner();
    assert_eq!(job.units_total, 10);
    assert!(job.summary.contains("verification of 1000 self-play games (20 nodes, 8 random plies)"), "{}", job.summary);
    let lease = worker.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
    let Some(v1::lease::Work::Verification(spec)) = &lease.work else { panic!("{lease:?}") };
    assert_eq!((spec.selfplay.as_ref(), spec.pgn.as_ref(), spec.games), (Some(&fresh(20)), None, 1000));
    admin.stop_job(v1::JobId { job_id: job.job_id }).await.unwrap();

    // Played with a net: the worker plays the unit's games with it, and the
    // coordinator, loading it once, plays some of them again to check the report.
    let net_path = concat!(env!("CARGO_MANIFEST_DIR"), "/../engine/nets/default.xqnn.zst");
    let net_bytes = zstd::decode_all(std::fs::File::open(net_path).unwrap()).unwrap();
    let net = upload(&mut admin, "default.xqnn", "net", &net_bytes).await.unwrap();
    let with_net = v1::SelfPlaySpec { net: Some(net), ..fresh(20) };
    let request = v1::CreateVerificationRequest {
        selfplay: Some(with_net),
        games: 40,
        games_per_unit: 20,
        priority: 2,
        ..Default::default()
    };
    let job = admin.create_verification(request).await.unwrap().into_inner();
    let network = xq_engine::xiangqi::nnue::Network::from_bytes(&net_bytes).map(std::sync::Arc::new).unwrap();
    let mut worker = registered_worker(&served, "w2", &[]).await;
    let mut reported = 0;
    while reported < 2 {
        let lease = worker.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
        assert_eq!(lease.job_id, job.job_id);
        let Some(v1::lease::Work::Verification(spec)) = &lease.work else { panic!("{lease:?}") };
        let settings = xq_proto::self_play_games(spec.selfplay.as_ref().unwrap(), Some(network.clone())).unwrap();
        for &unit in &lease.units {
            let first = unit as usize * 20;
            let games: Vec<_> = (first..first + 20).map(|g| fresh_game(&settings, g)).collect();
            let report = unit_report(&games, first + 1, &DEFAULT_RULES, None).unwrap();
            worker
                .report_verification(v1::VerificationReport { lease_id: lease.lease_id, unit, report })
                .await
                .unwrap();
            reported += 1;
        }
    }
    let summary = admin.get_verification(v1::JobId { job_id: job.job_id }).await.unwrap().into_inner();
    assert_eq!((summary.games, summary.refused), (40, 0));
    // The same games on the handcrafted evaluation differ: the net decided them.
    let handcrafted = xq_proto::self_play_games(&fresh(20), None).unwrap();
    let with = xq_proto::self_play_games(&fresh(20), Some(network)).unwrap();
    assert!((0..40).any(|g| fresh_game(&handcrafted, g).moves != fresh_game(&with, g).moves));
}

/// A report of `lines` with the tally they give, over a unit of `games` games: what a
/// forger sends so that the counts agree.
fn with_tally(lines: &[String], games: u64) -> String {
    let mut tally = Tally::default();
    for line in lines {
        tally.count(Some(&serde_json::from_str(line).unwrap()));
    }
    tally.games = games;
    let mut report: String = lines.iter().map(|l| format!("{l}\n")).collect();
    report.push_str(&format!("{}\n", serde_json::json!({ "tally": tally.to_json() })));
    report
}

#[tokio::test]
async fn a_report_naming_a_game_twice_or_outside_its_unit_or_a_foreign_kind_is_refused_and_every_line_is_verified() {
    let backend = BACKENDS[0];
    let dir = TempDir::new("verification-names");
    let url = fresh_database(backend, &dir.0).await;
    // No budget for drawn games: only the reported lines are verified again.
    let config = SchedulerConfig { spot_check_plies_per_second: 0.0, ..config() };
    let served = serve_on(&dir.0, &url, config, 100).await;
    let mut admin = client(served.address, &served.client_token).await;
    let pgn = upload(&mut admin, "chases.pgn", "pgn", GAMES.as_bytes()).await.unwrap();
    let request = v1::CreateVerificationRequest { pgn: Some(pgn), games_per_unit: 4, ..Default::default() };
    let job = admin.create_verification(request).await.unwrap().into_inner();
    let mut forger = registered_worker(&served, "forger", &[]).await;
    let lease = forger.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
    let games = parse_pgn(GAMES).unwrap();
    let honest = unit_report(&games, 1, &DEFAULT_RULES, None).unwrap();
    let lines: Vec<String> = honest.lines().take(3).map(str::to_owned).collect();
    let send = |report: String| v1::VerificationReport { lease_id: lease.lease_id, unit: 0, report };
    // A true parting line twice (the quiet game's place taken), a line of another
    // unit's game, a kind of a rule set the job does not compare: each refused,
    // naming its line.
    let twice = with_tally(&[lines[0].clone(), lines[0].clone(), lines[1].clone()], 4);
    let refused = forger.report_verification(send(twice)).await.unwrap_err();
    assert_eq!(refused.message(), "report of unit 0: line 2: game 1 named twice");
    let outside = with_tally(&[lines[0].clone(), lines[1].clone(), lines[2].replace("game 4", "game 5")], 4);
    let refused = forger.report_verification(send(outside)).await.unwrap_err();
    assert_eq!(refused.message(), "report of unit 0: line 3: 'game 5' is not a game of this unit (game 1 to game 4)");
    let mut foreign: serde_json::Value = serde_json::from_str(&lines[2]).unwrap();
    foreign["kinds"] = serde_json::json!(["wxf vs computer: different ply", "made up"]);
    let foreign = with_tally(&[lines[0].clone(), lines[1].clone(), foreign.to_string()], 4);
    let refused = forger.report_verification(send(foreign)).await.unwrap_err();
    assert!(
        refused.message().starts_with(
            "report of unit 0: line 3: a kind 'wxf vs computer: different ply' that is no parting of the job's rule \
             sets (wxf, asian, cxq)"
        ),
        "{}",
        refused.message()
    );
    // A parting line's verdict moved: found with no game drawn, since every reported
    // line is verified again.
    let mut moved: serde_json::Value = serde_json::from_str(&lines[0]).unwrap();
    moved["verdicts"][0]["ply"] = serde_json::json!(6);
    let misstated = with_tally(&[moved.to_string(), lines[1].clone(), lines[2].clone()], 4);
    let refused = forger.report_verification(send(misstated)).await.unwrap_err();
    assert!(
        refused.message().starts_with("report of unit 0: a spot check finds game 1: verdicts other than the arbiter's"),
        "{}",
        refused.message()
    );
    let state = admin.get_job(v1::JobId { job_id: job.job_id }).await.unwrap().into_inner();
    assert_eq!((state.units_done, state.positions), (0, 0));
    // An honest worker's report passes, each of its lines verified again.
    let mut worker = registered_worker(&served, "w", &[]).await;
    assert_eq!(verify_all(&mut worker, None, GAMES.as_bytes()).await, 1);
    let summary = admin.get_verification(v1::JobId { job_id: job.job_id }).await.unwrap().into_inner();
    assert_eq!((summary.games, summary.parting, summary.refused), (4, 2, 1));
    assert_eq!((summary.rechecked_lines, summary.spot_checked_games), (3, 0));
}

#[tokio::test]
async fn a_job_of_one_game_units_keeps_the_coordinator_s_replays_under_its_budget() {
    use xq_coordinator::jobs::verification::spot_checks::UnitGames;
    let backend = BACKENDS[0];
    let dir = TempDir::new("verification-budget");
    let url = fresh_database(backend, &dir.0).await;
    let settings = xq_proto::self_play_games(&fresh(20), None).unwrap();
    // A budget of two fresh games a second, where a worker plays dozens.
    let cost = UnitGames::SelfPlay { settings: &settings, count: 1 }.game_cost(DEFAULT_RULES.len());
    let config = SchedulerConfig { spot_check_plies_per_second: 2.0 * cost, ..config() };
    let start = std::time::Instant::now();
    let served = serve_on(&dir.0, &url, config, 100).await;
    let mut admin = client(served.address, &served.client_token).await;
    let units = 60;
    let request = v1::CreateVerificationRequest {
        selfplay: Some(fresh(20)),
        games: units,
        games_per_unit: 1,
        ..Default::default()
    };
    let job = admin.create_verification(request).await.unwrap().into_inner();
    assert_eq!(job.units_total, units);
    let mut worker = registered_worker(&served, "w", &[]).await;
    let mut reported = 0;
    while let Some(lease) = worker.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease {
        for &unit in &lease.units {
            let games = [fresh_game(&settings, unit as usize)];
            let report = unit_report(&games, unit as usize + 1, &DEFAULT_RULES, None).unwrap();
            worker
                .report_verification(v1::VerificationReport { lease_id: lease.lease_id, unit, report })
                .await
                .unwrap();
            reported += 1;
        }
    }
    let elapsed = start.elapsed().as_secs_f64();
    assert_eq!(reported, units);
    let summary = admin.get_verification(v1::JobId { job_id: job.job_id }).await.unwrap().into_inner();
    assert_eq!(summary.games, units);
    // A second's budget to start with, two games a second since: far from the 60 a
    // coordinator drawing a game of each unit would replay.
    let budget = 2.0 + 2.0 * elapsed;
    assert!(
        (1.0..=budget).contains(&(summary.spot_checked_games as f64)),
        "{} games replayed in {elapsed:.1} s, a budget of {budget:.1}",
        summary.spot_checked_games
    );
    assert!(summary.spot_checked_games < units / 2, "{} of {units}", summary.spot_checked_games);
    assert_eq!(summary.rechecked_lines, summary.parting + summary.refused, "every line verified again");
}

/// A job's counts are kept as its reports are counted, not read again from the stored
/// reports for every request (the dashboard refetches them every few seconds): once read,
/// they still answer with the stored reports gone, and the units reported after that
/// join them, each once however often it is resent.
#[tokio::test]
async fn a_job_s_counts_are_kept_as_its_reports_land_not_read_again_per_request() {
    let dir = TempDir::new("verification-tallies");
    let url = fresh_database(BACKENDS[0], &dir.0).await;
    let served = serve_on(&dir.0, &url, config(), 100).await;
    let mut admin = client(served.address, &served.client_token).await;
    let pgn = upload(&mut admin, "chases.pgn", "pgn", GAMES.as_bytes()).await.unwrap();
    let request = v1::CreateVerificationRequest { pgn: Some(pgn), games_per_unit: 1, ..Default::default() };
    let job = admin.create_verification(request).await.unwrap().into_inner();
    assert_eq!(job.units_total, 4);
    let games = parse_pgn(GAMES).unwrap();
    let mut worker = registered_worker(&served, "w", &[]).await;
    let lease = worker.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
    let report = |unit: u64, lease_id: u64| v1::VerificationReport {
        lease_id,
        unit,
        report: unit_report(&games[unit as usize..unit as usize + 1], unit as usize + 1, &DEFAULT_RULES, None).unwrap(),
    };
    let first = lease.units[0];
    worker.report_verification(report(first, lease.lease_id)).await.unwrap();
    let summary = |mut admin: Client| async move {
        admin.get_verification(v1::JobId { job_id: job.job_id }).await.unwrap().into_inner()
    };
    assert_eq!(summary(admin.clone()).await.games, 1, "read from the stored report");

    // The stored reports gone, the counts still answer, and the rest join them.
    std::fs::remove_dir_all(served.data.join("verification")).unwrap();
    assert_eq!(summary(admin.clone()).await.games, 1);
    let mut lease = lease;
    loop {
        for &unit in lease.units.iter().filter(|&&unit| unit != first) {
            worker.report_verification(report(unit, lease.lease_id)).await.unwrap();
            worker.report_verification(report(unit, lease.lease_id)).await.unwrap();
        }
        match worker.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease {
            Some(next) => lease = next,
            None => break,
        }
    }
    let mut expected = Tally::default();
    for (index, game) in games.iter().enumerate() {
        check_game(game, &DEFAULT_RULES, &format!("game {}", index + 1), &mut expected, None).unwrap();
    }
    let kept = summary(admin.clone()).await;
    assert_eq!((kept.games, kept.parting, kept.refused), (4, expected.parting, expected.refused));
    assert_eq!(kept.by_kind, expected.by_kind.into_iter().collect());
}

/// A reference that never rules, under Fairy-Stockfish's name: what the honest workers'
/// pyffish says in the re-check tests (the coordinator has no reference to know better).
struct Silent;

impl xq_engine::xiangqi::rules::verify::Reference for Silent {
    fn name(&self) -> &'static str {
        xq_engine::xiangqi::rules::verify::FAIRY_STOCKFISH
    }
    fn verdict(
        &mut self,
        _: &xq_engine::xiangqi::Position,
        _: &[xq_engine::xiangqi::Move],
        _: &[usize],
    ) -> Result<Option<(usize, xq_engine::xiangqi::rules::Outcome)>, String> {
        Ok(None)
    }
}

/// Every unit counted is re-checked, so that the tests need not be lucky.
fn recheck_config() -> SchedulerConfig {
    SchedulerConfig { recheck_one_in: 1, ..config() }
}

/// A registered worker that offers pyffish, and its token.
async fn reference_worker(served: &Served, name: &str) -> (Worker, String) {
    let references = vec![xq_coordinator::jobs::verification::REFERENCE_PYFFISH.to_owned()];
    registered_as(
        served.address,
        &served.client_token,
        v1::Capabilities { references, ..test_capabilities(name, &[], 1) },
    )
    .await
}

/// A verification job over [`GAMES`] with pyffish as the reference, a unit a game.
async fn reference_job(admin: &mut Client) -> u64 {
    let pgn = upload(admin, "chases.pgn", "pgn", GAMES.as_bytes()).await.unwrap();
    let request = v1::CreateVerificationRequest {
        pgn: Some(pgn),
        games_per_unit: 1,
        reference: xq_coordinator::jobs::verification::REFERENCE_PYFFISH.to_owned(),
        ..Default::default()
    };
    admin.create_verification(request).await.unwrap().into_inner().job_id
}

/// Unit `unit`'s report (game `unit + 1`) with the honest reference, or as a forger
/// sends it: the reference agreeing on every game, its partings hidden.
fn reference_report(unit: u64, honest: bool) -> String {
    let games = parse_pgn(GAMES).unwrap();
    let game = &games[unit as usize..unit as usize + 1];
    let reference: Option<&mut dyn xq_engine::xiangqi::rules::verify::Reference> =
        if honest { Some(&mut Silent) } else { None };
    unit_report(game, unit as usize + 1, &DEFAULT_RULES, reference).unwrap()
}

/// Plays a worker's part until it is given no more work, each report sent twice (a
/// resend counts once); the units it reported, in order.
async fn verify_units(worker: &mut Worker, honest: bool) -> Vec<u64> {
    let mut reported = Vec::new();
    while let Some(lease) = worker.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease {
        for &unit in &lease.units {
            let request =
                v1::VerificationReport { lease_id: lease.lease_id, unit, report: reference_report(unit, honest) };
            worker.report_verification(request.clone()).await.unwrap();
            worker.report_verification(request).await.unwrap();
            reported.push(unit);
        }
    }
    reported
}

/// What one honest pass over [`GAMES`] with the reference counts.
fn honest_tally() -> Tally {
    let mut all = Tally::default();
    for (index, game) in parse_pgn(GAMES).unwrap().iter().enumerate() {
        check_game(game, &DEFAULT_RULES, &format!("game {}", index + 1), &mut all, Some(&mut Silent)).unwrap();
    }
    all
}

/// A job's counts as the summary gives them, and as a tally gives them.
async fn counts(admin: &mut Client, job_id: u64) -> (u64, u64, u64, BTreeMap<String, u64>) {
    let summary = admin.get_verification(v1::JobId { job_id }).await.unwrap().into_inner();
    (summary.games, summary.parting, summary.refused, summary.by_kind.into_iter().collect())
}

fn tally_counts(tally: &Tally) -> (u64, u64, u64, BTreeMap<String, u64>) {
    (tally.games, tally.parting, tally.refused, tally.by_kind.clone().into_iter().collect())
}

/// Each listed worker's standing and reason, by name.
async fn standings(admin: &mut Client) -> BTreeMap<String, (String, String)> {
    let workers = admin.list_workers(v1::ListWorkersRequest {}).await.unwrap().into_inner().workers;
    workers.into_iter().map(|w| (w.capabilities.unwrap().name, (w.standing, w.standing_reason))).collect()
}

#[tokio::test]
async fn an_honest_pair_of_workers_re_checks_the_reference_s_verdicts_without_changing_the_counts() {
    for backend in BACKENDS {
        let served = serve(backend, recheck_config()).await;
        let mut admin = client(served.address, &served.client_token).await;
        let job_id = reference_job(&mut admin).await;
        let expected = tally_counts(&honest_tally());
        assert!(expected.3.keys().any(|kind| kind.contains("vs fairy-stockfish")), "{expected:?}");
        let (mut a, _) = reference_worker(&served, "a").await;
        let (mut b, _) = reference_worker(&served, "b").await;
        assert_eq!(verify_units(&mut a, true).await, [0, 1, 2, 3], "{backend:?}");
        // Counted, and each drawn for a re-check, which its own worker is not given:
        // the job runs until another worker has reported the units again.
        let state = admin.get_job(v1::JobId { job_id }).await.unwrap().into_inner();
        assert_eq!((state.state.as_str(), state.units_done, state.rechecks_pending), ("running", 4, 4), "{backend:?}");
        assert_eq!(counts(&mut admin, job_id).await, expected, "{backend:?}");
        assert_eq!(verify_units(&mut b, true).await, [0, 1, 2, 3], "{backend:?}: the re-checks");
        let state = admin.get_job(v1::JobId { job_id }).await.unwrap().into_inner();
        assert_eq!((state.state.as_str(), state.units_done, state.positions), ("finished", 4, 4), "{backend:?}");
        assert_eq!(state.rechecks_pending, 0, "{backend:?}");
        assert_eq!(counts(&mut admin, job_id).await, expected, "{backend:?}: nothing counted twice");
        let standings = standings(&mut admin).await;
        assert!(standings.values().all(|(standing, _)| standing == "active"), "{backend:?}: {standings:?}");
        let workers = admin.list_workers(v1::ListWorkersRequest {}).await.unwrap().into_inner().workers;
        assert!(workers.iter().all(|w| w.active_leases == 0), "{backend:?}: the re-check leases finished: {workers:?}");
    }
}

/// A fleet of one worker offering the reference: nobody can re-check its units, so the
/// job finishes once they are counted instead of waiting for another worker forever.
#[tokio::test]
async fn a_lone_worker_s_job_finishes_without_the_re_checks_nobody_can_report() {
    for backend in BACKENDS {
        let served = serve(backend, recheck_config()).await;
        let mut admin = client(served.address, &served.client_token).await;
        let job_id = reference_job(&mut admin).await;
        let (mut alone, _) = reference_worker(&served, "alone").await;
        assert_eq!(verify_units(&mut alone, true).await, [0, 1, 2, 3], "{backend:?}");
        let state = admin.get_job(v1::JobId { job_id }).await.unwrap().into_inner();
        assert_eq!((state.state.as_str(), state.units_done), ("finished", 4), "{backend:?}");
        assert_eq!(counts(&mut admin, job_id).await, tally_counts(&honest_tally()), "{backend:?}");
    }
}

/// A forger reports the reference agreeing where it parts from WXF (the chases of
/// games 1 and 4): its reports pass the spot checks, which rule only the rule sets,
/// and are counted. The re-checks of an honest worker dispute two of them; across a
/// restart, a third worker sides with the honest one: the forger is suspected and at
/// once confirmed, quarantined in the job, its units set aside and counted from honest
/// reports, and the job's counts end as an honest run's.
#[tokio::test]
async fn a_worker_forging_the_reference_s_verdicts_is_contradicted_by_two_others_and_quarantined_across_a_restart() {
    for backend in BACKENDS {
        let dir = TempDir::new("verification-recheck");
        let url = fresh_database(backend, &dir.0).await;
        let served = serve_on(&dir.0, &url, recheck_config(), 100).await;
        let mut admin = client(served.address, &served.client_token).await;
        let job_id = reference_job(&mut admin).await;
        let (mut forger, forger_token) = reference_worker(&served, "forger").await;
        let (mut b, b_token) = reference_worker(&served, "b").await;
        assert_eq!(verify_units(&mut forger, false).await, [0, 1, 2, 3], "{backend:?}");
        let honest = tally_counts(&honest_tally());
        assert_ne!(counts(&mut admin, job_id).await, honest, "{backend:?}: the forged counts");
        // Games 2 and 3 agree, and their re-checks end; those of games 1 and 4 wait
        // for a third worker, which b is not.
        assert_eq!(verify_units(&mut b, true).await, [0, 1, 2, 3], "{backend:?}");
        assert_eq!(verify_units(&mut b, true).await, [] as [u64; 0], "{backend:?}");
        assert!(standings(&mut admin).await.values().all(|(standing, _)| standing == "active"), "{backend:?}");

        drop(served);
        let served = serve_on(&dir.0, &url, recheck_config(), 100).await;
        let mut admin = client(served.address, &served.client_token).await;
        let mut b = worker(served.address, &b_token).await;
        let (mut c, _) = reference_worker(&served, "c").await;
        // c is given the two disputed re-checks. Its report of unit 0 decides it: the
        // forger is quarantined and its units set aside, unit 0 counted from c's
        // report; then c verifies the others (unit 3 among them, its re-check gone
        // with the forger's report), each drawn for a re-check again, which b reports.
        assert_eq!(verify_units(&mut c, true).await, [0, 3, 1, 2], "{backend:?}");
        assert_eq!(standings(&mut admin).await["forger"].0, "quarantined", "{backend:?}");
        assert_eq!(verify_units(&mut b, true).await, [0, 1, 2, 3], "{backend:?}");
        assert_eq!(verify_units(&mut c, true).await, [] as [u64; 0], "{backend:?}");
        let standings = standings(&mut admin).await;
        let (standing, reason) = &standings["forger"];
        assert_eq!(standing, "quarantined", "{backend:?}");
        assert!(
            reason.contains(&format!("its report of unit 0 of job {job_id} gives the reference's verdicts on game 1"))
                && reason.contains("verified the unit"),
            "{backend:?}: {reason}"
        );
        assert_eq!((&standings["b"].0, &standings["c"].0), (&"active".to_owned(), &"active".to_owned()));
        let state = admin.get_job(v1::JobId { job_id }).await.unwrap().into_inner();
        assert_eq!((state.state.as_str(), state.units_done, state.positions), ("finished", 4, 4), "{backend:?}");
        assert_eq!(counts(&mut admin, job_id).await, honest, "{backend:?}: an honest run's counts");
        let mut forger = worker(served.address, &forger_token).await;
        let refused = forger.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap_err();
        assert_eq!(refused.code(), tonic::Code::PermissionDenied, "{backend:?}");
    }
}

#[tokio::test]
async fn a_re_check_of_the_reference_s_verdicts_drawn_before_a_restart_is_still_pending_after_it() {
    for backend in BACKENDS {
        let dir = TempDir::new("verification-recheck-restart");
        let url = fresh_database(backend, &dir.0).await;
        let served = serve_on(&dir.0, &url, recheck_config(), 100).await;
        let mut admin = client(served.address, &served.client_token).await;
        let job_id = reference_job(&mut admin).await;
        let (mut a, a_token) = reference_worker(&served, "a").await;
        let (_, b_token) = reference_worker(&served, "b").await;
        assert_eq!(verify_units(&mut a, true).await, [0, 1, 2, 3], "{backend:?}");
        drop(served);

        let served = serve_on(&dir.0, &url, recheck_config(), 100).await;
        let mut admin = client(served.address, &served.client_token).await;
        let state = admin.get_job(v1::JobId { job_id }).await.unwrap().into_inner();
        assert_eq!((state.state.as_str(), state.units_done), ("running", 4), "{backend:?}");
        let mut a = worker(served.address, &a_token).await;
        assert_eq!(verify_units(&mut a, true).await, [] as [u64; 0], "{backend:?}: not its own re-checks");
        let mut b = worker(served.address, &b_token).await;
        assert_eq!(verify_units(&mut b, true).await, [0, 1, 2, 3], "{backend:?}: the re-checks, kept");
        let state = admin.get_job(v1::JobId { job_id }).await.unwrap().into_inner();
        assert_eq!((state.state.as_str(), state.units_done), ("finished", 4), "{backend:?}");
        assert_eq!(counts(&mut admin, job_id).await, tally_counts(&honest_tally()), "{backend:?}");
    }
}

/// The other way round: an honest worker's report is counted, and the worker that
/// re-checks it forges the reference's verdicts. A third worker sides with the first:
/// the re-checker is quarantined, and the counts, the first report's, stay.
#[tokio::test]
async fn a_re_checker_forging_the_reference_s_verdicts_is_outvoted_and_the_counts_stay() {
    for backend in BACKENDS {
        let served = serve(backend, recheck_config()).await;
        let mut admin = client(served.address, &served.client_token).await;
        let job_id = reference_job(&mut admin).await;
        let (mut a, _) = reference_worker(&served, "a").await;
        let (mut forger, _) = reference_worker(&served, "forger").await;
        let (mut c, _) = reference_worker(&served, "c").await;
        assert_eq!(verify_units(&mut a, true).await, [0, 1, 2, 3], "{backend:?}");
        assert_eq!(verify_units(&mut forger, false).await, [0, 1, 2, 3], "{backend:?}");
        assert_eq!(verify_units(&mut c, true).await, [0, 3], "{backend:?}: the disputed re-checks");
        let standings = standings(&mut admin).await;
        let (standing, reason) = &standings["forger"];
        assert_eq!(standing, "quarantined", "{backend:?}");
        assert!(reason.contains("otherwise than workers 1 and 3"), "{backend:?}: {reason}");
        assert_eq!((&standings["a"].0, &standings["c"].0), (&"active".to_owned(), &"active".to_owned()));
        let state = admin.get_job(v1::JobId { job_id }).await.unwrap().into_inner();
        assert_eq!((state.state.as_str(), state.units_done), ("finished", 4), "{backend:?}");
        assert_eq!(counts(&mut admin, job_id).await, tally_counts(&honest_tally()), "{backend:?}");
    }
}
