//! `xq sprt` and `xq games`: a test of `--new` against `--base`, to an SPRT's decision or
//! a fixed number of games.

use std::path::Path;
use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::Args;
use xq_proto::client::{self, Client};
use xq_proto::v1;

use crate::builds::EngineFiles;
use crate::jobs::after_submit;
use crate::play::{PlayArgs, bench, options, record_bench, talk_setting};

#[derive(Args, Clone)]
pub struct EngineArgs {
    /// The engine under test: FILE, and builds for processors with given CPU flags as
    /// FLAGS=FILE (comma-separated Linux flag names, such as avx2,bmi2), best first
    /// (repeatable). Each worker plays the best build its processor runs; a worker that
    /// runs none (no generic FILE) gets no lease of the test.
    #[arg(long, required = true)]
    pub new: Vec<String>,
    /// The base engine, as --new.
    #[arg(long, required = true)]
    pub base: Vec<String>,
    /// Its protocol: uci or ucci (both engines).
    #[arg(long, default_value = "uci")]
    pub protocol: String,
    /// An option of the new engine, NAME=VALUE (repeatable).
    #[arg(long = "new-option")]
    pub new_options: Vec<String>,
    /// An option of the base engine, NAME=VALUE (repeatable).
    #[arg(long = "base-option")]
    pub base_options: Vec<String>,
    /// How to talk to the new engine, KEY=VALUE (repeatable): protocol=uci|ucci,
    /// ranks=0-9|1-10 (1-10 for Fairy-Stockfish and Sjaak II over UCI), fen=nb|he
    /// (he for Sjaak II).
    #[arg(long = "new-setting")]
    pub new_settings: Vec<String>,
    /// How to talk to the base engine, as --new-setting.
    #[arg(long = "base-setting")]
    pub base_settings: Vec<String>,
    /// A net file for the new engine, in its own format: uploaded, and its path passed
    /// to the engine through --net-option on every worker.
    #[arg(long)]
    pub new_net: Option<PathBuf>,
    /// A net file for the base engine, as --new-net.
    #[arg(long)]
    pub base_net: Option<PathBuf>,
    /// The option both engines take their net's path by.
    #[arg(long, default_value = xq_proto::DEFAULT_NET_OPTION)]
    pub net_option: String,
    /// The new engine's own time control, time odds against --tc (which the base then
    /// plays), of the same kind (both clocks, both nodes, ...); scaled as --tc is.
    #[arg(long)]
    pub new_tc: Option<String>,
    /// The base engine's own time control, as --new-tc.
    #[arg(long)]
    pub base_tc: Option<String>,
    /// Skip the bench check. By default both engines' bench signatures are taken here
    /// and checked on every worker before it plays (they must print "Nodes searched:
    /// N" for `<engine> bench`, or for `bench` on their input after their options and
    /// net are set), so that a build a worker runs differently fails the test with
    /// both signatures instead of playing other games than the author's.
    #[arg(long)]
    pub no_bench: bool,
    #[command(flatten)]
    pub source: SourceArgs,
    /// One of the coordinator's presets (`xq presets`: stc, ltc, nonreg): its time
    /// control, SPRT bounds and adjudication where these flags give none.
    #[arg(long)]
    pub preset: Option<String>,
    #[command(flatten)]
    pub play: PlayArgs,
}

/// What a test tests: its engines' names, where they were built from, and why; shown in
/// lists, on the test's page (with a compare link for a known forge) and in the API.
#[derive(Args, Clone, Default)]
pub struct SourceArgs {
    /// The new engine's name in the test, its games and lists.
    #[arg(long, default_value = "new")]
    pub new_name: String,
    /// The base engine's name.
    #[arg(long, default_value = "base")]
    pub base_name: String,
    /// The repository both engines were built from (its web address).
    #[arg(long)]
    pub repo: Option<String>,
    /// The new engine's branch.
    #[arg(long)]
    pub new_branch: Option<String>,
    /// The new engine's commit.
    #[arg(long)]
    pub new_commit: Option<String>,
    /// The base engine's branch.
    #[arg(long)]
    pub base_branch: Option<String>,
    /// The base engine's commit.
    #[arg(long)]
    pub base_commit: Option<String>,
    /// What the test tests, in words (line breaks allowed).
    #[arg(long)]
    pub info: Option<String>,
    /// When the test ends, its result is POSTed to this http or https address as JSON
    /// ({"event": "test.ended", "job": ...}, the API's view of it).
    #[arg(long)]
    pub notify: Option<String>,
}

