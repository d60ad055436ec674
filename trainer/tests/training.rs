//! The trainer end to end on real self-play data: training lowers the validation
//! loss, the exported net loads in the engine and evaluates exactly as the trainer's
//! quantised forward, runs stop and resume exactly, and bad input is refused clearly.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::AtomicBool;

use tch::Device;
use xq_engine::variant::Variant;
use xq_engine::xiangqi::data::{XiongqiRecord, write_xiongqi_chunk};
use xq_engine::xiangqi::nnue::Network;
use xq_engine::xiangqi::rules::{Outcome, RuleSet};
use xq_engine::xiangqi::selfplay::PlaySettings;
use xq_trainer::checkpoint;
use xq_trainer::data::{Batch, Filter, LoaderSettings, Part, Pass, find_chunks, read_chunk_file};
use xq_trainer::export::network;
use xq_trainer::model::quantised_forward;
use xq_trainer::optim::{RateSettings, Schedule};
use xq_trainer::train::{
    Factorising, TrainError, TrainSettings, best_path, checkpoint_path, data_hash, predict, train,
};
use xq_worker::selfplay::{SelfPlaySettings, run_selfplay};

/// Self-play chunks made once for all the tests: 48 games at 400 nodes a move, on one
/// thread so that the games' order in the chunks, and so every test, is the same in
/// every run.
fn data() -> &'static Path {
    static DATA: OnceLock<tempfile::TempDir> = OnceLock::new();
    DATA.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let settings = SelfPlaySettings {
            play: PlaySettings {
                nodes: 400,
                random_plies: 8,
                seed: 11,
                rules: RuleSet::Wxf,
                max_plies: 160,
                network: None,
            },
            games: 48,
            threads: 1,
            chunk_records: 1_000,
            out: dir.path().to_path_buf(),
            variant: Variant::Xiangqi,
            pgn_out: None,
        };
        let report = run_selfplay(&settings).unwrap();
        assert!(report.positions > 3_000, "{} positions", report.positions);
        dir
    })
    .path()
}

fn settings(epochs: usize) -> TrainSettings {
    TrainSettings {
        data: "test self-play".to_owned(),
        loader: LoaderSettings {
            threads: 2,
            batch_size: 64,
            shuffle_buffer: 2_000,
            validation_share: 0.15,
            filter: Filter::default(),
            mirror: false,
        },
        epochs,
        epoch_positions: Some(64 * 100),
        rate: RateSettings { rate: 2e-3, schedule: Schedule::Cosine, gamma: 0.5, step_epochs: 1 },
        weight_decay: 1e-4,
        lambda: 0.75,
        scale: None,
        seed: 7,
        init: None,
        fixed_validation: Vec::new(),
        factorise: false,
        patience: None,
    }
}

fn copy_chunks(to: &Path) -> Vec<PathBuf> {
    std::fs::create_dir_all(to).unwrap();
    for chunk in find_chunks(data()).unwrap() {
        std::fs::copy(&chunk, to.join(chunk.file_name().unwrap())).unwrap();
    }
    find_chunks(to).unwrap()
}

fn validation_batch() -> Batch {
    let settings = settings(1).loader;
    let pass = Pass::start(&find_chunks(data()).unwrap(), Part::Validation, &settings, 7);
    let samples: Vec<Batch> = pass.batches.iter().collect();
    let mut all = Batch::default();
    for batch in samples {
        all.ours.extend(batch.ours.iter());
        let base = all.theirs.len() as i64;
        all.theirs.extend(batch.theirs.iter());
        all.offsets.extend(batch.offsets.iter().map(|o| o + base));
        all.scores.extend(batch.scores);
        all.results.extend(batch.results);
    }
    all
}

