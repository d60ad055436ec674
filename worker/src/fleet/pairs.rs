//! A match lease: its game pairs played over the lease's openings, each finished pair
//! reported with its games at once.

use super::artifacts::lease_book;
use super::engines::engine_config;
use super::*;
use crate::game::{GameSettings, Opening, Start};
use crate::match_runner::{FinishedGame, MatchSettings, run_match};
use crate::openings::Openings;
use crate::pgn_out::game_pgn;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::runtime::Handle;
use xq_engine::bench::Reading;
use xq_engine::book::BookOpening;
use xq_engine::color::Color;
use xq_engine::time_control::TimeControl;
use xq_engine::variant::Variant;
use xq_engine::xiangqi::Position;
use xq_engine::xiangqi::rules::{Outcome, RuleSet};
use xq_engine::xiongqi;
use xq_proto::game_threads;
use xq_proto::v1;

/// Pairs finished and not yet acknowledged, and the lease's totals.
#[derive(Default)]
struct Ledger {
    legs: BTreeMap<u64, [Option<(String, u64)>; 2]>,
    pending: Vec<v1::PairResult>,
    wdl: [u64; 3],
    penta: [u64; 5],
}

pub(super) async fn play_pairs(
    client: &Client,
    settings: &ConnectSettings,
    lease: &v1::Lease,
    spec: v1::MatchSpec,
    stop: Arc<AtomicBool>,
) -> Result<(), FleetError> {
    let engine = |spec: &Option<v1::EngineSpec>, which: &str| {
        spec.clone().ok_or_else(|| FleetError::Lease(format!("no {which} engine")))
    };
    let measure = spec.scale_by_engine_speed;
    let (mut new, new_bench) = engine_config(client, settings, &engine(&spec.new_engine, "new")?, measure).await?;
    let (mut base, base_bench) = engine_config(client, settings, &engine(&spec.base_engine, "base")?, measure).await?;
    // A test of engines with their submitter's speed is scaled here, by theirs: the
    // coordinator checks the games against the factor this report names.
    let engine_slowness = spec.scale_by_engine_speed.then(|| {
        let measured = |engine: &Option<v1::EngineSpec>, bench: Option<Reading>| {
            let submitted = engine.as_ref().map_or(0, |e| e.bench_nps);
            (submitted, bench.and_then(|b| b.nodes_per_second).unwrap_or(0))
        };
        xq_proto::speed::engine_slowness([
            measured(&spec.new_engine, new_bench),
            measured(&spec.base_engine, base_bench),
        ])
    });
    let spec = match engine_slowness {
        Some(slowness) => xq_proto::speed::scaled(&spec, slowness),
        None => spec,
    };
    // Each engine's own clock (the same for both but with time odds).
    let [new_time_control, base_time_control] = xq_proto::speed::engine_time_controls(&spec).map_err(lease_error)?;
    new.time_control = Some(new_time_control);
    base.time_control = Some(base_time_control);
    let variant: Variant = Variant::named_or_xiangqi(&spec.variant).map_err(lease_error)?;
    // Told the game as the command line's matches tell it (a Xiongqi test's engines
    // were given Xiangqi's start position and lost every such game by an illegal move).
    new.announce_variant(variant);
    base.announce_variant(variant);
    let openings = match (&spec.book, variant) {
        (Some(book), _) => {
            let book = lease_book(client, settings, book, variant).await?;
            // Only the lease's units: unit i plays opening (i + offset) modulo the
            // book's size, as the coordinator replays it.
            let starts = lease.units.iter().map(|&unit| {
                let start = match book.for_unit(unit.wrapping_add(spec.book_offset)) {
                    BookOpening::Xiangqi(opening) => Start::from(*opening),
                    BookOpening::Xiongqi(position) => Start::Xiongqi(position),
                };
                (unit as usize, start)
            });
            Openings::Pairs(starts.collect())
        }
        (None, Variant::Xiangqi) => {
            vec![Start::from(Opening { start: Position::startpos(), moves: Vec::new() })].into()
        }
        (None, Variant::Xiongqi) => vec![Start::Xiongqi(xiongqi::Position::startpos())].into(),
    };
    let time_control: TimeControl = spec.time_control.parse().map_err(lease_error)?;
    let rules: RuleSet = spec.rules.parse().map_err(lease_error)?;
    let violation_timing = xq_proto::violation_timing(&spec.violation_timing).map_err(lease_error)?;
    let match_settings = MatchSettings {
        engines: [new, base],
        pairs: lease.units.iter().map(|&u| u as usize).collect(),
        // A game of engines with N threads each holds N of its cores.
        concurrency: (settings.concurrency
            / game_threads([&spec.new_engine, &spec.base_engine].into_iter().flatten()) as usize)
            .max(1),
        pin_cores: false,
        openings,
        game: GameSettings {
            time_control,
            rules,
            time_margin: xq_proto::time_margin(&spec),
            hang_timeout: Duration::from_secs(60),
            adjudication: xq_proto::adjudication(spec.adjudication.as_ref()),
            max_plies: (spec.max_plies > 0).then_some(spec.max_plies as usize),
            violation_timing,
        },
        sprt: None,
    };
    let event = format!("job {}", lease.job_id);
    let report_base = v1::ReportPairsRequest {
        lease_id: lease.lease_id,
        verified_signatures: [new_bench, base_bench].map(|b| b.map_or(0, |b| b.signature)).to_vec(),
        engine_slowness: engine_slowness.unwrap_or(0.0),
        ..Default::default()
    };
    let handle = Handle::current();
    let reporter = client.clone();
    // The match runs on blocking threads; each finished pair is reported from the
    // runner's collecting thread, which waits for the acknowledgement.
    tokio::task::spawn_blocking(move || -> Result<(), FleetError> {
        let mut ledger = Ledger::default();
        let mut failure = None;
        let outcome = run_match(&match_settings, |finished: &FinishedGame, _| {
            record_leg(&mut ledger, finished, &event);
            if ledger.pending.is_empty() {
                return !stop.load(Ordering::Relaxed);
            }
            let request = v1::ReportPairsRequest {
                pairs: ledger.pending.clone(),
                cumulative: Some(totals(&ledger)),
                ..report_base.clone()
            };
            let result = handle.block_on(retry("report", || {
                let mut client = reporter.clone();
                let request = request.clone();
                async move { client.report_pairs(request).await }
            }));
            match result {
                Ok(reply) => {
                    ledger.pending.clear();
                    if reply.into_inner().stop {
                        stop.store(true, Ordering::Relaxed);
                    }
                }
                Err(status) => {
                    failure = Some(FleetError::refused("report", status));
                    return false;
                }
            }
            !stop.load(Ordering::Relaxed)
        });
        if let Some(error) = failure {
            return Err(error);
        }
        outcome.map_err(match_failure)?;
        Ok(())
    })
    .await
    .map_err(play_error)?
}

