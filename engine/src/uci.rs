//! The engine's protocol loop: UCI as Pikafish speaks it, or UCCI as ElephantEye
//! speaks it when the first command is `ucci`.
//!
//! Commands are read on the caller's thread and a search runs on its own thread, so
//! `isready` and `stop` are answered while it thinks. A malformed command is answered
//! with `info string` and the reason, and the engine carries on.

use std::io::{BufRead, Write};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::xiangqi::nnue::Network;
use crate::xiangqi::nnue::embedded::embedded;
use crate::xiangqi::notation::{Dialect, parse_uci};
use crate::xiangqi::rules::RuleSet;
use crate::xiangqi::search::limits::Limits;
use crate::xiangqi::search::params::{TUNABLES, Tunable};
use crate::xiangqi::search::{Score, SearchInfo, SearchOptions, Shared, search};
use crate::xiangqi::{Move, Position, fen, perft};
use crate::xiongqi;

/// Which protocol the session speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Protocol {
    Uci,
    Ucci,
}

const DEFAULT_HASH_MB: usize = 16;
const MAX_HASH_MB: usize = 65_536;
const MAX_THREADS: usize = 256;

type Output = Arc<Mutex<Box<dyn Write + Send>>>;

fn say(out: &Output, line: &str) {
    let mut out = out.lock().expect("output lock");
    // A closed output leaves nobody to tell; the loop ends on its own at EOF.
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// The protocol session.
struct Session {
    protocol: Protocol,
    out: Output,
    shared: Arc<Shared>,
    hash_mb: usize,
    options: SearchOptions,
    start: Position,
    moves: Vec<Move>,
    /// The running search, and whether it runs until stopped.
    search: Option<(JoinHandle<()>, bool)>,
    /// The game played: Xiangqi, or Xiongqi with its own start and moves.
    xiongqi: Option<XiongqiSetup>,
    /// Raised to stop a Xiongqi search.
    xiongqi_stop: Arc<AtomicBool>,
    /// The deepest iteration a search may reach (0: no cap): a weakened copy of the
    /// engine for tests and for the coordinator's `xq local` demonstration.
    depth_limit: i32,
    /// The net: the embedded one, or the one EvalFile loaded; searches use it while
    /// `use_nnue` is on.
    net: Arc<Network>,
    /// The UseNNUE option: off, searches use the handcrafted evaluation.
    use_nnue: bool,
    /// Whether the search's tunable numbers are options.
    option_set: OptionSet,
    /// Moves a UCCI `banmoves` command banned from the next search, as written.
    banned_next: Vec<String>,
}

/// Which options the engine declares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OptionSet {
    /// The options a user sets.
    Standard,
    /// Those and the search's tunable numbers ([`crate::xiangqi::search::params`]),
    /// for SPSA tuning: the `xq-engine` binary built with the `tune` feature.
    Tuning,
}

/// A Xiongqi position as `position` gave it.
#[derive(Clone)]
struct XiongqiSetup {
    start: xiongqi::Position,
    moves: Vec<xiongqi::XiongqiMove>,
}

impl XiongqiSetup {
    fn game(&self) -> xiongqi::Game {
        let mut game = xiongqi::Game::new(self.start.clone());
        for &mv in &self.moves {
            game.play(mv).expect("moves were checked when the position was set");
        }
        game
    }
}

