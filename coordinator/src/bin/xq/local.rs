//! `xq local`: the whole cluster on this machine. Starts a coordinator on the embedded
//! SQLite and workers on loopback, submits an SPRT test (by default our engine with
//! its embedded net against the same engine on its handcrafted evaluation), follows it
//! to its end and prints the result.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use xq_proto::v1;

use crate::connection::{Connection, connect};
use crate::jobs::watch;
use crate::play::PlayArgs;
use crate::test_jobs::{EngineArgs, SourceArgs, SprtArgs, submit};

#[derive(Args)]
pub struct LocalArgs {
    /// The engine under test (default: xq-engine beside xq).
    #[arg(long)]
    new: Option<PathBuf>,
    /// The base engine (default: the same binary; see --base-option).
    #[arg(long)]
    base: Option<PathBuf>,
    /// Options of the new engine, NAME=VALUE.
    #[arg(long = "new-option")]
    new_options: Vec<String>,
    /// Options of the base engine, NAME=VALUE (default, when both engines are the
    /// same binary: "UseNNUE=false", the handcrafted evaluation).
    #[arg(long = "base-option")]
    base_options: Vec<String>,
    #[arg(long, default_value = "uci")]
    protocol: String,
    /// Time control. The default, 10,000 nodes a move, gives both evaluations the same
    /// search: the test measures the net against the handcrafted evaluation, and
    /// decides in a few hundred fast games (262 games, 315 s on 2 cores, 2026-11-26),
    /// where at 1+0.01 the net's slower search hid most of its gain (+41 Elo, 458 games).
    #[arg(long, default_value = "nodes=10000")]
    tc: String,
    #[arg(long, default_value_t = 0.0, allow_hyphen_values = true)]
    elo0: f64,
    #[arg(long, default_value_t = 10.0, allow_hyphen_values = true)]
    elo1: f64,
    #[arg(long, default_value_t = 0.05)]
    alpha: f64,
    #[arg(long, default_value_t = 0.05)]
    beta: f64,
    #[arg(long, default_value = "normalized")]
    model: String,
    /// The most pairs before the test stops undecided.
    #[arg(long, default_value_t = 2000)]
    max_pairs: u64,
    /// Workers to start (each plays one game at a time).
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// Opening book (default: the coordinator's, some 100,000 balanced openings).
    #[arg(long)]
    book: Option<PathBuf>,
    /// The data directory (default: a new one under ~/.cache/xq-cluster/local).
    #[arg(long)]
    data: Option<PathBuf>,
    /// Keep the coordinator running after the test, until Ctrl-C.
    #[arg(long)]
    keep: bool,
}

/// A program installed beside this one.
fn sibling(name: &str) -> anyhow::Result<PathBuf> {
    let me = std::env::current_exe().context("finding this program")?;
    let path = me.parent().context("this program's directory")?.join(name);
    if !path.exists() {
        bail!(
            "{} is missing: build it with `cargo build --release -p xq-engine -p xq-worker -p xq-coordinator`",
            path.display()
        );
    }
    Ok(path)
}

/// A log file in the data directory for a child's output, so that `xq local` prints
/// only its own lines.
fn log_file(data: &Path, name: &str) -> anyhow::Result<std::fs::File> {
    let path = data.join(name);
    std::fs::File::create(&path).with_context(|| format!("creating {}", path.display()))
}

/// A child of `xq local`: its output to `log` in the data directory, without colour
/// codes (a file is not a terminal); it dies with `xq local`.
fn logged_command(program: &Path, data: &Path, log: &str) -> anyhow::Result<Command> {
    let file = log_file(data, log)?;
    let mut command = std::process::Command::new(program);
    command.env("NO_COLOR", "1").stdout(file.try_clone()?).stderr(file);
    // `kill_on_drop` covers an orderly end only. The children are spawned from the
    // main thread, which `block_on` runs.
    xq_proto::process::die_with_parent(&mut command);
    let mut command = Command::from(command);
    command.kill_on_drop(true);
    Ok(command)
}

async fn start_coordinator(data: &Path) -> anyhow::Result<(Child, String)> {
    let mut child = logged_command(&sibling("xq-coordinator")?, data, "coordinator.log")?
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--work-seconds",
            "20",
            "--lease-seconds",
            "20",
            "--heartbeat-seconds",
            "3",
            "--data",
        ])
        .arg(data)
        .stdout(Stdio::piped())
        .spawn()
        .context("starting xq-coordinator")?;
    let stdout = child.stdout.take().context("the coordinator's output")?;
    let mut lines = BufReader::new(stdout).lines();
    let first = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
        .await
        .context("the coordinator did not start within 60 s")??;
    let url = first
        .and_then(|l| l.strip_prefix("listening on ").map(str::to_owned))
        .context("the coordinator did not say where it listens")?;
    // Whatever else it prints goes to its log too, where it would not fail on a closed pipe.
    let mut rest = lines.into_inner();
    let mut log = tokio::fs::File::from_std(
        std::fs::OpenOptions::new().append(true).open(data.join("coordinator.log")).context("the coordinator's log")?,
    );
    tokio::spawn(async move { tokio::io::copy_buf(&mut rest, &mut log).await });
    Ok((child, url))
}

