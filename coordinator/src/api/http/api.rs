//! The JSON API: the gRPC client API's messages, serialised, from the same code
//! (scheduler views, [`Shared`]'s history and game streams). Every refusal is a 4xx
//! with `{"error": "..."}` naming what was wrong.

use super::session::{CSRF_HEADER, Session, csrf_matches};
use super::{Dashboard, ReadAccess};
use crate::access::caller::Caller;
use crate::access::tokens::{Principal, bearer, token_hash};
use crate::api::http::error::ApiError;
use crate::jobs::view::elo_state;
use crate::scheduler::tokens::TokenRefused;
use axum::Json;
use axum::body::Body;
use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{FromRequestParts, Path, Query, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use tokio_stream::StreamExt;
use xq_proto::v1;
use xq_stats::{Model, Sprt};

/// A route's path parameters, refused (a segment that is not UTF-8, say) with a JSON
/// error like every other refusal, where axum's own extractor answers plain text.
pub struct PathOf<T>(pub T);

impl<S: Send + Sync, T: serde::de::DeserializeOwned + Send> FromRequestParts<S> for PathOf<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        match Path::<T>::from_request_parts(parts, state).await {
            Ok(Path(value)) => Ok(PathOf(value)),
            Err(rejection) => Err(ApiError(rejection.status(), format!("the path: {}", rejection.body_text()))),
        }
    }
}

/// Any path the dashboard does not serve.
pub async fn not_found(uri: axum::http::Uri) -> ApiError {
    ApiError(StatusCode::NOT_FOUND, format!("nothing at {}", uri.path()))
}

/// The client token a request carries as a bearer token.
fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(bearer)
}

pub(super) fn require_client(dashboard: &Dashboard, token: Option<&str>) -> Result<Caller, ApiError> {
    let token = token.ok_or_else(|| ApiError(StatusCode::UNAUTHORIZED, "this needs a client token".to_owned()))?;
    match dashboard.shared.scheduler.authenticate(token) {
        Ok((Principal::Client(role), token_id)) => Ok(Caller { role, token_id }),
        Ok((Principal::Worker(_) | Principal::WorkerKey, _)) => {
            Err(ApiError(StatusCode::FORBIDDEN, "this needs a client token".to_owned()))
        }
        Err(refused @ TokenRefused::NotInForce) => Err(ApiError(StatusCode::UNAUTHORIZED, refused.to_string())),
        Err(refused @ TokenRefused::NoRights(_)) => Err(ApiError(StatusCode::FORBIDDEN, refused.to_string())),
    }
}

/// Reads are open, or need a client token (a bearer token, or the session cookie:
/// the pages' live stream cannot send headers), as the server was told; the hash of
/// the token a read needed, if it needed one.
pub(super) fn may_read(dashboard: &Dashboard, headers: &HeaderMap) -> Result<Option<String>, ApiError> {
    match dashboard.read {
        ReadAccess::Open => Ok(None),
        ReadAccess::Token => {
            let token = bearer_token(headers).or_else(|| Session::of(headers).map(Session::token));
            require_client(dashboard, token)?;
            Ok(token.map(token_hash))
        }
    }
}

/// Actions need a client token: a bearer token, or the session cookie with the
/// session's CSRF token in its header (the cookie alone would let any page the user
/// visits act in their name, were it not SameSite).
pub(super) fn may_act(dashboard: &Dashboard, headers: &HeaderMap) -> Result<Caller, ApiError> {
    if let Some(token) = bearer_token(headers) {
        return require_client(dashboard, Some(token));
    }
    match Session::of(headers) {
        Some(session) if csrf_matches(headers, session) => require_client(dashboard, Some(session.token())),
        Some(_) => Err(ApiError(
            StatusCode::FORBIDDEN,
            format!("an action of a session needs its CSRF token in the {CSRF_HEADER} header"),
        )),
        None => Err(ApiError(StatusCode::UNAUTHORIZED, "this needs a client token or a log-in".to_owned())),
    }
}