/// Runs the protocol loop until `quit` or the end of `input`, declaring `option_set`.
pub fn run(input: impl BufRead, output: impl Write + Send + 'static, option_set: OptionSet) {
    let out: Output = Arc::new(Mutex::new(Box::new(output)));
    let mut session = Session {
        protocol: Protocol::Uci,
        out,
        shared: Arc::new(Shared::new(DEFAULT_HASH_MB)),
        hash_mb: DEFAULT_HASH_MB,
        options: SearchOptions::default(),
        start: Position::startpos(),
        moves: Vec::new(),
        search: None,
        xiongqi: None,
        xiongqi_stop: Arc::new(AtomicBool::new(false)),
        depth_limit: 0,
        net: embedded(),
        use_nnue: true,
        option_set,
        banned_next: Vec::new(),
    };
    session.options.network = Some(session.net.clone());
    for line in input.lines() {
        let Ok(line) = line else {
            session.info("unreadable input line (not UTF-8)");
            continue;
        };
        let words: Vec<&str> = line.split_whitespace().collect();
        let Some((&command, rest)) = words.split_first() else {
            continue;
        };
        if !session.execute(command, rest) {
            break;
        }
    }
    // At the end of input a bounded search may finish and report its move.
    session.finish_search(false);
}

impl Session {
    fn info(&self, message: &str) {
        say(&self.out, &format!("info string {message}"));
    }

    /// Runs one command; false to quit.
    fn execute(&mut self, command: &str, rest: &[&str]) -> bool {
        match command {
            "uci" => self.identify(Protocol::Uci),
            "ucci" => self.identify(Protocol::Ucci),
            "isready" => say(&self.out, "readyok"),
            "quit" => {
                self.finish_search(true);
                if self.protocol == Protocol::Ucci {
                    say(&self.out, "bye");
                }
                return false;
            }
            "stop" => self.finish_search(true),
            "ponderhit" => {}
            "ucinewgame" => {
                self.finish_search(true);
                self.shared.new_game();
            }
            "setoption" => {
                self.finish_search(true);
                if let Err(message) = self.set_option(rest) {
                    self.info(&message);
                }
            }
            "position" if self.xiongqi.is_some() => {
                self.finish_search(true);
                match parse_xiongqi_position(rest) {
                    Ok(setup) => self.xiongqi = Some(setup),
                    Err(message) => self.info(&message),
                }
            }
            "position" => {
                self.finish_search(true);
                match parse_position(rest) {
                    Ok((start, moves)) => {
                        self.start = start;
                        self.moves = moves;
                    }
                    Err(message) => self.info(&message),
                }
            }
            // UCCI: the moves banned from the next search, read against its position.
            "banmoves" => self.banned_next = rest.iter().map(|word| word.to_string()).collect(),
            "go" => {
                self.finish_search(true);
                if let Err(message) = self.go(rest) {
                    self.info(&message);
                }
            }
            // Stockfish's `bench` in the command loop: the bench with the options set
            // (the net above all), so that a test's signature is its net's too. One
            // thread, whatever Threads says: a signature must not vary from run to run.
            "bench" => {
                self.finish_search(true);
                let depth = match rest.first().map(|word| word.parse::<i32>()) {
                    None => Ok(crate::bench::DEFAULT_DEPTH),
                    Some(Ok(depth)) if (1..=64).contains(&depth) => Ok(depth),
                    Some(_) => Err(format!("bench depth '{}' is not 1 to 64", rest[0])),
                };
                match depth {
                    Ok(depth) => {
                        let options = SearchOptions { threads: 1, ..self.options.clone() };
                        say(&self.out, &crate::bench::run_with(depth, &options).report());
                    }
                    Err(message) => self.info(&message),
                }
            }
            "d" => match &self.xiongqi {
                Some(setup) => self.info(&format!("fen {}", setup.game().position())),
                None => self.info(&format!("fen {}", self.current_position())),
            },
            other => self.info(&format!("unknown command '{other}'")),
        }
        true
    }

