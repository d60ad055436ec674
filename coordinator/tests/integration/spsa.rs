//! SPSA jobs: each lease plays its probe (the engine's options at theta + c * flip and
//! theta - c * flip), each counted pair moves theta once with its lease's probe, and a
//! restarted coordinator replays theta from what it stored. Expected values come from
//! `xq_stats::spsa`, whose steps are checked against fishtest's formulas worked by hand.

use std::time::Duration;

use xq_coordinator::scheduler::config::SchedulerConfig;
use xq_proto::v1;
use xq_stats::spsa::{Schedule, Tuner, option_value, parse_parameters};

use crate::common::*;

const PARAMS: &str = "A, 100, 0, 200, 10, 0.002\nB, 50, 0, 100, 5, 0.002";

fn config() -> SchedulerConfig {
    SchedulerConfig { lease_seconds: 1000.0 * 72.0, reference_nps: 0, ..SchedulerConfig::default() }
}

async fn create_spsa(client: &mut Client, pairs: u64) -> v1::Job {
    let mut test = test_request(client, pairs, None).await;
    test.base_engine = None;
    let spsa = v1::SpsaSpec { params: PARAMS.to_owned(), ..Default::default() };
    client.create_spsa(v1::CreateSpsaRequest { test: Some(test), spsa: Some(spsa) }).await.unwrap().into_inner()
}

fn theta(job: &v1::Job) -> Vec<f64> {
    job.spsa.as_ref().expect("an SPSA job's view").parameters.iter().map(|p| p.value).collect()
}

#[tokio::test]
async fn an_spsa_job_moves_theta_once_per_pair_and_replays_it_after_a_restart() {
    for backend in BACKENDS {
        let dir = TempDir::new("spsa");
        let url = fresh_database(backend, &dir.0).await;
        let config = SchedulerConfig { lease_ttl: Duration::from_secs(30), ..config() };
        let first = serve_on(&dir.0, &url, config.clone(), 100).await;
        let mut admin = client(first.address, &first.client_token).await;
        let job = create_spsa(&mut admin, 6).await;
        assert_eq!(job.kind, "spsa");
        assert_eq!(theta(&job), [100.0, 50.0]);
        assert!(job.summary.starts_with("SPSA of new: A, B"), "{}", job.summary);

        let (mut worker, token) = registered_worker_token(&first, "w", &[]).await;
        let lease = worker.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
        let Some(v1::lease::Work::MatchSpec(spec)) = &lease.work else { panic!("a match lease: {lease:?}") };
        let (plus, minus) = (spec.new_engine.as_ref().unwrap(), spec.base_engine.as_ref().unwrap());
        assert_eq!((plus.name.as_str(), minus.name.as_str()), ("plus", "minus"));
        // The probe's flips show in plus's values; the values are fishtest's.
        let mut expected = Tuner::new(parse_parameters(PARAMS).unwrap(), Schedule::fishtest(6)).unwrap();
        let flips: Vec<i8> = [("A", 100.0), ("B", 50.0)]
            .iter()
            .map(|(name, start)| if plus.options[*name].parse::<f64>().unwrap() > *start { 1 } else { -1 })
            .collect();
        let probe = expected.probe(&flips).unwrap();
        for (i, name) in ["A", "B"].iter().enumerate() {
            assert_eq!(plus.options[*name], option_value(probe.plus[i]), "{backend:?}");
            assert_eq!(minus.options[*name], option_value(probe.minus[i]), "{backend:?}");
        }

        // Plus wins one pair and loses one (by a game): theta moves by both.
        let played = [[2u8, 2u8], [0, 1]];
        let report = v1::ReportPairsRequest {
            lease_id: lease.lease_id,
            pairs: lease.units.iter().zip(played).map(|(&u, p)| named_pair(u, p, ["plus", "minus"])).collect(),
            cumulative: Some(totals(&played)),
            ..Default::default()
        };
        worker.report_pairs(report.clone()).await.unwrap();
        expected.apply(&probe, 2, 1);
        expected.apply(&probe, -1, 1);
        let state = admin.get_job(v1::JobId { job_id: job.job_id }).await.unwrap().into_inner();
        assert_eq!(theta(&state), expected.theta(), "{backend:?}");
        assert_eq!(state.spsa.as_ref().unwrap().iterations, 2);
        assert_ne!(theta(&state), [100.0, 50.0]);

        // Resent, the pairs move nothing.
        worker.report_pairs(report).await.unwrap();
        let state = admin.get_job(v1::JobId { job_id: job.job_id }).await.unwrap().into_inner();
        assert_eq!(theta(&state), expected.theta(), "{backend:?}: a resent pair moved theta");
        drop(first);

        // Restarted, the coordinator replays the same theta; the lease goes on with
        // its own probe.
        let second = serve_on(&dir.0, &url, config.clone(), 100).await;
        let mut admin = client(second.address, &second.client_token).await;
        let state = admin.get_job(v1::JobId { job_id: job.job_id }).await.unwrap().into_inner();
        assert_eq!(theta(&state), expected.theta(), "{backend:?}: replayed after a restart");
        let mut worker = crate::common::worker(second.address, &token).await;
        let third = [1u8, 2u8];
        let all = [played[0], played[1], third];
        let report = v1::ReportPairsRequest {
            lease_id: lease.lease_id,
            pairs: vec![named_pair(lease.units[2], third, ["plus", "minus"])],
            cumulative: Some(totals(&all)),
            ..Default::default()
        };
        worker.report_pairs(report).await.unwrap();
        expected.apply(&probe, 1, 1);
        let state = admin.get_job(v1::JobId { job_id: job.job_id }).await.unwrap().into_inner();
        assert_eq!(theta(&state), expected.theta(), "{backend:?}");
        let history = admin.get_job_history(v1::JobId { job_id: job.job_id }).await.unwrap().into_inner();
        let last = history.spsa.last().expect("samples");
        assert_eq!((last.pairs, last.theta.as_slice()), (3, expected.theta()));
        assert_eq!(history.spsa[0].theta, [100.0, 50.0]);
    }
}