fn job_id(text: &str) -> Result<u64, ApiError> {
    text.parse().map_err(|_| ApiError::bad(format!("job id '{text}' is not a job number")))
}

fn tournament_id(text: &str) -> Result<u64, ApiError> {
    text.parse().map_err(|_| ApiError::bad(format!("'{text}' is not a tournament number")))
}

/// The jobs list's filters, as query parameters.
#[derive(Debug, Default, Deserialize)]
pub struct JobsQuery {
    state: Option<String>,
    kind: Option<String>,
    q: Option<String>,
    tc: Option<String>,
    engine: Option<String>,
    /// A submitter's token id.
    submitter: Option<String>,
    /// A net lineage's name: the jobs xq-trainer's loop made for it.
    lineage: Option<String>,
    /// "elo0,elo1".
    bounds: Option<String>,
    limit: Option<String>,
}

impl JobsQuery {
    /// The gRPC list request these filters mean.
    pub(super) fn request(self) -> Result<v1::ListJobsRequest, ApiError> {
        let state = self.state.unwrap_or_default();
        if !matches!(state.as_str(), "" | "all" | "running" | "finished" | "stopped") {
            return Err(ApiError::bad(format!("state '{state}': use running, finished, stopped or all")));
        }
        let kind = self.kind.unwrap_or_default();
        if !matches!(kind.as_str(), "" | "all" | "sprt" | "games" | "spsa" | "selfplay" | "verify") {
            return Err(ApiError::bad(format!("kind '{kind}': use sprt, games, spsa, selfplay, verify or all")));
        }
        let limit = match self.limit.as_deref() {
            None | Some("") => 0,
            Some(text) => text
                .parse::<u32>()
                .ok()
                .filter(|&n| n <= 10_000)
                .ok_or_else(|| ApiError::bad(format!("limit '{text}': a number of jobs up to 10000")))?,
        };
        let (elo0, elo1) = match self.bounds.as_deref().map(str::trim).filter(|b| !b.is_empty()) {
            None => (None, None),
            Some(text) => {
                let parsed: Option<Vec<f64>> = text.split(',').map(|p| p.trim().parse::<f64>().ok()).collect();
                match parsed.as_deref() {
                    Some(&[elo0, elo1]) if elo0.is_finite() && elo1.is_finite() => (Some(elo0), Some(elo1)),
                    _ => return Err(ApiError::bad(format!("bounds '{text}': two numbers, elo0,elo1"))),
                }
            }
        };
        let any = |text: String| if text == "all" { String::new() } else { text };
        Ok(v1::ListJobsRequest {
            active_only: false,
            limit,
            state: any(state),
            kind: any(kind),
            search: self.q.unwrap_or_default().trim().to_owned(),
            time_control: self.tc.unwrap_or_default().trim().to_owned(),
            engine: self.engine.unwrap_or_default().trim().to_owned(),
            submitter: self.submitter.unwrap_or_default().trim().to_owned(),
            lineage: self.lineage.unwrap_or_default().trim().to_owned(),
            elo0,
            elo1,
        })
    }
}

pub async fn list_jobs(
    State(dashboard): State<Dashboard>,
    headers: HeaderMap,
    query: Result<Query<JobsQuery>, QueryRejection>,
) -> Result<Json<v1::ListJobsReply>, ApiError> {
    may_read(&dashboard, &headers)?;
    let request = query?.0.request()?;
    Ok(Json(v1::ListJobsReply { jobs: dashboard.shared.scheduler.jobs(&request) }))
}

pub async fn job(
    State(dashboard): State<Dashboard>,
    headers: HeaderMap,
    PathOf(id): PathOf<String>,
) -> Result<Json<v1::Job>, ApiError> {
    may_read(&dashboard, &headers)?;
    let id = job_id(&id)?;
    dashboard.shared.scheduler.job(id).map(Json).ok_or_else(|| ApiError(StatusCode::NOT_FOUND, format!("no job {id}")))
}