    fn identify(&mut self, protocol: Protocol) {
        self.protocol = protocol;
        let version = env!("CARGO_PKG_VERSION");
        let lines: Vec<String> = match protocol {
            Protocol::Uci => vec![
                format!("id name xq-engine {version}"),
                "id author the xq-cluster developers".to_owned(),
                format!("option name Hash type spin default {DEFAULT_HASH_MB} min 1 max {MAX_HASH_MB}"),
                format!("option name Threads type spin default 1 min 1 max {MAX_THREADS}"),
                "option name MultiPV type spin default 1 min 1 max 128".to_owned(),
                "option name Move Overhead type spin default 10 min 0 max 5000".to_owned(),
                "option name EvalFile type string default <embedded>".to_owned(),
                "option name UseNNUE type check default true".to_owned(),
                "option name UCI_Variant type combo default xiangqi var xiangqi var xiongqi".to_owned(),
                "option name Repetition Rule type combo default wxf var wxf var asian var cxq var computer".to_owned(),
                "option name Depth Limit type spin default 0 min 0 max 127".to_owned(),
                "option name Clear Hash type button".to_owned(),
            ]
            .into_iter()
            .chain(self.tunable_options().map(Tunable::uci_option))
            .chain(["uciok".to_owned()])
            .collect(),
            Protocol::Ucci => vec![
                format!("id name xq-engine {version}"),
                "id author the xq-cluster developers".to_owned(),
                format!("option hashsize type spin min 1 max {MAX_HASH_MB} default {DEFAULT_HASH_MB}"),
                format!("option threads type spin min 1 max {MAX_THREADS} default 1"),
                "ucciok".to_owned(),
            ],
        };
        for line in lines {
            say(&self.out, &line);
        }
    }

