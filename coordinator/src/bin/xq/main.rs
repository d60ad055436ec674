//! `xq`: the coordinator's client. Submits tests and self-play jobs, lists, watches and
//! stops them, downloads their games and data, creates worker tokens, computes an SPRT
//! by hand (`xq llr`), and runs a whole cluster on this machine (`xq local`).

/// Prints a line on standard output. A reader that stops reading (`xq show 3 | head
/// -1`) ends the program quietly, where `println!` would panic.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        if let Err(error) = writeln!(std::io::stdout().lock(), $($arg)*) {
            $crate::output_failed(error);
        }
    }};
}

/// Ends the program after standard output failed: silently when its reader left.
fn output_failed(error: std::io::Error) -> ! {
    if error.kind() == std::io::ErrorKind::BrokenPipe {
        std::process::exit(0);
    }
    eprintln!("xq: cannot write to standard output: {error}");
    std::process::exit(1);
}

mod local;

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::{Args, Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use tokio::io::AsyncWriteExt;
use xq_engine::adjudication::Adjudication;
pub use xq_proto::client::Client;
use xq_proto::{client, v1};
use xq_stats::{Model, Sprt, elo_estimate};

#[derive(Parser)]
#[command(name = "xq", version, about = "The xq-cluster client: tests, self-play jobs, workers, SPRT arithmetic")]
struct Cli {
    #[command(flatten)]
    connection: Connection,
    #[command(subcommand)]
    command: Command,
}

#[derive(Args, Clone)]
pub struct Connection {
    /// The coordinator's URL.
    #[arg(long, global = true, env = "XQ_COORDINATOR", default_value = "http://127.0.0.1:7420")]
    coordinator: String,
    /// A client token.
    #[arg(long, global = true, env = "XQ_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// A file holding the client token (such as <data>/client-token).
    #[arg(long, global = true)]
    token_file: Option<PathBuf>,
    /// The CA certificate (PEM) for a TLS coordinator.
    #[arg(long, global = true)]
    ca_cert: Option<PathBuf>,
}

#[derive(Subcommand)]
enum Command {
    /// Submits an SPRT test of --new against --base.
    Sprt(SprtArgs),
    /// Submits a test of a fixed number of games.
    Games(GamesArgs),
    /// Submits an SPSA tuning run of an engine's spin options (fishtest's SPSA).
    Spsa(SpsaArgs),
    /// Submits a tournament: a test per pairing of a double round robin or a gauntlet,
    /// or a Swiss event or knockout made round by round.
    Tournament(TournamentArgs),
    /// The newest tournaments: number, system, state, engines, leader.
    Tournaments {
        #[arg(long, default_value_t = 20)]
        limit: u32,
    },
    /// A tournament's standings (Articles 9 and 10 of the World Xiangqi Rules) and
    /// its pairings.
    Crosstable { tournament: u64 },
    /// Stops a tournament: no more rounds, and its tests still waiting or playing stop.
    TournamentStop { tournament: u64 },
    /// An SPSA run's parameters: theta, the values as UCI options and in fishtest's
    /// format, and theta's history as CSV or JSON.
    SpsaResult {
        job: u64,
        /// Write theta's history here as CSV.
        #[arg(long)]
        csv: Option<PathBuf>,
        /// Write theta's history here as JSON.
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// Creates a self-play job.
    Selfplay(SelfplayArgs),
    /// Creates a rule verification job: a PGN's games (or a test's, or fresh self-play
    /// games) replayed under several rule sets by the fleet, every game where they part
    /// reported.
    Verify(VerifyArgs),
    /// A verification job's counts (games, partings by kind and by articles), or with
    /// --jsonl / --pgn its games where the rule sets part.
    Verification {
        job: u64,
        /// Write the report's JSON lines (one per parting or unplayable game) here.
        #[arg(long, conflicts_with = "pgn")]
        jsonl: Option<PathBuf>,
        /// Write the parting games here as PGN, each with the verdicts in a comment.
        #[arg(long)]
        pgn: Option<PathBuf>,
    },
    /// Lists jobs.
    List {
        /// Finished and stopped jobs too.
        #[arg(long)]
        all: bool,
    },
    /// Shows one job.
    Show { job: u64 },
    /// Watches a job until it ends, with a progress bar.
    Watch { job: u64 },
    /// Stops a job.
    Stop { job: u64 },
    /// Changes a job's priority.
    Priority { job: u64, priority: i32 },
    /// Lists workers.
    Workers,
    /// Creates a worker token (shown once).
    WorkerToken { name: String },
    /// Disables a worker: no more work for it; its results stay counted.
    DisableWorker {
        worker: u64,
        #[arg(long, default_value = "")]
        reason: String,
    },
    /// Quarantines a worker: no more work for it, and its results in running tests set
    /// aside (kept, not counted) and those tests recounted without them.
    QuarantineWorker {
        worker: u64,
        #[arg(long, default_value = "")]
        reason: String,
    },
    /// Lets a disabled or quarantined worker play again (what was set aside stays so).
    EnableWorker { worker: u64 },
    /// Users' tokens (admin only): create, list, revoke.
    Token {
        #[command(subcommand)]
        action: TokenCommand,
    },
    /// Lets a submitter's job that waits for approval run (admin only).
    Approve { job: u64 },
    /// The audit log, newest first (admin only).
    Audit {
        #[arg(long, default_value_t = 50)]
        limit: u32,
    },
    /// Downloads a test's games as PGN, or with --tournament N every game of an event,
    /// each tagged with the event's name and its round.
    Pgn {
        /// The test.
        #[arg(required_unless_present = "tournament", conflicts_with = "tournament")]
        job: Option<u64>,
        /// A tournament's games instead.
        #[arg(long)]
        tournament: Option<u64>,
        /// The file to write (default: standard output).
        #[arg(short, long)]
        out: Option<PathBuf>,
    },
    /// Lists the trained nets, newest first: lineage, generation, parent, data, losses
    /// and the state their test gives them.
    Nets {
        /// Only this lineage's.
        #[arg(long, default_value = "")]
        lineage: String,
    },
    /// Downloads a self-play job's training chunks into a directory.
    Data {
        job: u64,
        #[arg(short, long)]
        out: PathBuf,
    },
    /// The SPRT calculator: LLR, bounds and Elo of pentanomial or trinomial counts.
    Llr(LlrArgs),
    /// Runs a coordinator and workers on this machine and an SPRT test to its end.
    Local(local::LocalArgs),
}

#[derive(Subcommand)]
enum TokenCommand {
    /// Creates a token, shown once: --role admin or submitter.
    Create {
        #[arg(long)]
        role: String,
        /// Who it is for.
        #[arg(long)]
        name: String,
        /// It expires after this many days (0: never).
        #[arg(long, default_value_t = 0.0)]
        expires_days: f64,
    },
    /// Lists every token: id, role, name, created, expires, revoked.
    List,
    /// Revokes a token (a worker's too) by its id.
    Revoke { id: String },
}

#[derive(Args, Clone)]
pub struct EngineArgs {
    /// The engine under test.
    #[arg(long)]
    pub new: PathBuf,
    /// The base engine.
    #[arg(long)]
    pub base: PathBuf,
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
    /// Check both engines' bench signatures on every worker (they must print
    /// "Nodes searched: N" for `<engine> bench`).
    #[arg(long)]
    pub bench: bool,
    #[command(flatten)]
    pub play: PlayArgs,
}

/// How a job's games are played and scheduled, for tests and SPSA runs.
#[derive(Args, Clone)]
pub struct PlayArgs {
    /// Time control at the reference speed.
    #[arg(long, default_value = "10+0.1")]
    pub tc: String,
    /// Opening book (FEN/EPD lines or PGN; for Xiongqi, FEN lines).
    #[arg(long)]
    pub book: Option<PathBuf>,
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
    /// Share of the fleet among tests of equal priority, in percent.
    #[arg(long, default_value_t = 100)]
    pub throughput: u32,
    /// Follow the test until it ends.
    #[arg(long)]
    pub watch: bool,
}

#[derive(Args, Clone)]
pub struct SprtArgs {
    #[command(flatten)]
    pub engines: EngineArgs,
    #[arg(long, default_value_t = 0.0, allow_hyphen_values = true)]
    pub elo0: f64,
    #[arg(long, default_value_t = 2.0, allow_hyphen_values = true)]
    pub elo1: f64,
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
struct SpsaArgs {
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

#[derive(Args)]
struct TournamentArgs {
    /// An engine: PATH, or NAME=PATH (repeatable, in the order of their numbers; a
    /// gauntlet's challengers first). Each is uploaded once.
    #[arg(long = "engine", required = true)]
    engines: Vec<String>,
    /// An option of one engine: NAME:OPTION=VALUE (repeatable).
    #[arg(long = "engine-option")]
    engine_options: Vec<String>,
    /// The engines' protocol: uci or ucci.
    #[arg(long, default_value = "uci")]
    protocol: String,
    /// How to talk to one engine, NAME:KEY=VALUE (repeatable): protocol=uci|ucci,
    /// ranks=0-9|1-10 (how it numbers ranks in moves: 1-10 for Fairy-Stockfish and
    /// Sjaak II over UCI), fen=nb|he (its FEN letters for horse and elephant: he for
    /// Sjaak II).
    #[arg(long = "engine-setting")]
    engine_settings: Vec<String>,
    /// double-round-robin, gauntlet, swiss or knockout (seeded by the engines' order,
    /// matches of --games-per-pairing games).
    #[arg(long, default_value = "double-round-robin")]
    system: String,
    /// A Swiss event's rounds (0: log2 of the engines, rounded up, plus 2).
    #[arg(long, default_value_t = 0)]
    rounds: u32,
    /// A knockout's tie-break pairs' time control (default: --tc).
    #[arg(long, default_value = "")]
    tie_break_tc: String,
    /// Pairs of tie-break games a level knockout match plays before the higher seed
    /// goes on.
    #[arg(long, default_value_t = 2)]
    tie_break_pairs: u32,
    /// A gauntlet's challengers: the first engines given.
    #[arg(long, default_value_t = 1)]
    challengers: u32,
    /// Games each pairing plays (even: pairs with colours swapped).
    #[arg(long, default_value_t = 2)]
    games_per_pairing: u32,
    /// Points a game: 2-1-0 or 1-0.5-0 (Article 9.1).
    #[arg(long, default_value = "2-1-0")]
    points: String,
    /// A label.
    #[arg(long, default_value = "")]
    description: String,
    #[command(flatten)]
    play: PlayArgs,
}

#[derive(Args)]
struct GamesArgs {
    #[command(flatten)]
    engines: EngineArgs,
    /// Games to play (even: each opening with both colours).
    #[arg(long)]
    games: u64,
}

#[derive(Args)]
struct SelfplayArgs {
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
    /// Share of the fleet among jobs of equal priority, in percent.
    #[arg(long, default_value_t = 100)]
    throughput: u32,
    /// The game: xiangqi or xiongqi.
    #[arg(long, default_value = "xiangqi")]
    variant: String,
    /// The net the engine plays with (uploaded); default: the handcrafted evaluation.
    #[arg(long)]
    net: Option<PathBuf>,
}

#[derive(Args)]
#[command(group(clap::ArgGroup::new("source").required(true).args(["pgn", "test", "selfplay", "generate"])))]
struct VerifyArgs {
    /// The games: a PGN file, uploaded (UTF-8, GBK or Big5; moves in UCI, ICCS, WXF or
    /// Chinese notation).
    #[arg(long)]
    pgn: Option<PathBuf>,
    /// The games: a test's stored games.
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

#[derive(Args)]
struct LlrArgs {
    /// Pentanomial counts N0,N1,N2,N3,N4 (pairs scoring 0, 0.5, 1, 1.5, 2).
    #[arg(long, conflicts_with = "trinomial")]
    penta: Option<String>,
    /// Trinomial counts L,D,W.
    #[arg(long)]
    trinomial: Option<String>,
    #[arg(long, allow_hyphen_values = true)]
    elo0: f64,
    #[arg(long, allow_hyphen_values = true)]
    elo1: f64,
    #[arg(long, default_value_t = 0.05)]
    alpha: f64,
    #[arg(long, default_value_t = 0.05)]
    beta: f64,
    /// normalized or logistic.
    #[arg(long, default_value = "normalized")]
    model: String,
    /// One JSON object instead of text.
    #[arg(long)]
    json: bool,
}

fn main() -> ExitCode {
    let cli: Cli = xq_cli::parse(&[]);
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("xq: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        // A refusal of the coordinator's, said with what usually mends it.
        Err(error) => {
            match error.downcast_ref::<tonic::Status>() {
                Some(status) => eprintln!("xq: {}", client::explain(status)),
                None => eprintln!("xq: {error:#}"),
            }
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    if let Command::Llr(args) = &cli.command {
        return llr(args);
    }
    if let Command::Local(args) = cli.command {
        return local::run(args).await;
    }
    let mut client = connect(&cli.connection).await?;
    match cli.command {
        Command::Sprt(args) => {
            let job = submit(&mut client, &args.engines, Some(&args), 0).await?;
            after_submit(&mut client, job, args.engines.play.watch).await
        }
        Command::Games(args) => {
            if args.games == 0 || args.games % 2 != 0 {
                bail!("--games {} must be even and positive: each opening is played with both colours", args.games);
            }
            let job = submit(&mut client, &args.engines, None, args.games / 2).await?;
            after_submit(&mut client, job, args.engines.play.watch).await
        }
        Command::Spsa(args) => {
            let params = match (&args.params, &args.tune) {
                (Some(path), _) => {
                    std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?
                }
                (None, Some(names)) => {
                    let declared = declared_options(&args.engine)?;
                    let parameters = xq_stats::spsa::tuned_options(&declared, names)
                        .with_context(|| args.engine.display().to_string())?;
                    xq_stats::spsa::format_parameters(&parameters, None)
                }
                (None, None) => bail!("name the parameters: --params FILE or --tune NAME,NAME"),
            };
            let bench_signature = if args.bench { xq_engine::bench::signature_of(&args.engine)? } else { 0 };
            let engine = v1::EngineSpec {
                name: args.engine.file_name().map_or("engine".to_owned(), |n| n.to_string_lossy().into_owned()),
                binary: Some(client::upload_file(&mut client, &args.engine, "engine").await?),
                protocol: args.protocol.clone(),
                options: options(&args.options)?,
                bench_signature,
                ..Default::default()
            };
            let mut test = args.play.test_request(&mut client, Some(engine), None).await?;
            test.pairs = args.pairs;
            test.description = format!("SPSA of {}", args.engine.display());
            let spsa = v1::SpsaSpec { params, a_ratio: args.a_ratio, alpha: args.alpha, gamma: args.gamma };
            let request = v1::CreateSpsaRequest { test: Some(test), spsa: Some(spsa) };
            let id = client::new_request_id();
            let job = client::create_named(&client, &request, &id, |mut client, request| async move {
                client.create_spsa(request).await
            })
            .await?;
            after_submit(&mut client, job, args.play.watch).await
        }
        Command::SpsaResult { job, csv, json } => spsa_result(&mut client, job, csv, json).await,
        Command::Tournament(args) => {
            let mut engines: Vec<v1::EngineSpec> = Vec::new();
            for text in &args.engines {
                let (name, path) = match text.split_once('=') {
                    Some((name, path)) => (name.to_owned(), PathBuf::from(path)),
                    None => {
                        let path = PathBuf::from(text);
                        let name = path.file_name().map_or("engine".to_owned(), |n| n.to_string_lossy().into_owned());
                        (name, path)
                    }
                };
                let binary = client::upload_file(&mut client, &path, "engine").await?;
                engines.push(v1::EngineSpec {
                    name,
                    binary: Some(binary),
                    protocol: args.protocol.clone(),
                    ..Default::default()
                });
            }
            for option in &args.engine_options {
                let (target, key, value) = engine_assignment(&mut engines, "--engine-option", option)?;
                target.options.insert(key.to_owned(), value.to_owned());
            }
            for setting in &args.engine_settings {
                let (target, key, value) = engine_assignment(&mut engines, "--engine-setting", setting)?;
                talk_setting(target, key, value).with_context(|| format!("--engine-setting '{setting}'"))?;
            }
            let mut settings = args.play.test_request(&mut client, None, None).await?;
            settings.description = args.description.clone();
            let request = v1::CreateTournamentRequest {
                engines,
                system: args.system.clone(),
                challengers: args.challengers,
                games_per_pairing: args.games_per_pairing,
                settings: Some(settings),
                points: args.points.clone(),
                rounds: args.rounds,
                tie_break_time_control: args.tie_break_tc.clone(),
                tie_break_pairs: args.tie_break_pairs,
            };
            let id = client::new_request_id();
            let tournament = client::create_named(&client, &request, &id, |mut client, request| async move {
                client.create_tournament(request).await
            })
            .await?;
            out!(
                "tournament {}: {} pairings ({}), tests {}",
                tournament.tournament_id,
                tournament.pairings.len(),
                tournament.system,
                tournament.pairings.iter().map(|p| p.job_id.to_string()).collect::<Vec<_>>().join(", ")
            );
            Ok(())
        }
        Command::Tournaments { limit } => {
            let reply = client.list_tournaments(v1::ListTournamentsRequest { limit }).await?.into_inner();
            for t in reply.tournaments {
                out!("{}", tournament_line(&t));
            }
            Ok(())
        }
        Command::TournamentStop { tournament } => {
            let t = client.stop_tournament(v1::TournamentId { tournament_id: tournament }).await?.into_inner();
            out!("{}", tournament_line(&t));
            Ok(())
        }
        Command::Crosstable { tournament } => {
            let t = client.get_tournament(v1::TournamentId { tournament_id: tournament }).await?.into_inner();
            out!("tournament {} [{}] {} ({} points a game)", t.tournament_id, t.state, t.system, t.points);
            out!(
                "{:>3} {:<20} {:>6} {:>5} {:>9} {:>14} {:>8}",
                "#",
                "engine",
                "points",
                "games",
                "W-D-L",
                "Elo",
                "10.2.A"
            );
            for s in &t.standings {
                let elo =
                    if s.elo_error > 0.0 { format!("{:+.0} ± {:.0}", s.elo, s.elo_error) } else { "-".to_owned() };
                out!(
                    "{:>3} {:<20} {:>6} {:>5} {:>9} {:>14} {:>8}",
                    s.place,
                    s.engine,
                    s.points,
                    s.games,
                    format!("{}-{}-{}", s.wins, s.draws, s.losses),
                    elo,
                    s.tie_breaks.get("10.2.A").copied().unwrap_or(0.0)
                );
            }
            if t.rating_prior_draws > 0.0 {
                out!(
                    "Elo with {} virtual draw(s) between every pair that met: an engine won or lost every game",
                    t.rating_prior_draws
                );
            }
            for p in &t.pairings {
                out!(
                    "  {} - {}: {}-{} after {}/{} pairs (test {})",
                    p.first,
                    p.second,
                    p.first_points,
                    p.second_points,
                    p.pairs_done,
                    p.pairs_total,
                    p.job_id
                );
            }
            Ok(())
        }
        Command::Selfplay(args) => {
            let spec = v1::SelfPlaySpec {
                nodes: args.nodes,
                games_per_unit: args.games_per_unit,
                random_plies: args.random_plies,
                seed: args.seed,
                rules: args.rules,
                max_plies: 0,
                variant: args.variant,
                net: match &args.net {
                    Some(path) => Some(client::upload_file(&mut client, path, "net").await?),
                    None => None,
                },
            };
            let request = v1::CreateSelfPlayRequest {
                spec: Some(spec),
                units: args.units,
                priority: args.priority,
                description: String::new(),
                throughput: args.throughput,
            };
            let id = client::new_request_id();
            let job = client::create_named(&client, &request, &id, |mut client, request| async move {
                client.create_self_play(request).await
            })
            .await?;
            out!("job {}: {}", job.job_id, job.summary);
            Ok(())
        }
        Command::Verify(args) => {
            let pgn = match &args.pgn {
                Some(path) => Some(client::upload_file(&mut client, path, "pgn").await?),
                None => None,
            };
            let rules: Vec<String> =
                args.rules.split(',').map(|r| r.trim().to_owned()).filter(|r| !r.is_empty()).collect();
            let net = match &args.net {
                Some(path) => Some(client::upload_file(&mut client, path, "net").await?),
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
            let job = client::create_named(&client, &request, &id, |mut client, request| async move {
                client.create_verification(request).await
            })
            .await?;
            out!("job {}: {} ({} units)", job.job_id, job.summary, job.units_total);
            Ok(())
        }
        Command::Verification { job, jsonl, pgn } => {
            if jsonl.is_none() && pgn.is_none() {
                let summary = client.get_verification(v1::JobId { job_id: job }).await?.into_inner();
                out!("{}", verification_text(&summary));
                return Ok(());
            }
            let mut stream = client.download_verification(v1::JobId { job_id: job }).await?.into_inner();
            let path = jsonl.as_ref().or(pgn.as_ref()).expect("one of them");
            let mut file =
                tokio::fs::File::create(path).await.with_context(|| format!("creating {}", path.display()))?;
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
        Command::List { all } => {
            let jobs = client
                .list_jobs(v1::ListJobsRequest { active_only: !all, limit: 100, ..Default::default() })
                .await?
                .into_inner()
                .jobs;
            for job in jobs {
                out!("{}", job_line(&job));
            }
            Ok(())
        }
        Command::Show { job } => {
            let job = client.get_job(v1::JobId { job_id: job }).await?.into_inner();
            out!("{}", job_line(&job));
            if let Some(spsa) = &job.spsa {
                let theta: Vec<String> = spsa.parameters.iter().map(|p| format!("{}={:.2}", p.name, p.value)).collect();
                out!("  theta after {} pairs: {}", spsa.iterations, theta.join(", "));
            }
            if job.data_removed_ms > 0 {
                let what = if job.kind == "selfplay" { "training data" } else { "games" };
                out!("  its {what} were removed under the coordinator's retention settings; the counts remain");
            }
            let mut reasons: Vec<_> = job.reasons.iter().collect();
            reasons.sort();
            for (reason, count) in reasons {
                out!("  {reason}: {count}");
            }
            if let Some(line) = over_the_board_line(&job) {
                out!("  {line}");
            }
            Ok(())
        }
        Command::Watch { job } => watch(&mut client, job).await,
        Command::Stop { job } => {
            let job = client.stop_job(v1::JobId { job_id: job }).await?.into_inner();
            out!("{}", job_line(&job));
            Ok(())
        }
        Command::Priority { job, priority } => {
            let job = client.set_priority(v1::SetPriorityRequest { job_id: job, priority }).await?.into_inner();
            out!("{}", job_line(&job));
            Ok(())
        }
        Command::Workers => {
            for worker in client.list_workers(v1::ListWorkersRequest {}).await?.into_inner().workers {
                let caps = worker.capabilities.unwrap_or_default();
                let standing = if worker.standing == "active" {
                    String::new()
                } else {
                    format!(", {} ({})", worker.standing, worker.standing_reason)
                };
                out!(
                    "worker {} {}: {} cores, {} nodes/s, version {}, {} leases, last seen {} ms ago{standing}",
                    worker.worker_id,
                    caps.name,
                    caps.cores,
                    caps.bench_nps,
                    caps.version,
                    worker.active_leases,
                    xq_coordinator::storage::now_ms() - worker.last_seen_ms
                );
            }
            Ok(())
        }
        Command::WorkerToken { name } => {
            out!("{}", client.create_worker_token(v1::CreateWorkerTokenRequest { name }).await?.into_inner().token);
            Ok(())
        }
        Command::DisableWorker { worker, reason } => set_standing(&mut client, worker, "disabled", reason).await,
        Command::QuarantineWorker { worker, reason } => set_standing(&mut client, worker, "quarantined", reason).await,
        Command::EnableWorker { worker } => set_standing(&mut client, worker, "active", String::new()).await,
        Command::Token { action } => tokens(&mut client, action).await,
        Command::Approve { job } => {
            let job = client.approve_job(v1::JobId { job_id: job }).await?.into_inner();
            out!("job {}: {}", job.job_id, job.state);
            Ok(())
        }
        Command::Audit { limit } => {
            for entry in client.list_audit(v1::ListAuditRequest { limit }).await?.into_inner().entries {
                out!("{} {} {} {}", entry.at_ms, entry.actor, entry.action, entry.detail);
            }
            Ok(())
        }
        Command::Pgn { job, tournament, out } => {
            let mut stream = match (job, tournament) {
                (Some(job_id), _) => client.download_games(v1::JobId { job_id }).await?.into_inner(),
                (None, Some(tournament_id)) => {
                    client.download_tournament_games(v1::TournamentId { tournament_id }).await?.into_inner()
                }
                (None, None) => anyhow::bail!("name a test, or a tournament with --tournament"),
            };
            let mut sink: Box<dyn tokio::io::AsyncWrite + Unpin + Send> = match &out {
                Some(path) => Box::new(
                    tokio::fs::File::create(path).await.with_context(|| format!("creating {}", path.display()))?,
                ),
                None => Box::new(tokio::io::stdout()),
            };
            while let Some(batch) = stream.message().await? {
                sink.write_all(batch.pgn.as_bytes()).await?;
            }
            sink.flush().await?;
            Ok(())
        }
        Command::Data { job, out } => {
            let downloaded = client::download_training_data(&mut client, job, &out).await?;
            out!(
                "{} chunks in {} ({} already there)",
                downloaded.written + downloaded.present,
                out.display(),
                downloaded.present
            );
            Ok(())
        }
        Command::Nets { lineage } => {
            for net in client.list_nets(v1::ListNetsRequest { lineage }).await?.into_inner().nets {
                out!("{}", net_line(&net));
            }
            Ok(())
        }
        Command::Llr(_) | Command::Local(_) => unreachable!("handled above"),
    }
}

/// Connects to the coordinator named by `connection`.
pub async fn connect(connection: &Connection) -> anyhow::Result<Client> {
    let address = client::Address {
        url: &connection.coordinator,
        token: connection.token.as_deref(),
        token_file: connection.token_file.as_deref(),
        ca_cert: connection.ca_cert.as_deref(),
    };
    Ok(client::connect_to(&address).await?)
}

fn options(words: &[String]) -> anyhow::Result<std::collections::HashMap<String, String>> {
    words
        .iter()
        .map(|w| {
            w.split_once('=')
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .with_context(|| format!("option '{w}' is not NAME=VALUE"))
        })
        .collect()
}

/// The engine named by `NAME:KEY=VALUE` (the text of `flag`), the key and the value.
fn engine_assignment<'a, 'e>(
    engines: &'e mut [v1::EngineSpec],
    flag: &str,
    text: &'a str,
) -> anyhow::Result<(&'e mut v1::EngineSpec, &'a str, &'a str)> {
    let (engine, assignment) =
        text.split_once(':').with_context(|| format!("{flag} '{text}' is not NAME:KEY=VALUE"))?;
    let (key, value) = assignment.split_once('=').with_context(|| format!("{flag} '{text}' has no =VALUE"))?;
    let target = engines
        .iter_mut()
        .find(|e| e.name == engine)
        .with_context(|| format!("{flag} '{text}': no engine is named '{engine}'"))?;
    Ok((target, key, value))
}

/// Sets how to talk to `engine`: its `protocol`, `ranks` or `fen` letters (the
/// coordinator checks the values).
fn talk_setting(engine: &mut v1::EngineSpec, key: &str, value: &str) -> anyhow::Result<()> {
    let field = match key {
        "protocol" => &mut engine.protocol,
        "ranks" => &mut engine.ranks,
        "fen" => &mut engine.fen_letters,
        other => bail!("'{other}' is not protocol, ranks or fen"),
    };
    *field = value.to_owned();
    Ok(())
}

/// Uploads the engines (and book) and creates the test.
pub async fn submit(
    client: &mut Client,
    args: &EngineArgs,
    sprt: Option<&SprtArgs>,
    pairs: u64,
) -> anyhow::Result<v1::Job> {
    let engine = |path: &Path, name: &str, opts: &[String], settings: &[String]| {
        let bench_signature = if args.bench { xq_engine::bench::signature_of(path)? } else { 0 };
        let mut spec = v1::EngineSpec {
            name: name.to_owned(),
            protocol: args.protocol.clone(),
            options: options(opts)?,
            bench_signature,
            ..Default::default()
        };
        for setting in settings {
            let (key, value) =
                setting.split_once('=').with_context(|| format!("--{name}-setting '{setting}' is not KEY=VALUE"))?;
            talk_setting(&mut spec, key, value).with_context(|| format!("--{name}-setting '{setting}'"))?;
        }
        anyhow::Ok((path.to_owned(), spec))
    };
    let (new_path, mut new) = engine(&args.new, "new", &args.new_options, &args.new_settings)?;
    let (base_path, mut base) = engine(&args.base, "base", &args.base_options, &args.base_settings)?;
    new.binary = Some(client::upload_file(client, &new_path, "engine").await?);
    base.binary = Some(client::upload_file(client, &base_path, "engine").await?);
    let mut request = args.play.test_request(client, Some(new), Some(base)).await?;
    request.sprt = sprt.map(|s| v1::SprtSpec {
        elo0: s.elo0,
        elo1: s.elo1,
        alpha: s.alpha,
        beta: s.beta,
        model: s.model.clone(),
        trinomial: s.trinomial,
    });
    request.pairs = sprt.map_or(pairs, |s| s.max_pairs);
    request.description = format!("{} vs {}", args.new.display(), args.base.display());
    let id = client::new_request_id();
    Ok(client::create_named(
        client,
        &request,
        &id,
        |mut client, request| async move { client.create_test(request).await },
    )
    .await?)
}

impl PlayArgs {
    /// A test request of these settings between `new` and `base` (uploading the
    /// book; a tournament names its engines itself); the caller sets the pairs, the
    /// SPRT and the description.
    async fn test_request(
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
            time_control: self.tc.clone(),
            rules: self.rules.clone(),
            violation_timing: self.violation_timing.clone(),
            variant: self.variant.clone(),
            book,
            book_offset: self.book_offset,
            max_plies: self.max_plies,
            priority: self.priority,
            throughput: self.throughput,
            adjudication: xq_proto::adjudication_message(Adjudication::from_words(
                self.draw.as_deref(),
                self.resign.as_deref(),
            )?),
            ..Default::default()
        })
    }
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
async fn spsa_result(client: &mut Client, job: u64, csv: Option<PathBuf>, json: Option<PathBuf>) -> anyhow::Result<()> {
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

async fn tokens(client: &mut Client, action: TokenCommand) -> anyhow::Result<()> {
    match action {
        TokenCommand::Create { role, name, expires_days } => {
            if !(expires_days.is_finite() && expires_days >= 0.0) {
                bail!("--expires-days {expires_days}: a number of days, 0 for never");
            }
            let expires_seconds = (expires_days * 86_400.0).ceil() as u64;
            let reply = client.create_token(v1::CreateTokenRequest { role, name, expires_seconds }).await?.into_inner();
            eprintln!("token {} (shown once; `xq token revoke {}` revokes it):", reply.id, reply.id);
            out!("{}", reply.token);
        }
        TokenCommand::List => {
            for token in client.list_tokens(v1::ListTokensRequest {}).await?.into_inner().tokens {
                let when = |ms: i64, none: &str| if ms == 0 { none.to_owned() } else { ms.to_string() };
                out!(
                    "{} {} '{}'{} created {} expires {} revoked {}",
                    token.id,
                    token.role,
                    token.name,
                    if token.worker_id == 0 { String::new() } else { format!(" worker {}", token.worker_id) },
                    token.created_ms,
                    when(token.expires_ms, "never"),
                    when(token.revoked_ms, "no"),
                );
            }
        }
        TokenCommand::Revoke { id } => {
            client.revoke_token(v1::RevokeTokenRequest { id: id.clone() }).await?;
            out!("token {id} revoked");
        }
    }
    Ok(())
}

async fn set_standing(client: &mut Client, worker_id: u64, standing: &str, reason: String) -> anyhow::Result<()> {
    let request = v1::SetWorkerStandingRequest { worker_id, standing: standing.to_owned(), reason };
    let info = client.set_worker_standing(request).await?.into_inner();
    out!("worker {}: {}, {} units counted", info.worker_id, info.standing, info.units_done);
    Ok(())
}

async fn after_submit(client: &mut Client, job: v1::Job, follow: bool) -> anyhow::Result<()> {
    out!("job {}: {}", job.job_id, job.summary);
    if follow { watch(client, job.job_id).await } else { Ok(()) }
}

/// A tournament in one line: number, state, system, size and leader.
fn tournament_line(t: &v1::Tournament) -> String {
    let leader = t.standings.first().map_or("-".to_owned(), |s| format!("{} ({} points)", s.engine, s.points));
    format!(
        "tournament {} [{}] {}: {} engines, {} pairings, leader {}{}",
        t.tournament_id,
        t.state,
        t.system,
        t.standings.len(),
        t.pairings.len(),
        leader,
        if t.description.is_empty() { String::new() } else { format!(", {}", t.description) }
    )
}

/// One line describing a job.
pub fn job_line(job: &v1::Job) -> String {
    let totals = job.totals.clone().unwrap_or_default();
    let mut text = format!(
        "job {} [{}{}] {}: {}/{} units, W/D/L {}/{}/{}",
        job.job_id,
        job.state,
        if job.outcome.is_empty() { String::new() } else { format!(", {}", job.outcome) },
        job.summary,
        job.units_done,
        job.units_total,
        totals.wins,
        totals.draws,
        totals.losses
    );
    if job.rechecks_pending > 0 {
        text.push_str(&format!(", {} re-checks pending", job.rechecks_pending));
    }
    if job.kind == "selfplay" {
        text.push_str(&format!(", {} positions", job.positions));
    } else {
        text.push_str(&format!(", pentanomial {:?}", totals.pentanomial));
    }
    if let Some(elo) = &job.elo {
        text.push_str(&format!(
            ", Elo {:+.1} [{:+.1}, {:+.1}] LOS {:.1}%",
            elo.elo,
            elo.low,
            elo.high,
            elo.los * 100.0
        ));
    }
    if let Some(sprt) = &job.sprt {
        text.push_str(&format!(", LLR {:.2} ({:.2}, {:.2})", sprt.llr, sprt.lower, sprt.upper));
    }
    text
}

/// A match's wins by a repetition ruling and its results with them as draws, as
/// `xq-worker match` gives them; none while no game was won so.
pub fn over_the_board_line(job: &v1::Job) -> Option<String> {
    let board = job.over_the_board.as_ref().filter(|b| b.new_ruled_wins + b.base_ruled_wins > 0)?;
    let mut line = format!(
        "won by a repetition ruling: {} {}, {} {}; over the board (those as draws): pentanomial {:?}",
        job.new_engine, board.new_ruled_wins, job.base_engine, board.base_ruled_wins, board.pentanomial
    );
    if let Some(elo) = &board.elo {
        line.push_str(&format!(", Elo {:+.1} [{:+.1}, {:+.1}]", elo.elo, elo.low, elo.high));
    }
    Some(line)
}

/// One line describing a net of the registry.
pub fn net_line(net: &v1::Net) -> String {
    let parent = match (net.generation, net.parent_id) {
        (0, _) => "none (the lineage's seed)".to_owned(),
        (_, 0) => "handcrafted".to_owned(),
        (_, id) => format!("net {id}"),
    };
    let test = if net.test_job_id == 0 { String::new() } else { format!(" by job {}", net.test_job_id) };
    format!(
        "net {} {} generation {} [{}{test}] {}: parent {parent}, data job {}, {} positions, {} epochs, \
         loss {:.5} validation {:.5}",
        net.net_id,
        net.lineage,
        net.generation,
        net.state,
        net.artifact.as_ref().map_or("", |a| a.name.as_str()),
        net.data_job_id,
        net.positions,
        net.epochs,
        net.train_loss,
        net.validation_loss
    )
}

/// Off a terminal, the least time between two status lines: a log of a long test
/// stays short (a line per finished pair made hundreds of them).
const LOG_INTERVAL: std::time::Duration = std::time::Duration::from_secs(10);

/// Follows a job until it ends; prints its last state. On a terminal a progress bar
/// shows every change; in a log a line shows the results at most every
/// [`LOG_INTERVAL`], and the last state always.
pub async fn watch(client: &mut Client, job: u64) -> anyhow::Result<()> {
    let mut stream = client.watch_job(v1::JobId { job_id: job }).await?.into_inner();
    let bar = std::io::stderr().is_terminal().then(|| {
        let bar = ProgressBar::new(1000);
        bar.set_style(ProgressStyle::with_template("{bar:30} {elapsed_precise} {msg}").expect("a valid template"));
        bar
    });
    let mut last: Option<v1::Job> = None;
    let mut log = StatusLog::default();
    loop {
        let state = tokio::select! {
            state = stream.message() => state?,
            () = tokio::time::sleep_until(log.due()), if bar.is_none() && log.pending.is_some() => {
                log.flush();
                continue;
            }
        };
        let Some(state) = state else { break };
        // Progress: an SPRT's LLR between its bounds, else the units done.
        let fraction = match &state.sprt {
            Some(s) => ((s.llr - s.lower) / (s.upper - s.lower)).clamp(0.0, 1.0),
            None => state.units_done as f64 / state.units_total.max(1) as f64,
        };
        let line = job_line(&state);
        match &bar {
            Some(bar) => {
                bar.set_position((fraction * 1000.0) as u64);
                bar.set_message(line);
            }
            None => log.offer(line),
        }
        last = Some(state);
    }
    match (bar, last) {
        // The bar is cleared at the end, its last state printed in its place.
        (Some(bar), Some(state)) => {
            bar.finish_and_clear();
            out!("{}", job_line(&state));
        }
        (None, _) => log.flush(),
        (Some(_), None) => {}
    }
    Ok(())
}

/// The status lines of a watch written to a log: a line per change of the results
/// (not per lease given or returned: the stream sends both), at most one per
/// [`LOG_INTERVAL`]; a change that comes sooner waits for its turn.
#[derive(Default)]
struct StatusLog {
    printed: Option<String>,
    printed_at: Option<tokio::time::Instant>,
    pending: Option<String>,
}

impl StatusLog {
    /// When the pending line may be printed.
    fn due(&self) -> tokio::time::Instant {
        self.printed_at.map_or_else(tokio::time::Instant::now, |at| at + LOG_INTERVAL)
    }

    fn offer(&mut self, line: String) {
        if self.printed.as_ref() == Some(&line) {
            self.pending = None;
            return;
        }
        self.pending = Some(line);
        if self.due() <= tokio::time::Instant::now() {
            self.flush();
        }
    }

    /// Prints the pending line, if any, now.
    fn flush(&mut self) {
        if let Some(line) = self.pending.take() {
            eprintln!("{line}");
            self.printed = Some(line);
            self.printed_at = Some(tokio::time::Instant::now());
        }
    }
}

fn counts(text: &str, n: usize, what: &str) -> anyhow::Result<Vec<u64>> {
    let values: Vec<u64> = text
        .split(',')
        .map(|c| c.trim().parse::<u64>().with_context(|| format!("{what}: '{c}' is not a count")))
        .collect::<Result<_, _>>()?;
    if values.len() != n {
        bail!("{what} needs {n} counts, not {}", values.len());
    }
    Ok(values)
}

fn llr(args: &LlrArgs) -> anyhow::Result<()> {
    let results = match (&args.penta, &args.trinomial) {
        (Some(text), None) => counts(text, 5, "--penta")?,
        (None, Some(text)) => counts(text, 3, "--trinomial")?,
        _ => bail!("give --penta N0,N1,N2,N3,N4 or --trinomial L,D,W"),
    };
    let model = match args.model.as_str() {
        "normalized" => Model::Normalized,
        "logistic" => Model::Logistic,
        other => bail!("--model {other}: use normalized or logistic"),
    };
    let state = Sprt::new(args.elo0, args.elo1, args.alpha, args.beta, model)?.state(&results)?;
    let elo = elo_estimate(&results)?;
    let decision = match state.decision() {
        Some(true) => "H1 accepted",
        Some(false) => "H0 accepted",
        None => "continue",
    };
    if args.json {
        let object = serde_json::json!({
            "llr": state.llr, "lower": state.lower, "upper": state.upper,
            "elo": elo.elo, "elo_low": elo.low, "elo_high": elo.high,
            "los": elo.los, "nelo": elo.nelo, "decision": decision,
        });
        out!("{object}");
    } else {
        out!("LLR {:.4} ({:.4}, {:.4}): {decision}", state.llr, state.lower, state.upper);
        out!(
            "Elo {:+.2} [{:+.2}, {:+.2}], nElo {:+.2}, LOS {:.2}%",
            elo.elo,
            elo.low,
            elo.high,
            elo.nelo,
            elo.los * 100.0
        );
    }
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
