//! The closed loop on a coordinator, generation after generation: a self-play job with
//! the lineage's best net (before the first promotion its seed, a net trained elsewhere
//! such as the engine's embedded one, or without a seed the handcrafted evaluation),
//! training on the newest generations' data from the best net's checkpoint, the new
//! net uploaded and recorded in the coordinator's registry with its parent, data and
//! losses, and an SPRT of the engine with the new net against the engine with the best
//! one. The coordinator's verdict promotes the net (the registry reads it off the
//! test), and the next generation plays with the lineage's newest promoted net.
//!
//! Everything a generation did is on the coordinator (jobs, artifacts, the registry);
//! the loop's directory keeps the jobs of the generation in progress in
//! `loop-state.json`, written atomically after each step, and the training runs'
//! checkpoints, so that a killed loop, started again, goes on where it stopped: it
//! waits for the job it had created, resumes the training from its checkpoint, and
//! repeats the idempotent registry calls.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use xq_proto::client::{self, Client, ClientError};
use xq_proto::v1;

use crate::data::find_chunks;
use crate::train::{Factorising, TrainError, TrainSettings, checkpoint_path, train};

/// The UCI option that switches our engine to its handcrafted evaluation.
pub const HANDCRAFTED_OPTION: (&str, &str) = ("UseNNUE", "false");

/// How each generation's self-play is played.
#[derive(Clone, Debug)]
pub struct SelfPlayPlan {
    /// Search nodes per move.
    pub nodes: u64,
    /// Units per generation.
    pub units: u64,
    /// Games per unit.
    pub games_per_unit: u32,
    /// Random opening plies.
    pub random_plies: u32,
    /// The seed of generation 1; generation g uses `seed + g * 1_000_003`, so that no
    /// two generations open alike.
    pub seed: u64,
}

/// How each new net is tested.
#[derive(Clone, Debug)]
pub struct TestPlan {
    /// Time control at the coordinator's reference speed.
    pub time_control: String,
    /// The SPRT's bounds (normalized Elo) and error rates.
    pub elo0: f64,
    pub elo1: f64,
    pub alpha: f64,
    pub beta: f64,
    /// The most pairs before the test stops undecided (the net is then rejected).
    pub max_pairs: u64,
    /// Pairs of the fixed-length match a promoted net then plays against its parent,
    /// from the openings after those the SPRT counted: the Elo to quote, which the
    /// SPRT's own is not (stopping when the evidence is strong enough biases it up).
    /// 0: none.
    pub confirm_pairs: u64,
    /// Opening book; none: the coordinator's default book.
    pub book: Option<PathBuf>,
}

/// The loop's settings.
#[derive(Clone, Debug)]
pub struct LoopSettings {
    /// The lineage's name in the registry.
    pub lineage: String,
    /// The loop's directory: its state, the downloaded data, each generation's run.
    pub dir: PathBuf,
    /// The generation to stop after.
    pub generations: u32,
    /// Generations of data each net is trained on (the newest ones).
    pub window: usize,
    /// The engine binary tested (our `xq-engine`).
    pub engine: PathBuf,
    /// The seed: the net file (`XQNN`) generation 0 is, which the first generation
    /// plays, trains from and is tested against; none: the handcrafted evaluation.
    pub seed: Option<Vec<u8>>,
    pub self_play: SelfPlayPlan,
    pub test: TestPlan,
    /// Training settings; the data description, the starting model and whether it is
    /// trained factorised are set per generation.
    pub train: TrainSettings,
    /// Whether a generation trains factorised, resolved against the model it starts
    /// from (by default: a fresh net's lineage stays factorised, a seed net's not).
    pub factorising: Factorising,
    pub device: tch::Device,
    /// How often jobs are polled.
    pub poll: Duration,
}

