//! The runner's own cost per move, next to the floor: a bare pipe round trip to a
//! trivial echo process (`cat`), measured in the same run (`cargo bench -p xq-worker
//! --bench overhead`). The engine is this very program started with
//! `--instant-engine`: it answers `go` at once with a legal move, keeping its position
//! incrementally, so what remains is the runner's work (formatting the position,
//! pipes, parsing, the referee) plus the unavoidable round trip.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use xq_engine::xiangqi::movegen::legal_moves;
use xq_engine::xiangqi::notation::{Dialect, parse_uci};
use xq_engine::xiangqi::rules::RuleSet;
use xq_engine::xiangqi::{Position, fen};
use xq_worker::engine_process::EngineConfig;
use xq_worker::game::{Adjudication, GameSettings, Opening, Start};
use xq_worker::match_runner::{MatchSettings, run_match};
use xq_worker::openings::read_book;

const INSTANT_ENGINE: &str = "--instant-engine";

fn instant_engine() {
    let mut out = std::io::stdout().lock();
    let mut position = Position::startpos();
    let mut start_text = String::new();
    let mut applied = 0;
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.first().copied() {
            Some("uci") => writeln!(out, "id name instant\nuciok").unwrap(),
            Some("isready") => writeln!(out, "readyok").unwrap(),
            Some("position") => {
                let moves_at = words.iter().position(|&w| w == "moves").unwrap_or(words.len());
                let start = words[1..moves_at].join(" ");
                if start != start_text {
                    position = match start.strip_prefix("fen ") {
                        Some(text) => fen::parse(text).unwrap(),
                        None => Position::startpos(),
                    };
                    start_text = start;
                    applied = 0;
                }
                let moves = words.get(moves_at + 1..).unwrap_or(&[]);
                for text in &moves[applied.min(moves.len())..] {
                    let mv = parse_uci(&position, text, Dialect::ZeroBased).unwrap();
                    position.make_move(mv);
                }
                applied = moves.len();
            }
            Some("go") => {
                let moves = legal_moves(&position);
                let choice = moves[(position.hash() % moves.len() as u64) as usize];
                writeln!(out, "bestmove {choice}").unwrap();
            }
            Some("quit") => break,
            _ => {}
        }
        out.flush().unwrap();
    }
}

/// Average time to write a line to `cat` and read it back.
fn pipe_round_trip(rounds: u32) -> Duration {
    let mut child = Command::new("cat").stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("start cat");
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    let started = Instant::now();
    for _ in 0..rounds {
        writeln!(stdin, "position startpos moves h2e2 h9g7").unwrap();
        stdin.flush().unwrap();
        line.clear();
        stdout.read_line(&mut line).unwrap();
    }
    let elapsed = started.elapsed();
    drop(stdin);
    child.wait().unwrap();
    elapsed / rounds
}

fn main() {
    if std::env::args().any(|a| a == INSTANT_ENGINE) {
        instant_engine();
        return;
    }
    let engine = EngineConfig {
        name: "instant".to_owned(),
        command: std::env::current_exe().expect("this program"),
        args: vec![INSTANT_ENGINE.to_owned()],
        ..EngineConfig::default()
    };
    let book = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../books/xiangqi-2ply.epd");
    let openings: Vec<Start> = read_book(&book, None)
        .unwrap_or_else(|_| vec![Opening { start: Position::startpos(), moves: Vec::new() }])
        .into_iter()
        .map(Start::from)
        .collect();
    let settings = MatchSettings {
        engines: [engine.clone(), EngineConfig { name: "instant-2".to_owned(), ..engine }],
        pairs: (0..50).collect(),
        concurrency: 1,
        pin_cores: false,
        openings: openings.into(),
        game: GameSettings {
            time_control: "nodes=1".parse().unwrap(),
            rules: RuleSet::Wxf,
            time_margin: Duration::from_millis(50),
            hang_timeout: Duration::from_secs(10),
            adjudication: Adjudication::default(),
            max_plies: Some(200),
            violation_timing: Default::default(),
        },
        sprt: None,
    };
    let floor = pipe_round_trip(20_000);
    let mut plies = 0;
    let started = Instant::now();
    let totals = run_match(&settings, |finished, _| {
        plies += finished.record.moves.len();
        true
    })
    .expect("the match runs");
    let per_move = started.elapsed() / plies.max(1) as u32;
    println!("games {}, moves {plies}", totals.games());
    println!("pipe round trip to cat (floor): {:>8.1} us", floor.as_secs_f64() * 1e6);
    println!("runner per move:                {:>8.1} us", per_move.as_secs_f64() * 1e6);
    println!("ratio: {:.2}x the floor (target: within 2x)", per_move.as_secs_f64() / floor.as_secs_f64());
}
