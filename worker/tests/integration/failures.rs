//! Each failure of an engine gives the right result and reason, and the runner never
//! hangs: the game is lost, the engine restarted, the match goes on; an engine that
//! cannot start, or fails before its first move of a game, fails the match.

use std::time::Instant;

use xq_coordinator::jobs::test::endings::Conditions;
use xq_coordinator::jobs::test::replay::{CheckedGame, PairContext, check_pair};
use xq_engine::variant::Variant;
use xq_engine::xiangqi::rules::Outcome;
use xq_engine::xiangqi::rules::RuleSet;
use xq_worker::engine_process::{EngineConfig, EngineProcess, Protocol};
use xq_worker::game::Termination;
use xq_worker::match_runner::{MatchError, MatchSettings, run_match};
use xq_worker::pgn_out::game_pgn;

use crate::{fake_engine, our_engine, settings, startpos};

/// The pair's games as the worker reports them to a coordinator, the fake engine as
/// the new engine (Red in the first game).
struct Reported {
    pgns: Vec<String>,
    names: [String; 2],
    time_control: String,
}

impl Reported {
    /// What the coordinator's check of a report says of the pair.
    fn judged(&self) -> Result<[CheckedGame; 2], String> {
        let spec = xq_proto::v1::MatchSpec {
            time_control: self.time_control.clone(),
            max_plies: 300,
            time_margin_ms: 100,
            ..Default::default()
        };
        let conditions = Conditions::for_lease(&spec)?;
        let names = [self.names[0].as_str(), self.names[1].as_str()];
        let context = PairContext {
            opening: None,
            variant: Variant::Xiangqi,
            rules: RuleSet::Wxf,
            timing: Default::default(),
            names,
            conditions: &conditions,
        };
        check_pair([&self.pgns[0], &self.pgns[1]], &context).map_err(|e| e.to_string())
    }
}

/// One pair of `engines` from the start position, one game at a time.
fn one_pair(engines: [EngineConfig; 2], time_control: &str) -> MatchSettings {
    MatchSettings {
        engines,
        pairs: vec![0],
        concurrency: 1,
        pin_cores: false,
        openings: startpos().into(),
        game: settings(time_control),
        sprt: None,
    }
}

fn against_fake(mode: &str, time_control: &str) -> Vec<(Outcome, Termination, String, bool)> {
    played_against_fake(mode, time_control).0
}

fn played_against_fake(mode: &str, time_control: &str) -> (Vec<(Outcome, Termination, String, bool)>, Reported) {
    let match_settings = one_pair([fake_engine(mode), our_engine("xq")], time_control);
    let mut games = Vec::new();
    let time_control = match_settings.game.time_control.to_string();
    let mut reported = Reported {
        pgns: Vec::new(),
        names: [fake_engine(mode).name, "xq".to_owned()],
        time_control: time_control.clone(),
    };
    let started = Instant::now();
    run_match(&match_settings, |finished, _| {
        let record = &finished.record;
        reported.pgns.push(game_pgn(record, "t", 1));
        let fake_is_red = finished.leg == 0;
        let fake_lost = record.outcome
            == Outcome::Win(if fake_is_red { xq_engine::color::Color::Black } else { xq_engine::color::Color::Red });
        games.push((record.outcome, record.termination, record.reason.clone(), fake_lost));
        true
    })
    .expect("the match survives the failure");
    assert!(started.elapsed().as_secs() < 30, "{mode} took {:?}", started.elapsed());
    (games, reported)
}

#[test]
fn a_crashing_engine_loses_each_game_and_is_restarted() {
    let (games, reported) = played_against_fake("crash-later", "nodes=500");
    assert_eq!(games.len(), 2, "both games of the pair are played: the engine was restarted");
    for (_, termination, reason, fake_lost) in games {
        assert!(fake_lost);
        assert_eq!(termination, Termination::EngineFailure);
        assert!(reason.contains("stopped talking") && reason.contains("segmentation fault (simulated)"), "{reason}");
    }
    // The coordinator counts both losses on the engine each game names (Red's at its
    // second move, then Black's at its second), and not a game that blames the other
    // engine or names none.
    assert!(reported.pgns[0].contains("[FailedEngine \"red\"]"), "{}", reported.pgns[0]);
    assert!(reported.pgns[1].contains("[FailedEngine \"black\"]"), "{}", reported.pgns[1]);
    assert_eq!(reported.judged().map(|games| games.map(|g| g.points)), Ok([0, 0]));
    let blamed = |tag: &str| Reported {
        pgns: vec![
            reported.pgns[0].clone(),
            reported.pgns[1].replace("[FailedEngine \"black\"]\n", tag).replace("1-0", "0-1"),
        ],
        names: reported.names.clone(),
        time_control: reported.time_control.clone(),
    };
    let other = blamed("[FailedEngine \"red\"]\n").judged().unwrap_err();
    assert!(other.contains("Red's engine failed after ply 3, where Black was to move"), "{other}");
    let none = blamed("").judged().unwrap_err();
    assert!(none.contains("abandoned without [FailedEngine]"), "{none}");
}