#[tokio::test]
async fn bad_spsa_requests_are_refused_with_the_field_at_fault() {
    let served = serve(Backend::Sqlite, config()).await;
    let mut admin = client(served.address, &served.client_token).await;
    let test = test_request(&mut admin, 10, None).await;
    let cases = [
        (Some(test.clone()), "A, 1, 0, 2, 1, 0.002", "test.base_engine"),
        (Some(v1::CreateTestRequest { base_engine: None, ..test.clone() }), "A, 1, 0", "spsa.params"),
        (
            Some(v1::CreateTestRequest { base_engine: None, pairs: 0, ..test.clone() }),
            "A, 1, 0, 2, 1, 0.002",
            "test.pairs",
        ),
        (None, "A, 1, 0, 2, 1, 0.002", "test: missing"),
    ];
    for (test, params, field) in cases {
        let spsa = v1::SpsaSpec { params: params.to_owned(), ..Default::default() };
        let error = admin.create_spsa(v1::CreateSpsaRequest { test, spsa: Some(spsa) }).await.unwrap_err();
        assert_eq!(error.code(), tonic::Code::InvalidArgument);
        assert!(error.message().contains(field), "{field}: {}", error.message());
    }
}

/// The flips a lease made at theta = start plays: plus's values above start or below.
fn flips_of(lease: &v1::Lease) -> Vec<i8> {
    let Some(v1::lease::Work::MatchSpec(spec)) = &lease.work else { panic!("a match lease") };
    let plus = spec.new_engine.as_ref().unwrap();
    [("A", 100.0), ("B", 50.0)]
        .iter()
        .map(|(name, start)| if plus.options[*name].parse::<f64>().unwrap() > *start { 1 } else { -1 })
        .collect()
}

/// A quarantined worker's pairs are set aside and theta replayed without them: it
/// equals a run that only ever had the other worker's pairs.
#[tokio::test]
async fn a_quarantined_workers_pairs_are_taken_out_of_theta() {
    for backend in BACKENDS {
        let served = serve(backend, SchedulerConfig { max_units_per_lease: 2, ..config() }).await;
        let mut admin = client(served.address, &served.client_token).await;
        let job = create_spsa(&mut admin, 20).await;
        let (mut honest, _) = registered_worker_token(&served, "honest", &[]).await;
        let (mut forger, _) = registered_worker_token(&served, "forger", &[]).await;
        let lease = |worker: &mut Worker| {
            let mut worker = worker.clone();
            async move { worker.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap() }
        };
        let (honest_lease, forged_lease) = (lease(&mut honest).await, lease(&mut forger).await);
        let report = |worker: &mut Worker, lease: &v1::Lease, played: Vec<[u8; 2]>| {
            let mut worker = worker.clone();
            let request = v1::ReportPairsRequest {
                lease_id: lease.lease_id,
                pairs: lease.units.iter().zip(&played).map(|(&u, &p)| named_pair(u, p, ["plus", "minus"])).collect(),
                cumulative: Some(totals(&played)),
                ..Default::default()
            };
            async move { worker.report_pairs(request).await.unwrap() }
        };
        report(&mut honest, &honest_lease, vec![[1, 2], [0, 1]]).await;
        report(&mut forger, &forged_lease, vec![[2, 2], [2, 2]]).await;
        let before = theta(&admin.get_job(v1::JobId { job_id: job.job_id }).await.unwrap().into_inner());

        let workers = admin.list_workers(v1::ListWorkersRequest {}).await.unwrap().into_inner().workers;
        let forger_id = workers.iter().find(|w| w.capabilities.as_ref().unwrap().name == "forger").unwrap().worker_id;
        let quarantine = v1::SetWorkerStandingRequest {
            worker_id: forger_id,
            standing: "quarantined".to_owned(),
            reason: "test".to_owned(),
        };
        admin.set_worker_standing(quarantine).await.unwrap();
        let state = admin.get_job(v1::JobId { job_id: job.job_id }).await.unwrap().into_inner();

        let mut expected = Tuner::new(parse_parameters(PARAMS).unwrap(), Schedule::fishtest(20)).unwrap();
        let probe = expected.probe(&flips_of(&honest_lease)).unwrap();
        expected.apply(&probe, 1, 1);
        expected.apply(&probe, -1, 1);
        assert_ne!(before, expected.theta(), "{backend:?}: the forged pairs had moved theta");
        assert_eq!(theta(&state), expected.theta(), "{backend:?}");
        assert_eq!(state.spsa.as_ref().unwrap().iterations, 2);
        assert_eq!(state.units_done, 2);
    }
}