pub async fn history(
    State(dashboard): State<Dashboard>,
    headers: HeaderMap,
    PathOf(id): PathOf<String>,
) -> Result<Json<v1::JobHistory>, ApiError> {
    may_read(&dashboard, &headers)?;
    Ok(Json(dashboard.shared.job_history(job_id(&id)?).await?))
}

/// The newest tournaments: the gRPC API's list.
pub async fn tournaments(
    State(dashboard): State<Dashboard>,
    headers: HeaderMap,
) -> Result<Json<v1::ListTournamentsReply>, ApiError> {
    may_read(&dashboard, &headers)?;
    Ok(Json(dashboard.shared.tournaments(0).await?))
}

/// A tournament's standings and pairings: the gRPC API's view.
pub async fn tournament(
    State(dashboard): State<Dashboard>,
    headers: HeaderMap,
    PathOf(id): PathOf<String>,
) -> Result<Json<v1::Tournament>, ApiError> {
    may_read(&dashboard, &headers)?;
    Ok(Json(dashboard.shared.tournament(tournament_id(&id)?).await?))
}

/// A page of pairs: `after` a unit, at most `limit`.
#[derive(Debug, Deserialize)]
pub struct PairsQuery {
    after: Option<String>,
    limit: Option<String>,
}

pub async fn pairs(
    State(dashboard): State<Dashboard>,
    headers: HeaderMap,
    PathOf(id): PathOf<String>,
    query: Result<Query<PairsQuery>, QueryRejection>,
) -> Result<Json<v1::ListPairsReply>, ApiError> {
    may_read(&dashboard, &headers)?;
    let Query(query) = query?;
    let after = match query.after.as_deref().filter(|a| !a.is_empty()) {
        None => None,
        Some(text) => Some(text.parse::<u64>().map_err(|_| ApiError::bad(format!("after '{text}' is not a unit")))?),
    };
    let limit = match query.limit.as_deref().filter(|l| !l.is_empty()) {
        None => 0,
        Some(text) => text
            .parse::<u32>()
            .ok()
            .filter(|&n| n <= 1_000)
            .ok_or_else(|| ApiError::bad(format!("limit '{text}': a number of pairs up to 1000")))?,
    };
    let request = v1::ListPairsRequest { job_id: job_id(&id)?, after, limit };
    Ok(Json(dashboard.shared.pairs(&request).await?))
}

pub async fn pair(
    State(dashboard): State<Dashboard>,
    headers: HeaderMap,
    PathOf((id, unit)): PathOf<(String, String)>,
) -> Result<Json<v1::JudgedPair>, ApiError> {
    may_read(&dashboard, &headers)?;
    let unit = unit.parse::<u64>().map_err(|_| ApiError::bad(format!("unit '{unit}' is not a unit number")))?;
    Ok(Json(dashboard.shared.judged_pair(job_id(&id)?, unit).await?))
}

/// A match's games as one PGN file, streamed as they are read.
pub async fn games(
    State(dashboard): State<Dashboard>,
    headers: HeaderMap,
    PathOf(id): PathOf<String>,
) -> Result<Response, ApiError> {
    may_read(&dashboard, &headers)?;
    let id = job_id(&id)?;
    let units = dashboard.shared.unit_bytes(id, crate::api::grpc::downloads::Stored::Games)?;
    let body = Body::from_stream(units.map(|item| item.map(|(_, bytes)| bytes).map_err(std::io::Error::other)));
    Ok(pgn_download(body, &format!("job-{id}.pgn")))
}

/// A verification job's counts: the gRPC API's summary.
pub async fn verification(
    State(dashboard): State<Dashboard>,
    headers: HeaderMap,
    PathOf(id): PathOf<String>,
) -> Result<Json<v1::VerificationSummary>, ApiError> {
    may_read(&dashboard, &headers)?;
    Ok(Json(dashboard.shared.verification(job_id(&id)?).await?))
}