/// What stopped the loop.
#[derive(Debug, thiserror::Error)]
pub enum LoopError {
    /// The coordinator could not be reached or refused a call.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// Training failed.
    #[error(transparent)]
    Train(#[from] TrainError),
    /// The loop's state file.
    #[error("the loop's state {path}: {reason}")]
    State {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// A file of the loop's own (its new net).
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A job ended in a way the loop cannot go on from.
    #[error("{0}")]
    Job(String),
}

impl From<tonic::Status> for LoopError {
    fn from(status: tonic::Status) -> Self {
        LoopError::Client(ClientError::Status(status))
    }
}

/// The loop's own record: every generation's self-play job, and the test of the
/// generation in progress.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
struct LoopState {
    /// The lineage the directory belongs to.
    lineage: String,
    /// The generation in progress (1 = the first net).
    generation: u32,
    /// Self-play jobs, oldest first; the last one may be the generation in progress'.
    data_jobs: Vec<u64>,
    /// Whether the last of `data_jobs` is this generation's.
    data_job_created: bool,
    /// The generation's test, once created.
    test_job: Option<u64>,
    /// Its fixed-length confirmation, once created: kept like the test, so that a loop
    /// resumed by a newer trainer (whose request may differ, so another digest under
    /// the same request id) waits on it rather than asking for it again.
    #[serde(default)]
    confirmation_job: Option<u64>,
    /// When the generation in progress passed each stage.
    #[serde(default)]
    stages: StageTimes,
}

/// When a generation passed each of its stages, in milliseconds since the Unix epoch
/// (0: not yet), all read from its jobs as the coordinator stamped them (one clock):
/// the stages are the times its jobs were on the fleet, and the time between them, when
/// the loop had none there. A loop down when a job ended so counts the time after it
/// as the fleet's idle time (it trains on resuming), not as the job's. Kept in the
/// loop's state, so that a resumed loop reports its generation's stages whole.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StageTimes {
    /// Its self-play job was created.
    pub started_ms: i64,
    /// The self-play job finished.
    pub self_played_ms: i64,
    /// Its net was trained, recorded in the registry and its test job created.
    pub trained_ms: i64,
    /// Its test (and the confirmation, if any) finished.
    pub tested_ms: i64,
    /// From the test's end to its confirmation's creation: no job on the fleet either.
    #[serde(default)]
    pub confirmation_wait_ms: i64,
}

impl StageTimes {
    /// The self-play's, the time without a job on the fleet (the training's, with the
    /// wait for a confirmation) and the tests'.
    pub fn durations(&self) -> [Duration; 3] {
        let between = |from: i64, to: i64| Duration::from_millis(u64::try_from(to - from).unwrap_or(0));
        let tests = between(self.trained_ms, self.tested_ms);
        // Within the tests' span, so that the stages add up to the generation.
        let wait = Duration::from_millis(u64::try_from(self.confirmation_wait_ms).unwrap_or(0)).min(tests);
        [
            between(self.started_ms, self.self_played_ms),
            between(self.self_played_ms, self.trained_ms) + wait,
            tests - wait,
        ]
    }

    /// The share of the generation during which the loop had no job on the fleet: the
    /// data's download, the training, the net's upload, the wait before a confirmation
    /// (and any time the loop was down then). Workers that serve this loop alone are
    /// idle for that share.
    pub fn idle_share(&self) -> f64 {
        let [self_play, training, test] = self.durations();
        let total = (self_play + training + test).as_secs_f64();
        if total > 0.0 { training.as_secs_f64() / total } else { 0.0 }
    }

