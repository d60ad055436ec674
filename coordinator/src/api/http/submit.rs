//! Tests made over plain HTTP, for a CI job with nothing but `curl` and a submitter's
//! token: `POST /api/v1/artifacts?kind=engine&name=NAME` with the file as the body
//! stores an artifact (as `xq` uploads one), and `POST /api/v1/tests` with a JSON body
//! naming uploaded artifacts by hash creates a test through the same checks, quotas
//! and approval as a gRPC creation. docs/fleet.md has the commands.

use std::collections::BTreeMap;

use axum::Json;
use axum::body::Body;
use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use serde::Deserialize;
use tokio_stream::StreamExt;
use tonic::Status;
use xq_proto::v1;

use super::Dashboard;
use super::api::may_act;
use crate::api::http::error::ApiError;
use crate::jobs::test::MAX_BUILDS;
use crate::jobs::test::presets;

/// An upload's kind and file name.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UploadQuery {
    kind: String,
    name: String,
}

/// `POST /api/v1/artifacts?kind=...&name=...`: the request's body is the file.
pub async fn upload(
    State(dashboard): State<Dashboard>,
    headers: HeaderMap,
    query: Result<Query<UploadQuery>, QueryRejection>,
    body: Body,
) -> Result<Json<v1::ArtifactRef>, ApiError> {
    let caller = may_act(&dashboard, &headers)?;
    let Query(query) = query?;
    let data = body.into_data_stream().map(|piece| piece.map_err(|e| Status::invalid_argument(e.to_string())));
    Ok(Json(dashboard.shared.store_upload(&caller, &query.kind, &query.name, data).await?))
}

/// A build of an engine for processors with some flags (as Linux names them).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BuildBody {
    cpu_flags: Vec<String>,
    sha256: String,
}

/// One side of a test: an uploaded engine by its hash, and how to run it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineBody {
    /// The build that needs no CPU flags (absent: only `builds`).
    #[serde(default)]
    sha256: Option<String>,
    /// Builds for processors with given flags, best first: a worker plays the first
    /// its processor runs, else `sha256`.
    #[serde(default)]
    builds: Vec<BuildBody>,
    /// Its name in the test (default: new, base).
    #[serde(default)]
    name: Option<String>,
    /// uci (the default) or ucci.
    #[serde(default)]
    protocol: Option<String>,
    /// How it numbers ranks in moves: 0-9 (the default) or 1-10 (Fairy-Stockfish and
    /// Sjaak II over UCI).
    #[serde(default)]
    ranks: String,
    /// The letters it reads in FEN: nb (the default) or he (Sjaak II).
    #[serde(default)]
    fen: String,
    #[serde(default)]
    options: BTreeMap<String, String>,
    /// An uploaded net's hash, passed through `net_option` (default EvalFile).
    #[serde(default)]
    net: Option<String>,
    #[serde(default)]
    net_option: Option<String>,
    /// The bench signature every worker must see (0 or absent: not checked).
    #[serde(default)]
    bench: u64,
    /// Nodes per second of that bench on the machine the time control was chosen for:
    /// workers' clocks are then scaled by the engines' own speed against it.
    #[serde(default)]
    bench_nps: u64,
    /// Its own time control, time odds against the test's `tc`.
    #[serde(default)]
    tc: String,
}

/// A test as a CI job asks for it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestBody {
    new: EngineBody,
    base: EngineBody,
    /// A preset's name (stc, ltc, nonreg): it fills what is left unset.
    #[serde(default)]
    preset: String,
    #[serde(default)]
    tc: String,
    /// The SPRT's bounds (both), or a fixed number of `pairs`.
    #[serde(default)]
    elo0: Option<f64>,
    #[serde(default)]
    elo1: Option<f64>,
    #[serde(default)]
    pairs: u64,
    /// The most pairs of an SPRT (its bounds', or its preset's), instead of the default.
    #[serde(default)]
    max_pairs: Option<u64>,
    /// Draw after this many plies (absent: no limit).
    #[serde(default)]
    max_plies: u32,
    /// An uploaded book's hash (absent: the coordinator's default book).
    #[serde(default)]
    book: Option<String>,
    /// Play every pair from the start position instead of the default book.
    #[serde(default)]
    start_position: bool,
    #[serde(default)]
    rules: String,
    #[serde(default)]
    variant: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    repo: String,
    #[serde(default)]
    new_branch: String,
    #[serde(default)]
    new_commit: String,
    #[serde(default)]
    base_branch: String,
    #[serde(default)]
    base_commit: String,
    #[serde(default)]
    info: String,
    /// Where the test's end is POSTed.
    #[serde(default)]
    notify: String,
}

