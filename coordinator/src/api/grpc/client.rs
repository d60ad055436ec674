//! The clients' service: uploads, jobs of every kind, tokens, workers and nets.

use crate::access::hosts::host;
use crate::access::streams::UntilOutOfForce;
use crate::access::tokens::{Role, TokenHash};
use crate::api::grpc::auth::{admin_of, client_of, request_key};
use crate::api::grpc::downloads::Stored;
use crate::api::grpc::jobs::{may_claim_throughput, may_prioritise};
use crate::api::grpc::{ClientApi, DEFAULT_PRIORITY, Stream_};
use crate::jobs::JobSpec;
use crate::jobs::selfplay::check_self_play;
use crate::jobs::spsa::{check_spsa, check_spsa_bounds};
use crate::storage::artifacts::check_hash;
use tokio_stream::{StreamExt, wrappers::ReceiverStream};
use tonic::{Request, Response, Status, Streaming};
use xq_proto::v1;

/// The most net files a listing holds: the newest.
const MAX_NET_FILES_LISTED: i64 = 10_000;

#[tonic::async_trait]
impl v1::client_server::Client for ClientApi {
    async fn upload_artifact(
        &self,
        request: Request<Streaming<v1::ArtifactPiece>>,
    ) -> Result<Response<v1::ArtifactRef>, Status> {
        let caller = client_of(&request)?;
        let mut pieces = request.into_inner();
        let first =
            pieces.message().await?.ok_or_else(|| Status::invalid_argument("an upload needs at least one piece"))?;
        let (kind, name) = (first.kind.clone(), first.name.clone());
        let data = tokio_stream::once(Ok(first.data)).chain(pieces.map(|piece| piece.map(|p| p.data)));
        Ok(Response::new(self.0.store_upload(&caller, &kind, &name, data).await?))
    }

    async fn create_test(&self, request: Request<v1::CreateTestRequest>) -> Result<Response<v1::Job>, Status> {
        let caller = client_of(&request)?;
        let key = request_key(&request)?;
        Ok(Response::new(self.0.create_test(&caller, key.as_ref(), request.into_inner()).await?))
    }

    async fn create_tournament(
        &self,
        request: Request<v1::CreateTournamentRequest>,
    ) -> Result<Response<v1::Tournament>, Status> {
        let caller = client_of(&request)?;
        let key = request_key(&request)?;
        Ok(Response::new(self.0.create_tournament(&caller, key.as_ref(), request.into_inner()).await?))
    }

    async fn get_tournament(&self, request: Request<v1::TournamentId>) -> Result<Response<v1::Tournament>, Status> {
        client_of(&request)?;
        Ok(Response::new(self.0.tournament(request.get_ref().tournament_id).await?))
    }

    async fn list_tournaments(
        &self,
        request: Request<v1::ListTournamentsRequest>,
    ) -> Result<Response<v1::ListTournamentsReply>, Status> {
        client_of(&request)?;
        Ok(Response::new(self.0.tournaments(request.get_ref().limit).await?))
    }

    type DownloadTournamentGamesStream = Stream_<v1::PgnBatch>;

    async fn stop_tournament(&self, request: Request<v1::TournamentId>) -> Result<Response<v1::Tournament>, Status> {
        let caller = client_of(&request)?;
        Ok(Response::new(self.0.stop_tournament(&caller, request.get_ref().tournament_id).await?))
    }

    async fn download_tournament_games(
        &self,
        request: Request<v1::TournamentId>,
    ) -> Result<Response<Self::DownloadTournamentGamesStream>, Status> {
        let caller = client_of(&request)?;
        let games = self.0.tournament_games(request.get_ref().tournament_id).await?;
        let batches = Box::pin(games.map(|text| text.map(|pgn| v1::PgnBatch { pgn })));
        Ok(Response::new(self.0.holding(holder(&caller), batches)?))
    }