/// A verification job's report lines (JSON lines), or its parting games as PGN.
pub async fn verification_lines(
    State(dashboard): State<Dashboard>,
    headers: HeaderMap,
    PathOf(id): PathOf<String>,
    as_pgn: bool,
) -> Result<Response, ApiError> {
    may_read(&dashboard, &headers)?;
    let id = job_id(&id)?;
    let lines = dashboard.shared.verification_lines(id)?;
    let body = Body::from_stream(lines.map(move |item| {
        item.map(|lines| if as_pgn { crate::jobs::verification::parting::parting_pgns(&lines, id) } else { lines })
            .map_err(std::io::Error::other)
    }));
    if as_pgn {
        return Ok(pgn_download(body, &format!("verification-{id}.pgn")));
    }
    let disposition = format!("attachment; filename=\"verification-{id}.jsonl\"");
    Ok(([(header::CONTENT_TYPE, "application/jsonl".to_owned()), (header::CONTENT_DISPOSITION, disposition)], body)
        .into_response())
}

/// A tournament's games as one PGN file, the event's tags on each game.
pub async fn tournament_games(
    State(dashboard): State<Dashboard>,
    headers: HeaderMap,
    PathOf(id): PathOf<String>,
) -> Result<Response, ApiError> {
    may_read(&dashboard, &headers)?;
    let id = tournament_id(&id)?;
    let games = dashboard.shared.tournament_games(id).await?;
    let body = Body::from_stream(games.map(|text| text.map_err(std::io::Error::other)));
    Ok(pgn_download(body, &format!("tournament-{id}.pgn")))
}

fn pgn_download(body: Body, name: &str) -> Response {
    let disposition = format!("attachment; filename=\"{name}\"");
    (
        [
            (header::CONTENT_TYPE, "application/x-chess-pgn; charset=utf-8".to_owned()),
            (header::CONTENT_DISPOSITION, disposition),
        ],
        body,
    )
        .into_response()
}