impl SourceArgs {
    /// The request's source, when any of it was given.
    fn source(&self) -> Option<v1::TestSource> {
        let text = |value: &Option<String>| value.clone().unwrap_or_default();
        let source = v1::TestSource {
            repository: text(&self.repo),
            new_branch: text(&self.new_branch),
            new_commit: text(&self.new_commit),
            base_branch: text(&self.base_branch),
            base_commit: text(&self.base_commit),
            info: text(&self.info),
        };
        (source != v1::TestSource::default()).then_some(source)
    }
}

#[derive(Args, Clone)]
pub struct SprtArgs {
    #[command(flatten)]
    pub engines: EngineArgs,
    /// The null hypothesis' Elo (default: 0, or the preset's).
    #[arg(long, allow_hyphen_values = true, requires = "elo1")]
    pub elo0: Option<f64>,
    /// The alternative's Elo (default: 2, or the preset's).
    #[arg(long, allow_hyphen_values = true, requires = "elo0")]
    pub elo1: Option<f64>,
    #[arg(long, default_value_t = 0.05)]
    pub alpha: f64,
    #[arg(long, default_value_t = 0.05)]
    pub beta: f64,
    /// normalized (fishtest's default) or logistic.
    #[arg(long, default_value = "normalized")]
    pub model: String,
    /// The most game pairs before the test is stopped undecided (0: 100,000).
    #[arg(long, default_value_t = 0)]
    pub max_pairs: u64,
    /// Test the games (losses, draws, wins) instead of the pairs.
    #[arg(long)]
    pub trinomial: bool,
}

#[derive(Args)]
pub struct GamesArgs {
    #[command(flatten)]
    engines: EngineArgs,
    /// Games to play (even: each opening with both colours).
    #[arg(long)]
    games: u64,
}

/// `xq sprt`: submits the SPRT test, and follows it with `--watch`.
pub async fn sprt(client: &mut Client, args: SprtArgs) -> anyhow::Result<()> {
    let job = submit(client, &args.engines, Some(&args), 0).await?;
    after_submit(client, job, args.engines.play.watch).await
}

/// `xq games`: submits the test of a fixed number of games.
pub async fn games(client: &mut Client, args: GamesArgs) -> anyhow::Result<()> {
    if args.games == 0 || !args.games.is_multiple_of(2) {
        bail!("--games {} must be even and positive: each opening is played with both colours", args.games);
    }
    let job = submit(client, &args.engines, None, args.games / 2).await?;
    after_submit(client, job, args.engines.play.watch).await
}

/// An SPRT's bounds when neither they nor a preset are given: fishtest's short test's.
const DEFAULT_BOUNDS: (f64, f64) = (0.0, 2.0);

/// The SPRT bounds of the coordinator's preset `name`.
async fn preset_bounds(client: &mut Client, name: &str) -> anyhow::Result<(f64, f64)> {
    let presets = client.list_presets(v1::ListPresetsRequest {}).await?.into_inner().presets;
    let names: Vec<&str> = presets.iter().map(|p| p.name.as_str()).collect();
    let preset = presets
        .iter()
        .find(|p| p.name == name)
        .with_context(|| format!("--preset {name}: the coordinator has {}", names.join(", ")))?;
    let sprt = preset.sprt.as_ref().with_context(|| format!("preset {name} names no SPRT"))?;
    Ok((sprt.elo0, sprt.elo1))
}

