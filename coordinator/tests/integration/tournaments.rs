//! Tournaments on the coordinator: each pairing of a double round robin becomes a test
//! of its own; pairs reported on those tests (as any worker reports them) make the
//! standings, placed by Articles 9 and 10 exactly as a hand count of the same games; a
//! Swiss event's rounds are made one after the other from the results.

use xq_coordinator::scheduler::SchedulerConfig;
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

#[tokio::test]
async fn a_round_robin_is_a_test_per_pairing_and_its_standings_count_their_pairs() {
    for backend in BACKENDS {
        let served = serve(backend, config()).await;
        let mut admin = client(served.address, &served.client_token).await;
        let settings = v1::CreateTestRequest {
            time_control: "10+0.1".to_owned(),
            adjudication: Some(ADJUDICATION),
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
                ..Default::default()
            }),
            ..Default::default()
        };
        let created = admin.create_tournament(request.clone()).await.unwrap().into_inner();
        assert_eq!(created.pairings.len(), 2, "five engines: two meetings and a bye");
        let id = created.tournament_id;
        let mut worker = registered_worker(&served, "w", &[]).await;
        // The first engine named in a meeting wins both games of its pair.
        let play_round = async |worker: &mut Worker| {
            for _ in 0..2 {
                let lease =
                    worker.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
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
        };
        play_round(&mut worker).await;
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
        play_round(&mut worker).await;
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
