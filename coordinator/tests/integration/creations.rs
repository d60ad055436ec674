//! Creating a job or a tournament is idempotent under retries: a creation named by its
//! client (metadata `xq-request-id`) makes one job, or one event with its tests,
//! however many times it is sent, at once or after a restart, and a retry is answered
//! before the quota that the first call used. (A crash in the middle of a tournament's
//! creation is drilled in `drills`.)

use tonic::Code;
use xq_coordinator::scheduler::config::SchedulerConfig;
use xq_proto::client::named;
use xq_proto::v1;

use crate::common::{BACKENDS, Client, TempDir, client, fresh_database, serve_on, test_request};

async fn job_count(admin: &mut Client) -> usize {
    admin.list_jobs(v1::ListJobsRequest::default()).await.unwrap().into_inner().jobs.len()
}

/// Attack (of the network, not of a person): the answer to a creation is lost and the
/// client sends it again. Before, each retry made a twin job that the fleet then played.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_named_creation_makes_one_job_however_often_it_is_sent() {
    for backend in BACKENDS {
        let dir = TempDir::new("creations");
        let url = fresh_database(backend, &dir.0).await;
        let config = SchedulerConfig { submitter_active_jobs: 1, ..SchedulerConfig::default() };
        let served = serve_on(&dir.0, &url, config.clone(), 100).await;
        let mut admin = client(served.address, &served.client_token).await;
        let request = test_request(&mut admin, 10, None).await;

        let first = admin.create_test(named(request.clone(), "run-1")).await.unwrap().into_inner();
        let again = admin.create_test(named(request.clone(), "run-1")).await.unwrap().into_inner();
        assert_eq!((again.job_id, job_count(&mut admin).await), (first.job_id, 1), "{backend:?}");
        // Sent eight times at once: still one job.
        let racing: Vec<_> = (0..8)
            .map(|_| {
                let (mut admin, request) = (admin.clone(), named(request.clone(), "run-2"));
                tokio::spawn(async move { admin.create_test(request).await.unwrap().into_inner().job_id })
            })
            .collect();
        let mut ids = Vec::new();
        for task in racing {
            ids.push(task.await.unwrap());
        }
        ids.dedup();
        assert_eq!((ids.len(), job_count(&mut admin).await), (1, 2), "{ids:?}");
        // The same name for another request is the client's mistake, refused by name.
        let other = v1::CreateTestRequest { pairs: 11, ..request.clone() };
        let reused = admin.create_test(named(other, "run-1")).await.unwrap_err();
        assert_eq!(reused.code(), Code::InvalidArgument);
        assert!(reused.message().contains(&format!("made job {}", first.job_id)), "{}", reused.message());
        for bad in ["a b", &"x".repeat(129)] {
            let status = admin.create_test(named(request.clone(), bad)).await.unwrap_err();
            assert!(status.message().contains("xq-request-id"), "{}", status.message());
        }

        // Names are a token's own: a submitter's "run-1" is a job of its own, and its
        // retry is answered though the active-jobs limit (1) would refuse a new job.
        let token = v1::CreateTokenRequest { role: "submitter".to_owned(), name: "s".to_owned(), expires_seconds: 0 };
        let token = admin.create_token(token).await.unwrap().into_inner().token;
        let mut submitter = client(served.address, &token).await;
        let own = submitter.create_test(named(request.clone(), "run-1")).await.unwrap().into_inner();
        assert_ne!(own.job_id, first.job_id);
        let retried = submitter.create_test(named(request.clone(), "run-1")).await.unwrap().into_inner();
        assert_eq!(retried.job_id, own.job_id);
        let fresh = submitter.create_test(named(request.clone(), "run-3")).await.unwrap_err();
        assert!(
            fresh.message().contains("running or pending jobs"),
            "the limit still holds for a new name: {}",
            fresh.message()
        );

        // The name is stored with the job, in the same row: after a restart (a crash
        // between the commit and the answer) the retry finds the job.
        drop(served);
        let restarted = serve_on(&dir.0, &url, config, 100).await;
        let mut admin = client(restarted.address, &restarted.client_token).await;
        let after = admin.create_test(named(request.clone(), "run-1")).await.unwrap().into_inner();
        assert_eq!((after.job_id, job_count(&mut admin).await), (first.job_id, 3), "{backend:?}");
        // Unnamed creations are as before: a job per call.
        admin.create_test(request.clone()).await.unwrap();
        admin.create_test(request).await.unwrap();
        assert_eq!(job_count(&mut admin).await, 5);
    }
}

async fn tournament_count(admin: &mut Client) -> usize {
    admin.list_tournaments(v1::ListTournamentsRequest::default()).await.unwrap().into_inner().tournaments.len()
}

