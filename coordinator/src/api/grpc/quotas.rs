//! Submitters' quotas, checked on their requests: their running and pending jobs, and
//! the bytes their jobs and uploads store (a job's own size is bounded when it is
//! created; retention frees what finished jobs stored).

use crate::access::caller::Caller;
use crate::access::tokens::Role;
use crate::api::grpc::Shared;
use tonic::Status;

/// Refuses a submitter `jobs` new jobs (a tournament's tests, all or none) past its
/// quotas (admins have none).
pub async fn check_quota(shared: &Shared, caller: &Caller, jobs: usize) -> Result<(), Status> {
    let config = &shared.scheduler.config;
    if caller.role == Role::Admin {
        return Ok(());
    }
    let (active, limit) = (shared.scheduler.active_jobs_of(&caller.token_id), config.submitter_active_jobs);
    if limit > 0 && active + jobs > limit {
        let id = &caller.token_id;
        return Err(Status::resource_exhausted(match jobs {
            1 => format!("submitter {id} has {active} running or pending jobs, the most allowed: stop one or wait"),
            _ => format!(
                "submitter {id} has {active} running or pending jobs and this request makes {jobs}, \
                 over the {limit} allowed: stop some or wait"
            ),
        }));
    }
    check_stored_bytes(shared, caller).await
}

/// A size as people read it: bytes below a megabyte, else megabytes.
pub(crate) fn bytes(size: u64) -> String {
    if size < 1 << 20 { format!("{size} bytes") } else { format!("{} MB", size >> 20) }
}

/// Refuses a submitter new work or uploads once its jobs and uploads store its quota
/// of bytes (admins have none).
pub async fn check_stored_bytes(shared: &Shared, caller: &Caller) -> Result<(), Status> {
    let config = &shared.scheduler.config;
    if caller.role != Role::Admin && config.submitter_quota_bytes > 0 {
        let stored =
            shared.storage.stored_bytes_of(&caller.token_id).await.map_err(|e| Status::unavailable(e.to_string()))?;
        if stored >= config.submitter_quota_bytes {
            return Err(Status::resource_exhausted(format!(
                "submitter {}'s jobs and uploads store {}, its quota is {}: wait for retention to remove \
                 finished jobs' data and unused uploads, or ask an admin",
                caller.token_id,
                bytes(stored),
                bytes(config.submitter_quota_bytes)
            )));
        }
    }
    Ok(())
}
