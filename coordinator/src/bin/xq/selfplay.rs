//! `xq selfplay` and `xq data`: a self-play job, and its training chunks downloaded.

use std::path::PathBuf;

use clap::Args;
use xq_proto::client::{self, Client};
use xq_proto::v1;

#[derive(Args)]
pub struct SelfplayArgs {
    #[arg(long, default_value_t = 5000)]
    nodes: u64,
    /// Units (batches of games) to produce.
    #[arg(long)]
    units: u64,
    #[arg(long, default_value_t = 16)]
    games_per_unit: u32,
    #[arg(long, default_value_t = 8)]
    random_plies: u32,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    #[arg(long, default_value = "wxf")]
    rules: String,
    #[arg(long, default_value_t = 0)]
    priority: i32,
    /// Share of the fleet among jobs of equal priority, in percent of an equal share
    /// (above 100 an admin's to give; at most 1,000).
    #[arg(long, default_value_t = 100)]
    throughput: u32,
    /// The game: xiangqi or xiongqi.
    #[arg(long, default_value = "xiangqi")]
    variant: String,
    /// The net the engine plays with (uploaded); default: the handcrafted evaluation.
    #[arg(long)]
    net: Option<PathBuf>,
    /// The net lineage whose next generation the games train (lists and the lineage's
    /// page find the job by it); xq-trainer's loop sets its own.
    #[arg(long, default_value = "")]
    lineage: String,
}

/// `xq selfplay`: uploads the net, if any, and creates the job.
pub async fn submit(client: &mut Client, args: SelfplayArgs) -> anyhow::Result<()> {
    let spec = v1::SelfPlaySpec {
        nodes: args.nodes,
        games_per_unit: args.games_per_unit,
        random_plies: args.random_plies,
        seed: args.seed,
        rules: args.rules,
        max_plies: 0,
        variant: args.variant,
        net: match &args.net {
            Some(path) => Some(client::upload_file(client, path, "net").await?),
            None => None,
        },
    };
    let request = v1::CreateSelfPlayRequest {
        spec: Some(spec),
        units: args.units,
        priority: args.priority,
        description: String::new(),
        throughput: args.throughput,
        lineage: args.lineage,
    };
    let id = client::new_request_id();
    let job = client::create_named(client, &request, &id, |mut client, request| async move {
        client.create_self_play(request).await
    })
    .await?;
    out!("job {}: {}", job.job_id, job.summary);
    Ok(())
}

/// `xq data`: downloads the chunks the directory does not hold yet.
pub async fn download_data(client: &mut Client, job: u64, out: PathBuf) -> anyhow::Result<()> {
    let downloaded = client::download_training_data(client, job, &out).await?;
    out!(
        "{} chunks in {} ({} already there)",
        downloaded.written + downloaded.present,
        out.display(),
        downloaded.present
    );
    Ok(())
}
