//! The verification job's checks, spot checks, tallies and parting games tested on
//! real games.

use crate::jobs::verification::parting::{parting_pgn, report_games};
use crate::jobs::verification::reference::{reference_difference, reference_verdicts};
use crate::jobs::verification::reports::{ReportScope, check_report};
use crate::jobs::verification::spot_checks::{SPOT_CHECKED_GAMES, SpotChecks, UnitGames, spot_check};
use crate::jobs::verification::tallies::{Tallies, TallyRead};
use crate::jobs::verification::{DEFAULT_RULES, REFERENCE_PYFFISH, rule_sets};
use serde_json::Value;
use std::collections::HashSet;
use xq_engine::xiangqi::pgn::{PgnFile, PgnGame};
use xq_engine::xiangqi::rules::RuleSet;
use xq_engine::xiangqi::rules::hard_games::hard_game_pgn;
use xq_engine::xiangqi::rules::verify::{FAIRY_STOCKFISH, Tally, report_tally};
use xq_engine::xiangqi::selfplay::{PlaySettings, fresh_game};

use xq_engine::xiangqi::pgn::parse_pgn;
use xq_engine::xiangqi::rules::verify::unit_report;

/// What a unit of `games` games from game `first_number` may name, under the
/// default rule sets.
fn scope(first_number: u64, games: u64) -> ReportScope<'static> {
    ReportScope { first_number, games, rules: &DEFAULT_RULES, reference: "", metamorphic: false }
}

/// A chariot chasing a lone cannon (WXF and Asian: the chaser's loss at ply 8; CXQ
/// allows six chasing moves), a quiet game and one with an illegal second move.
fn pgn_text() -> String {
    let cycles = ["b1a1 a0b0 a1b1 b0a0"; 4].join(" ");
    format!(
        "[FEN \"4k4/9/9/9/9/9/9/9/1R7/c2K5 w - - 0 1\"]\n\n{cycles} *\n\n\
         [Event \"quiet\"]\n\n1. h2e2 h9g7 *\n\n[Event \"bad\"]\n\n1. h2e2 e2e9 *\n"
    )
}

/// [`pgn_text`]'s games.
fn games() -> Vec<xq_engine::xiangqi::pgn::PgnGame> {
    parse_pgn(&pgn_text()).unwrap()
}

#[test]
fn a_worker_s_report_passes_and_forged_ones_are_refused_naming_the_fault() {
    let report = unit_report(&games(), 1, &DEFAULT_RULES, None).unwrap();
    let tally = check_report(&report, &scope(1, 3)).unwrap().tally;
    assert_eq!((tally.games, tally.parting, tally.refused), (3, 1, 1));
    assert!(check_report(&report, &scope(1, 4)).unwrap_err().contains("a tally of 3 games for a unit of 4"));
    // A parting game left out, the tally kept.
    let lines: Vec<&str> = report.lines().collect();
    let dropped = format!("{}\n{}\n", lines[1], lines[2]);
    assert!(check_report(&dropped, &scope(1, 3)).unwrap_err().contains("1 parting"), "{dropped}");
    // Counts by kind or article that its lines do not give.
    let mut inflated = report_tally(&report).unwrap();
    *inflated.by_kind.entry("wxf vs cxq: different ply".to_owned()).or_default() += 5;
    let forged = format!("{}\n{}\n{}\n", lines[0], lines[1], serde_json::json!({ "tally": inflated.to_json() }));
    let found = check_report(&forged, &scope(1, 3)).unwrap_err();
    assert!(found.ends_with("by kind and by articles not the same"), "{found}");
    assert!(check_report("", &scope(1, 3)).unwrap_err().contains("empty"));
    assert!(check_report("not json\n", &scope(1, 3)).unwrap_err().contains("tally"));
    let garbage = format!("{{\"game\": 1}}\n{}\n", lines[2]);
    assert!(check_report(&garbage, &scope(1, 3)).is_err());
    assert_eq!(report_games(&report).lines().count(), 2);
}

