//! Admission: which requests the coordinator takes on, decided before any of their work.
//! Every request on the one port (gRPC, the dashboard, `/metrics`) passes here first.
//!
//! Two defences. A bound on requests in flight: past it a request is refused at once,
//! not queued, since a queue only turns an overload into latency for everyone and
//! memory for the attacker. And token buckets: a request with a token in force is
//! counted against its token (workers share an address: a NAT, a relay, the fleet
//! bench's loopback), one without a token (or with a made-up, revoked or expired one)
//! against its address. Admins' tokens are not counted: they can already stop every
//! job and revoke every token, and they provision fleets (thousands of worker tokens at
//! once). Requests from this machine's own addresses are not counted by address unless
//! asked: they are the operator's tools, or a reverse proxy speaking for many clients
//! (which should limit them itself, since here they would share one bucket).
//!
//! A refusal is retryable and says when: gRPC `UNAVAILABLE` (busy) or
//! `RESOURCE_EXHAUSTED` (over a rate), which the worker retries with backoff; HTTP 503
//! or 429 with `Retry-After`. A refused report did nothing, so its resend counts once.
//!
//! The buckets' maps are bounded ([`AdmissionLimits::tracked`]): an attacker with many
//! addresses must not grow them without end. A bucket not used while half the bound's
//! worth of others were is dropped, and comes back full: a flood gains from that only
//! from more addresses than the bound, and against those the bound in flight holds.

use std::collections::HashMap;
use std::hash::Hash;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::access::hosts::host;
use crate::access::streams::client_address;
use crate::access::tokens::{Principal, Role, bearer, token_hash};
use crate::api::http::error::ApiError;
use crate::scheduler::Scheduler;

/// A sustained rate and the burst allowed above it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rate {
    /// Requests a second, on average.
    pub per_second: f64,
    /// Requests at once after a quiet spell (at least 1).
    pub burst: u32,
}

impl Rate {
    /// `per_second` with bursts of `burst`; none when `per_second` is 0 (no limit).
    pub fn new(per_second: f64, burst: u32) -> Option<Rate> {
        (per_second > 0.0).then_some(Rate { per_second, burst: burst.max(1) })
    }
}

/// What [`Admission`] lets through.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdmissionLimits {
    /// Requests worked on at once; more are refused with `UNAVAILABLE` or 503.
    pub in_flight: usize,
    /// Each token's rate (admins' excepted); none: unlimited.
    pub per_token: Option<Rate>,
    /// Each address's rate for requests without a token in force; none: unlimited.
    pub per_address: Option<Rate>,
    /// Whether addresses of this machine are held to `per_address` too.
    pub limit_loopback: bool,
    /// The most buckets kept of each kind (tokens, addresses).
    pub tracked: usize,
}

/// The default bound on requests in flight: the fleet bench's 20,000 workers each with
/// a report outstanding while the database stalls, with room to spare. The bound is
/// for floods, which the connection caps alone let hold 16,000 x 1,024 requests.
pub const IN_FLIGHT: usize = 32_768;

/// The default rate of a token: an honest worker sends a few requests a second (a
/// 256-core one at short time controls, dozens), so 200 a second is far above it while
/// costing the coordinator about 2% of what it serves; the burst covers a worker's
/// catch-up after an outage and the fleet bench's closed-loop reference (about 600
/// requests a token).
pub const TOKEN_RATE: Rate = Rate { per_second: 200.0, burst: 2_000 };

/// The default rate of an address without a token: a person's page loads and a
/// Prometheus scrape, with room for an office behind one NAT.
pub const ADDRESS_RATE: Rate = Rate { per_second: 100.0, burst: 1_000 };

/// The default number of buckets kept of each kind: about 10 MB at most.
pub const TRACKED: usize = 65_536;

impl Default for AdmissionLimits {
    /// For a public fleet.
    fn default() -> Self {
        AdmissionLimits {
            in_flight: IN_FLIGHT,
            per_token: Some(TOKEN_RATE),
            per_address: Some(ADDRESS_RATE),
            limit_loopback: false,
            tracked: TRACKED,
        }
    }
}

