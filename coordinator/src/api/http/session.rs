//! The dashboard's accounts (#56): sign-up, log-in and log-out, a user's page, and the
//! actions a user takes on it (a worker key, a machine retired).
//!
//! A log-in keeps a new token of the user in a cookie the server sets: HttpOnly (no
//! script on the page reads it, so a script that got onto the page cannot carry it
//! off, where the token the pages kept in `localStorage` could be: finding N20),
//! SameSite=Strict (no other site's page sends it) and Secure over TLS. Every action
//! the cookie authorises must also carry the session's CSRF token in a header: derived
//! from the session's token, given to the pages' script by this origin's API alone,
//! which no other site's page can read. Each log-in makes a new token, whatever cookie
//! came with it, so a session an attacker planted before the log-in (session fixation)
//! is never the one that is logged in. One without a password (the operator's) logs in
//! with a client token instead, which the cookie then holds.

use super::Dashboard;
use super::api::{PathOf, may_act, may_read, require_client};
use crate::api::http::error::ApiError;
use axum::Json;
use axum::extract::State;
use axum::extract::rejection::JsonRejection;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use xq_proto::v1;

/// The session cookie's name.
pub const COOKIE: &str = "xq_session";

/// The header an action carries the session's CSRF token in.
pub const CSRF_HEADER: &str = "x-csrf-token";

/// How long a dashboard log-in lasts.
const SESSION_SECONDS: u64 = 7 * 24 * 3600;