pub async fn stop(
    State(dashboard): State<Dashboard>,
    headers: HeaderMap,
    PathOf(id): PathOf<String>,
) -> Result<Json<v1::Job>, ApiError> {
    let caller = may_act(&dashboard, &headers)?;
    Ok(Json(dashboard.shared.stop_job(&caller, job_id(&id)?).await?))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PriorityBody {
    priority: i32,
}

pub async fn priority(
    State(dashboard): State<Dashboard>,
    headers: HeaderMap,
    PathOf(id): PathOf<String>,
    body: Result<Json<PriorityBody>, JsonRejection>,
) -> Result<Json<v1::Job>, ApiError> {
    let caller = may_act(&dashboard, &headers)?;
    let id = job_id(&id)?;
    let Json(body) = body?;
    Ok(Json(dashboard.shared.set_priority(&caller, id, body.priority).await?))
}

pub async fn workers(
    State(dashboard): State<Dashboard>,
    headers: HeaderMap,
) -> Result<Json<v1::ListWorkersReply>, ApiError> {
    may_read(&dashboard, &headers)?;
    Ok(Json(v1::ListWorkersReply { workers: dashboard.shared.scheduler.workers() }))
}

pub async fn contributors(
    State(dashboard): State<Dashboard>,
    headers: HeaderMap,
) -> Result<Json<v1::ContributorsReply>, ApiError> {
    may_read(&dashboard, &headers)?;
    Ok(Json(dashboard.shared.contributors().await?))
}

/// Which nets: one lineage's, or all.
#[derive(Debug, Deserialize)]
pub struct NetsQuery {
    lineage: Option<String>,
}

pub async fn nets(
    State(dashboard): State<Dashboard>,
    headers: HeaderMap,
    query: Result<Query<NetsQuery>, QueryRejection>,
) -> Result<Json<v1::ListNetsReply>, ApiError> {
    may_read(&dashboard, &headers)?;
    let lineage = query?.0.lineage.unwrap_or_default();
    let shared = &dashboard.shared;
    Ok(Json(v1::ListNetsReply { nets: shared.nets.list(lineage.trim(), &shared.scheduler) }))
}

/// The SPRT calculator's question: bounds, error rates, model, and the counts.
#[derive(Debug, Deserialize)]
pub struct SprtQuery {
    elo0: Option<String>,
    elo1: Option<String>,
    alpha: Option<String>,
    beta: Option<String>,
    model: Option<String>,
    /// Five pair counts, "a,b,c,d,e" (0 to 2 points).
    penta: Option<String>,
    /// Three game counts, "losses,draws,wins".
    trinomial: Option<String>,
}

/// The SPRT calculator's answer.
#[derive(Debug, serde::Serialize)]
pub struct SprtAnswer {
    pub llr: f64,
    pub lower: f64,
    pub upper: f64,
    pub elo: Option<v1::EloState>,
}

fn number(name: &str, text: Option<&str>, default: f64) -> Result<f64, ApiError> {
    match text.map(str::trim).filter(|t| !t.is_empty()) {
        None => Ok(default),
        Some(text) => text
            .parse::<f64>()
            .ok()
            .filter(|n| n.is_finite())
            .ok_or_else(|| ApiError::bad(format!("{name} '{text}' is not a number"))),
    }
}

fn counts(name: &str, text: &str, expected: usize) -> Result<Vec<u64>, ApiError> {
    let counts: Option<Vec<u64>> = text.split(',').map(|c| c.trim().parse::<u64>().ok()).collect();
    let counts = counts
        .filter(|c| c.len() == expected)
        .ok_or_else(|| ApiError::bad(format!("{name} '{text}': {expected} whole numbers, comma-separated")))?;
    if counts.iter().try_fold(0u64, |sum, &c| sum.checked_add(c)).is_none_or(|sum| sum > 1 << 48) {
        return Err(ApiError::bad(format!("{name}: too many games")));
    }
    Ok(counts)
}

pub async fn sprt(
    State(dashboard): State<Dashboard>,
    headers: HeaderMap,
    query: Result<Query<SprtQuery>, QueryRejection>,
) -> Result<Json<SprtAnswer>, ApiError> {
    may_read(&dashboard, &headers)?;
    let Query(query) = query?;
    let model = match query.model.as_deref().unwrap_or("normalized") {
        "normalized" | "" => Model::Normalized,
        "logistic" => Model::Logistic,
        other => return Err(ApiError::bad(format!("model '{other}': use normalized or logistic"))),
    };
    let sprt = Sprt::new(
        number("elo0", query.elo0.as_deref(), 0.0)?,
        number("elo1", query.elo1.as_deref(), 2.0)?,
        number("alpha", query.alpha.as_deref(), 0.05)?,
        number("beta", query.beta.as_deref(), 0.05)?,
        model,
    )
    .map_err(|e| ApiError::bad(e.to_string()))?;
    let results = match (&query.penta, &query.trinomial) {
        (Some(penta), None) => counts("penta", penta, 5)?,
        (None, Some(trinomial)) => counts("trinomial", trinomial, 3)?,
        _ => return Err(ApiError::bad("give either penta (5 pair counts) or trinomial (losses,draws,wins)")),
    };
    let state = sprt.state(&results).map_err(|e| ApiError::bad(e.to_string()))?;
    // Draws are known from game counts only; a pair's half points may be two draws or a win and a loss.
    let draw_ratio =
        if results.len() == 3 { results[1] as f64 / results.iter().sum::<u64>().max(1) as f64 } else { 0.0 };
    let elo = elo_state(&results, draw_ratio);
    Ok(Json(SprtAnswer { llr: state.llr, lower: state.lower, upper: state.upper, elo }))
}

/// Prometheus' scrape, with the gauges read off the scheduler first.
pub async fn metrics(State(dashboard): State<Dashboard>, headers: HeaderMap) -> Result<Response, ApiError> {
    may_read(&dashboard, &headers)?;
    dashboard.shared.scheduler.refresh_gauges();
    let text = dashboard.shared.metrics.encode();
    Ok(([(header::CONTENT_TYPE, crate::metrics::CONTENT_TYPE)], text).into_response())
}