/// Why a request was refused before any of its work.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum Refusal {
    /// The bound on requests in flight (its value) was reached.
    #[error("the coordinator is already working on {0} requests, its most; try again shortly")]
    Busy(usize),
    /// The request's token has spent its burst; one more is there after `wait`.
    #[error("this token's requests are over its rate of {per_second} a second; try again in {:.1} s", .wait.as_secs_f64())]
    TokenRate { per_second: f64, wait: Duration },
    /// The request's address, without a token in force, has spent its burst.
    #[error(
        "requests without a token from {address} are over their rate of {per_second} a second; \
         try again in {:.1} s", .wait.as_secs_f64()
    )]
    AddressRate { address: IpAddr, per_second: f64, wait: Duration },
}

impl Refusal {
    /// The gRPC status: both codes are ones the worker retries.
    pub fn status(&self) -> tonic::Status {
        match self {
            Refusal::Busy(_) => tonic::Status::unavailable(self.to_string()),
            Refusal::TokenRate { .. } | Refusal::AddressRate { .. } => {
                tonic::Status::resource_exhausted(self.to_string())
            }
        }
    }

    /// How long the client should wait: when its bucket holds a request again, or a
    /// second for a busy coordinator (requests in flight end within milliseconds).
    pub fn retry_after(&self) -> Duration {
        match self {
            Refusal::Busy(_) => Duration::from_secs(1),
            Refusal::TokenRate { wait, .. } | Refusal::AddressRate { wait, .. } => *wait,
        }
    }

    /// The answer: a gRPC status to a gRPC call, else the JSON API's error (503 or 429)
    /// with `Retry-After` in whole seconds, rounded up.
    pub fn into_response(self, grpc: bool) -> Response {
        if grpc {
            return self.status().into_http();
        }
        let seconds = self.retry_after().as_secs_f64().ceil().max(1.0) as u64;
        let mut response = ApiError::from(self.status()).into_response();
        response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        response
    }
}

/// Up to `burst` requests at once, refilled at `per_second`.
#[derive(Clone, Copy, Debug)]
struct Bucket {
    requests: f64,
    updated: Instant,
}

impl Bucket {
    fn full(rate: Rate, now: Instant) -> Self {
        Bucket { requests: f64::from(rate.burst), updated: now }
    }

    /// Takes one request, or says how long until there is one.
    fn take(&mut self, rate: Rate, now: Instant) -> Result<(), Duration> {
        // Callers read the clock before waiting for the lock, so `now` may be a little
        // behind `updated`: that refills nothing, and time never runs back.
        let elapsed = now.saturating_duration_since(self.updated).as_secs_f64();
        self.requests = (self.requests + elapsed * rate.per_second).min(f64::from(rate.burst));
        self.updated = self.updated.max(now);
        if self.requests >= 1.0 {
            self.requests -= 1.0;
            Ok(())
        } else {
            Err(Duration::try_from_secs_f64((1.0 - self.requests) / rate.per_second).unwrap_or(Duration::MAX))
        }
    }
}

/// Buckets by key, at most `most` of them, in two generations: a key used in this
/// generation or the last keeps its bucket; when this one is full it becomes the last
/// and the last is dropped. Each step is O(1), where evicting the least recently used
/// one by one would scan the map on every new key of a flood.
struct Buckets<K> {
    rate: Rate,
    most: usize,
    this: HashMap<K, Bucket>,
    last: HashMap<K, Bucket>,
}

impl<K: Hash + Eq> Buckets<K> {
    fn new(rate: Rate, most: usize) -> Self {
        Buckets { rate, most, this: HashMap::new(), last: HashMap::new() }
    }

    /// Takes one request from `key`'s bucket, or says how long until there is one.
    fn take(&mut self, key: K, now: Instant) -> Result<(), Duration> {
        if let Some(bucket) = self.this.get_mut(&key) {
            return bucket.take(self.rate, now);
        }
        let mut bucket = self.last.remove(&key).unwrap_or_else(|| Bucket::full(self.rate, now));
        let taken = bucket.take(self.rate, now);
        if self.this.len() >= (self.most / 2).max(1) {
            self.last = std::mem::take(&mut self.this);
        }
        self.this.insert(key, bucket);
        taken
    }
}

/// Whom a request is counted against.
enum Caller {
    /// A token in force, by its hash.
    Token(String),
    /// No token in force, by its address (an IPv6 address by its /64: one host
    /// usually holds a whole /64).
    Address(IpAddr),
    /// An admin, or an address not limited.
    Uncounted,
}