/// `xq presets`: the coordinator's presets, a line each.
pub async fn list_presets(client: &mut Client) -> anyhow::Result<()> {
    let reply = client.list_presets(v1::ListPresetsRequest {}).await?.into_inner();
    for preset in reply.presets {
        let sprt = preset.sprt.unwrap_or_default();
        let adjudication = preset.adjudication.unwrap_or_default();
        out!(
            "{}: {}, SPRT [{}, {}] {}, draw from move {} after {} plies within {} cp, resign after {} moves \
             past {} cp: {}",
            preset.name,
            preset.time_control,
            sprt.elo0,
            sprt.elo1,
            sprt.model,
            adjudication.draw_move_number,
            adjudication.draw_plies,
            adjudication.draw_score,
            adjudication.resign_moves,
            adjudication.resign_score,
            preset.description
        );
    }
    if !reply.default_book.is_empty() {
        out!(
            "Every preset, and every Xiangqi test naming no book (--book; --no-book: the start position), plays the default book {}.",
            reply.default_book
        );
    }
    Ok(())
}

/// Uploads the engines (and book) and creates the test.
pub async fn submit(
    client: &mut Client,
    args: &EngineArgs,
    sprt: Option<&SprtArgs>,
    pairs: u64,
) -> anyhow::Result<v1::Job> {
    let engine = |files: &EngineFiles, side: &str, opts: &[String], settings: &[String], net: Option<&Path>| {
        let (name, time_control) = match side {
            "new" => (&args.source.new_name, &args.new_tc),
            _ => (&args.source.base_name, &args.base_tc),
        };
        let mut spec = v1::EngineSpec {
            name: name.clone(),
            protocol: args.protocol.clone(),
            options: options(opts)?,
            time_control: time_control.clone().unwrap_or_default(),
            ..Default::default()
        };
        for setting in settings {
            let (key, value) =
                setting.split_once('=').with_context(|| format!("--{side}-setting '{setting}' is not KEY=VALUE"))?;
            talk_setting(&mut spec, key, value).with_context(|| format!("--{side}-setting '{setting}'"))?;
        }
        if net.is_some() {
            spec.net_option = args.net_option.clone();
        }
        if !args.no_bench {
            let reading = files.bench(side, |path| bench(path, &spec, net))?;
            record_bench(&mut spec, reading);
        }
        anyhow::Ok(spec)
    };
    let (new_files, base_files) = (EngineFiles::parse("new", &args.new)?, EngineFiles::parse("base", &args.base)?);
    let new_net = args.new_net.as_deref();
    let base_net = args.base_net.as_deref();
    let mut new = engine(&new_files, "new", &args.new_options, &args.new_settings, new_net)?;
    let mut base = engine(&base_files, "base", &args.base_options, &args.base_settings, base_net)?;
    new_files.upload(client, &mut new).await?;
    base_files.upload(client, &mut base).await?;
    for (spec, net) in [(&mut new, new_net), (&mut base, base_net)] {
        if let Some(net) = net {
            spec.net = Some(client::upload_file(client, net, "net").await?);
        }
    }
    let mut request = args.play.test_request(client, Some(new), Some(base)).await?;
    // What the flags leave unset is the preset's, filled by the coordinator.
    if let Some(preset) = &args.preset {
        request.preset = preset.clone();
        if args.play.tc.is_none() {
            request.time_control.clear();
        }
    }
    request.sprt = match sprt {
        Some(s) => {
            let (elo0, elo1) = match (s.elo0.zip(s.elo1), &args.preset) {
                (Some(bounds), _) => bounds,
                (None, Some(name)) => preset_bounds(client, name).await?,
                (None, None) => DEFAULT_BOUNDS,
            };
            Some(v1::SprtSpec {
                elo0,
                elo1,
                alpha: s.alpha,
                beta: s.beta,
                model: s.model.clone(),
                trinomial: s.trinomial,
            })
        }
        None => None,
    };
    request.pairs = sprt.map_or(pairs, |s| s.max_pairs);
    request.description = format!("{} vs {}", new_files.label(), base_files.label());
    request.source = args.source.source();
    request.notify_url = args.source.notify.clone().unwrap_or_default();
    let id = client::new_request_id();
    Ok(client::create_named(
        client,
        &request,
        &id,
        |mut client, request| async move { client.create_test(request).await },
    )
    .await?)
}
