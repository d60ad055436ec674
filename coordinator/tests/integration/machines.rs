//! Worker keys (#56 part 2): one key of a user serves many machines, each enrolled with
//! the id it keeps as a worker of its own, credited to the user; a machine that
//! enrolls again is the same worker; revoking the key revokes its machines; a key
//! reaches a bounded number of machines.

use std::time::{Duration, Instant};

use tokio::process::Command;
use tonic::Code;
use tonic::metadata::MetadataValue;
use xq_coordinator::access::accounts::SignupMode;
use xq_coordinator::access::tokens::{token_hash, token_id};
use xq_coordinator::scheduler::config::SchedulerConfig;
use xq_proto::v1;
use xq_proto::v1::accounts_client::AccountsClient;

use crate::common::{Backend, Served, TempDir, binary, channel, client, serve};

/// Alice's client, logged in on an open coordinator.
async fn alice(served: &Served) -> crate::common::Client {
    let mut accounts = AccountsClient::new(channel(served.address).await);
    let password = "alice's long password".to_owned();
    accounts.signup(v1::SignupRequest { name: "alice".to_owned(), password: password.clone() }).await.unwrap();
    let login = v1::LoginRequest { name: "alice".to_owned(), password, expires_seconds: 0 };
    let token = accounts.login(login).await.unwrap().into_inner().token;
    client(served.address, &token).await
}

async fn enroll(served: &Served, key: &str, machine_id: &str) -> Result<v1::EnrollMachineReply, tonic::Status> {
    let mut request = tonic::Request::new(v1::EnrollMachineRequest {
        machine_id: machine_id.to_owned(),
        name: machine_id.to_owned(),
    });
    request.metadata_mut().insert("authorization", MetadataValue::try_from(format!("Bearer {key}")).unwrap());
    Ok(AccountsClient::new(channel(served.address).await).enroll_machine(request).await?.into_inner())
}

fn config() -> SchedulerConfig {
    SchedulerConfig { signup: SignupMode::Open, machines_per_key: 3, ..Default::default() }
}