    /// One line: each stage's time and the workers' idle share.
    pub fn summary(&self) -> String {
        let [self_play, training, test] = self.durations();
        let minutes = |d: Duration| format!("{:.1} min", d.as_secs_f64() / 60.0);
        format!(
            "self-play {}, training {}, test {}; the fleet idle {:.0}% of {}",
            minutes(self_play),
            minutes(training),
            minutes(test),
            100.0 * self.idle_share(),
            minutes(self_play + training + test)
        )
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// Stamps `stamp` with the coordinator's `at_ms`, which is fixed once its job has
/// passed the stage (and replaces a stamp an older trainer took by its own clock); or,
/// when the coordinator keeps no such stamp (0: an older one), with the time now,
/// once. Saves the state.
fn passed(
    state: &mut LoopState,
    dir: &Path,
    stamp: fn(&mut StageTimes) -> &mut i64,
    at_ms: i64,
) -> Result<(), LoopError> {
    let time = stamp(&mut state.stages);
    let stamped = if at_ms > 0 {
        at_ms
    } else if *time == 0 {
        now_ms()
    } else {
        *time
    };
    if *time != stamped {
        *time = stamped;
        state.save(dir)?;
    }
    Ok(())
}

impl LoopState {
    fn path(dir: &Path) -> PathBuf {
        dir.join("loop-state.json")
    }

    fn load(dir: &Path, lineage: &str) -> Result<LoopState, LoopError> {
        let path = Self::path(dir);
        let error = |reason: String| LoopError::State { path: path.clone(), reason };
        let state = match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice::<LoopState>(&bytes).map_err(|e| error(e.to_string()))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                LoopState { lineage: lineage.to_owned(), generation: 1, ..LoopState::default() }
            }
            Err(e) => return Err(error(e.to_string())),
        };
        if state.lineage != lineage {
            return Err(error(format!("this directory runs lineage '{}', not '{lineage}'", state.lineage)));
        }
        Ok(state)
    }