#[test]
fn training_lowers_the_validation_loss_and_the_engine_evaluates_the_net_as_the_trainer() {
    let run = tempfile::tempdir().unwrap();
    let chunks = find_chunks(data()).unwrap();
    let summary = train(&chunks, &settings(3), run.path(), Device::Cpu, &AtomicBool::new(false), false).unwrap();
    let losses: Vec<f64> = summary.log.iter().map(|e| e["validation_loss"].as_f64().unwrap()).collect();
    assert_eq!(losses.len(), 4, "epoch 0 and three epochs: {:?}", summary.log);
    assert!(losses[3] < losses[0] * 0.9, "validation loss {losses:?}");
    let logged = std::fs::read_to_string(run.path().join("log.jsonl")).unwrap();
    assert_eq!(logged.lines().count(), 4);

    let net_path = summary.net.expect("a finished run exports its net");
    let engine_net = Network::load(&net_path).expect("the engine reads the trainer's net");
    let description: serde_json::Value = serde_json::from_str(engine_net.description()).unwrap();
    assert_eq!(description["epochs"], 3);
    assert_eq!(description["settings"]["data"], "test self-play");
    // The net is the epoch with the lowest validation loss, and says where it came
    // from: the code's commit, the data's hash, libtorch's threads.
    let best = (1..=3).min_by(|&a, &b| losses[a].total_cmp(&losses[b])).unwrap();
    assert_eq!(description["exported_epoch"], best, "{losses:?}");
    assert_eq!(description["validation_loss"], losses[best]);
    assert_eq!(description["data_sha256"], data_hash(&chunks).unwrap());
    assert!(description["commit"].as_str().is_some_and(|c| c.len() >= 7 || c == "unknown"), "{description}");
    assert!(description["torch_threads"].as_i64().is_some_and(|t| t >= 1));

    // The contract: on positions of real games, the engine's evaluation equals the
    // trainer's quantised forward exactly, and the float forward closely.
    let loaded = checkpoint::load(&best_path(run.path()), Device::Cpu).unwrap();
    let parameters = loaded.model.quantise().unwrap();
    let batch = validation_batch();
    let records: Vec<_> = chunks.iter().flat_map(|c| read_chunk_file(c).unwrap()).collect();
    assert!(batch.len() >= 300, "{} validation positions", batch.len());
    let quantised = quantised_forward(&parameters, &batch);
    let float = predict(&loaded.model, &batch, Device::Cpu);
    let by_features: std::collections::HashMap<Vec<i64>, &xq_engine::xiangqi::Position> = records
        .iter()
        .map(|r| {
            let side = r.position.side_to_move();
            let features = xq_engine::xiangqi::nnue::features::active(&r.position, side).map(|f| f as i64).collect();
            (features, &r.position)
        })
        .collect();
    let mut compared = 0;
    let mut worst = 0f32;
    let mut total = 0f32;
    for i in 0..batch.len() {
        let start = batch.offsets[i] as usize;
        let end = batch.offsets.get(i + 1).map_or(batch.ours.len(), |&o| o as usize);
        let position = by_features[&batch.ours[start..end]];
        assert_eq!(engine_net.evaluate_position(position), quantised[i], "position {i}");
        worst = worst.max((float[i] - quantised[i] as f32).abs());
        total += (float[i] - quantised[i] as f32).abs();
        compared += 1;
    }
    assert!(compared >= 300);
    let mean = total / compared as f32;
    eprintln!("float against quantised: mean {mean:.2} cp, worst {worst:.1} cp over {compared} positions");
    assert!(mean <= 5.0 && worst <= 25.0, "the float and quantised forwards differ: mean {mean} cp, worst {worst} cp");
}

#[test]
fn the_contract_holds_on_a_thousand_positions_for_an_untrained_model_too() {
    // An untrained model spreads its activations over the whole range, so every
    // clipping edge of the integer path is exercised.
    let model = xq_trainer::model::Model::new(Device::Cpu, 2);
    let engine = network(&model, "untrained".to_owned()).unwrap();
    let engine = Network::from_bytes(&engine.to_bytes()).unwrap();
    let records: Vec<_> = find_chunks(data()).unwrap().iter().flat_map(|c| read_chunk_file(c).unwrap()).collect();
    let samples: Vec<_> = records.iter().take(1_000).map(xq_trainer::data::Sample::of).collect();
    assert_eq!(samples.len(), 1_000);
    let quantised = quantised_forward(&model.quantise().unwrap(), &Batch::of(&samples));
    for (record, value) in records.iter().zip(quantised) {
        assert_eq!(engine.evaluate_position(&record.position), value);
    }
}