/// `POST /api/v1/tests`: answers the new test's view.
pub async fn create_test(
    State(dashboard): State<Dashboard>,
    headers: HeaderMap,
    body: Result<Json<TestBody>, JsonRejection>,
) -> Result<Json<v1::Job>, ApiError> {
    let caller = may_act(&dashboard, &headers)?;
    let Json(body) = body?;
    let shared = &dashboard.shared;
    let mut engines = Vec::with_capacity(2);
    for (side, engine) in [("new", body.new), ("base", body.base)] {
        let binary = match &engine.sha256 {
            Some(sha256) => Some(shared.uploaded((side, "engine", "an engine"), sha256).await?),
            None => None,
        };
        let mut builds = Vec::with_capacity(engine.builds.len().min(MAX_BUILDS));
        for build in engine.builds.iter().take(MAX_BUILDS + 1) {
            let binary = shared.uploaded((side, "engine", "an engine"), &build.sha256).await?;
            builds.push(v1::EngineBuild { cpu_flags: build.cpu_flags.clone(), binary: Some(binary) });
        }
        let net = match &engine.net {
            Some(sha256) => Some(shared.uploaded((side, "net", "a net"), sha256).await?),
            None => None,
        };
        engines.push(v1::EngineSpec {
            name: engine.name.unwrap_or_else(|| side.to_owned()),
            binary,
            builds,
            protocol: engine.protocol.unwrap_or_else(|| "uci".to_owned()),
            ranks: engine.ranks,
            fen_letters: engine.fen,
            options: engine.options.into_iter().collect(),
            net_option: if net.is_some() { engine.net_option.unwrap_or_default() } else { String::new() },
            net,
            bench_signature: engine.bench,
            bench_nps: engine.bench_nps,
            time_control: engine.tc,
            ..Default::default()
        });
    }
    let sprt = match (body.elo0, body.elo1) {
        (Some(elo0), Some(elo1)) => Some(v1::SprtSpec { elo0, elo1, alpha: 0.05, beta: 0.05, ..Default::default() }),
        (None, None) => None,
        _ => return Err(ApiError::bad("give both SPRT bounds, elo0 and elo1, or neither")),
    };
    // An SPRT's cap goes where a fixed-length test's number goes; its bounds are then
    // the request's, or its preset's.
    let (sprt, pairs) = match (body.max_pairs, sprt) {
        (None, sprt) => (sprt, body.pairs),
        (Some(_), _) if body.pairs != 0 => return Err(ApiError::bad("give pairs or max_pairs, not both")),
        (Some(0), _) => return Err(ApiError::bad("max_pairs: at least 1")),
        (Some(max), Some(sprt)) => (Some(sprt), max),
        (Some(max), None) if !body.preset.is_empty() => {
            let preset = presets::preset(&body.preset).map_err(|e| ApiError::bad(e.to_string()))?;
            (Some(preset.sprt()), max)
        }
        (Some(_), None) => return Err(ApiError::bad("max_pairs caps an SPRT: give elo0 and elo1, or a preset")),
    };
    let book = match &body.book {
        Some(sha256) => Some(shared.uploaded(("book", "book", "a book"), sha256).await?),
        None => None,
    };
    let source = v1::TestSource {
        repository: body.repo,
        new_branch: body.new_branch,
        new_commit: body.new_commit,
        base_branch: body.base_branch,
        base_commit: body.base_commit,
        info: body.info,
    };
    let base = engines.pop();
    let new = engines.pop();
    let request = v1::CreateTestRequest {
        new_engine: new,
        base_engine: base,
        time_control: body.tc,
        rules: body.rules,
        variant: body.variant,
        book,
        start_position: body.start_position,
        sprt,
        pairs,
        max_plies: body.max_plies,
        description: body.description,
        source: (source != v1::TestSource::default()).then_some(source),
        notify_url: body.notify,
        preset: body.preset,
        ..Default::default()
    };
    Ok(Json(shared.create_test(&caller, None, request).await?))
}