/// The admission of every request: the bound on requests in flight and the rates.
pub struct Admission {
    limits: AdmissionLimits,
    in_flight: Arc<Semaphore>,
    tokens: Option<Mutex<Buckets<String>>>,
    addresses: Option<Mutex<Buckets<IpAddr>>>,
    scheduler: Arc<Scheduler>,
}

fn locked<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Admission {
    /// Admission under `limits`, with tokens checked by `scheduler`.
    pub fn new(limits: AdmissionLimits, scheduler: Arc<Scheduler>) -> Arc<Self> {
        Arc::new(Admission {
            limits,
            in_flight: Arc::new(Semaphore::new(limits.in_flight)),
            tokens: limits.per_token.map(|rate| Mutex::new(Buckets::new(rate, limits.tracked))),
            addresses: limits.per_address.map(|rate| Mutex::new(Buckets::new(rate, limits.tracked))),
            scheduler,
        })
    }

    /// A place among the requests in flight for `request` (held until its answer
    /// starts), or why not. The bound is checked first: under a flood it is the
    /// cheapest refusal.
    fn try_admit(&self, request: &Request, now: Instant) -> Result<OwnedSemaphorePermit, Refusal> {
        let place = self.in_flight.clone().try_acquire_owned().map_err(|_| Refusal::Busy(self.limits.in_flight))?;
        match self.caller(request) {
            Caller::Token(hash) => {
                if let (Some(tokens), Some(rate)) = (&self.tokens, self.limits.per_token) {
                    locked(tokens)
                        .take(hash, now)
                        .map_err(|wait| Refusal::TokenRate { per_second: rate.per_second, wait })?;
                }
            }
            Caller::Address(address) => {
                if let (Some(addresses), Some(rate)) = (&self.addresses, self.limits.per_address) {
                    locked(addresses).take(address, now).map_err(|wait| Refusal::AddressRate {
                        address,
                        per_second: rate.per_second,
                        wait,
                    })?;
                }
            }
            Caller::Uncounted => {}
        }
        Ok(place)
    }

    /// Whom `request` counts against. Its token is checked here as the services will
    /// check it again: a token not in force must count against its address, or each
    /// made-up token would bring a full bucket of its own.
    fn caller(&self, request: &Request) -> Caller {
        if self.tokens.is_none() && self.addresses.is_none() {
            return Caller::Uncounted;
        }
        let token = request.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(bearer);
        if let Some(token) = token {
            let hash = token_hash(token);
            match self.scheduler.authenticate_hash(&hash) {
                Ok((Principal::Client(Role::Admin), _)) => return Caller::Uncounted,
                Ok(_) => return Caller::Token(hash),
                Err(_) => {}
            }
        }
        match client_address(request.extensions()).map(|address| address.to_canonical()) {
            Some(address) if self.limits.limit_loopback || !address.is_loopback() => Caller::Address(host(address)),
            _ => Caller::Uncounted,
        }
    }
}