#[test]
fn a_stopped_run_resumes_exactly_where_it_stopped() {
    let whole = tempfile::tempdir().unwrap();
    let chunks = find_chunks(data()).unwrap();
    let settings = settings(2);
    train(&chunks, &settings, whole.path(), Device::Cpu, &AtomicBool::new(false), false).unwrap();

    let parts = tempfile::tempdir().unwrap();
    // A stop request raised from the start stops after the first batch, with a checkpoint.
    let stopped = train(&chunks, &settings, parts.path(), Device::Cpu, &AtomicBool::new(true), false).unwrap();
    assert!(stopped.stopped && stopped.net.is_none());
    assert!(!parts.path().join("net.xqnn").exists(), "no net from a stopped run");
    let checkpoint = checkpoint::load(&checkpoint_path(parts.path()), Device::Cpu).unwrap();
    assert_eq!((checkpoint.progress.epoch, checkpoint.progress.batch), (0, 1));
    let resumed = train(&chunks, &settings, parts.path(), Device::Cpu, &AtomicBool::new(false), false).unwrap();
    assert_eq!(resumed.epochs, 2);

    let a = checkpoint::load(&checkpoint_path(whole.path()), Device::Cpu).unwrap();
    let b = checkpoint::load(&checkpoint_path(parts.path()), Device::Cpu).unwrap();
    for (x, y) in a.model.tensors.iter().zip(&b.model.tensors) {
        let difference = f64::try_from((x - y).abs().max()).unwrap();
        assert!(difference < 1e-5, "resumed weights differ by {difference}");
    }
    assert_eq!(a.optimiser.steps, b.optimiser.steps);
}

#[test]
fn a_run_resumes_only_with_its_own_settings_and_data() {
    let dir = tempfile::tempdir().unwrap();
    let chunks = copy_chunks(&dir.path().join("data"));
    let run = dir.path().join("run");
    let settings = settings(2);
    let stopped = train(&chunks, &settings, &run, Device::Cpu, &AtomicBool::new(true), false).unwrap();
    assert!(stopped.stopped);
    // Another learning rate, another mirror setting, a factor: refused, all named.
    let mut other = settings.clone();
    other.rate.rate = 5e-3;
    other.loader.mirror = true;
    other.factorise = true;
    let refused = train(&chunks, &other, &run, Device::Cpu, &AtomicBool::new(false), false).unwrap_err();
    let message = refused.to_string();
    assert!(matches!(refused, TrainError::Settings(_)), "{message}");
    assert!(
        message.contains("rate.rate: 0.002 -> 0.005")
            && message.contains("loader.mirror: false -> true")
            && message.contains("factorise: absent -> true"),
        "{message}"
    );
    // Other data (a chunk gone, as when a job gained or lost chunks): refused.
    let refused = train(&chunks[1..], &settings, &run, Device::Cpu, &AtomicBool::new(false), false).unwrap_err();
    assert!(refused.to_string().contains("the data (chunks' SHA-256"), "{refused}");
    // Nothing was trained by the refusals: the run resumes with its own and finishes.
    let checkpoint = checkpoint::load(&checkpoint_path(&run), Device::Cpu).unwrap();
    assert_eq!((checkpoint.progress.epoch, checkpoint.progress.batch), (0, 1));
    // Resumed, the default goes as the run's checkpoint was, and never reads the model
    // the run started from (which may be gone by then).
    let gone = run.join("deleted-init.xqnn");
    assert!(!Factorising::Auto.resolve(&run, Some(&gone)).unwrap(), "an unfactorised run goes on so");
    let resumed = train(&chunks, &settings, &run, Device::Cpu, &AtomicBool::new(false), false).unwrap();
    assert_eq!((resumed.epochs, resumed.net.is_some()), (2, true));
}

