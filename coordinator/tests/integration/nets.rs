//! The net registry on SQLite and PostgreSQL: what it refuses, the states its tests
//! give a net, idempotent records for a resumed loop, and a restart.

use xq_coordinator::scheduler::config::SchedulerConfig;
use xq_engine::xiangqi::nnue::Network;
use xq_proto::v1;

use crate::common::{
    BACKENDS, Client, Served, TempDir, client, fresh_database, pair, registered_worker, serve, serve_on, test_request,
    totals, upload,
};

/// A random net's file, as the trainer's export would upload it.
fn net_bytes(seed: u64) -> Vec<u8> {
    Network::random(seed).to_bytes()
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

fn add(artifact: &v1::ArtifactRef, generation: u32, parent_id: u64, data_job_id: u64) -> v1::AddNetRequest {
    v1::AddNetRequest {
        artifact: Some(artifact.clone()),
        lineage: "main".to_owned(),
        generation,
        parent_id,
        data_job_id,
        train_loss: 0.01,
        validation_loss: 0.012,
        positions: 1000,
        epochs: 3,
        description: "test net".to_owned(),
    }
}

/// A one-unit self-play job with `net` (none: the handcrafted evaluation): a net's data job.
async fn self_play_job(admin: &mut Client, net: Option<&v1::ArtifactRef>) -> Result<v1::Job, tonic::Status> {
    let spec = v1::SelfPlaySpec { nodes: 100, games_per_unit: 1, net: net.cloned(), ..Default::default() };
    let request = v1::CreateSelfPlayRequest { spec: Some(spec), units: 1, ..Default::default() };
    admin.create_self_play(request).await.map(tonic::Response::into_inner)
}

/// A test of the engine with `new` against the engine with `base` (none: handcrafted).
async fn net_test(admin: &mut Client, new: &v1::ArtifactRef, base: Option<&v1::ArtifactRef>) -> u64 {
    let sprt = v1::SprtSpec { elo0: 0.0, elo1: 10.0, alpha: 0.05, beta: 0.05, ..Default::default() };
    create_net_test(admin, new, base, Some(sprt)).await
}

/// A fixed-game test of `new` against the engine without a net.
async fn fixed_games(admin: &mut Client, new: &v1::ArtifactRef) -> u64 {
    create_net_test(admin, new, None, None).await
}

async fn create_net_test(
    admin: &mut Client,
    new: &v1::ArtifactRef,
    base: Option<&v1::ArtifactRef>,
    sprt: Option<v1::SprtSpec>,
) -> u64 {
    let binary = upload(admin, "engine", "engine", b"#!/bin/sh\n").await.unwrap();
    let engine = |name: &str, net: Option<&v1::ArtifactRef>| v1::EngineSpec {
        name: name.to_owned(),
        binary: Some(binary.clone()),
        protocol: "uci".to_owned(),
        net: net.cloned(),
        ..Default::default()
    };
    let request = v1::CreateTestRequest {
        new_engine: Some(engine("new", Some(new))),
        base_engine: Some(engine("base", base)),
        time_control: "10+0.1".to_owned(),
        sprt,
        pairs: 1000,
        priority: 10,
        adjudication: Some(crate::common::ADJUDICATION),
        // The games reported below are written from the start position.
        start_position: true,
        ..Default::default()
    };
    admin.create_test(request).await.unwrap().into_inner().job_id
}

/// Reports pairs the new engine wins until the SPRT stops.
async fn win(served: &Served) {
    let mut worker = registered_worker(served, "w", &[]).await;
    let mut acked = Vec::new();
    loop {
        let lease = worker.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
        for &unit in &lease.units {
            acked.push([2, 2]);
            let report = v1::ReportPairsRequest {
                lease_id: lease.lease_id,
                pairs: vec![pair(unit, [2, 2])],
                cumulative: Some(totals(&acked)),
                ..Default::default()
            };
            if worker.report_pairs(report).await.unwrap().into_inner().stop {
                return;
            }
        }
        acked.clear();
    }
}

async fn states(admin: &mut Client) -> Vec<(u64, String)> {
    let nets = admin.list_nets(v1::ListNetsRequest { lineage: "main".to_owned() }).await.unwrap().into_inner().nets;
    nets.into_iter().map(|n| (n.net_id, n.state)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_registry_checks_nets_and_reads_their_state_off_their_tests() {
    for backend in BACKENDS {
        let dir = TempDir::new("nets");
        let url = fresh_database(backend, &dir.0).await;
        let served = serve_on(&dir.0, &url, SchedulerConfig::default(), 100).await;
        let mut admin = client(served.address, &served.client_token).await;
        let first = upload(&mut admin, "gen1.xqnn", "net", &net_bytes(1)).await.unwrap();
        let second = upload(&mut admin, "gen2.xqnn", "net", &net_bytes(2)).await.unwrap();
        let engine = upload(&mut admin, "engine", "engine", b"#!/bin/sh\necho\n").await.unwrap();
        let data = self_play_job(&mut admin, Some(&first)).await.unwrap();
        assert!(data.summary.contains("net gen1.xqnn"), "{}", data.summary);
        admin.stop_job(v1::JobId { job_id: data.job_id }).await.unwrap();
        let data = data.job_id;

        // A net file our engine cannot read is another engine's net: kept as it is
        // (a test passes it to its engine), but no generation of our lineages and no
        // net of a self-play job, which our engine plays; an empty one is no net.
        let empty = upload(&mut admin, "empty.nnue", "net", b"").await.unwrap_err();
        assert!(empty.message().contains("empty.nnue is empty"), "{empty:?}");
        let foreign = upload(&mut admin, "foreign.nnue", "net", b"not our net").await.unwrap();
        assert_eq!(foreign.sha256, sha256_hex(b"not our net"));
        let refused = admin.add_net(add(&foreign, 1, 0, data)).await.unwrap_err();
        assert!(refused.message().contains("not in this engine's format"), "{refused:?}");
        let refused = self_play_job(&mut admin, Some(&foreign)).await.unwrap_err();
        assert!(
            refused.message().contains("spec.net: the net foreign.nnue is not in this engine's format"),
            "{refused:?}"
        );
        let unknown = v1::ArtifactRef { sha256: sha256_hex(b"never sent"), name: "junk.xqnn".to_owned(), size: 9 };
        let unknown = admin.add_net(add(&unknown, 1, 0, data)).await.unwrap_err();
        assert!(unknown.message().contains("has not been uploaded"), "{unknown:?}");
        // The same bytes cannot change kind: a net uploaded again as a book is refused.
        let recast = upload(&mut admin, "gen1.epd", "book", &net_bytes(1)).await.unwrap_err();
        assert!(recast.message().contains("uploaded before as the net gen1.xqnn"), "{recast:?}");
        // What the registry refuses, each with its reason.
        let missing = v1::ArtifactRef { sha256: "0".repeat(64), ..first.clone() };
        for (request, expected) in [
            (add(&missing, 1, 0, data), "has not been uploaded"),
            (add(&engine, 1, 0, data), "not a net"),
            (v1::AddNetRequest { lineage: "a b".to_owned(), ..add(&first, 1, 0, data) }, "lineage: 'a b'"),
            (add(&first, 0, 0, data), "generation 0 is the lineage's seed"),
            (v1::AddNetRequest { validation_loss: f64::NAN, ..add(&first, 1, 0, data) }, "validation_loss"),
            (add(&first, 1, 0, data + 100), "no such self-play job"),
            (add(&first, 1, 7, data), "parent net 7"),
        ] {
            let status = admin.add_net(request).await.unwrap_err();
            assert!(status.message().contains(expected), "{backend:?}: {} lacks '{expected}'", status.message());
        }

        let net1 = admin.add_net(add(&first, 1, 0, data)).await.unwrap().into_inner();
        assert_eq!((net1.state.as_str(), net1.parent_id), ("untested", 0));
        let again = admin.add_net(add(&first, 1, 0, data)).await.unwrap().into_inner();
        assert_eq!(again.net_id, net1.net_id, "the same record again: the stored one");
        let reparented = admin.add_net(add(&first, 1, net1.net_id, data)).await.unwrap_err();
        assert!(reparented.message().contains("already has generation 1"), "{}", reparented.message());
        let clash = admin.add_net(add(&second, 1, 0, data)).await.unwrap_err();
        assert!(clash.message().contains("already has generation 1"), "{}", clash.message());
        let other_lineage = v1::AddNetRequest { lineage: "other".to_owned(), ..add(&second, 2, net1.net_id, data) };
        let stale = admin.add_net(other_lineage).await.unwrap_err();
        assert!(stale.message().contains("not an earlier generation"), "{}", stale.message());
        let net2 = admin.add_net(add(&second, 2, net1.net_id, data)).await.unwrap().into_inner();

        // A test decides a net only if it plays the net against its parent.
        let first_test = net_test(&mut admin, &first, None).await;
        let against_handcrafted = net_test(&mut admin, &second, None).await;
        let wrong_net = admin
            .set_net_test(v1::SetNetTestRequest { net_id: net2.net_id, test_job_id: first_test })
            .await
            .unwrap_err();
        assert!(wrong_net.message().contains("does not carry net"), "{}", wrong_net.message());
        let wrong_base = admin
            .set_net_test(v1::SetNetTestRequest { net_id: net2.net_id, test_job_id: against_handcrafted })
            .await
            .unwrap_err();
        assert!(wrong_base.message().contains("the parent"), "{}", wrong_base.message());
        // Without a parent, the base is the engine without a net.
        let against_a_net = net_test(&mut admin, &first, Some(&second)).await;
        let with_a_net = admin
            .set_net_test(v1::SetNetTestRequest { net_id: net1.net_id, test_job_id: against_a_net })
            .await
            .unwrap_err();
        assert!(with_a_net.message().contains("has no parent"), "{}", with_a_net.message());
        admin.stop_job(v1::JobId { job_id: against_a_net }).await.unwrap();
        // Only an SPRT decides: a fixed number of games has no verdict.
        let fixed = fixed_games(&mut admin, &first).await;
        let undecidable =
            admin.set_net_test(v1::SetNetTestRequest { net_id: net1.net_id, test_job_id: fixed }).await.unwrap_err();
        assert!(undecidable.message().contains("an SPRT can"), "{}", undecidable.message());
        admin.stop_job(v1::JobId { job_id: fixed }).await.unwrap();
        let tested = admin
            .set_net_test(v1::SetNetTestRequest { net_id: net1.net_id, test_job_id: first_test })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(tested.state, "testing");
        admin.stop_job(v1::JobId { job_id: against_handcrafted }).await.unwrap();

        // The first test stopped undecided rejects the net; a new test may replace it.
        admin.stop_job(v1::JobId { job_id: first_test }).await.unwrap();
        assert_eq!(states(&mut admin).await, [(2, "untested".to_owned()), (1, "rejected".to_owned())]);
        let retest = net_test(&mut admin, &first, None).await;
        admin.set_net_test(v1::SetNetTestRequest { net_id: net1.net_id, test_job_id: retest }).await.unwrap();
        win(&served).await;
        assert_eq!(states(&mut admin).await, [(2, "untested".to_owned()), (1, "promoted".to_owned())]);
        let decided = admin.set_net_test(v1::SetNetTestRequest { net_id: net1.net_id, test_job_id: first_test }).await;
        assert!(decided.unwrap_err().message().contains("already decided"));

        let against_parent = net_test(&mut admin, &second, Some(&first)).await;
        admin.set_net_test(v1::SetNetTestRequest { net_id: net2.net_id, test_job_id: against_parent }).await.unwrap();

        // After a restart the registry, and the states its tests give, are the same.
        let before = admin.list_nets(v1::ListNetsRequest::default()).await.unwrap().into_inner();
        drop(served);
        let restarted = serve_on(&dir.0, &url, SchedulerConfig::default(), 100).await;
        let mut admin = client(restarted.address, &restarted.client_token).await;
        let after = admin.list_nets(v1::ListNetsRequest::default()).await.unwrap().into_inner();
        assert_eq!(before, after, "{backend:?}");
        assert_eq!(states(&mut admin).await, [(2, "testing".to_owned()), (1, "promoted".to_owned())]);
        let other = admin.list_nets(v1::ListNetsRequest { lineage: "other".to_owned() }).await.unwrap();
        assert!(other.into_inner().nets.is_empty());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lineage_may_start_from_a_seed_net_that_its_children_are_tested_against() {
    let served = serve(BACKENDS[0], SchedulerConfig::default()).await;
    let mut admin = client(served.address, &served.client_token).await;
    let seed = upload(&mut admin, "seed.xqnn", "net", &net_bytes(7)).await.unwrap();
    let child = upload(&mut admin, "gen1.xqnn", "net", &net_bytes(8)).await.unwrap();
    let data = self_play_job(&mut admin, Some(&seed)).await.unwrap().job_id;

    // A seed was trained elsewhere: no data job of this coordinator, no parent.
    let with_data = admin.add_net(add(&seed, 0, 0, data)).await.unwrap_err();
    assert!(with_data.message().contains("no parent and no data job"), "{}", with_data.message());
    let seeded = admin.add_net(add(&seed, 0, 0, 0)).await.unwrap().into_inner();
    assert_eq!((seeded.generation, seeded.state.as_str()), (0, "seed"));
    assert_eq!(admin.add_net(add(&seed, 0, 0, 0)).await.unwrap().into_inner().net_id, seeded.net_id, "repeatable");

    // Its child is tested against it; the seed itself is never tested.
    let net1 = admin.add_net(add(&child, 1, seeded.net_id, data)).await.unwrap().into_inner();
    let test = net_test(&mut admin, &child, Some(&seed)).await;
    let untestable =
        admin.set_net_test(v1::SetNetTestRequest { net_id: seeded.net_id, test_job_id: test }).await.unwrap_err();
    assert!(untestable.message().contains("seed (generation 0)"), "{}", untestable.message());
    admin.set_net_test(v1::SetNetTestRequest { net_id: net1.net_id, test_job_id: test }).await.unwrap();
    win(&served).await;
    assert_eq!(states(&mut admin).await, [(net1.net_id, "promoted".to_owned()), (seeded.net_id, "seed".to_owned())]);
}

/// Attack: any client token could add nets to, or name the tests of, another team's
/// lineage. A lineage now belongs to the token that recorded its first net.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_lineages_owner_or_an_admin_adds_its_nets_and_names_their_tests() {
    let served = serve(BACKENDS[0], SchedulerConfig::default()).await;
    let mut admin = client(served.address, &served.client_token).await;
    let mut submitters = Vec::new();
    for name in ["alice", "bob"] {
        let request =
            v1::CreateTokenRequest { role: "submitter".to_owned(), name: name.to_owned(), expires_seconds: 0 };
        let reply = admin.create_token(request).await.unwrap().into_inner();
        submitters.push((client(served.address, &reply.token).await, reply.id));
    }
    let [(mut alice, alice_id), (mut bob, _)] = submitters.try_into().ok().unwrap();
    let nets: Vec<_> = [1, 2, 3].map(net_bytes).to_vec();
    let mut artifacts = Vec::new();
    for (index, bytes) in nets.iter().enumerate() {
        artifacts.push(upload(&mut admin, &format!("gen{index}.xqnn"), "net", bytes).await.unwrap());
    }
    let data = self_play_job(&mut admin, None).await.unwrap().job_id;

    let first = alice.add_net(add(&artifacts[0], 1, 0, data)).await.unwrap().into_inner();
    let intruder = bob.add_net(add(&artifacts[1], 2, first.net_id, data)).await.unwrap_err();
    assert_eq!(intruder.code(), tonic::Code::PermissionDenied, "{intruder:?}");
    assert!(intruder.message().contains(&format!("belongs to token {alice_id}")), "{}", intruder.message());
    let test = net_test(&mut admin, &artifacts[0], None).await;
    let renamed = bob.set_net_test(v1::SetNetTestRequest { net_id: first.net_id, test_job_id: test }).await;
    assert_eq!(renamed.unwrap_err().code(), tonic::Code::PermissionDenied);
    assert_eq!(states(&mut admin).await, [(first.net_id, "untested".to_owned())], "nothing changed");

    // The owner and an admin may; bob's own lineage is his.
    alice.set_net_test(v1::SetNetTestRequest { net_id: first.net_id, test_job_id: test }).await.unwrap();
    admin.add_net(add(&artifacts[1], 2, first.net_id, data)).await.unwrap();
    let own = v1::AddNetRequest { lineage: "bobs".to_owned(), ..add(&artifacts[2], 1, 0, data) };
    bob.add_net(own).await.unwrap();

    // A job marked as a lineage's shows on its page as its generation in progress:
    // only its owner or an admin marks one so, while a lineage with no net is anyone's.
    let self_play = |lineage: &str| v1::CreateSelfPlayRequest {
        spec: Some(v1::SelfPlaySpec { nodes: 100, games_per_unit: 1, ..Default::default() }),
        units: 1,
        lineage: lineage.to_owned(),
        ..Default::default()
    };
    let marked = bob.create_self_play(self_play("main")).await.unwrap_err();
    assert_eq!(marked.code(), tonic::Code::PermissionDenied, "{marked:?}");
    for lineage in ["bobs", "unrecorded"] {
        let job = bob.create_self_play(self_play(lineage)).await.unwrap().into_inner();
        assert_eq!(job.lineage, lineage);
    }
    let test = v1::CreateTestRequest { lineage: "main".to_owned(), ..test_request(&mut admin, 1, None).await };
    let marked = bob.create_test(test.clone()).await.unwrap_err();
    assert_eq!(marked.code(), tonic::Code::PermissionDenied, "{marked:?}");
    let alices = alice.create_test(test).await.unwrap().into_inner();
    assert_eq!(alices.lineage, "main");
    // A clone of the lineage's test is the lineage's only when its maker may mark it.
    for (cloner, lineage) in [(&mut bob, ""), (&mut alice, "main")] {
        let clone = cloner.clone_test(v1::CloneTestRequest { job_id: alices.job_id, ..Default::default() });
        assert_eq!(clone.await.unwrap().into_inner().lineage, lineage);
    }
}
