//! The gRPC contract (`xq/v1/cluster.proto`): the Worker service that workers call and
//! the Client service that users and tools call. The coordinator and the worker meet
//! only here.

pub mod builds;
pub mod client;
pub mod failure;
pub mod process;
pub mod release;
pub mod speed;

/// Version 1 of the contract.
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod v1 {
    tonic::include_proto!("xq.v1");
}

/// Every gRPC method of the contract, by the path it is called at
/// (`/xq.v1.Worker/Lease`): read from the contract by the build script, so that a new
/// method is listed the day it is added.
pub const GRPC_METHODS: &[&str] = include!(concat!(env!("OUT_DIR"), "/grpc_methods.rs"));

/// The gRPC metadata key under which a client names a creation request (a test, an
/// SPSA run, a self-play or verification job, a tournament): the coordinator makes one
/// job or event per name and answers a retry with it, so that a retry after a lost
/// answer makes no twin.
pub const REQUEST_ID_METADATA: &str = "xq-request-id";

/// The violation timing a match spec or test request names: empty is the default,
/// the threefold repetition; else the engine's own names (`threefold`, `after-warning`).
pub fn violation_timing(text: &str) -> Result<xq_engine::xiangqi::rules::ViolationTiming, String> {
    if text.is_empty() { Ok(xq_engine::xiangqi::rules::ViolationTiming::Threefold) } else { text.parse() }
}

/// The largest message either side accepts, in bytes: big enough for an artifact
/// piece or a report of many game pairs, small enough that one request cannot
/// exhaust memory.
pub const MAX_MESSAGE_BYTES: usize = 8 * 1024 * 1024;

/// The size of the pieces artifacts are streamed in.
pub const ARTIFACT_PIECE_BYTES: usize = 1024 * 1024;

/// A self-play game's length when its spec leaves `max_plies` at 0.
pub const DEFAULT_SELF_PLAY_PLIES: u32 = 400;

/// The most plies a self-play game of `spec` lasts: what a worker plays and what the
/// coordinator bounds a unit's records by.
pub fn self_play_plies(spec: &v1::SelfPlaySpec) -> u32 {
    if spec.max_plies == 0 { DEFAULT_SELF_PLAY_PLIES } else { spec.max_plies }
}

/// The rule set refereeing a self-play spec's games (default WXF).
pub fn self_play_rules(
    spec: &v1::SelfPlaySpec,
) -> Result<xq_engine::xiangqi::rules::RuleSet, xq_engine::xiangqi::rules::UnknownRuleSet> {
    if spec.rules.is_empty() { Ok(xq_engine::xiangqi::rules::RuleSet::Wxf) } else { spec.rules.parse() }
}

/// How a self-play spec's Xiangqi games are played, with `network` its net loaded (if
/// it names one): what a worker plays for a verification job and what the coordinator
/// plays again to check the worker's report.
pub fn self_play_games(
    spec: &v1::SelfPlaySpec,
    network: Option<std::sync::Arc<xq_engine::xiangqi::nnue::Network>>,
) -> Result<xq_engine::xiangqi::selfplay::PlaySettings, xq_engine::xiangqi::rules::UnknownRuleSet> {
    Ok(xq_engine::xiangqi::selfplay::PlaySettings {
        nodes: spec.nodes,
        random_plies: spec.random_plies as usize,
        seed: spec.seed,
        rules: self_play_rules(spec)?,
        max_plies: self_play_plies(spec) as usize,
        network,
    })
}

/// The seed of the first game of a self-play spec's unit `unit`: game g of the unit is
/// seeded `spec.seed + unit * games_per_unit + g`, so that no two units share a game.
/// What a worker plays and what the coordinator plays the openings of again to check
/// the unit's chunk.
pub fn self_play_unit_seed(spec: &v1::SelfPlaySpec, unit: u64) -> u64 {
    spec.seed.wrapping_add(unit.wrapping_mul(u64::from(spec.games_per_unit)))
}

/// The most records a unit of `spec` can hold: each game records at most one
/// position per ply.
pub fn self_play_unit_records(spec: &v1::SelfPlaySpec) -> u64 {
    u64::from(spec.games_per_unit) * u64::from(self_play_plies(spec))
}

/// How far past its clock an engine may go before it loses on time, when a lease
/// leaves `time_margin_ms` at 0.
pub const DEFAULT_TIME_MARGIN_MS: u32 = 100;

/// The time margin of a match lease: what the worker plays by and the coordinator
/// checks time forfeits against.
pub fn time_margin(spec: &v1::MatchSpec) -> std::time::Duration {
    let ms = if spec.time_margin_ms == 0 { DEFAULT_TIME_MARGIN_MS } else { spec.time_margin_ms };
    std::time::Duration::from_millis(u64::from(ms))
}

