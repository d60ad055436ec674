//! A self-play lease: each unit's games played and uploaded as one chunk.

use super::artifacts::fetch;
use super::*;
use crate::selfplay::{SelfPlaySettings, load_self_play_net, run_selfplay};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use xq_engine::variant::Variant;
use xq_engine::xiangqi::data::{MAX_RECORDS, read_chunk, read_xiongqi_chunk, write_chunk, write_xiongqi_chunk};
use xq_proto::v1;

/// The unit's chunk files as one chunk.
fn merged_chunk(variant: Variant, paths: &[PathBuf]) -> Result<Vec<u8>, FleetError> {
    let mut bytes = Vec::new();
    for path in paths {
        bytes.push(std::fs::read(path).map_err(FleetError::file("reading the chunk", path))?);
    }
    Ok(match variant {
        Variant::Xiangqi => {
            let records = bytes.iter().map(|b| read_chunk(b)).collect::<Result<Vec<_>, _>>().map_err(play_error)?;
            write_chunk(&records.concat())
        }
        Variant::Xiongqi => {
            let records =
                bytes.iter().map(|b| read_xiongqi_chunk(b)).collect::<Result<Vec<_>, _>>().map_err(play_error)?;
            write_xiongqi_chunk(&records.concat())
        }
    })
}

/// How a self-play spec plays its games (game g seeded `spec.seed + g`), its net
/// fetched and loaded: the settings of a run of the spec's games_per_unit games from
/// game 0, written to the worker's cache.
pub(super) async fn self_play_settings(
    client: &Client,
    settings: &ConnectSettings,
    spec: &v1::SelfPlaySpec,
) -> Result<SelfPlaySettings, FleetError> {
    let variant: Variant = Variant::named_or_xiangqi(&spec.variant).map_err(lease_error)?;
    let network = match &spec.net {
        Some(net) => {
            let path = fetch(client, settings, net, false).await?;
            let name = net.name.clone();
            let loaded = tokio::task::spawn_blocking(move || load_self_play_net(&path, &name, variant));
            Some(loaded.await.map_err(play_error)?.map_err(lease_error)?)
        }
        None => None,
    };
    Ok(SelfPlaySettings {
        play: xq_proto::self_play_games(spec, network).map_err(lease_error)?,
        games: spec.games_per_unit as usize,
        threads: settings.concurrency,
        chunk_records: MAX_RECORDS,
        out: settings.cache.clone(),
        variant,
        pgn_out: None,
    })
}

pub(super) async fn self_play(
    client: &Client,
    settings: &ConnectSettings,
    lease: &v1::Lease,
    spec: v1::SelfPlaySpec,
    stop: Arc<AtomicBool>,
) -> Result<(), FleetError> {
    let base = self_play_settings(client, settings, &spec).await?;
    let variant = base.variant;
    for &unit in &lease.units {
        if stop.load(Ordering::Relaxed) {
            return Ok(());
        }
        let out = settings.cache.join(format!("selfplay-{}-{unit}", lease.lease_id));
        let mut run = SelfPlaySettings { out: out.clone(), ..base.clone() };
        run.play.seed = xq_proto::self_play_unit_seed(&spec, unit);
        let report =
            tokio::task::spawn_blocking(move || run_selfplay(&run)).await.map_err(play_error)?.map_err(play_error)?;
        let chunk = merged_chunk(variant, &report.chunks)?;
        let _ = std::fs::remove_dir_all(&out);
        let request = v1::UploadChunkRequest { lease_id: lease.lease_id, unit, chunk, games: spec.games_per_unit };
        if send_unit("upload", client, request, |mut client, r| async move { client.upload_chunk(r).await }).await? {
            return Ok(());
        }
    }
    Ok(())
}
