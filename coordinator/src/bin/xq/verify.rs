//! `xq verify` and `xq verification`: a rule verification job, its counts, and its
//! games where the rule sets part.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use tokio::io::AsyncWriteExt;
use xq_proto::client::{self, Client};
use xq_proto::v1;

#[derive(Args)]
#[command(group(clap::ArgGroup::new("source").required(true).args(["pgn", "test", "selfplay", "generate"])))]
pub struct VerifyArgs {
    /// The games: a PGN file, uploaded (UTF-8, GBK or Big5; moves in UCI, ICCS, WXF or
    /// Chinese notation).
    #[arg(long)]
    pgn: Option<PathBuf>,
    /// The games: an ended test's stored games (at most 128 MB).
    #[arg(long)]
    test: Option<u64>,
    /// The games: this many fresh self-play games, played by the workers under the
    /// first rule set (few nodes a move make repetitions frequent).
    #[arg(long)]
    selfplay: Option<u64>,
    /// The games: this many rule-hard generated games (revisits by other routes,
    /// checks and chases of one and several pieces, protected and unprotected targets),
    /// the same on every build.
    #[arg(long)]
    generate: Option<u64>,
    /// Generated games: the number of the first (game N is the same on every build; a
    /// later job checks games an earlier one did not).
    #[arg(long, default_value_t = 0, requires = "generate")]
    first: u64,
    /// Check the metamorphic properties of every game too: mirrored, colour-swapped,
    /// started at a repetition's first counted occurrence, and with a detour inserted,
    /// each game must be ruled alike (a broken one is a fault of the arbiter, found
    /// without a reference).
    #[arg(long)]
    metamorphic: bool,
    /// Self-play: search nodes a move.
    #[arg(long, default_value_t = 20, requires = "selfplay")]
    nodes: u64,
    /// Self-play: random plies that open each game.
    #[arg(long, default_value_t = 8, requires = "selfplay")]
    random_plies: u32,
    /// Self-play: game g of the job is seeded seed + g.
    #[arg(long, default_value_t = 1, requires = "selfplay")]
    seed: u64,
    /// Self-play: the net the engine plays with (uploaded); default: the handcrafted
    /// evaluation.
    #[arg(long, requires = "selfplay")]
    net: Option<PathBuf>,
    /// The rule sets to compare, comma-separated (wxf, asian, cxq, computer).
    #[arg(long, default_value = "wxf,asian,cxq")]
    rules: String,
    /// Games a unit (a worker's lease holds whole units); default: the coordinator's,
    /// 1,000, or 250 generated games (most of which part the rule sets, each with a long
    /// line in the unit's report).
    #[arg(long)]
    games_per_unit: Option<u32>,
    #[arg(long, default_value_t = 0)]
    priority: i32,
    #[arg(long, default_value = "")]
    description: String,
    /// Compare the first rule set with a reference too: pyffish (Fairy-Stockfish's
    /// rules, on the workers that have it).
    #[arg(long, default_value = "")]
    reference: String,
}

/// `xq verify`: uploads the PGN or the net, if any, and creates the job.
pub async fn submit(client: &mut Client, args: VerifyArgs) -> anyhow::Result<()> {
    let pgn = match &args.pgn {
        Some(path) => Some(client::upload_file(client, path, "pgn").await?),
        None => None,
    };
    let rules: Vec<String> = args.rules.split(',').map(|r| r.trim().to_owned()).filter(|r| !r.is_empty()).collect();
    let net = match &args.net {
        Some(path) => Some(client::upload_file(client, path, "net").await?),
        None => None,
    };
    let selfplay = args.selfplay.map(|_| v1::SelfPlaySpec {
        nodes: args.nodes,
        random_plies: args.random_plies,
        seed: args.seed,
        rules: rules.first().cloned().unwrap_or_default(),
        net,
        ..v1::SelfPlaySpec::default()
    });
    let request = v1::CreateVerificationRequest {
        pgn,
        test_job_id: args.test.unwrap_or(0),
        rules,
        games_per_unit: args.games_per_unit.unwrap_or(0),
        priority: args.priority,
        description: args.description,
        reference: args.reference,
        selfplay,
        games: args.selfplay.or(args.generate).unwrap_or(0),
        generated: args.generate.is_some(),
        first_generated: args.first,
        metamorphic: args.metamorphic,
    };
    let id = client::new_request_id();
    let job = client::create_named(client, &request, &id, |mut client, request| async move {
        client.create_verification(request).await
    })
    .await?;
    out!("job {}: {} ({} units)", job.job_id, job.summary, job.units_total);
    Ok(())
}

/// `xq verification`: the counts, or the report as JSON lines or PGN.
pub async fn report(client: &mut Client, job: u64, jsonl: Option<PathBuf>, pgn: Option<PathBuf>) -> anyhow::Result<()> {
    if jsonl.is_none() && pgn.is_none() {
        let summary = client.get_verification(v1::JobId { job_id: job }).await?.into_inner();
        out!("{}", verification_text(&summary));
        return Ok(());
    }
    let mut stream = client.download_verification(v1::JobId { job_id: job }).await?.into_inner();
    let path = jsonl.as_ref().or(pgn.as_ref()).expect("one of them");
    let mut file = tokio::fs::File::create(path).await.with_context(|| format!("creating {}", path.display()))?;
    while let Some(batch) = stream.message().await? {
        let text = if pgn.is_some() {
            xq_coordinator::jobs::verification::parting::parting_pgns(&batch.jsonl, job)
        } else {
            batch.jsonl
        };
        file.write_all(text.as_bytes()).await?;
    }
    file.flush().await?;
    Ok(())
}

/// A verification job's counts, as `xq verification` prints them.
fn verification_text(summary: &v1::VerificationSummary) -> String {
    let mut text = format!(
        "verification {}: {} of {} games verified under {}; {} where the rule sets part, {} that could not be replayed",
        summary.job_id,
        summary.games,
        summary.games_total,
        summary.rules.join(", "),
        summary.parting,
        summary.refused
    );
    if summary.metamorphic > 0 {
        text.push_str(&format!("; {} that break a metamorphic property", summary.metamorphic));
    }
    for (title, counts) in [("by kind", &summary.by_kind), ("by articles", &summary.by_articles)] {
        let mut counts: Vec<(&String, &u64)> = counts.iter().collect();
        counts.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        if !counts.is_empty() {
            text.push_str(&format!("\n{title}:"));
            for (name, count) in counts {
                text.push_str(&format!("\n  {count:>8}  {name}"));
            }
        }
    }
    text
}
