//! `xq spsa` and `xq spsa-result`: an SPSA tuning run of an engine's spin options, and
//! its parameters as UCI options, in fishtest's format and as theta's history.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use clap::Args;
use xq_proto::client::{self, Client};
use xq_proto::v1;

use crate::jobs::{after_submit, job_line};
use crate::play::{PlayArgs, bench, options, record_bench};

#[derive(Args)]
pub struct SpsaArgs {
    /// The engine to tune: each pair plays it at theta + c * flip against itself at
    /// theta - c * flip.
    #[arg(long)]
    engine: PathBuf,
    /// Its protocol: uci or ucci.
    #[arg(long, default_value = "uci")]
    protocol: String,
    /// An option the engine is given besides the tuned ones, NAME=VALUE (repeatable).
    #[arg(long = "option")]
    options: Vec<String>,
    /// Check the engine's bench signature on every worker.
    #[arg(long)]
    bench: bool,
    /// A net file for the engine, in its own format: uploaded, and its path passed to
    /// the engine through --net-option on every worker.
    #[arg(long)]
    net: Option<PathBuf>,
    /// The option the engine takes its net's path by.
    #[arg(long, default_value = xq_proto::DEFAULT_NET_OPTION)]
    net_option: String,
    /// The parameters in fishtest's format, a line each: name, start, min, max, c_end,
    /// r_end (each a spin option of the engine).
    #[arg(long, conflicts_with = "tune", required_unless_present = "tune")]
    params: Option<PathBuf>,
    /// Parameters by name, comma-separated, read from the spin options the engine (a
    /// UCI one) declares when it is run here: start at its default, c_end a twentieth
    /// of the range, r_end 0.002.
    #[arg(long)]
    tune: Option<String>,
    /// Game pairs (iterations) of the run.
    #[arg(long)]
    pairs: u64,
    /// The schedule's A as a share of the pairs.
    #[arg(long, default_value_t = xq_stats::spsa::DEFAULT_A_RATIO)]
    a_ratio: f64,
    /// The learning rate's decay.
    #[arg(long, default_value_t = xq_stats::spsa::DEFAULT_ALPHA)]
    alpha: f64,
    /// The perturbation's decay.
    #[arg(long, default_value_t = xq_stats::spsa::DEFAULT_GAMMA)]
    gamma: f64,
    #[command(flatten)]
    play: PlayArgs,
}

/// `xq spsa`: uploads the engine and submits the run.
pub async fn submit(client: &mut Client, args: SpsaArgs) -> anyhow::Result<()> {
    let params = match (&args.params, &args.tune) {
        (Some(path), _) => std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?,
        (None, Some(names)) => {
            let declared = declared_options(&args.engine)?;
            let parameters =
                xq_stats::spsa::tuned_options(&declared, names).with_context(|| args.engine.display().to_string())?;
            xq_stats::spsa::format_parameters(&parameters, None)
        }
        (None, None) => bail!("name the parameters: --params FILE or --tune NAME,NAME"),
    };
    let mut engine = v1::EngineSpec {
        name: args.engine.file_name().map_or("engine".to_owned(), |n| n.to_string_lossy().into_owned()),
        protocol: args.protocol.clone(),
        options: options(&args.options)?,
        net_option: if args.net.is_some() { args.net_option.clone() } else { String::new() },
        ..Default::default()
    };
    if args.bench {
        let reading = bench(&args.engine, &engine, args.net.as_deref())?;
        record_bench(&mut engine, reading);
    }
    engine.binary = Some(client::upload_file(client, &args.engine, "engine").await?);
    if let Some(net) = &args.net {
        engine.net = Some(client::upload_file(client, net, "net").await?);
    }
    let mut test = args.play.test_request(client, Some(engine), None).await?;
    test.pairs = args.pairs;
    test.description = format!("SPSA of {}", args.engine.display());
    let spsa = v1::SpsaSpec { params, a_ratio: args.a_ratio, alpha: args.alpha, gamma: args.gamma };
    let request = v1::CreateSpsaRequest { test: Some(test), spsa: Some(spsa) };
    let id = client::new_request_id();
    let job =
        client::create_named(
            client,
            &request,
            &id,
            |mut client, request| async move { client.create_spsa(request).await },
        )
        .await?;
    after_submit(client, job, args.play.watch).await
}

/// The `option ...` lines a UCI engine declares when asked `uci`, run here before it is
/// uploaded.
fn declared_options(engine: &Path) -> anyhow::Result<Vec<String>> {
    use std::io::Write as _;
    use std::process::Stdio;
    let mut child = std::process::Command::new(engine)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("cannot run {}", engine.display()))?;
    child.stdin.take().expect("piped").write_all(b"uci\nquit\n")?;
    let output = child.wait_with_output()?;
    let text = String::from_utf8_lossy(&output.stdout);
    Ok(text.lines().filter(|line| line.starts_with("option ")).map(str::to_owned).collect())
}

/// Prints an SPSA run's parameters and writes theta's history.
pub async fn result(client: &mut Client, job: u64, csv: Option<PathBuf>, json: Option<PathBuf>) -> anyhow::Result<()> {
    let state = client.get_job(v1::JobId { job_id: job }).await?.into_inner();
    let Some(spsa) = &state.spsa else { bail!("job {job} is a {} job, not an SPSA run", state.kind) };
    out!("{}", job_line(&state));
    let history = client.get_job_history(v1::JobId { job_id: job }).await?.into_inner();
    let history = xq_stats::spsa::History {
        names: spsa.parameters.iter().map(|p| p.name.clone()).collect(),
        samples: history.spsa.into_iter().map(|s| xq_stats::spsa::Sample { pairs: s.pairs, theta: s.theta }).collect(),
    };
    for (path, text) in [(&csv, history.to_csv()), (&json, history.to_json())] {
        if let Some(path) = path {
            std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))?;
        }
    }
    out!("# after {} pairs, as UCI options:", spsa.iterations);
    for p in &spsa.parameters {
        out!("setoption name {} value {}", p.name, xq_stats::spsa::option_value(p.value));
    }
    out!("# in fishtest's format, to go on from here:");
    let parameters: Vec<xq_stats::spsa::Parameter> = spsa
        .parameters
        .iter()
        .map(|p| xq_stats::spsa::Parameter {
            name: p.name.clone(),
            start: p.start,
            min: p.min,
            max: p.max,
            c_end: p.c_end,
            r_end: p.r_end,
        })
        .collect();
    let theta: Vec<f64> = spsa.parameters.iter().map(|p| p.value).collect();
    out!("{}", xq_stats::spsa::format_parameters(&parameters, Some(&theta)).trim_end());
    Ok(())
}