#[test]
fn a_report_names_each_game_of_its_unit_once_and_only_the_job_s_kinds_of_parting() {
    let report = unit_report(&games(), 1, &DEFAULT_RULES, None).unwrap();
    let lines: Vec<&str> = report.lines().collect();
    let recounted = |lines: &[String]| {
        let mut tally = Tally::default();
        for line in lines {
            tally.count(Some(&serde_json::from_str(line).unwrap()));
        }
        tally.games = 3;
        let mut text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        text.push_str(&format!("{}\n", serde_json::json!({ "tally": tally.to_json() })));
        text
    };
    // A true parting line twice, renamed or not: refused, naming the line.
    let twice = recounted(&[lines[0].to_owned(), lines[0].to_owned()]);
    assert_eq!(check_report(&twice, &scope(1, 3)).unwrap_err(), "line 2: game 1 named twice");
    let padded = recounted(&[lines[0].to_owned(), lines[0].replace("game 1", "game 01")]);
    let found = check_report(&padded, &scope(1, 3)).unwrap_err();
    assert_eq!(found, "line 2: 'game 01' is not a game of this unit (game 1 to game 3)");
    // The unit of games 4 to 6 holds no game 1.
    let found = check_report(&report, &scope(4, 3)).unwrap_err();
    assert_eq!(found, "line 1: 'game 1' is not a game of this unit (game 4 to game 6)");
    // Kinds made up, of another rule set, or of a reference the job has not.
    for (kind, with) in [
        ("wxf vs cxq: made up", ""),
        ("wxf vs computer: different ply", ""),
        ("wxf vs fairy-stockfish: different ply", ""),
        ("wxf vs pyffish: different ply", "pyffish"),
        ("wxf vs wxf: different ply", "pyffish"),
    ] {
        let mut line: Value = serde_json::from_str(lines[0]).unwrap();
        line["kinds"] = serde_json::json!([kind]);
        let forged = recounted(&[line.to_string()]);
        let scope = ReportScope { reference: with, ..scope(1, 3) };
        let found = check_report(&forged, &scope).unwrap_err();
        assert!(found.starts_with(&format!("line 1: a kind '{kind}' that is no parting")), "{found}");
    }
    let mut line: Value = serde_json::from_str(lines[0]).unwrap();
    line["kinds"] = serde_json::json!(["wxf vs fairy-stockfish: different ply"]);
    let with_reference = ReportScope { reference: "pyffish", ..scope(1, 3) };
    assert!(check_report(&recounted(&[line.to_string()]), &with_reference).is_ok());
}

/// A report's game lines, as `check_report` passes them.
fn lines_of(report: &str) -> Vec<Value> {
    let games = report_tally(report).unwrap().games;
    let first = report.lines().next().and_then(|l| serde_json::from_str::<Value>(l).ok());
    let first = first.and_then(|l| l["game"].as_str()?.strip_prefix("game ")?.parse().ok()).unwrap_or(1);
    check_report(report, &ReportScope { first_number: first, ..scope(1, games) }).unwrap().lines
}

/// A report whose tally is made to agree with its lines, as a forger would.
fn with_tally(lines: &[String], games: u64) -> String {
    let mut tally = Tally::default();
    for line in lines {
        tally.count(Some(&serde_json::from_str(line).unwrap()));
    }
    tally.games = games;
    let mut report: String = lines.iter().map(|l| format!("{l}\n")).collect();
    report.push_str(&serde_json::json!({ "tally": tally.to_json() }).to_string());
    report.push('\n');
    report
}

#[test]
fn spot_checks_pass_honest_reports_and_name_the_game_a_forged_one_misstates() {
    use rand::SeedableRng;
    let games = games();
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let report = unit_report(&games, 5, &DEFAULT_RULES, None).unwrap();
    // The unit of games 5 to 7, the file's last three (asked for one more: clipped).
    let before = "[Event \"before\"]\n\n1. h2e2 h9g7 *\n\n".repeat(4);
    let file = PgnFile::read(format!("{before}{}", pgn_text()).as_bytes()).unwrap();
    let pgn = |games: &Vec<PgnGame>| UnitGames::pgn(&file, 4, games.len() + 1);
    // The expected cost of a game, its plies by its rulings: the mean of the three.
    let plies: usize = games.iter().map(|g| g.moves.len()).sum();
    assert_eq!(pgn(&games).game_cost(3), (plies * 3) as f64 / 3.0);
    assert_eq!(
        spot_check(&lines_of(&report), &scope(5, games.len() as u64), pgn(&games), SPOT_CHECKED_GAMES, &mut rng)
            .map(drop),
        Ok(())
    );
    let lines: Vec<String> = report.lines().take(2).map(str::to_owned).collect();
    // Units of fewer games than are drawn: every game and line is checked.
    let left_out = with_tally(&lines[1..], 3);
    let found =
        spot_check(&lines_of(&left_out), &scope(5, games.len() as u64), pgn(&games), SPOT_CHECKED_GAMES, &mut rng)
            .unwrap_err();
    assert!(found.starts_with("game 5: left out, where the rule sets part (wxf vs cxq"), "{found}");
    let mut moved: Value = serde_json::from_str(&lines[0]).unwrap();
    moved["verdicts"][0]["ply"] = serde_json::json!(12);
    let misstated = with_tally(&[moved.to_string(), lines[1].clone()], 3);
    let found =
        spot_check(&lines_of(&misstated), &scope(5, games.len() as u64), pgn(&games), SPOT_CHECKED_GAMES, &mut rng)
            .unwrap_err();
    assert_eq!(found, "game 5: verdicts other than the arbiter's");
    // Every line is verified again, with no game drawn.
    let found = spot_check(&lines_of(&misstated), &scope(5, games.len() as u64), pgn(&games), 0, &mut rng).unwrap_err();
    assert_eq!(found, "game 5: verdicts other than the arbiter's");
    // The quiet game reported as parting, with the chase's line renamed.
    let mut renamed: Value = serde_json::from_str(&lines[0]).unwrap();
    renamed["game"] = serde_json::json!("game 6");
    let made_up = with_tally(&[lines[0].clone(), renamed.to_string(), lines[1].clone()], 3);
    let found =
        spot_check(&lines_of(&made_up), &scope(5, games.len() as u64), pgn(&games), SPOT_CHECKED_GAMES, &mut rng)
            .unwrap_err();
    assert!(found.starts_with("game 6: "), "{found}");
    let foreign = with_tally(&[renamed.to_string().replace("game 6", "game 9")], 3);
    let found =
        spot_check(&lines_of(&foreign), &scope(5, games.len() as u64), pgn(&games), SPOT_CHECKED_GAMES, &mut rng)
            .unwrap_err();
    assert_eq!(found, "game 9: not a game of this unit");
}