#[test]
fn a_hanging_engine_loses_on_time_under_a_clock() {
    let (games, reported) = played_against_fake("hang", "1+0");
    for (_, termination, reason, fake_lost) in games {
        assert!(fake_lost);
        assert_eq!(termination, Termination::TimeForfeit, "{reason}");
    }
    // The coordinator counts both forfeits on the worker's evidence, and not a forged
    // think within the clock.
    assert_eq!(reported.judged().map(|games| games.map(|g| g.points)), Ok([0, 0]));
    let over = reported.pgns[0].lines().find(|l| l.starts_with("[OverTime ")).expect("the think that ran over");
    let forged = Reported {
        pgns: vec![reported.pgns[0].replace(over, "[OverTime \"0.050\"]"), reported.pgns[1].clone()],
        ..reported
    };
    assert!(forged.judged().unwrap_err().contains("within"), "{:?}", forged.judged());
}

/// An engine that overruns its time loses, and is restarted: its late answer must not
/// be taken as its first move of the next game (an illegal move there, as Black).
#[test]
fn an_engine_that_answers_too_late_loses_on_time_and_is_restarted() {
    let (games, reported) = played_against_fake("late", "1+0");
    assert_eq!(games.len(), 2);
    for (_, termination, reason, fake_lost) in games {
        assert!(fake_lost);
        assert_eq!(termination, Termination::TimeForfeit, "{reason}");
    }
    assert_eq!(reported.judged().map(|games| games.map(|g| g.points)), Ok([0, 0]));
}

#[test]
fn a_hanging_engine_is_a_failure_under_a_node_budget() {
    let (games, reported) = played_against_fake("hang-later", "nodes=500");
    for (_, termination, reason, fake_lost) in games {
        assert!(fake_lost);
        assert_eq!(termination, Termination::EngineFailure);
        assert!(reason.contains("no bestmove"), "{reason}");
    }
    assert_eq!(reported.judged().map(|games| games.map(|g| g.points)), Ok([0, 0]));
}

#[test]
fn an_illegal_move_loses() {
    let (games, reported) = played_against_fake("illegal-later", "nodes=500");
    for (_, termination, reason, fake_lost) in games {
        assert!(fake_lost);
        assert_eq!(termination, Termination::IllegalMove);
        assert!(reason.contains("e0e9"), "{reason}");
    }
    // The coordinator sees the refused move for itself.
    assert_eq!(reported.judged().map(|games| games.map(|g| g.points)), Ok([0, 0]));
}

#[test]
fn a_flood_of_output_is_cut_off() {
    for (_, termination, reason, fake_lost) in against_fake("flood-later", "nodes=500") {
        assert!(fake_lost);
        assert_eq!(termination, Termination::EngineFailure);
        assert!(reason.contains("flooded"), "{reason}");
    }
}

/// The most memory this process has held (VmHWM), in bytes.
fn peak_memory() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024
}

/// An engine that writes 100 MB without a newline fails its game with a clear reason,
/// and the worker holds no more than the line bound of it (reading it all grew the
/// worker by the whole line, and by more with each engine that did so).
#[test]
fn an_endless_line_of_output_fails_the_engine_and_is_not_held() {
    let before = peak_memory();
    let games = against_fake("longline-later", "nodes=500");
    assert_eq!(games.len(), 2, "both games of the pair are played: the engine was restarted");
    for (_, termination, reason, fake_lost) in games {
        assert!(fake_lost);
        assert_eq!(termination, Termination::EngineFailure);
        assert!(reason.contains("a line longer than 1048576 bytes"), "{reason}");
    }
    let grown = peak_memory().saturating_sub(before);
    assert!(grown < 40 << 20, "the worker grew by {} MB", grown >> 20);
}

#[test]
fn a_bestmove_without_a_move_is_a_failure() {
    for (_, termination, reason, fake_lost) in against_fake("garbage-later", "nodes=500") {
        assert!(fake_lost);
        assert_eq!(termination, Termination::EngineFailure);
        assert!(reason.contains("malformed"), "{reason}");
    }
}

/// An engine that cannot make a single move (it dies at its first `go`, or its first
/// move is illegal) fails the pair, naming itself and what it said, and no game is
/// counted: as Red and, its opponent moving first, as Black.
#[test]
fn an_engine_that_fails_before_its_first_move_fails_the_pair() {
    for (mode, illegal, said) in [("crash", false, "segmentation fault (simulated)"), ("illegal", true, "e0e9")] {
        for fake_first in [true, false] {
            let fake = fake_engine(mode);
            let engines = if fake_first { [fake, our_engine("xq")] } else { [our_engine("xq"), fake] };
            let match_settings = one_pair(engines, "nodes=500");
            let mut counted = 0;
            let error = run_match(&match_settings, |_, _| {
                counted += 1;
                true
            })
            .expect_err("the pair fails");
            match &error {
                MatchError::BeforeFirstMove { name, illegal: was_illegal, reason } => {
                    assert_eq!((name.as_str(), *was_illegal), (format!("fake-{mode}").as_str(), illegal));
                    assert!(reason.contains(said), "{reason}");
                }
                other => panic!("{mode}: {other}"),
            }
            assert!(error.to_string().contains("failed before its first move"), "{error}");
            assert_eq!(counted, 0, "{mode}: no game of the pair is counted");
        }
    }
}

