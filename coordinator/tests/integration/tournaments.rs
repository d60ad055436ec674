//! Tournaments on the coordinator: each pairing of a double round robin becomes a test
//! of its own; pairs reported on those tests (as any worker reports them) make the
//! standings, placed by Articles 9 and 10 exactly as a hand count of the same games.

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