/// A session's cookie value: a log-in's token (`s:`, revoked at log-out) or a pasted
/// client token (`t:`, left in force).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Session<'a> {
    LoggedIn(&'a str),
    Pasted(&'a str),
}

impl<'a> Session<'a> {
    /// The session a request's cookies hold, if any (the first cookie of the name).
    pub fn of(headers: &'a HeaderMap) -> Option<Session<'a>> {
        let value = headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .find_map(|pair| pair.trim().strip_prefix(COOKIE)?.strip_prefix('='))?;
        match value.split_once(':')? {
            ("s", token) if !token.is_empty() => Some(Session::LoggedIn(token)),
            ("t", token) if !token.is_empty() => Some(Session::Pasted(token)),
            _ => None,
        }
    }

    pub fn token(self) -> &'a str {
        match self {
            Session::LoggedIn(token) | Session::Pasted(token) => token,
        }
    }
}

/// The CSRF token of the session whose token is `token`.
pub fn csrf_of(token: &str) -> String {
    hex::encode(Sha256::digest(format!("xq-cluster csrf\n{token}").as_bytes()))
}

/// Whether `headers` carry the CSRF token of `session`, compared in constant time.
pub fn csrf_matches(headers: &HeaderMap, session: Session<'_>) -> bool {
    let Some(sent) = headers.get(CSRF_HEADER).and_then(|v| v.to_str().ok()) else { return false };
    let expected = csrf_of(session.token());
    sent.len() == expected.len() && sent.bytes().zip(expected.bytes()).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
}

/// A `Set-Cookie` value for the session `value` (empty: the cookie removed), Secure
/// when the dashboard is served over TLS or a reverse proxy says it was reached so
/// (`X-Forwarded-Proto: https`: a client that sends it falsely only makes its own
/// cookie stricter).
fn cookie(dashboard: &Dashboard, headers: &HeaderMap, value: &str, max_age: u64) -> HeaderValue {
    let proxied_tls = headers.get("x-forwarded-proto").is_some_and(|proto| proto.as_bytes() == b"https");
    let secure = if dashboard.secure_cookies || proxied_tls { "; Secure" } else { "" };
    let text = format!("{COOKIE}={value}; Path=/; Max-Age={max_age}; HttpOnly; SameSite=Strict{secure}");
    HeaderValue::from_str(&text).expect("tokens are printable ASCII")
}

/// Who a session is, as the pages are told.
#[derive(Debug, Serialize)]
pub struct SessionView {
    /// The user, or "" for a pasted token that is no user's.
    user: String,
    role: String,
    /// To send in the `X-CSRF-Token` header of every action.
    csrf: String,
}

/// A log-in: a name and password, or a client token.
#[derive(Debug, Deserialize)]
pub struct LogIn {
    name: Option<String>,
    password: Option<String>,
    token: Option<String>,
}

fn session_view(dashboard: &Dashboard, token: &str) -> Result<SessionView, ApiError> {
    let caller = require_client(dashboard, Some(token))?;
    let user = dashboard.shared.scheduler.person_of_token(&caller.token_id).unwrap_or_default();
    Ok(SessionView { user, role: caller.role.name().to_owned(), csrf: csrf_of(token) })
}

/// `POST /api/v1/session`: logs in, setting a new session cookie.
pub async fn log_in(
    State(dashboard): State<Dashboard>,
    headers: HeaderMap,
    body: Result<Json<LogIn>, JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(body) = body?;
    let (value, token) = match body {
        LogIn { name: Some(name), password: Some(password), token: None } => {
            let request = v1::LoginRequest { name, password, expires_seconds: SESSION_SECONDS };
            let token = dashboard.shared.log_in(request).await?.token;
            (format!("s:{token}"), token)
        }
        LogIn { name: None, password: None, token: Some(token) } => {
            let token = token.trim().to_owned();
            if token.is_empty() || !token.bytes().all(|b| b.is_ascii_graphic()) {
                return Err(ApiError::bad("a token is printable ASCII".to_owned()));
            }
            require_client(&dashboard, Some(&token))?;
            (format!("t:{token}"), token)
        }
        _ => return Err(ApiError::bad("log in with a name and a password, or with a client token".to_owned())),
    };
    let view = session_view(&dashboard, &token)?;
    let mut response = Json(view).into_response();
    response.headers_mut().insert(header::SET_COOKIE, cookie(&dashboard, &headers, &value, SESSION_SECONDS));
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(response)
}

/// `GET /api/v1/session`: who the session is, with its CSRF token.
pub async fn current(State(dashboard): State<Dashboard>, headers: HeaderMap) -> Result<Response, ApiError> {
    let session =
        Session::of(&headers).ok_or_else(|| ApiError(StatusCode::UNAUTHORIZED, "not logged in".to_owned()))?;
    let mut response = Json(session_view(&dashboard, session.token())?).into_response();
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(response)
}

/// `DELETE /api/v1/session`: logs out (an action: the CSRF token is needed), revoking
/// a log-in's token; the cookie goes either way. A log-out ends the session, not the
/// user's work: tests made through it run on (their user still changes them from
/// another session), where revoking a token as such stops them.
pub async fn log_out(State(dashboard): State<Dashboard>, headers: HeaderMap) -> Result<Response, ApiError> {
    let caller = may_act(&dashboard, &headers)?;
    if let Some(Session::LoggedIn(_)) = Session::of(&headers) {
        dashboard.shared.scheduler.revoke_token(&caller.token_id, &caller.token_id).await?;
    }
    let mut response = StatusCode::NO_CONTENT.into_response();
    response.headers_mut().insert(header::SET_COOKIE, cookie(&dashboard, &headers, "", 0));
    Ok(response)
}

/// A sign-up from the dashboard's page.
#[derive(Debug, Deserialize)]
pub struct SignUp {
    name: String,
    password: String,
}

/// `POST /api/v1/signup`.
pub async fn sign_up(
    State(dashboard): State<Dashboard>,
    body: Result<Json<SignUp>, JsonRejection>,
) -> Result<Json<v1::SignupReply>, ApiError> {
    let Json(SignUp { name, password }) = body?;
    Ok(Json(dashboard.shared.sign_up(v1::SignupRequest { name, password }).await?))
}

/// `GET /api/v1/users/{name}`: a user's page.
pub async fn user_page(
    State(dashboard): State<Dashboard>,
    headers: HeaderMap,
    PathOf(name): PathOf<String>,
) -> Result<Json<v1::UserPage>, ApiError> {
    may_read(&dashboard, &headers)?;
    Ok(Json(dashboard.shared.user_page(&name).await?))
}

/// A worker key's name.
#[derive(Debug, Deserialize)]
pub struct KeyName {
    name: String,
}

/// `POST /api/v1/worker-keys`: a worker key of the caller's user, shown once.
pub async fn create_worker_key(
    State(dashboard): State<Dashboard>,
    headers: HeaderMap,
    body: Result<Json<KeyName>, JsonRejection>,
) -> Result<Json<v1::CreateTokenReply>, ApiError> {
    let caller = may_act(&dashboard, &headers)?;
    let Json(KeyName { name }) = body?;
    Ok(Json(dashboard.shared.create_worker_key(&caller, &name).await?))
}

/// `POST /api/v1/workers/{id}/retire`: retires one of the caller's machines.
pub async fn retire_machine(
    State(dashboard): State<Dashboard>,
    headers: HeaderMap,
    PathOf(id): PathOf<String>,
) -> Result<Json<v1::WorkerInfo>, ApiError> {
    let caller = may_act(&dashboard, &headers)?;
    let worker = id.parse().map_err(|_| ApiError::bad(format!("'{id}' is not a worker number")))?;
    Ok(Json(dashboard.shared.retire_machine(&caller, worker).await?))
}
