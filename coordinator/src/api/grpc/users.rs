//! Users as the Client service shows and changes them: listed and accepted by admins
//! and approvers, given roles and revoked by admins. Revoking a user revokes each of
//! its tokens with all that revoking a token does (its jobs and events stop).

use crate::access::caller::Caller;
use crate::access::tokens::Role;
use crate::api::grpc::Shared;
use tonic::Status;
use xq_proto::v1;

/// The most tests a user's page lists.
const PAGE_TESTS: usize = 200;

impl Shared {
    /// A user's page: their tests (made with any of their tokens, revoked and expired
    /// ones too), the machines of their worker keys and their credit.
    pub async fn user_page(&self, name: &str) -> Result<v1::UserPage, Status> {
        let info = self.scheduler.user_info(name).ok_or_else(|| Status::not_found(format!("no user '{name}'")))?;
        let tokens = self.storage.token_ids_of_user(name).await.map_err(|e| Status::unavailable(e.to_string()))?;
        let submitters: std::collections::HashSet<String> = tokens.into_iter().collect();
        let tests = self.scheduler.jobs_of(&submitters, PAGE_TESTS);
        let machines = self.scheduler.workers().into_iter().filter(|w| w.user == name).collect();
        let credit = self.contributors().await?.users.into_iter().find(|user| user.user == name);
        Ok(v1::UserPage { user: info.name, role: info.role, state: info.state, tests, machines, credit })
    }

    /// A worker key of the caller's user.
    pub async fn create_worker_key(&self, caller: &Caller, name: &str) -> Result<v1::CreateTokenReply, Status> {
        let user = self.scheduler.user_of_token(&caller.token_id).unwrap_or_default();
        let (token, id) = self.scheduler.create_worker_key(&user, name, &caller.token_id).await?;
        Ok(v1::CreateTokenReply { token, id })
    }

    /// Retires machine `worker`: the caller's own, or anyone's for an admin.
    pub async fn retire_machine(&self, caller: &Caller, worker: u64) -> Result<v1::WorkerInfo, Status> {
        let user = self.scheduler.person_of_token(&caller.token_id).unwrap_or_default();
        let admin = caller.role == Role::Admin;
        Ok(self.scheduler.retire_machine(worker, &user, admin, &caller.token_id).await?)
    }

    /// Every user, for an admin or an approver.
    pub fn list_users(&self, caller: &Caller) -> Result<v1::ListUsersReply, Status> {
        may_approve(caller)?;
        Ok(v1::ListUsersReply { users: self.scheduler.users() })
    }

    /// Accepts the pending user `name`, for an admin or an approver.
    pub async fn accept_user(&self, caller: &Caller, name: &str) -> Result<v1::UserInfo, Status> {
        may_approve(caller)?;
        Ok(self.scheduler.accept_user(name, &caller.token_id).await?)
    }

    /// Gives `name` the role `role`, for an admin.
    pub async fn set_user_role(&self, caller: &Caller, name: &str, role: &str) -> Result<v1::UserInfo, Status> {
        let role = Role::named(role)
            .ok_or_else(|| Status::invalid_argument(format!("role '{role}': submitter, approver or admin")))?;
        Ok(self.scheduler.set_user_role(name, role, &caller.token_id).await?)
    }

    /// Revokes the user `name` and each of its tokens, for an admin.
    pub async fn revoke_user(&self, caller: &Caller, name: &str) -> Result<v1::UserInfo, Status> {
        for id in self.scheduler.revoke_user(name, &caller.token_id).await? {
            // A machine's token goes with its key's, whichever comes first here: one
            // revoked already by that is no error.
            match self.revoke_token(&id, &caller.token_id).await {
                Err(status) if status.code() == tonic::Code::NotFound => {}
                other => other?,
            }
        }
        self.scheduler.user_info(name).ok_or_else(|| Status::not_found(name.to_owned()))
    }

    /// Lets the pending job `id` run, for an admin or an approver who is not of the user
    /// that submitted it.
    pub async fn approve_job(&self, caller: &Caller, id: u64) -> Result<v1::Job, Status> {
        may_approve(caller)?;
        if caller.role != Role::Admin {
            let submitter = self.scheduler.submitter(id).unwrap_or_default();
            let user = self.scheduler.person_of_token(&caller.token_id);
            let own_user = user.is_some() && user == self.scheduler.person_of_token(&submitter);
            if submitter == caller.token_id || own_user {
                return Err(Status::permission_denied(format!("job {id} is your own: another approver approves it")));
            }
        }
        let job = self.scheduler.approve(id).await?;
        self.scheduler.audit(&caller.token_id, "job.approve", &id.to_string()).await?;
        Ok(job)
    }
}

fn may_approve(caller: &Caller) -> Result<(), Status> {
    if caller.role.approves() {
        Ok(())
    } else {
        Err(Status::permission_denied("this call needs an approver's or an admin's token"))
    }
}