    async fn create_verification(
        &self,
        request: Request<v1::CreateVerificationRequest>,
    ) -> Result<Response<v1::Job>, Status> {
        let caller = client_of(&request)?;
        let key = request_key(&request)?;
        if let Some(job) = self.0.created_before(&caller, key.as_ref())? {
            return Ok(Response::new(job));
        }
        Ok(Response::new(self.0.create_verification(&caller, key.as_ref(), request.into_inner()).await?))
    }

    async fn get_verification(&self, request: Request<v1::JobId>) -> Result<Response<v1::VerificationSummary>, Status> {
        client_of(&request)?;
        Ok(Response::new(self.0.verification(request.get_ref().job_id).await?))
    }

    type DownloadVerificationStream = Stream_<v1::VerificationLines>;

    async fn download_verification(
        &self,
        request: Request<v1::JobId>,
    ) -> Result<Response<Self::DownloadVerificationStream>, Status> {
        let caller = client_of(&request)?;
        let lines = self.0.verification_lines(request.get_ref().job_id)?;
        let lines = Box::pin(lines.map(|r| r.map(|jsonl| v1::VerificationLines { jsonl })));
        Ok(Response::new(self.0.holding(holder(&caller), lines)?))
    }

    async fn create_spsa(&self, request: Request<v1::CreateSpsaRequest>) -> Result<Response<v1::Job>, Status> {
        let caller = client_of(&request)?;
        let key = request_key(&request)?;
        if let Some(job) = self.0.created_before(&caller, key.as_ref())? {
            return Ok(Response::new(job));
        }
        let invalid = |e: crate::jobs::checks::SpecError| Status::invalid_argument(e.to_string());
        let job = check_spsa(request.get_ref()).map_err(invalid)?;
        check_spsa_bounds(request.get_ref()).map_err(invalid)?;
        let pairs = job.request.pairs;
        let origin = self.0.origin(&caller, key.as_ref());
        Ok(Response::new(self.0.create_match(&caller, origin, "spsa", job, pairs).await?))
    }

    async fn create_self_play(&self, request: Request<v1::CreateSelfPlayRequest>) -> Result<Response<v1::Job>, Status> {
        let caller = client_of(&request)?;
        let key = request_key(&request)?;
        if let Some(job) = self.0.created_before(&caller, key.as_ref())? {
            return Ok(Response::new(job));
        }
        let request = request.into_inner();
        check_self_play(&request).map_err(|e| Status::invalid_argument(e.to_string()))?;
        if !request.lineage.is_empty() {
            self.0.nets.may_mark_job(&request.lineage, &caller)?;
        }
        may_prioritise(&caller, request.priority, DEFAULT_PRIORITY)?;
        may_claim_throughput(&caller, request.throughput)?;
        crate::api::grpc::quotas::check_quota(&self.0, &caller, 1).await?;
        if let Some(net) = request.spec.as_ref().and_then(|s| s.net.as_ref()) {
            self.0.our_net("spec.net", net).await?;
        }
        let (units, priority, description) = (request.units, request.priority, request.description.clone());
        let spec = JobSpec::SelfPlay(request);
        let origin = self.0.origin(&caller, key.as_ref());
        let view = self.0.scheduler.create_job("selfplay", spec, units, (priority, &description), origin).await?;
        Ok(Response::new(view))
    }

    async fn list_jobs(&self, request: Request<v1::ListJobsRequest>) -> Result<Response<v1::ListJobsReply>, Status> {
        client_of(&request)?;
        Ok(Response::new(v1::ListJobsReply { jobs: self.0.scheduler.jobs(request.get_ref()) }))
    }

    async fn get_job(&self, request: Request<v1::JobId>) -> Result<Response<v1::Job>, Status> {
        client_of(&request)?;
        let id = request.into_inner().job_id;
        self.0.scheduler.job(id).map(Response::new).ok_or_else(|| Status::not_found(format!("job {id}")))
    }

