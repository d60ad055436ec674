//! The pages' live stream: one task turns job changes into JSON, at most every
//! [`LIVE_INTERVAL`], and fans it out to every follower, so that a thousand open pages
//! cost one look at the scheduler, not a thousand.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use tokio::sync::broadcast;
use tokio_stream::Stream;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::BroadcastStream;
use tokio_stream::wrappers::errors::BroadcastStreamRecvError;

use super::{ApiError, Dashboard};
use crate::scheduler::Scheduler;

/// The shortest time between two updates: reports arrive by the thousand a second,
/// and a page needs a few updates a second at most.
pub const LIVE_INTERVAL: Duration = Duration::from_millis(250);

/// The fan-out of job changes.
#[derive(Clone)]
pub struct Live {
    /// Each message: the JSON array of the jobs that changed.
    sender: broadcast::Sender<Arc<str>>,
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
                    let json = serde_json::to_string(&jobs).expect("job views serialise");
                    let _ = fan_out.send(json.into());
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
pub async fn events(
    State(dashboard): State<Dashboard>,
    headers: HeaderMap,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    super::api::may_read(&dashboard, &headers)?;
    let metrics = dashboard.shared.metrics.clone();
    metrics.live_followers.inc();
    let following = Following(metrics);
    let stream = BroadcastStream::new(dashboard.live.sender.subscribe()).map(move |message| {
        let _alive = &following;
        Ok(match message {
            Ok(json) => Event::default().event("jobs").data(&*json),
            Err(BroadcastStreamRecvError::Lagged(_)) => Event::default().event("resync").data("{}"),
        })
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}
