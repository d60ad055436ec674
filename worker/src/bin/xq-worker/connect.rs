//! `xq-worker connect`: a coordinator's worker, sandboxed unless told otherwise.

use std::path::PathBuf;

use anyhow::Context;
use xq_worker::fleet::{ConnectSettings, capabilities, connect, enrollment};
use xq_worker::reference::Pyffish;
use xq_worker::sandbox::Sandbox;

use crate::play::all_cores;

#[derive(clap::Args)]
pub struct ConnectArgs {
    /// The coordinator's URL (http://host:port, or https:// with TLS).
    #[arg(long, env = "XQ_COORDINATOR")]
    coordinator: String,
    /// This worker's token (from `xq worker-token NAME`); better in XQ_WORKER_TOKEN, since
    /// a command line is visible to every user of the machine (`ps`).
    #[arg(long, env = "XQ_WORKER_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// A file holding its user's worker key (`xq worker-key create`), which serves all
    /// the user's machines: this one enrolls once, keeping its id and worker token in
    /// the cache, and is the same worker after that.
    #[arg(long, conflicts_with = "token")]
    key_file: Option<PathBuf>,
    /// Games at once (default: the number of cores).
    #[arg(long)]
    concurrency: Option<usize>,
    /// Where downloaded engines, books and nets are kept.
    #[arg(long, default_value = "xq-worker-cache")]
    cache: PathBuf,
    /// The most gibibytes the cache keeps: past it the least recently used artifacts go.
    #[arg(long, default_value_t = (xq_worker::fleet::DEFAULT_CACHE_BYTES >> 30) as f64)]
    cache_gib: f64,
    /// The operator's public key (hex, from `xq release keygen`): a worker release the
    /// coordinator requires is installed only when signed with it, and the worker then
    /// starts again as the new release. Without it the worker does not update itself.
    #[arg(long, env = "XQ_RELEASE_KEY")]
    release_key: Option<String>,
    /// The CA certificate (PEM) that signed the coordinator's TLS certificate.
    #[arg(long)]
    ca_cert: Option<PathBuf>,
    /// A name for the dashboard (default: the host name).
    #[arg(long)]
    name: Option<String>,
    /// Run the coordinator's engines as this worker's user, with its environment,
    /// files and network: only for a worker that runs nobody's engines but your own.
    #[arg(long)]
    no_sandbox: bool,
    /// A Python with pyffish: verification jobs that compare the rules with
    /// Fairy-Stockfish's can then come here (default: $XQ_PYTHON when it has pyffish).
    #[arg(long)]
    pyffish: Option<PathBuf>,
}

/// Works for the coordinator until stopped.
pub fn run(args: ConnectArgs) -> anyhow::Result<()> {
    let name = args.name.unwrap_or_else(|| {
        std::fs::read_to_string("/etc/hostname").map_or("worker".to_owned(), |h| h.trim().to_owned())
    });
    let runtime = tokio::runtime::Runtime::new()?;
    let token = match (args.token, &args.key_file) {
        (Some(token), _) => token,
        (None, Some(file)) => {
            let key = std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
            let enrolled =
                enrollment::worker_token(&args.coordinator, args.ca_cert.as_deref(), key.trim(), &args.cache, &name);
            runtime.block_on(enrolled)?
        }
        (None, None) => anyhow::bail!("give a worker token (XQ_WORKER_TOKEN) or a worker key (--key-file)"),
    };
    if !(args.cache_gib.is_finite() && args.cache_gib > 0.0) {
        anyhow::bail!("--cache-gib {}: a positive number of gibibytes", args.cache_gib);
    }
    let release_key = args.release_key.as_deref().map(xq_proto::release::parse_public_key).transpose()?;
    let settings = ConnectSettings {
        coordinator: args.coordinator,
        token,
        concurrency: args.concurrency.unwrap_or_else(all_cores).max(1),
        cache: args.cache,
        ca_cert: args.ca_cert,
        name,
        sandbox: if args.no_sandbox { None } else { Some(Sandbox::default()) },
        pyffish: match args.pyffish {
            Some(python) if Pyffish::available(&python) => Some(python),
            Some(python) => anyhow::bail!("--pyffish {}: that Python cannot import pyffish", python.display()),
            None => std::env::var_os("XQ_PYTHON").map(PathBuf::from).filter(|p| Pyffish::available(p)),
        },
        release_key,
        cache_bytes: (args.cache_gib * f64::from(1u32 << 30)) as u64,
    };
    if let Some(python) = &settings.pyffish {
        eprintln!("xq-worker: verification references: pyffish under {}", python.display());
    }
    match &settings.sandbox {
        Some(sandbox) => {
            sandbox.probe()?;
            eprintln!("xq-worker: engines run in a bubblewrap sandbox");
        }
        None => eprintln!("xq-worker: engines run unconfined (--no-sandbox)"),
    }
    let capabilities = runtime.block_on(capabilities(&settings));
    if let Some(warning) = xq_proto::client::plaintext_warning(&settings.coordinator) {
        eprintln!("xq-worker: warning: {warning}");
    }
    Ok(runtime.block_on(connect(settings, capabilities))?)
}