/// A factorised run keeps its factor through a stop and a resume, and its net is the
/// model with the factor summed in.
#[test]
fn a_factorised_run_resumes_exactly_and_exports_the_net_of_its_summed_weights() {
    let chunks = find_chunks(data()).unwrap();
    let settings = TrainSettings { factorise: true, ..settings(2) };
    let whole = tempfile::tempdir().unwrap();
    let summary = train(&chunks, &settings, whole.path(), Device::Cpu, &AtomicBool::new(false), false).unwrap();
    let losses: Vec<f64> = summary.log.iter().map(|e| e["validation_loss"].as_f64().unwrap()).collect();
    assert!(losses[2] < losses[0] * 0.9, "validation loss {losses:?}");

    let parts = tempfile::tempdir().unwrap();
    let stopped = train(&chunks, &settings, parts.path(), Device::Cpu, &AtomicBool::new(true), false).unwrap();
    assert!(stopped.stopped);
    train(&chunks, &settings, parts.path(), Device::Cpu, &AtomicBool::new(false), false).unwrap();
    let a = checkpoint::load(&checkpoint_path(whole.path()), Device::Cpu).unwrap();
    let b = checkpoint::load(&checkpoint_path(parts.path()), Device::Cpu).unwrap();
    assert!(a.model.is_factorised() && b.model.is_factorised());
    for ((name, x), (_, y)) in a.model.named().zip(b.model.named()) {
        let difference = f64::try_from((x - y).abs().max()).unwrap();
        assert!(difference < 1e-5, "resumed {name} differs by {difference}");
    }

    let net_path = summary.net.unwrap();
    let net = Network::load(&net_path).unwrap();
    let best = checkpoint::load_model(&best_path(whole.path()), Device::Cpu).unwrap();
    assert!(best.is_factorised());

    // The default goes on as the model a run starts from was: a factorised run's
    // checkpoint has a factor, its net file (the sums) none; a fresh net is factorised.
    let checkpoint = checkpoint_path(whole.path());
    let new_run = tempfile::tempdir().unwrap();
    let new_run = new_run.path();
    assert!(Factorising::Auto.resolve(new_run, Some(&checkpoint)).unwrap());
    assert!(!Factorising::Auto.resolve(new_run, Some(&net_path)).unwrap());
    assert!(Factorising::Auto.resolve(new_run, None).unwrap());
    assert!(!Factorising::Off.resolve(new_run, Some(&checkpoint)).unwrap());
    assert!(Factorising::On.resolve(new_run, Some(&net_path)).unwrap());
    // Resuming the factorised run: as its checkpoint, whatever it is told to start from.
    assert!(Factorising::Auto.resolve(whole.path(), Some(&net_path)).unwrap());
    let missing = whole.path().join("no-such.xqnn");
    let error = Factorising::Auto.resolve(new_run, Some(&missing)).unwrap_err().to_string();
    assert!(error.contains("no-such.xqnn"), "{error}");
    assert!(net.parameters() == best.composed().quantise().unwrap(), "the best epoch's sums, quantised");
    let description: serde_json::Value = serde_json::from_str(net.description()).unwrap();
    assert_eq!(description["settings"]["factorise"], true);
}

#[test]
fn mirrored_training_learns_and_is_recorded_in_the_net() {
    let run = tempfile::tempdir().unwrap();
    let chunks = find_chunks(data()).unwrap();
    let mut settings = settings(2);
    settings.loader.mirror = true;
    let summary = train(&chunks, &settings, run.path(), Device::Cpu, &AtomicBool::new(false), false).unwrap();
    let losses: Vec<f64> = summary.log.iter().map(|e| e["validation_loss"].as_f64().unwrap()).collect();
    assert!(losses[2] < losses[0] * 0.95, "validation loss {losses:?}");
    let net = Network::load(&summary.net.unwrap()).unwrap();
    let description: serde_json::Value = serde_json::from_str(net.description()).unwrap();
    assert_eq!(description["settings"]["loader"]["mirror"], true);
}

