//! Creating a job is idempotent under retries: a creation named by its client
//! (metadata `xq-request-id`) makes one job however many times it is sent, at once or
//! after a restart, and a retry is answered before the quota that the first call used.

use tonic::Code;
use xq_coordinator::scheduler::SchedulerConfig;
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

/// A tournament's creation makes several jobs and cannot be named yet: a name is
/// refused rather than ignored, so that no client believes its retries safe.
#[tokio::test]
async fn a_named_tournament_is_refused_not_ignored() {
    let dir = TempDir::new("creations-tournament");
    let url = fresh_database(BACKENDS[0], &dir.0).await;
    let served = serve_on(&dir.0, &url, SchedulerConfig::default(), 100).await;
    let mut admin = client(served.address, &served.client_token).await;
    let status = admin.create_tournament(named(v1::CreateTournamentRequest::default(), "t-1")).await.unwrap_err();
    assert!(status.message().contains("cannot be named yet"), "{}", status.message());
}
