//! The workers' service: registration, heartbeats, leases, reports and downloads.

use crate::api::grpc::auth::worker_of;
use crate::api::grpc::downloads::read_slice;
use crate::api::grpc::{Stream_, WorkerApi};
use crate::storage::artifacts::check_hash;
use tonic::{Request, Response, Status};
use xq_proto::v1;

/// The bytes of a download's piece: an HTTP/2 stream's first window. Pieces are read as
/// the worker takes them, so a stream it leaves unread holds at most one (four pieces
/// of 1 MiB read ahead a stream let 1,000 unread streams take 3.5 GB: review of
/// 2026-11-28, F2).
const DOWNLOAD_PIECE_BYTES: u64 = 64 << 10;

#[tonic::async_trait]
impl v1::worker_server::Worker for WorkerApi {
    async fn register(&self, request: Request<v1::RegisterRequest>) -> Result<Response<v1::RegisterReply>, Status> {
        let worker = worker_of(&request)?;
        let capabilities = crate::scheduler::registration::check_registration(request.into_inner())
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        self.0.scheduler.register(worker, capabilities).await?;
        let config = &self.0.scheduler.config;
        Ok(Response::new(v1::RegisterReply {
            worker_id: worker,
            heartbeat_seconds: config.heartbeat.as_secs().max(1) as u32,
            lease_seconds: config.lease_ttl.as_secs() as u32,
        }))
    }

    async fn heartbeat(&self, request: Request<v1::HeartbeatRequest>) -> Result<Response<v1::HeartbeatReply>, Status> {
        let worker = worker_of(&request)?;
        let leases = request.into_inner().lease_ids;
        if leases.len() > 1024 {
            return Err(Status::invalid_argument("more than 1024 leases"));
        }
        let cancelled_lease_ids = self.0.scheduler.heartbeat(worker, &leases);
        Ok(Response::new(v1::HeartbeatReply { cancelled_lease_ids }))
    }

    async fn lease(&self, request: Request<v1::LeaseRequest>) -> Result<Response<v1::LeaseReply>, Status> {
        let worker = worker_of(&request)?;
        self.0.check_reserve()?;
        let concurrency = request.into_inner().concurrency;
        if let Some(release) = self.0.scheduler.required_release(worker) {
            return Ok(Response::new(v1::LeaseReply { lease: None, required_release: Some(release) }));
        }
        let lease = self.0.scheduler.lease(worker, concurrency).await?;
        Ok(Response::new(v1::LeaseReply { lease, required_release: None }))
    }

    async fn report_pairs(
        &self,
        request: Request<v1::ReportPairsRequest>,
    ) -> Result<Response<v1::ReportReply>, Status> {
        let worker = worker_of(&request)?;
        let report = request.into_inner();
        let lease_id = report.lease_id;
        let reply = self.pairs_report(worker, report).await;
        self.counting_refusals(worker, lease_id, reply)
    }

    async fn upload_chunk(
        &self,
        request: Request<v1::UploadChunkRequest>,
    ) -> Result<Response<v1::ReportReply>, Status> {
        let worker = worker_of(&request)?;
        let upload = request.into_inner();
        let lease_id = upload.lease_id;
        let reply = self.chunk_report(worker, upload).await;
        self.counting_refusals(worker, lease_id, reply)
    }

    async fn report_verification(
        &self,
        request: Request<v1::VerificationReport>,
    ) -> Result<Response<v1::ReportReply>, Status> {
        let worker = worker_of(&request)?;
        let report = request.into_inner();
        let lease_id = report.lease_id;
        let reply = self.verification_report(worker, report).await;
        self.counting_refusals(worker, lease_id, reply)
    }

    async fn report_failure(&self, request: Request<v1::FailureReport>) -> Result<Response<v1::FailureReply>, Status> {
        let worker = worker_of(&request)?;
        let report = request.into_inner();
        let job_stopped = self.0.scheduler.report_failure(worker, report.lease_id, &report).await?;
        Ok(Response::new(v1::FailureReply { job_stopped }))
    }

    type DownloadStream = Stream_<v1::ArtifactPiece>;

    async fn download(&self, request: Request<v1::DownloadRequest>) -> Result<Response<Self::DownloadStream>, Status> {
        let worker = worker_of(&request)?;
        let sha256 = request.into_inner().sha256;
        check_hash(&sha256).map_err(|e| Status::invalid_argument(e.to_string()))?;
        if self.0.storage.artifact(&sha256).await.map_err(|e| Status::unavailable(e.to_string()))?.is_none() {
            return Err(Status::not_found(format!("no artifact {sha256}")));
        }
        let path = self.0.artifacts.path(&sha256).map_err(|e| Status::invalid_argument(e.to_string()))?;
        let length = tokio::fs::metadata(&path).await.map_err(|e| Status::unavailable(e.to_string()))?.len();
        // A piece is read when the worker asks for it, from an offset (an artifact never
        // changes): a stream left unread holds no open file and at most one piece.
        let pieces = futures_util::stream::unfold(0, move |offset| {
            let path = path.clone();
            async move {
                if offset >= length {
                    return None;
                }
                let size = DOWNLOAD_PIECE_BYTES.min(length - offset);
                Some(match read_slice(path, offset, size).await {
                    Ok(data) => (Ok(v1::ArtifactPiece { data, ..Default::default() }), offset + size),
                    Err(e) => (Err(Status::unavailable(e.to_string())), length),
                })
            }
        });
        Ok(Response::new(self.0.holding(format!("worker {worker}"), Box::pin(pieces))?))
    }
}
