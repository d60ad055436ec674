//! Tournaments on the coordinator: each pairing of a double round robin becomes a test
//! of its own; pairs reported on those tests (as any worker reports them) make the
//! standings, placed by Articles 9 and 10 exactly as a hand count of the same games; a
//! Swiss event's rounds are made one after the other from the results, each for the
//! event's maker and under its approval; an event stops as a whole.

use xq_coordinator::scheduler::config::SchedulerConfig;
use xq_proto::v1;

use crate::common::*;

fn config() -> SchedulerConfig {
    SchedulerConfig { lease_seconds: 1000.0 * 72.0, reference_nps: 0, ..SchedulerConfig::default() }
}

async fn engines(client: &mut Client, names: &[&str]) -> Vec<v1::EngineSpec> {
    let binary = upload(client, "engine", "engine", b"#!/bin/sh\n").await.unwrap();
    names
        .iter()
        .map(|name| v1::EngineSpec {
            name: (*name).to_owned(),
            binary: Some(binary.clone()),
            protocol: "uci".to_owned(),
            ..Default::default()
        })
        .collect()
}

/// The tournament `id` once `ready` holds for it (within 20 s, or the test fails
/// naming `what`).
async fn tournament_when(
    admin: &mut Client,
    id: u64,
    what: &str,
    ready: impl Fn(&v1::Tournament) -> bool,
) -> v1::Tournament {
    let start = std::time::Instant::now();
    loop {
        let t = admin.get_tournament(v1::TournamentId { tournament_id: id }).await.unwrap().into_inner();
        if ready(&t) {
            return t;
        }
        assert!(start.elapsed() < std::time::Duration::from_secs(20), "{what}: {t:?}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// The event's PGN (`DownloadTournamentGames`): each game's Event, Round, White and Black.
async fn event_games(admin: &mut Client, id: u64) -> Vec<[String; 4]> {
    let batches =
        collect(admin.download_tournament_games(v1::TournamentId { tournament_id: id }).await.unwrap().into_inner())
            .await;
    let text: String = batches.into_iter().map(|b| b.pgn).collect();
    let games = xq_engine::xiangqi::pgn::parse_pgn(&text).unwrap();
    games
        .iter()
        .map(|g| ["Event", "Round", "White", "Black"].map(|tag| g.tag(tag).unwrap_or_default().to_owned()))
        .collect()
}

fn game_tags(event: &str, round: &str, white: &str, black: &str) -> [String; 4] {
    [event, round, white, black].map(str::to_owned)
}

/// Plays `leases` leases of one pair each, the first engine named winning both games.
async fn play_first_wins(worker: &mut Worker, leases: usize) {
    for _ in 0..leases {
        let lease = worker.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
        let Some(v1::lease::Work::MatchSpec(spec)) = &lease.work else { panic!("a match lease") };
        let (first, second) =
            (spec.new_engine.as_ref().unwrap().name.clone(), spec.base_engine.as_ref().unwrap().name.clone());
        let report = v1::ReportPairsRequest {
            lease_id: lease.lease_id,
            pairs: vec![named_pair(lease.units[0], [2, 2], [&first, &second])],
            cumulative: Some(totals(&[[2, 2]])),
            ..Default::default()
        };
        worker.report_pairs(report).await.unwrap();
    }
}

/// A new submitter's client of `served`, and its token's id.
async fn submitter(served: &Served, name: &str) -> (Client, String) {
    let mut admin = client(served.address, &served.client_token).await;
    let request = v1::CreateTokenRequest { role: "submitter".to_owned(), name: name.to_owned(), expires_seconds: 0 };
    let reply = admin.create_token(request).await.unwrap().into_inner();
    (client(served.address, &reply.token).await, reply.id)
}

/// An event of `system` between `names`, one pair a pairing.
async fn event_request(client: &mut Client, names: &[&str], system: &str) -> v1::CreateTournamentRequest {
    v1::CreateTournamentRequest {
        engines: engines(client, names).await,
        system: system.to_owned(),
        settings: Some(v1::CreateTestRequest {
            time_control: "10+0.1".to_owned(),
            adjudication: Some(ADJUDICATION),
            start_position: true,
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The states of the event's tests, as GetJob gives them.
async fn test_states(admin: &mut Client, event: &v1::Tournament) -> Vec<String> {
    let mut states = Vec::new();
    for pairing in &event.pairings {
        states.push(admin.get_job(v1::JobId { job_id: pairing.job_id }).await.unwrap().into_inner().state);
    }
    states
}

#[tokio::test]
async fn a_round_robin_is_a_test_per_pairing_and_its_standings_count_their_pairs() {
    for backend in BACKENDS {
        let served = serve(backend, config()).await;
        let mut admin = client(served.address, &served.client_token).await;
        let settings = v1::CreateTestRequest {
            time_control: "10+0.1".to_owned(),
            adjudication: Some(ADJUDICATION),
            start_position: true,
            description: "club".to_owned(),
            ..Default::default()
        };
        let request = v1::CreateTournamentRequest {
            engines: engines(&mut admin, &["a", "b", "c"]).await,
            settings: Some(settings),
            ..Default::default()
        };
        let tournament = admin.create_tournament(request.clone()).await.unwrap().into_inner();
        assert_eq!(tournament.pairings.len(), 3);
        assert_eq!(tournament.state, "running");
        // The Appendix's table for 3 or 4 players, the bye's games left out: 2-3, then
        // 1-2, then 3-1 (the first named has Red in the pair's first game).
        let names: Vec<(&str, &str)> =
            tournament.pairings.iter().map(|p| (p.first.as_str(), p.second.as_str())).collect();
        assert_eq!(names, [("b", "c"), ("a", "b"), ("c", "a")]);

        // The worker plays each pairing's one pair. b-c: b wins both; c-a: a draw and
        // a win for c; a-b: a wins as Red, loses as Black.
        let mut worker = registered_worker(&served, "w", &[]).await;
        let results = [("b", "c", [2u8, 2u8]), ("c", "a", [1, 2]), ("a", "b", [2, 0])];
        for _ in 0..3 {
            let lease = worker.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
            let Some(v1::lease::Work::MatchSpec(spec)) = &lease.work else { panic!("a match lease") };
            let (first, second) =
                (spec.new_engine.as_ref().unwrap().name.clone(), spec.base_engine.as_ref().unwrap().name.clone());
            let points = results.iter().find(|r| r.0 == first && r.1 == second).expect("a pairing of the tournament").2;
            let report = v1::ReportPairsRequest {
                lease_id: lease.lease_id,
                pairs: vec![named_pair(lease.units[0], points, [&first, &second])],
                cumulative: Some(totals(&[points])),
                ..Default::default()
            };
            worker.report_pairs(report).await.unwrap();
        }
        let done = admin
            .get_tournament(v1::TournamentId { tournament_id: tournament.tournament_id })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(done.state, "finished", "{backend:?}");
        // Points (2-1-0), worked by hand: b-c [2, 2]: b 4, c 0. c-a [1, 2]: c 1 + 2 =
        // 3, a 1 + 0 = 1. a-b [2, 0]: a won as Red (2) and lost as Black (0), b the
        // reverse: 2 each. a: 1 + 2 = 3; b: 4 + 2 = 6; c: 0 + 3 = 3. a and c tie on 3:
        // Neustadtl (10.2.A): a beat b (6) and drew c (1.5) = 7.5; c drew a (1.5) and
        // beat a (3) = 4.5: a is second.
        let table: Vec<(&str, u32, f64)> =
            done.standings.iter().map(|s| (s.engine.as_str(), s.place, s.points)).collect();
        assert_eq!(table, [("b", 1, 6.0), ("a", 2, 3.0), ("c", 3, 3.0)], "{backend:?}");
        assert_eq!(done.standings[1].tie_breaks["10.2.A"], 7.5);
        assert_eq!(done.standings[2].tie_breaks["10.2.A"], 4.5);
        assert_eq!(done.standings[0].games, 4);
        let c_a = done.pairings.iter().find(|p| p.first == "c").unwrap();
        assert_eq!((c_a.first_points, c_a.second_points), (3.0, 1.0));
        assert!(done.standings[0].tie_breaks.contains_key("10.2.A"));
        assert!(done.standings.iter().all(|s| s.elo_error > 0.0), "every engine has a finite rating");
        // The event's PGN: every game in pairing order, tagged with the event's name and
        // its Berger round (the Appendix's table: 2-3, then 1-2, then 3-1) and number.
        assert_eq!(done.pairings.iter().map(|p| p.round).collect::<Vec<_>>(), [1, 2, 3]);
        let expected = [
            game_tags("club", "1.1", "b", "c"),
            game_tags("club", "1.2", "c", "b"),
            game_tags("club", "2.1", "a", "b"),
            game_tags("club", "2.2", "b", "a"),
            game_tags("club", "3.1", "c", "a"),
            game_tags("club", "3.2", "a", "c"),
        ];
        assert_eq!(event_games(&mut admin, tournament.tournament_id).await, expected, "{backend:?}");

        // A bad request makes no tests.
        let before = admin
            .list_jobs(v1::ListJobsRequest { limit: 100, ..Default::default() })
            .await
            .unwrap()
            .into_inner()
            .jobs
            .len();
        let mut duplicate = request.clone();
        duplicate.engines[1].name = "a".to_owned();
        let error = admin.create_tournament(duplicate).await.unwrap_err();
        assert!(error.message().contains("two engines are named 'a'"), "{}", error.message());
        let mut odd = request.clone();
        odd.games_per_pairing = 3;
        assert!(admin.create_tournament(odd).await.unwrap_err().message().contains("even number"));
        let after = admin
            .list_jobs(v1::ListJobsRequest { limit: 100, ..Default::default() })
            .await
            .unwrap()
            .into_inner()
            .jobs
            .len();
        assert_eq!(before, after);
        let missing = admin.get_tournament(v1::TournamentId { tournament_id: 99 }).await.unwrap_err();
        assert_eq!(missing.code(), tonic::Code::NotFound);
    }
}

/// A fleet Swiss event of five engines over two rounds: the first round's tests are made
/// at once (one engine sits out), the second's when the first has ended, from its
/// results (no pairing repeated, the bye to another engine); the standings count every
/// reported pair and a win's points for each game of a round sat out (Article 10.3's
/// Solkoff score breaks ties), checked against a recount from the tests alone.
#[tokio::test]
async fn a_swiss_event_pairs_each_round_when_the_one_before_has_ended() {
    for backend in BACKENDS {
        let served = serve(backend, config()).await;
        let mut admin = client(served.address, &served.client_token).await;
        let names = ["a", "b", "c", "d", "e"];
        let request = v1::CreateTournamentRequest {
            engines: engines(&mut admin, &names).await,
            system: "swiss".to_owned(),
            rounds: 2,
            settings: Some(v1::CreateTestRequest {
                time_control: "10+0.1".to_owned(),
                adjudication: Some(ADJUDICATION),
                start_position: true,
                ..Default::default()
            }),
            ..Default::default()
        };
        let created = admin.create_tournament(request.clone()).await.unwrap().into_inner();
        assert_eq!(created.pairings.len(), 2, "five engines: two meetings and a bye");
        let id = created.tournament_id;
        let mut worker = registered_worker(&served, "w", &[]).await;
        // The first engine named in a meeting wins both games of its pair.
        play_first_wins(&mut worker, 2).await;
        let second_round = tournament_when(&mut admin, id, "a second round", |t| {
            assert_eq!(t.state, "running", "{backend:?}: more rounds to come");
            t.pairings.len() == 4
        })
        .await;
        let meetings: Vec<(String, String)> =
            second_round.pairings.iter().map(|p| (p.first.clone(), p.second.clone())).collect();
        let met = |(a, b): &(String, String), (c, d): &(String, String)| (a == c && b == d) || (a == d && b == c);
        assert!(!met(&meetings[2], &meetings[0]) && !met(&meetings[2], &meetings[1]), "{meetings:?}");
        assert!(!met(&meetings[3], &meetings[0]) && !met(&meetings[3], &meetings[1]), "{meetings:?}");
        let sat_out = |round: &[(String, String)]| {
            names.iter().find(|n| !round.iter().any(|(a, b)| a == *n || b == *n)).unwrap().to_string()
        };
        let byes = [sat_out(&meetings[..2]), sat_out(&meetings[2..])];
        assert_ne!(byes[0], byes[1], "one bye per engine");
        play_first_wins(&mut worker, 2).await;
        let done = tournament_when(&mut admin, id, "finished", |t| t.state == "finished").await;
        assert_eq!(done.pairings.len(), 4, "two rounds, then no more");
        assert_eq!(done.pairings.iter().map(|p| p.round).collect::<Vec<_>>(), [1, 1, 2, 2]);
        // The recount: 4 points to the first engine of each meeting (two wins), 4 to each
        // engine that sat a round out (a win's 2 points for each of the round's 2 games).
        let mut recount: std::collections::HashMap<String, f64> = names.iter().map(|n| (n.to_string(), 0.0)).collect();
        for (first, _) in &meetings {
            *recount.get_mut(first).unwrap() += 4.0;
        }
        for bye in &byes {
            *recount.get_mut(bye).unwrap() += 4.0;
        }
        for standing in &done.standings {
            assert_eq!(standing.points, recount[&standing.engine], "{backend:?}: {}", standing.engine);
            assert!(standing.tie_breaks.contains_key("10.3.A"), "Swiss tie-breaks: {:?}", standing.tie_breaks);
        }
        assert_eq!(done.system, "swiss");
    }
}

/// A fleet knockout of four engines (Article 10.1): seeds 1-4 and 2-3 meet first; the
/// level match plays a tie-break pair at the faster time control, still level the higher
/// seed goes on; the final follows, and the places are by how far each went.
#[tokio::test]
async fn a_knockout_breaks_ties_at_its_faster_time_control_and_places_by_how_far_each_went() {
    for backend in BACKENDS {
        let served = serve(backend, config()).await;
        let mut admin = client(served.address, &served.client_token).await;
        let request = v1::CreateTournamentRequest {
            engines: engines(&mut admin, &["a", "b", "c", "d"]).await,
            system: "knockout".to_owned(),
            tie_break_time_control: "2+0.02".to_owned(),
            tie_break_pairs: 1,
            settings: Some(v1::CreateTestRequest {
                time_control: "10+0.1".to_owned(),
                adjudication: Some(ADJUDICATION),
                start_position: true,
                ..Default::default()
            }),
            ..Default::default()
        };
        let created = admin.create_tournament(request).await.unwrap().into_inner();
        let first_round: Vec<(&str, &str)> =
            created.pairings.iter().map(|p| (p.first.as_str(), p.second.as_str())).collect();
        assert_eq!(first_round, [("a", "d"), ("b", "c")], "seeds 1-4 and 2-3");
        let id = created.tournament_id;
        // Each meeting's pair, as the first engine's half points with Red and with Black:
        // a beats d; b and c level (then a drawn tie-break pair); b beats a in the final.
        let results = [
            ("a", "d", false, [2u8, 2u8]),
            ("b", "c", false, [2, 0]),
            ("b", "c", true, [1, 1]),
            ("a", "b", false, [0, 0]),
        ];
        let mut worker = registered_worker(&served, "w", &[]).await;
        let mut played = 0;
        let start = std::time::Instant::now();
        while played < results.len() {
            assert!(start.elapsed() < std::time::Duration::from_secs(20), "{backend:?}: stuck after {played}");
            let Some(lease) = worker.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease
            else {
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            };
            let Some(v1::lease::Work::MatchSpec(spec)) = &lease.work else { panic!("a match lease") };
            let (first, second) =
                (spec.new_engine.as_ref().unwrap().name.clone(), spec.base_engine.as_ref().unwrap().name.clone());
            let tie_break = spec.time_control.starts_with("2+");
            let points = results
                .iter()
                .find(|r| (r.0, r.1, r.2) == (first.as_str(), second.as_str(), tie_break))
                .unwrap_or_else(|| {
                    panic!("{backend:?}: an unexpected meeting {first}-{second} at {}", spec.time_control)
                })
                .3;
            let mut pair = named_pair(lease.units[0], points, [&first, &second]);
            for pgn in [&mut pair.first_game_pgn, &mut pair.second_game_pgn] {
                *pgn = pgn.replace("[TimeControl \"10+0.1\"]", &format!("[TimeControl \"{}\"]", spec.time_control));
            }
            let report = v1::ReportPairsRequest {
                lease_id: lease.lease_id,
                pairs: vec![pair],
                cumulative: Some(totals(&[points])),
                ..Default::default()
            };
            worker.report_pairs(report).await.unwrap();
            played += 1;
        }
        let done = tournament_when(&mut admin, id, "finished", |t| t.state == "finished").await;
        assert_eq!(done.pairings.len(), 4, "two first-round matches, a tie-break, the final");
        // b: 2 + 2 (tie-break draws) + 4 = 8; a: 4 + 0; c: 2 + 2; d: 0 (2-1-0 points).
        let table: Vec<(&str, u32, f64)> =
            done.standings.iter().map(|s| (s.engine.as_str(), s.place, s.points)).collect();
        assert_eq!(table, [("b", 1, 8.0), ("a", 2, 4.0), ("c", 3, 4.0), ("d", 3, 0.0)], "{backend:?}");
        // The event's PGN numbers a match's tie-break games on from its first games.
        assert_eq!(done.pairings.iter().map(|p| p.round).collect::<Vec<_>>(), [1, 1, 1, 2]);
        let event = format!("tournament {id}");
        let expected = [
            game_tags(&event, "1.1", "a", "d"),
            game_tags(&event, "1.2", "d", "a"),
            game_tags(&event, "1.1", "b", "c"),
            game_tags(&event, "1.2", "c", "b"),
            game_tags(&event, "1.3", "b", "c"),
            game_tags(&event, "1.4", "c", "b"),
            game_tags(&event, "2.1", "a", "b"),
            game_tags(&event, "2.2", "b", "a"),
        ];
        assert_eq!(event_games(&mut admin, id).await, expected, "{backend:?}");
    }
}

/// WXF Article 6's time controls as an event's setting: 6.1's 60 minutes with 30 seconds
/// a move and 6.2's 25 moves in 60 minutes, then 10 in 5 minutes (repeating), each
/// leased to a worker at half the reference speed with twice the time, as tests are.
#[tokio::test]
async fn an_event_plays_article_6_time_controls_scaled_by_the_worker_speed() {
    let config = SchedulerConfig { reference_nps: 1_000_000, ..config() };
    let served = serve(BACKENDS[0], config).await;
    let mut admin = client(served.address, &served.client_token).await;
    let mut worker = registered_worker(&served, "slow", &[]).await;
    // Two cores: a lease a core, and the first event's stays open.
    let capabilities = v1::Capabilities { name: "slow".to_owned(), cores: 2, bench_nps: 500_000, ..Default::default() };
    worker.register(v1::RegisterRequest { capabilities: Some(capabilities) }).await.unwrap();
    for (article, time_control, leased) in [("6.1", "3600+30", "7200+60"), ("6.2", "25/3600:10/300", "25/7200:10/600")]
    {
        let request = v1::CreateTournamentRequest {
            engines: engines(&mut admin, &["a", "b"]).await,
            settings: Some(v1::CreateTestRequest {
                time_control: time_control.to_owned(),
                adjudication: Some(ADJUDICATION),
                start_position: true,
                ..Default::default()
            }),
            ..Default::default()
        };
        let event = admin.create_tournament(request).await.unwrap().into_inner();
        let lease = worker.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
        let Some(v1::lease::Work::MatchSpec(spec)) = &lease.work else { panic!("a match lease") };
        assert_eq!(spec.time_control, leased, "Article {article}");
        admin.stop_job(v1::JobId { job_id: event.pairings[0].job_id }).await.unwrap();
    }
}

/// Rewrites job `id`'s stored spec as `spec` (hex), as an older version could have
/// stored it.
async fn store_spec(pool: &sqlx::AnyPool, id: u64, spec: String) {
    sqlx::query("UPDATE jobs SET spec = $1 WHERE id = $2").bind(spec).bind(id as i64).execute(pool).await.unwrap();
}

/// After an upgrade, stored tests that fail today's checks (a rule set since renamed, a
/// spec that does not decode) or whose book no longer reads are neither dropped nor
/// allowed to stop the start: each is listed, stopped, with the reason, and is never
/// leased; an event with such a test shows it, or says clearly why it cannot, instead
/// of answering 500 "job is gone", and the other events still list.
#[tokio::test]
async fn stored_tests_this_version_cannot_read_back_are_shown_stopped_with_the_reason() {
    use prost::Message;
    for backend in BACKENDS {
        let dir = TempDir::new("unreadable");
        let url = fresh_database(backend, &dir.0).await;
        let first = serve_on(&dir.0, &url, config(), 100).await;
        let mut admin = client(first.address, &first.client_token).await;
        let event = |engines: Vec<v1::EngineSpec>| v1::CreateTournamentRequest {
            engines,
            settings: Some(v1::CreateTestRequest {
                time_control: "10+0.1".to_owned(),
                adjudication: Some(ADJUDICATION),
                start_position: true,
                ..Default::default()
            }),
            ..Default::default()
        };
        let (ab, cd) = (engines(&mut admin, &["a", "b"]).await, engines(&mut admin, &["c", "d"]).await);
        let renamed = admin.create_tournament(event(ab)).await.unwrap().into_inner();
        let garbled = admin.create_tournament(event(cd)).await.unwrap().into_inner();
        let book_path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../books/xiangqi-2ply.epd");
        let book = upload(&mut admin, "2ply.epd", "book", &std::fs::read(book_path).unwrap()).await.unwrap();
        let mut request = test_request(&mut admin, 4, None).await;
        request.book = Some(book.clone());
        let booked = admin.create_test(request).await.unwrap().into_inner().job_id;
        let request = test_request(&mut admin, 4, None).await;
        let readable = admin.create_test(request).await.unwrap().into_inner().job_id;
        let (renamed_job, garbled_job) = (renamed.pairings[0].job_id, garbled.pairings[0].job_id);
        // As an older version stored them: a rule set this one no longer knows, a spec
        // that does not decode; and a book a stricter parser refuses.
        let pool = first.coordinator.shared.storage.pool().clone();
        let stored = admin.get_job(v1::JobId { job_id: renamed_job }).await.unwrap().into_inner();
        assert_eq!(stored.state, "running");
        let row: (String,) = sqlx::query_as("SELECT spec FROM jobs WHERE id = $1")
            .bind(renamed_job as i64)
            .fetch_one(&pool)
            .await
            .unwrap();
        let mut old = v1::CreateTestRequest::decode(hex::decode(&row.0).unwrap().as_slice()).unwrap();
        old.rules = "asian-1987".to_owned();
        store_spec(&pool, renamed_job, hex::encode(old.encode_to_vec())).await;
        store_spec(&pool, garbled_job, "0aff-not-hex".to_owned()).await;
        std::fs::write(dir.0.join("artifacts").join(&book.sha256), "not a fen\n").unwrap();
        drop(first);

        let served = serve_on(&dir.0, &url, config(), 100).await;
        let mut admin = client(served.address, &served.client_token).await;
        let jobs = admin.list_jobs(v1::ListJobsRequest::default()).await.unwrap().into_inner().jobs;
        let find = |id: u64| jobs.iter().find(|j| j.job_id == id).unwrap_or_else(|| panic!("job {id} dropped"));
        for (id, reason) in [(renamed_job, "asian-1987"), (garbled_job, "0aff"), (booked, "book")] {
            let job = find(id);
            assert_eq!(job.state, "stopped", "{backend:?} job {id}");
            assert!(job.outcome.contains("cannot read it back"), "{backend:?}: {}", job.outcome);
            assert!(job.outcome.contains(reason) || id == garbled_job, "{backend:?}: '{}' lacks {reason}", job.outcome);
            assert!(job.summary.contains("cannot be read back"), "{}", job.summary);
        }
        assert_eq!((find(renamed_job).new_engine.as_str(), find(readable).state.as_str()), ("a", "running"));
        // Only the readable test is leased.
        let mut worker = registered_worker(&served, "w", &[]).await;
        let lease = worker.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
        assert_eq!(lease.job_id, readable, "{backend:?}");
        assert!(worker.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.is_none());
        // The event whose test's engines are known shows it stopped; the other says why
        // it cannot be shown, and the list shows both.
        let shown = admin.get_tournament(v1::TournamentId { tournament_id: renamed.tournament_id }).await.unwrap();
        assert_eq!(shown.into_inner().pairings[0].job_id, renamed_job);
        let status = admin.get_tournament(v1::TournamentId { tournament_id: garbled.tournament_id }).await.unwrap_err();
        assert_eq!(status.code(), tonic::Code::FailedPrecondition, "{backend:?}: {status:?}");
        let expected = format!("its test {garbled_job} cannot be read back by this version");
        assert!(status.message().contains(&expected), "{}", status.message());
        let url = format!("http://{}/api/v1/tournaments/{}", served.address, garbled.tournament_id);
        let (code, body) = crate::dashboard::request("GET", &url, &[], "").await;
        assert!(code == 409 && body.contains(&expected), "{code} {body}");
        let listed = admin.list_tournaments(v1::ListTournamentsRequest::default()).await.unwrap().into_inner();
        let states: Vec<(u64, &str)> = listed.tournaments.iter().map(|t| (t.tournament_id, t.state.as_str())).collect();
        assert!(states.contains(&(garbled.tournament_id, "unreadable")), "{states:?}");
        assert!(listed.tournaments.iter().any(|t| t.problem.contains(&expected)));
        assert!(states.iter().any(|(id, _)| *id == renamed.tournament_id), "{states:?}");
        // Pages of what needs the spec answer the same reason.
        let status = admin.list_pairs(v1::ListPairsRequest { job_id: renamed_job, ..Default::default() }).await;
        assert_eq!(status.unwrap_err().code(), tonic::Code::FailedPrecondition);
    }
}

/// Attack (review N3): with approval asked for, a submitter's Swiss event waits, but its
/// later rounds were made as an admin's and a stopped test counted as ended, so a
/// submitter that stopped its own pending first round had round 2 run unapproved. Now
/// a stopped test ends its event: no round follows, and no worker gets any of it.
#[tokio::test]
async fn a_submitter_that_stops_its_pending_round_ends_its_event_and_no_round_runs() {
    for backend in BACKENDS {
        let served = serve(backend, SchedulerConfig { require_approval: true, ..config() }).await;
        let mut admin = client(served.address, &served.client_token).await;
        let (mut mallory, _) = submitter(&served, "mallory").await;
        let request = event_request(&mut mallory, &["a", "b", "c", "d"], "swiss").await;
        let event = mallory.create_tournament(request).await.unwrap().into_inner();
        assert_eq!(test_states(&mut admin, &event).await, ["pending", "pending"], "{backend:?}");
        let mut worker = registered_worker(&served, "w", &[]).await;
        for pairing in &event.pairings {
            mallory.stop_job(v1::JobId { job_id: pairing.job_id }).await.unwrap();
        }
        let id = event.tournament_id;
        tournament_when(&mut admin, id, "the event stopped", |t| t.state == "stopped").await;
        // Rounds are looked at every second: after several looks, still no second round.
        tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
        let after = admin.get_tournament(v1::TournamentId { tournament_id: id }).await.unwrap().into_inner();
        assert_eq!((after.state.as_str(), after.pairings.len()), ("stopped", 2), "{backend:?}");
        assert!(worker.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.is_none());
        // Stopping one test, an approved one too, ends its event the same way: the
        // other test stops, saying why, and no round follows.
        let request = event_request(&mut mallory, &["a", "b", "c", "d"], "swiss").await;
        let event = mallory.create_tournament(request).await.unwrap().into_inner();
        for pairing in &event.pairings {
            admin.approve_job(v1::JobId { job_id: pairing.job_id }).await.unwrap();
        }
        admin.stop_job(v1::JobId { job_id: event.pairings[1].job_id }).await.unwrap();
        let id = event.tournament_id;
        let stopped = tournament_when(&mut admin, id, "stopped", |t| t.state == "stopped").await;
        let start = std::time::Instant::now();
        while test_states(&mut admin, &stopped).await != ["stopped", "stopped"] {
            assert!(start.elapsed() < std::time::Duration::from_secs(20), "{backend:?}: the other test still runs");
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        let other = admin.get_job(v1::JobId { job_id: event.pairings[0].job_id }).await.unwrap().into_inner();
        assert_eq!(other.outcome, format!("tournament {id} stopped"), "{backend:?}");
        tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
        let after = admin.get_tournament(v1::TournamentId { tournament_id: id }).await.unwrap().into_inner();
        assert_eq!(after.pairings.len(), 2, "{backend:?}: no round follows");
    }
}

/// Attack (review of 2026-11-28, F11): a revoked submitter's event played on, making
/// round after round in its name. Revoking the token stops its tests; the event is
/// over, saying why, and makes no round after, on either database.
#[tokio::test]
async fn revoking_an_event_s_maker_ends_the_event_and_no_round_follows() {
    for backend in BACKENDS {
        let served = serve(backend, config()).await;
        let mut admin = client(served.address, &served.client_token).await;
        let (mut mallory, mallory_id) = submitter(&served, "mallory").await;
        let request = event_request(&mut mallory, &["a", "b", "c", "d"], "swiss").await;
        let event = mallory.create_tournament(request).await.unwrap().into_inner();
        assert_eq!(test_states(&mut admin, &event).await, ["running", "running"], "{backend:?}");
        admin.revoke_token(v1::RevokeTokenRequest { id: mallory_id }).await.unwrap();
        let id = event.tournament_id;
        let stopped = tournament_when(&mut admin, id, "the event stopped", |t| t.state == "stopped").await;
        assert_eq!(test_states(&mut admin, &stopped).await, ["stopped", "stopped"], "{backend:?}");
        let test = admin.get_job(v1::JobId { job_id: event.pairings[0].job_id }).await.unwrap().into_inner();
        assert!(test.outcome.contains("revoked"), "{backend:?}: {}", test.outcome);
        // Rounds are looked at every second: after several looks, still no second round.
        tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
        let after = admin.get_tournament(v1::TournamentId { tournament_id: id }).await.unwrap().into_inner();
        assert_eq!((after.state.as_str(), after.pairings.len()), ("stopped", 2), "{backend:?}");
        let mut worker = registered_worker(&served, "w", &[]).await;
        assert!(worker.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.is_none());
    }
}

/// An event's approval: once an admin approved a submitter's first round, the rounds
/// after it run at once, under the submitter's name; a test playing an engine that has
/// only sat rounds out (a bye) waits, for no admin has seen that engine run.
#[tokio::test]
async fn an_approved_event_plays_on_without_new_approvals_but_a_newcomer_waits() {
    for backend in BACKENDS {
        let served = serve(backend, SchedulerConfig { require_approval: true, ..config() }).await;
        let mut admin = client(served.address, &served.client_token).await;
        let (mut alice, alice_id) = submitter(&served, "alice").await;
        let mut request = event_request(&mut alice, &["a", "b", "c", "d", "e"], "swiss").await;
        request.rounds = 3;
        let event = alice.create_tournament(request).await.unwrap().into_inner();
        let id = event.tournament_id;
        assert_eq!(test_states(&mut admin, &event).await, ["pending", "pending"], "{backend:?}");
        let sat_out = |t: &v1::Tournament, round: u32| {
            let meetings: Vec<&v1::TournamentPairing> = t.pairings.iter().filter(|p| p.round == round).collect();
            ["a", "b", "c", "d", "e"]
                .into_iter()
                .find(|n| !meetings.iter().any(|p| p.first == *n || p.second == *n))
                .unwrap()
        };
        let bye = sat_out(&event, 1);
        for pairing in &event.pairings {
            admin.approve_job(v1::JobId { job_id: pairing.job_id }).await.unwrap();
        }
        let mut worker = registered_worker(&served, "w", &[]).await;
        play_first_wins(&mut worker, 2).await;
        let second = tournament_when(&mut admin, id, "a second round", |t| t.pairings.len() == 4).await;
        // The engine that sat out round 1 plays in round 2: its test waits; the other,
        // between engines the admin saw play, runs.
        let mut waiting = None;
        for pairing in &second.pairings[2..] {
            let job = admin.get_job(v1::JobId { job_id: pairing.job_id }).await.unwrap().into_inner();
            assert_eq!(job.submitter, alice_id, "{backend:?}: the event's maker's test");
            let newcomer = pairing.first == bye || pairing.second == bye;
            assert_eq!(job.state, if newcomer { "pending" } else { "running" }, "{backend:?}: {pairing:?}");
            if newcomer {
                waiting = Some(job.job_id);
            }
        }
        play_first_wins(&mut worker, 1).await;
        assert!(worker.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.is_none());
        admin.approve_job(v1::JobId { job_id: waiting.expect("the bye's engine plays in round 2") }).await.unwrap();
        play_first_wins(&mut worker, 1).await;
        // Every engine has now played: round 3 runs at once, none of it waiting.
        let third = tournament_when(&mut admin, id, "a third round", |t| t.pairings.len() == 6).await;
        assert_eq!(test_states(&mut admin, &third).await[4..], ["running", "running"], "{backend:?}");
        play_first_wins(&mut worker, 2).await;
        tournament_when(&mut admin, id, "finished", |t| t.state == "finished").await;
    }
}

/// StopTournament: the event's maker or an admin stops it (no more rounds, its tests
/// stopped with the reason), another submitter may not; the audit log says who did.
#[tokio::test]
async fn an_event_is_stopped_by_its_maker_or_an_admin_and_not_by_another_submitter() {
    for backend in BACKENDS {
        let served = serve(backend, config()).await;
        let mut admin = client(served.address, &served.client_token).await;
        let (mut alice, alice_id) = submitter(&served, "alice").await;
        let (mut bob, _) = submitter(&served, "bob").await;
        let request = event_request(&mut alice, &["a", "b", "c"], "").await;
        let event = alice.create_tournament(request).await.unwrap().into_inner();
        let id = v1::TournamentId { tournament_id: event.tournament_id };
        let denied = bob.stop_tournament(id).await.unwrap_err();
        assert_eq!(denied.code(), tonic::Code::PermissionDenied, "{backend:?}: {denied:?}");
        assert!(denied.message().contains("another submitter's"), "{}", denied.message());
        assert_eq!(test_states(&mut admin, &event).await, ["running"; 3], "{backend:?}: untouched");
        let stopped = alice.stop_tournament(id).await.unwrap().into_inner();
        assert_eq!(stopped.state, "stopped", "{backend:?}");
        assert_eq!(test_states(&mut admin, &stopped).await, ["stopped"; 3], "{backend:?}");
        // An admin stops a submitter's Swiss event; its next round is never made.
        let request = event_request(&mut alice, &["a", "b", "c", "d"], "swiss").await;
        let swiss = alice.create_tournament(request).await.unwrap().into_inner();
        let swiss_id = v1::TournamentId { tournament_id: swiss.tournament_id };
        let stopped = admin.stop_tournament(swiss_id).await.unwrap().into_inner();
        assert_eq!((stopped.state.as_str(), stopped.pairings.len()), ("stopped", 2), "{backend:?}");
        assert_eq!(test_states(&mut admin, &stopped).await, ["stopped"; 2], "{backend:?}");
        tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
        assert_eq!(admin.get_tournament(swiss_id).await.unwrap().into_inner().pairings.len(), 2, "{backend:?}");
        let missing = admin.stop_tournament(v1::TournamentId { tournament_id: 99 }).await.unwrap_err();
        assert_eq!(missing.code(), tonic::Code::NotFound);
        let entries = admin.list_audit(v1::ListAuditRequest::default()).await.unwrap().into_inner().entries;
        let stops: Vec<(&str, &str)> = entries
            .iter()
            .filter(|e| e.action == "tournament.stop")
            .map(|e| (e.actor.as_str(), e.detail.as_str()))
            .collect();
        let admin_hash = xq_coordinator::access::tokens::token_hash(&served.client_token);
        let admin_id = xq_coordinator::access::tokens::token_id(&admin_hash);
        let expected =
            [(admin_id, swiss.tournament_id.to_string()), (alice_id.as_str(), event.tournament_id.to_string())];
        assert_eq!(stops, expected.iter().map(|(a, d)| (*a, d.as_str())).collect::<Vec<_>>(), "{backend:?}");
    }
}

/// A stopped test ends any event, a round robin's too: its other tests stop.
#[tokio::test]
async fn a_stopped_test_ends_its_event_and_its_other_tests_stop() {
    let served = serve(BACKENDS[0], config()).await;
    let mut admin = client(served.address, &served.client_token).await;
    let request = event_request(&mut admin, &["a", "b", "c"], "").await;
    let event = admin.create_tournament(request).await.unwrap().into_inner();
    admin.stop_job(v1::JobId { job_id: event.pairings[1].job_id }).await.unwrap();
    let stopped = tournament_when(&mut admin, event.tournament_id, "stopped", |t| t.state == "stopped").await;
    let start = std::time::Instant::now();
    while test_states(&mut admin, &stopped).await != ["stopped"; 3] {
        assert!(start.elapsed() < std::time::Duration::from_secs(20), "its other tests still run");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// Every count a tournament request sets is bounded, and each refusal names its bound:
/// engines, games a pairing, a Swiss event's rounds, a knockout's tie-break pairs, and
/// the tests and games the whole event can make; every engine is checked at creation,
/// one that sits out the first round too.
#[tokio::test]
async fn tournament_requests_past_a_bound_are_refused_naming_it() {
    let served = serve(BACKENDS[0], config()).await;
    let mut admin = client(served.address, &served.client_token).await;
    let names: Vec<String> = (0..65).map(|i| format!("e{i}")).collect();
    let many = engines(&mut admin, &names.iter().map(String::as_str).collect::<Vec<_>>()).await;
    let base = event_request(&mut admin, &["a", "b", "c", "d", "e"], "").await;
    let with = |count: usize, system: &str, change: &dyn Fn(&mut v1::CreateTournamentRequest)| {
        let mut request =
            v1::CreateTournamentRequest { engines: many[..count].to_vec(), system: system.to_owned(), ..base.clone() };
        change(&mut request);
        request
    };
    let mut bad_protocol = base.clone();
    bad_protocol.system = "swiss".to_owned();
    bad_protocol.engines[4].protocol = "xboard".to_owned();
    let cases = [
        (with(65, "swiss", &|_| {}), "65 engines: between 2 and 64"),
        (with(1, "", &|_| {}), "1 engines: between 2 and 64"),
        (with(4, "", &|r| r.games_per_pairing = 10_002), "at most 10000"),
        (with(4, "swiss", &|r| r.rounds = 4), "rounds: at most 3"),
        (with(4, "knockout", &|r| r.tie_break_pairs = 101), "tie_break_pairs: at most 100"),
        // 46 engines: 1,035 pairings.
        (with(46, "", &|_| {}), "46 engines make up to 1035 tests"),
        // 64 engines: 63 matches, each with up to 100 tie-breaks.
        (with(64, "knockout", &|r| r.tie_break_pairs = 100), "at most 1000 tests an event"),
        // 20 engines: 190 pairings of 10,000 games.
        (with(20, "", &|r| r.games_per_pairing = 10_000), "up to 1900000 games in this event, at most 1000000"),
        // Every engine is checked, whether or not it plays the first round.
        (bad_protocol, "engines: 'e': protocol 'xboard'"),
    ];
    let before = admin.list_jobs(v1::ListJobsRequest { limit: 1000, ..Default::default() }).await.unwrap();
    for (request, bound) in cases {
        let status = admin.create_tournament(request).await.unwrap_err();
        assert_eq!(status.code(), tonic::Code::InvalidArgument, "{bound}: {status:?}");
        assert!(status.message().contains(bound), "'{}' does not name '{bound}'", status.message());
    }
    let after = admin.list_jobs(v1::ListJobsRequest { limit: 1000, ..Default::default() }).await.unwrap();
    assert_eq!(before.into_inner().jobs.len(), after.into_inner().jobs.len(), "no test made");
    // At the bounds, an event is made.
    let largest = with(45, "", &|r| r.games_per_pairing = 1_000);
    assert_eq!(admin.create_tournament(largest).await.unwrap().into_inner().pairings.len(), 990);
}

/// A submitter's event is its own throughout: its later rounds count against its limit
/// of active jobs (they were made as an admin's, beyond any limit), and a round waits,
/// whole, until the limit has room for it.
#[tokio::test]
async fn later_rounds_wait_for_room_under_their_maker_s_limit_of_active_jobs() {
    let served = serve(BACKENDS[0], SchedulerConfig { submitter_active_jobs: 2, ..config() }).await;
    let mut admin = client(served.address, &served.client_token).await;
    let (mut alice, _) = submitter(&served, "alice").await;
    let request = event_request(&mut alice, &["a", "b", "c", "d"], "swiss").await;
    let event = alice.create_tournament(request).await.unwrap().into_inner();
    let id = event.tournament_id;
    let mut worker = registered_worker(&served, "w", &[]).await;
    play_first_wins(&mut worker, 1).await;
    // One round-1 test still runs: alice fills her limit with a test of her own.
    let own = test_request(&mut alice, 4, None).await;
    let own = alice.create_test(own).await.unwrap().into_inner();
    let lease = worker.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
    let round_one_test = if lease.job_id == own.job_id {
        worker.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap()
    } else {
        lease
    };
    let Some(v1::lease::Work::MatchSpec(spec)) = &round_one_test.work else { panic!("a match lease") };
    let names = [spec.new_engine.as_ref().unwrap().name.clone(), spec.base_engine.as_ref().unwrap().name.clone()];
    let report = v1::ReportPairsRequest {
        lease_id: round_one_test.lease_id,
        pairs: vec![named_pair(round_one_test.units[0], [2, 2], [&names[0], &names[1]])],
        cumulative: Some(totals(&[[2, 2]])),
        ..Default::default()
    };
    worker.report_pairs(report).await.unwrap();
    // Round 2 (two tests) does not fit beside her own test: none of it is made.
    tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
    let waiting = admin.get_tournament(v1::TournamentId { tournament_id: id }).await.unwrap().into_inner();
    assert_eq!((waiting.state.as_str(), waiting.pairings.len()), ("running", 2));
    let jobs = admin.list_jobs(v1::ListJobsRequest { limit: 100, ..Default::default() }).await.unwrap();
    assert_eq!(jobs.into_inner().jobs.len(), 3, "no test made and stopped while the round waits");
    alice.stop_job(v1::JobId { job_id: own.job_id }).await.unwrap();
    tournament_when(&mut admin, id, "round 2 once there is room", |t| t.pairings.len() == 4).await;
}

/// An event's standings read its tests' pairs from storage only when a test's counts
/// change, not on every request (the dashboard refetches them every few seconds): with
/// the stored pairs removed behind the coordinator's back, the standings stay as they
/// were; a pair counted on the other test makes that test's pairs read again, and the
/// first test's are still the ones kept.
#[tokio::test]
async fn standings_read_a_test_s_pairs_again_only_when_its_counts_change() {
    let served = serve(BACKENDS[0], config()).await;
    let mut admin = client(served.address, &served.client_token).await;
    let request = v1::CreateTournamentRequest {
        games_per_pairing: 2,
        ..event_request(&mut admin, &["a", "b", "c"], "double-round-robin").await
    };
    let event = admin.create_tournament(request).await.unwrap().into_inner();
    assert_eq!(event.pairings.len(), 3, "{event:?}");
    let mut worker = registered_worker(&served, "w", &[]).await;
    play_first_wins(&mut worker, 1).await;
    let total = |t: &v1::Tournament| t.standings.iter().map(|s| s.points).sum::<f64>();
    let id = event.tournament_id;
    let once = tournament_when(&mut admin, id, "one pair counted", |t| total(t) > 0.0).await;
    let pool = served.coordinator.shared.storage.pool().clone();
    sqlx::query("DELETE FROM units").execute(&pool).await.unwrap();
    let again = admin.get_tournament(v1::TournamentId { tournament_id: id }).await.unwrap().into_inner();
    assert_eq!(again.standings, once.standings, "read from the kept pairs");
    // A drawn pair on the other test: that test's pairs are read again (the draw), the
    // first test's kept (the wins): as many points again, and the winner still ahead.
    let lease = worker.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
    let Some(v1::lease::Work::MatchSpec(spec)) = &lease.work else { panic!("a match lease") };
    let names = [spec.new_engine.as_ref().unwrap().name.as_str(), spec.base_engine.as_ref().unwrap().name.as_str()];
    let report = v1::ReportPairsRequest {
        lease_id: lease.lease_id,
        pairs: vec![named_pair(lease.units[0], [1, 1], names)],
        cumulative: Some(totals(&[[1, 1]])),
        ..Default::default()
    };
    worker.report_pairs(report).await.unwrap();
    let after = tournament_when(&mut admin, id, "the draw counted", |t| total(t) != total(&once)).await;
    assert_eq!(total(&after), 2.0 * total(&once), "{after:?}");
    assert_ne!(after.standings[0].points, after.standings[1].points, "{after:?}");
}
