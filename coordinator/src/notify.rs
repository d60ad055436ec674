//! Webhooks: when a test ends, the coordinator POSTs its view, the JSON the API serves
//! for it, to the address its submitter gave (`xq sprt --notify URL`), so that a CI job
//! or a chat learns the result without polling. A delivery is tried a few times with
//! growing pauses, each within a time limit, and gives up with a warning in the log; a
//! handful at once. Addresses are http or https (checked at creation); https is
//! checked against Mozilla's roots.

use std::sync::Arc;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tokio::sync::{Semaphore, broadcast};
use xq_proto::v1;

use crate::scheduler::Scheduler;

/// How many times a delivery is tried.
pub const ATTEMPTS: u32 = 5;
/// The pause after the first failed try; it doubles after each.
const FIRST_PAUSE: Duration = Duration::from_secs(1);
/// How long one try may take, from connecting to the answer's status.
const TRY_WITHIN: Duration = Duration::from_secs(10);
/// Deliveries under way at once; the others wait their turn.
const AT_ONCE: usize = 8;

type WebClient = Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>;

/// What a webhook receives: the event and the test's view.
pub fn payload(job: &v1::Job) -> String {
    serde_json::json!({ "event": "test.ended", "job": job }).to_string()
}

/// Delivers each ended test's view to its webhook, until the scheduler goes away.
pub async fn deliver_endings(scheduler: Arc<Scheduler>) {
    let mut endings = scheduler.endings();
    let connector =
        hyper_rustls::HttpsConnectorBuilder::new().with_webpki_roots().https_or_http().enable_http1().build();
    let client: WebClient = Client::builder(TokioExecutor::new()).build(connector);
    let turns = Arc::new(Semaphore::new(AT_ONCE));
    loop {
        let job = match endings.recv().await {
            Ok(job) => job,
            Err(broadcast::error::RecvError::Lagged(missed)) => {
                tracing::warn!("{missed} ended tests were not notified: too many ended at once");
                continue;
            }
            Err(broadcast::error::RecvError::Closed) => return,
        };
        let Some(url) = scheduler.notify_url(job.job_id) else { continue };
        let (client, turns, body) = (client.clone(), turns.clone(), payload(&job));
        tokio::spawn(async move {
            let Ok(_turn) = turns.acquire_owned().await else { return };
            deliver(&client, &url, body, job.job_id).await;
        });
    }
}

/// POSTs `body` to `url` until it is taken (a 2xx answer) or [`ATTEMPTS`] tries failed.
async fn deliver(client: &WebClient, url: &str, body: String, job: u64) {
    let mut pause = FIRST_PAUSE;
    for attempt in 1..=ATTEMPTS {
        let request = hyper::Request::post(url)
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .header(hyper::header::USER_AGENT, concat!("xq-coordinator/", env!("CARGO_PKG_VERSION")))
            .body(Full::new(Bytes::from(body.clone())));
        let request = match request {
            Ok(request) => request,
            Err(error) => {
                tracing::warn!(job, "webhook {url}: {error}");
                return;
            }
        };
        let failure = match tokio::time::timeout(TRY_WITHIN, client.request(request)).await {
            Ok(Ok(answer)) if answer.status().is_success() => return,
            Ok(Ok(answer)) => format!("answered {}", answer.status()),
            Ok(Err(error)) => error.to_string(),
            Err(_) => format!("no answer within {TRY_WITHIN:?}"),
        };
        tracing::warn!(job, attempt, "webhook {url}: {failure}");
        if attempt < ATTEMPTS {
            tokio::time::sleep(pause).await;
            pause *= 2;
        }
    }
    tracing::warn!(job, "webhook {url}: given up after {ATTEMPTS} tries");
}