fn totals(ledger: &Ledger) -> v1::Totals {
    v1::Totals { wins: ledger.wdl[0], draws: ledger.wdl[1], losses: ledger.wdl[2], pentanomial: ledger.penta.to_vec() }
}

/// Files a finished game; a pair whose both games are in moves to `pending`.
fn record_leg(ledger: &mut Ledger, finished: &FinishedGame, event: &str) {
    let unit = finished.pair as u64;
    let record = &finished.record;
    let new_color = if finished.leg == 0 { Color::Red } else { Color::Black };
    let points = match record.outcome {
        Outcome::Draw => 1,
        Outcome::Win(winner) if winner == new_color => 2,
        Outcome::Win(_) => 0,
    };
    let pgn = game_pgn(record, event, finished.pair * 2 + finished.leg + 1);
    let legs = ledger.legs.entry(unit).or_default();
    legs[finished.leg] = Some((pgn, points));
    if let [Some(_), Some(_)] = legs {
        let [Some((first, a)), Some((second, b))] = ledger.legs.remove(&unit).expect("just filed") else {
            unreachable!()
        };
        for p in [a, b] {
            ledger.wdl[(2 - p) as usize] += 1;
        }
        ledger.penta[(a + b) as usize] += 1;
        ledger.pending.push(v1::PairResult { unit, first_game_pgn: first, second_game_pgn: second });
    }
}