    async fn stop_job(&self, request: Request<v1::JobId>) -> Result<Response<v1::Job>, Status> {
        let caller = client_of(&request)?;
        Ok(Response::new(self.0.stop_job(&caller, request.into_inner().job_id).await?))
    }

    async fn set_priority(&self, request: Request<v1::SetPriorityRequest>) -> Result<Response<v1::Job>, Status> {
        let caller = client_of(&request)?;
        let request = request.into_inner();
        Ok(Response::new(self.0.set_priority(&caller, request.job_id, request.priority).await?))
    }

    async fn modify_job(&self, request: Request<v1::ModifyJobRequest>) -> Result<Response<v1::Job>, Status> {
        let caller = client_of(&request)?;
        Ok(Response::new(self.0.modify_job(&caller, request.into_inner()).await?))
    }

    async fn resume_job(&self, request: Request<v1::JobId>) -> Result<Response<v1::Job>, Status> {
        let caller = client_of(&request)?;
        Ok(Response::new(self.0.resume_job(&caller, request.into_inner().job_id).await?))
    }

    async fn clone_test(&self, request: Request<v1::CloneTestRequest>) -> Result<Response<v1::Job>, Status> {
        let caller = client_of(&request)?;
        let key = request_key(&request)?;
        Ok(Response::new(self.0.clone_test(&caller, key.as_ref(), request.into_inner()).await?))
    }

    async fn list_presets(
        &self,
        request: Request<v1::ListPresetsRequest>,
    ) -> Result<Response<v1::ListPresetsReply>, Status> {
        client_of(&request)?;
        let presets = crate::jobs::test::presets::PRESETS.iter().map(|p| p.view()).collect();
        let book = crate::api::grpc::default_book::NAME;
        let default_book = format!("{book} ({} openings)", crate::api::grpc::default_book::openings());
        Ok(Response::new(v1::ListPresetsReply { presets, default_book }))
    }

    type WatchJobStream = Stream_<v1::Job>;

    async fn watch_job(&self, request: Request<v1::JobId>) -> Result<Response<Self::WatchJobStream>, Status> {
        client_of(&request)?;
        let hash = request.extensions().get::<TokenHash>().map(|hash| hash.0.clone()).unwrap_or_default();
        let place = self
            .0
            .followers
            .take(request.remote_addr().map(|address| host(address.ip())))
            .map_err(|full| Status::resource_exhausted(full.to_string()))?;
        let id = request.into_inner().job_id;
        let mut changes = self.0.scheduler.watch(id).ok_or_else(|| Status::not_found(format!("job {id}")))?;
        let scheduler = self.0.scheduler.clone();
        let (sender, receiver) = tokio::sync::mpsc::channel(16);
        tokio::spawn(async move {
            let _place = place;
            loop {
                let Some(job) = scheduler.job(id) else { return };
                let running = job.state == "running" || job.state == "pending";
                if sender.send(Ok(job)).await.is_err() || !running {
                    return;
                }
                tokio::select! {
                    changed = changes.changed() => if changed.is_err() { return },
                    // The follower left (or its token was revoked): the place goes back.
                    () = sender.closed() => return,
                }
                // Coalesce bursts: at most a few updates a second.
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            }
        });
        let revoked = Status::unauthenticated("the token this stream was opened with was revoked or has expired");
        let end = self.0.scheduler.out_of_force(hash);
        Ok(Response::new(Box::pin(UntilOutOfForce::new(ReceiverStream::new(receiver), end, Err(revoked)))))
    }

    async fn get_job_history(&self, request: Request<v1::JobId>) -> Result<Response<v1::JobHistory>, Status> {
        client_of(&request)?;
        Ok(Response::new(self.0.job_history(request.into_inner().job_id).await?))
    }

    async fn list_pairs(&self, request: Request<v1::ListPairsRequest>) -> Result<Response<v1::ListPairsReply>, Status> {
        client_of(&request)?;
        Ok(Response::new(self.0.pairs(request.get_ref()).await?))
    }

