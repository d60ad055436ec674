//! The dashboard: web pages, the JSON API behind them, their live stream and the
//! Prometheus metrics, served by axum on the gRPC port.
//!
//! One port, not two: the dashboard shares the gRPC services' TLS, connection caps and
//! address, so that an operator configures, secures and firewalls one endpoint, and
//! `xq local` has one address to print. Requests tell themselves apart by path (gRPC's
//! are `/xq.v1.Worker/...` and `/xq.v1.Client/...`), so the two cost each other nothing.
//!
//! Layout: [`api`] answers the JSON API from the same code as the gRPC client API
//! (the same messages, serialised); [`live`] fans job changes out to the pages'
//! server-sent event streams; [`assets`] holds the pages, built into the binary.

pub mod api;
mod assets;
pub mod error;
mod live;
pub mod session;
pub mod submit;

use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::Response;
use axum::routing::{get, post};

use crate::api::admission::Admission;
use crate::api::grpc::Shared;

/// Who may read the dashboard.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ReadAccess {
    /// Anyone who reaches the port (the pages and API hold no secrets).
    #[default]
    Open,
    /// Only holders of a client token, sent as a bearer token or held by a session
    /// ([`session`]). Actions need the bearer token, or the session with its CSRF token.
    Token,
}

/// What every handler sees.
#[derive(Clone)]
pub struct Dashboard {
    pub shared: Shared,
    pub read: ReadAccess,
    /// Whether the session cookie is marked Secure (the dashboard is served over TLS).
    pub secure_cookies: bool,
    live: live::Live,
}

/// The dashboard's routes, with `/metrics`; requests are timed into the metrics.
pub fn routes(shared: Shared, read: ReadAccess, secure_cookies: bool) -> Router {
    let live = live::Live::start(shared.scheduler.clone());
    let state = Dashboard { shared, read, secure_cookies, live };
    Router::new()
        .route("/", get(assets::page))
        .route("/tests/{id}", get(assets::page))
        .route("/tests/{id}/pairs/{unit}", get(assets::page))
        .route("/workers", get(assets::page))
        .route("/contributors", get(assets::page))
        .route("/login", get(assets::page))
        .route("/signup", get(assets::page))
        .route("/users/{name}", get(assets::page))
        .route("/sprt", get(assets::page))
        .route("/nets", get(assets::page))
        .route("/tournaments", get(assets::page))
        .route("/tournaments/{id}", get(assets::page))
        .route("/assets/{name}", get(assets::asset))
        .route("/api/v1/jobs", get(api::list_jobs))
        .route("/api/v1/jobs/{id}", get(api::job))
        .route("/api/v1/jobs/{id}/history", get(api::history))
        .route("/api/v1/jobs/{id}/games.pgn", get(api::games))
        .route("/api/v1/jobs/{id}/verification", get(api::verification))
        .route(
            "/api/v1/jobs/{id}/verification.jsonl",
            get(|state, headers, path| api::verification_lines(state, headers, path, false)),
        )
        .route(
            "/api/v1/jobs/{id}/parting.pgn",
            get(|state, headers, path| api::verification_lines(state, headers, path, true)),
        )
        .route("/api/v1/jobs/{id}/pairs", get(api::pairs))
        .route("/api/v1/jobs/{id}/pairs/{unit}", get(api::pair))
        .route("/api/v1/artifacts", post(submit::upload))
        .route("/api/v1/tests", post(submit::create_test))
        .route("/api/v1/jobs/{id}/stop", post(api::stop))
        .route("/api/v1/jobs/{id}/priority", post(api::priority))
        .route("/api/v1/workers", get(api::workers))
        .route("/api/v1/contributors", get(api::contributors))
        .route("/api/v1/session", get(session::current).post(session::log_in).delete(session::log_out))
        .route("/api/v1/signup", post(session::sign_up))
        .route("/api/v1/users/{name}", get(session::user_page))
        .route("/api/v1/worker-keys", post(session::create_worker_key))
        .route("/api/v1/workers/{id}/retire", post(session::retire_machine))
        .route("/api/v1/nets", get(api::nets))
        .route("/api/v1/tournaments", get(api::tournaments))
        .route("/api/v1/tournaments/{id}", get(api::tournament))
        .route("/api/v1/tournaments/{id}/games.pgn", get(api::tournament_games))
        .route("/api/v1/sprt", get(api::sprt))
        .route("/api/v1/events", get(live::events))
        .route("/metrics", get(api::metrics))
        .layer(axum::middleware::map_response(nosniff))
        .with_state(state)
}

/// Every answer of the dashboard, the JSON API and its downloads included, is only what
/// its content type says: no browser sniffs a PGN or a JSON body into a page (review of
/// 2026-11-28, F13; the pages and assets had it alone).
async fn nosniff(mut response: Response) -> Response {
    let nosniff = axum::http::HeaderValue::from_static("nosniff");
    response.headers_mut().insert(axum::http::header::X_CONTENT_TYPE_OPTIONS, nosniff);
    response
}

/// Puts the dashboard and the gRPC services into one router: unknown paths get a
/// 404 that says so (tonic's own fallback would answer a browser with a gRPC status),
/// every request, gRPC or HTTP, passes `admission` before any of its work, and each is
/// timed into the metrics (a refused one too, counted by its refusal).
pub fn with_grpc(
    dashboard: Router,
    grpc: tonic::service::Routes,
    shared: &Shared,
    admission: Arc<Admission>,
) -> Router {
    grpc.into_axum_router()
        .merge(dashboard)
        .fallback(api::not_found)
        .layer(axum::middleware::from_fn_with_state(admission, crate::api::admission::admit))
        .layer(axum::middleware::from_fn_with_state(shared.metrics.clone(), observe))
}

/// The label of requests that name no gRPC method and no route of the dashboard.
pub const UNMATCHED: &str = "unmatched";

/// The label a request is timed under: its gRPC method, its dashboard route (`{id}`
/// left as such), or [`UNMATCHED`]. Only names fixed in advance become labels: anyone
/// may send any path before authentication, and a label per path grew the metrics
/// without bound (3,000 made-up `/xq.v1.Worker/...` paths added 17 MB).
fn label(request: &Request) -> &str {
    let path = request.uri().path();
    if let Some(method) = xq_proto::GRPC_METHODS.iter().find(|&&method| method == path) {
        return method;
    }
    match request.extensions().get::<MatchedPath>() {
        // A route with a wildcard (a gRPC service's `/xq.v1.Worker/{*rest}`) matches
        // made-up paths too.
        Some(route) if !route.as_str().contains("{*") => route.as_str(),
        _ => UNMATCHED,
    }
}

/// Times a request into the metrics under its gRPC method or HTTP route, and counts
/// it as refused when it fails: by its gRPC status (sent in the headers of an error
/// reply) or its HTTP status.
async fn observe(State(metrics): State<Arc<crate::metrics::Metrics>>, request: Request, next: Next) -> Response {
    let method = label(&request).to_owned();
    let start = Instant::now();
    let response = next.run(request).await;
    let grpc_status = response.headers().get("grpc-status").and_then(|v| v.to_str().ok()).and_then(|v| v.parse().ok());
    let refusal = match grpc_status {
        Some(0) => None,
        Some(code) => Some(format!("{:?}", tonic::Code::from_i32(code))),
        None if response.status().is_client_error() || response.status().is_server_error() => {
            Some(response.status().as_u16().to_string())
        }
        None => None,
    };
    metrics.observe(&method, start.elapsed(), refusal.as_deref());
    response
}