    /// Writes the state through a temporary file, synced and renamed.
    fn save(&self, dir: &Path) -> Result<(), LoopError> {
        use std::io::Write;
        let path = Self::path(dir);
        let error = |e: std::io::Error| LoopError::State { path: path.clone(), reason: e.to_string() };
        let temporary = path.with_extension("tmp");
        let mut file = std::fs::File::create(&temporary).map_err(error)?;
        file.write_all(&serde_json::to_vec_pretty(self).expect("the state serialises")).map_err(error)?;
        file.sync_all().map_err(error)?;
        std::fs::rename(&temporary, &path).map_err(error)
    }
}

/// What a finished generation gave.
#[derive(Clone, Debug)]
pub struct GenerationReport {
    /// The net as the registry has it, with its state.
    pub net: v1::Net,
    /// Its test.
    pub test: v1::Job,
    /// The fixed-length match a promoted net played after its test, if the plan asks.
    pub confirmation: Option<v1::Job>,
    /// When it passed each stage.
    pub stages: StageTimes,
}

/// The best net a generation starts from: the lineage's newest promoted net of an
/// earlier generation, or its seed (none: the handcrafted evaluation). Earlier only: a
/// loop resumed after its own generation's net was promoted must not take that net as
/// its parent.
pub async fn best_net(client: &mut Client, lineage: &str, generation: u32) -> Result<Option<v1::Net>, LoopError> {
    let nets = client.list_nets(v1::ListNetsRequest { lineage: lineage.to_owned() }).await?.into_inner().nets;
    Ok(best_before(nets, generation))
}

fn best_before(nets: Vec<v1::Net>, generation: u32) -> Option<v1::Net> {
    nets.into_iter()
        .filter(|n| (n.state == "promoted" || n.state == "seed") && n.generation < generation)
        .max_by_key(|n| n.generation)
}

/// The seed's file in the loop's directory, which the first generation trains from.
fn seed_path(dir: &Path) -> PathBuf {
    dir.join("seed.xqnn")
}

/// Records `bytes` as the lineage's seed (generation 0), and keeps them in the loop's
/// directory. Repeatable: a resumed loop makes the same calls; a lineage seeded with
/// another net refuses the call.
async fn plant_seed(client: &mut Client, settings: &LoopSettings, bytes: &[u8]) -> Result<v1::Net, LoopError> {
    let description = xq_engine::xiangqi::nnue::Network::from_bytes(bytes)
        .map_err(|e| LoopError::Job(format!("the seed net: {e}")))?
        .description()
        .to_owned();
    let artifact = client::upload_artifact(client, &format!("{}-seed.xqnn", settings.lineage), "net", bytes).await?;
    let net = client
        .add_net(v1::AddNetRequest {
            artifact: Some(artifact),
            lineage: settings.lineage.clone(),
            generation: 0,
            description,
            ..Default::default()
        })
        .await?
        .into_inner();
    let path = seed_path(&settings.dir);
    std::fs::write(&path, bytes).map_err(|source| LoopError::Io { path, source })?;
    Ok(net)
}

/// Runs generations until `settings.generations` is done or `stop` is raised;
/// `report` hears of each finished generation and `say` of each step.
pub async fn run(
    client: &mut Client,
    settings: &LoopSettings,
    stop: Arc<AtomicBool>,
    mut report: impl FnMut(&GenerationReport),
    say: impl Fn(&str),
) -> Result<(), LoopError> {
    std::fs::create_dir_all(&settings.dir)
        .map_err(|e| LoopError::State { path: settings.dir.clone(), reason: e.to_string() })?;
    let mut state = LoopState::load(&settings.dir, &settings.lineage)?;
    let engine = client::upload_file(client, &settings.engine, "engine").await?;
    let book = match &settings.test.book {
        Some(path) => Some(client::upload_file(client, path, "book").await?),
        None => None,
    };
    if let Some(bytes) = &settings.seed {
        let seed = plant_seed(client, settings, bytes).await?;
        say(&format!("lineage {}: seed net {} ({})", settings.lineage, seed.net_id, seed.description));
    }
    while state.generation <= settings.generations {
        let generation = state.generation;
        let best = best_net(client, &settings.lineage, generation).await?;
        let parent =
            best.as_ref().map_or_else(|| "the handcrafted evaluation".to_owned(), |n| format!("net {}", n.net_id));

        // Self-play with the best net.
        if !state.data_job_created {
            // Named: a job made just before a kill, before the state recorded it, is the
            // answer to the same creation sent again.
            let job = create_self_play(client, settings, generation, best.as_ref()).await?;
            say(&format!("generation {generation}: self-play job {} with {parent}: {}", job.job_id, job.summary));
            state.data_jobs.push(job.job_id);
            state.data_job_created = true;
            state.stages = StageTimes::default();
            state.save(&settings.dir)?;
        }
        let data_job = *state.data_jobs.last().expect("a data job was created");
        let Some(played) = wait_for(client, data_job, settings, &stop, &say).await? else { return Ok(()) };
        if played.state != "finished" {
            return Err(LoopError::Job(format!(
                "self-play job {data_job} was {} before it finished; remove the loop's state to start the \
                 generation again",
                played.state
            )));
        }
        passed(&mut state, &settings.dir, |s| &mut s.started_ms, played.created_ms)?;
        passed(&mut state, &settings.dir, |s| &mut s.self_played_ms, played.ended_ms)?;

        // Training on the newest generations' data, from the best net's checkpoint.
        let window = &state.data_jobs[state.data_jobs.len().saturating_sub(settings.window.max(1))..];
        let mut chunks = Vec::new();
        for &job in window {
            let dir = settings.dir.join("data").join(format!("job{job}"));
            client::download_training_data(client, job, &dir).await?;
            chunks.extend(find_chunks(&dir).map_err(TrainError::from)?);
        }
        let run_dir = settings.dir.join(format!("generation{generation}"));
        // The best net's checkpoint, when this directory trained it, or the seed's net
        // file; a loop moved to another machine starts a fresh net (tested against the
        // best all the same).
        let init = best
            .as_ref()
            .map(|n| match n.generation {
                0 => seed_path(&settings.dir),
                generation => checkpoint_path(&settings.dir.join(format!("generation{generation}"))),
            })
            .filter(|p| p.exists());
        if let (Some(best), None) = (&best, &init) {
            say(&format!(
                "generation {generation}: no checkpoint of net {} (generation {}) in {}: training a fresh net",
                best.net_id,
                best.generation,
                settings.dir.display()
            ));
        }
        // The first generation's validation games are every generation's fixed set, so
        // that the lineage's losses compare (still held out when its data is trained on).
        let first = state.data_jobs[0];
        let first_dir = settings.dir.join("data").join(format!("job{first}"));
        client::download_training_data(client, first, &first_dir).await?;
        let jobs: Vec<String> = window.iter().map(u64::to_string).collect();
        let train_settings = TrainSettings {
            data: format!("lineage {} generation {generation}: self-play jobs {}", settings.lineage, jobs.join(", ")),
            factorise: settings.factorising.resolve(&run_dir, init.as_deref()).map_err(TrainError::from)?,
            init: init.clone(),
            fixed_validation: find_chunks(&first_dir).map_err(TrainError::from)?,
            ..settings.train.clone()
        };
        say(&format!(
            "generation {generation}: training on {} chunks of jobs {} from {}",
            chunks.len(),
            jobs.join(", "),
            init.as_ref().map_or("a fresh net".to_owned(), |p| p.display().to_string())
        ));
        let (device, flag, dir) = (settings.device, stop.clone(), run_dir.clone());
        let summary = tokio::task::spawn_blocking(move || train(&chunks, &train_settings, &dir, device, &flag, false))
            .await
            .map_err(|e| LoopError::Job(format!("the training thread failed: {e}")))??;
        let Some(net_path) = summary.net.clone() else {
            say(&format!("stopped; the checkpoint is in {}: run the loop again to resume", run_dir.display()));
            return Ok(());
        };
        // The net is the best epoch's, not the last's (a run stopped for want of a lower
        // validation loss ends past it): its losses are the ones recorded.
        let exported = summary.exported_entry().cloned().unwrap_or_default();
        let number = |key: &str| exported.get(key).and_then(serde_json::Value::as_f64).unwrap_or(0.0);

        // The net in the registry.
        let bytes = std::fs::read(&net_path).map_err(|source| LoopError::Io { path: net_path.clone(), source })?;
        let name = format!("{}-gen{generation}.xqnn", settings.lineage);
        let artifact = client::upload_artifact(client, &name, "net", &bytes).await?;
        let description = xq_engine::xiangqi::nnue::Network::from_bytes(&bytes)
            .map(|n| n.description().to_owned())
            .unwrap_or_default();
        let net = client
            .add_net(v1::AddNetRequest {
                artifact: Some(artifact.clone()),
                lineage: settings.lineage.clone(),
                generation,
                parent_id: best.as_ref().map_or(0, |n| n.net_id),
                data_job_id: data_job,
                train_loss: number("train_loss"),
                validation_loss: number("validation_loss"),
                positions: number("positions") as u64,
                epochs: summary.epochs as u32,
                description,
            })
            .await?
            .into_inner();
        say(&format!(
            "generation {generation}: net {} ({name}), validation loss {:.5}",
            net.net_id, net.validation_loss
        ));

        // The SPRT against the best net.
        let test_job = recorded_test(
            client,
            settings,
            &mut state,
            |s| &mut s.test_job,
            "test",
            &say,
            || test_request(settings, &engine, &artifact, best.as_ref(), book.clone(), generation),
        )
        .await?;
        client.set_net_test(v1::SetNetTestRequest { net_id: net.net_id, test_job_id: test_job }).await?;
        let Some(test) = wait_for(client, test_job, settings, &stop, &say).await? else { return Ok(()) };
        let nets = client.list_nets(v1::ListNetsRequest { lineage: settings.lineage.clone() }).await?.into_inner();
        let net = nets.nets.into_iter().find(|n| n.net_id == net.net_id).unwrap_or(net);
        say(&format!("generation {generation}: net {} {} ({})", net.net_id, net.state, test.outcome));
        let confirmation = if net.state == "promoted" && settings.test.confirm_pairs > 0 {
            let job = recorded_test(
                client,
                settings,
                &mut state,
                |s| &mut s.confirmation_job,
                "confirmation",
                &say,
                || {
                    let mut request =
                        test_request(settings, &engine, &artifact, best.as_ref(), book.clone(), generation);
                    request.sprt = None;
                    request.pairs = settings.test.confirm_pairs;
                    request.book_offset = test.units_done;
                    request.description = format!("{}: fixed-length confirmation", request.description);
                    request
                },
            )
            .await?;
            let Some(played) = wait_for(client, job, settings, &stop, &say).await? else { return Ok(()) };
            Some(played)
        } else {
            None
        };
        passed(&mut state, &settings.dir, |s| &mut s.trained_ms, test.created_ms)?;
        // Known only from the coordinator's stamps (an older one keeps no ends).
        if let Some(confirmation) = confirmation.as_ref().filter(|c| c.created_ms > 0 && test.ended_ms > 0) {
            state.stages.confirmation_wait_ms = (confirmation.created_ms - test.ended_ms).max(0);
        }
        let tested_ms = confirmation.as_ref().map_or(test.ended_ms, |c| c.ended_ms);
        passed(&mut state, &settings.dir, |s| &mut s.tested_ms, tested_ms)?;
        report(&GenerationReport { net, test, confirmation, stages: state.stages });
        state = LoopState {
            generation: generation + 1,
            data_job_created: false,
            test_job: None,
            confirmation_job: None,
            stages: StageTimes::default(),
            ..state
        };
        state.save(&settings.dir)?;
    }
    Ok(())
}

fn self_play_label(lineage: &str, generation: u32) -> String {
    format!("lineage {lineage} generation {generation} self-play")
}

/// The name of a generation's creation (`what`: its self-play, test or confirmation), the same
/// whenever the loop sends it: the coordinator answers it with the job it made first.
fn request_id(lineage: &str, generation: u32, what: &str) -> String {
    format!("loop.{lineage}.{generation}.{what}")
}

async fn create_self_play(
    client: &mut Client,
    settings: &LoopSettings,
    generation: u32,
    best: Option<&v1::Net>,
) -> Result<v1::Job, LoopError> {
    let plan = &settings.self_play;
    let spec = v1::SelfPlaySpec {
        nodes: plan.nodes,
        games_per_unit: plan.games_per_unit,
        random_plies: plan.random_plies,
        seed: plan.seed.wrapping_add(u64::from(generation).wrapping_mul(1_000_003)),
        rules: "wxf".to_owned(),
        max_plies: 0,
        variant: "xiangqi".to_owned(),
        net: best.and_then(|n| n.artifact.clone()),
    };
    let request = v1::CreateSelfPlayRequest {
        spec: Some(spec),
        units: plan.units,
        priority: 0,
        description: self_play_label(&settings.lineage, generation),
        throughput: 0,
        lineage: settings.lineage.clone(),
    };
    let id = request_id(&settings.lineage, generation, "selfplay");
    Ok(client::create_named(client, &request, &id, |mut client, request| async move {
        client.create_self_play(request).await
    })
    .await?)
}

/// A generation's test or its confirmation (`stage`): the job its state's `slot`
/// recorded, or else the one the coordinator makes under the stage's request id (the
/// same job again when a kill came between its creation and the state's save), then
/// recorded.
async fn recorded_test(
    client: &mut Client,
    settings: &LoopSettings,
    state: &mut LoopState,
    slot: fn(&mut LoopState) -> &mut Option<u64>,
    stage: &str,
    say: &impl Fn(&str),
    request: impl FnOnce() -> v1::CreateTestRequest,
) -> Result<u64, LoopError> {
    if let Some(job) = *slot(state) {
        return Ok(job);
    }
    let generation = state.generation;
    let id = request_id(&settings.lineage, generation, stage);
    let job = client::create_named(client, &request(), &id, |mut client, request| async move {
        client.create_test(request).await
    })
    .await?;
    say(&format!("generation {generation}: {stage} job {}: {}", job.job_id, job.summary));
    *slot(state) = Some(job.job_id);
    state.save(&settings.dir)?;
    Ok(job.job_id)
}

/// Our engine with the new net against our engine with the best one (or on its
/// handcrafted evaluation).
fn test_request(
    settings: &LoopSettings,
    engine: &v1::ArtifactRef,
    net: &v1::ArtifactRef,
    best: Option<&v1::Net>,
    book: Option<v1::ArtifactRef>,
    generation: u32,
) -> v1::CreateTestRequest {
    let player = |name: &str, net: Option<v1::ArtifactRef>| {
        let mut options = HashMap::new();
        if net.is_none() {
            options.insert(HANDCRAFTED_OPTION.0.to_owned(), HANDCRAFTED_OPTION.1.to_owned());
        }
        v1::EngineSpec {
            name: name.to_owned(),
            binary: Some(engine.clone()),
            protocol: "uci".to_owned(),
            options,
            net,
            ..Default::default()
        }
    };
    let plan = &settings.test;
    let base_name = best.map_or("handcrafted".to_owned(), |n| format!("gen{}", n.generation));
    v1::CreateTestRequest {
        new_engine: Some(player(&format!("gen{generation}"), Some(net.clone()))),
        base_engine: Some(player(&base_name, best.and_then(|n| n.artifact.clone()))),
        time_control: plan.time_control.clone(),
        rules: "wxf".to_owned(),
        violation_timing: String::new(),
        book_offset: 0,
        variant: "xiangqi".to_owned(),
        book,
        max_plies: 0,
        sprt: Some(v1::SprtSpec {
            elo0: plan.elo0,
            elo1: plan.elo1,
            alpha: plan.alpha,
            beta: plan.beta,
            model: "normalized".to_owned(),
            trinomial: false,
        }),
        pairs: plan.max_pairs,
        priority: 0,
        required_cpu_flags: Vec::new(),
        description: format!("lineage {} generation {generation}: net test against {base_name}", settings.lineage),
        throughput: 0,
        adjudication: None,
        source: None,
        notify_url: String::new(),
        preset: String::new(),
        // Without a book of its own, the loop's tests play the coordinator's.
        start_position: false,
        lineage: settings.lineage.clone(),
    }
}

/// How long the loop waits for a coordinator that stopped answering (restarted,
/// upgraded, its machine rebooted) before it gives up: the jobs go on without it.
pub const OUTAGE_PATIENCE: Duration = Duration::from_secs(15 * 60);

/// Polls a job until it ends; none when `stop` was raised first. A coordinator that
/// stops answering for a while (a restart) is waited for, up to [`OUTAGE_PATIENCE`].
async fn wait_for(
    client: &mut Client,
    job: u64,
    settings: &LoopSettings,
    stop: &AtomicBool,
    say: &impl Fn(&str),
) -> Result<Option<v1::Job>, LoopError> {
    let mut last_done = u64::MAX;
    let mut silent_since: Option<std::time::Instant> = None;
    loop {
        let state = match client.get_job(v1::JobId { job_id: job }).await {
            Ok(reply) => reply.into_inner(),
            Err(status) if client::transient(&status) => {
                let since = *silent_since.get_or_insert_with(|| {
                    say(&format!("job {job}: the coordinator does not answer ({}); waiting for it", status.message()));
                    std::time::Instant::now()
                });
                if since.elapsed() > OUTAGE_PATIENCE || stop.load(Ordering::Relaxed) {
                    return Err(status.into());
                }
                tokio::time::sleep(settings.poll.max(Duration::from_secs(1))).await;
                continue;
            }
            Err(status) => return Err(status.into()),
        };
        if silent_since.take().is_some() {
            say(&format!("job {job}: the coordinator answers again"));
        }
        if state.state != "running" {
            return Ok(Some(state));
        }
        if state.units_done != last_done {
            last_done = state.units_done;
            say(&format!("job {job}: {}/{} units", state.units_done, state.units_total));
        }
        if stop.load(Ordering::Relaxed) {
            say(&format!("stopped while job {job} runs: run the loop again to go on waiting for it"));
            return Ok(None);
        }
        tokio::time::sleep(settings.poll).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(generation: u32, state: &str) -> v1::Net {
        v1::Net { net_id: u64::from(generation), generation, state: state.to_owned(), ..Default::default() }
    }

    #[test]
    fn a_generation_s_stages_give_its_durations_and_the_fleet_s_idle_share() {
        let minute = 60_000;
        let stages = StageTimes {
            started_ms: minute,
            self_played_ms: 31 * minute,
            trained_ms: 36 * minute,
            tested_ms: 51 * minute,
            confirmation_wait_ms: 0,
        };
        assert_eq!(stages.durations().map(|d| d.as_secs() / 60), [30, 5, 15]);
        assert_eq!(stages.idle_share(), 0.1);
        assert_eq!(
            stages.summary(),
            "self-play 30.0 min, training 5.0 min, test 15.0 min; the fleet idle 10% of 50.0 min"
        );
        // The wait between the test's end and its confirmation's creation is idle time.
        let confirmed = StageTimes { confirmation_wait_ms: 2 * minute, ..stages };
        assert_eq!(confirmed.durations().map(|d| d.as_secs() / 60), [30, 7, 13]);
        assert_eq!(confirmed.idle_share(), 0.14);
        // A wait longer than the tests (stamps of two clocks) is held within them.
        let skewed = StageTimes { confirmation_wait_ms: 60 * minute, ..stages };
        assert_eq!(skewed.durations().map(|d| d.as_secs() / 60), [30, 20, 0]);
        // A stage not passed yet counts nothing, and an empty record no share.
        let partial = StageTimes { tested_ms: 0, ..stages };
        assert_eq!(partial.durations()[2], Duration::ZERO);
        assert_eq!(StageTimes::default().idle_share(), 0.0);
        // States written before the stages were kept still read.
        let old = r#"{"lineage": "l", "generation": 2, "data_jobs": [1], "data_job_created": true, "test_job": null}"#;
        assert_eq!(serde_json::from_str::<LoopState>(old).unwrap().stages, StageTimes::default());
    }

    #[test]
    fn the_coordinator_s_stamps_replace_the_loop_s_own_and_the_loop_stamps_only_what_it_lacks() {
        let dir = tempfile::tempdir().unwrap();
        let mut state = LoopState { lineage: "l".to_owned(), generation: 1, ..LoopState::default() };
        // An older trainer's stamp by its own clock gives way to the job's.
        state.stages.started_ms = 5;
        passed(&mut state, dir.path(), |s| &mut s.started_ms, 7).unwrap();
        assert_eq!(state.stages.started_ms, 7);
        // A coordinator with no stamp leaves one there as it is, and stamps an empty
        // one with the time now; both are saved.
        passed(&mut state, dir.path(), |s| &mut s.started_ms, 0).unwrap();
        assert_eq!(state.stages.started_ms, 7);
        let before = now_ms();
        passed(&mut state, dir.path(), |s| &mut s.self_played_ms, 0).unwrap();
        assert!(state.stages.self_played_ms >= before, "{:?}", state.stages);
        assert_eq!(LoopState::load(dir.path(), "l").unwrap(), state);
    }

    #[test]
    fn the_best_net_is_the_newest_promoted_one_before_the_generation() {
        let nets = vec![net(4, "testing"), net(3, "promoted"), net(2, "rejected"), net(1, "promoted")];
        assert_eq!(best_before(nets.clone(), 4).map(|n| n.generation), Some(3));
        // Generation 3 resumed after its own net's promotion still starts from net 1.
        assert_eq!(best_before(nets.clone(), 3).map(|n| n.generation), Some(1));
        assert_eq!(best_before(nets, 1), None, "the first generation plays the handcrafted evaluation");
        // A seeded lineage starts from its seed until a net is promoted.
        let seeded = vec![net(2, "rejected"), net(1, "rejected"), net(0, "seed")];
        assert_eq!(best_before(seeded.clone(), 1).map(|n| n.generation), Some(0));
        assert_eq!(best_before(seeded, 3).map(|n| n.generation), Some(0));
    }
}
