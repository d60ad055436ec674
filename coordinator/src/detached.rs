//! Requests run to completion even when their client goes away. hyper drops a
//! request's future when its client resets the stream or times out; a report whose
//! write was already queued would then be stored without the scheduler counting it
//! (found by the PostgreSQL outage drill: reports that waited on the database, given up
//! by their client, were committed later and never counted until a restart). Each
//! request runs in a task of its own, which finishes whatever its client does.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Runs each request of the service it wraps in a task of its own.
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

impl<S, R> tower_service::Service<R> for Detached<S>
where
    S: tower_service::Service<R>,
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

    fn call(&mut self, request: R) -> Self::Future {
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

    impl Service<()> for Slow {
        type Response = ();
        type Error = BoxError;
        type Future = Pin<Box<dyn Future<Output = Result<(), BoxError>> + Send>>;
        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
            Poll::Ready(Ok(()))
        }
        fn call(&mut self, (): ()) -> Self::Future {
            let finished = self.0.clone();
            Box::pin(async move {
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                finished.store(true, Ordering::SeqCst);
                Ok(())
            })
        }
    }

    #[tokio::test]
    async fn a_request_given_up_by_its_client_still_finishes() {
        let finished = Arc::new(AtomicBool::new(false));
        let mut service = Detached(Slow(finished.clone()));
        let answer = service.call(());
        drop(answer);
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        assert!(finished.load(Ordering::SeqCst), "the dropped request ran to its end");
        // Without the layer the same request dies with its future.
        let undetached = Arc::new(AtomicBool::new(false));
        drop(Slow(undetached.clone()).call(()));
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        assert!(!undetached.load(Ordering::SeqCst));
    }
}
