//! #56's scenario: volunteers join a coordinator in approval mode from the command
//! line, one user's key runs two real worker machines that play a test, the
//! contributors' list credits both machines' CPU time and games to that user, equal to
//! the leases' own accounting in storage, and a newer worker release the operator
//! publishes is installed by both machines, which go on working; releases that are not
//! the operator's, or not what was signed, are refused. And the attacks on credit.

use std::path::Path;
use std::time::{Duration, Instant};

use sqlx::Row;
use tokio::process::{Child, Command};
use xq_proto::v1;

use crate::cluster::{start_coordinator_with, token, wait_for, xq_at};
use crate::common::{TempDir, binary, client, upload};
use crate::dashboard::get_json;

/// Runs `xq` at `address` with `args` (no token of the data directory: the caller
/// gives one, or none), `XQ_PASSWORD` set to `password`; returns its standard output.
fn xq_as(address: std::net::SocketAddr, args: &[&str], password: &str) -> String {
    let output = std::process::Command::new(binary("xq"))
        .args(["--coordinator", &format!("http://{address}")])
        .args(args)
        .env("XQ_PASSWORD", password)
        .env("HOME", "/nonexistent")
        .env_remove("XDG_CONFIG_HOME")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "xq {args:?}: {text}{}", String::from_utf8_lossy(&output.stderr));
    text
}

/// A volunteer's machine: `program connect --key-file` with its own cache, trusting
/// releases signed with `release_key`, its standard error in `log`.
fn machine(address: std::net::SocketAddr, program: &Path, key_file: &Path, release_key: &str, name: &str) -> Child {
    let home = program.parent().unwrap();
    Command::new(program)
        .args(["connect", "--concurrency", "1", "--no-sandbox", "--name", name, "--release-key", release_key])
        .args(["--coordinator", &format!("http://{address}"), "--key-file"])
        .arg(key_file)
        .arg("--cache")
        .arg(home.join("cache"))
        .env_remove("XQ_WORKER_TOKEN")
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(home.join("log")).unwrap())
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

/// A copy of the built worker in `home`, stamped as release `version`.
fn installed_worker(home: &Path, version: &str) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(home).unwrap();
    let mut bytes = std::fs::read(binary("xq-worker")).unwrap();
    xq_proto::release::stamp(&mut bytes, version).unwrap();
    let program = home.join("xq-worker");
    std::fs::write(&program, bytes).unwrap();
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    program
}

