//! A worker that forges results legal enough to pass every game check is caught by its
//! residual: quarantined, its results set aside and the test recounted without them,
//! its units played again by others; an admin disables, quarantines and restores
//! workers by hand. On both databases, and across a restart.

use tonic::Code;
use xq_coordinator::jobs::verification::DEFAULT_RULES;
use xq_coordinator::scheduler::config::SchedulerConfig;
use xq_engine::xiangqi::pgn::parse_pgn;
use xq_engine::xiangqi::rules::verify::{Tally, unit_report};
use xq_proto::v1;

use crate::common::{
    BACKENDS, Served, TempDir, Worker, client, fresh_database, pair, registered_as, registered_worker,
    registered_worker_token, registered_worker_with_cores, serve, serve_on, test_capabilities, test_request, totals,
    upload, worker,
};
use crate::verification::GAMES;

/// Leases of 256 pairs; a worker's residual is judged from 40 pairs on.
fn config() -> SchedulerConfig {
    SchedulerConfig { lease_seconds: 256.0 * 72.0, reference_nps: 0, quarantine_min_pairs: 40, ..Default::default() }
}

/// An honest-looking mix: the new engine scores half its points, pair results spread.
const HONEST: [[u8; 2]; 8] = [[2, 0], [1, 1], [0, 2], [1, 2], [1, 0], [2, 1], [0, 1], [1, 1]];

/// Reports `pairs` on `lease`'s first units, ten a report, after the `already`
/// reported; what the last report's answer said.
async fn report(
    worker: &mut Worker,
    lease: &v1::Lease,
    pairs: &[[u8; 2]],
    already: usize,
) -> Result<v1::ReportReply, tonic::Status> {
    let mut reply = v1::ReportReply::default();
    for end in (already + 10..=pairs.len()).step_by(10) {
        let sent = (end - 10..end).map(|i| pair(lease.units[i], pairs[i])).collect();
        let request = v1::ReportPairsRequest {
            lease_id: lease.lease_id,
            pairs: sent,
            cumulative: Some(totals(&pairs[..end])),
            ..Default::default()
        };
        reply = worker.report_pairs(request).await?.into_inner();
    }
    Ok(reply)
}

fn honest(n: usize) -> Vec<[u8; 2]> {
    HONEST.iter().copied().cycle().take(n).collect()
}

