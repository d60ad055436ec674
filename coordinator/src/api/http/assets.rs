//! The pages and their assets, built into the binary so that the dashboard works
//! offline and always matches its server. Our own files are `dashboards/web/`; uPlot
//! (the charts) comes from the npm registry at the version `package-lock.json` pins,
//! installed by `scripts/setup` (the build says so when it is missing).

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::api::PathOf;
use super::error::ApiError;

macro_rules! web_file {
    ($path:literal) => {
        include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../dashboards/web/", $path))
    };
}

/// One HTML shell for every page: the script draws the page its path names.
const INDEX: &[u8] = web_file!("index.html");

/// (name, content type, bytes) of every asset.
const ASSETS: &[(&str, &str, &[u8])] = &[
    ("app.js", "text/javascript; charset=utf-8", web_file!("app.js")),
    ("style.css", "text/css; charset=utf-8", web_file!("style.css")),
    ("uPlot.iife.min.js", "text/javascript; charset=utf-8", web_file!("node_modules/uplot/dist/uPlot.iife.min.js")),
    ("uPlot.min.css", "text/css; charset=utf-8", web_file!("node_modules/uplot/dist/uPlot.min.css")),
];

/// Scripts, styles and data only from this server: a description or an engine name
/// that slipped into the page as markup still could not run or load anything.
const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; \
     img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

/// `/`, `/tests/{id}`, `/workers`, `/nets`, `/sprt`: the page shell (it holds no data; the API
/// it calls checks who may read).
pub async fn page() -> Response {
    let mut response = ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], INDEX).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CONTENT_SECURITY_POLICY));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

/// `/assets/{name}`: only the names above; nothing is read from disk.
pub async fn asset(PathOf(name): PathOf<String>) -> Result<Response, ApiError> {
    let (_, content_type, bytes) = ASSETS
        .iter()
        .find(|(known, _, _)| *known == name)
        .ok_or_else(|| ApiError(StatusCode::NOT_FOUND, format!("no asset {name}")))?;
    Ok(([(header::CONTENT_TYPE, *content_type), (header::CACHE_CONTROL, "no-cache")], *bytes).into_response())
}
