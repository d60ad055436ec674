//! The dashboard under the fleet's load: browsers following the live stream while the
//! fleet reports, and the pages' requests timed once the games are stored.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

type HttpClient = Client<HttpConnector, Empty<Bytes>>;

fn client() -> HttpClient {
    Client::builder(TokioExecutor::new()).build_http()
}

/// Browsers following `/api/v1/events`, each on a connection of its own, counting the
/// updates they receive until dropped.
pub struct Followers {
    pub connected: usize,
    events: Arc<AtomicU64>,
    tasks: tokio::task::JoinSet<()>,
}

impl Followers {
    pub async fn start(runtime: &tokio::runtime::Handle, address: SocketAddr, count: usize) -> Followers {
        let events = Arc::new(AtomicU64::new(0));
        let mut tasks = tokio::task::JoinSet::new();
        let (ready, mut connected) = tokio::sync::mpsc::channel(count.max(1));
        for _ in 0..count {
            let (events, ready) = (events.clone(), ready.clone());
            tasks.spawn_on(
                async move {
                    let url = format!("http://{address}/api/v1/events").parse().expect("a URL");
                    let response = match client().get(url).await {
                        Ok(response) if response.status() == 200 => response,
                        other => {
                            let _ = ready.send(Err(format!("{other:?}"))).await;
                            return;
                        }
                    };
                    let _ = ready.send(Ok(())).await;
                    let mut body = response.into_body();
                    while let Some(Ok(frame)) = body.frame().await {
                        if let Some(data) = frame.data_ref() {
                            let updates = data.windows(11).filter(|w| w == b"event: jobs").count();
                            events.fetch_add(updates as u64, Ordering::Relaxed);
                        }
                    }
                },
                runtime,
            );
        }
        let mut followers = Followers { connected: 0, events, tasks };
        for _ in 0..count {
            match connected.recv().await {
                Some(Ok(())) => followers.connected += 1,
                Some(Err(error)) => panic!("a follower could not connect: {error}"),
                None => break,
            }
        }
        followers
    }

    /// Updates received so far, over all followers.
    pub fn events(&self) -> u64 {
        self.events.load(Ordering::Relaxed)
    }

    pub fn stop(mut self) {
        self.tasks.abort_all();
    }
}

/// Times `rounds` sequential GETs of each of `paths`; prints p50 and p95 per path and
/// for a whole page (the sum of its requests in a round).
pub async fn time_pages(address: SocketAddr, pages: &[(&str, Vec<String>)], rounds: usize) {
    let client = client();
    for (page, paths) in pages {
        let mut totals = Vec::with_capacity(rounds);
        let mut each: Vec<Vec<f64>> = vec![Vec::with_capacity(rounds); paths.len()];
        for _ in 0..rounds {
            let mut total = 0.0;
            for (index, path) in paths.iter().enumerate() {
                let start = Instant::now();
                let url = format!("http://{address}{path}").parse().expect("a URL");
                let response = client.get(url).await.expect("the page's request");
                assert_eq!(response.status(), 200, "{path}");
                let bytes = response.into_body().collect().await.expect("a body").to_bytes();
                assert!(!bytes.is_empty(), "{path}");
                let ms = start.elapsed().as_secs_f64() * 1000.0;
                each[index].push(ms);
                total += ms;
            }
            totals.push(total);
        }
        for (path, times) in paths.iter().zip(&mut each) {
            let (p50, p95) = percentiles(times);
            println!("  {path}: p50 {p50:.2} ms, p95 {p95:.2} ms");
        }
        let (p50, p95) = percentiles(&mut totals);
        println!("{page}: all its requests p50 {p50:.2} ms, p95 {p95:.2} ms ({rounds} loads)");
    }
}

fn percentiles(times: &mut [f64]) -> (f64, f64) {
    times.sort_by(f64::total_cmp);
    let at = |p: f64| times[((times.len() - 1) as f64 * p) as usize];
    (at(0.5), at(0.95))
}