#[tokio::test]
async fn a_forging_worker_is_quarantined_and_the_test_counts_only_honest_pairs() {
    for backend in BACKENDS {
        let dir = TempDir::new("quarantine");
        let url = fresh_database(backend, &dir.0).await;
        let first = serve_on(&dir.0, &url, config(), 100).await;
        let mut admin = client(first.address, &first.client_token).await;
        let request = test_request(&mut admin, 1000, None).await;
        let job = admin.create_test(request).await.unwrap().into_inner();
        let id = v1::JobId { job_id: job.job_id };
        let (mut a, _) = registered_worker_token(&first, "a", &[]).await;
        let (mut b, b_token) = registered_worker_token(&first, "b", &[]).await;
        let (mut forger, forger_token) = registered_worker_token(&first, "forger", &[]).await;
        let mut leases = Vec::new();
        for player in [&mut a, &mut b, &mut forger] {
            leases.push(player.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap());
        }
        report(&mut a, &leases[0], &honest(60), 0).await.unwrap();
        report(&mut b, &leases[1], &honest(60), 0).await.unwrap();
        // The forger wins every game. Its 30 first pairs are too few to judge; at 40 it
        // lies about 10 standard errors off: that report is taken, then set aside, and
        // the forger told to stop.
        let forged = vec![[2u8, 2]; 40];
        let reply = report(&mut forger, &leases[2], &forged[..30], 0).await.unwrap();
        assert!(!reply.stop, "{backend:?}");
        let state = admin.get_job(id).await.unwrap().into_inner();
        assert_eq!(state.units_done, 150, "{backend:?}: counted until judged");
        let reply = report(&mut forger, &leases[2], &forged, 30).await.unwrap();
        assert!(reply.stop, "{backend:?}: told to stop");
        let honest_penta = totals(&[honest(60), honest(60)].concat()).pentanomial;
        let state = admin.get_job(id).await.unwrap().into_inner();
        assert_eq!(state.units_done, 120, "{backend:?}: only the honest pairs count");
        assert_eq!(state.totals.as_ref().unwrap().pentanomial, honest_penta, "{backend:?}");
        let workers = admin.list_workers(v1::ListWorkersRequest {}).await.unwrap().into_inner().workers;
        let listed = workers.iter().find(|w| w.capabilities.as_ref().unwrap().name == "forger").unwrap();
        assert_eq!(listed.standing, "quarantined", "{backend:?}");
        assert!(listed.standing_reason.contains("standard errors"), "{}", listed.standing_reason);
        assert_eq!((listed.units_done, listed.active_leases), (0, 0), "{backend:?}");
        // From now on it gets nothing and reports nothing.
        let more = v1::ReportPairsRequest {
            lease_id: leases[2].lease_id,
            pairs: vec![pair(leases[2].units[40], [2, 2])],
            cumulative: Some(totals(&[[2, 2]; 41])),
            ..Default::default()
        };
        assert_eq!(forger.report_pairs(more).await.unwrap_err().code(), Code::PermissionDenied, "{backend:?}");
        let status = forger.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap_err();
        assert_eq!(status.code(), Code::PermissionDenied, "{backend:?}");
        // Its units are played again, first of all.
        let (mut c, _) = registered_worker_token(&first, "c", &[]).await;
        let again = c.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
        assert_eq!(again.units[..40], leases[2].units[..40], "{backend:?}");

        // By hand: a disabled worker gets no work, and its results stay counted.
        let disable = v1::SetWorkerStandingRequest {
            worker_id: 2,
            standing: "disabled".to_owned(),
            reason: "host retired".to_owned(),
        };
        let info = admin.set_worker_standing(disable).await.unwrap().into_inner();
        assert_eq!((info.standing.as_str(), info.units_done), ("disabled", 60), "{backend:?}");
        assert_eq!(b.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap_err().code(), Code::PermissionDenied);
        assert_eq!(admin.get_job(id).await.unwrap().into_inner().units_done, 120);
        let bad = v1::SetWorkerStandingRequest { worker_id: 2, standing: "banished".to_owned(), ..Default::default() };
        assert_eq!(admin.set_worker_standing(bad).await.unwrap_err().code(), Code::InvalidArgument);
        drop(first);

        // After a restart: the counts, the standings and the refusals hold.
        let second = serve_on(&dir.0, &url, config(), 100).await;
        let mut admin = client(second.address, &second.client_token).await;
        let state = admin.get_job(id).await.unwrap().into_inner();
        assert_eq!(state.units_done, 120, "{backend:?}");
        assert_eq!(state.totals.unwrap().pentanomial, honest_penta, "{backend:?}");
        let mut forger = worker(second.address, &forger_token).await;
        let status = forger.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap_err();
        assert_eq!(status.code(), Code::PermissionDenied, "{backend:?}");
        assert!(status.message().contains("quarantined"), "{}", status.message());
        // Restored, the disabled worker plays again.
        let restore =
            v1::SetWorkerStandingRequest { worker_id: 2, standing: "active".to_owned(), ..Default::default() };
        admin.set_worker_standing(restore).await.unwrap();
        let mut b = worker(second.address, &b_token).await;
        assert!(
            b.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.is_some(),
            "{backend:?}"
        );
    }
}

/// A forger who keeps the mean (as many lost pairs as won ones, nothing between) passes
/// the residual; the shape of its pentanomial gives it away once it and the others have
/// 100 pairs (`Checks::min_pairs`), and only then.
#[tokio::test]
async fn a_worker_forging_pairs_of_the_right_mean_is_caught_by_their_shape() {
    for backend in BACKENDS {
        let served = serve(backend, config()).await;
        let mut admin = client(served.address, &served.client_token).await;
        let request = test_request(&mut admin, 1000, None).await;
        let id = v1::JobId { job_id: admin.create_test(request).await.unwrap().into_inner().job_id };
        let (mut a, _) = registered_worker_token(&served, "a", &[]).await;
        let (mut b, _) = registered_worker_token(&served, "b", &[]).await;
        let (mut forger, _) = registered_worker_token(&served, "forger", &[]).await;
        let mut leases = Vec::new();
        for player in [&mut a, &mut b, &mut forger] {
            leases.push(player.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap());
        }
        report(&mut a, &leases[0], &honest(60), 0).await.unwrap();
        report(&mut b, &leases[1], &honest(60), 0).await.unwrap();
        // Two points a pair on average, as the honest pairs score, but all 0 or 4.
        let forged: Vec<[u8; 2]> = [[0, 0], [2, 2]].into_iter().cycle().take(100).collect();
        let reply = report(&mut forger, &leases[2], &forged[..90], 0).await.unwrap();
        assert!(!reply.stop, "{backend:?}: 90 pairs are too few to judge a shape");
        assert_eq!(admin.get_job(id).await.unwrap().into_inner().units_done, 210, "{backend:?}");
        let reply = report(&mut forger, &leases[2], &forged, 90).await.unwrap();
        assert!(reply.stop, "{backend:?}: told to stop");
        let state = admin.get_job(id).await.unwrap().into_inner();
        assert_eq!(state.units_done, 120, "{backend:?}: only the honest pairs count");
        let workers = admin.list_workers(v1::ListWorkersRequest {}).await.unwrap().into_inner().workers;
        let listed = workers.iter().find(|w| w.capabilities.as_ref().unwrap().name == "forger").unwrap();
        assert_eq!(listed.standing, "quarantined", "{backend:?}");
        assert!(listed.standing_reason.contains("shaped unlike the other workers'"), "{}", listed.standing_reason);
    }
}