#[test]
fn spot_checks_of_fresh_self_play_games_play_them_again() {
    use rand::SeedableRng;
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let settings =
        PlaySettings { nodes: 20, random_plies: 8, seed: 1, rules: RuleSet::Wxf, max_plies: 400, network: None };
    // A unit of the job's games 31 to 70 (as a worker plays them), which holds
    // games the rule sets part on (the seed is fixed: so does every run).
    let games: Vec<PgnGame> = (30..70).map(|g| fresh_game(&settings, g)).collect();
    let report = unit_report(&games, 31, &DEFAULT_RULES, None).unwrap();
    let lines: Vec<String> = report.lines().filter(|l| !l.starts_with("{\"tally")).map(str::to_owned).collect();
    assert!((1..=SPOT_CHECKED_GAMES).contains(&lines.len()), "{report}");
    let fresh = || UnitGames::SelfPlay { settings: &settings, count: 40 };
    assert_eq!(spot_check(&lines_of(&report), &scope(31, 40), fresh(), SPOT_CHECKED_GAMES, &mut rng).map(drop), Ok(()));
    // A verdict misstated: every line is drawn when a unit has 8 or fewer.
    let mut moved: Value = serde_json::from_str(&lines[0]).unwrap();
    let name = moved["game"].as_str().unwrap().to_owned();
    moved["verdicts"][0]["ply"] = serde_json::json!(3);
    let misstated = with_tally(&[[moved.to_string()].as_slice(), &lines[1..]].concat(), 40);
    let found = spot_check(&lines_of(&misstated), &scope(31, 40), fresh(), SPOT_CHECKED_GAMES, &mut rng).unwrap_err();
    assert_eq!(found, format!("{name}: verdicts other than the arbiter's"));
    // Ruled again from the line's own moves: no game played again.
    let found = spot_check(&lines_of(&misstated), &scope(31, 40), fresh(), 0, &mut rng).unwrap_err();
    assert_eq!(found, format!("{name}: verdicts other than the arbiter's"));
    let honest = spot_check(&lines_of(&report), &scope(31, 40), fresh(), 0, &mut rng).unwrap();
    assert_eq!((honest.games, honest.lines), (0, lines.len() as u64));
    // A game marked unplayable in place of its parting line, to hide it.
    let hidden = format!(r#"{{"game":"{name}","error":"ply 3: made up"}}"#);
    let hiding = with_tally(&[[hidden].as_slice(), &lines[1..]].concat(), 40);
    let found = spot_check(&lines_of(&hiding), &scope(31, 40), fresh(), SPOT_CHECKED_GAMES, &mut rng).unwrap_err();
    assert_eq!(found, format!("{name}: its error is not the arbiter's"));
}

#[test]
fn the_spot_check_budget_draws_no_more_than_it_holds() {
    let checks = SpotChecks::new(1000.0);
    assert_eq!(checks.draw(8, 300.0), 3, "a second's worth to start with");
    assert_eq!(checks.draw(8, 300.0), 0);
    checks.charge(5000.0);
    std::thread::sleep(std::time::Duration::from_millis(20));
    assert_eq!(checks.draw(8, 1.0), 0, "in debt");
    // A game dearer than a second's budget waits for the bucket to fill to its cost.
    let dear = SpotChecks::new(10.0);
    assert_eq!(dear.draw(8, 1e6), 0);
    assert_eq!(SpotChecks::new(0.0).draw(8, 1.0), 0, "no budget, no draws");
}

/// Generated games with the metamorphic properties, as a worker verifies them: the
/// honest report passes the shape check and the spot checks; a forged broken
/// property is refused by the spot check (the arbiter keeps the property), and a
/// metamorphic kind in a job that did not ask for the properties by the shape check.
#[test]
fn generated_games_with_metamorphic_properties_are_checked_like_any_others() {
    use xq_engine::xiangqi::rules::verify::unit_report_with;
    let (first, count) = (5_000_u64, 30_usize);
    let games: Vec<PgnGame> = (0..count as u64).map(|g| hard_game_pgn(first + g)).collect();
    let report = unit_report_with(&games, 1, &DEFAULT_RULES, true, None).unwrap();
    let metamorphic = ReportScope { metamorphic: true, ..scope(1, count as u64) };
    let lines = check_report(&report, &metamorphic).unwrap().lines;
    assert!(!lines.is_empty(), "generated games part the rule sets");
    let unit = || UnitGames::Generated { first, count };
    let mut rng = rand::rng();
    let honest = spot_check(&lines, &metamorphic, unit(), SPOT_CHECKED_GAMES, &mut rng).unwrap();
    assert_eq!(honest.lines, lines.len() as u64);

    // A quiet game (one the report leaves out) reported as breaking the detour.
    let numbered: HashSet<&str> = lines.iter().filter_map(|l| l["game"].as_str()).collect();
    let quiet = (1..=count).map(|n| format!("game {n}")).find(|n| !numbered.contains(n.as_str())).unwrap();
    let forged = serde_json::json!({
        "game": quiet,
        "metamorphic": [{"rules": "wxf", "property": "detour"}],
        "kinds": ["wxf metamorphic: detour"],
    });
    let mut forged_lines: Vec<String> = report.lines().map(str::to_owned).collect();
    forged_lines.pop();
    forged_lines.push(forged.to_string());
    let forged_report = with_tally(&forged_lines, count as u64);
    let checked = check_report(&forged_report, &metamorphic).unwrap().lines;
    let found = spot_check(&checked, &metamorphic, unit(), 0, &mut rng).unwrap_err();
    assert!(found.contains(&format!("{quiet}: reported as parting or unplayable")), "{found}");
    let refused = check_report(&forged_report, &scope(1, count as u64)).unwrap_err();
    assert!(refused.ends_with("neither an error nor verdicts"), "{refused}");
    let other = forged_report.replace("wxf metamorphic: detour", "computer metamorphic: detour");
    let refused = check_report(&other, &metamorphic).unwrap_err();
    assert!(refused.contains("no parting or metamorphic property of the job's rule sets"), "{refused}");
}

#[test]
fn kept_tallies_count_each_unit_once_whether_it_lands_before_during_or_after_the_read() {
    let unit = |games: u64, parting: u64| Tally { games, parting, ..Tally::default() };
    let tallies = Tallies::default();
    tallies.count(1, 0, &unit(10, 1));
    assert!(matches!(tallies.read(1), TallyRead::Load), "not kept before a first read");
    assert!(matches!(tallies.read(1), TallyRead::Busy), "one reader loads");
    // Units 1 and 2 land during the read; the read finds units 0 and 1 stored.
    tallies.count(1, 1, &unit(10, 2));
    tallies.count(1, 2, &unit(5, 0));
    let loaded = tallies.loaded(1, [(0, unit(10, 1)), (1, unit(10, 2))]);
    assert_eq!((loaded.games, loaded.parting), (25, 3));
    tallies.count(1, 2, &unit(5, 0));
    tallies.count(1, 3, &unit(5, 4));
    let TallyRead::Kept(kept) = tallies.read(1) else { panic!("kept after the read") };
    assert_eq!((kept.games, kept.parting), (30, 7));
    // A failed read is forgotten: the next reader loads.
    assert!(matches!(tallies.read(2), TallyRead::Load));
    tallies.failed(2);
    assert!(matches!(tallies.read(2), TallyRead::Load));
}

#[test]
fn forgotten_tallies_are_read_again_and_a_read_under_way_is_not_kept() {
    let unit = |games: u64| Tally { games, ..Tally::default() };
    let tallies = Tallies::default();
    assert!(matches!(tallies.read(1), TallyRead::Load));
    tallies.loaded(1, [(0, unit(10)), (1, unit(10))]);
    tallies.forget(1);
    assert!(matches!(tallies.read(1), TallyRead::Load), "read again from the stored reports");
    // Forgotten during that read: what it found is given, not kept.
    tallies.forget(1);
    assert_eq!(tallies.loaded(1, [(0, unit(10))]).games, 10);
    assert!(matches!(tallies.read(1), TallyRead::Load));
    assert_eq!(tallies.loaded(1, [(1, unit(10))]).games, 10);
    let TallyRead::Kept(kept) = tallies.read(1) else { panic!("kept after a read not forgotten") };
    assert_eq!(kept.games, 10);
}

/// A reference that never rules, under Fairy-Stockfish's name.
struct Silent;

impl xq_engine::xiangqi::rules::verify::Reference for Silent {
    fn name(&self) -> &'static str {
        FAIRY_STOCKFISH
    }
    fn verdict(
        &mut self,
        _: &xq_engine::xiangqi::Position,
        _: &[xq_engine::xiangqi::Move],
        _: &[usize],
    ) -> Result<Option<(usize, xq_engine::xiangqi::rules::Outcome)>, String> {
        Ok(None)
    }
}

