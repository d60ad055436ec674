//! Self-play jobs: training data from our engine playing itself; the request's checks.

use crate::jobs::checks::{MAX_UNITS, SpecError, bad, check_artifact, check_lineage, check_name};
use xq_engine::variant::Variant;
use xq_engine::xiangqi::data::MAX_RECORDS;
use xq_engine::xiangqi::rules::RuleSet;
use xq_proto::v1;
use xq_proto::{DEFAULT_SELF_PLAY_PLIES, self_play_plies, self_play_unit_records};

/// The longest self-play game a job may ask for, in plies (the rules end real games
/// long before).
pub const MAX_SELF_PLAY_PLIES: u32 = 2_000;
/// The most random opening plies a self-play game may start with: openings vary enough
/// within a few, and the coordinator replays each unit's openings to check its chunks.
pub const MAX_RANDOM_PLIES: u32 = 64;

/// Checks a self-play request.
pub fn check_self_play(request: &v1::CreateSelfPlayRequest) -> Result<(), SpecError> {
    let spec = request.spec.as_ref().ok_or_else(|| bad("spec", "missing"))?;
    if !(1..=10_000).contains(&spec.games_per_unit) {
        return Err(bad("spec.games_per_unit", "between 1 and 10,000"));
    }
    check_self_play_games(spec)?;
    // A unit is uploaded as one chunk: a unit that could not fit one would fail on
    // every worker, for ever.
    if self_play_unit_records(spec) > MAX_RECORDS as u64 {
        return Err(bad(
            "spec.games_per_unit",
            format!(
                "{} games of up to {} plies may not fit a chunk ({MAX_RECORDS} records): fewer games per unit",
                spec.games_per_unit,
                self_play_plies(spec)
            ),
        ));
    }
    if !(1..=MAX_UNITS).contains(&request.units) {
        return Err(bad("units", format!("between 1 and {MAX_UNITS}")));
    }
    if !request.lineage.is_empty() {
        check_lineage("lineage", &request.lineage)?;
    }
    check_name("description", &request.description, 200)
}

/// Checks how a self-play spec plays its games (nodes, rules, length, game, net),
/// for self-play jobs and for the fresh games of verification jobs; the game it plays.
pub fn check_self_play_games(spec: &v1::SelfPlaySpec) -> Result<Variant, SpecError> {
    if !(1..=10_000_000).contains(&spec.nodes) {
        return Err(bad("spec.nodes", "between 1 and 10,000,000"));
    }
    if !spec.rules.is_empty() {
        spec.rules.parse::<RuleSet>().map_err(|e| bad("spec.rules", e.to_string()))?;
    }
    if spec.max_plies > MAX_SELF_PLAY_PLIES {
        return Err(bad("spec.max_plies", format!("at most {MAX_SELF_PLAY_PLIES} (0: {DEFAULT_SELF_PLAY_PLIES})")));
    }
    if spec.random_plies > MAX_RANDOM_PLIES {
        return Err(bad("spec.random_plies", format!("at most {MAX_RANDOM_PLIES}")));
    }
    let variant = self_play_variant(spec)?;
    if let Some(net) = &spec.net {
        if variant != Variant::Xiangqi {
            return Err(bad("spec.net", "nets are for Xiangqi only"));
        }
        check_artifact("spec.net", net)?;
    }
    Ok(variant)
}

/// The game a self-play spec plays (default Xiangqi).
pub fn self_play_variant(spec: &v1::SelfPlaySpec) -> Result<Variant, SpecError> {
    Variant::named_or_xiangqi(&spec.variant).map_err(|e| bad("spec.variant", e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn self_play_requests_are_checked() {
        let spec = v1::SelfPlaySpec { nodes: 1000, games_per_unit: 4, ..Default::default() };
        let good = v1::CreateSelfPlayRequest { spec: Some(spec.clone()), units: 10, ..Default::default() };
        assert!(check_self_play(&good).is_ok());
        let zero = v1::CreateSelfPlayRequest { units: 0, ..good.clone() };
        assert_eq!(check_self_play(&zero).unwrap_err().field, "units");
        let no_nodes =
            v1::CreateSelfPlayRequest { spec: Some(v1::SelfPlaySpec { nodes: 0, ..spec.clone() }), ..good.clone() };
        assert_eq!(check_self_play(&no_nodes).unwrap_err().field, "spec.nodes");
        let chess = v1::CreateSelfPlayRequest {
            spec: Some(v1::SelfPlaySpec { variant: "chess".to_owned(), ..spec.clone() }),
            ..good.clone()
        };
        assert_eq!(check_self_play(&chess).unwrap_err().field, "spec.variant");
        let xiongqi = v1::CreateSelfPlayRequest {
            spec: Some(v1::SelfPlaySpec { variant: "xiongqi".to_owned(), ..spec.clone() }),
            ..good.clone()
        };
        assert!(check_self_play(&xiongqi).is_ok());
        let net = v1::ArtifactRef { sha256: "ab".repeat(32), name: "gen1.xqnn".to_owned(), size: 1 };
        let with_net = |variant: &str, net: v1::ArtifactRef| v1::CreateSelfPlayRequest {
            spec: Some(v1::SelfPlaySpec { variant: variant.to_owned(), net: Some(net), ..spec.clone() }),
            ..good.clone()
        };
        assert!(check_self_play(&with_net("xiangqi", net.clone())).is_ok());
        assert_eq!(check_self_play(&with_net("xiongqi", net.clone())).unwrap_err().field, "spec.net");
        let bad_hash = v1::ArtifactRef { sha256: "not a hash".to_owned(), ..net.clone() };
        assert_eq!(check_self_play(&with_net("xiangqi", bad_hash)).unwrap_err().field, "spec.net");
        let a_path = v1::ArtifactRef { name: "../../etc/passwd".to_owned(), ..net };
        assert_eq!(check_self_play(&with_net("xiangqi", a_path)).unwrap_err().field, "spec.net");
        // A unit must fit one chunk: games times plies at most MAX_RECORDS.
        let sized = |games_per_unit: u32, max_plies: u32| v1::CreateSelfPlayRequest {
            spec: Some(v1::SelfPlaySpec { games_per_unit, max_plies, ..spec.clone() }),
            ..good.clone()
        };
        assert!(check_self_play(&sized(2_621, 0)).is_ok(), "2,621 games of 400 plies fit");
        assert_eq!(check_self_play(&sized(2_622, 0)).unwrap_err().field, "spec.games_per_unit");
        assert!(check_self_play(&sized(524, 2_000)).is_ok());
        assert_eq!(check_self_play(&sized(525, 2_000)).unwrap_err().field, "spec.games_per_unit");
        assert_eq!(check_self_play(&sized(1, 2_001)).unwrap_err().field, "spec.max_plies");
        let random = |random_plies| v1::CreateSelfPlayRequest {
            spec: Some(v1::SelfPlaySpec { random_plies, ..spec.clone() }),
            ..good.clone()
        };
        assert!(check_self_play(&random(MAX_RANDOM_PLIES)).is_ok());
        assert_eq!(check_self_play(&random(MAX_RANDOM_PLIES + 1)).unwrap_err().field, "spec.random_plies");
        // A lineage is a net lineage's name, as the registry takes it.
        let lineage = |name: &str| v1::CreateSelfPlayRequest { lineage: name.to_owned(), ..good.clone() };
        assert!(check_self_play(&lineage("loop59")).is_ok());
        assert_eq!(check_self_play(&lineage("loop 59")).unwrap_err().field, "lineage");
        assert_eq!(check_self_play(&lineage(&"l".repeat(65))).unwrap_err().field, "lineage");
    }
}
