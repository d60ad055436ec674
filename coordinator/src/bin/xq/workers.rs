//! `xq workers`, `xq worker-token` and a worker's standing: disabled, quarantined or
//! active again.

use xq_proto::client::Client;
use xq_proto::v1;

/// `xq workers`: each worker, its capabilities, leases and standing.
pub async fn list(client: &mut Client) -> anyhow::Result<()> {
    for worker in client.list_workers(v1::ListWorkersRequest {}).await?.into_inner().workers {
        let caps = worker.capabilities.unwrap_or_default();
        let standing = if worker.standing == "active" {
            String::new()
        } else {
            format!(", {} ({})", worker.standing, worker.standing_reason)
        };
        let user = if worker.user.is_empty() { String::new() } else { format!(" ({})", worker.user) };
        out!(
            "worker {} {}{user}: {} cores, {} nodes/s, version {}, {} leases, last seen {} ms ago{standing}",
            worker.worker_id,
            caps.name,
            caps.cores,
            caps.bench_nps,
            caps.version,
            worker.active_leases,
            xq_coordinator::storage::now_ms() - worker.last_seen_ms
        );
    }
    Ok(())
}

/// `xq contributors`: users, then machines, by all-time core-hours.
pub async fn contributors(client: &mut Client) -> anyhow::Result<()> {
    let reply = client.list_contributors(v1::ListContributorsRequest {}).await?.into_inner();
    let credit = |credit: Option<v1::Contribution>| {
        let credit = credit.unwrap_or_default();
        let (all, recent) = (credit.all_time.unwrap_or_default(), credit.last_30_days.unwrap_or_default());
        format!(
            "{:.2} core-hours, {} games (last 30 days: {:.2} core-hours, {} games)",
            all.cpu_hours, all.games, recent.cpu_hours, recent.games
        )
    };
    for user in reply.users {
        out!("user {}: {} machines, {}", user.user, user.machines, credit(user.credit));
    }
    for machine in reply.machines {
        let user = if machine.user.is_empty() { String::new() } else { format!(" ({})", machine.user) };
        out!("worker {} {}{user}: {}", machine.worker_id, machine.name, credit(machine.credit));
    }
    Ok(())
}

/// `xq worker-token`: a new worker's token, printed once.
pub async fn create_token(client: &mut Client, name: String) -> anyhow::Result<()> {
    out!("{}", client.create_worker_token(v1::CreateWorkerTokenRequest { name }).await?.into_inner().token);
    Ok(())
}

/// `xq worker-key`: a worker key of the caller's user, printed once.
pub async fn create_key(client: &mut Client, name: String) -> anyhow::Result<()> {
    let reply = client.create_worker_key(v1::CreateWorkerKeyRequest { name }).await?.into_inner();
    eprintln!("worker key {} (shown once; `xq token revoke {}` revokes it and its machines):", reply.id, reply.id);
    out!("{}", reply.token);
    Ok(())
}

/// `xq retire-machine`.
pub async fn retire(client: &mut Client, worker_id: u64) -> anyhow::Result<()> {
    let info = client.retire_machine(v1::RetireMachineRequest { worker_id }).await?.into_inner();
    out!("worker {}: {} ({}), {} units counted", info.worker_id, info.standing, info.standing_reason, info.units_done);
    Ok(())
}

/// `xq disable-worker`, `quarantine-worker` and `enable-worker`.
pub async fn set_standing(client: &mut Client, worker_id: u64, standing: &str, reason: String) -> anyhow::Result<()> {
    let request = v1::SetWorkerStandingRequest { worker_id, standing: standing.to_owned(), reason };
    let info = client.set_worker_standing(request).await?.into_inner();
    out!("worker {}: {}, {} units counted", info.worker_id, info.standing, info.units_done);
    Ok(())
}