#[test]
fn bad_chunks_are_refused_by_name_and_training_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let chunks = copy_chunks(dir.path());
    let corrupt = dir.path().join("corrupt.xqc");
    let mut bytes = std::fs::read(&chunks[0]).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::write(&corrupt, &bytes).unwrap();
    std::fs::write(dir.path().join("truncated.xqc"), &bytes[..40]).unwrap();
    let xiongqi = XiongqiRecord {
        position: xq_engine::xiongqi::Position::startpos(),
        score: 0,
        best_move: xq_engine::xiongqi::Game::new(xq_engine::xiongqi::Position::startpos()).legal_moves()[0],
        ply: 0,
        result: Outcome::Draw,
    };
    std::fs::write(dir.path().join("xiongqi.xqc"), write_xiongqi_chunk(&[xiongqi])).unwrap();

    let run = tempfile::tempdir().unwrap();
    let summary =
        train(&find_chunks(dir.path()).unwrap(), &settings(1), run.path(), Device::Cpu, &AtomicBool::new(false), false)
            .unwrap();
    let reasons: Vec<String> = summary.refusals.iter().map(ToString::to_string).collect();
    assert_eq!(reasons.len(), 3, "{reasons:?}");
    assert!(reasons.iter().any(|r| r.contains("corrupt.xqc") && r.contains("payload")), "{reasons:?}");
    assert!(reasons.iter().any(|r| r.contains("truncated.xqc") && r.contains("truncated")), "{reasons:?}");
    assert!(reasons.iter().any(|r| r.contains("xiongqi.xqc") && r.contains("no Xiongqi net")), "{reasons:?}");
    assert!(summary.net.is_some(), "training went on with the good chunks");
}

#[test]
fn an_empty_directory_and_data_with_nothing_left_are_clear_errors() {
    let empty = tempfile::tempdir().unwrap();
    let error = find_chunks(empty.path()).unwrap_err().to_string();
    assert!(error.contains("no training chunks") && error.contains(&empty.path().display().to_string()), "{error}");

    let chunks = find_chunks(data()).unwrap();
    let mut nothing = settings(1);
    nothing.loader.filter.max_score = -1;
    let run = tempfile::tempdir().unwrap();
    let error = train(&chunks, &nothing, run.path(), Device::Cpu, &AtomicBool::new(false), false).unwrap_err();
    assert!(matches!(error, TrainError::Data(_)), "{error}");
    assert!(!run.path().join("net.xqnn").exists());
}

#[test]
fn a_full_disk_keeps_the_previous_checkpoint_and_writes_no_net() {
    let run = tempfile::tempdir().unwrap();
    let chunks = find_chunks(data()).unwrap();
    let stop = AtomicBool::new(true);
    train(&chunks, &settings(1), run.path(), Device::Cpu, &stop, false).unwrap();
    let before = std::fs::read(checkpoint_path(run.path())).unwrap();
    // Every write to the temporary checkpoint now lands on a full device.
    std::os::unix::fs::symlink("/dev/full", checkpoint_path(run.path()).with_extension("tmp")).unwrap();
    let error = train(&chunks, &settings(1), run.path(), Device::Cpu, &AtomicBool::new(false), false).unwrap_err();
    let text = error.to_string();
    assert!(text.contains("checkpoint") && text.contains("No space left"), "{text}");
    assert_eq!(std::fs::read(checkpoint_path(run.path())).unwrap(), before, "the previous checkpoint is intact");
    assert!(!run.path().join("net.xqnn").exists());
}

#[test]
fn an_unreachable_coordinator_is_a_clear_error_and_nothing_is_written() {
    let run = tempfile::tempdir().unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_xq-trainer"))
        .args(["train", "--job", "3", "--coordinator", "http://127.0.0.1:1", "--token", "t", "--out"])
        .arg(run.path())
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("cannot connect to the coordinator at http://127.0.0.1:1"), "{stderr}");
    assert!(!run.path().join("net.xqnn").exists() && !checkpoint_path(run.path()).exists());
}