/// A worker that reports only the pairs it likes must let every lease holding one it
/// withholds expire. Against a fleet whose leases finish, four of four expired is one
/// chance in 6 million at the 2% an honest machine may lose: quarantined, with the
/// counts kept across a restart (read back from the leases' stored states).
#[tokio::test]
async fn a_worker_that_lets_its_leases_expire_is_quarantined_across_a_restart() {
    for backend in BACKENDS {
        let dir = TempDir::new("quarantine-expiry");
        let url = fresh_database(backend, &dir.0).await;
        let config =
            SchedulerConfig { lease_ttl: std::time::Duration::from_millis(300), max_units_per_lease: 2, ..config() };
        let first = serve_on(&dir.0, &url, config.clone(), 100).await;
        let mut admin = client(first.address, &first.client_token).await;
        let request = test_request(&mut admin, 1000, None).await;
        admin.create_test(request).await.unwrap();
        let (mut honest_worker, honest_token) = registered_worker_token(&first, "honest", &[]).await;
        let (mut withholder, withholder_token) = registered_worker_token(&first, "withholder", &[]).await;
        let finish = |worker: &mut Worker| {
            let mut worker = worker.clone();
            async move {
                for _ in 0..10 {
                    let lease = worker.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner();
                    let lease = lease.lease.unwrap();
                    let played: Vec<[u8; 2]> = honest(lease.units.len());
                    let request = v1::ReportPairsRequest {
                        lease_id: lease.lease_id,
                        pairs: lease.units.iter().zip(&played).map(|(&u, &p)| pair(u, p)).collect(),
                        cumulative: Some(totals(&played)),
                        ..Default::default()
                    };
                    worker.report_pairs(request).await.unwrap();
                }
            }
        };
        // Reports its first pair, withholds the second, and lets the lease expire.
        let withhold = |worker: &mut Worker| {
            let mut worker = worker.clone();
            async move {
                let lease = worker.lease(v1::LeaseRequest { concurrency: 1 }).await?.into_inner().lease.unwrap();
                let request = v1::ReportPairsRequest {
                    lease_id: lease.lease_id,
                    pairs: vec![pair(lease.units[0], [2, 2])],
                    cumulative: Some(totals(&[[2, 2]])),
                    ..Default::default()
                };
                worker.report_pairs(request).await?;
                tokio::time::sleep(std::time::Duration::from_millis(900)).await;
                Ok::<_, tonic::Status>(())
            }
        };
        finish(&mut honest_worker).await;
        for _ in 0..3 {
            withhold(&mut withholder).await.unwrap();
        }
        let standing = |admin: &mut crate::common::Client| {
            let mut admin = admin.clone();
            async move {
                let workers = admin.list_workers(v1::ListWorkersRequest {}).await.unwrap().into_inner().workers;
                let listed = workers.into_iter().find(|w| w.capabilities.as_ref().unwrap().name == "withholder");
                let listed = listed.unwrap();
                (listed.standing, listed.standing_reason)
            }
        };
        assert_eq!(standing(&mut admin).await.0, "active", "{backend:?}: three expired leases are not yet enough");
        drop(first);

        let second = serve_on(&dir.0, &url, config.clone(), 100).await;
        let mut admin = client(second.address, &second.client_token).await;
        let mut honest_worker = worker(second.address, &honest_token).await;
        let mut withholder = worker(second.address, &withholder_token).await;
        finish(&mut honest_worker).await;
        withhold(&mut withholder).await.unwrap();
        let (standing, reason) = standing(&mut admin).await;
        assert_eq!(standing, "quarantined", "{backend:?}: the fourth, after a restart");
        assert!(reason.contains("4 of its 4 leases expired"), "{backend:?}: {reason}");
        let status = withholder.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap_err();
        assert_eq!(status.code(), Code::PermissionDenied, "{backend:?}");
        // Its reported pairs are set aside: only the honest worker's count.
        let jobs = admin.list_jobs(v1::ListJobsRequest::default()).await.unwrap().into_inner().jobs;
        assert_eq!(jobs[0].units_done, 40, "{backend:?}");
    }
}

