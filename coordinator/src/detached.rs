//! Requests that store something run to their end even when their client goes away;
//! every other request dies with its client.
//!
//! hyper drops a request's future when its client resets the stream or times out. A
//! report whose write was already queued would then be stored without the scheduler
//! counting it (found by the PostgreSQL outage drill: reports that waited on the
//! database, given up by their client, were committed later and never counted until a
//! restart). Every request that writes and then acts in memory on what it wrote has
//! the same cut: a creation cut between its commit and its entry into the scheduler
//! leaves a job stored and not scheduled, which a retry under the same request id makes
//! a second time (the index of request ids is in memory); a revocation, a stop or a
//! standing cut while its change waits for room in the writer's queue holds in memory
//! and is undone by the next restart; an upload cut between keeping its file and
//! indexing it leaves a file no quota counts. So those run in a task of their own:
//! the workers' reports, and the clients' creations, uploads and admin changes, all
//! behind a token.
//!
//! Everything else is cancelled: reads (the expensive ones a stranger would start and
//! give up by the thousand), streams, the dashboard's pages, made-up paths. And three
//! worker calls that write: a lease is made in memory before it is stored, so a lease
//! cut on the way is an active one no worker plays, reclaimed at its expiry like one
//! whose reply was lost; a registration likewise, and a worker registers at each start
//! and whenever it is told it is unregistered; a heartbeat changes memory only.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use axum::http::{Method, Request};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The gRPC methods run to their end (see the module's comment): each stores what it
/// is sent before it acts on it in memory.
pub const DETACHED_METHODS: &[&str] = &[
    "/xq.v1.Worker/ReportPairs",
    "/xq.v1.Worker/UploadChunk",
    "/xq.v1.Worker/ReportVerification",
    "/xq.v1.Worker/ReportFailure",
    "/xq.v1.Client/UploadArtifact",
    "/xq.v1.Client/CreateTest",
    "/xq.v1.Client/CreateSelfPlay",
    "/xq.v1.Client/CreateSpsa",
    "/xq.v1.Client/CreateVerification",
    "/xq.v1.Client/CreateTournament",
    "/xq.v1.Client/StopJob",
    "/xq.v1.Client/SetPriority",
    "/xq.v1.Client/ModifyJob",
    "/xq.v1.Client/ResumeJob",
    "/xq.v1.Client/CloneTest",
    "/xq.v1.Client/ApproveJob",
    "/xq.v1.Client/StopTournament",
    "/xq.v1.Client/CreateWorkerToken",
    "/xq.v1.Client/SetWorkerStanding",
    "/xq.v1.Client/CreateToken",
    "/xq.v1.Client/RevokeToken",
    "/xq.v1.Client/AddNet",
    "/xq.v1.Client/SetNetTest",
];

/// Whether `request` runs to its end whatever its client does: a method of
/// [`DETACHED_METHODS`], or an action of the dashboard's API (a stop, a priority: its
/// only POSTs, the same calls as the gRPC ones).
fn detached<B>(request: &Request<B>) -> bool {
    let path = request.uri().path();
    DETACHED_METHODS.contains(&path) || (request.method() == Method::POST && path.starts_with("/api/"))
}

/// Runs the requests of the service it wraps that store something in a task of their
/// own ([`DETACHED_METHODS`]); the others are cancelled when their client goes away.
#[derive(Clone, Copy, Debug, Default)]
pub struct DetachedLayer;

impl<S> tower_layer::Layer<S> for DetachedLayer {
    type Service = Detached<S>;
    fn layer(&self, inner: S) -> Detached<S> {
        Detached(inner)
    }
}

/// See [`DetachedLayer`].
#[derive(Clone, Debug)]
pub struct Detached<S>(S);

impl<S, B> tower_service::Service<Request<B>> for Detached<S>
where
    S: tower_service::Service<Request<B>>,
    S::Future: Send + 'static,
    S::Response: Send + 'static,
    S::Error: Into<BoxError> + Send + 'static,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.0.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        if !detached(&request) {
            let answer = self.0.call(request);
            return Box::pin(async move { answer.await.map_err(Into::into) });
        }
        let task = tokio::spawn(self.0.call(request));
        Box::pin(async move {
            match task.await {
                Ok(answer) => answer.map_err(Into::into),
                Err(failed) if failed.is_panic() => std::panic::resume_unwind(failed.into_panic()),
                Err(cancelled) => Err(cancelled.into()),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use tower_service::Service;

    #[derive(Clone)]
    struct Slow(Arc<AtomicBool>);

    impl Service<Request<()>> for Slow {
        type Response = ();
        type Error = BoxError;
        type Future = Pin<Box<dyn Future<Output = Result<(), BoxError>> + Send>>;
        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
            Poll::Ready(Ok(()))
        }
        fn call(&mut self, _: Request<()>) -> Self::Future {
            let finished = self.0.clone();
            Box::pin(async move {
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                finished.store(true, Ordering::SeqCst);
                Ok(())
            })
        }
    }

    /// Whether a request to `path` by `method`, given up at once by its client, ran to
    /// its end anyway.
    async fn finished_when_given_up(method: Method, path: &str) -> bool {
        let finished = Arc::new(AtomicBool::new(false));
        let mut service = Detached(Slow(finished.clone()));
        drop(service.call(Request::builder().method(method).uri(path).body(()).unwrap()));
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        finished.load(Ordering::SeqCst)
    }

    #[tokio::test]
    async fn a_request_given_up_by_its_client_still_finishes() {
        for path in ["/xq.v1.Worker/ReportPairs", "/xq.v1.Client/CreateTest", "/api/v1/jobs/3/stop"] {
            assert!(finished_when_given_up(Method::POST, path).await, "{path}: the dropped request ran to its end");
        }
    }

    #[tokio::test]
    async fn a_read_a_lease_or_a_made_up_path_given_up_by_its_client_is_cancelled() {
        for path in ["/xq.v1.Client/ListJobs", "/xq.v1.Worker/Lease", "/xq.v1.Worker/Made-up", "/metrics"] {
            assert!(!finished_when_given_up(Method::POST, path).await, "{path}: cancelled with its client");
        }
        assert!(!finished_when_given_up(Method::GET, "/api/v1/jobs").await, "a page's read");
    }

    /// A method renamed in the contract would otherwise fall silently out of the list.
    #[test]
    fn every_detached_method_is_in_the_contract() {
        for method in DETACHED_METHODS {
            assert!(xq_proto::GRPC_METHODS.contains(method), "{method}");
        }
    }
}