    async fn get_pair(&self, request: Request<v1::PairId>) -> Result<Response<v1::JudgedPair>, Status> {
        client_of(&request)?;
        let pair = request.into_inner();
        Ok(Response::new(self.0.judged_pair(pair.job_id, pair.unit).await?))
    }

    async fn list_workers(
        &self,
        request: Request<v1::ListWorkersRequest>,
    ) -> Result<Response<v1::ListWorkersReply>, Status> {
        client_of(&request)?;
        Ok(Response::new(v1::ListWorkersReply { workers: self.0.scheduler.workers() }))
    }

    async fn list_contributors(
        &self,
        request: Request<v1::ListContributorsRequest>,
    ) -> Result<Response<v1::ContributorsReply>, Status> {
        client_of(&request)?;
        Ok(Response::new(self.0.contributors().await?))
    }

    async fn publish_worker_release(
        &self,
        request: Request<v1::WorkerRelease>,
    ) -> Result<Response<v1::WorkerRelease>, Status> {
        let caller = admin_of(&request)?;
        let release = self.0.checked_release(request.into_inner()).await?;
        let published = self.0.scheduler.publish_release(release).await?;
        let what = format!("{} {}", published.version, published.sha256);
        self.0.scheduler.audit(&caller.token_id, "release.publish", &what).await?;
        Ok(Response::new(published))
    }

    async fn create_worker_token(
        &self,
        request: Request<v1::CreateWorkerTokenRequest>,
    ) -> Result<Response<v1::CreateWorkerTokenReply>, Status> {
        let caller = admin_of(&request)?;
        let name = request.into_inner().name;
        if name.is_empty() || name.len() > 128 || name.chars().any(char::is_control) {
            return Err(Status::invalid_argument("a worker name of 1 to 128 printable characters"));
        }
        let (id, token) = self.0.scheduler.create_worker(&name, "").await?;
        self.0.scheduler.audit(&caller.token_id, "worker.create", &format!("{id} '{name}'")).await?;
        Ok(Response::new(v1::CreateWorkerTokenReply { token }))
    }

    async fn set_worker_standing(
        &self,
        request: Request<v1::SetWorkerStandingRequest>,
    ) -> Result<Response<v1::WorkerInfo>, Status> {
        let caller = admin_of(&request)?;
        let request = request.into_inner();
        let info = self.0.scheduler.set_standing(request.worker_id, &request.standing, &request.reason).await?;
        let detail = format!("{} {} '{}'", request.worker_id, request.standing, request.reason);
        self.0.scheduler.audit(&caller.token_id, "worker.standing", &detail).await?;
        Ok(Response::new(info))
    }

    async fn create_token(
        &self,
        request: Request<v1::CreateTokenRequest>,
    ) -> Result<Response<v1::CreateTokenReply>, Status> {
        let caller = admin_of(&request)?;
        let request = request.into_inner();
        let role = Role::named(&request.role).ok_or_else(|| {
            Status::invalid_argument(format!("role '{}': use admin, approver or submitter", request.role))
        })?;
        if request.name.is_empty() {
            return Err(Status::invalid_argument("name: say who the token is for"));
        }
        let expires_ms = match request.expires_seconds {
            0 => 0,
            seconds => crate::storage::now_ms()
                .saturating_add(i64::try_from(seconds.min(100 * 365 * 86_400)).unwrap_or(0) * 1000),
        };
        let token = self.0.scheduler.create_token(role, &request.name, expires_ms, &caller.token_id).await?;
        let id = crate::access::tokens::token_id(&crate::access::tokens::token_hash(&token)).to_owned();
        Ok(Response::new(v1::CreateTokenReply { token, id }))
    }