/// Waits until both machines' logs say `what`.
async fn logged(homes: &[std::path::PathBuf], what: &str) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let logs: Vec<String> =
            homes.iter().map(|h| std::fs::read_to_string(h.join("log")).unwrap_or_default()).collect();
        if logs.iter().all(|log| log.contains(what)) {
            return;
        }
        assert!(Instant::now() < deadline, "the machines never said '{what}': {logs:#?}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The registered versions of the workers, by worker.
async fn versions(admin: &mut crate::common::Client) -> Vec<(u64, String)> {
    let workers = admin.list_workers(v1::ListWorkersRequest {}).await.unwrap().into_inner().workers;
    workers.into_iter().map(|w| (w.worker_id, w.capabilities.unwrap_or_default().version)).collect()
}

/// Each worker's core-milliseconds as its leases account for them in storage: each
/// lease's cores times the time from its taking to its last counted unit.
async fn leases_accounting(data: &Path) -> Vec<(u64, i64)> {
    let storage = xq_coordinator::storage::Storage::open(&xq_coordinator::storage::sqlite_url(data)).await.unwrap();
    let rows = sqlx::query(
        "SELECT l.worker_id AS worker, l.cores AS cores, l.created_ms AS taken, MAX(u.created_ms) AS last \
         FROM leases l JOIN units u ON u.lease_id = l.id GROUP BY l.id, l.worker_id, l.cores, l.created_ms",
    )
    .fetch_all(storage.pool())
    .await
    .unwrap();
    let mut by_worker = std::collections::BTreeMap::<u64, i64>::new();
    for row in rows {
        let (cores, taken, last): (i64, i64, i64) =
            (row.try_get("cores").unwrap(), row.try_get("taken").unwrap(), row.try_get("last").unwrap());
        *by_worker.entry(row.try_get::<i64, _>("worker").unwrap() as u64).or_default() += cores * (last - taken);
    }
    by_worker.into_iter().collect()
}

/// Our engine against itself at depth 1, `pairs` pairs at depth 3, uploaded by `admin`.
async fn depth_test(admin: &mut crate::common::Client, pairs: u64) -> u64 {
    let (new, base) = crate::cluster::our_engine_against_depth_1(admin).await;
    let request = v1::CreateTestRequest {
        new_engine: Some(new),
        base_engine: Some(base),
        time_control: "depth=3".to_owned(),
        rules: "wxf".to_owned(),
        variant: "xiangqi".to_owned(),
        max_plies: 160,
        pairs,
        ..Default::default()
    };
    admin.create_test(request).await.unwrap().into_inner().job_id
}

/// The scenario: the coordinator in approval mode; alice and bob sign up with
/// `xq signup`, wait, and are accepted by the admin; alice logs in keeping a worker key
/// (`xq login --worker-key`) and runs it on two machines (each a copy of the worker stamped as release
/// `0.1.0-old`, given the operator's public key); the admin's test of our engine
/// against itself at depth 1 is played by both; the contributors' list (gRPC, the
/// dashboard's JSON and `xq contributors`) credits each machine with what its leases
/// account for in storage and alice with their sum, no more than a core's time while
/// it ran, and two games a counted pair. Then the operator publishes release `0.2.0`:
/// first signed with another key (both machines refuse it, say why, and stay on the old
/// release, leased nothing), then signed with the operator's key but with the bundle
/// altered on the coordinator's disk (both refuse it: its hash is not the signed one),
/// then as signed: both install it over themselves, start again as `0.2.0` (the file
/// on disk stamped so, the workers the same) and play the next test to its end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_volunteers_join_their_machines_are_credited_and_update_themselves_to_a_signed_release() {
    let dir = TempDir::new("volunteers");
    let (_coordinator, address) = start_coordinator_with(
        &dir.0,
        0,
        &["--work-seconds", "15", "--lease-seconds", "10", "--signup", "approval"],
        &[],
    )
    .await;
    let mut admin = client(address, &token(&dir.0)).await;
    let passwords = [("alice", "alice's long password"), ("bob", "bob's long password!")];
    for (name, password) in passwords {
        let said = xq_as(address, &["signup", name], password);
        assert!(said.contains("an admin or an approver accepts you"), "{said}");
    }
    let pending = xq_at(address, &dir.0, &["users", "list"]);
    assert!(pending.contains("alice") && pending.contains("pending"), "{pending}");
    for (name, _) in passwords {
        xq_at(address, &dir.0, &["users", "accept", name]);
    }
    // The volunteer's second command of three (docs/fleet.md): log in and keep a key.
    let (alice_token, key_file) = (dir.0.join("alice-token"), dir.0.join("key"));
    let said = xq_as(
        address,
        &["login", "alice", "--save", alice_token.to_str().unwrap(), "--worker-key", key_file.to_str().unwrap()],
        passwords[0].1,
    );
    assert!(said.contains("xq-worker connect --key-file"), "{said}");
    let operator_key = dir.0.join("operator.key");
    let public_key = xq_as(address, &["release", "keygen", operator_key.to_str().unwrap()], "");
    let public_key = public_key.trim();

    let job = depth_test(&mut admin, 12).await;
    let started = Instant::now();
    let homes = [dir.0.join("a"), dir.0.join("b")];
    let machines: Vec<Child> = homes
        .iter()
        .zip(["machine-a", "machine-b"])
        .map(|(home, name)| machine(address, &installed_worker(home, "0.1.0-old"), &key_file, public_key, name))
        .collect();
    let done = wait_for(&mut admin, job, Duration::from_secs(600), "the test to end", |j| j.state != "running").await;
    let ran_ms = started.elapsed().as_millis() as i64;
    assert_eq!(done.units_done, 12, "{done:?}");
    let workers = admin.list_workers(v1::ListWorkersRequest {}).await.unwrap().into_inner().workers;
    assert!(workers.iter().all(|w| w.user == "alice"), "{workers:?}");
    assert!(workers.iter().filter(|w| w.units_done > 0).count() == 2, "both machines played: {workers:?}");
    let old_versions = versions(&mut admin).await;
    assert!(old_versions.iter().all(|(_, v)| v == "0.1.0-old"), "{old_versions:?}");
    let accounted = leases_accounting(&dir.0).await;
    assert_eq!(accounted.len(), 2, "{accounted:?}");
    // The list is summed again once the jobs stop changing and a few seconds passed.
    let deadline = Instant::now() + Duration::from_secs(30);
    let reply = loop {
        let reply = admin.list_contributors(v1::ListContributorsRequest {}).await.unwrap().into_inner();
        let credited: Vec<(u64, i64)> = {
            let mut list: Vec<_> = reply
                .machines
                .iter()
                .map(|m| (m.worker_id, m.credit.unwrap().all_time.unwrap().cpu_ms as i64))
                .collect();
            list.sort();
            list
        };
        if credited == accounted {
            break reply;
        }
        assert!(Instant::now() < deadline, "credited {credited:?}, the leases account for {accounted:?}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let total: i64 = accounted.iter().map(|(_, ms)| ms).sum();
    assert_eq!(reply.users.len(), 1, "bob has no machine: {reply:?}");
    let alice = &reply.users[0];
    let (all, recent) = {
        let credit = alice.credit.unwrap();
        (credit.all_time.unwrap(), credit.last_30_days.unwrap())
    };
    assert_eq!((alice.user.as_str(), alice.machines), ("alice", 2));
    assert_eq!((all.cpu_ms as i64, all.games, all.units), (total, 24, 12));
    assert_eq!(all, recent, "all of it in the last 30 days");
    assert!((all.cpu_hours - total as f64 / 3_600_000.0).abs() < 1e-9);
    for (worker, cpu_ms) in &accounted {
        assert!(*cpu_ms > 0 && *cpu_ms <= ran_ms, "worker {worker}: {cpu_ms} ms of one core in {ran_ms} ms");
    }
    // The dashboard's JSON is the same view; `xq contributors` prints it.
    let json = get_json(&format!("http://{address}/api/v1/contributors")).await;
    assert_eq!(json["users"][0]["user"], "alice", "{json}");
    assert_eq!(json["users"][0]["credit"]["all_time"]["games"], serde_json::json!(24), "{json}");
    let printed = xq_at(address, &dir.0, &["contributors"]);
    assert!(printed.starts_with("user alice: 2 machines, "), "{printed}");
    assert!(printed.contains("24 games"), "{printed}");

    // A release signed with another key: refused before anything is downloaded.
    let other_key = dir.0.join("other.key");
    xq_as(address, &["release", "keygen", other_key.to_str().unwrap()], "");
    let pack = |version: &str, key: &Path, out: &Path| {
        let (worker, engine) = (binary("xq-worker"), binary("xq-engine"));
        let args = [
            "release",
            "pack",
            "--version",
            version,
            "--worker",
            worker.to_str().unwrap(),
            "--engine",
            engine.to_str().unwrap(),
            "--key",
            key.to_str().unwrap(),
            out.to_str().unwrap(),
        ];
        xq_as(address, &args, "")
    };
    let forged = dir.0.join("forged.release");
    pack("0.2.0", &other_key, &forged);
    let said = xq_at(address, &dir.0, &["release", "publish", forged.to_str().unwrap()]);
    assert!(said.starts_with("release 0.2.0 published"), "{said}");
    logged(&homes, "the signature does not match the operator's key").await;
    // Then the operator's, altered on the coordinator's disk after its upload.
    let bundle = dir.0.join("xq-0.2.0.release");
    let packed = pack("0.2.0", &operator_key, &bundle);
    let sha256 = packed.split("sha256 ").nth(1).unwrap().split(')').next().unwrap().to_owned();
    let stored = dir.0.join("artifacts").join(&sha256);
    let waiting = depth_test(&mut admin, 6).await;
    let original = std::fs::read(&bundle).unwrap();
    let uploaded = upload(&mut admin, "xq-0.2.0.release", "release", &original).await.unwrap();
    assert_eq!(uploaded.sha256, sha256);
    let mut altered = original.clone();
    altered[original.len() / 2] ^= 0x40;
    std::fs::write(&stored, &altered).unwrap();
    let signature = std::fs::read_to_string(dir.0.join("xq-0.2.0.release.sig")).unwrap().trim().to_owned();
    let release = v1::WorkerRelease {
        version: "0.2.0".to_owned(),
        sha256: sha256.clone(),
        size: uploaded.size,
        signature,
        published_ms: 0,
    };
    admin.publish_worker_release(release).await.unwrap();
    logged(&homes, "arrived with hash").await;
    assert_eq!(versions(&mut admin).await, old_versions, "still the old release");
    let state = admin.get_job(v1::JobId { job_id: waiting }).await.unwrap().into_inner();
    assert_eq!(state.units_done, 0, "an old worker is leased nothing: {state:?}");
    // As signed: both install it and go on.
    std::fs::write(&stored, &original).unwrap();
    let done =
        wait_for(&mut admin, waiting, Duration::from_secs(600), "the next test to end", |j| j.state != "running").await;
    assert_eq!(done.units_done, 6, "{done:?}");
    logged(&homes, "release 0.2.0 installed").await;
    // One machine may have played the test alone while the other, started again as
    // the new release, was still benching before it registers: both are waited for.
    let deadline = Instant::now() + Duration::from_secs(120);
    let new_versions = loop {
        let listed = versions(&mut admin).await;
        if listed.iter().all(|(_, v)| v == "0.2.0") {
            break listed;
        }
        assert!(Instant::now() < deadline, "not both registered as 0.2.0: {listed:?}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    let ids = |list: &[(u64, String)]| list.iter().map(|(id, _)| *id).collect::<Vec<_>>();
    assert_eq!(ids(&new_versions), ids(&old_versions), "the same workers");
    for home in &homes {
        let program = std::fs::read(home.join("xq-worker")).unwrap();
        assert_eq!(xq_proto::release::version_of(&program).unwrap().as_deref(), Some("0.2.0"));
        assert!(home.join("xq-engine").exists(), "the bundle's engine beside it");
    }
    drop(machines);
}

/// Each machine's all-time core-milliseconds in the contributors' list, once it is
/// summed again (a few seconds after the last change at most).
async fn credited(admin: &mut crate::common::Client, worker: u64, expected: impl Fn(i64) -> bool) -> i64 {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let reply = admin.list_contributors(v1::ListContributorsRequest {}).await.unwrap().into_inner();
        let cpu_ms = reply
            .machines
            .iter()
            .find(|m| m.worker_id == worker)
            .map_or(0, |m| m.credit.unwrap().all_time.unwrap().cpu_ms as i64);
        if expected(cpu_ms) {
            return cpu_ms;
        }
        assert!(Instant::now() < deadline, "worker {worker} credited {cpu_ms} ms: {reply:?}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The attacks on credit (#56 part 5): a worker that holds a lease without playing and
/// reports long after it expired is credited only up to the expiry; a refused report
/// earns nothing and moves nothing; a worker declaring more cores than its reports show
/// is credited what they show; a quarantined worker's counted units are set aside and
/// their credit with them.
#[tokio::test]
async fn credit_is_not_inflated_by_held_leases_refused_reports_or_quarantined_work() {
    use crate::common::{pair, registered_worker_token, serve, test_request, totals};
    use xq_coordinator::scheduler::config::SchedulerConfig;
    let config = SchedulerConfig {
        lease_ttl: Duration::from_millis(600),
        lease_seconds: 60.0,
        reference_nps: 0,
        ..Default::default()
    };
    let served = serve(crate::common::Backend::Sqlite, config).await;
    let mut admin = client(served.address, &served.client_token).await;
    let request = test_request(&mut admin, 100, None).await;
    let job = admin.create_test(request).await.unwrap().into_inner().job_id;
    let (mut holder, _) = registered_worker_token(&served, "holder", &[]).await;
    let (mut refused, _) = registered_worker_token(&served, "refused", &[]).await;
    let workers = admin.list_workers(v1::ListWorkersRequest {}).await.unwrap().into_inner().workers;
    let id = |name: &str| workers.iter().find(|w| w.capabilities.as_ref().unwrap().name == name).unwrap().worker_id;
    let (holder_id, refused_id) = (id("holder"), id("refused"));
    let cores = 1;
    let lease = holder.lease(v1::LeaseRequest { concurrency: cores }).await.unwrap().into_inner().lease.unwrap();
    let taken = Instant::now();
    // No heartbeats: the lease expires within a second; the report comes after three.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let points = [[2, 0]];
    let late = v1::ReportPairsRequest {
        lease_id: lease.lease_id,
        pairs: vec![pair(lease.units[0], points[0])],
        cumulative: Some(totals(&points)),
        ..Default::default()
    };
    holder.report_pairs(late).await.unwrap();
    let waited = taken.elapsed().as_millis() as i64;
    let state = admin.get_job(v1::JobId { job_id: job }).await.unwrap().into_inner();
    assert_eq!(state.units_done, 1, "a late unit still counts");
    let held = credited(&mut admin, holder_id, |ms| ms > 0).await;
    assert!(held <= 1_600, "credited {held} ms of the {waited} ms it held the lease: only until it expired");

    // A report the coordinator refuses (totals that do not add up) stores nothing and
    // moves nothing: the valid report after it is paid from the lease's taking.
    let lease = refused.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let bad = v1::ReportPairsRequest {
        lease_id: lease.lease_id,
        pairs: vec![pair(lease.units[0], [2, 2])],
        cumulative: Some(totals(&[[0, 0], [0, 1]])),
        ..Default::default()
    };
    assert!(refused.report_pairs(bad).await.is_err());
    let good = v1::ReportPairsRequest {
        lease_id: lease.lease_id,
        pairs: vec![pair(lease.units[0], [2, 0])],
        cumulative: Some(totals(&[[2, 0]])),
        ..Default::default()
    };
    refused.report_pairs(good).await.unwrap();
    let paid = credited(&mut admin, refused_id, |ms| ms > 0).await;
    assert!(paid >= 280, "{paid} core-ms: from the lease's taking, 300 ms before the refused report");

    // A machine that declares 64 cores and holds a large lease, reporting one pair after
    // five seconds, is credited the cores its reports show (with the pace's headroom),
    // not the 30-odd its lease holds.
    let (mut claimer, _) = crate::common::registered_worker_with_cores(&served, "claimer", &[], 64).await;
    let mut fast = test_request(&mut admin, 1000, None).await;
    fast.time_control = "1+0.01".to_owned();
    fast.priority = 5;
    let fast_job = admin.create_test(fast).await.unwrap().into_inner().job_id;
    let lease = claimer.lease(v1::LeaseRequest { concurrency: 64 }).await.unwrap().into_inner().lease.unwrap();
    assert_eq!(lease.job_id, fast_job);
    assert!(lease.units.len() >= 20, "a large lease: {} units", lease.units.len());
    let held = Instant::now();
    while held.elapsed() < Duration::from_secs(5) {
        claimer.heartbeat(v1::HeartbeatRequest { lease_ids: vec![lease.lease_id] }).await.unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let mut played = pair(lease.units[0], [1, 1]);
    for game in [&mut played.first_game_pgn, &mut played.second_game_pgn] {
        *game = game.replace("\"10+0.1\"", "\"1+0.01\"");
    }
    let one = v1::ReportPairsRequest {
        lease_id: lease.lease_id,
        pairs: vec![played],
        cumulative: Some(totals(&[[1, 1]])),
        ..Default::default()
    };
    claimer.report_pairs(one).await.unwrap();
    let claimer_id = admin.list_workers(v1::ListWorkersRequest {}).await.unwrap().into_inner().workers;
    let claimer_id = claimer_id.iter().find(|w| w.capabilities.as_ref().unwrap().name == "claimer").unwrap().worker_id;
    let claimed = credited(&mut admin, claimer_id, |ms| ms > 0).await;
    let held_ms = held.elapsed().as_millis() as i64;
    assert!(claimed <= 8 * held_ms, "{claimed} core-ms for {held_ms} ms held: more than its reports show");

    // Quarantined: its counted pairs are set aside, and their credit with them.
    let quarantine = v1::SetWorkerStandingRequest {
        worker_id: holder_id,
        standing: "quarantined".to_owned(),
        reason: "drill".to_owned(),
    };
    admin.set_worker_standing(quarantine).await.unwrap();
    credited(&mut admin, holder_id, |ms| ms == 0).await;
    let state = admin.get_job(v1::JobId { job_id: job }).await.unwrap().into_inner();
    assert_eq!(state.units_done, 1, "its pair set aside, the other worker's counted");
}

/// Only an admin uploads and publishes a worker release, and only a bundle of the
/// version it names, with a signature's shape: a submitter's upload and publication
/// are refused, as are bytes that are not a bundle, another kind of artifact, another
/// version and a signature of the wrong length.
#[tokio::test]
async fn a_release_is_an_admin_s_and_must_be_a_bundle_of_its_version() {
    use crate::common::{Backend, serve};
    use tonic::Code;
    let served = serve(Backend::Sqlite, Default::default()).await;
    let mut admin = client(served.address, &served.client_token).await;
    let request = v1::CreateTokenRequest { role: "submitter".to_owned(), name: "sam".to_owned(), expires_seconds: 0 };
    let submitter_token = admin.create_token(request).await.unwrap().into_inner().token;
    let mut submitter = client(served.address, &submitter_token).await;
    let dir = TempDir::new("release-publish");
    let bundle = dir.0.join("b.release");
    let sha256 = xq_proto::release::pack("0.3.0", &binary("xq-worker"), &binary("xq-engine"), &bundle).unwrap();
    let bytes = std::fs::read(&bundle).unwrap();
    let refused = upload(&mut submitter, "b.release", "release", &bytes).await.unwrap_err();
    assert_eq!(refused.code(), Code::PermissionDenied, "{refused:?}");
    let not_a_bundle = upload(&mut admin, "x.release", "release", b"hello").await.unwrap_err();
    assert!(not_a_bundle.message().contains("not a release"), "{not_a_bundle:?}");
    let stored = upload(&mut admin, "b.release", "release", &bytes).await.unwrap();
    assert_eq!(stored.sha256, sha256);
    let engine = upload(&mut admin, "e", "engine", b"#!/bin/sh\n").await.unwrap();
    let release = |version: &str, sha256: &str, signature: String| v1::WorkerRelease {
        version: version.to_owned(),
        sha256: sha256.to_owned(),
        signature,
        ..Default::default()
    };
    let good = || release("0.3.0", &sha256, "ab".repeat(64));
    let by_submitter = submitter.publish_worker_release(good()).await.unwrap_err();
    assert_eq!(by_submitter.code(), Code::PermissionDenied);
    for (bad, says) in [
        (release("0.4.0", &sha256, "ab".repeat(64)), "not 0.4.0"),
        (release("0.3.0", &engine.sha256, "ab".repeat(64)), "not a release"),
        (release("0.3.0", &"0".repeat(64), "ab".repeat(64)), "upload it first"),
        (release("0.3.0", &sha256, "ab".repeat(63)), "64 bytes in hex"),
        (release("0.3.0 <b>", &sha256, "ab".repeat(64)), "version"),
    ] {
        let refused = admin.publish_worker_release(bad).await.unwrap_err();
        assert!(refused.message().contains(says), "{says}: {refused:?}");
    }
    let published = admin.publish_worker_release(good()).await.unwrap().into_inner();
    assert_eq!((published.size, published.version.as_str()), (bytes.len() as u64, "0.3.0"));
    assert!(published.published_ms > 0);
}

/// Revoking a user ends its machines' leases at once (#56 part 1): its worker keys and
/// their machines' tokens go with its own, and a worker left without a token in force
/// has its leases withdrawn, their units back to the test, rather than left to expire.
#[tokio::test]
async fn revoking_a_user_withdraws_its_machines_leases_at_once() {
    use crate::common::{Backend, channel, serve, test_capabilities, test_request, worker};
    use tonic::metadata::MetadataValue;
    use xq_coordinator::access::accounts::SignupMode;
    use xq_coordinator::scheduler::config::SchedulerConfig;
    use xq_proto::v1::accounts_client::AccountsClient;
    let config =
        SchedulerConfig { signup: SignupMode::Open, lease_ttl: Duration::from_secs(600), ..Default::default() };
    let served = serve(Backend::Sqlite, config).await;
    let mut admin = client(served.address, &served.client_token).await;
    let mut accounts = AccountsClient::new(channel(served.address).await);
    let password = "dora's long password".to_owned();
    accounts.signup(v1::SignupRequest { name: "dora".to_owned(), password: password.clone() }).await.unwrap();
    let login = v1::LoginRequest { name: "dora".to_owned(), password, expires_seconds: 0 };
    let mut dora = client(served.address, &accounts.login(login).await.unwrap().into_inner().token).await;
    let key = dora.create_worker_key(v1::CreateWorkerKeyRequest { name: "lab".to_owned() }).await.unwrap();
    let mut request =
        tonic::Request::new(v1::EnrollMachineRequest { machine_id: "m".to_owned(), name: "m".to_owned() });
    let bearer = MetadataValue::try_from(format!("Bearer {}", key.into_inner().token)).unwrap();
    request.metadata_mut().insert("authorization", bearer);
    let enrolled = accounts.enroll_machine(request).await.unwrap().into_inner();
    let mut machine = worker(served.address, &enrolled.worker_token).await;
    let capabilities = test_capabilities("m", &[], 1);
    machine.register(v1::RegisterRequest { capabilities: Some(capabilities) }).await.unwrap();
    let request = test_request(&mut admin, 20, None).await;
    let job = admin.create_test(request).await.unwrap().into_inner().job_id;
    let lease = machine.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
    assert_eq!(lease.job_id, job);
    let active = |admin: &mut crate::common::Client| {
        let mut admin = admin.clone();
        async move {
            let workers = admin.list_workers(v1::ListWorkersRequest {}).await.unwrap().into_inner().workers;
            workers.iter().find(|w| w.worker_id == enrolled.worker_id).unwrap().active_leases
        }
    };
    assert_eq!(active(&mut admin).await, 1);
    admin.revoke_user(v1::UserName { name: "dora".to_owned() }).await.unwrap();
    assert_eq!(active(&mut admin).await, 0, "withdrawn at once, its lease of 600 s notwithstanding");
    let refused = machine.heartbeat(v1::HeartbeatRequest { lease_ids: vec![lease.lease_id] }).await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::Unauthenticated);
    let state = admin.get_job(v1::JobId { job_id: job }).await.unwrap().into_inner();
    assert_eq!(state.active_leases, 0, "{state:?}");
}