#[test]
fn an_engine_that_never_gets_ready_fails_the_match() {
    let match_settings = one_pair([fake_engine("noready"), our_engine("xq")], "nodes=500");
    let error = run_match(&match_settings, |_, _| true).expect_err("the match cannot start");
    assert!(matches!(error, MatchError::Engine { ref name, .. } if name == "fake-noready"), "{error}");
    assert!(error.to_string().contains("no readyok"), "{error}");
}

#[test]
fn an_sprt_stops_the_match_at_its_bound() {
    // The fake engine loses every game at once, so the pairs soon prove our engine
    // stronger and H1 is accepted long before the 50 pairs are played.
    let sprt = xq_stats::Sprt::new(0.0, 300.0, 0.2, 0.2, xq_stats::Model::Logistic).unwrap();
    let match_settings = MatchSettings {
        engines: [our_engine("xq"), fake_engine("illegal-later")],
        pairs: (0..50).collect(),
        concurrency: 1,
        pin_cores: true,
        openings: startpos().into(),
        game: settings("nodes=200"),
        sprt: Some(sprt),
    };
    let totals = run_match(&match_settings, |_, _| true).expect("the match runs");
    let state = totals.sprt(&sprt).expect("an SPRT state");
    assert_eq!(state.decision(), Some(true), "{state:?}");
    assert!(totals.games() < 100, "stopped early after {} games", totals.games());
}

/// Two games at once: when the SPRT decides, the other slot is inside a pair and
/// finishes it (here held to it: the decision's `on_game` waits while the other slot
/// plays). Those games are not counted and not shown (so not written to a PGN): the
/// totals are the test's at its first crossing, whatever the games in flight did.
#[test]
fn the_games_in_flight_when_the_sprt_decides_are_not_counted() {
    let sprt = xq_stats::Sprt::new(0.0, 300.0, 0.2, 0.2, xq_stats::Model::Logistic).unwrap();
    let match_settings = MatchSettings {
        engines: [our_engine("xq"), fake_engine("illegal-later")],
        pairs: (0..50).collect(),
        concurrency: 2,
        pin_cores: false,
        openings: startpos().into(),
        game: settings("nodes=200"),
        sprt: Some(sprt),
    };
    let mut seen = Vec::new();
    let totals = run_match(&match_settings, |_, totals| {
        let decision = totals.sprt(&sprt).and_then(|s| s.decision());
        seen.push((totals.games(), decision));
        if decision.is_some() {
            // The other slot goes on meanwhile: its games end after the decision.
            std::thread::sleep(std::time::Duration::from_millis(500));
        }
        true
    })
    .expect("the match runs");
    let decided_at = seen.iter().position(|(_, decision)| decision.is_some()).expect("a decision");
    assert_eq!(decided_at + 1, seen.len(), "games were shown after the decision: {seen:?}");
    assert_eq!(totals.games(), seen[decided_at].0);
    assert_eq!(totals.sprt(&sprt).and_then(|s| s.decision()), Some(true));
    assert!(totals.overrun >= 1, "no game ended after the decision: the test saw nothing");
}

/// First contact: the common mistakes with an engine are named with their fix in one
/// line: a file that is not executable, a path that names nothing, and a program that
/// does not complete the handshake of the protocol asked of it.
#[test]
fn an_engine_that_cannot_start_or_speaks_another_protocol_is_named_with_the_fix() {
    let dir = std::env::temp_dir().join(format!("xq-first-contact-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let not_executable = dir.join("engine.sh");
    std::fs::write(&not_executable, "#!/bin/sh\n").unwrap();
    let start = |command: &std::path::Path, protocol| {
        let config = EngineConfig { command: command.to_path_buf(), protocol, ..our_engine("x") };
        EngineProcess::start(&config).err().expect("refused").to_string()
    };
    let error = start(&not_executable, Protocol::Uci);
    assert!(error.contains("Permission denied") && error.contains("chmod +x"), "{error}");
    let error = start(&dir.join("missing"), Protocol::Uci);
    assert!(error.contains("give its path"), "{error}");
    // A program that reads its input and says something else, then exits.
    let chatty = dir.join("chatty.sh");
    std::fs::write(&chatty, "#!/bin/sh\nread line\necho \"hello, I am not an engine\"\n").unwrap();
    std::fs::set_permissions(&chatty, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let error = start(&chatty, Protocol::Uci);
    assert!(error.contains("did not answer 'uci' with 'uciok'"), "{error}");
    assert!(error.contains("A UCCI engine needs protocol=ucci"), "{error}");
    let error = start(&chatty, Protocol::Ucci);
    assert!(error.contains("A UCI engine needs protocol=uci"), "{error}");
    let _ = std::fs::remove_dir_all(&dir);
}