#[test]
fn two_reports_are_compared_on_the_reference_s_verdicts_alone() {
    let games = games();
    let with_reference = ReportScope { reference: REFERENCE_PYFFISH, ..scope(1, 3) };
    let honest = unit_report(&games, 1, &DEFAULT_RULES, Some(&mut Silent)).unwrap();
    let honest = reference_verdicts(&check_report(&honest, &with_reference).unwrap().lines, REFERENCE_PYFFISH);
    // The chase, which WXF rules and the reference does not: its kind and verdict.
    assert_eq!(honest.keys().copied().collect::<Vec<_>>(), [1]);
    assert_eq!(honest[&1]["kinds"], serde_json::json!(["wxf vs fairy-stockfish: only one rules"]));
    assert_eq!(honest[&1]["reference"]["result"], "*");
    // The rule sets' own verdicts are not compared (the spot checks verify them).
    let again = unit_report(&games, 1, &DEFAULT_RULES, Some(&mut Silent)).unwrap();
    let mut lines = check_report(&again, &with_reference).unwrap().lines;
    lines[0]["verdicts"] = serde_json::json!([]);
    assert_eq!(reference_difference(&honest, &reference_verdicts(&lines, REFERENCE_PYFFISH)), None);
    // A report that has the reference agree everywhere hides the chase's parting.
    let forged = unit_report(&games, 1, &DEFAULT_RULES, None).unwrap();
    let forged = reference_verdicts(&check_report(&forged, &with_reference).unwrap().lines, REFERENCE_PYFFISH);
    assert_eq!(reference_difference(&honest, &forged), Some(1));
    assert_eq!(reference_difference(&forged, &honest), Some(1));
}

