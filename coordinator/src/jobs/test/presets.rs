//! The coordinator's presets: the tests an engine author runs every day, named, as
//! fishtest's are (a short time control to screen a change, a long one to confirm it,
//! a non-regression test for a simplification), so that `xq sprt --preset ltc` asks
//! what the fleet's operators mean by it. A request's own settings win over its
//! preset's.

use xq_proto::v1;

use crate::jobs::checks::{SpecError, bad};

/// A named test: its time control, SPRT bounds and adjudication.
pub struct Preset {
    pub name: &'static str,
    pub description: &'static str,
    pub time_control: &'static str,
    pub elo0: f64,
    pub elo1: f64,
}

/// fishtest's adjudication of its tests (cutechess-cli's `-draw movenumber=34
/// movecount=8 score=20 -resign movecount=3 score=600`).
pub const ADJUDICATION: v1::Adjudication =
    v1::Adjudication { draw_move_number: 34, draw_plies: 8, draw_score: 20, resign_moves: 3, resign_score: 600 };

/// The presets, with fishtest's bounds (normalized Elo) and time controls.
pub const PRESETS: [Preset; 3] = [
    Preset {
        name: "stc",
        description: "a change's first test: short time control, gainer bounds",
        time_control: "10+0.1",
        elo0: 0.0,
        elo1: 2.0,
    },
    Preset {
        name: "ltc",
        description: "the confirmation of a change that passed STC: long time control",
        time_control: "60+0.6",
        elo0: 0.5,
        elo1: 2.5,
    },
    Preset {
        name: "nonreg",
        description: "a simplification or a refactor: shows it loses nothing",
        time_control: "10+0.1",
        elo0: -1.75,
        elo1: 0.25,
    },
];

impl Preset {
    /// Its view, for lists and clients.
    pub fn view(&self) -> v1::Preset {
        v1::Preset {
            name: self.name.to_owned(),
            description: self.description.to_owned(),
            time_control: self.time_control.to_owned(),
            sprt: Some(self.sprt()),
            adjudication: Some(ADJUDICATION),
        }
    }

    /// Its SPRT, at fishtest's error rates.
    pub fn sprt(&self) -> v1::SprtSpec {
        v1::SprtSpec {
            elo0: self.elo0,
            elo1: self.elo1,
            alpha: 0.05,
            beta: 0.05,
            model: "normalized".to_owned(),
            trinomial: false,
        }
    }
}

/// The preset named `name`, or an error naming the ones there are.
pub fn preset(name: &str) -> Result<&'static Preset, SpecError> {
    PRESETS.iter().find(|p| p.name == name).ok_or_else(|| {
        let names: Vec<&str> = PRESETS.iter().map(|p| p.name).collect();
        bad("preset", format!("'{name}' is no preset: use {}", names.join(", ")))
    })
}

/// Fills what `request` leaves unset from preset `name`: the time control when it has
/// none, the SPRT when it names neither one nor a number of pairs, the adjudication
/// when it has none.
pub fn apply(name: &str, request: &mut v1::CreateTestRequest) -> Result<(), SpecError> {
    let preset = preset(name)?;
    if request.time_control.is_empty() {
        request.time_control = preset.time_control.to_owned();
    }
    if request.sprt.is_none() && request.pairs == 0 {
        request.sprt = Some(preset.sprt());
    }
    if request.adjudication.is_none() {
        request.adjudication = Some(ADJUDICATION);
    }
    Ok(())
}

/// Lays preset `name` over `request`, a test of the same engines at another preset
/// (a clone's `--preset`): its clock, its SPRT (a fixed-length test becomes one) and
/// its adjudication replace the request's.
pub fn lay(name: &str, request: &mut v1::CreateTestRequest) -> Result<(), SpecError> {
    let preset = preset(name)?;
    request.time_control = preset.time_control.to_owned();
    request.sprt = Some(preset.sprt());
    request.pairs = 0;
    request.adjudication = Some(ADJUDICATION);
    request.preset = name.to_owned();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_preset_fills_only_what_the_request_leaves_unset() {
        let mut request = v1::CreateTestRequest::default();
        apply("ltc", &mut request).unwrap();
        assert_eq!(request.time_control, "60+0.6");
        assert_eq!(request.sprt.as_ref().map(|s| (s.elo0, s.elo1)), Some((0.5, 2.5)));
        assert_eq!(request.adjudication, Some(ADJUDICATION));
        let mut own = v1::CreateTestRequest { time_control: "30+0.3".to_owned(), pairs: 500, ..Default::default() };
        apply("nonreg", &mut own).unwrap();
        assert_eq!((own.time_control.as_str(), own.sprt.is_none()), ("30+0.3", true), "a fixed-length test stays one");
        let error = apply("vltc", &mut own).unwrap_err();
        assert_eq!(error.field, "preset");
        assert!(error.problem.contains("use stc, ltc, nonreg"), "{}", error.problem);
    }

    #[test]
    fn a_preset_laid_over_a_request_replaces_its_clock_sprt_and_adjudication() {
        let mut request = v1::CreateTestRequest {
            time_control: "1+0.01".to_owned(),
            pairs: 100,
            adjudication: Some(v1::Adjudication::default()),
            ..Default::default()
        };
        lay("ltc", &mut request).unwrap();
        assert_eq!((request.time_control.as_str(), request.pairs, request.preset.as_str()), ("60+0.6", 0, "ltc"));
        assert_eq!(request.sprt.as_ref().map(|s| (s.elo0, s.elo1)), Some((0.5, 2.5)));
        assert_eq!(request.adjudication, Some(ADJUDICATION));
        assert_eq!(lay("blitz", &mut request).unwrap_err().field, "preset");
    }

    #[test]
    fn every_preset_makes_a_valid_test() {
        for preset in &PRESETS {
            let view = preset.view();
            view.time_control.parse::<xq_engine::time_control::TimeControl>().unwrap();
            let sprt = view.sprt.unwrap();
            xq_stats::Sprt::new(sprt.elo0, sprt.elo1, sprt.alpha, sprt.beta, xq_stats::Model::Normalized).unwrap();
        }
    }
}
