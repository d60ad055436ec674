//! How a job's games are played and scheduled (`--tc`, `--book`, `--rules`, ...), shared
//! by tests, SPSA runs and tournaments, and the engines' options and talk settings.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use clap::Args;
use xq_engine::adjudication::Adjudication;
use xq_engine::bench::Reading;
use xq_proto::client::{self, Client};
use xq_proto::v1;

/// The time control of a job that names none (fishtest's short one).
pub const DEFAULT_TIME_CONTROL: &str = "10+0.1";

/// How a job's games are played and scheduled, for tests and SPSA runs.
#[derive(Args, Clone)]
pub struct PlayArgs {
    /// Time control at the reference speed (default: 10+0.1, or a test's preset's).
    #[arg(long)]
    pub tc: Option<String>,
    /// Opening book (FEN/EPD lines or PGN; for Xiongqi, FEN lines). Without one a
    /// Xiangqi job plays the coordinator's default book (some 100,000 balanced
    /// openings of eight plies, each played once per pair).
    #[arg(long)]
    pub book: Option<PathBuf>,
    /// Play every pair from the start position, not the default book.
    #[arg(long, conflicts_with = "book")]
    pub no_book: bool,
    /// The book's opening the first pair plays (pair i plays opening i + N): a match
    /// on openings another test did not play.
    #[arg(long, default_value_t = 0)]
    pub book_offset: u64,
    /// Rule set: wxf, asian, cxq or computer (Xiongqi has its own rules).
    #[arg(long, default_value = "wxf")]
    pub rules: String,
    /// When a lone repetition violation loses: threefold (as engines rule) or
    /// after-warning (as the books rule: the violator is warned at the threefold
    /// repetition, its repeating moves banned, and loses only if it repeats anyway).
    #[arg(long, default_value = "threefold")]
    pub violation_timing: String,
    /// The game: xiangqi or xiongqi.
    #[arg(long, default_value = "xiangqi")]
    pub variant: String,
    /// Draw after this many plies (0: no limit).
    #[arg(long, default_value_t = 0)]
    pub max_plies: u32,
    /// Draw adjudication: movenumber=N movecount=M score=S (cutechess-cli's -draw).
    #[arg(long, num_args = 1..)]
    pub draw: Option<Vec<String>>,
    /// Resign adjudication: movecount=M score=S (cutechess-cli's -resign).
    #[arg(long, num_args = 1..)]
    pub resign: Option<Vec<String>>,
    #[arg(long, default_value_t = 0)]
    pub priority: i32,
    /// Only workers whose processors have all these flags (comma-separated Linux
    /// names, such as avx2,bmi2) play it.
    #[arg(long, value_delimiter = ',')]
    pub require_cpu_flags: Vec<String>,
    /// Share of the fleet among tests of equal priority, in percent of an equal share
    /// (above 100 an admin's to give; at most 1,000).
    #[arg(long, default_value_t = 100)]
    pub throughput: u32,
    /// Follow the test until it ends.
    #[arg(long)]
    pub watch: bool,
}

impl PlayArgs {
    /// A test request of these settings between `new` and `base` (uploading the
    /// book; a tournament names its engines itself); the caller sets the pairs, the
    /// SPRT and the description.
    pub async fn test_request(
        &self,
        client: &mut Client,
        new: Option<v1::EngineSpec>,
        base: Option<v1::EngineSpec>,
    ) -> anyhow::Result<v1::CreateTestRequest> {
        let book = match &self.book {
            Some(path) => Some(client::upload_file(client, path, "book").await?),
            None => None,
        };
        Ok(v1::CreateTestRequest {
            new_engine: new,
            base_engine: base,
            time_control: self.tc.clone().unwrap_or_else(|| DEFAULT_TIME_CONTROL.to_owned()),
            rules: self.rules.clone(),
            violation_timing: self.violation_timing.clone(),
            variant: self.variant.clone(),
            book,
            start_position: self.no_book,
            book_offset: self.book_offset,
            max_plies: self.max_plies,
            priority: self.priority,
            required_cpu_flags: self.require_cpu_flags.clone(),
            throughput: self.throughput,
            adjudication: xq_proto::adjudication_message(Adjudication::from_words(
                self.draw.as_deref(),
                self.resign.as_deref(),
            )?),
            ..Default::default()
        })
    }
}

pub fn options(words: &[String]) -> anyhow::Result<HashMap<String, String>> {
    words
        .iter()
        .map(|w| {
            w.split_once('=')
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .with_context(|| format!("option '{w}' is not NAME=VALUE"))
        })
        .collect()
}

/// The bench of the engine `binary` as `spec` has it played: with its options and its
/// net (the file `net` here) set, as every worker takes it.
pub fn bench(binary: &Path, spec: &v1::EngineSpec, net: Option<&Path>) -> anyhow::Result<Reading> {
    let protocol = if spec.protocol.is_empty() { "uci" } else { spec.protocol.as_str() };
    let options = xq_proto::engine_options(spec, net);
    xq_engine::bench::bench_of(binary, protocol, &options).with_context(|| format!("the engine {}", spec.name))
}

/// Records `reading` in `spec`: the signature every worker checks, and the speed its
/// time control was chosen at, which workers' clocks are scaled against.
pub fn record_bench(spec: &mut v1::EngineSpec, reading: Reading) {
    spec.bench_signature = reading.signature;
    spec.bench_nps = reading.nodes_per_second.unwrap_or(0);
}

/// Sets how to talk to `engine`: its `protocol`, `ranks` or `fen` letters (the
/// coordinator checks the values).
pub fn talk_setting(engine: &mut v1::EngineSpec, key: &str, value: &str) -> anyhow::Result<()> {
    let field = match key {
        "protocol" => &mut engine.protocol,
        "ranks" => &mut engine.ranks,
        "fen" => &mut engine.fen_letters,
        other => bail!("'{other}' is not protocol, ranks or fen"),
    };
    *field = value.to_owned();
    Ok(())
}