#[test]
fn a_parting_game_reads_back_as_pgn_with_its_moves_and_verdicts() {
    let report = unit_report(&games(), 7, &DEFAULT_RULES, None).unwrap();
    let line = report.lines().next().unwrap();
    let pgn = parting_pgn(line, 12).unwrap();
    let parsed = parse_pgn(&pgn).unwrap();
    assert_eq!(parsed.len(), 1);
    assert_eq!(parsed[0].moves, games()[0].moves);
    assert_eq!(parsed[0].tag("Site"), Some("game 7"));
    assert_eq!(parsed[0].tag("Event"), Some("verification 12"));
    assert!(pgn.contains("wxf: 0-1 at ply 8"), "{pgn}");
    // The unplayable game's line has no moves to write.
    assert_eq!(parting_pgn(report.lines().nth(1).unwrap(), 12), None);
}

#[test]
fn rule_sets_are_two_or_more_each_once() {
    let names = |list: &[&str]| list.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>();
    assert_eq!(rule_sets(&[]).unwrap(), DEFAULT_RULES);
    assert!(rule_sets(&names(&["wxf"])).unwrap_err().problem.contains("two or more"));
    assert!(rule_sets(&names(&["wxf", "wxf"])).unwrap_err().problem.contains("named twice"));
    assert!(rule_sets(&names(&["wxf", "fide"])).is_err());
    assert_eq!(rule_sets(&names(&["cxq", "computer"])).unwrap(), [RuleSet::Cxq, RuleSet::Computer]);
}
