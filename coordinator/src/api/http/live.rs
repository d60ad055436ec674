//! The pages' live stream: one task turns job changes into JSON, at most every
//! [`LIVE_INTERVAL`], and fans it out to every follower, so that a thousand open pages
//! cost one look at the scheduler, not a thousand.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{Extensions, HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use tokio::sync::broadcast;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::errors::BroadcastStreamRecvError;
use tokio_stream::wrappers::{BroadcastStream, IntervalStream};

use super::Dashboard;
use super::error::ApiError;
use crate::access::hosts::host;
use crate::access::streams::{UntilOutOfForce, client_address};
use crate::scheduler::Scheduler;

/// The shortest time between two updates: reports arrive by the thousand a second,
/// and a page needs a few updates a second at most.
pub const LIVE_INTERVAL: Duration = Duration::from_millis(250);

/// How often an idle stream carries a comment, so that proxies keep it open.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// The fan-out of job changes.
#[derive(Clone)]
pub struct Live {
    /// Each message: a whole `jobs` event, the JSON array of the jobs that changed,
    /// encoded once and shared by every follower (a thousand followers formatting their
    /// own copy cost the coordinator more than the reports did).
    sender: broadcast::Sender<Bytes>,
}

impl Live {
    /// Starts the task that watches the scheduler; it ends with the scheduler.
    pub fn start(scheduler: Arc<Scheduler>) -> Live {
        let (sender, _) = broadcast::channel(64);
        let fan_out = sender.clone();
        let mut changes = scheduler.watch_all();
        let weak = Arc::downgrade(&scheduler);
        drop(scheduler);
        tokio::spawn(async move {
            let mut seen = HashMap::new();
            if let Some(scheduler) = weak.upgrade() {
                scheduler.changed_jobs(&mut seen);
            }
            while changes.changed().await.is_ok() {
                tokio::time::sleep(LIVE_INTERVAL).await;
                let Some(scheduler) = weak.upgrade() else { return };
                let jobs = scheduler.changed_jobs(&mut seen);
                if fan_out.receiver_count() > 0 && !jobs.is_empty() {
                    // Compact JSON has no line breaks, so it is one `data:` line.
                    let json = serde_json::to_string(&jobs).expect("job views serialise");
                    let _ = fan_out.send(Bytes::from(format!("event: jobs\ndata: {json}\n\n")));
                }
            }
        });
        Live { sender }
    }
}

/// Counts a follower while its stream lives.
struct Following(Arc<crate::metrics::Metrics>);

impl Drop for Following {
    fn drop(&mut self) {
        self.0.live_followers.dec();
    }
}

/// `GET /api/v1/events`: server-sent events named `jobs`, each the JSON array of the
/// jobs that changed; `resync` when this follower fell behind and should reload.
///
/// A follower past the caps (in all, or from its address) is refused with 429. A
/// stream opened with a token ends when the token is revoked or expires, with a last
/// `revoked` event.
pub async fn events(
    State(dashboard): State<Dashboard>,
    headers: HeaderMap,
    extensions: Extensions,
) -> Result<Response, ApiError> {
    let token = super::api::may_read(&dashboard, &headers)?;
    let place = dashboard
        .shared
        .followers
        .take(client_address(&extensions).map(host))
        .map_err(|full| ApiError(StatusCode::TOO_MANY_REQUESTS, full.to_string()))?;
    let metrics = dashboard.shared.metrics.clone();
    metrics.live_followers.inc();
    let following = (Following(metrics), place);
    let updates = BroadcastStream::new(dashboard.live.sender.subscribe()).map(move |message| {
        let _alive = &following;
        match message {
            Ok(frame) => frame,
            Err(BroadcastStreamRecvError::Lagged(_)) => Bytes::from_static(b"event: resync\ndata: {}\n\n"),
        }
    });
    let start = tokio::time::Instant::now() + KEEP_ALIVE;
    let keep_alive = IntervalStream::new(tokio::time::interval_at(start, KEEP_ALIVE))
        .map(|_| Bytes::from_static(b": keep-alive\n\n"));
    let stream = updates.merge(keep_alive).map(Ok::<_, Infallible>);
    let mut response = match token {
        // Open reads need no token; one sent anyway is a read that needed none.
        None => Body::from_stream(stream).into_response(),
        Some(hash) => {
            let end = dashboard.shared.scheduler.out_of_force(hash);
            let last = Ok(Bytes::from_static(b"event: revoked\ndata: {}\n\n"));
            Body::from_stream(UntilOutOfForce::new(stream, end, last)).into_response()
        }
    };
    let response_headers = response.headers_mut();
    response_headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    response_headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    Ok(response)
}