    /// The search's numbers this session declares as options.
    fn tunable_options(&self) -> impl Iterator<Item = &'static Tunable> {
        let declared: &[Tunable] = if self.option_set == OptionSet::Tuning { TUNABLES } else { &[] };
        declared.iter()
    }

    /// `limits` under the Depth Limit option.
    fn capped(&self, mut limits: Limits) -> Limits {
        if self.depth_limit > 0 {
            limits.depth = Some(limits.depth.map_or(self.depth_limit, |d| d.min(self.depth_limit)));
        }
        limits
    }

    fn set_option(&mut self, words: &[&str]) -> Result<(), String> {
        let (name, value) = match words {
            ["name", rest @ ..] => {
                let text = rest.join(" ");
                match text.split_once(" value ") {
                    Some((name, value)) => (name.trim().to_owned(), value.trim().to_owned()),
                    None => (text.trim().to_owned(), String::new()),
                }
            }
            // UCCI: setoption NAME VALUE
            [name, value @ ..] => ((*name).to_owned(), value.join(" ")),
            [] => return Err("setoption needs an option name".to_owned()),
        };
        let number = |min: usize, max: usize| -> Result<usize, String> {
            value
                .parse::<usize>()
                .ok()
                .filter(|v| (min..=max).contains(v))
                .ok_or_else(|| format!("option {name}: '{value}' is not a number in {min}..={max}"))
        };
        match name.to_ascii_lowercase().as_str() {
            "hash" | "hashsize" => {
                self.hash_mb = number(1, MAX_HASH_MB)?;
                self.shared = Arc::new(Shared::new(self.hash_mb));
            }
            "threads" => self.options.threads = number(1, MAX_THREADS)?,
            "multipv" => self.options.multipv = number(1, 128)?,
            "move overhead" => self.options.move_overhead = Duration::from_millis(number(0, 5000)? as u64),
            "evalfile" => {
                if value.is_empty() || value == "<embedded>" {
                    self.net = embedded();
                } else {
                    let network = Network::load(std::path::Path::new(&value)).map_err(|error| {
                        format!("EvalFile '{value}': {error}; the evaluation stays the net loaded before")
                    })?;
                    say(
                        &self.out,
                        &format!(
                            "info string NNUE net '{value}' loaded ({}), kernels {}",
                            network.description(),
                            network.simd().name()
                        ),
                    );
                    self.net = Arc::new(network);
                }
            }
            "usennue" => {
                self.use_nnue = match value.as_str() {
                    "true" => true,
                    "false" => false,
                    _ => return Err(format!("option UseNNUE: '{value}' is not true or false")),
                }
            }
            "uci_variant" => match value.as_str() {
                "xiangqi" => self.xiongqi = None,
                "xiongqi" => {
                    self.xiongqi = Some(XiongqiSetup { start: xiongqi::Position::startpos(), moves: Vec::new() })
                }
                _ => return Err(format!("variant '{value}' is not supported: xiangqi or xiongqi")),
            },
            "repetition rule" => self.options.rules = value.parse::<RuleSet>().map_err(|e| e.to_string())?,
            "clear hash" => self.shared.tt.clear(),
            "depth limit" => self.depth_limit = number(0, 127)? as i32,
            _ if self.tunable_options().any(|t| t.name.eq_ignore_ascii_case(&name)) => {
                self.options.params.set(&name, &value).expect("a tunable's name")?
            }
            _ => return Err(format!("unknown option '{name}'")),
        }
        self.options.network = self.use_nnue.then(|| self.net.clone());
        Ok(())
    }

    fn current_position(&self) -> Position {
        let mut position = self.start.clone();
        for &mv in &self.moves {
            position.make_move(mv);
        }
        position
    }

    fn go(&mut self, words: &[&str]) -> Result<(), String> {
        if let Some(setup) = self.xiongqi.clone() {
            return self.go_xiongqi(&setup, words);
        }
        if let ["perft", depth] = words {
            let depth: u32 = depth.parse().map_err(|_| format!("perft depth '{depth}' is not a whole number"))?;
            let mut position = self.current_position();
            let split = perft::divide(&mut position, depth);
            for (mv, count) in &split {
                say(&self.out, &format!("{mv}: {count}"));
            }
            say(&self.out, "");
            say(&self.out, &format!("Nodes searched: {}", split.iter().map(|(_, n)| n).sum::<u64>()));
            return Ok(());
        }
        let position = self.current_position();
        let banned = std::mem::take(&mut self.banned_next);
        let mut limits = parse_go(words, Some(&position), self.protocol, position.side_to_move())?;
        for text in &banned {
            limits.banned.push(parse_uci(&position, text, Dialect::ZeroBased).map_err(|e| format!("banmoves: {e}"))?);
        }
        let limits = self.capped(limits);
        let shared = Arc::clone(&self.shared);
        let out = Arc::clone(&self.out);
        let (start, moves, options) = (self.start.clone(), self.moves.clone(), self.options.clone());
        let protocol = self.protocol;
        let infinite = limits.infinite;
        let handle = std::thread::spawn(move || {
            let result = search(&shared, &start, &moves, &limits, &options, |info| {
                say(&out, &info_line(info, protocol));
            });
            let line = match (result.best, result.ponder, protocol) {
                (None, _, Protocol::Uci) => "bestmove (none)".to_owned(),
                (None, _, Protocol::Ucci) => "nobestmove".to_owned(),
                (Some(best), Some(ponder), _) => format!("bestmove {best} ponder {ponder}"),
                (Some(best), None, _) => format!("bestmove {best}"),
            };
            say(&out, &line);
        });
        self.search = Some((handle, infinite));
        Ok(())
    }

    fn go_xiongqi(&mut self, setup: &XiongqiSetup, words: &[&str]) -> Result<(), String> {
        let mut game = setup.game();
        if let ["perft", depth] = words {
            let depth: u32 = depth.parse().map_err(|_| format!("perft depth '{depth}' is not a whole number"))?;
            let mut total = 0;
            for mv in game.legal_moves() {
                game.play(mv).expect("a legal move");
                let count = game.perft(depth.saturating_sub(1));
                game.undo();
                say(&self.out, &format!("{mv}: {count}"));
                total += count;
            }
            say(&self.out, "");
            say(&self.out, &format!("Nodes searched: {total}"));
            return Ok(());
        }
        let limits = self.capped(parse_go(words, None, self.protocol, game.position().side_to_move())?);
        let out = Arc::clone(&self.out);
        let stop = Arc::clone(&self.xiongqi_stop);
        stop.store(false, std::sync::atomic::Ordering::Relaxed);
        let overhead = self.options.move_overhead;
        let infinite = limits.infinite;
        let handle = std::thread::spawn(move || {
            let started = std::time::Instant::now();
            let result = xiongqi::search::search(&mut game, &limits, &stop, overhead);
            let millis = started.elapsed().as_millis().max(1);
            if let Some(best) = result.best {
                say(
                    &out,
                    &format!(
                        "info depth {} score cp {} nodes {} nps {} time {millis} pv {best}",
                        result.depth,
                        result.score,
                        result.nodes,
                        result.nodes as u128 * 1000 / millis
                    ),
                );
            }
            say(&out, &result.best.map_or("bestmove (none)".to_owned(), |mv| format!("bestmove {mv}")));
        });
        self.search = Some((handle, infinite));
        Ok(())
    }

    /// Waits for the running search to report its move; with `interrupt`, or when it
    /// would run until stopped, tells it to stop first.
    fn finish_search(&mut self, interrupt: bool) {
        if let Some((handle, infinite)) = self.search.take() {
            if interrupt || infinite {
                self.shared.stop();
                self.xiongqi_stop.store(true, std::sync::atomic::Ordering::Relaxed);
            }
            // A search thread that panicked has nothing more to say.
            let _ = handle.join();
        }
    }
}