    async fn list_tokens(
        &self,
        request: Request<v1::ListTokensRequest>,
    ) -> Result<Response<v1::ListTokensReply>, Status> {
        admin_of(&request)?;
        let rows = self.0.storage.tokens().await.map_err(|e| Status::unavailable(e.to_string()))?;
        let tokens = rows
            .into_iter()
            .map(|row| v1::TokenInfo {
                id: crate::access::tokens::token_id(&row.hash).to_owned(),
                role: row.role,
                name: row.name,
                worker_id: row.worker_id.map_or(0, |id| id as u64),
                created_ms: row.created_ms,
                expires_ms: row.expires_ms,
                revoked_ms: row.revoked_ms,
                user: row.user,
            })
            .collect();
        Ok(Response::new(v1::ListTokensReply { tokens }))
    }

    async fn revoke_token(
        &self,
        request: Request<v1::RevokeTokenRequest>,
    ) -> Result<Response<v1::RevokeTokenReply>, Status> {
        let caller = client_of(&request)?;
        let id = request.into_inner().id;
        if caller.role != Role::Admin {
            let user = self.0.scheduler.person_of_token(&caller.token_id);
            if user.is_none() || user != self.0.scheduler.person_of_token(&id) {
                return Err(Status::permission_denied("a user revokes its own tokens and keys only"));
            }
        }
        self.0.revoke_token(&id, &caller.token_id).await?;
        Ok(Response::new(v1::RevokeTokenReply {}))
    }

    async fn retire_machine(
        &self,
        request: Request<v1::RetireMachineRequest>,
    ) -> Result<Response<v1::WorkerInfo>, Status> {
        let caller = client_of(&request)?;
        Ok(Response::new(self.0.retire_machine(&caller, request.into_inner().worker_id).await?))
    }

    async fn approve_job(&self, request: Request<v1::JobId>) -> Result<Response<v1::Job>, Status> {
        let caller = client_of(&request)?;
        Ok(Response::new(self.0.approve_job(&caller, request.into_inner().job_id).await?))
    }

    async fn create_worker_key(
        &self,
        request: Request<v1::CreateWorkerKeyRequest>,
    ) -> Result<Response<v1::CreateTokenReply>, Status> {
        let caller = client_of(&request)?;
        Ok(Response::new(self.0.create_worker_key(&caller, &request.into_inner().name).await?))
    }

    async fn get_user_page(&self, request: Request<v1::UserName>) -> Result<Response<v1::UserPage>, Status> {
        client_of(&request)?;
        Ok(Response::new(self.0.user_page(&request.into_inner().name).await?))
    }

    async fn list_users(&self, request: Request<v1::ListUsersRequest>) -> Result<Response<v1::ListUsersReply>, Status> {
        Ok(Response::new(self.0.list_users(&client_of(&request)?)?))
    }

    async fn accept_user(&self, request: Request<v1::UserName>) -> Result<Response<v1::UserInfo>, Status> {
        let caller = client_of(&request)?;
        Ok(Response::new(self.0.accept_user(&caller, &request.into_inner().name).await?))
    }

    async fn revoke_user(&self, request: Request<v1::UserName>) -> Result<Response<v1::UserInfo>, Status> {
        let caller = admin_of(&request)?;
        Ok(Response::new(self.0.revoke_user(&caller, &request.into_inner().name).await?))
    }

    async fn set_user_role(&self, request: Request<v1::SetUserRoleRequest>) -> Result<Response<v1::UserInfo>, Status> {
        let caller = admin_of(&request)?;
        let request = request.into_inner();
        Ok(Response::new(self.0.set_user_role(&caller, &request.name, &request.role).await?))
    }

    async fn list_audit(&self, request: Request<v1::ListAuditRequest>) -> Result<Response<v1::ListAuditReply>, Status> {
        admin_of(&request)?;
        let limit = match request.into_inner().limit {
            0 => 100,
            n => i64::from(n.min(10_000)),
        };
        let rows = self.0.storage.audit_log(limit).await.map_err(|e| Status::unavailable(e.to_string()))?;
        let entries = rows
            .into_iter()
            .map(|row| v1::AuditEntry { at_ms: row.at_ms, actor: row.actor, action: row.action, detail: row.detail })
            .collect();
        Ok(Response::new(v1::ListAuditReply { entries }))
    }