/// A worker that steers a parameter (its pairs' results always agree with the lease's
/// flip of A) while keeping the mean and the shape of honest pairs (it swaps which side
/// won) is caught by its results against the flips, compared with the other workers':
/// quarantined, its pairs taken out of theta.
#[tokio::test]
async fn a_worker_steering_a_parameter_is_quarantined() {
    for backend in BACKENDS {
        let served = serve(backend, SchedulerConfig { max_units_per_lease: 4, ..config() }).await;
        let mut admin = client(served.address, &served.client_token).await;
        let job = create_spsa(&mut admin, 2000).await;
        // Honest results, independent of the flips: pairs of 1, 2 and 3 points.
        let honest: Vec<[u8; 2]> = [[2, 0], [1, 1], [0, 2], [1, 2], [1, 0], [2, 1], [0, 1], [1, 1]].to_vec();
        let play = |worker: &mut Worker, leases: usize, steer: bool| {
            let mut worker = worker.clone();
            let honest = honest.clone();
            async move {
                let mut last = v1::ReportReply::default();
                for n in 0..leases {
                    let lease = worker.lease(v1::LeaseRequest { concurrency: 1 }).await?.into_inner().lease.unwrap();
                    let Some(v1::lease::Work::MatchSpec(spec)) = &lease.work else { panic!("a match lease") };
                    let (plus, minus) = (spec.new_engine.as_ref().unwrap(), spec.base_engine.as_ref().unwrap());
                    let a_up = plus.options["A"].parse::<f64>().unwrap() > minus.options["A"].parse::<f64>().unwrap();
                    let played: Vec<[u8; 2]> = (0..lease.units.len())
                        .map(|i| {
                            let [x, y] = honest[(n * 4 + i) % honest.len()];
                            // The steerer turns the pair round when plus won it and A is
                            // down, or lost it and A is up.
                            let plus_won = x + y > 2;
                            if steer && x + y != 2 && plus_won != a_up { [2 - x, 2 - y] } else { [x, y] }
                        })
                        .collect();
                    let request = v1::ReportPairsRequest {
                        lease_id: lease.lease_id,
                        pairs: lease
                            .units
                            .iter()
                            .zip(&played)
                            .map(|(&u, &p)| named_pair(u, p, ["plus", "minus"]))
                            .collect(),
                        cumulative: Some(totals(&played)),
                        ..Default::default()
                    };
                    last = worker.report_pairs(request).await?.into_inner();
                    if last.stop {
                        break;
                    }
                }
                Ok::<_, tonic::Status>(last)
            }
        };
        let (mut a, _) = registered_worker_token(&served, "a", &[]).await;
        let (mut b, _) = registered_worker_token(&served, "b", &[]).await;
        let (mut steerer, _) = registered_worker_token(&served, "steerer", &[]).await;
        play(&mut a, 40, false).await.unwrap();
        play(&mut b, 40, false).await.unwrap();
        let reply = play(&mut steerer, 40, true).await.unwrap();
        assert!(reply.stop, "{backend:?}: the steerer is told to stop within 160 pairs");
        let workers = admin.list_workers(v1::ListWorkersRequest {}).await.unwrap().into_inner().workers;
        let listed = workers.iter().find(|w| w.capabilities.as_ref().unwrap().name == "steerer").unwrap();
        assert_eq!(listed.standing, "quarantined", "{backend:?}");
        assert!(listed.standing_reason.contains("follow the flips of A"), "{}", listed.standing_reason);
        let state = admin.get_job(v1::JobId { job_id: job.job_id }).await.unwrap().into_inner();
        assert_eq!(state.units_done, 320, "{backend:?}: only the honest pairs count");
        // Honest workers are not flagged: a third one plays on beside them.
        let (mut c, _) = registered_worker_token(&served, "c", &[]).await;
        let reply = play(&mut c, 40, false).await.unwrap();
        assert!(!reply.stop, "{backend:?}");
    }
}