fn info_line(info: &SearchInfo, protocol: Protocol) -> String {
    let score = match (info.score, protocol) {
        (Score::Centipawns(cp), Protocol::Uci) => format!("cp {cp}"),
        (Score::Mate(moves), Protocol::Uci) => format!("mate {moves}"),
        (Score::Centipawns(cp), Protocol::Ucci) => cp.to_string(),
        (Score::Mate(moves), Protocol::Ucci) => (if moves > 0 { 30_000 - moves } else { -30_000 - moves }).to_string(),
    };
    let millis = info.elapsed.as_millis().max(1);
    let pv: Vec<String> = info.pv.iter().map(Move::to_string).collect();
    match protocol {
        Protocol::Uci => format!(
            "info depth {} seldepth {} multipv {} score {score} nodes {} nps {} hashfull {} time {millis} pv {}",
            info.depth,
            info.seldepth,
            info.multipv,
            info.nodes,
            info.nodes as u128 * 1000 / millis,
            info.hashfull,
            pv.join(" ")
        ),
        Protocol::Ucci => {
            format!("info depth {} score {score} time {millis} nodes {} pv {}", info.depth, info.nodes, pv.join(" "))
        }
    }
}

/// `position startpos|fen <fen> [moves m1 m2 ...]`
fn parse_position(words: &[&str]) -> Result<(Position, Vec<Move>), String> {
    let moves_at = words.iter().position(|&w| w == "moves").unwrap_or(words.len());
    let (setup, moves) = words.split_at(moves_at);
    let start = match setup {
        ["startpos"] => Position::startpos(),
        ["fen", text @ ..] if !text.is_empty() => {
            fen::parse_composed(&text.join(" ")).map_err(|error| format!("invalid FEN: {error}"))?.0
        }
        _ => {
            return Err("position expects 'startpos' or 'fen <fen>', then optionally 'moves ...'".to_owned());
        }
    };
    let mut position = start.clone();
    let mut played = Vec::new();
    for (index, text) in moves.iter().skip(1).enumerate() {
        let mv = parse_uci(&position, text, Dialect::ZeroBased)
            .map_err(|error| format!("move {} of the list: {error}", index + 1))?;
        position.make_move(mv);
        played.push(mv);
    }
    Ok((start, played))
}

