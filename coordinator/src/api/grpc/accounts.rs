//! The Accounts service: a user signs up and logs in, before it holds a token, and a
//! machine enrolls with its user's worker key. Sign-up and log-in hash a password
//! (memory-hard work, one a core); a log-in is bounded by name
//! ([`LoginAttempts`](crate::access::accounts::LoginAttempts)) besides the address
//! limits every call without a token has, and an unknown name costs what a wrong
//! password does.

use crate::access::accounts::{SignupMode, check_name, check_password, hash_password, verify_password};
use crate::access::tokens::{bearer, token_hash};
use crate::api::grpc::{AccountsApi, Shared};
use crate::scheduler::users::Standing;
use tonic::{Request, Response, Status};
use xq_proto::v1;

#[tonic::async_trait]
impl v1::accounts_server::Accounts for AccountsApi {
    async fn signup(&self, request: Request<v1::SignupRequest>) -> Result<Response<v1::SignupReply>, Status> {
        Ok(Response::new(self.0.sign_up(request.into_inner()).await?))
    }

    async fn login(&self, request: Request<v1::LoginRequest>) -> Result<Response<v1::LoginReply>, Status> {
        Ok(Response::new(self.0.log_in(request.into_inner()).await?))
    }

    async fn enroll_machine(
        &self,
        request: Request<v1::EnrollMachineRequest>,
    ) -> Result<Response<v1::EnrollMachineReply>, Status> {
        let key = request.metadata().get("authorization").and_then(|value| value.to_str().ok()).and_then(bearer);
        let key_hash = token_hash(key.ok_or_else(|| Status::unauthenticated("give the worker key as the bearer"))?);
        let v1::EnrollMachineRequest { machine_id, name } = request.into_inner();
        let (worker_id, worker_token) = self.0.scheduler.enroll_machine(&key_hash, &machine_id, &name).await?;
        Ok(Response::new(v1::EnrollMachineReply { worker_id, worker_token }))
    }
}

impl Shared {
    /// A sign-up, as `xq signup` and the dashboard's page make it.
    pub async fn sign_up(&self, request: v1::SignupRequest) -> Result<v1::SignupReply, Status> {
        let v1::SignupRequest { name, password } = request;
        let mode = self.scheduler.config.signup;
        if mode == SignupMode::Closed {
            return Err(Status::permission_denied("this coordinator takes no sign-ups: ask its admin for a token"));
        }
        check_name(&name).map_err(|e| Status::invalid_argument(e.to_string()))?;
        check_password(&password).map_err(|e| Status::invalid_argument(e.to_string()))?;
        let hash = self.password_work(move || hash_password(&password)).await?;
        let standing = self.scheduler.sign_up(&name, &hash, mode).await?;
        Ok(v1::SignupReply { state: standing.name().to_owned() })
    }

    /// A log-in, as `xq login` and the dashboard's make it: a new token of the user.
    pub async fn log_in(&self, request: v1::LoginRequest) -> Result<v1::LoginReply, Status> {
        let v1::LoginRequest { name, password, expires_seconds } = request;
        self.login_attempts.admit(&name).map_err(|e| Status::resource_exhausted(e.to_string()))?;
        let user = self.scheduler.user(&name);
        let stored = user.as_ref().map(|user| user.password_hash.clone());
        let matches = self.password_work(move || verify_password(stored.as_deref(), &password)).await?;
        let Some(user) = user.filter(|_| matches) else {
            return Err(Status::unauthenticated("unknown name or wrong password"));
        };
        match user.standing {
            Standing::Active => {}
            Standing::Pending => {
                return Err(Status::failed_precondition(format!(
                    "'{name}' waits for an admin's or an approver's acceptance"
                )));
            }
            Standing::Revoked => return Err(Status::permission_denied(format!("'{name}' was revoked"))),
        }
        let (token, id, role) = self.scheduler.log_in(&name, expires_seconds).await?;
        Ok(v1::LoginReply { token, id, role: role.name().to_owned() })
    }

    /// Runs `work` (hashing a password) on the blocking pool, one a core at once.
    async fn password_work<T: Send + 'static>(&self, work: impl FnOnce() -> T + Send + 'static) -> Result<T, Status> {
        let _place = self.password_work.acquire().await.map_err(|_| Status::unavailable("shutting down"))?;
        tokio::task::spawn_blocking(work).await.map_err(|e| Status::internal(e.to_string()))
    }
}