#[test]
fn a_damaged_checkpoint_is_refused_with_its_name_not_a_panic() {
    let run = tempfile::tempdir().unwrap();
    let chunks = find_chunks(data()).unwrap();
    train(&chunks, &settings(1), run.path(), Device::Cpu, &AtomicBool::new(true), false).unwrap();
    let path = checkpoint_path(run.path());
    let whole = std::fs::read(&path).unwrap();
    let mut damaged_header = whole.clone();
    damaged_header[10] ^= 0x5a;
    for (what, bytes) in [("truncated", &whole[..whole.len() / 2]), ("header", &damaged_header[..]), ("empty", &[][..])]
    {
        std::fs::write(&path, bytes).unwrap();
        let error = train(&chunks, &settings(1), run.path(), Device::Cpu, &AtomicBool::new(false), false).unwrap_err();
        let text = error.to_string();
        assert!(
            text.contains("cannot read the checkpoint") && text.contains("checkpoint.safetensors"),
            "{what}: {text}"
        );
        assert!(!run.path().join("net.xqnn").exists(), "{what}");
    }
}

/// A fixed validation set is scored with the run's own at every epoch: on the run's
/// own data it is the same games, so the same loss; the curves are drawn beside the log.
#[test]
fn a_fixed_validation_set_is_scored_every_epoch_and_the_losses_are_drawn() {
    let run = tempfile::tempdir().unwrap();
    let chunks = find_chunks(data()).unwrap();
    let fixed = TrainSettings { fixed_validation: chunks.clone(), ..settings(2) };
    let summary = train(&chunks, &fixed, run.path(), Device::Cpu, &AtomicBool::new(false), false).unwrap();
    assert_eq!(summary.log.len(), 3, "epoch 0 and two epochs");
    for entry in &summary.log {
        let (own, fixed) = (entry["validation_loss"].as_f64().unwrap(), entry["fixed_validation_loss"].as_f64());
        assert_eq!(fixed, Some(own), "the same validation games: {entry}");
    }
    let svg = std::fs::read_to_string(run.path().join("losses.svg")).unwrap();
    for series in ["train", "validation", "fixed validation"] {
        assert!(svg.contains(&format!("data-series=\"{series}\"")), "{series} drawn");
    }
    // Without a fixed set nothing of it is logged, and the settings record nothing
    // new: checkpoints of runs before the setting existed still resume.
    let plain = tempfile::tempdir().unwrap();
    let summary = train(&chunks, &settings(1), plain.path(), Device::Cpu, &AtomicBool::new(false), false).unwrap();
    assert!(summary.log.iter().all(|e| e.get("fixed_validation_loss").is_none()));
    assert!(serde_json::to_value(settings(1)).unwrap().get("fixed_validation").is_none());
}

/// With patience, a run stops at the first epoch that has waited that long for a lower
/// validation loss, and exports the best epoch's net. At a rate this high the loss
/// jumps about from epoch to epoch, so eight epochs do not all improve on the last.
#[test]
fn a_run_with_patience_stops_once_its_validation_loss_stops_falling_and_keeps_its_best_epoch() {
    let run = tempfile::tempdir().unwrap();
    let chunks = find_chunks(data()).unwrap();
    let mut settings = TrainSettings { patience: Some(1), ..settings(8) };
    settings.rate.rate = 0.5;
    let summary = train(&chunks, &settings, run.path(), Device::Cpu, &AtomicBool::new(false), false).unwrap();
    let losses: Vec<f64> = summary.log.iter().map(|e| e["validation_loss"].as_f64().unwrap()).collect();
    // Where the rule says to stop, from the log alone: the first epoch no lower than
    // the best before it.
    let expected = (2..=8).find(|&e| losses[e] >= losses[1..e].iter().copied().fold(f64::MAX, f64::min)).unwrap_or(8);
    assert_eq!(summary.epochs, expected, "{losses:?}");
    assert!(summary.epochs < 8, "stopped early: {losses:?}");
    let best = (1..=summary.epochs).min_by(|&a, &b| losses[a].total_cmp(&losses[b])).unwrap();
    let net = Network::load(summary.net.as_ref().unwrap()).unwrap();
    let description: serde_json::Value = serde_json::from_str(net.description()).unwrap();
    assert_eq!(description["exported_epoch"], best, "{losses:?}");
    // What the loop records of the run: the exported epoch's losses, not the last's.
    assert_eq!(summary.exported_entry().unwrap()["epoch"], best, "{losses:?}");
    assert_eq!(summary.exported_entry().unwrap()["validation_loss"], description["validation_loss"]);
}