#[tokio::test]
async fn a_quarantine_by_hand_sets_the_worker_s_results_aside() {
    let backend = BACKENDS[0];
    let dir = TempDir::new("quarantine-by-hand");
    let url = fresh_database(backend, &dir.0).await;
    let served = serve_on(&dir.0, &url, config(), 100).await;
    let mut admin = client(served.address, &served.client_token).await;
    let request = test_request(&mut admin, 1000, None).await;
    let job = admin.create_test(request).await.unwrap().into_inner();
    let (mut a, _) = registered_worker_token(&served, "a", &[]).await;
    let lease = a.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
    report(&mut a, &lease, &honest(20), 0).await.unwrap();
    assert_eq!(admin.get_job(v1::JobId { job_id: job.job_id }).await.unwrap().into_inner().units_done, 20);
    let quarantine = v1::SetWorkerStandingRequest {
        worker_id: 1,
        standing: "quarantined".to_owned(),
        reason: "stolen token".to_owned(),
    };
    let info = admin.set_worker_standing(quarantine).await.unwrap().into_inner();
    assert_eq!(
        (info.standing.as_str(), info.standing_reason.as_str(), info.units_done),
        ("quarantined", "stolen token", 0)
    );
    let state = admin.get_job(v1::JobId { job_id: job.job_id }).await.unwrap().into_inner();
    assert_eq!((state.units_done, state.totals.unwrap().pentanomial), (0, vec![0; 5]));
    assert!(state.reasons.is_empty(), "{:?}", state.reasons);
}

/// A worker registered with an arbiter build of its own (`build`).
async fn registered_with_build(served: &Served, name: &str, build: &str) -> Worker {
    let capabilities = v1::Capabilities { arbiter_build: build.to_owned(), ..test_capabilities(name, &[], 1) };
    registered_as(served.address, &served.client_token, capabilities).await.0
}

/// A verification job over [`GAMES`], a unit a game.
async fn verification_job(admin: &mut crate::common::Client, priority: i32) -> u64 {
    let pgn = upload(admin, "chases.pgn", "pgn", GAMES.as_bytes()).await.unwrap();
    let request = v1::CreateVerificationRequest { pgn: Some(pgn), games_per_unit: 1, priority, ..Default::default() };
    admin.create_verification(request).await.unwrap().into_inner().job_id
}

#[tokio::test]
async fn a_worker_of_another_arbiter_build_gets_no_verification_work_and_is_not_quarantined() {
    let backend = BACKENDS[0];
    let dir = TempDir::new("quarantine-build");
    let url = fresh_database(backend, &dir.0).await;
    let served = serve_on(&dir.0, &url, config(), 100).await;
    let mut admin = client(served.address, &served.client_token).await;
    let verification = verification_job(&mut admin, 1).await;
    // Built before a change of the rules (or with none sent, as older workers do).
    let mut old = registered_with_build(&served, "old", "0.1.0+0123456789abcdef").await;
    let mut unsent = registered_with_build(&served, "unsent", "").await;
    for player in [&mut old, &mut unsent] {
        assert!(player.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.is_none());
    }
    // It still plays tests; a worker of this build verifies.
    let request = test_request(&mut admin, 100, None).await;
    let test = admin.create_test(request).await.unwrap().into_inner();
    let lease = old.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
    assert_eq!(lease.job_id, test.job_id);
    let mut current = registered_worker(&served, "current", &[]).await;
    let lease = current.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
    assert_eq!(lease.job_id, verification);
    let workers = admin.list_workers(v1::ListWorkersRequest {}).await.unwrap().into_inner().workers;
    assert!(workers.iter().all(|w| w.standing == "active"), "{workers:?}");
}