/// `xq spsa --tune` reads the parameters from the spin options our engine declares
/// (start at their defaults, fishtest's end settings), and refuses a name it does not
/// declare, listing the ones it does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn xq_spsa_tune_reads_the_engine_s_spin_options() {
    let served = serve(Backend::Sqlite, config()).await;
    let engine = binary("xq-engine");
    let run = |tune: &str| {
        let mut command = std::process::Command::new(binary("xq"));
        command.args(["--coordinator", &format!("http://{}", served.address), "--token", &served.client_token]);
        command.args(["spsa", "--engine", engine.to_str().unwrap(), "--tune", tune, "--pairs", "10"]);
        command.output().unwrap()
    };
    let output = run("Depth Limit, multipv");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let mut admin = client(served.address, &served.client_token).await;
    let job = admin.get_job(v1::JobId { job_id: 1 }).await.unwrap().into_inner();
    let parameters = job.spsa.unwrap().parameters;
    let declared: Vec<(&str, f64, f64, f64)> =
        parameters.iter().map(|p| (p.name.as_str(), p.start, p.min, p.max)).collect();
    // As `xq-engine` declares them: Depth Limit 0 (0..127), MultiPV 1 (1..128).
    assert_eq!(declared, [("Depth Limit", 0.0, 0.0, 127.0), ("MultiPV", 1.0, 1.0, 128.0)]);
    assert_eq!((parameters[0].c_end, parameters[0].r_end), (6.35, 0.002));
    let refused = run("Futility Base");
    let error = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success());
    assert!(error.contains("declares no spin option 'Futility Base'") && error.contains("Depth Limit"), "{error}");
}

/// Workers reporting at the same moment: their pairs count in the order they are
/// stamped, so that a restart, which replays pairs in that order, gives back the same
/// theta and history. (Stamped before the write and counted after it, two reports in
/// flight could count in the other order.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pairs_reported_at_once_by_many_workers_replay_to_the_same_theta_and_history() {
    let dir = TempDir::new("spsa-at-once");
    let url = fresh_database(Backend::Sqlite, &dir.0).await;
    // Leases of two pairs.
    let config = SchedulerConfig { lease_ttl: Duration::from_secs(60), lease_seconds: 2.0 * 72.0, ..config() };
    let first = serve_on(&dir.0, &url, config.clone(), 100).await;
    let mut admin = client(first.address, &first.client_token).await;
    let job = create_spsa(&mut admin, 160).await;
    let mut workers = Vec::new();
    for i in 0..8 {
        workers.push(registered_worker(&first, &format!("w{i}"), &[]).await);
    }
    let players = workers.into_iter().enumerate().map(|(i, mut worker)| {
        tokio::spawn(async move {
            let mut round = 0;
            while let Some(lease) = worker.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease
            {
                let mut played = Vec::new();
                for (n, &unit) in lease.units.iter().enumerate() {
                    let pair = [[2u8, 2u8], [0, 1], [2, 1], [0, 0], [1, 1]][(i + round + n) % 5];
                    played.push(pair);
                    let report = v1::ReportPairsRequest {
                        lease_id: lease.lease_id,
                        pairs: vec![named_pair(unit, pair, ["plus", "minus"])],
                        cumulative: Some(totals(&played)),
                        ..Default::default()
                    };
                    worker.report_pairs(report).await.unwrap();
                }
                round += 1;
            }
        })
    });
    for player in players.collect::<Vec<_>>() {
        player.await.unwrap();
    }
    let id = v1::JobId { job_id: job.job_id };
    let state = admin.get_job(id).await.unwrap().into_inner();
    assert_eq!(state.units_done, 160);
    let history = admin.get_job_history(id).await.unwrap().into_inner().spsa;
    drop(first);
    let second = serve_on(&dir.0, &url, config, 100).await;
    let mut admin = client(second.address, &second.client_token).await;
    assert_eq!(theta(&admin.get_job(id).await.unwrap().into_inner()), theta(&state), "theta replayed");
    assert_eq!(admin.get_job_history(id).await.unwrap().into_inner().spsa, history, "its history replayed");
}