/// The `go` arguments of either protocol, for `side` to move; `banmoves` is read
/// against the Xiangqi `position` and refused without one.
fn parse_go(
    words: &[&str],
    position: Option<&Position>,
    protocol: Protocol,
    side: crate::color::Color,
) -> Result<Limits, String> {
    let mut limits = Limits::default();
    let red = side == crate::color::Color::Red;
    let mut index = 0;
    let value = |index: usize| -> Result<u64, String> {
        let word = words.get(index + 1).ok_or_else(|| format!("go {}: a number must follow", words[index]))?;
        word.parse::<i64>()
            .map(|v| v.max(0) as u64)
            .map_err(|_| format!("go {}: '{word}' is not a number", words[index]))
    };
    while index < words.len() {
        let ms = |v: u64| Duration::from_millis(v);
        match (words[index], protocol) {
            ("infinite", _) => limits.infinite = true,
            ("ponder", _) => {}
            ("banmoves", _) => {
                let position = position.ok_or("banmoves is supported for xiangqi only")?;
                for text in &words[index + 1..] {
                    let mv = parse_uci(position, text, Dialect::ZeroBased).map_err(|e| format!("banmoves: {e}"))?;
                    limits.banned.push(mv);
                }
                break;
            }
            // UCI: only these root moves; the list runs to the end of the line, as
            // Stockfish and its kin read it. Kept as the others banned.
            ("searchmoves", _) => {
                let position = position.ok_or("searchmoves is supported for xiangqi only")?;
                let mut allowed = Vec::new();
                for text in &words[index + 1..] {
                    let mv = parse_uci(position, text, Dialect::ZeroBased).map_err(|e| format!("searchmoves: {e}"))?;
                    allowed.push(mv);
                }
                let legal = crate::xiangqi::movegen::legal_moves(position);
                limits.banned.extend(legal.iter().copied().filter(|mv| !allowed.contains(mv)));
                break;
            }
            ("draw", Protocol::Ucci) => {}
            (key, _) => {
                let v = value(index)?;
                match (key, protocol) {
                    ("wtime", Protocol::Uci) if red => limits.time = Some(ms(v)),
                    ("btime", Protocol::Uci) if !red => limits.time = Some(ms(v)),
                    ("winc", Protocol::Uci) if red => limits.increment = ms(v),
                    ("binc", Protocol::Uci) if !red => limits.increment = ms(v),
                    ("wtime" | "btime" | "winc" | "binc", Protocol::Uci) => {}
                    ("time", Protocol::Ucci) => limits.time = Some(ms(v)),
                    ("increment", Protocol::Ucci) => limits.increment = ms(v),
                    ("opptime" | "oppincrement" | "oppmovestogo", Protocol::Ucci) => {}
                    ("movestogo", _) => limits.moves_to_go = Some(v.max(1) as u32),
                    ("movetime", _) => limits.movetime = Some(ms(v)),
                    ("depth", _) => limits.depth = Some(v.clamp(1, 127) as i32),
                    ("nodes", _) => limits.nodes = Some(v.max(1)),
                    ("mate", _) => limits.mate = Some(v.max(1) as u32),
                    _ => return Err(format!("go: unknown argument '{key}'")),
                }
                index += 1;
            }
        }
        index += 1;
    }
    Ok(limits)
}

/// `position startpos|fen <fen> [moves m1 m2 ...]` for Xiongqi.
fn parse_xiongqi_position(words: &[&str]) -> Result<XiongqiSetup, String> {
    let moves_at = words.iter().position(|&w| w == "moves").unwrap_or(words.len());
    let (setup, moves) = words.split_at(moves_at);
    let start = match setup {
        ["startpos"] => xiongqi::Position::startpos(),
        ["fen", text @ ..] if !text.is_empty() => {
            xiongqi::fen::parse(&text.join(" ")).map_err(|error| format!("invalid FEN: {error}"))?
        }
        _ => return Err("position expects 'startpos' or 'fen <fen>', then optionally 'moves ...'".to_owned()),
    };
    let mut game = xiongqi::Game::new(start.clone());
    let mut played = Vec::new();
    for (index, text) in moves.iter().skip(1).enumerate() {
        played.push(game.play_text(text).map_err(|error| format!("move {} of the list: {error}", index + 1))?);
    }
    Ok(XiongqiSetup { start, moves: played })
}
