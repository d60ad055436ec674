//! A match's time controls and how they are scaled to a worker's speed: each engine's
//! own clock (time odds) beside the test's, and the factor a worker is slower than the
//! machine the clocks were chosen for. That factor is our engine's bench on the worker
//! against the coordinator's reference, or, for a test whose engines carry their
//! submitter's bench speed, those engines' own benches on the worker against it
//! (OpenBench's scaling): an engine twice as fast as ours relative to its submitter's
//! machine is not given our engine's view of the worker.
//!
//! The coordinator and the worker read a lease's clocks and scale them through these
//! functions alone, so that the clocks a game was played under and the ones it is
//! checked against are the same text.

use crate::v1;
use xq_engine::time_control::{BadTimeControl, TimeControl};

/// The fastest a worker may count as: a quarter of the reference's time.
pub const FASTEST: f64 = 0.25;
/// The slowest a worker may count as: four times the reference's time.
pub const SLOWEST: f64 = 4.0;

/// `slowness` within [`FASTEST`]..=[`SLOWEST`] (a measurement's extremes are the
/// machine's trouble, not a reason for a clock of days); 1 when it is no number.
pub fn bounded(slowness: f64) -> f64 {
    if slowness.is_finite() && slowness > 0.0 { slowness.clamp(FASTEST, SLOWEST) } else { 1.0 }
}

/// The slowness of a worker on which the engines' benches ran at `measured` nodes per
/// second, each beside its speed at submission: the mean of submitted over measured
/// across the engines with both, bounded; 1 when no engine has both.
pub fn engine_slowness(measured: impl IntoIterator<Item = (u64, u64)>) -> f64 {
    let ratios: Vec<f64> = measured
        .into_iter()
        .filter(|&(submitted, here)| submitted > 0 && here > 0)
        .map(|(submitted, here)| submitted as f64 / here as f64)
        .collect();
    if ratios.is_empty() { 1.0 } else { bounded(ratios.iter().sum::<f64>() / ratios.len() as f64) }
}

/// A reported engine slowness, refused unless it is one [`engine_slowness`] can give.
pub fn check_reported(slowness: f64) -> Result<f64, String> {
    if slowness.is_finite() && (FASTEST..=SLOWEST).contains(&slowness) {
        Ok(slowness)
    } else {
        Err(format!("engine slowness {slowness}: a worker scales by {FASTEST} to {SLOWEST}"))
    }
}

/// Whether a test of these engines is scaled by their own speed: one has a bench speed.
pub fn scales_by_engines<'a>(engines: impl IntoIterator<Item = &'a v1::EngineSpec>) -> bool {
    engines.into_iter().any(|engine| engine.bench_nps > 0)
}

/// An engine's own clock (time odds) as submitted, if it has one: the one reading of
/// an engine spec's `time_control` for summaries, clones, estimates and leases.
pub fn own_time_control(engine: &Option<v1::EngineSpec>) -> Option<&str> {
    engine.as_ref().map(|e| e.time_control.as_str()).filter(|text| !text.is_empty())
}

/// Whether either engine has a clock of its own.
pub fn has_time_odds(new_engine: &Option<v1::EngineSpec>, base_engine: &Option<v1::EngineSpec>) -> bool {
    own_time_control(new_engine).is_some() || own_time_control(base_engine).is_some()
}

/// The clocks `new_engine` and `base_engine` think on in a match at `common`: each
/// engine's own, else the match's.
pub fn clocks_of(
    common: &TimeControl,
    new_engine: &Option<v1::EngineSpec>,
    base_engine: &Option<v1::EngineSpec>,
) -> Result<[TimeControl; 2], BadTimeControl> {
    let clock = |engine| own_time_control(engine).map_or_else(|| Ok(common.clone()), str::parse);
    Ok([clock(new_engine)?, clock(base_engine)?])
}

/// The clocks of `spec`'s engines, new then base: each engine's own, else the match's.
pub fn engine_time_controls(spec: &v1::MatchSpec) -> Result<[TimeControl; 2], BadTimeControl> {
    clocks_of(&spec.time_control.parse()?, &spec.new_engine, &spec.base_engine)
}

/// `spec` with every clock `slowness` times longer (node and depth budgets unchanged),
/// no longer to be scaled by the worker.
pub fn scaled(spec: &v1::MatchSpec, slowness: f64) -> v1::MatchSpec {
    let scale = |text: &str| match text.parse::<TimeControl>() {
        Ok(time_control) => time_control.scaled(slowness).to_string(),
        // Checked at submission; a text that does not read is left for the reader to refuse.
        Err(_) => text.to_owned(),
    };
    let mut scaled = spec.clone();
    scaled.time_control = scale(&spec.time_control);
    for engine in [&mut scaled.new_engine, &mut scaled.base_engine].into_iter().flatten() {
        if !engine.time_control.is_empty() {
            engine.time_control = scale(&engine.time_control);
        }
    }
    scaled.scale_by_engine_speed = false;
    scaled
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_engine_slowness_is_the_bounded_mean_of_the_engines_ratios() {
        assert_eq!(engine_slowness([(1_000_000, 500_000), (2_000_000, 1_000_000)]), 2.0);
        assert_eq!(engine_slowness([(1_000_000, 500_000), (1_000_000, 2_000_000)]), 1.25);
        // An engine without a measurement on either side does not count.
        assert_eq!(engine_slowness([(1_000_000, 250_000), (0, 1), (5, 0)]), 4.0);
        assert_eq!(engine_slowness([(0, 1)]), 1.0);
        assert_eq!(engine_slowness([(1, 1_000_000)]), FASTEST);
        assert_eq!(engine_slowness([(1_000_000, 1)]), SLOWEST);
        for bad in [f64::NAN, f64::INFINITY, 0.0, 4.5, 0.2, -1.0] {
            assert!(check_reported(bad).is_err(), "{bad}");
        }
        assert_eq!(check_reported(engine_slowness([(3, 7)])), Ok(3.0 / 7.0));
    }

    #[test]
    fn time_odds_are_scaled_with_the_match_s_clock() {
        let engine =
            |time_control: &str| v1::EngineSpec { time_control: time_control.to_owned(), ..Default::default() };
        let spec = v1::MatchSpec {
            new_engine: Some(engine("")),
            base_engine: Some(engine("20+0.2")),
            time_control: "10+0.1".to_owned(),
            scale_by_engine_speed: true,
            ..Default::default()
        };
        let [new, base] = engine_time_controls(&spec).unwrap();
        assert_eq!((new.to_string(), base.to_string()), ("10+0.1".to_owned(), "20+0.2".to_owned()));
        let doubled = scaled(&spec, 2.0);
        assert!(!doubled.scale_by_engine_speed);
        let [new, base] = engine_time_controls(&doubled).unwrap();
        assert_eq!((new.to_string(), base.to_string()), ("20+0.2".to_owned(), "40+0.4".to_owned()));
        let nodes = v1::MatchSpec { time_control: "nodes=1000".to_owned(), ..spec };
        assert_eq!(scaled(&nodes, 3.0).time_control, "nodes=1000");
    }
}