/// A double round robin of three engines: three tests.
pub async fn cup_request(client: &mut Client) -> v1::CreateTournamentRequest {
    let test = test_request(client, 1, None).await;
    let engines = ["a", "b", "c"]
        .map(|name| v1::EngineSpec { name: name.to_owned(), ..test.new_engine.clone().unwrap() })
        .to_vec();
    let settings = v1::CreateTestRequest { new_engine: None, base_engine: None, pairs: 0, ..test };
    v1::CreateTournamentRequest { engines, settings: Some(settings), ..Default::default() }
}

/// The event's number and its tests' numbers.
pub fn event_and_tests(event: &v1::Tournament) -> (u64, Vec<u64>) {
    (event.tournament_id, event.pairings.iter().map(|p| p.job_id).collect())
}

/// The same attack on a tournament: each retry made a whole event of tests. Before,
/// a name was refused, so that no client believed its retries safe.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_named_tournament_is_made_once_with_its_tests_however_often_it_is_sent() {
    for backend in BACKENDS {
        let dir = TempDir::new("creations-tournament");
        let url = fresh_database(backend, &dir.0).await;
        let config = SchedulerConfig { submitter_active_jobs: 3, ..SchedulerConfig::default() };
        let served = serve_on(&dir.0, &url, config.clone(), 100).await;
        let mut admin = client(served.address, &served.client_token).await;
        let request = cup_request(&mut admin).await;

        // Sent three times at once: one event of three tests, the same answer to each.
        let racing: Vec<_> = (0..3)
            .map(|_| {
                let (mut admin, request) = (admin.clone(), named(request.clone(), "cup-1"));
                tokio::spawn(async move { admin.create_tournament(request).await.unwrap().into_inner() })
            })
            .collect();
        let mut answers = Vec::new();
        for task in racing {
            answers.push(event_and_tests(&task.await.unwrap()));
        }
        let first = answers[0].clone();
        assert_eq!(first.1.len(), 3, "{backend:?}: {first:?}");
        assert!(answers.iter().all(|answer| *answer == first), "{backend:?}: {answers:?}");
        assert_eq!((tournament_count(&mut admin).await, job_count(&mut admin).await), (1, 3), "{backend:?}");

        // The same name for another request is refused naming the event; nothing is made.
        let other = v1::CreateTournamentRequest { games_per_pairing: 4, ..request.clone() };
        let reused = admin.create_tournament(named(other, "cup-1")).await.unwrap_err();
        assert_eq!(reused.code(), Code::InvalidArgument);
        assert!(reused.message().contains(&format!("made tournament {}", first.0)), "{}", reused.message());
        // Names are shared by a token's jobs and events: one cannot be the other's.
        let test = test_request(&mut admin, 10, None).await;
        let as_job = admin.create_test(named(test.clone(), "cup-1")).await.unwrap_err();
        assert!(as_job.message().contains(&format!("made tournament {}", first.0)), "{}", as_job.message());
        let job = admin.create_test(named(test, "run-1")).await.unwrap().into_inner();
        let as_event = admin.create_tournament(named(request.clone(), "run-1")).await.unwrap_err();
        assert!(as_event.message().contains(&format!("made job {}", job.job_id)), "{}", as_event.message());
        assert_eq!((tournament_count(&mut admin).await, job_count(&mut admin).await), (1, 4), "{backend:?}");

        // A submitter's event is its own, and its retry is answered though its three
        // tests fill the active-jobs limit (3); a new name is refused whole.
        let token = v1::CreateTokenRequest { role: "submitter".to_owned(), name: "s".to_owned(), expires_seconds: 0 };
        let token = admin.create_token(token).await.unwrap().into_inner().token;
        let mut submitter = client(served.address, &token).await;
        let own = submitter.create_tournament(named(request.clone(), "cup-1")).await.unwrap().into_inner();
        assert_ne!(own.tournament_id, first.0);
        let retried = submitter.create_tournament(named(request.clone(), "cup-1")).await.unwrap().into_inner();
        assert_eq!(event_and_tests(&retried), event_and_tests(&own));
        let fresh = submitter.create_tournament(named(request.clone(), "cup-2")).await.unwrap_err();
        assert!(fresh.message().contains("this request makes 3"), "{}", fresh.message());
        assert_eq!((tournament_count(&mut admin).await, job_count(&mut admin).await), (2, 7), "{backend:?}");

        // The name is stored with the event, which is stored with its tests: after a
        // restart the retry gets the same event and tests, and makes nothing.
        drop(served);
        let restarted = serve_on(&dir.0, &url, config, 100).await;
        let mut admin = client(restarted.address, &restarted.client_token).await;
        let after = admin.create_tournament(named(request.clone(), "cup-1")).await.unwrap().into_inner();
        assert_eq!(event_and_tests(&after), first, "{backend:?}");
        assert_eq!((tournament_count(&mut admin).await, job_count(&mut admin).await), (2, 7), "{backend:?}");
        // Unnamed creations are as before: an event per call.
        admin.create_tournament(request).await.unwrap();
        assert_eq!((tournament_count(&mut admin).await, job_count(&mut admin).await), (3, 10), "{backend:?}");
    }
}