#[tokio::test]
async fn a_false_verification_report_confirmed_by_a_second_worker_across_a_restart_sets_aside_only_that_job_s_units() {
    let backend = BACKENDS[0];
    let dir = TempDir::new("quarantine-verification");
    let url = fresh_database(backend, &dir.0).await;
    let served = serve_on(&dir.0, &url, config(), 100).await;
    let mut admin = client(served.address, &served.client_token).await;
    let request = test_request(&mut admin, 1000, None).await;
    let test = admin.create_test(request).await.unwrap().into_inner();
    let (mut liar, liar_token) = registered_worker_with_cores(&served, "liar", &[], 2).await;
    let lease = liar.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
    report(&mut liar, &lease, &honest(20), 0).await.unwrap();
    // A verification job of a game a unit, before the test: the liar reports the quiet
    // game 2 truly, then leaves the chase of game 1 out.
    let verification = verification_job(&mut admin, 1).await;
    let lease = liar.lease(v1::LeaseRequest { concurrency: 1 }).await;
    let lease = lease.unwrap().into_inner().lease.unwrap();
    assert_eq!((lease.job_id, lease.units.as_slice()), (verification, &[0, 1, 2, 3][..]));
    let games = parse_pgn(GAMES).unwrap();
    let quiet = unit_report(&games[1..2], 2, &DEFAULT_RULES, None).unwrap();
    liar.report_verification(v1::VerificationReport { lease_id: lease.lease_id, unit: 1, report: quiet })
        .await
        .unwrap();
    let none = Tally { games: 1, ..Default::default() };
    let hidden = format!("{}\n", serde_json::json!({ "tally": none.to_json() }));
    let forged = v1::VerificationReport { lease_id: lease.lease_id, unit: 0, report: hidden };
    let refused = liar.report_verification(forged).await.unwrap_err();
    assert!(refused.message().contains("game 1: left out"), "{}", refused.message());
    let job = |id| v1::JobId { job_id: id };
    assert_eq!(admin.get_job(job(verification)).await.unwrap().into_inner().units_done, 1);
    // Held suspect across a restart: meanwhile the liar gets none of the verification
    // job's work, which it would be given first (its priority is the higher).
    drop(served);
    let served = serve_on(&dir.0, &url, config(), 100).await;
    let mut admin = client(served.address, &served.client_token).await;
    let mut liar = worker(served.address, &liar_token).await;
    let lease = liar.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease;
    assert!(lease.as_ref().is_none_or(|l| l.job_id != verification), "a suspect's lease: {lease:?}");
    // A second worker verifies the unit: its report passes, which confirms the
    // liar's false. The liar is quarantined, its unit of this job set aside (and
    // verified again), its test pairs kept.
    let mut honest_worker = registered_worker(&served, "honest", &[]).await;
    let mut verified = Vec::new();
    loop {
        let lease = honest_worker.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease;
        let Some(lease) = lease.filter(|l| l.job_id == verification) else { break };
        for &unit in &lease.units {
            let index = unit as usize;
            let report = unit_report(&games[index..index + 1], index + 1, &DEFAULT_RULES, None).unwrap();
            let request = v1::VerificationReport { lease_id: lease.lease_id, unit, report };
            honest_worker.report_verification(request).await.unwrap();
            verified.push(unit);
        }
    }
    // Units 0, 2 and 3 of the liar's cancelled lease, then its unit 1, set aside.
    assert_eq!(verified, [0, 2, 3, 1]);
    let workers = admin.list_workers(v1::ListWorkersRequest {}).await.unwrap().into_inner().workers;
    let listed = workers.iter().find(|w| w.capabilities.as_ref().unwrap().name == "liar").unwrap();
    assert_eq!(listed.standing, "quarantined");
    assert!(listed.standing_reason.contains("unit 0 of job"), "{}", listed.standing_reason);
    assert_eq!(listed.units_done, 20, "its test pairs still counted");
    let state = admin.get_job(job(verification)).await.unwrap().into_inner();
    assert_eq!((state.state.as_str(), state.units_done), ("finished", 4));
    let test_state = admin.get_job(job(test.job_id)).await.unwrap().into_inner();
    assert_eq!(test_state.units_done, 20);
    assert_eq!(test_state.totals.unwrap().pentanomial, totals(&honest(20)).pentanomial);
}
