//! A lease's engine set up on this worker: its build fetched, its net beside it in the
//! sandbox, its bench signature checked against the test's and its speed here measured.

use super::artifacts::fetch;
use super::*;
use crate::engine_process::{EngineConfig, Protocol};
use crate::sandbox::command_for;
use xq_engine::bench::{Reading, SignatureError};
use xq_engine::xiangqi::fen::{FenFlavour, UnknownFenFlavour};
use xq_engine::xiangqi::notation::{Dialect, UnknownDialect};
use xq_proto::failure::FailureKind;
use xq_proto::v1;

/// The engine of `spec` ready to start, with its bench on this worker where the test
/// asks for one: a signature to check, or (`measure_speed`) a speed to scale its
/// clocks by.
pub(super) async fn engine_config(
    client: &Client,
    settings: &ConnectSettings,
    spec: &v1::EngineSpec,
    measure_speed: bool,
) -> Result<(EngineConfig, Option<Reading>), FleetError> {
    let engine_error = |reason: String| FleetError::Engine { name: spec.name.clone(), reason };
    let binary = spec.binary.as_ref().ok_or_else(|| engine_error("no binary".to_owned()))?;
    let download = || failed(FailureKind::Download, &spec.name);
    let command = fetch(client, settings, binary, true).await.map_err(download())?;
    let mut sandbox = settings.sandbox.clone();
    let net = match &spec.net {
        Some(net) => Some(fetch(client, settings, net, false).await.map_err(download())?),
        None => None,
    };
    if let (Some(sandbox), Some(net)) = (&mut sandbox, &net) {
        sandbox.read_only.push(net.clone());
    }
    let options = xq_proto::engine_options(spec, net.as_deref());
    let mut bench = None;
    if spec.bench_signature != 0 || (measure_speed && spec.bench_nps != 0) {
        // Of the engine as submitted: an SPSA probe's values are left out.
        let options: Vec<(String, String)> =
            options.iter().filter(|(name, _)| !spec.probe_options.contains(name)).cloned().collect();
        // With the test's options and net set, as the submitter's bench had them.
        let protocol = if spec.protocol.is_empty() { "uci" } else { spec.protocol.as_str() };
        let commands = xq_engine::bench::bench_commands(protocol, &options);
        let arguments = if commands.is_some() { Vec::new() } else { vec!["bench".to_owned()] };
        let command = command_for(sandbox.as_ref(), &command, &arguments).map_err(|e| FleetError::Failed {
            kind: FailureKind::Start,
            engine: spec.name.clone(),
            detail: e.to_string(),
        })?;
        let program = spec.name.clone();
        let timeout = xq_engine::bench::BENCH_TIMEOUT;
        let reading =
            tokio::task::spawn_blocking(move || xq_engine::bench::bench_from(command, commands, &program, timeout))
                .await
                .map_err(play_error)?
                .map_err(|e| {
                    let kind = match e {
                        SignatureError::Run { .. } => FailureKind::Start,
                        _ => FailureKind::Bench,
                    };
                    FleetError::Failed { kind, engine: spec.name.clone(), detail: e.to_string() }
                })?;
        if spec.bench_signature != 0 && reading.signature != spec.bench_signature {
            return Err(FleetError::Failed {
                kind: FailureKind::Bench,
                engine: spec.name.clone(),
                detail: format!(
                    "bench signature {} on this worker, the test expects {}",
                    reading.signature, spec.bench_signature
                ),
            });
        }
        bench = Some(reading);
    }
    let protocol = if spec.protocol == "ucci" { Protocol::Ucci } else { Protocol::Uci };
    let dialect = match spec.ranks.as_str() {
        "" => Dialect::default(),
        ranks => ranks.parse().map_err(|e: UnknownDialect| engine_error(e.to_string()))?,
    };
    let fen_flavour = match spec.fen_letters.as_str() {
        "" => FenFlavour::default(),
        letters => letters.parse().map_err(|e: UnknownFenFlavour| engine_error(e.to_string()))?,
    };
    let name = spec.name.clone();
    Ok((
        EngineConfig { name, command, protocol, dialect, fen_flavour, options, sandbox, ..EngineConfig::default() },
        bench,
    ))
}