pub async fn run(args: LocalArgs) -> anyhow::Result<()> {
    let data = match &args.data {
        Some(dir) => dir.clone(),
        None => {
            let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("."), PathBuf::from);
            home.join(".cache/xq-cluster/local").join(format!("{}", xq_coordinator::storage::now_ms()))
        }
    };
    std::fs::create_dir_all(&data)?;
    let (coordinator, url) = start_coordinator(&data).await?;
    eprintln!("coordinator at {url}, data and logs (coordinator.log, worker-N.log) in {}", data.display());
    eprintln!("dashboard: {url}/ (the test's live page is {url}/tests/<job>; metrics at {url}/metrics)");
    let connection = Connection {
        coordinator: url.clone(),
        token: None,
        token_file: Some(data.join("client-token")),
        ca_cert: None,
    };
    let mut client = connect(&connection).await?;
    let worker_binary = sibling("xq-worker")?;
    let mut workers = Vec::new();
    for index in 0..args.workers.max(1) {
        let name = format!("local-{}", index + 1);
        let token =
            client.create_worker_token(v1::CreateWorkerTokenRequest { name: name.clone() }).await?.into_inner().token;
        let child = logged_command(&worker_binary, &data, &format!("worker-{}.log", index + 1))?
            .args(["connect", "--concurrency", "1", "--coordinator", &url, "--name", &name, "--cache"])
            .arg(data.join(format!("worker-{}", index + 1)))
            .env("XQ_WORKER_TOKEN", token)
            .spawn()
            .context("starting xq-worker")?;
        workers.push(child);
    }
    let engine = sibling("xq-engine")?;
    let new = args.new.clone().unwrap_or_else(|| engine.clone());
    let base = args.base.clone().unwrap_or_else(|| engine.clone());
    let mut base_options = args.base_options.clone();
    if base_options.is_empty() && new == base && args.new_options.is_empty() {
        base_options.push("UseNNUE=false".to_owned());
    }
    let engines = EngineArgs {
        new: vec![new.display().to_string()],
        base: vec![base.display().to_string()],
        protocol: args.protocol.clone(),
        new_options: args.new_options.clone(),
        base_options,
        new_settings: Vec::new(),
        base_settings: Vec::new(),
        new_net: None,
        base_net: None,
        net_option: xq_proto::DEFAULT_NET_OPTION.to_owned(),
        new_tc: None,
        base_tc: None,
        // Both engines were built on this machine for its own workers.
        no_bench: true,
        source: SourceArgs { new_name: "new".to_owned(), base_name: "base".to_owned(), ..SourceArgs::default() },
        preset: None,
        play: PlayArgs {
            tc: Some(args.tc.clone()),
            book: args.book.clone(),
            no_book: false,
            book_offset: 0,
            rules: "wxf".to_owned(),
            violation_timing: "threefold".to_owned(),
            variant: "xiangqi".to_owned(),
            max_plies: 0,
            draw: None,
            resign: None,
            priority: 0,
            require_cpu_flags: Vec::new(),
            throughput: 100,
            watch: true,
        },
    };
    let sprt = SprtArgs {
        engines: engines.clone(),
        elo0: Some(args.elo0),
        elo1: Some(args.elo1),
        alpha: args.alpha,
        beta: args.beta,
        model: args.model.clone(),
        max_pairs: args.max_pairs,
        trinomial: false,
    };
    let job = submit(&mut client, &engines, Some(&sprt), 0).await?;
    eprintln!("job {}: {} with {} workers; live at {url}/tests/{}", job.job_id, job.summary, workers.len(), job.job_id);
    watch(&mut client, job.job_id).await?;
    let last = client.get_job(v1::JobId { job_id: job.job_id }).await?.into_inner();
    let totals = last.totals.clone().unwrap_or_default();
    out!("games {}", totals.wins + totals.draws + totals.losses);
    if let Some(sprt) = &last.sprt {
        out!("LLR {:.3} ({:.3}, {:.3}) {}", sprt.llr, sprt.lower, sprt.upper, last.outcome);
    }
    if let Some(elo) = &last.elo {
        out!("Elo {:+.1} [{:+.1}, {:+.1}]", elo.elo, elo.low, elo.high);
    }
    out!("coordinator {url}, games in {}", data.join("games").display());
    drop(workers);
    if args.keep {
        eprintln!("the coordinator keeps running; Ctrl-C stops it");
        let _ = tokio::signal::ctrl_c().await;
    }
    drop(coordinator);
    Ok(())
}