    type DownloadGamesStream = Stream_<v1::PgnBatch>;

    async fn download_games(&self, request: Request<v1::JobId>) -> Result<Response<Self::DownloadGamesStream>, Status> {
        let caller = client_of(&request)?;
        let id = request.into_inner().job_id;
        let stream = self
            .0
            .unit_bytes(id, Stored::Games)?
            .map(|r| r.map(|(_, bytes)| v1::PgnBatch { pgn: String::from_utf8_lossy(&bytes).into_owned() }));
        Ok(Response::new(self.0.holding(holder(&caller), Box::pin(stream))?))
    }

    type StreamTrainingDataStream = Stream_<v1::TrainingChunk>;

    async fn stream_training_data(
        &self,
        request: Request<v1::TrainingDataRequest>,
    ) -> Result<Response<Self::StreamTrainingDataStream>, Status> {
        let caller = client_of(&request)?;
        let request = request.into_inner();
        let stream = self
            .0
            .unit_bytes_except(request.job_id, Stored::Chunks, request.present_units)?
            .map(|r| r.map(|(unit, chunk)| v1::TrainingChunk { unit, chunk }));
        Ok(Response::new(self.0.holding(holder(&caller), Box::pin(stream))?))
    }

    async fn add_net(&self, request: Request<v1::AddNetRequest>) -> Result<Response<v1::Net>, Status> {
        let caller = client_of(&request)?;
        let request = request.into_inner();
        let sha256 = request.artifact.as_ref().map(|a| a.sha256.as_str()).unwrap_or_default();
        check_hash(sha256).map_err(|e| Status::invalid_argument(format!("artifact: {e}")))?;
        let indexed = self.0.storage.artifact(sha256).await.map_err(|e| Status::unavailable(e.to_string()))?;
        // The registry's lineages are our engine's nets: one of another engine is no
        // generation of them.
        if let (Some(artifact), Some((_, kind, _))) = (&request.artifact, &indexed)
            && kind == "net"
        {
            self.0.our_net("artifact", artifact).await?;
        }
        Ok(Response::new(self.0.nets.add(&request, indexed, &self.0.scheduler, &caller).await?))
    }

    async fn set_net_test(&self, request: Request<v1::SetNetTestRequest>) -> Result<Response<v1::Net>, Status> {
        let caller = client_of(&request)?;
        let request = request.into_inner();
        Ok(Response::new(self.0.nets.set_test(request.net_id, request.test_job_id, &self.0.scheduler, &caller).await?))
    }

    async fn list_net_files(
        &self,
        request: Request<v1::ListNetFilesRequest>,
    ) -> Result<Response<v1::ListNetFilesReply>, Status> {
        client_of(&request)?;
        let indexed = self
            .0
            .storage
            .artifacts_of_kind("net", MAX_NET_FILES_LISTED)
            .await
            .map_err(|e| Status::unavailable(e.to_string()))?;
        let mut naming = self.0.scheduler.jobs_naming_artifacts();
        let files = indexed
            .into_iter()
            .map(|row| v1::NetFile {
                job_ids: naming.remove(&row.sha256).unwrap_or_default(),
                artifact: Some(v1::ArtifactRef { sha256: row.sha256, name: row.name, size: row.size }),
                uploader: row.uploader,
                uploaded_ms: row.uploaded_ms,
            })
            .collect();
        Ok(Response::new(v1::ListNetFilesReply { files }))
    }

    async fn list_nets(&self, request: Request<v1::ListNetsRequest>) -> Result<Response<v1::ListNetsReply>, Status> {
        client_of(&request)?;
        let lineage = request.into_inner().lineage;
        Ok(Response::new(v1::ListNetsReply { nets: self.0.nets.list(&lineage, &self.0.scheduler) }))
    }
}

/// Whose places a client's downloads take: its token's.
fn holder(caller: &crate::access::caller::Caller) -> String {
    format!("token {}", caller.token_id)
}