/// Two real `xq-worker connect --key-file` processes of one key: two workers of the
/// user, registered; one restarted keeps its worker, and so does one that lost its
/// token but kept its machine id (its old token then revoked).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_key_runs_two_machines_each_a_worker_of_its_own_credited_to_its_user() {
    let served = serve(Backend::Sqlite, config()).await;
    let mut alice = alice(&served).await;
    let key = alice.create_worker_key(v1::CreateWorkerKeyRequest { name: "lab".to_owned() }).await.unwrap();
    let key = key.into_inner().token;
    let dir = TempDir::new("machines");
    let key_file = dir.0.join("key");
    std::fs::write(&key_file, format!("{key}\n")).unwrap();
    let start = |machine: &str| {
        Command::new(binary("xq-worker"))
            .args(["connect", "--concurrency", "1", "--no-sandbox", "--name", machine])
            .args(["--coordinator", &format!("http://{}", served.address), "--key-file"])
            .arg(&key_file)
            .arg("--cache")
            .arg(dir.0.join(machine))
            .env_remove("XQ_WORKER_TOKEN")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap()
    };
    let mut admin = client(served.address, &served.client_token).await;
    let registered = |admin: &mut crate::common::Client| {
        let mut admin = admin.clone();
        async move {
            let workers = admin.list_workers(v1::ListWorkersRequest {}).await.unwrap().into_inner().workers;
            workers
                .into_iter()
                .filter(|w| w.capabilities.as_ref().is_some_and(|c| c.cores > 0))
                .map(|w| (w.worker_id, w.user, w.capabilities.unwrap().name))
                .collect::<Vec<_>>()
        }
    };
    let wait_for = |admin: &mut crate::common::Client, count: usize| {
        let admin = admin.clone();
        async move {
            let started = Instant::now();
            loop {
                let workers = registered(&mut admin.clone()).await;
                if workers.len() >= count {
                    return workers;
                }
                assert!(started.elapsed() < Duration::from_secs(60), "waited for {count} machines: {workers:?}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    };
    let (first, second) = (start("machine-a"), start("machine-b"));
    let mut workers = wait_for(&mut admin, 2).await;
    // They enroll at once: in either order.
    workers.sort_by(|a, b| a.2.cmp(&b.2));
    assert_eq!(
        workers.iter().map(|(_, user, name)| (user.as_str(), name.as_str())).collect::<Vec<_>>(),
        [("alice", "machine-a"), ("alice", "machine-b")]
    );
    // Restarted with its cache, a machine is the same worker: no third one.
    drop(first);
    let _first = start("machine-a");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(wait_for(&mut admin, 2).await.len(), 2);
    drop(second);
    // Its token lost but its machine id kept: enrolled again as the same worker, the
    // old token revoked.
    let kept_id = std::fs::read_to_string(dir.0.join("machine-b/machine-id")).unwrap();
    let again = enroll(&served, &key, kept_id.trim()).await.unwrap();
    assert_eq!(again.worker_id, workers[1].0);
    let tokens = admin.list_tokens(v1::ListTokensRequest {}).await.unwrap().into_inner().tokens;
    let of_b: Vec<bool> = tokens.iter().filter(|t| t.worker_id == workers[1].0).map(|t| t.revoked_ms != 0).collect();
    assert_eq!(of_b, [true, false], "the first token revoked, the new one in force");
    assert_eq!(registered(&mut admin).await.len(), 2);
}

/// A key reaches at most its bound of machines (three here); a key is refused by the
/// Worker and Client services alike; a user retires a machine of hers but not
/// another's; she revokes her key (another user cannot), and with it every machine's
/// token, and it enrolls no more.
#[tokio::test]
async fn a_key_reaches_a_bounded_number_of_machines_and_its_revocation_reaches_them_all() {
    let served = serve(Backend::Sqlite, config()).await;
    let mut alice = alice(&served).await;
    let reply = alice.create_worker_key(v1::CreateWorkerKeyRequest { name: "lab".to_owned() }).await.unwrap();
    let (key, key_id) = (reply.get_ref().token.clone(), reply.get_ref().id.clone());
    let mut machines = Vec::new();
    for index in 0..3 {
        machines.push(enroll(&served, &key, &format!("m-{index}")).await.unwrap());
    }
    let full = enroll(&served, &key, "m-3").await.unwrap_err();
    assert_eq!(full.code(), Code::PermissionDenied, "{full:?}");
    assert!(full.message().contains("enrolled 3 machines"), "{full:?}");
    assert_eq!(enroll(&served, &key, "m-0").await.unwrap().worker_id, machines[0].worker_id, "a known one still");
    for bad in ["", "has space", "<b>", &"x".repeat(65)] {
        assert_eq!(enroll(&served, &key, bad).await.unwrap_err().code(), Code::InvalidArgument, "{bad:?}");
    }
    // The key itself opens neither service.
    let mut as_client = client(served.address, &key).await;
    assert_eq!(as_client.list_jobs(v1::ListJobsRequest::default()).await.unwrap_err().code(), Code::PermissionDenied);
    let mut as_worker = crate::common::worker(served.address, &key).await;
    let refused = as_worker.heartbeat(v1::HeartbeatRequest::default()).await.unwrap_err();
    assert_eq!(refused.code(), Code::PermissionDenied, "{refused:?}");

    // A user retires a machine of hers, not another user's; its token goes with it.
    let mut bob = {
        let mut accounts = AccountsClient::new(channel(served.address).await);
        let password = "bob's long password!".to_owned();
        accounts.signup(v1::SignupRequest { name: "bob".to_owned(), password: password.clone() }).await.unwrap();
        let login = v1::LoginRequest { name: "bob".to_owned(), password, expires_seconds: 0 };
        client(served.address, &accounts.login(login).await.unwrap().into_inner().token).await
    };
    let retire = |worker_id| v1::RetireMachineRequest { worker_id };
    let not_his = bob.retire_machine(retire(machines[2].worker_id)).await.unwrap_err();
    assert_eq!(not_his.code(), Code::PermissionDenied, "{not_his:?}");
    let retired = alice.retire_machine(retire(machines[2].worker_id)).await.unwrap().into_inner();
    assert_eq!((retired.standing.as_str(), retired.standing_reason.as_str()), ("disabled", "retired by alice"));
    let mut third = crate::common::worker(served.address, &machines[2].worker_token).await;
    assert_eq!(third.heartbeat(v1::HeartbeatRequest::default()).await.unwrap_err().code(), Code::Unauthenticated);

    // A token an admin made for someone (the admin's user's, 'operator') revokes no other
    // token of that user, the admin's own least of all.
    let mut admin = client(served.address, &served.client_token).await;
    let request = v1::CreateTokenRequest { role: "submitter".to_owned(), name: "carol".to_owned(), expires_seconds: 0 };
    let carol_token = admin.create_token(request).await.unwrap().into_inner().token;
    let mut carol = client(served.address, &carol_token).await;
    let admin_id = token_id(&token_hash(&served.client_token)).to_owned();
    let refused = carol.revoke_token(v1::RevokeTokenRequest { id: admin_id }).await.unwrap_err();
    assert_eq!(refused.code(), Code::PermissionDenied, "{refused:?}");

    // Bob cannot revoke Alice's key; she can, and its machines go with it.
    let revoke = || v1::RevokeTokenRequest { id: key_id.clone() };
    assert_eq!(bob.revoke_token(revoke()).await.unwrap_err().code(), Code::PermissionDenied);
    alice.revoke_token(revoke()).await.unwrap();
    let mut machine = crate::common::worker(served.address, &machines[1].worker_token).await;
    let refused = machine.heartbeat(v1::HeartbeatRequest::default()).await.unwrap_err();
    assert_eq!(refused.code(), Code::Unauthenticated, "the machine's token went with its key");
    assert_eq!(enroll(&served, &key, "m-9").await.unwrap_err().code(), Code::PermissionDenied);
}