/// The middleware: admits `request` or refuses it before any of its work. The place
/// in flight is held until the answer's head: a stream's body (a live stream, a
/// WatchJob) runs on under the follower caps instead.
pub async fn admit(State(admission): State<Arc<Admission>>, request: Request, next: Next) -> Response {
    let grpc = request
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|content_type| content_type.as_bytes().starts_with(b"application/grpc"));
    let admitted = admission.try_admit(&request, Instant::now());
    match admitted {
        Ok(_place) => next.run(request).await,
        Err(refusal) => refusal.into_response(grpc),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RATE: Rate = Rate { per_second: 2.0, burst: 3 };

    fn at(start: Instant, millis: u64) -> Instant {
        start + Duration::from_millis(millis)
    }

    #[test]
    fn a_bucket_gives_its_burst_then_its_rate_and_says_how_long_to_wait() {
        let start = Instant::now();
        let mut bucket = Bucket::full(RATE, start);
        for _ in 0..3 {
            assert_eq!(bucket.take(RATE, start), Ok(()));
        }
        assert_eq!(bucket.take(RATE, start), Err(Duration::from_millis(500)), "one request per 0.5 s");
        assert_eq!(bucket.take(RATE, at(start, 250)), Err(Duration::from_millis(250)), "half refilled");
        assert_eq!(bucket.take(RATE, at(start, 500)), Ok(()));
        // A long quiet spell refills up to the burst, no further.
        for _ in 0..3 {
            assert_eq!(bucket.take(RATE, at(start, 60_000)), Ok(()));
        }
        assert!(bucket.take(RATE, at(start, 60_000)).is_err());
    }

    #[test]
    fn a_clock_read_before_the_last_take_refills_nothing_and_time_does_not_run_back() {
        let start = Instant::now();
        let mut bucket = Bucket::full(Rate { per_second: 1.0, burst: 1 }, at(start, 1_000));
        assert_eq!(bucket.take(Rate { per_second: 1.0, burst: 1 }, at(start, 1_000)), Ok(()));
        assert_eq!(bucket.take(Rate { per_second: 1.0, burst: 1 }, start), Err(Duration::from_secs(1)));
        assert_eq!(bucket.take(Rate { per_second: 1.0, burst: 1 }, at(start, 2_000)), Ok(()));
    }

    #[test]
    fn a_rate_of_zero_is_no_limit_and_a_burst_is_at_least_one() {
        assert_eq!(Rate::new(0.0, 10), None);
        assert_eq!(Rate::new(5.0, 0), Some(Rate { per_second: 5.0, burst: 1 }));
        let tiny = Rate { per_second: 1e-300, burst: 1 };
        let start = Instant::now();
        let mut bucket = Bucket::full(tiny, start);
        assert_eq!(bucket.take(tiny, start), Ok(()));
        assert_eq!(bucket.take(tiny, start), Err(Duration::MAX), "a wait too long to say is the longest");
    }

    #[test]
    fn keys_have_buckets_of_their_own() {
        let start = Instant::now();
        let mut buckets = Buckets::new(RATE, 100);
        for _ in 0..3 {
            assert!(buckets.take("flood", start).is_ok());
        }
        assert!(buckets.take("flood", start).is_err());
        assert!(buckets.take("other", start).is_ok(), "another key is not held back");
    }

    /// Attack: a flood from ever new keys (addresses of a large IPv6 block) must not
    /// grow the buckets without end.
    #[test]
    fn a_flood_of_new_keys_keeps_the_buckets_within_their_bound() {
        let start = Instant::now();
        let mut buckets = Buckets::new(RATE, 1_000);
        for key in 0..100_000u32 {
            let _ = buckets.take(key, start);
            assert!(buckets.this.len() + buckets.last.len() <= 1_000, "{key}");
        }
    }

    #[test]
    fn a_key_in_use_keeps_its_bucket_while_others_come_and_go() {
        let start = Instant::now();
        let mut buckets = Buckets::new(RATE, 10);
        for _ in 0..3 {
            assert!(buckets.take(u32::MAX, start).is_ok());
        }
        // Four new keys between each of its requests: its bucket stays drained.
        for round in 0..20u32 {
            for other in 0..4 {
                let _ = buckets.take(round * 4 + other, start);
            }
            assert!(buckets.take(u32::MAX, start).is_err(), "round {round}");
        }
        // Left alone while a generation's worth of other keys came, it is dropped and
        // comes back full.
        for other in 1_000..1_010 {
            let _ = buckets.take(other, start);
        }
        assert!(!buckets.this.contains_key(&u32::MAX) && !buckets.last.contains_key(&u32::MAX));
        assert!(buckets.take(u32::MAX, start).is_ok());
    }

    #[test]
    fn refusals_are_retryable_and_say_when() {
        let busy = Refusal::Busy(8);
        assert_eq!(busy.status().code(), tonic::Code::Unavailable);
        let grpc = busy.clone().into_response(true);
        assert_eq!(grpc.headers()["grpc-status"], "14");
        let http = busy.into_response(false);
        assert_eq!(http.status(), 503);
        assert_eq!(http.headers()[header::RETRY_AFTER], "1");
        let limited = Refusal::TokenRate { per_second: 2.0, wait: Duration::from_millis(1_200) };
        assert_eq!(limited.status().code(), tonic::Code::ResourceExhausted);
        assert!(limited.to_string().contains("try again in 1.2 s"), "{limited}");
        let http = limited.into_response(false);
        assert_eq!(http.status(), 429);
        assert_eq!(http.headers()[header::RETRY_AFTER], "2", "rounded up");
    }
}