/// A test's adjudication settings as the engine library's, where worker and
/// coordinator apply them.
pub fn adjudication(settings: Option<&v1::Adjudication>) -> xq_engine::adjudication::Adjudication {
    let Some(a) = settings else { return Default::default() };
    xq_engine::adjudication::Adjudication {
        draw: (a.draw_plies > 0).then_some((a.draw_move_number, a.draw_plies as usize, a.draw_score)),
        resign: (a.resign_moves > 0).then_some((a.resign_moves as usize, a.resign_score)),
    }
}

/// The engine library's adjudication settings as a test's; `None` when both are off.
pub fn adjudication_message(settings: xq_engine::adjudication::Adjudication) -> Option<v1::Adjudication> {
    if settings.draw.is_none() && settings.resign.is_none() {
        return None;
    }
    let (draw_move_number, draw_plies, draw_score) = settings.draw.unwrap_or_default();
    let (resign_moves, resign_score) = settings.resign.unwrap_or_default();
    Some(v1::Adjudication {
        draw_move_number,
        draw_plies: u32::try_from(draw_plies).unwrap_or(u32::MAX),
        draw_score,
        resign_moves: u32::try_from(resign_moves).unwrap_or(u32::MAX),
        resign_score,
    })
}

/// Adds `authorization: Bearer <token>` to every call of a client.
#[derive(Clone, Debug)]
pub struct BearerToken(tonic::metadata::MetadataValue<tonic::metadata::Ascii>);

impl BearerToken {
    /// The interceptor for `token`; `None` if the token is not printable ASCII.
    pub fn new(token: &str) -> Option<Self> {
        format!("Bearer {}", token.trim()).parse().ok().map(BearerToken)
    }
}

impl tonic::service::Interceptor for BearerToken {
    fn call(&mut self, mut request: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        request.metadata_mut().insert("authorization", self.0.clone());
        Ok(request)
    }
}

/// The option an engine takes its net's path by when its spec names none: Stockfish's
/// family's and ours.
pub const DEFAULT_NET_OPTION: &str = "EvalFile";

/// The options `engine` is set up with, in the order they are set: its own by name,
/// then its net's path (`net`, where this machine keeps the file) through its net
/// option. The submitter's bench and every worker's set them alike, so that the bench
/// signatures compare.
pub fn engine_options(engine: &v1::EngineSpec, net: Option<&std::path::Path>) -> Vec<(String, String)> {
    let mut options: Vec<(String, String)> = engine.options.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    options.sort();
    if let Some(net) = net {
        let option = if engine.net_option.is_empty() { DEFAULT_NET_OPTION } else { &engine.net_option };
        options.push((option.to_owned(), net.display().to_string()));
    }
    options
}

/// The most threads an engine of a test may ask for.
pub const MAX_ENGINE_THREADS: u32 = 1024;

/// The threads `engine` searches with: its `Threads` option (UCI names are
/// case-insensitive), 1 when unset; `Err` naming the value when it is not 1 to
/// [`MAX_ENGINE_THREADS`].
pub fn engine_threads(engine: &v1::EngineSpec) -> Result<u32, String> {
    match engine.options.iter().find(|(name, _)| name.eq_ignore_ascii_case("threads")) {
        None => Ok(1),
        Some((name, value)) => value
            .trim()
            .parse::<u32>()
            .ok()
            .filter(|threads| (1..=MAX_ENGINE_THREADS).contains(threads))
            .ok_or_else(|| format!("option {name}={value}: threads are 1 to {MAX_ENGINE_THREADS}")),
    }
}

/// The cores one game of a match holds: its engines think in turn, so the larger of
/// their threads (an unreadable count as 1: the coordinator refuses it at submission).
pub fn game_threads<'a>(engines: impl IntoIterator<Item = &'a v1::EngineSpec>) -> u32 {
    engines.into_iter().map(|engine| engine_threads(engine).unwrap_or(1)).max().unwrap_or(1)
}

#[cfg(test)]
mod threads_tests {
    use super::*;

    #[test]
    fn a_game_holds_the_threads_of_its_larger_engine() {
        let engine = |options: &[(&str, &str)]| v1::EngineSpec {
            options: options.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            ..Default::default()
        };
        let (one, four) = (engine(&[("Hash", "64")]), engine(&[("threads", " 4")]));
        assert_eq!((engine_threads(&one), engine_threads(&four)), (Ok(1), Ok(4)));
        assert_eq!(game_threads([&one, &four]), 4);
        for bad in ["0", "many", "1025", "-2"] {
            let error = engine_threads(&engine(&[("Threads", bad)])).unwrap_err();
            assert!(error.contains(&format!("Threads={bad}")), "{error}");
        }
    }
}
