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

// One module a command group; this file lists the commands and hands each to its own.
mod accounts;
mod builds;
mod connection;
mod jobs;
mod llr;
mod local;
mod nets;
mod play;
mod release;
mod selfplay;
mod spsa;
mod test_jobs;
mod tokens;
mod tournament;
mod verify;
mod workers;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use xq_proto::client;
use xq_proto::v1;

use crate::connection::{Connection, connect};

#[derive(Parser)]
#[command(name = "xq", version, about = "The xq-cluster client: tests, self-play jobs, workers, SPRT arithmetic")]
struct Cli {
    #[command(flatten)]
    connection: Connection,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Submits an SPRT test of --new against --base.
    Sprt(test_jobs::SprtArgs),
    /// Submits a test of a fixed number of games.
    Games(test_jobs::GamesArgs),
    /// Submits an SPSA tuning run of an engine's spin options (fishtest's SPSA).
    Spsa(spsa::SpsaArgs),
    /// Submits a tournament: a test per pairing of a double round robin or a gauntlet,
    /// or a Swiss event or knockout made round by round.
    Tournament(tournament::TournamentArgs),
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
    Selfplay(selfplay::SelfplayArgs),
    /// Creates a rule verification job: a PGN's games (or a test's, or fresh self-play
    /// games) replayed under several rule sets by the fleet, every game where they part
    /// reported.
    Verify(verify::VerifyArgs),
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
        /// Only tests with an engine of this name, on either side.
        #[arg(long)]
        engine: Option<String>,
        /// Only jobs of this submitter (the token id lists give).
        #[arg(long)]
        submitter: Option<String>,
        /// Only the jobs xq-trainer's loop made for this net lineage.
        #[arg(long)]
        lineage: Option<String>,
    },
    /// Shows one job.
    Show { job: u64 },
    /// Watches a job until it ends, with a progress bar.
    Watch { job: u64 },
    /// Stops a job.
    Stop { job: u64 },
    /// Changes a job's priority.
    Priority { job: u64, priority: i32 },
    /// Changes a running or ended test: its share of the fleet, its pairs (an SPRT's
    /// most) or its info text.
    Modify {
        job: u64,
        /// Percent of an equal share of the fleet (100: the default; above it, admins).
        #[arg(long)]
        throughput: Option<u32>,
        /// Pairs: a fixed-length test's number, an SPRT's most.
        #[arg(long)]
        pairs: Option<u64>,
        /// What the test tests, in words.
        #[arg(long)]
        info: Option<String>,
    },
    /// Runs a stopped test again from where it stopped (its counted pairs kept).
    Resume { job: u64 },
    /// The coordinator's presets (`--preset` of sprt and games): named time controls,
    /// SPRT bounds and adjudication.
    Presets,
    /// A new test of a stored test's engines, nets and book (nothing need be on this
    /// disk), with what is given changed.
    Clone {
        job: u64,
        /// Another time control.
        #[arg(long)]
        tc: Option<String>,
        /// A preset (`xq presets`: stc, ltc, nonreg) whose time control, SPRT bounds and
        /// adjudication replace the test's (the flags above and below still win).
        #[arg(long)]
        preset: Option<String>,
        /// Other SPRT bounds (both).
        #[arg(long, requires = "elo1")]
        elo0: Option<f64>,
        #[arg(long, requires = "elo0")]
        elo1: Option<f64>,
        /// Pairs: a fixed-length test's number, an SPRT's most.
        #[arg(long)]
        pairs: Option<u64>,
        /// Its description (default: "clone of N: ..." the original's).
        #[arg(long)]
        description: Option<String>,
        /// What it tests, in words.
        #[arg(long)]
        info: Option<String>,
        /// Follow it until it ends.
        #[arg(long)]
        watch: bool,
    },
    /// Lists workers.
    Workers,
    /// Lists the contributors: each user's and machine's core-hours and games, all
    /// time and the last 30 days.
    Contributors,
    /// Creates a worker token (shown once).
    WorkerToken { name: String },
    /// Worker releases (the operator's): keygen, pack and sign, publish.
    Release {
        #[command(subcommand)]
        action: release::ReleaseCommand,
    },
    /// Creates a worker key of your user (shown once): `xq-worker connect --key-file`
    /// on each of your machines enrolls it as a worker of its own, credited to you.
    WorkerKey { name: String },
    /// Retires one of your machines (an admin: anyone's): its token revoked, the worker
    /// disabled, its counted work kept.
    RetireMachine { worker: u64 },
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
    /// Asks the coordinator for an account (its password from --password-file,
    /// XQ_PASSWORD or standard input); active at once or waiting for acceptance.
    Signup {
        name: String,
        #[command(flatten)]
        password: accounts::Password,
    },
    /// Logs in: a token of the user, kept where `xq` reads it when no other is given.
    Login {
        name: String,
        #[command(flatten)]
        password: accounts::Password,
        /// The token expires after this many days (0: the coordinator's 30).
        #[arg(long, default_value_t = 0.0)]
        expires_days: f64,
        /// Keep the token in this file instead ($XDG_CONFIG_HOME/xq/token or
        /// ~/.config/xq/token).
        #[arg(long)]
        save: Option<PathBuf>,
        /// Also make a worker key of the user and keep it in this file (mode 0600),
        /// for `xq-worker connect --key-file` on each of the user's machines.
        #[arg(long)]
        worker_key: Option<PathBuf>,
    },
    /// Users (admins and approvers): list, accept, role, revoke.
    Users {
        #[command(subcommand)]
        action: accounts::UserCommand,
    },
    /// Users' tokens (admin only): create, list, revoke.
    Token {
        #[command(subcommand)]
        action: tokens::TokenCommand,
    },
    /// Lets a job that waits for approval run (admins, and approvers for others' jobs).
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
    /// and the state their test gives them; with --files, every net file uploaded.
    Nets {
        /// Only this lineage's.
        #[arg(long, default_value = "", conflicts_with = "files")]
        lineage: String,
        /// Every net file uploaded instead, any engine's, newest first: its hash,
        /// name, size, uploader and the jobs naming it.
        #[arg(long)]
        files: bool,
    },
    /// Downloads a self-play job's training chunks into a directory.
    Data {
        job: u64,
        #[arg(short, long)]
        out: PathBuf,
    },
    /// The SPRT calculator: LLR, bounds and Elo of pentanomial or trinomial counts.
    Llr(llr::LlrArgs),
    /// Runs a coordinator and workers on this machine and an SPRT test to its end.
    Local(local::LocalArgs),
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
    let client = &mut match cli.command {
        Command::Llr(args) => return llr::llr(&args),
        Command::Local(args) => return local::run(args).await,
        Command::Signup { name, password } => return accounts::sign_up(&cli.connection, name, &password).await,
        Command::Release { action } if release::is_local(&action) => return release::run_local(action),
        Command::Login { name, password, expires_days, save, worker_key } => {
            let login = accounts::Login { name, expires_days, save, worker_key };
            return accounts::log_in(&cli.connection, login, &password).await;
        }
        _ => connect(&cli.connection).await?,
    };
    match cli.command {
        Command::Sprt(args) => test_jobs::sprt(client, args).await,
        Command::Games(args) => test_jobs::games(client, args).await,
        Command::Spsa(args) => spsa::submit(client, args).await,
        Command::SpsaResult { job, csv, json } => spsa::result(client, job, csv, json).await,
        Command::Tournament(args) => tournament::submit(client, args).await,
        Command::Tournaments { limit } => tournament::list(client, limit).await,
        Command::TournamentStop { tournament } => tournament::stop(client, tournament).await,
        Command::Crosstable { tournament } => tournament::crosstable(client, tournament).await,
        Command::Selfplay(args) => selfplay::submit(client, args).await,
        Command::Verify(args) => verify::submit(client, args).await,
        Command::Verification { job, jsonl, pgn } => verify::report(client, job, jsonl, pgn).await,
        Command::List { all, engine, submitter, lineage } => {
            let request = v1::ListJobsRequest {
                active_only: !all,
                limit: 100,
                engine: engine.unwrap_or_default(),
                submitter: submitter.unwrap_or_default(),
                lineage: lineage.unwrap_or_default(),
                ..Default::default()
            };
            jobs::list(client, request).await
        }
        Command::Show { job } => jobs::show(client, job).await,
        Command::Watch { job } => jobs::watch(client, job).await,
        Command::Stop { job } => jobs::stop(client, job).await,
        Command::Priority { job, priority } => jobs::set_priority(client, job, priority).await,
        Command::Modify { job, throughput, pairs, info } => {
            jobs::modify(client, v1::ModifyJobRequest { job_id: job, throughput, pairs, info }).await
        }
        Command::Resume { job } => jobs::resume(client, job).await,
        Command::Presets => test_jobs::list_presets(client).await,
        Command::Clone { job, tc, preset, elo0, elo1, pairs, description, info, watch } => {
            let request = v1::CloneTestRequest {
                job_id: job,
                time_control: tc.unwrap_or_default(),
                preset: preset.unwrap_or_default(),
                elo0,
                elo1,
                pairs,
                description: description.unwrap_or_default(),
                info,
            };
            jobs::clone(client, request, watch).await
        }
        Command::Approve { job } => jobs::approve(client, job).await,
        Command::Pgn { job, tournament, out } => jobs::download_pgn(client, job, tournament, out).await,
        Command::Workers => workers::list(client).await,
        Command::Contributors => workers::contributors(client).await,
        Command::WorkerToken { name } => workers::create_token(client, name).await,
        Command::WorkerKey { name } => workers::create_key(client, name).await,
        Command::Release { action: release::ReleaseCommand::Publish { bundle } } => {
            release::publish(client, &bundle).await
        }
        Command::Release { .. } => unreachable!("answered before connecting"),
        Command::RetireMachine { worker } => workers::retire(client, worker).await,
        Command::DisableWorker { worker, reason } => workers::set_standing(client, worker, "disabled", reason).await,
        Command::QuarantineWorker { worker, reason } => {
            workers::set_standing(client, worker, "quarantined", reason).await
        }
        Command::EnableWorker { worker } => workers::set_standing(client, worker, "active", String::new()).await,
        Command::Token { action } => tokens::run(client, action).await,
        Command::Users { action } => accounts::run(client, action).await,
        Command::Audit { limit } => tokens::audit(client, limit).await,
        Command::Nets { files: true, .. } => nets::files(client).await,
        Command::Nets { lineage, .. } => nets::list(client, lineage).await,
        Command::Data { job, out } => selfplay::download_data(client, job, out).await,
        Command::Llr(_) | Command::Local(_) | Command::Signup { .. } | Command::Login { .. } => {
            unreachable!("answered before connecting")
        }
    }
}
